"""What recording the processes costs in file size: one hour of 8 GPUs at 1 Hz, with and without them.

    python benchmarks/bench_process_bytes.py [--hours 1]

Frames come from the simulated `h200-nvswitch-8` scenario (9 processes: a vLLM worker per GPU and a
notebook on GPU0; the data is simulated), 300 distinct frames repeated with 1 s spacing, written by the
real Recorder. Three files: processes removed; processes with only the fields older versions wrote
(pid, memory, name); processes as now recorded (plus user, command, SM %, memory %). Prints KB per
GPU-hour for each (the recording target is ≤ 250 KB per GPU-hour, docs/performance.md).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import write_json  # noqa: E402

from gpuscope.core.model import Frame, ProcessInfo  # noqa: E402


def _strip(f: Frame, how: str) -> Frame:
    if how == "all fields":
        return f
    gpus = []
    for g in f.gpus:
        procs = g.processes
        if how == "none":
            procs = None
        elif procs is not None:
            procs = tuple(ProcessInfo(pid=p.pid, used_memory_bytes=p.used_memory_bytes, name=p.name) for p in procs)
        gpus.append(dataclasses.replace(g, processes=procs))
    return dataclasses.replace(f, gpus=tuple(gpus))


def size(hours: float, how: str, directory: str) -> int:
    from gpuscope.outputs.recorder import Recorder
    from gpuscope.sources.live import open_source

    src = open_source("h200-nvswitch-8", virtual_at=0.0, pcie_block_s=0.0, wall0=1.8e9)
    base = []
    for k in range(300):
        src.nvml.clock.now = k
        base.append(_strip(src.sample(), how))
    path = os.path.join(directory, how.replace(" ", "-") + ".jsonl.gz")
    rec = Recorder(path, src.inventory, command=["bench_process_bytes"], origin={"note": "SIMULATED benchmark data"},
                   interval_s=1.0, fsync=False)
    for k in range(int(hours * 3600)):
        f = base[k % len(base)]
        rec.write(dataclasses.replace(f, t=1.8e9 + k), wait=True)  # bulk: wait for the writer, drop nothing
    rec.close()
    assert rec.dropped == 0 and rec.error is None, (rec.dropped, rec.error)
    return os.path.getsize(path)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hours", type=float, default=1.0)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    rows = {}
    with tempfile.TemporaryDirectory() as d:
        for how in ("none", "old fields", "all fields"):
            rows[how] = size(a.hours, how, d)
    gpu_hours = 8 * a.hours
    print(f"{'processes recorded':<22} {'file KB':>9} {'KB per GPU-hour':>16}")
    for how, n in rows.items():
        print(f"{how:<22} {n / 1e3:9.1f} {n / 1e3 / gpu_hours:16.1f}")
    write_json(a.json, {k: v for k, v in rows.items()})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
