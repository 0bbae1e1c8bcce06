"""Helpers shared by the tests of every folder: waiting for conditions, the simulated source, hypothesis
example counts, the real parts (Mosquitto, tmux, gpuscope agents, Prometheus) and a TUI over a simulated scenario.

Import them with ``from helpers import …``: tests/conftest.py puts tests/ on ``sys.path`` (pytest's default
import mode does it too, for the root conftest), so this works from tests/ and every folder under it.
conftest.py keeps the fixtures.
"""

from __future__ import annotations

import http.server
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

ROOT = Path(__file__).resolve().parents[1]  # the repository
FIXTURES = Path(__file__).resolve().parent / "fixtures"  # captures and files the tests read
DEMO = ROOT / "recordings" / "h200-2gpu-load-phases.jsonl.gz"  # the bundled demo recording

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


def record_sim(path, scenario: str, seconds: int, start: float = 0.0, marker: str | None = None):
    """Record ``seconds`` frames (1 Hz, virtual clock from ``start``) of a scenario to ``path``, as
    ``gpuscope record --simulate`` writes them, with a marker at the third frame when given."""
    from gpuscope.core.session import Session
    from gpuscope.outputs.recorder import Recorder

    src = sim_source(scenario, at=start)
    s = Session(src.inventory, interval_s=1.0)
    s.start_recording(Recorder(str(path), src.inventory, command=["test"], interval_s=1.0, fsync=False))
    for k, f in enumerate(run_frames(src, start, start + seconds - 1)):
        if marker and k == 2:
            s.add_marker(marker, t=f.t)
        s.ingest(f)
    s.stop_recording()
    return path


# ------------------------------------------------------------------ hypothesis example counts
MIN_EXAMPLES = 50  # never fewer than this per fuzz test, whatever the scale


def _fuzz_scale() -> float:
    """GPUSCOPE_FUZZ_SCALE as a number; NaN when it is not one (pytest_configure then stops the run)."""
    try:
        return float(os.environ.get("GPUSCOPE_FUZZ_SCALE", "1"))
    except ValueError:
        return float("nan")


FUZZ_SCALE = _fuzz_scale()


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


# ------------------------------------------------------------------ real parts: gpuscope agents and Prometheus
needs_prometheus = pytest.mark.skipif(shutil.which("prometheus") is None,
                                      reason="the prometheus binary is not installed (Debian: apt-get install prometheus)")
needs_promtool = pytest.mark.skipif(shutil.which("promtool") is None,
                                    reason="promtool is not installed (Debian: apt-get install prometheus)")


def start_agent(*extra: str, scenario: str = "mixed-4") -> tuple[subprocess.Popen[str], str]:
    """``gpuscope agent --simulate SCENARIO`` serving /metrics on a free loopback port, with ``extra``
    arguments; returns the process and the URL it printed."""
    p = subprocess.Popen([sys.executable, "-m", "gpuscope", "agent", "--simulate", scenario, "--prometheus",
                          "127.0.0.1:0", *extra], stderr=subprocess.PIPE, text=True)
    assert p.stderr is not None
    line = p.stderr.readline()
    m = re.search(r"serving (http://\S+/metrics)", line)
    if not m:
        p.kill()
        raise AssertionError(f"agent did not start: {line}{p.stderr.read()}")
    return p, m.group(1)


def stop_agent(p: subprocess.Popen[str]) -> str:
    """Stop an agent from :func:`start_agent` (SIGTERM, then SIGKILL after 15 s); returns its stderr."""
    p.terminate()
    try:
        _out, err = p.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        p.kill()
        _out, err = p.communicate()
    return err or ""


def prom_query(base: str, q: str) -> list[dict]:
    """The result of an instant query through Prometheus's HTTP API (``/api/v1/query``)."""
    with urllib.request.urlopen(f"{base}/api/v1/query?{urllib.parse.urlencode({'query': q})}", timeout=5) as r:
        data = json.load(r)
    assert data["status"] == "success", data
    return data["data"]["result"]


def _prometheus_ready(prom: subprocess.Popen[bytes], base: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base}/-/ready", timeout=5) as r:
            return prom.poll() is None and r.status == 200
    except OSError:
        return False


def start_prometheus(tmp_path: Path, cfg: Path) -> tuple[subprocess.Popen[bytes], str]:
    """A real Prometheus with config ``cfg`` on a free loopback port and a temp data dir; returns it and its
    base URL once ready (its log: ``tmp_path/prometheus.log``). Stop it with :func:`stop_prometheus`."""
    for _attempt in range(3):  # a free port can be taken between the probe and the bind
        port = free_port()
        with open(tmp_path / "prometheus.log", "w") as log:
            prom = subprocess.Popen(["prometheus", f"--config.file={cfg}", f"--storage.tsdb.path={tmp_path / 'data'}",
                                     f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=log)
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and prom.poll() is None:
            if _prometheus_ready(prom, base):
                return prom, base
            time.sleep(0.2)
        prom.kill()
        prom.wait()
    raise AssertionError("Prometheus did not start: " + (tmp_path / "prometheus.log").read_text()[-2000:])


def stop_prometheus(prom: subprocess.Popen[bytes]) -> None:
    prom.terminate()
    try:
        prom.wait(15)
    except subprocess.TimeoutExpired:
        prom.kill()
        prom.wait()


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


# ------------------------------------------------------------------ the TUI and the fleet, fed by hand
def make_app(scenario: str, start: float, end: float, compact=None, **kw: Any):
    """A GpuscopeApp over ``scenario`` with the frames from ``start`` to ``end`` (virtual seconds) ingested."""
    from gpuscope.core.session import Session
    from gpuscope.tui.app import GpuscopeApp

    src = sim_source(scenario)
    session = Session(src.inventory, interval_s=1.0)
    for f in run_frames(src, start, end):
        session.ingest(f)
    return GpuscopeApp(session, None, label="SIMULATED", interval_s=1.0, compact=compact, **kw)


def host_of(sub, name):
    """The host called ``name`` in a subscriber's snapshot, or None."""
    return next((h for h in sub.snapshot() if h.host == name), None)


def publish(port: int, msgs: list[tuple[str, bytes, bool]], qos: int = 1) -> None:
    """Publish (topic, payload, retain) messages from a plain client, each acknowledged (QoS 1)."""
    import asyncio

    import aiomqtt

    async def go() -> None:
        async with aiomqtt.Client("127.0.0.1", port) as c:
            for t, p, r in msgs:
                await c.publish(t, p, qos=qos, retain=r)

    asyncio.run(go())


class HttpServer:
    """A real HTTP server on a loopback port (``port``; 0: any free one) serving ``handler`` on a daemon thread;
    ``url`` reaches it, ``close()`` stops it. The tests' inference servers and endpoints are built on it."""

    def __init__(self, handler: type[http.server.BaseHTTPRequestHandler], port: int = 0):
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
