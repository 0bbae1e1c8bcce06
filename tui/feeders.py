"""Feeders put frames into a Session off the event loop: live sampling or replay of a recording.

Both call :meth:`Session.ingest`, so replay goes through the same path as live data. They never
queue frames for the UI: the UI redraws from the session's latest state when it is ready. Both are
:class:`~gpuscope.tui.workers.Worker` threads owned by the App; they take the session's one lock
(``session.lock``) for every change, as the App does for every read.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from gpuscope.core.model import Frame
from gpuscope.core.session import Session, run_ticks
from gpuscope.core.view import ReplayStatus
from gpuscope.sources.recording import Recording
from gpuscope.tui.workers import Worker

log = logging.getLogger(__name__)


class LiveFeeder(Worker):
    """Samples a source every ``interval_s`` on the ``gpuscope-sampler`` thread.

    A tick that raises (the source's ``sample()`` or the session's ``ingest``) is logged and counted
    in ``session.tick_errors`` (the status bar shows it) and sampling goes on."""

    label = "LIVE"

    def __init__(self, source: Any, session: Session, interval_s: float, on_update: Callable[[], None]):
        super().__init__("gpuscope-sampler", on_update)
        self.source = source
        self.session = session
        self.interval_s = interval_s

    def run(self) -> None:
        def on_frame(frame: Frame) -> None:
            self.session.ingest(frame)
            self.on_update()

        def on_error(e: Exception) -> None:
            self.session.tick_failed(e)
            self.on_update()

        run_ticks(self.source.sample, on_frame, self.interval_s, self._stop, on_error=on_error)

    def _release(self) -> None:
        self.source.close()


class ReplayFeeder(Worker):
    """Plays a recording at ``speed`` (0.25×–64×) with pause and seek; frames keep their own times.

    A frame that cannot be read (a damaged file) is logged, counted in ``session.tick_errors`` and
    skipped; playback goes on."""

    label = "REPLAY"
    SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)

    def __init__(self, rec: Recording, session: Session, on_update: Callable[[], None], speed: float = 1.0,
                 window_s: Callable[[], float] = lambda: 60.0):
        super().__init__("gpuscope-replay", on_update)
        self.rec = rec
        self.session = session
        self.speed = min(self.SPEEDS, key=lambda s: abs(s - speed))
        self.window_s = window_s
        self.playing = True
        self.index = -1
        self._marks = tuple((e.t, "marker" if e.kind == "marker" else "finding") for e in rec.events
                            if e.kind in ("marker", "finding_raised", "gpu_lost"))
        self._wake_ev = threading.Event()

    @property
    def t0(self) -> float:
        return float(self.rec.times[0]) if self.rec.n_frames else 0.0

    @property
    def t1(self) -> float:
        return float(self.rec.times[-1]) if self.rec.n_frames else 0.0

    @property
    def position(self) -> float:
        return float(self.rec.times[self.index]) if self.index >= 0 else self.t0

    def status(self) -> ReplayStatus:
        """Where the replay stands, as one immutable value (read under the session lock)."""
        with self.session.lock:
            return ReplayStatus(t0=self.t0, t1=self.t1, position=self.position, speed=self.speed,
                                playing=self.playing, marks=self._marks)

    def start(self) -> None:
        if self.rec.n_frames:
            self.seek(self.t0)
        super().start()

    def _wake(self) -> None:
        self._wake_ev.set()

    def run(self) -> None:
        while not self._stop.is_set():
            if not self.playing or self.index >= self.rec.n_frames - 1:
                if self.index >= self.rec.n_frames - 1 and self.playing:
                    self.playing = False
                    self.on_update()
                self._wake_ev.wait(0.5)
                self._wake_ev.clear()
                continue
            with self.session.lock:
                i = self.index + 1
                gap = float(self.rec.times[i] - self.rec.times[self.index]) if self.index >= 0 else 0.0
            deadline = time.monotonic() + min(max(gap, 0.0) / self.speed, 5.0)
            while not self._stop.is_set() and time.monotonic() < deadline:
                if self._wake_ev.wait(max(0.0, deadline - time.monotonic())):
                    break
            if self._wake_ev.is_set():
                self._wake_ev.clear()
                continue  # a seek or speed change: re-plan from the new position
            with self.session.lock:
                if self.index + 1 == i and self.playing:
                    self._ingest(i)
            self.on_update()

    def _ingest(self, i: int) -> None:
        try:
            for f in self.rec.frames(i, i + 1):
                self.session.ingest(f)
        except Exception as e:  # noqa: BLE001 - a damaged frame is counted and skipped
            self.session.tick_failed(e)
        self.index = i

    def seek(self, t: float) -> None:
        """Jump to time ``t``: the history and findings are rebuilt from the window before it."""
        with self.session.lock:
            target = self.rec.index_at(t)
            start = self.rec.index_at(float(self.rec.times[target]) - self.window_s())
            self.session.history.clear()
            self.session.findings.reset()
            try:
                for f in self.rec.frames(start, target + 1):
                    self.session.ingest(f)
            except Exception as e:  # noqa: BLE001 - a damaged frame: counted, the rest of the window is skipped
                self.session.tick_failed(e)
            self.index = target
        self._wake_ev.set()
        self.on_update()

    def step(self, seconds: float) -> None:
        self.seek(self.position + seconds)

    def toggle(self) -> None:
        if not self.playing and self.index >= self.rec.n_frames - 1:
            self.seek(self.t0)
        self.playing = not self.playing
        self._wake_ev.set()
        self.on_update()

    def faster(self, up: bool) -> None:
        k = self.SPEEDS.index(self.speed) + (1 if up else -1)
        self.speed = self.SPEEDS[max(0, min(len(self.SPEEDS) - 1, k))]
        self._wake_ev.set()
        self.on_update()

    def marks(self) -> list[tuple[float, str]]:
        return list(self._marks)

    def jump_mark(self, forward: bool) -> None:
        ts = sorted({t for t, _k in self.marks()})
        pos = self.position
        cands = [t for t in ts if t > pos + 0.01] if forward else [t for t in ts if t < pos - 0.01]
        if cands:
            self.seek(cands[0] if forward else cands[-1])

