"""Profile the live TUI's main thread and its sampler thread by CPU time, in this process, over a measured stretch.

    python benchmarks/thread_profile.py --after 70 --for 60 --out DIR -- [gpuscope's arguments]

Run under a terminal (benchmarks/ptyrun.py, tmux). Each thread gets its own ``cProfile`` whose clock is
``time.thread_time`` (CPU, not wall time: a wait in NVML or in the event loop costs nothing), switched on in that
thread ``--after`` seconds in and off ``--for`` seconds later. Writes ``DIR/main.prof`` and ``DIR/sampler.prof``
and, for each, ``.txt`` with the functions by own and by cumulative CPU; the ms of CPU per second of each thread
is measured without a profiler by thread_cpu.py. Python ≤ 3.11 only: from 3.12 ``cProfile`` runs on
``sys.monitoring``, which sees every thread's calls in one profile, and a second profiler is refused.
"""

from __future__ import annotations

import cProfile
import os
import pstats
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import measured_run_args  # noqa: E402


def _write(prof: cProfile.Profile, path: str, seconds: float) -> None:
    prof.dump_stats(path + ".prof")
    with open(path + ".txt", "w") as f:
        f.write(f"CPU profile over {seconds:.1f} s (time.thread_time)\n")
        stats = pstats.Stats(path + ".prof", stream=f).strip_dirs()
        stats.sort_stats("tottime").print_stats(45)
        stats.sort_stats("cumtime").print_stats(70)


def main() -> None:
    a, args = measured_run_args("--out", "the folder for the profiles")
    if sys.version_info >= (3, 12):  # cProfile moved to sys.monitoring: one profiler sees every thread's calls
        raise SystemExit("thread_profile: needs Python ≤ 3.11 (from 3.12 cProfile cannot profile one thread); "
                         "use py-spy there")
    os.makedirs(a.out, exist_ok=True)
    start, stop = time.monotonic() + a.after, time.monotonic() + a.after + a.for_s

    from gpuscope.tui import feeders
    from gpuscope.tui.app import GpuscopeApp

    main_prof = cProfile.Profile(time.thread_time)
    mount = GpuscopeApp.on_mount

    def on_mount(self: GpuscopeApp) -> None:
        mount(self)

        def on() -> None:
            main_prof.enable()
            self.set_timer(a.for_s, off)

        def off() -> None:
            main_prof.disable()
            _write(main_prof, os.path.join(a.out, "main"), a.for_s)
        self.set_timer(max(0.0, start - time.monotonic()), on)

    GpuscopeApp.on_mount = on_mount  # type: ignore[method-assign]
    sampler_prof = cProfile.Profile(time.thread_time)
    run = feeders.LiveFeeder.run

    def feeder_run(self: feeders.LiveFeeder) -> None:
        sample = self.source.sample
        state = {"on": False, "done": False}

        def profiled_sample():  # type: ignore[no-untyped-def]
            now = time.monotonic()
            if not state["on"] and not state["done"] and now >= start:
                state["on"] = True
                sampler_prof.enable()
            elif state["on"] and now >= stop:
                sampler_prof.disable()
                state["on"], state["done"] = False, True
                _write(sampler_prof, os.path.join(a.out, "sampler"), a.for_s)
            return sample()
        self.source.sample = profiled_sample
        run(self)

    feeders.LiveFeeder.run = feeder_run  # type: ignore[method-assign]
    from gpuscope.cli.main import main as gpuscope_main

    sys.argv = ["gpuscope", *args]
    raise SystemExit(gpuscope_main())


if __name__ == "__main__":
    main()
