"""A real seek in replay: key press → seek done on the replay thread → screen redrawn, on a 24 h × 8-GPU
recording, at each history window (1 min, 10 min, 1 h); and how long the UI thread is blocked.

    python benchmarks/bench_seek.py [--hours 24] [--file rec.jsonl.gz] [--json out.json]

The recording is made with bench_recording.make (simulated h200-nvswitch-8 frames, labelled so)
unless --file is given. The replay is paused and left to build its history index (timed, with the
UI's longest stall meanwhile); then each seek is timed from the → key press (Pilot) until the screen
has been painted (``call_after_refresh``) after a redraw showing the seek's result; 10 seeks from
random places per window, p50 / max, with nothing else on the event loop. "UI blocked" is the longest
the event loop went without running during 10 more seeks (a 5 ms heartbeat's worst gap; it includes
the redraw itself): a separate pass, because a timer waking the loop every 5 ms makes the UI and the
replay thread trade the GIL and slows the seek it measures. Target: ≤ 50 ms at every window.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import resource
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import load_average, write_json  # noqa: E402


async def one_window(rec: Any, label: str, window: float, seeks: int, shared: dict[str, Any]) -> dict[str, Any]:
    """Seeks at one history window: (p50, max) key → redrawn screen, and the UI's longest stall. The
    first window also times the history index's build (paused, in the replay thread's idle time) and
    the UI's longest stall meanwhile; later windows reuse that index (``shared``)."""
    from gpuscope.core.session import Session
    from gpuscope.tui.app import GpuscopeApp
    from gpuscope.tui.feeders import ReplayFeeder

    session = Session(rec.inventory, interval_s=1.0, history_s=3600.0)
    app = GpuscopeApp(session, None, label="REPLAY", interval_s=1.0, window=label)
    app.feeder = ReplayFeeder(rec, session, app.notify_update, window_s=lambda: app.window_s)
    if "index" in shared:
        app.feeder.history_index = shared["index"]
    redraws: list[tuple[int, float]] = []  # (feeder's seek count the redraw showed, when it was painted)
    painted = asyncio.Event()
    orig = app.refresh_view

    def spy(force: bool = False, _orig=orig) -> None:
        gen = app.feeder.seeks if app.feeder is not None else 0
        _orig(force)

        def done() -> None:
            redraws.append((gen, time.perf_counter()))
            painted.set()

        app.call_after_refresh(done)  # once the screen is painted

    app.refresh_view = spy  # type: ignore[method-assign]
    times: list[float] = []
    gaps: list[float] = []
    random.seed(1)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        f = app.feeder
        f.toggle()  # paused: only the seeks move it
        await pilot.pause()
        beat = [time.perf_counter()]
        worst = [0.0]

        async def heartbeat() -> None:
            while True:
                await asyncio.sleep(0.005)
                now = time.perf_counter()
                worst[0] = max(worst[0], now - beat[0])
                beat[0] = now

        build: dict[str, Any] = {}
        if "index" not in shared:
            ix = f.history_index
            assert ix is not None
            hb = asyncio.create_task(heartbeat())
            worst[0], beat[0], b0 = 0.0, time.perf_counter(), time.perf_counter()
            while not ix.done:
                await asyncio.sleep(0.05)
            build = {"index_build_s": time.perf_counter() - b0, "index_mb": ix.nbytes / 1e6,
                     "ui_blocked_during_build_ms": 1000 * worst[0]}
            shared["index"] = ix
            hb.cancel()
        # two passes: key → painted timed with nothing else on the event loop (a timer waking the loop
        # every few ms makes the two threads trade the GIL and slows both), then the stalls, heartbeat on
        for stall_pass in (False, True):
            hb = asyncio.create_task(heartbeat()) if stall_pass else None
            for _ in range(seeks):
                f._seek_to = None
                start_at = rec.times[0] + window + random.random() * (rec.duration_s - window - 60)
                f.request_seek(start_at)  # place it (not timed), let its redraw finish, then time a → key press
                await pilot.pause()
                await asyncio.sleep(0.3)
                n0 = f.seeks
                worst[0] = 0.0
                beat[0] = time.perf_counter()
                t0 = time.perf_counter()
                await pilot.press("right")
                while not any(g > n0 for g, _t in redraws):
                    painted.clear()
                    await asyncio.wait_for(painted.wait(), 30)
                if stall_pass:
                    gaps.append(1000 * worst[0])
                else:
                    times.append(1000 * (min(t for g, t in redraws if g > n0) - t0))
            if hb is not None:
                hb.cancel()
    times.sort()
    return {"window": label, "seek_ms_p50": times[len(times) // 2], "seek_ms_max": times[-1],
            "ui_blocked_ms_max": max(gaps), **build}


async def measure(path: str, seeks: int) -> list[dict[str, Any]]:
    from gpuscope.sources.recording import open_recording

    t0 = time.perf_counter()
    rec = open_recording(path)
    opened = time.perf_counter() - t0
    shared: dict[str, Any] = {}
    rows = [await one_window(rec, label, window, seeks, shared)
            for label, window in (("1m", 60.0), ("10m", 600.0), ("1h", 3600.0))]
    rows[0]["open_s"] = opened
    rows[0]["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hours", type=float, default=24)
    ap.add_argument("--file", help="an existing recording (default: make a simulated one)")
    ap.add_argument("--seeks", type=int, default=10)
    ap.add_argument("--json", metavar="FILE")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as d:
        path = a.file
        if not path:
            from bench_recording import make

            path = os.path.join(d, "bench.jsonl.gz")
            make(path, a.hours, 8)
        rows = asyncio.run(measure(path, a.seeks))
    print(f"{'window':<8} {'seek p50 ms':>12} {'seek max ms':>12} {'UI blocked max ms':>18}   target ≤ 50 ms")
    for r in rows:
        print(f"{r['window']:<8} {r['seek_ms_p50']:>12.1f} {r['seek_ms_max']:>12.1f} {r['ui_blocked_ms_max']:>18.1f}")
    b = rows[0]
    print(f"open_recording {b['open_s']:.2f} s; peak RSS of this process (file, index, app) {b['peak_rss_mb']:.0f} MB")
    print(f"history index: built in {b['index_build_s']:.1f} s after open (paused, replay thread's idle time), "
          f"{b['index_mb']:.1f} MB; UI blocked at most {b['ui_blocked_during_build_ms']:.1f} ms meanwhile")
    print(f"load average: {load_average()}")
    write_json(a.json, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
