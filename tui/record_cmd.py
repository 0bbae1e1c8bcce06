"""``gpuscope record``: headless recording, optionally for exactly the lifetime of a command."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from gpuscope.sources.recording import RecordingError
from gpuscope.sources.session import Session, run_ticks


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"  # pragma: no cover


def human_duration(s: float) -> str:
    s = int(round(s))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}h{m:02d}m{sec:02d}s" if h else (f"{m}m{sec:02d}s" if m else f"{sec}s")


def run_record(args: argparse.Namespace, open_source: Callable[..., Any]) -> int:
    from gpuscope.tui.cli import UserError

    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if args.duration is not None and args.duration <= 0:
        raise UserError("--duration must be positive")
    src = open_source(args.simulate, pcie_mode=args.pcie_source)
    session = Session(src.inventory, interval_s=args.interval)
    origin = {"host": src.inventory.host, "simulated": src.inventory.simulated}
    if src.inventory.simulated:
        origin["note"] = f"SIMULATED data from scenario {src.inventory.scenario}, not a real GPU"
    try:
        session.start_recording(args.output, command=sys.argv[:], origin=origin)
    except RecordingError as e:
        src.close()
        raise UserError(str(e)) from None
    stop = threading.Event()
    proc: subprocess.Popen[bytes] | None = None
    status = 0
    t_start = time.monotonic()

    def forward(signum: int, _frame: Any) -> None:
        if proc is not None and proc.poll() is None:
            proc.send_signal(signum)  # the command decides; we record until it exits
        else:
            stop.set()

    old = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    frames = 0

    def on_frame(frame: Any) -> None:
        nonlocal frames
        session.ingest(frame)
        frames += 1
        if session.record_error:
            sys.stderr.write(f"gpuscope: {session.record_error}\n")
            stop.set()
        if args.duration is not None and time.monotonic() - t_start >= args.duration:
            stop.set()
        if proc is not None and proc.poll() is not None:
            stop.set()

    try:
        if cmd:
            session.add_marker("start: " + " ".join(cmd))
            try:
                proc = subprocess.Popen(cmd)
            except OSError as e:
                session.stop_recording()
                raise UserError(f"cannot run {cmd[0]}: {e.strerror or e}") from None
        run_ticks(src.sample, on_frame, args.interval, stop)
        if proc is not None:
            status = proc.wait()
            session.add_marker(f"end: exit status {status}")
            on_frame(src.sample())
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        rec = session.recorder
        session.stop_recording()
        src.close()
    size = os.path.getsize(args.output) if os.path.exists(args.output) else 0
    active = session.findings.active
    worst = f"; {len(active)} finding{'s' if len(active) != 1 else ''} active: {active[0].message}" if active else ""
    sim = " SIMULATED" if src.inventory.simulated else ""
    state = "stopped early" if session.record_error else "recorded"
    n = rec.frames if rec is not None else frames
    sys.stderr.write(f"gpuscope: {state} {n}{sim} frames of {len(src.inventory.devices)} GPUs over "
                     f"{human_duration(time.monotonic() - t_start)} to {args.output} ({human_bytes(size)}){worst}\n")
    if proc is not None:
        return status if status >= 0 else 128 - status
    return 1 if session.record_error else 0
