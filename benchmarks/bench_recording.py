"""Recorder cost, file size, and opening / seeking a 24-hour 8-GPU recording.

    python benchmarks/bench_recording.py [--hours 24] [--gpus 8] [--file REC] [--open-runs 3]

The recording is made here from the simulated `h200-nvswitch-8` scenario (labelled simulated in its
header): 300 distinct frames sampled on a virtual clock, written with 1 s spacing for the whole
duration. Targets (docs/performance.md, *Without GPUs*): ≤ 0.5 ms CPU per 8-GPU frame, ≤ 250 KB per
GPU-hour at 1 Hz, open to a first screen ≤ 2 s, seek ≤ 100 ms, ≤ 300 MB of memory.

"open" is also measured three ways, each in a fresh process, alternated ``--open-runs`` times (median):
``line reader`` is the reader before members were inflated ahead (every line split and checked on the
calling thread: ``read_recording(threads=0, fast=False)``), ``fast, 1 thread`` the fast path with no pool,
``fast, pool`` what ``open_recording`` does (threads by ``threads_for``). Wall clock, the main thread's
CPU (what is left on the critical path when cores are free) and the whole process's CPU; the load
average is printed, since on a shared machine the wall clock follows it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import load_average, write_json  # noqa: E402


def make(path: str, hours: float, n_gpus: int) -> dict[str, float]:
    from gpuscope.outputs.recorder import Recorder
    from gpuscope.sources.live import open_source

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


OPEN_WAYS_CHILD = """
import json, sys, time
from pathlib import Path
from gpuscope.sources.recording import read_recording
from gpuscope.sources.recording_scan import threads_for
p = Path(sys.argv[1]); way = sys.argv[2]
raw = p.read_bytes()
kw = {"line": dict(threads=0, fast=False), "fast1": dict(threads=0), "pool": dict()}[way]
t0, c0, m0 = time.perf_counter(), time.process_time(), time.thread_time()
rec = read_recording(p, raw, **kw)
rec.frame(0)
print(json.dumps({"wall_s": time.perf_counter() - t0, "main_cpu_s": time.thread_time() - m0,
                  "cpu_s": time.process_time() - c0, "frames": rec.n_frames, "threads": threads_for(len(raw))}))
"""
WAYS = (("line", "line reader (before)"), ("fast1", "fast, 1 thread"), ("pool", "fast, pool (open_recording)"))


def open_ways(path: str, runs: int) -> dict[str, dict[str, float]]:
    """Each way of opening ``path``, in a fresh process each time, alternated; medians."""
    got: dict[str, list[dict[str, float]]] = {w: [] for w, _ in WAYS}
    for _ in range(runs):
        for w, _label in WAYS:
            out = subprocess.run([sys.executable, "-c", OPEN_WAYS_CHILD, path, w], capture_output=True, text=True,
                                 check=True)
            got[w].append(json.loads(out.stdout))
    med = {}
    for w, rs in got.items():
        med[w] = {k: sorted(r[k] for r in rs)[len(rs) // 2] for k in ("wall_s", "main_cpu_s", "cpu_s")}
        med[w]["threads"] = rs[0]["threads"] if w == "pool" else 0
        med[w]["wall_s_all"] = [round(r["wall_s"], 2) for r in rs]  # type: ignore[assignment]
    return med


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hours", type=float, default=24)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--file", help="an existing recording to open (no write figures then)")
    ap.add_argument("--open-runs", type=int, default=3, help="runs of each way of opening (0: skip)")
    ap.add_argument("--json", metavar="FILE")
    a = ap.parse_args(argv)
    load0 = load_average()
    with tempfile.TemporaryDirectory() as d:
        path = a.file or os.path.join(d, "bench.jsonl.gz")
        if a.file:
            w = {"frames": 0, "cpu_ms_per_frame": math.nan, "bytes": os.path.getsize(path), "kb_per_gpu_hour": math.nan}
        else:
            w = make(path, a.hours, a.gpus)
        out = subprocess.run([sys.executable, "-c", OPEN_CHILD, path], capture_output=True, text=True, check=True)
        r = json.loads(out.stdout)
        w["frames"] = w["frames"] or r["frames"]
        ways = open_ways(path, a.open_runs) if a.open_runs > 0 else {}
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
    if ways:
        print(f"\nopen_recording, three ways ({a.open_runs} runs each, alternated, median; fresh process each)")
        print(f"{'way':<30} {'wall s':>8} {'main thread CPU s':>18} {'process CPU s':>14}   wall, every run")
        for key, label in WAYS:
            x = ways[key]
            extra = f" ({x['threads']:.0f} threads)" if key == "pool" else ""
            print(f"{label + extra:<30} {x['wall_s']:>8.2f} {x['main_cpu_s']:>18.2f} {x['cpu_s']:>14.2f}   "
                  f"{x['wall_s_all']}")
    print(f"load average: {load0} at the start, {load_average()} at the end ({os.cpu_count()} CPUs)")
    write_json(a.json, {"write": w, "read": r, "open_ways": ways})
    return 0


if __name__ == "__main__":
    sys.exit(main())
