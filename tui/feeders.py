"""Feeders put frames into a Session off the event loop: live sampling or replay of a recording.

Both call :meth:`Session.ingest`, so replay goes through the same path as live data. They never
queue frames for the UI: the UI redraws from the session's latest state when it is ready.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from gpuscope.core.session import Session, run_ticks
from gpuscope.sources.recording import Recording


class LiveFeeder:
    """Samples a source every ``interval_s`` on a worker thread."""

    label = "LIVE"

    def __init__(self, source: Any, session: Session, interval_s: float, on_update: Callable[[], None]):
        self.source = source
        self.session = session
        self.interval_s = interval_s
        self.on_update = on_update
        self.error: str | None = None
        self.session_lock = threading.RLock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gpuscope-sampler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        def on_frame(frame: Any) -> None:
            with self.session_lock:
                self.session.ingest(frame)
            self.on_update()

        try:
            run_ticks(self.source.sample, on_frame, self.interval_s, self._stop)
        except Exception as e:  # noqa: BLE001 - shown on screen, never a traceback
            self.error = f"sampling stopped: {type(e).__name__}: {e}"
            self.on_update()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        try:
            self.source.close()
        except Exception:  # noqa: BLE001
            pass


class ReplayFeeder:
    """Plays a recording at ``speed`` (0.25×–64×) with pause and seek; frames keep their own times."""

    label = "REPLAY"
    SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)

    def __init__(self, rec: Recording, session: Session, on_update: Callable[[], None], speed: float = 1.0,
                 window_s: Callable[[], float] = lambda: 60.0):
        self.rec = rec
        self.session = session
        self.on_update = on_update
        self.speed = min(self.SPEEDS, key=lambda s: abs(s - speed))
        self.window_s = window_s
        self.playing = True
        self.index = -1
        self.error: str | None = None
        self.session_lock = threading.RLock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gpuscope-replay", daemon=True)

    @property
    def t0(self) -> float:
        return float(self.rec.times[0]) if self.rec.n_frames else 0.0

    @property
    def t1(self) -> float:
        return float(self.rec.times[-1]) if self.rec.n_frames else 0.0

    @property
    def position(self) -> float:
        return float(self.rec.times[self.index]) if self.index >= 0 else self.t0

    def start(self) -> None:
        if self.rec.n_frames:
            self.seek(self.t0)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            if not self.playing or self.index >= self.rec.n_frames - 1:
                if self.index >= self.rec.n_frames - 1 and self.playing:
                    self.playing = False
                    self.on_update()
                self._wake.wait(0.5)
                self._wake.clear()
                continue
            with self.session_lock:
                i = self.index + 1
                gap = float(self.rec.times[i] - self.rec.times[self.index]) if self.index >= 0 else 0.0
            deadline = time.monotonic() + min(max(gap, 0.0) / self.speed, 5.0)
            while not self._stop.is_set() and time.monotonic() < deadline:
                if self._wake.wait(max(0.0, deadline - time.monotonic())):
                    break
            if self._wake.is_set():
                self._wake.clear()
                continue  # a seek or speed change: re-plan from the new position
            with self.session_lock:
                if self.index + 1 == i and self.playing:
                    self._ingest(i)
            self.on_update()

    def _ingest(self, i: int) -> None:
        for f in self.rec.frames(i, i + 1):
            self.session.ingest(f)
        self.index = i

    def seek(self, t: float) -> None:
        """Jump to time ``t``: the history and findings are rebuilt from the window before it."""
        with self.session_lock:
            target = self.rec.index_at(t)
            start = self.rec.index_at(float(self.rec.times[target]) - self.window_s())
            self.session.history.clear()
            self.session.findings.reset()
            t_start = float(self.rec.times[start])  # findings open before the window keep their start times
            self.session.findings.prime(e for e in self.rec.events if e.t < t_start)
            for f in self.rec.frames(start, target + 1):
                self.session.ingest(f)
            self.index = target
        self._wake.set()
        self.on_update()

    def step(self, seconds: float) -> None:
        self.seek(self.position + seconds)

    def toggle(self) -> None:
        if not self.playing and self.index >= self.rec.n_frames - 1:
            self.seek(self.t0)
        self.playing = not self.playing
        self._wake.set()
        self.on_update()

    def faster(self, up: bool) -> None:
        k = self.SPEEDS.index(self.speed) + (1 if up else -1)
        self.speed = self.SPEEDS[max(0, min(len(self.SPEEDS) - 1, k))]
        self._wake.set()
        self.on_update()

    def marks(self) -> list[tuple[float, str]]:
        return [(e.t, "marker" if e.kind == "marker" else "finding") for e in self.rec.events
                if e.kind in ("marker", "finding_raised", "gpu_lost")]

    def jump_mark(self, forward: bool) -> None:
        ts = sorted({t for t, _k in self.marks()})
        pos = self.position
        cands = [t for t in ts if t > pos + 0.01] if forward else [t for t in ts if t < pos - 0.01]
        if cands:
            self.seek(cands[0] if forward else cands[-1])

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=2)
