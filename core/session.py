"""The session: inventory + history + findings + optional recorder, fed one frame at a time.

Every source (live NVML, simulated, replay) goes through :meth:`Session.ingest`, so the TUI, the
headless recorder and the agent see the same frames with the same findings.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

from gpuscope.core.errors import one_line
from gpuscope.core.findings import FindingsEngine
from gpuscope.core.history import History
from gpuscope.core.model import Event, Frame, Inventory
from gpuscope.core.text import clean, count

log = logging.getLogger(__name__)

# A tick that keeps failing is logged with its traceback the first few times, then once every N times.
TRACEBACKS_LOGGED = 5
LOG_EVERY = 100


@dataclass(frozen=True)
class TickErrors:
    """How many sampling ticks raised, and the last error as one line. Immutable: the sampling thread
    replaces the session's value, readers on other threads always see a consistent pair."""

    count: int = 0
    last: str = ""

    def add(self, exc: BaseException) -> TickErrors:
        return TickErrors(self.count + 1, one_line(exc))

    def text(self) -> str:
        """``3 sampling errors, last: ValueError: boom`` (empty when there were none)."""
        if not self.count:
            return ""
        return f"{count(self.count, 'sampling error')}, last: {self.last}"


class FrameSink(Protocol):
    """Where recorded frames go (``gpuscope.outputs.recorder.Recorder``); ``write`` never raises nor
    blocks on the disk: it queues, sets ``error`` and stops on a failure, counts ``dropped`` frames."""

    error: str | None
    frames: int
    dropped: int

    def write(self, frame: Frame) -> None: ...

    def close(self, wait: bool = True) -> None: ...


class Session:
    """Everything one front end shows or records, fed one frame at a time.

    Thread safety: :attr:`lock` (re-entrant) is the one session lock. :meth:`ingest` takes it; a reader
    that needs history, findings and the last frame to agree (the TUI building a view) holds it while it
    reads. Nothing slow runs under it: the recorder's disk work happens on its own writer thread.
    """

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
        self.lock = threading.RLock()
        self.record_findings = record_findings
        self.tick_errors = TickErrors()
        self._announce = False

    def add_marker(self, label: str = "", t: float | None = None) -> Event:
        """Queue a marker; it travels with the next frame. The label is made one printable line here, the
        one door for markers (TUI prompt, ``$GPUSCOPE_MARKERS``, palette): escape sequences are removed
        whole wherever the label came from."""
        ev = Event(t=t if t is not None else time.time(), kind="marker", text=clean(label, 200) or "marker")
        return self.add_event(ev)

    def add_event(self, ev: Event) -> Event:
        """Queue an event (a marker, a link probe run from the TUI); it travels with the next frame, so a
        running recording keeps it."""
        with self.lock:
            self._pending.append(ev)
        return ev

    @property
    def unrecorded_events(self) -> bool:
        """Events (a marker dropped a moment ago) wait for the next frame while a recording runs: stopping
        now would leave them out of the file."""
        with self.lock:
            return bool(self._pending) and self.recorder is not None

    def ingest(self, frame: Frame) -> Frame:
        """Run findings, attach queued events, keep history, record. Returns the frame as recorded.

        Holds :attr:`lock` throughout; the recorder only queues the frame (its writer thread does the disk work).
        """
        with self.lock:
            pending, self._pending = self._pending, []
            events = list(frame.events) + pending
            self.findings.note(pending)
            if self.record_findings:
                events += self.findings.update(frame)
                if self._announce and self.recorder is not None:
                    raised = {str(e.data.get("id")) for e in events
                              if e.kind == "finding_raised" and isinstance(e.data, dict)}
                    events += self.findings.open_events(frame.t, skip=raised)
                self._announce = False
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
                    log.info("%s", rec.error)  # each front end shows it in its own words
            return frame

    def tick_failed(self, exc: BaseException) -> None:
        """A sampling tick raised (the source's ``sample()`` or :meth:`ingest`): log it, count it, go on.

        The first :data:`TRACEBACKS_LOGGED` errors are logged with their traceback, then one in
        :data:`LOG_EVERY`, so a source that fails every tick cannot flood the log.
        """
        errs = self.tick_errors = self.tick_errors.add(exc)
        if errs.count <= TRACEBACKS_LOGGED:
            log.error("sampling tick failed (%d so far): %s", errs.count, errs.last, exc_info=exc)
        elif errs.count % LOG_EVERY == 0:
            log.error("sampling tick failed (%d so far): %s", errs.count, errs.last)

    def start_recording(self, sink: FrameSink) -> FrameSink:
        """Send every frame from now on to ``sink`` (an opened recorder), ending any earlier one."""
        self.stop_recording()
        with self.lock:
            self.record_error = None
            self.recorder = sink
            self._announce = True  # the first recorded frame says which findings are already raised
        log.info("recording to %s", getattr(sink, "path", sink))
        return sink

    def stop_recording(self, wait: bool = True) -> FrameSink | None:
        """Detach the recorder (under the lock) and close it (outside: closing drains its queue to disk).

        ``wait=False`` returns at once and lets the recorder's writer finish the file on its own (a UI
        must not wait for a slow disk); the default waits, as a command or an exiting App must."""
        with self.lock:
            rec, self.recorder = self.recorder, None
        if rec is not None:
            rec.close(wait=wait)
            if rec.error and not self.record_error:
                self.record_error = rec.error
            log.info("recording stopped%s: %d frames written", "" if wait else " (finishing)", rec.frames)
        return rec


def run_ticks(sample: Callable[[], Frame], on_frame: Callable[[Frame], None], interval_s: float,
              stop: threading.Event, clock: Callable[[], float] = time.monotonic,
              on_error: Callable[[Exception], None] | None = None, until: float | None = None) -> None:
    """Call ``sample`` every ``interval_s`` on a fixed schedule until ``stop`` is set, or until the clock
    reaches ``until`` (a deadline on ``clock``: one last sample is taken at the deadline itself, so
    ``--duration 2 --interval 10`` ends after 2 s with a frame at 0 s and one at 2 s, not after 10 s).

    A tick that overruns skips the ticks it missed instead of queueing them (no backlog). A tick whose
    ``sample`` or ``on_frame`` raises an ``Exception`` is handed to ``on_error`` (usually
    :meth:`Session.tick_failed`) and sampling goes on; without ``on_error`` the exception propagates.
    """
    next_t = clock()
    while not stop.is_set():
        try:
            on_frame(sample())
        except Exception as e:
            if on_error is None:
                raise
            on_error(e)
        now = clock()
        if until is not None and now >= until:
            return
        next_t += interval_s
        if next_t < now:
            next_t = now + interval_s - ((now - next_t) % interval_s)
        wake = next_t if until is None else min(next_t, until)
        stop.wait(max(0.0, wake - now))
