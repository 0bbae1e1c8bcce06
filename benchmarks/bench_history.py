"""History costs per frame and per graph redraw (the catalogue-driven rings and the graphs' folds), simulated GPUs.

    python benchmarks/bench_history.py [--rounds 60] [--json FILE]
    PYTHONPATH=/path/to/other/pkg-tree python benchmarks/bench_history.py   # another checkout (bench_tui_cost.package_tree)

Rows, each the best over ``rounds`` passes (best-of, so a loaded machine reads high less often):

- ``add``: History.add per frame (200 simulated frames into a 1 h ring);
- ``live``: the live screen's graphs per new sample: after a frame is added, ``History.cells`` of the panel
  metrics (util, SM active, power, SM clock, memory used, temperature, the PCIe rates) at a 60 s window,
  100 columns: folded in from the last sample (LiveCells);
- ``resample 60 s`` / ``resample 1 h``: the same cells away from the newest sample (a paused replay, a seek,
  a resize): every graphed metric's window resampled, 100 columns, the ring full (1 h of 1 s samples).

Simulated readings (scenarios h200-nvswitch-8 and mixed-4). The imports are timed too, and whether numpy
was loaded.
"""

from __future__ import annotations

import argparse
import sys
import time

from common import write_json

T0 = time.perf_counter()
from gpuscope.core.history import History  # noqa: E402

IMPORT_S = time.perf_counter() - T0
from gpuscope.sources.live import open_source  # noqa: E402

GRAPHED = ("util", "sm_active", "power", "sm_clock", "mem_used", "temp", "pcie_rx", "pcie_tx")


def frames_of(scenario: str, n: int) -> tuple[int, list]:
    src = open_source(scenario, virtual_at=0.0, pcie_block_s=0.0, wall0=1_800_000_000.0)
    out = []
    for t in range(n):
        src.nvml.clock.now = float(t)
        out.append(src.sample())
    return len(src.inventory.devices), out


def retimed(frames: list, n: int) -> list:
    """``n`` frames, 1 s apart, cycling through ``frames``."""
    from dataclasses import replace

    return [replace(frames[k % len(frames)], t=1_800_000_000.0 + k) for k in range(n)]


def best_of(rounds: int, fn) -> float:
    best = float("inf")
    for _ in range(rounds):
        best = min(best, fn())
    return best


def measure(scenario: str, rounds_add: int) -> dict:
    """The row of one scenario."""
    n_gpus, frames = frames_of(scenario, 200)

    def add() -> float:
        h = History(n_gpus, 3600)
        t0 = time.perf_counter()
        for f in frames:
            h.add(f)
        return (time.perf_counter() - t0) / len(frames)

    stream = retimed(frames, 3600 + 300)

    def live() -> float:  # 120 s of history first, then 60 samples each folded into the graphs
        h = History(n_gpus, 3616)
        for f in stream[:120]:
            h.add(f)
        for m in GRAPHED:
            h.cells(m, 60.0, 100)
        t0 = time.perf_counter()
        for f in stream[120:180]:
            h.add(f)
            for m in GRAPHED:
                h.cells(m, 60.0, 100)
        return (time.perf_counter() - t0) / 60

    full = History(n_gpus, 3616)
    for f in stream:
        full.add(f)

    def resample(seconds: float) -> float:
        now = stream[-1].t - 0.5  # not the newest sample: no live cells, every window resampled
        t0 = time.perf_counter()
        for m in GRAPHED:
            full.cells(m, seconds, 100, now)
        dt = time.perf_counter() - t0
        full._memo.clear()  # the next round computes again
        return dt

    rounds = max(3, rounds_add // 4)
    return {"scenario": scenario, "gpus": n_gpus, "add_us": round(best_of(rounds_add, add) * 1e6, 1),
            "live_us": round(best_of(rounds, live) * 1e6, 1),
            "resample_60s_ms": round(best_of(rounds, lambda: resample(60.0)) * 1e3, 2),
            "resample_1h_ms": round(best_of(rounds, lambda: resample(3600.0)) * 1e3, 2)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument("--json")
    a = ap.parse_args()
    rows = [measure(scenario, a.rounds) for scenario in ("h200-nvswitch-8", "mixed-4")]
    print(f"SIMULATED GPUs; best of {a.rounds} rounds; import core.history {IMPORT_S * 1e3:.0f} ms, "
          f"numpy loaded: {'numpy' in sys.modules}")
    print(f"{'scenario':<18}{'GPUs':>5}{'add µs/frame':>14}{'live µs/sample':>16}{'resample 60 s ms':>18}"
          f"{'resample 1 h ms':>17}")
    for r in rows:
        print(f"{r['scenario']:<18}{r['gpus']:>5}{r['add_us']:>14.1f}{r['live_us']:>16.1f}"
              f"{r['resample_60s_ms']:>18.2f}{r['resample_1h_ms']:>17.2f}")
    write_json(a.json, {"import_ms": round(IMPORT_S * 1e3), "numpy_loaded": "numpy" in sys.modules, "rows": rows})


if __name__ == "__main__":
    main()
