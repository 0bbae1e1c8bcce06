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
from collections.abc import Callable

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


def measured_stretch(after_s: float, for_s: float, switch: Callable[[bool], None] | None = None
                     ) -> tuple[float, dict[str, float]]:
    """Sleep ``after_s``, take every thread's clock, sleep ``for_s``, take them again: the seconds measured and
    each thread's ms of CPU a second (``switch(True)`` / ``switch(False)`` at the start and end, when given)."""
    time.sleep(after_s)
    a = clocks()
    if switch is not None:
        switch(True)
    t0 = time.monotonic()
    time.sleep(for_s)
    if switch is not None:
        switch(False)
    b = clocks()
    dt = time.monotonic() - t0
    return dt, {k: round((v - a.get(k, 0.0)) * 1000 / dt, 3) for k, v in b.items() if k != "thread_cpu"}


def measure(after_s: float, for_s: float, path: str) -> None:
    """Write :func:`measured_stretch`'s ms of CPU per second to ``path``."""
    dt, rows = measured_stretch(after_s, for_s)
    with open(path, "w") as f:
        json.dump({"seconds": round(dt, 2), "ms_per_s": rows}, f, indent=1)


def main() -> None:
    a, args = measured_run_args("--json", "where to write the ms of CPU a second of each thread")
    threading.Thread(target=measure, args=(a.after, a.for_s, a.json), name="thread_cpu", daemon=True).start()
    sys.argv = ["gpuscope", *args]
    runpy.run_module("gpuscope", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
