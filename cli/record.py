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

from gpuscope.cli.gc_tune import settle_gc
from gpuscope.cli.options import RecordOptions, SourceOptions
from gpuscope.core.errors import GpuscopeError
from gpuscope.core.session import Session, run_ticks
from gpuscope.core.text import clean, count
from gpuscope.core.units import duration as human_duration
from gpuscope.core.units import human_bytes
from gpuscope.core.vocab import endpoint_state
from gpuscope.sources.endpoint import REASON_MAX
from gpuscope.sources.recording import Recorder


def run_record(opts: RecordOptions, open_source: Callable[[SourceOptions], Any]) -> int:
    """Record ``open_source(opts.source)`` to ``opts.output`` for ``--duration``, until a signal, or for the
    life of ``opts.cmd``; the exit status is the command's (or 1 when the recording failed)."""
    cmd = list(opts.cmd)
    src = open_source(opts.source)
    probe_events: list[Any] = []  # `--probe-links`: the probe runs first, its event rides the first frame
    if opts.probe_links:
        from gpuscope.cli.options import ProbeOptions
        from gpuscope.cli.probe import probe_event

        try:
            probe_events.append(probe_event(ProbeOptions.for_record(opts.source), src))
        except BaseException:
            src.close()
            raise
    session = Session(src.inventory, interval_s=opts.source.interval)
    origin = {"host": src.inventory.host, "simulated": src.inventory.simulated}
    if src.inventory.simulated:
        origin["note"] = f"SIMULATED data from scenario {src.inventory.scenario}, not a real GPU"
    if opts.note:
        origin["note"] = (origin.get("note", "") + " " + opts.note).strip()
    origin["gpus"] = sorted({d.name for d in src.inventory.devices})
    origin["driver"] = src.inventory.driver_version
    try:
        rec = Recorder(opts.output, src.inventory, command=sys.argv[:], origin=origin, interval_s=opts.source.interval,
                       force=opts.force)
        session.start_recording(rec)  # the session lets go of it on a write error: rec still counts what is kept
    except GpuscopeError:
        src.close()
        raise
    stop = threading.Event()
    proc: subprocess.Popen[bytes] | None = None
    status = 0
    t_start = time.monotonic()

    escalation = Escalation(lambda: proc, stop)

    def forward(signum: int, _frame: Any) -> None:
        if proc is not None and proc.poll() is None:
            escalation.signal(signum)  # the command decides; we record until it exits (or kill it)
        else:
            stop.set()

    old = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    frames = 0

    endpoints_told: dict[str, str] = {}  # url -> its state, as last told to the user
    error_told: list[bool] = []  # the recording's error was said

    def on_frame(frame: Any) -> None:
        nonlocal frames
        if probe_events:
            frame = replace(frame, events=(*frame.events, probe_events.pop()))
        session.ingest(frame)
        frames += 1
        for line in endpoint_changes(frame.endpoints, endpoints_told):
            sys.stderr.write(f"gpuscope: {line}\n")  # headless: say when a server goes away or comes back
        if session.record_error and not error_told:
            error_told.append(True)  # once: the command's last frame comes through here again
            sys.stderr.write(f"gpuscope: {session.record_error}\n")
            stop.set()
        elif session.record_error:
            stop.set()
        if proc is not None and proc.poll() is not None:
            stop.set()

    markers = MarkerPipe(session.add_marker) if cmd else None
    try:
        if cmd:
            session.add_marker("start: " + " ".join(cmd))
            env = dict(os.environ)
            if markers is not None and markers.path:
                env["GPUSCOPE_MARKERS"] = markers.path
            try:  # its own process group: a signal reaches the command and everything it started
                proc = subprocess.Popen(cmd, env=env, **_new_group())
            except OSError as e:
                session.stop_recording()
                rec.discard()  # a command that never ran leaves nothing behind (only a file gpuscope made)
                # the shell's statuses: 127 not found, 126 found but not runnable
                raise GpuscopeError(f"cannot run {clean(cmd[0])}: {e.strerror or e}",
                                    exit_status=127 if isinstance(e, FileNotFoundError) else 126) from None
        settle_gc()  # started: the collector set for a long run
        run_ticks(src.sample, on_frame, opts.source.interval, stop, on_error=session.tick_failed,
                  until=t_start + opts.duration if opts.duration is not None else None)
        if proc is not None:
            status = proc.wait()
            session.add_marker(f"end: exit status {status}" + (" (killed by gpuscope: SIGKILL)"
                                                                if escalation.killed else ""))
            try:
                on_frame(src.sample())
            except Exception as e:  # noqa: BLE001 - logged and counted like any tick
                session.tick_failed(e)
    finally:
        escalation.cancel()
        if markers is not None:
            markers.close()
        for s, h in old.items():
            signal.signal(s, h)
        session.stop_recording()
        src.close()
    size = os.path.getsize(opts.output) if os.path.exists(opts.output) else 0
    active = session.findings.active
    worst = f"; {count(len(active), 'finding')} active: {active[0].message}" if active else ""
    sim = " SIMULATED" if src.inventory.simulated else ""
    n = rec.kept  # what the file holds for sure: summary reads the same
    what = f"recorded {n}{sim} {'frame' if n == 1 else 'frames'} of"
    if session.record_error:
        what = f"stopped early: {n}{sim} {'frame' if n == 1 else 'frames'} kept of {frames} sampled, of"
    errs = session.tick_errors
    trouble = f"; {errs.text()}" if errs.count else ""
    if rec.dropped:
        trouble += f"; {rec.dropped} frames dropped (the disk was too slow)"
    where = f"to {opts.output} ({human_bytes(size)})"
    if rec.removed:  # nothing reached the disk: the empty file gpuscope created is gone
        where = f"to nothing: removed the empty {opts.output}"
    sys.stderr.write(f"gpuscope: {what} {count(len(src.inventory.devices), 'GPU')} over "
                     f"{human_duration(time.monotonic() - t_start)} {where}{worst}{trouble}\n")
    if proc is not None:
        if escalation.killed:
            sys.stderr.write(f"gpuscope: {clean(cmd[0])} did not stop after {escalation.first_name}; killed it "
                             f"(SIGKILL, exit status {128 + signal.SIGKILL})\n")
        return status if status >= 0 else 128 - status
    return 1 if session.record_error else 0


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
                        line = line.strip()[:200]
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
