"""The live screen's recording and markers: ``--record FILE`` at start, ``r`` to stop and start again, ``m``/``M``
to drop a marker. Each step returns what the message line says; the App shows it and redraws."""

from __future__ import annotations

import os
import sys
import time

from gpuscope.core.errors import GpuscopeError
from gpuscope.core.session import FrameSink, Session


class RecordingController:
    """Starts and stops the session's recordings. ``record_path``: ``--record FILE`` (recorded from the start;
    ``force``: it may replace an existing file, once); a recording started later with ``r`` goes to that
    path while it does not exist, else to a fresh name (``r`` never overwrites). A recording stopped with
    ``r`` is finished by its writer thread while the screen goes on; :meth:`close` waits for them all."""

    def __init__(self, session: Session, record_path: str | None = None, force: bool = False):
        self.session = session
        self.record_path = record_path
        self.force = force
        self.started = 0.0  # time.monotonic() when the current recording started
        self._finishing: list[FrameSink] = []  # recordings stopped with r whose writer may still be busy

    def elapsed_s(self) -> float:
        """Seconds since the current recording started."""
        return time.monotonic() - self.started

    def start(self, path: str) -> str:
        """Record to ``path``; the message line (where it records, or why it cannot)."""
        # here, not at the top: the live screen loads the recording module only once it records (its
        # RSS, docs/performance.md *Memory at one GPU*)
        from gpuscope.core.recording_format import RecordingError
        from gpuscope.outputs.recorder import Recorder

        try:
            inv = self.session.inventory
            force = self.force and path == self.record_path and self.session.recorder is None
            self.force = False
            self.session.start_recording(Recorder(path, inv, command=sys.argv[:], interval_s=self.session.interval_s,
                                                  force=force,
                                                  origin={"host": inv.host, "simulated": inv.simulated}))
            self.started = time.monotonic()
            return f"recording to {os.path.abspath(path)}"
        except RecordingError as e:
            return str(e)

    def toggle(self) -> str | None:
        """``r``: stop the recording (its writer finishes the file; the screen goes on), or start one; the
        message line (None: nothing to say)."""
        if self.session.recorder is not None:
            rec = self.session.stop_recording(wait=False)
            if rec is None:
                return None
            self._finishing.append(rec)
            n = getattr(rec, "accepted", rec.frames)
            return f"recording stopped: {n} frames in {os.path.abspath(str(getattr(rec, 'path', '?')))}"
        path = self.record_path if self.record_path and not os.path.lexists(self.record_path) else fresh_name()
        return self.start(path)

    def marker(self, label: str) -> str:
        """``m`` / ``M``: a marker in the session (and the recording, when one runs) now."""
        ev = self.session.add_marker(label)
        return f"marker dropped at {time.strftime('%H:%M:%S', time.localtime(ev.t))}" + (
            f": {ev.text}" if label else "") + ("" if self.session.recorder else " (not recording: press r)")

    def close(self) -> None:
        """End every recording: the current one, and wait for those stopped with ``r`` (writers drain, join)."""
        self.session.stop_recording()
        for rec in self._finishing:
            rec.close()


def fresh_name(directory: str = ".", now: float | None = None) -> str:
    """A recording name that does not exist yet: ``gpuscope-YYYYmmdd-HHMMSS.jsonl.gz``, with ``-2``, ``-3``…
    appended when that second's name is taken (``r`` never overwrites)."""
    stamp = time.strftime("gpuscope-%Y%m%d-%H%M%S", time.localtime(now))
    for k in range(1, 10000):
        name = os.path.join(directory, f"{stamp}{'' if k == 1 else f'-{k}'}.jsonl.gz")
        if not os.path.lexists(name):
            return name if directory != "." else os.path.basename(name)
    raise GpuscopeError("cannot find a free name for the recording")  # pragma: no cover
