"""The live screen and ``gpuscope record`` run without numpy (the goal: lighter than nvitop at one GPU):
numpy's C extension, OpenBLAS and gfortran pages cost the live TUI about 20 MB of RSS at one GPU, and its
history rings and graphs now use the stdlib's ``array`` and plain Python (core/history.py). numpy stays
for the offline commands (replay index, summary, export).

The TUI is run for real, under a pseudo-terminal, with simulated GPUs, and the process's memory map is
read while it draws: no numpy library may be mapped."""

from __future__ import annotations

import fcntl
import os
import select
import signal
import struct
import subprocess
import sys
import termios
import time

import pytest


def mapped_numpy(pid: int | str) -> list[str]:
    """The files of process ``pid``'s memory map that belong to numpy (its extension modules and the
    libraries its wheel ships: numpy.libs/libopenblas…, libgfortran…)."""
    with open(f"/proc/{pid}/maps") as f:
        paths = {line.split()[-1] for line in f if len(line.split()) >= 6}
    return sorted(p for p in paths if "/numpy/" in p or "/numpy.libs/" in p)


def test_the_memory_map_check_sees_numpy() -> None:
    """The check below can fail: a process that imported numpy has its libraries mapped."""
    import numpy  # noqa: F401

    assert mapped_numpy("self")


@pytest.mark.slow
@pytest.mark.parametrize("scenario", ["slot-limited", "healthy-gen4"])
def test_the_live_tui_maps_no_numpy(scenario: str) -> None:
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40"}
    p = subprocess.Popen([sys.executable, "-m", "gpuscope", "--simulate", scenario, "--interval", "0.5"],
                         stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True, close_fds=True)
    os.close(slave)
    screen = b""
    try:
        end = time.monotonic() + 6.0  # a few samples: the graphs have drawn from the history
        while time.monotonic() < end and p.poll() is None:
            r, _, _ = select.select([master], [], [], 0.2)
            if r:
                try:
                    data = os.read(master, 65536)
                except OSError:
                    break
                screen += data
                if b"\x1b[6n" in data:  # answer a cursor-position query as a terminal would
                    os.write(master, b"\x1b[1;1R")
        assert p.poll() is None, screen[-2000:]
        found = mapped_numpy(p.pid)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGTERM)
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        os.close(master)
    assert b"SIMULATED" in screen.upper(), screen[-2000:]  # it drew its screen
    assert found == []


@pytest.mark.slow
def test_record_loads_no_numpy(tmp_path) -> None:
    out = tmp_path / "r.jsonl.gz"
    code = (
        "import sys\n"
        "from gpuscope.cli.main import main\n"
        f"rc = main(['record', '-o', {str(out)!r}, '--simulate', 'healthy-gen4', '--interval', '0.1', "
        "'--duration', '0.5'])\n"
        "raise SystemExit(rc or (3 if 'numpy' in sys.modules else 0))\n"
    )
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         stdin=subprocess.DEVNULL)
    assert got.returncode == 0, got.stderr[-2000:]
    assert out.stat().st_size > 0
