"""Run gpuscope in this process and write each thread's CPU over a measured stretch (bench_peers_concurrent.py
--threads, bench_tui_cost.py's runs).

    python benchmarks/thread_cpu.py --after 70 --for 60 --json OUT.json -- [gpuscope's arguments]

A daemon thread waits ``--after`` seconds, reads every live thread's CPU clock (``pthread_getcpuclockid``:
nanoseconds, not the 10 ms ticks of /proc/PID/stat), waits ``--for`` seconds, reads them again and writes
milliseconds of CPU per second for each thread by name, and for the whole process (``process``: threads
that ended in between count there only). Linux and macOS; where the clocks are missing it writes the
process figure alone.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import measured_run_args  # noqa: E402


def clocks() -> dict[str, float]:
    out: dict[str, float] = {}
    for t in threading.enumerate():
        if t.ident is None:
            continue
        try:
            cpu = time.clock_gettime(time.pthread_getcpuclockid(t.ident))
        except (AttributeError, OSError):
            continue
        name = t.name
        while name in out:  # two threads of one name (a pool's workers): keep both
            name += "'"
        out[name] = cpu
    out["process"] = time.process_time()
    return out


def measure(after_s: float, for_s: float, path: str) -> None:
    """Sleep ``after_s``, take the clocks, sleep ``for_s``, write ms of CPU per second to ``path``."""
    time.sleep(after_s)
    a = clocks()
    t0 = time.monotonic()
    time.sleep(for_s)
    b = clocks()
    dt = time.monotonic() - t0
    rows = {k: round((v - a.get(k, 0.0)) * 1000 / dt, 3) for k, v in b.items() if k != "thread_cpu"}
    with open(path, "w") as f:
        json.dump({"seconds": round(dt, 2), "ms_per_s": rows}, f, indent=1)


def main() -> None:
    a, args = measured_run_args("--json", "where to write the ms of CPU a second of each thread")
    threading.Thread(target=measure, args=(a.after, a.for_s, a.json), name="thread_cpu", daemon=True).start()
    sys.argv = ["gpuscope", *args]
    runpy.run_module("gpuscope", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
