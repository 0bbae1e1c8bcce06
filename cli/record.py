"""``gpuscope record``: headless recording, optionally for exactly the lifetime of a command."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from gpuscope.cli.options import RecordOptions, SourceOptions
from gpuscope.core.errors import GpuscopeError
from gpuscope.core.gc_tune import settle_gc
from gpuscope.core.redact import redact_argv, redact_command
from gpuscope.core.session import Session, run_ticks
from gpuscope.core.text import clean, count
from gpuscope.core.units import duration as human_duration
from gpuscope.core.units import human_bytes
from gpuscope.core.vocab import endpoint_state
from gpuscope.outputs.recorder import Recorder
from gpuscope.sources.endpoint import REASON_MAX


def run_record(opts: RecordOptions, open_source: Callable[[SourceOptions], Any]) -> int:
    """Record ``open_source(opts.source)`` to ``opts.output`` for ``--duration``, until a signal, or for the
    life of ``opts.cmd``; the exit status is the command's (or 1 when the recording failed)."""
    cmd = list(opts.cmd)
    shown = redact_argv(cmd)  # the command as the marker and the messages give it: the header's redaction
    src = open_source(opts.source)
    probe_events = _probe_first(opts, src)  # `--probe-links`: the probe runs first, its event rides the first frame
    session = Session(src.inventory, interval_s=opts.source.interval)
    rec = _start_recorder(opts, src, session)
    ticks = _Ticks(session, probe_events)
    t_start = time.monotonic()
    old = {s: signal.signal(s, ticks.forward) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    markers = MarkerPipe(lambda line: session.add_marker(redact_command(line))) if cmd else None  # it may echo "$@"
    status = 0
    try:
        if cmd:
            ticks.proc = _start_command(cmd, shown, session, rec, markers)
        settle_gc()  # started: the collector set for a long run
        run_ticks(src.sample, ticks.on_frame, opts.source.interval, ticks.stop, on_error=session.tick_failed,
                  until=t_start + opts.duration if opts.duration is not None else None)
        if ticks.proc is not None:
            status = ticks.command_ended(src)
    finally:
        ticks.escalation.cancel()
        if markers is not None:
            markers.close()
        for s, h in old.items():
            signal.signal(s, h)
        session.stop_recording()
        src.close()
    sys.stderr.write(f"gpuscope: {_recorded(opts.output, src, session, rec, ticks.frames, t_start)}\n")
    if ticks.proc is None:
        return 1 if session.record_error else 0
    if ticks.escalation.killed:
        sys.stderr.write(f"gpuscope: {clean(shown[0])} did not stop after {ticks.escalation.first_name}; killed it "
                         f"(SIGKILL, exit status {128 + signal.SIGKILL})\n")
    return status if status >= 0 else 128 - status


def _probe_first(opts: RecordOptions, src: Any) -> list[Any]:
    """With ``--probe-links``, the probe's event (run before recording starts); the source is closed when
    the probe fails."""
    if not opts.probe_links:
        return []
    from gpuscope.cli.options import ProbeOptions
    from gpuscope.cli.probe import probe_event

    try:
        return [probe_event(ProbeOptions.for_record(opts.source), src)]
    except BaseException:
        src.close()
        raise


def _start_recorder(opts: RecordOptions, src: Any, session: Session) -> Recorder:
    """The recording file, open and attached to ``session``, its header saying where the frames come from;
    the source is closed when it cannot be made."""
    inv = src.inventory
    origin = {"host": inv.host, "simulated": inv.simulated}
    if inv.simulated:
        origin["note"] = f"SIMULATED data from scenario {inv.scenario}, not a real GPU"
    if opts.note:
        origin["note"] = (origin.get("note", "") + " " + opts.note).strip()
    origin["gpus"] = sorted({d.name for d in inv.devices})
    origin["driver"] = inv.driver_version
    try:
        rec = Recorder(opts.output, inv, command=sys.argv[:], origin=origin, interval_s=opts.source.interval,
                       force=opts.force)
        session.start_recording(rec)  # the session lets go of it on a write error: rec still counts what is kept
    except GpuscopeError:
        src.close()
        raise
    return rec


def _start_command(cmd: list[str], shown: list[str], session: Session, rec: Recorder,
                   markers: MarkerPipe | None) -> subprocess.Popen[bytes]:
    """Start the recorded command, marked in the recording, in a process group of its own (a signal reaches
    the command and everything it started). A command that cannot run leaves no file behind (only a file
    gpuscope made) and exits as a shell would: 127 not found, 126 found but not runnable."""
    session.add_marker("start: " + " ".join(shown))
    env = dict(os.environ)
    if markers is not None and markers.path:
        env["GPUSCOPE_MARKERS"] = markers.path
    try:
        return subprocess.Popen(cmd, env=env, **_new_group())
    except OSError as e:
        session.stop_recording()
        rec.discard()
        raise GpuscopeError(f"cannot run {clean(shown[0])}: {e.strerror or e}",
                            exit_status=127 if isinstance(e, FileNotFoundError) else 126) from None


class _Ticks:
    """What the sampling loop of ``gpuscope record`` keeps between frames: the frames sampled, what it told the
    user, the recorded command and the signals forwarded to it."""

    def __init__(self, session: Session, probe_events: list[Any]):
        self.session = session
        self.probe_events = probe_events
        self.stop = threading.Event()
        self.proc: subprocess.Popen[bytes] | None = None
        self.escalation = Escalation(lambda: self.proc, self.stop)
        self.frames = 0
        self.endpoints_told: dict[str, str] = {}  # url -> its state, as last told to the user
        self.error_told = False  # the recording's error was said

    def forward(self, signum: int, _frame: Any) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.escalation.signal(signum)  # the command decides; we record until it exits (or kill it)
        else:
            self.stop.set()

    def on_frame(self, frame: Any) -> None:
        if self.probe_events:
            frame = replace(frame, events=(*frame.events, self.probe_events.pop()))
        self.session.ingest(frame)
        self.frames += 1
        for line in endpoint_changes(frame.endpoints, self.endpoints_told):
            sys.stderr.write(f"gpuscope: {line}\n")  # headless: say when a server goes away or comes back
        if self.session.record_error:
            if not self.error_told:  # once: the command's last frame comes through here again
                self.error_told = True
                sys.stderr.write(f"gpuscope: {self.session.record_error}\n")
            self.stop.set()
        if self.proc is not None and self.proc.poll() is not None:
            self.stop.set()

    def command_ended(self, src: Any) -> int:
        """Wait for the recorded command, mark its end and record one last frame; its exit status."""
        assert self.proc is not None
        status = self.proc.wait()
        self.session.add_marker(f"end: exit status {status}" + (" (killed by gpuscope: SIGKILL)"
                                                                  if self.escalation.killed else ""))
        try:
            self.on_frame(src.sample())
        except Exception as e:  # noqa: BLE001 - logged and counted like any tick
            self.session.tick_failed(e)
        return status


def _recorded(output: str, src: Any, session: Session, rec: Recorder, frames: int, t_start: float) -> str:
    """The closing line: what was recorded (what the file holds for sure: summary reads the same), where, over
    how long, the worst active finding and what went wrong."""
    n = rec.kept
    sim = " SIMULATED" if src.inventory.simulated else ""
    what = f"recorded {n}{sim} {'frame' if n == 1 else 'frames'} of"
    if session.record_error:
        what = f"stopped early: {n}{sim} {'frame' if n == 1 else 'frames'} kept of {frames} sampled, of"
    size = os.path.getsize(output) if os.path.exists(output) else 0
    where = f"to {output} ({human_bytes(size)})"
    if rec.removed:  # nothing reached the disk: the empty file gpuscope created is gone
        where = f"to nothing: removed the empty {output}"
    active = session.findings.active
    worst = f"; {count(len(active), 'finding')} active: {active[0].message}" if active else ""
    errs = session.tick_errors
    trouble = f"; {errs.text()}" if errs.count else ""
    if rec.dropped:
        trouble += f"; {rec.dropped} frames dropped (the disk was too slow)"
    return (f"{what} {count(len(src.inventory.devices), 'GPU')} over {human_duration(time.monotonic() - t_start)} "
            f"{where}{worst}{trouble}")


ESCALATE_AFTER_S = 10.0


def _new_group() -> dict[str, Any]:
    """Popen arguments that start the child in a process group of its own."""
    if sys.version_info >= (3, 11):
        return {"process_group": 0}
    return {"preexec_fn": os.setpgrp}  # pragma: no cover - Python 3.10


class Escalation:
    """Forwards signals to the recorded command's process group. The first SIGINT/SIGTERM/SIGHUP is passed
    on (the command decides how to stop); a second one, or :data:`ESCALATE_AFTER_S` seconds after the first
    without an exit, sends SIGKILL to the whole group and sets :attr:`killed`."""

    def __init__(self, get_proc: Callable[[], Any], stop: threading.Event, after_s: float = ESCALATE_AFTER_S):
        self.get_proc, self.stop, self.after_s = get_proc, stop, after_s
        self.killed = False
        self.first_name: str | None = None
        self._timer: threading.Timer | None = None

    def _send(self, sig: int) -> None:
        proc = self.get_proc()
        if proc is None or proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            try:
                proc.send_signal(sig)
            except OSError:
                pass

    def signal(self, signum: int) -> None:
        if self.first_name is None:
            self.first_name = signal.Signals(signum).name
            self._send(signum)
            self._timer = threading.Timer(self.after_s, self.kill)
            self._timer.daemon = True
            self._timer.start()
        else:
            self.kill()

    def kill(self) -> None:
        proc = self.get_proc()
        if proc is not None and proc.poll() is None:
            self.killed = True
            self._send(signal.SIGKILL)

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


def endpoint_changes(readings: Any, state: dict[str, str]) -> list[str]:
    """One line per endpoint whose state (:func:`endpoint_state`) changed since ``state`` (updated in
    place): the first reading of an endpoint that is down or gives only bad answers, and every later change.
    Headless: the reason is given whole (one line; the source bounds it at :data:`REASON_MAX`)."""
    out = []
    for e in readings:
        url = clean(e.url, 200)
        now = endpoint_state(e)
        if state.get(url) == now:
            continue
        first = url not in state
        state[url] = now
        if now != "ok":
            out.append(f"endpoint {url}: {clean(e.error or 'unreachable', REASON_MAX)}; recording goes on")
        elif not first:
            out.append(f"endpoint {url} is back")
    return out


class MarkerPipe:
    """A FIFO whose path the recorded command finds in ``$GPUSCOPE_MARKERS``: each line written to it
    becomes a marker (``echo "phase: decode" > "$GPUSCOPE_MARKERS"``)."""

    def __init__(self, add: Callable[[str], Any]):
        self.add = add
        self._dir = tempfile.mkdtemp(prefix="gpuscope-")
        self.path: str | None = os.path.join(self._dir, "markers")
        self._closing = False
        try:
            os.mkfifo(self.path, 0o600)
        except (OSError, AttributeError):
            self.path = None
            return
        self._thread = threading.Thread(target=self._run, name="gpuscope-markers", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        assert self.path is not None
        while not self._closing:
            try:
                with open(self.path, encoding="utf-8", errors="replace") as f:
                    for line in f:
                        line = line.strip()[:1000]  # redacted whole, then cut to 200 by the session
                        if line and not self._closing:
                            self.add(line)
            except OSError:
                return

    def close(self) -> None:
        if self.path is None:
            return
        self._closing = True
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)  # wakes the reader
            os.close(fd)
        except OSError:
            pass
        self._thread.join(timeout=1)
        try:
            os.unlink(self.path)
            os.rmdir(self._dir)
        except OSError:
            pass
