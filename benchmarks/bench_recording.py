"""Recorder cost, file size, and opening / seeking a 24-hour 8-GPU recording.

    python benchmarks/bench_recording.py [--hours 24] [--gpus 8]

The recording is made here from the simulated `h200-nvswitch-8` scenario (labelled simulated in its
header): 300 distinct frames sampled on a virtual clock, written with 1 s spacing for the whole
duration. Targets (issue 5): ≤ 0.5 ms CPU per 8-GPU frame, ≤ 250 KB per GPU-hour at 1 Hz, open to a
first screen ≤ 2 s, seek ≤ 100 ms, ≤ 300 MB of memory.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import write_json  # noqa: E402


def make(path: str, hours: float, n_gpus: int) -> dict[str, float]:
    from gpuscope.sources.live import open_source
    from gpuscope.sources.recording import Recorder

    src = open_source("h200-nvswitch-8", virtual_at=0.0, pcie_block_s=0.0, wall0=1.8e9)
    base = []
    for k in range(300):
        src.nvml.clock.now = k
        f = src.sample()
        base.append(dataclasses.replace(f, gpus=f.gpus[:n_gpus]))
    inv = dataclasses.replace(src.inventory, devices=src.inventory.devices[:n_gpus])
    rec = Recorder(path, inv, command=["bench_recording"], origin={"note": "SIMULATED benchmark data"},
                   interval_s=1.0, fsync=False)
    n = int(hours * 3600)
    c0 = time.process_time()
    for i in range(n):
        f = base[i % len(base)]
        rec.write(dataclasses.replace(f, t=1.8e9 + i), wait=True)  # bulk: wait for the writer, drop nothing
    rec.close()
    assert rec.dropped == 0 and rec.error is None, (rec.dropped, rec.error)
    cpu = time.process_time() - c0  # every thread of the process: the caller's and the writer's
    size = os.path.getsize(path)
    return {"frames": n, "cpu_ms_per_frame": 1000 * cpu / n, "bytes": size,
            "kb_per_gpu_hour": size / 1000 / (n_gpus * hours)}


OPEN_CHILD = """
import json, resource, sys, time
t0 = time.perf_counter()
from gpuscope.sources.recording import open_recording
rec = open_recording(sys.argv[1])
first = rec.frame(0)
t_open = time.perf_counter() - t0
seeks = []
import random
random.seed(1)
for _ in range(20):
    t = rec.times[0] + random.random() * rec.duration_s
    s = time.perf_counter()
    f = rec.frame(rec.index_at(t))
    seeks.append(time.perf_counter() - s)
seeks.sort()
print(json.dumps({"open_s": t_open, "seek_ms_p50": 1000 * seeks[10], "seek_ms_max": 1000 * seeks[-1],
                  "frames": rec.n_frames, "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hours", type=float, default=24)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--json", metavar="FILE")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "bench.jsonl.gz")
        w = make(path, a.hours, a.gpus)
        out = subprocess.run([sys.executable, "-c", OPEN_CHILD, path], capture_output=True, text=True, check=True)
        r = json.loads(out.stdout)
    rows = [
        ("recorder CPU per 8-GPU frame", f"{w['cpu_ms_per_frame']:.3f} ms", "≤ 0.5 ms"),
        ("size per GPU-hour at 1 Hz", f"{w['kb_per_gpu_hour']:.0f} KB", "≤ 250 KB"),
        (f"{a.hours:g} h × {a.gpus} GPUs file", f"{w['bytes'] / 1e6:.1f} MB, {w['frames']} frames", ""),
        ("open to first frame", f"{r['open_s']:.2f} s", "≤ 2 s"),
        ("seek (random, p50 / max)", f"{r['seek_ms_p50']:.1f} / {r['seek_ms_max']:.1f} ms", "≤ 100 ms"),
        ("peak memory (open + seeks)", f"{r['max_rss_mb']:.0f} MB", "≤ 300 MB"),
    ]
    print(f"{'measure':<32} {'result':<28} target")
    for m, v, t in rows:
        print(f"{m:<32} {v:<28} {t}")
    write_json(a.json, {"write": w, "read": r})
    return 0


if __name__ == "__main__":
    sys.exit(main())
