"""What one changed line costs the event loop, from the wake-up to the composited frame, two ways.

    python benchmarks/bench_repaint.py [--wakes 300] [--gap-ms 20] [--rounds 3]

A thread wakes a headless App ``--wakes`` times, ``--gap-ms`` apart, as the sampler wakes the live screen
(``call_from_thread_soon``); each wake-up changes one line of a 12-line :class:`LineWidget` (``set_lines``), as a
power reading moving by a watt changes one line of a GPU panel. The line reaches the screen:

* ``textual``: through ``Widget.refresh`` (the widget's idle posts ``Update`` to the screen, whose idle resumes
  its update timer, whose task wakes to composite, sleeps a frame and wakes again): Textual's public path, what
  ``set_lines`` does outside a redraw;
* ``painting``: inside ``widgets/textual_private.py painting()``, as ``GpuscopeApp.refresh_view`` draws: marked
  on the screen and composited when the redraw ends, without messages or the timer.

Prints, for each, the CPU of the event loop's thread a wake-up (median of ``--rounds``), the loop iterations and
the frames composited a wake-up (each way must composite every change: one frame a wake-up). Without the private
paths (``ACTIVE`` false) both take Textual's path.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

from common import wake_args
from rich.text import Text
from textual.app import App, ComposeResult

from gpuscope.widgets.lines import LineWidget
from gpuscope.widgets.textual_private import ACTIVE, call_from_thread_soon, painting

ROWS = 12


class _Screenful(App[None]):
    def __init__(self, wakes: int, way: str):
        super().__init__()
        self.wanted = wakes
        self.way = way
        self.woken = 0
        self.done = asyncio.Event()

    def compose(self) -> ComposeResult:
        yield LineWidget()

    def lines(self, k: int) -> list[Text]:
        return [Text(f"PWR {k % 2 + 74:3d}/700 W" if y == 3 else f"line {y} stays as it is", style="bold" if y else "")
                for y in range(ROWS)]

    def redraw(self) -> None:
        self.woken += 1
        hold: contextlib.AbstractContextManager[None] = painting() if self.way == "painting" else contextlib.nullcontext()
        with hold:
            self.query_one(LineWidget).set_lines(self.lines(self.woken))
        if self.woken >= self.wanted:
            self.done.set()


def _counting(loop: asyncio.AbstractEventLoop, count: list[int]) -> Callable[[], None]:
    """Count the loop's iterations (a wrapped ``_run_once``); returns the undo."""
    kept = loop._run_once  # type: ignore[attr-defined]

    def run_once() -> None:
        count[0] += 1
        kept()

    loop._run_once = run_once  # type: ignore[attr-defined]
    return lambda: setattr(loop, "_run_once", kept)


async def _round(way: str, wakes: int, gap_s: float) -> tuple[float, float, float]:
    """(µs of the loop's thread, loop iterations, frames) a wake-up."""
    app = _Screenful(wakes, way)
    async with app.run_test(size=(120, 40)):
        await asyncio.sleep(0.2)
        screen: Any = app.screen
        frames = [0]
        composite = screen._compositor_refresh

        def counted() -> None:
            frames[0] += 1
            composite()

        screen._compositor_refresh = counted  # the frames composited (the instance's, this benchmark only)
        loop = asyncio.get_running_loop()
        context = contextvars.copy_context()
        iterations = [0]

        def waker() -> None:
            for _ in range(wakes):
                if not call_from_thread_soon(app, loop, context, app.redraw):
                    app.call_from_thread(app.redraw)
                time.sleep(gap_s)

        undo = _counting(loop, iterations)
        c0 = time.thread_time()
        thread = threading.Thread(target=waker)
        thread.start()
        await app.done.wait()
        await asyncio.sleep(0.1)  # the last frame (the timer's, on Textual's path): alike for both ways
        loop_cpu = time.thread_time() - c0
        undo()
        thread.join()
    return 1e6 * loop_cpu / wakes, iterations[0] / wakes, frames[0] / wakes


def main(argv: list[str] | None = None) -> int:
    args = wake_args(argv)
    print(f"{args.wakes} wake-ups {args.gap_ms:g} ms apart, one changed line each, median of {args.rounds} rounds"
          + ("" if ACTIVE else " (private paths off: both take Textual's)"))
    print(f"{'way':<10} {'loop µs/wake':>13} {'iterations/wake':>16} {'frames/wake':>12}")
    for way in ("textual", "painting"):
        got = [asyncio.run(_round(way, args.wakes, args.gap_ms / 1000)) for _ in range(args.rounds)]
        print(f"{way:<10} {statistics.median(g[0] for g in got):>13.1f} {statistics.median(g[1] for g in got):>16.2f}"
              f" {statistics.median(g[2] for g in got):>12.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
