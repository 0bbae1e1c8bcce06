"""Findings cost per tick: ``FindingsEngine.update`` (every rule over the window, then the life cycle).

    python benchmarks/bench_findings.py [--rounds 15] [--json FILE]

Feeds whole frame sequences to a fresh engine each round and prints the best time per frame (best-of,
so a loaded machine reads high less often): the bundled real recording (2× H200, load phases) and 200
simulated frames of each of h200-nvswitch-8, mixed-4, nccl-busy-not-computing and h100-two-tp4 (8 GPUs, two
serving groups: the case the group rules' per-tick budget, +10 % at most, is about), with their serving groups as the TUI has them.
A scenario may be a file (``--scenario PATH``, repeatable): to time an older checkout on a newer scenario.
"""

from __future__ import annotations

import argparse
import time
from importlib import resources

from common import write_json

from gpuscope.core.findings import FindingsEngine
from gpuscope.core.model import Frame, Inventory
from gpuscope.sources.groups import with_groups
from gpuscope.sources.live import open_source
from gpuscope.sources.recording import open_recording


def simulated(scenario: str, n: int) -> tuple[Inventory, list[Frame]]:
    raw = open_source(scenario, virtual_at=0.0, pcie_block_s=0.0, wall0=1_800_000_000.0)
    src = with_groups(raw, simulate=scenario)
    out = []
    for t in range(n):
        raw.nvml.clock.now = float(t)
        out.append(src.sample())
    return src.inventory, out


def recorded() -> tuple[Inventory, list[Frame]]:
    path = resources.files("gpuscope.recordings") / "h200-2gpu-load-phases.jsonl.gz"
    with resources.as_file(path) as p:
        rec = open_recording(p)
        return rec.inventory, list(rec.frames())


def per_frame_us(inv: Inventory, frames: list[Frame], rounds: int) -> tuple[float, int]:
    """Best time per frame over ``rounds`` passes (µs), and how many events one pass raised."""
    best, n_events = float("inf"), 0
    for _ in range(rounds):
        eng = FindingsEngine(inv)
        n_events = 0
        t0 = time.perf_counter()
        for f in frames:
            n_events += len(eng.update(f))
        best = min(best, (time.perf_counter() - t0) / len(frames))
    return best * 1e6, n_events


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--json")
    ap.add_argument("--scenario", action="append", help="scenarios (names or files) instead of the shipped four")
    a = ap.parse_args()
    cases = [("recording h200-2gpu-load-phases", *recorded())]
    names = a.scenario or ["h200-nvswitch-8", "mixed-4", "nccl-busy-not-computing", "h100-two-tp4"]
    cases += [(f"simulated {s.rsplit('/', 1)[-1]}", *simulated(s, 200)) for s in names]
    rows = []
    for name, inv, frames in cases:
        us, n_events = per_frame_us(inv, frames, a.rounds)
        rows.append({"case": name, "gpus": len(inv.devices), "frames": len(frames), "us_per_frame": round(us, 1),
                     "events": n_events})
        print(f"{name:42s} {len(inv.devices)} GPUs {len(frames):5d} frames  {us:8.1f} µs/frame  "
              f"({n_events} events)")
    write_json(a.json, rows)


if __name__ == "__main__":
    main()
