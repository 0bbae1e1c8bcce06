"""The session: inventory + history + findings + optional recorder, fed one frame at a time.

Every source (live NVML, simulated, replay) goes through :meth:`Session.ingest`, so the TUI, the
headless recorder and the agent see the same frames with the same findings.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

from gpuscope.core.findings import FindingsEngine
from gpuscope.core.history import History
from gpuscope.core.model import Event, Frame, Inventory


class FrameSink(Protocol):
    """Where recorded frames go (``gpuscope.sources.recording.Recorder``); ``write`` never raises, it sets
    ``error`` and stops."""

    error: str | None
    frames: int

    def write(self, frame: Frame) -> None: ...

    def close(self) -> None: ...


class Session:
    def __init__(self, inventory: Inventory, *, interval_s: float = 1.0, history_s: float = 3600.0,
                 hold_s: float = 5.0, record_findings: bool = True):
        self.inventory = inventory
        self.interval_s = interval_s
        self.history = History(len(inventory.devices), int(history_s / max(interval_s, 0.05)) + 16)
        self.findings = FindingsEngine(inventory, hold_s=hold_s)
        self.recorder: FrameSink | None = None
        self.record_error: str | None = None
        self.last_frame: Frame | None = None
        self.frames_seen = 0
        self._pending: list[Event] = []
        self._lock = threading.Lock()
        self.record_findings = record_findings

    def add_marker(self, label: str = "", t: float | None = None) -> Event:
        """Queue a marker; it travels with the next frame."""
        ev = Event(t=t if t is not None else time.time(), kind="marker", text=label or "marker")
        with self._lock:
            self._pending.append(ev)
        return ev

    def ingest(self, frame: Frame) -> Frame:
        """Run findings, attach queued events, keep history, record. Returns the frame as recorded."""
        with self._lock:
            pending, self._pending = self._pending, []
        events = list(frame.events) + pending
        if self.record_findings:
            events += self.findings.update(frame)
        else:
            self.findings.update(frame)
        if len(events) != len(frame.events):
            frame = replace(frame, events=tuple(events))
        self.history.add(frame)
        self.last_frame = frame
        self.frames_seen += 1
        rec = self.recorder
        if rec is not None:
            rec.write(frame)
            if rec.error:
                self.record_error = rec.error
                self.recorder = None
        return frame

    def start_recording(self, sink: FrameSink) -> FrameSink:
        """Send every frame from now on to ``sink`` (an opened recorder), ending any earlier one."""
        self.stop_recording()
        self.record_error = None
        self.recorder = sink
        return sink

    def stop_recording(self) -> FrameSink | None:
        rec, self.recorder = self.recorder, None
        if rec is not None:
            rec.close()
        return rec


def run_ticks(sample: Callable[[], Frame], on_frame: Callable[[Frame], None], interval_s: float,
              stop: threading.Event, clock: Callable[[], float] = time.monotonic) -> None:
    """Call ``sample`` every ``interval_s`` on a fixed schedule until ``stop`` is set.

    A tick that overruns skips the ticks it missed instead of queueing them (no backlog).
    """
    next_t = clock()
    while not stop.is_set():
        frame = sample()
        on_frame(frame)
        next_t += interval_s
        now = clock()
        if next_t < now:
            next_t = now + interval_s - ((now - next_t) % interval_s)
        stop.wait(max(0.0, next_t - now))
