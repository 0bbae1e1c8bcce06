"""What a feeder thread's wake-up of the screen costs: a Textual message against a loop callback.

    python benchmarks/bench_wake.py [--wakes 300] [--gap-ms 20] [--rounds 3]

A thread wakes a headless App ``--wakes`` times, ``--gap-ms`` apart (the sampler wakes the live screen once a
second; a shorter gap keeps the run short), as ``GpuscopeApp.notify_update`` does, two ways:

* ``message``: ``App.post_message`` of a message whose handler does the (empty) redraw, as before;
* ``callback``: ``widgets/textual_private.py`` ``call_from_thread_soon``, the loop callback it uses now.

Prints, for each, the CPU a wake-up costs the event loop's thread (the App's: queueing, dispatch) and the
waking thread (posting; its sleeps between wake-ups are in both columns alike), the median of ``--rounds``.
The redraw itself is not in it. The callback is only taken where the private paths apply (``ACTIVE``).
"""

from __future__ import annotations

import asyncio
import contextvars
import statistics
import threading
import time

from common import wake_args
from textual.app import App
from textual.message import Message

from gpuscope.widgets.textual_private import ACTIVE, call_from_thread_soon


class _Woken(App[None]):
    class Ready(Message):
        pass

    def __init__(self, wakes: int):
        super().__init__()
        self.wanted = wakes
        self.woken = 0
        self.done = asyncio.Event()

    def on__woken_ready(self, _msg: Ready) -> None:
        self.redraw()

    def redraw(self) -> None:
        self.woken += 1
        if self.woken >= self.wanted:
            self.done.set()


async def _round(way: str, wakes: int, gap_s: float) -> tuple[float, float]:
    """(µs of the loop's thread, µs of the waking thread) a wake-up."""
    app = _Woken(wakes)
    async with app.run_test():
        loop = asyncio.get_running_loop()
        context = contextvars.copy_context()
        waker_cpu = [0.0]

        def waker() -> None:
            c0 = time.thread_time()
            for _ in range(wakes):
                if way == "message" or not call_from_thread_soon(app, loop, context, app.redraw):
                    app.post_message(_Woken.Ready())
                time.sleep(gap_s)
            waker_cpu[0] = time.thread_time() - c0

        c0 = time.thread_time()
        thread = threading.Thread(target=waker)
        thread.start()
        await app.done.wait()
        loop_cpu = time.thread_time() - c0
        thread.join()
    return 1e6 * loop_cpu / wakes, 1e6 * waker_cpu[0] / wakes


def main(argv: list[str] | None = None) -> int:
    args = wake_args(argv)
    print(f"{args.wakes} wake-ups {args.gap_ms:g} ms apart, median of {args.rounds} rounds"
          + ("" if ACTIVE else " (private paths off: both ways post the message)"))
    print(f"{'way':<10} {'loop µs/wake':>13} {'waker µs/wake':>14}")
    for way in ("message", "callback"):
        got = [asyncio.run(_round(way, args.wakes, args.gap_ms / 1000)) for _ in range(args.rounds)]
        print(f"{way:<10} {statistics.median(g[0] for g in got):>13.1f} {statistics.median(g[1] for g in got):>14.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
