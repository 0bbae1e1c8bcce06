"""When the main screen redraws: the dirty flag, the redraw throttle and the graphs' cadence.

No Textual here: the App asks and does what it is told (tests/tui/test_redraw.py drives it with a fake clock).
Feeder threads mark the view dirty (:meth:`RedrawScheduler.mark_dirty`: one wake-up pending at most, so
frames never queue up on the event loop); the App's handler asks how long to hold the redraw back
(:meth:`RedrawScheduler.hold_s`: at most ``1 / min_redraw_s`` redraws a second, whatever the sampling
rate, except that the answer to a seek is never held back); each redraw starts with
:meth:`RedrawScheduler.start`, which says whether the graphs are drawn this time (about once a second:
the graphs are the costly part of a refresh, docs/performance.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable

MIN_REDRAW_S = 0.25  # at most 4 redraws a second, whatever the sampling rate
GRAPH_S = 1.0  # graphs are redrawn about once a second


class RedrawScheduler:
    """The redraw state of one screen: is a wake-up pending, when was the last redraw and the last graph
    redraw, which seek the screen last showed. Times are ``clock()`` seconds (monotonic)."""

    def __init__(self, min_redraw_s: float = MIN_REDRAW_S, graph_s: float = GRAPH_S,
                 clock: Callable[[], float] = time.monotonic):
        self.min_redraw_s = min_redraw_s
        self.graph_s = graph_s
        self.clock = clock
        self.dirty = False  # new data since the last redraw, a wake-up posted for it
        self.last_redraw = 0.0
        self.last_graph = 0.0
        self.seek_gen = 0  # the feeder's seek count at the last redraw: a new seek redraws the graphs

    def mark_dirty(self) -> bool:
        """New data (from any thread): True when the caller must wake the UI, False when a wake-up is
        already pending. A race between two feeder threads can post a second wake-up, never lose one."""
        if self.dirty:
            return False
        self.dirty = True
        return True

    def hold_s(self, seeks: int) -> float:
        """Seconds to hold the pending redraw back (0: redraw now): what is left of ``min_redraw_s`` since
        the last redraw, or 0 when the feeder has done a seek (``seeks``: its count) the screen has not
        shown yet."""
        if seeks != self.seek_gen:
            return 0.0
        return max(0.0, self.min_redraw_s - (self.clock() - self.last_redraw))

    def start(self, force: bool, seeks: int) -> bool:
        """A redraw starts now: the view is clean again; True when it draws the graphs too (``force``, a
        new seek, or ``graph_s`` since they were last drawn)."""
        self.dirty = False
        now = self.clock()
        self.last_redraw = now
        graphs = force or now - self.last_graph >= self.graph_s or seeks != self.seek_gen
        self.seek_gen = seeks
        if graphs:
            self.last_graph = now
        return graphs

    def drop(self) -> None:
        """Forget the pending redraw (paused: the data waits until play)."""
        self.dirty = False
