"""History.add cost per frame (the catalogue-driven ring buffers), simulated GPUs.

    python benchmarks/bench_history.py [--rounds 60] [--json FILE]

Prints the best time per frame over ``rounds`` passes of 200 simulated frames (best-of, so a loaded
machine reads high less often). Simulated readings (scenarios h200-nvswitch-8 and mixed-4).
"""

from __future__ import annotations

import argparse
import time

from common import write_json

from gpuscope.core.history import History
from gpuscope.sources.live import open_source


def frames_of(scenario: str, n: int) -> tuple[int, list]:
    src = open_source(scenario, virtual_at=0.0, pcie_block_s=0.0, wall0=1_800_000_000.0)
    out = []
    for t in range(n):
        src.nvml.clock.now = float(t)
        out.append(src.sample())
    return len(src.inventory.devices), out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument("--json")
    a = ap.parse_args()
    rows = []
    for scenario in ("h200-nvswitch-8", "mixed-4"):
        n_gpus, frames = frames_of(scenario, 200)
        best = float("inf")
        for _ in range(a.rounds):
            h = History(n_gpus, 3600)
            t0 = time.perf_counter()
            for f in frames:
                h.add(f)
            best = min(best, (time.perf_counter() - t0) / len(frames))
        rows.append({"scenario": scenario, "gpus": n_gpus, "add_us_per_frame": round(best * 1e6, 1)})
    print(f"{'scenario (simulated)':<22}{'GPUs':>5}{'History.add µs/frame':>22}")
    for r in rows:
        print(f"{r['scenario']:<22}{r['gpus']:>5}{r['add_us_per_frame']:>22.1f}")
    write_json(a.json, rows)


if __name__ == "__main__":
    main()
