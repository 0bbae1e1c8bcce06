from __future__ import annotations

import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

os.environ["TZ"] = "UTC"
time.tzset()

WALL0 = 1_800_000_000.0  # a fixed start time so screens and files are reproducible

T = TypeVar("T")


def wait_for(predicate: Callable[[], T], timeout: float = 20.0, what: str = "the condition",
             interval: float = 0.05) -> T:
    """Poll ``predicate`` until it returns something truthy; return that value.

    Fails the test after ``timeout`` seconds (wall clock) with ``what`` and the last value seen, so a
    loaded machine makes a test slower, never wrong. Exceptions from ``predicate`` propagate.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {timeout:g} s waiting for {what} (last value: {value!r})")
        time.sleep(interval)


async def pilot_until(pilot: Any, cond: Callable[[], object], timeout: float = 10.0) -> None:
    """Let a running app (Textual's Pilot) go on until ``cond`` holds, or fail when ``timeout`` seconds pass
    (a replay seeks on its own thread)."""
    deadline = time.monotonic() + timeout
    while not cond() and time.monotonic() < deadline:
        await pilot.pause(0.01)
    assert cond()


def until(cond: Callable[[], object], timeout: float = 10.0) -> bool:
    """Poll ``cond`` every 0.05 s until it is true (True) or ``timeout`` seconds pass (False): for
    ``assert until(...)`` where the failure message is the assertion itself."""
    end = time.time() + timeout
    while time.time() < end:
        if cond():
            return True
        time.sleep(0.05)
    return bool(cond())


def sim_source(scenario: str, at: float = 0.0, block_s: float = 0.0):
    """The real NVML source over the simulated NVML, on a virtual clock frozen at ``at``."""
    from gpuscope.sources.live import open_source

    return open_source(scenario, virtual_at=at, pcie_block_s=block_s, wall0=WALL0)


def run_frames(src, start: float, end: float, step: float = 1.0):
    """Advance the virtual clock from ``start`` to ``end``, sampling every ``step`` seconds."""
    frames = []
    t = start
    while t <= end + 1e-9:
        src.nvml.clock.now = t
        frames.append(src.sample())
        t += step
    return frames


@pytest.fixture
def sim():
    return sim_source


# ------------------------------------------------------------------ hypothesis example counts
MIN_EXAMPLES = 50  # never fewer than this per fuzz test, whatever the scale


def _fuzz_scale() -> float:
    """GPUSCOPE_FUZZ_SCALE as a number; NaN when it is not one (pytest_configure then stops the run)."""
    try:
        return float(os.environ.get("GPUSCOPE_FUZZ_SCALE", "1"))
    except ValueError:
        return float("nan")


FUZZ_SCALE = _fuzz_scale()


def pytest_configure(config: pytest.Config) -> None:
    if not 0 < FUZZ_SCALE <= 1:
        raise pytest.UsageError(f"GPUSCOPE_FUZZ_SCALE={os.environ.get('GPUSCOPE_FUZZ_SCALE')!r}: "
                                "expected a number in (0, 1]")


def examples(n: int) -> int:
    """``max_examples`` for a hypothesis test whose full search is ``n`` examples.

    ``n`` unless ``GPUSCOPE_FUZZ_SCALE`` (0 < scale ≤ 1) is set; then ``n × scale``, never under
    :data:`MIN_EXAMPLES` (nor over ``n``). ``.ci/run`` runs the full counts once, in the full suite, and
    sets 0.25 for the fast tiers on the other Pythons: those are there to catch what differs between
    versions, not to search the same pure-Python code for more inputs.
    """
    return max(min(n, MIN_EXAMPLES), round(n * FUZZ_SCALE))


# ------------------------------------------------------------------ real parts: Mosquitto and tmux
MOSQUITTO = shutil.which("mosquitto") or ("/usr/sbin/mosquitto" if os.path.exists("/usr/sbin/mosquitto") else None)
needs_mosquitto = pytest.mark.skipif(MOSQUITTO is None, reason="mosquitto not installed (.ci/run installs it)")
needs_tmux = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed (.ci/run installs it)")


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Broker:
    """A real Mosquitto on a free local port, configured by ``extra`` (anonymous access by default)."""

    def __init__(self, tmp: Path, extra: str = "", port: int | None = None):
        self.port = port or free_port()
        self.conf = tmp / f"mosquitto-{self.port}.conf"
        as_root = "user root\n" if os.geteuid() == 0 else ""  # else mosquitto drops to a user that can't read tmp
        self.conf.write_text(f"{as_root}listener {self.port} 127.0.0.1\n" + (extra or "allow_anonymous true\n"))
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        assert MOSQUITTO is not None
        self.proc = subprocess.Popen([MOSQUITTO, "-c", str(self.conf)], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        wait_for(self._listening, 20, f"mosquitto to listen on port {self.port}")

    def _listening(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise RuntimeError(f"mosquitto exited with status {self.proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", self.port), 0.2).close()
            return True
        except OSError:
            return False

    def stop(self) -> None:
        assert self.proc is not None
        self.proc.terminate()
        self.proc.wait(10)

    @property
    def url(self) -> str:
        return f"mqtt://127.0.0.1:{self.port}"


@pytest.fixture
def broker(tmp_path):
    if MOSQUITTO is None:
        pytest.skip("mosquitto not installed (.ci/run installs it)")
    b = Broker(tmp_path)
    yield b
    b.stop()


def gpuscope_cmd() -> str:
    """The installed ``gpuscope`` of this interpreter's environment, as a shell command."""
    exe = Path(sys.executable).with_name("gpuscope")
    return shlex.quote(str(exe)) if exe.exists() else f"{shlex.quote(sys.executable)} -m gpuscope"


class Tmux:
    """One command in a detached tmux session on a private server (other sessions cannot interfere).

    After the command ends the pane prints ``EXITED <status>`` and stays, so a test can read both.
    """

    _n = 0

    def __init__(self, command: str, size: tuple[int, int] = (120, 40), keep: bool = True):
        Tmux._n += 1
        # a server per session: a server whose last session was killed exits, and must not be reused
        self.server = f"gpuscope-test-{os.getpid()}-{Tmux._n}"
        self.name = f"t{Tmux._n}"
        # keep: the pane outlives the command; else the command is the pane's process (exec)
        shell = f"env -u COLUMNS -u LINES {command}; echo EXITED $?; sleep 600" if keep else \
            f"exec env -u COLUMNS -u LINES {command}"
        self.run("new-session", "-d", "-s", self.name, "-x", str(size[0]), "-y", str(size[1]), shell, check=True)

    def run(self, *args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["tmux", "-L", self.server, *args], capture_output=True, text=True, **kw)

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", self.name).stdout

    def wait_screen(self, *words: str, timeout: float = 60.0) -> str:
        """The screen once it shows every one of ``words``; fails with the last screen after ``timeout``."""
        last = [""]

        def shown() -> str | None:
            last[0] = self.screen()
            return last[0] if all(w in last[0] for w in words) else None

        try:
            return wait_for(shown, timeout, f"{words} on the screen", interval=0.2)
        except pytest.fail.Exception:
            pytest.fail(f"timed out after {timeout:g} s waiting for {words} on the screen:\n{last[0]}")

    def keys(self, *keys: str) -> None:
        self.run("send-keys", "-t", self.name, *keys, check=True)

    def pane_pid(self) -> int:
        return int(self.run("list-panes", "-t", self.name, "-F", "#{pane_pid}", check=True).stdout.strip())

    def kill(self) -> None:
        self.run("kill-server")

    def __enter__(self) -> Tmux:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def expect_exit(pid: int, timeout: float, what: str) -> None:
    """Fail unless ``pid`` exits within ``timeout`` seconds; kill it in any case, so no test leaves it."""
    try:
        wait_for(lambda: not pid_alive(pid), timeout, what)
    finally:
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)
