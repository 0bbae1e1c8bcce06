"""The exporter under clients that never finish a request: a slowloris must not starve real scrapes.

Each connection gets a total deadline for its TLS handshake and request head (from accept, not per read), and
unfinished heads wait on one selector thread, apart from the workers that serve complete requests; when the
waiting room is full the oldest unfinished head is dropped, not the newcomer. Without that, 64 connections
sending a header line every few seconds held every worker and every scrape failed while they trickled.

Real parts: the agent as a subprocess, real TCP (and TLS, with openssl-made certificates) on loopback, a real
HTTP client scraping it, and an in-process server for the waiting room's limits.
"""

from __future__ import annotations

import errno
import socket
import ssl
import threading
import time
import urllib.parse
from dataclasses import dataclass, field

import httpx
import pytest
from helpers import wait_for
from test_webserve import PASSWORD, Agent, _client_ctx, _hash, _tls_yml, _write, pki  # noqa: F401 (pki: a fixture)

from gpuscope.outputs.exporter_http import head_end, make_server

# ---- the head's end, as a table ----

@pytest.mark.parametrize("buf,want", [
    (b"", None), (b"GET / HTTP/1.1\r\n", None), (b"GET / HTTP/1.1\r\nHost: x\r\n", None),
    (b"GET / HTTP/1.1\r\n\r\n", 18), (b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET /next", 27),
    (b"GET / HTTP/1.1\nHost: x\n\n", 24), (b"GET /metrics\r\n\r\n", 16), (b"GET / HTTP/1.1\r\nHost: x\r\n\r", None),
    (b"GET / HTTP/1.1\r\nA: b\n\r\n", 23),
])
def test_head_end(buf, want):
    assert head_end(buf) == want


# ---- a slowloris: one thread, non-blocking, every connection reopened when the server drops it ----

@dataclass
class _Slow:
    sock: socket.socket | None = None
    state: str = "closed"  # connecting, handshaking, trickling, idle (bare), closed
    next_line: float = 0.0


@dataclass
class Slowloris:
    """``n`` connections to ``addr`` that never finish a request head. One in three is a bare TCP connect that
    sends nothing (on a TLS port: never a handshake byte); the others (after their handshake, on a TLS port)
    send a request line and then a header line every ``every_s`` seconds. A connection the server closes is
    opened again at once, so the pressure stays at ``n``."""

    addr: tuple[str, int]
    n: int = 200
    tls: ssl.SSLContext | None = None
    every_s: float = 1.0
    opened: int = 0
    holding: int = 0  # connections open now (connected, not yet dropped)
    _conns: list[_Slow] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> Slowloris:
        self._conns = [_Slow() for _ in range(self.n)]
        self._thread = threading.Thread(target=self._run, name="slowloris", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        for c in self._conns:
            self._close(c)

    def _close(self, c: _Slow) -> None:
        if c.sock is not None:
            try:
                c.sock.close()
            except OSError:
                pass
        c.sock, c.state = None, "closed"

    def _open(self, k: int, c: _Slow) -> None:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        rc = s.connect_ex(self.addr)
        if rc not in (0, errno.EINPROGRESS):
            s.close()
            return
        c.sock, c.state = s, "connecting"
        self.opened += 1

    def _step(self, k: int, c: _Slow, now: float) -> None:
        bare = k % 3 == 0
        s = c.sock
        assert s is not None
        if c.state == "connecting":
            err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err:
                self._close(c)
                return
            try:
                s.getpeername()
            except OSError:
                return  # still connecting
            if bare:
                c.state = "idle"
            elif self.tls is not None:
                c.sock = self.tls.wrap_socket(s, server_hostname="127.0.0.1", do_handshake_on_connect=False)
                c.state = "handshaking"
            else:
                c.state, c.next_line = "trickling", now
            return
        if c.state == "handshaking":
            try:
                s.do_handshake()  # type: ignore[attr-defined]
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                return
            except OSError:
                self._close(c)
                return
            c.state, c.next_line = "trickling", now
            return
        try:  # dropped? (a bare TCP socket peeks; a TLS one reads: it gets nothing but a close)
            got = s.recv(1) if isinstance(s, ssl.SSLSocket) else s.recv(1, socket.MSG_PEEK)
            if got is not None:  # b"" (closed) or an answer (a 503, a 400): either way, this one is done
                self._close(c)
                return
        except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
            pass
        except OSError:
            self._close(c)
            return
        if c.state == "trickling" and now >= c.next_line:
            line = b"GET /metrics HTTP/1.1\r\n" if c.next_line == 0 else b"X-Slow: 1\r\n"
            try:
                s.send(line)
            except (BlockingIOError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
                return
            except OSError:
                self._close(c)
                return
            c.next_line = now + self.every_s

    def _run(self) -> None:
        while not self._stop.is_set():
            now = time.monotonic()
            for k, c in enumerate(self._conns):
                if c.sock is None:
                    self._open(k, c)
                    if c.sock is not None:
                        c.next_line = 0.0
                    continue
                self._step(k, c, now)
            self.holding = sum(c.state in ("trickling", "idle", "handshaking") for c in self._conns)
            self._stop.wait(0.05)


def scrape_times(url: str, verify: ssl.SSLContext | bool, auth: tuple[str, str] | None, count: int,
                 every_s: float = 1.0, timeout_s: float = 5.0) -> list[float | str]:
    """``count`` scrapes, one every ``every_s`` seconds, each on a new connection: seconds each took, or what
    went wrong."""
    out: list[float | str] = []
    for _ in range(count):
        t0 = time.perf_counter()
        try:
            r = httpx.get(url, verify=verify, auth=auth, timeout=timeout_s)
            out.append(time.perf_counter() - t0 if r.status_code == 200 else f"HTTP {r.status_code}")
        except httpx.HTTPError as e:
            out.append(f"{type(e).__name__} after {time.perf_counter() - t0:.1f} s")
        time.sleep(max(0.0, every_s - (time.perf_counter() - t0)))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("secure", [False, True], ids=["plain", "tls+basic-auth"])
def test_scrapes_answer_within_a_second_under_a_slowloris_of_200(pki, secure):  # noqa: F811
    extra: tuple[str, ...] = ()
    if secure:
        extra = ("--web-config", _write(pki, _tls_yml(pki, cert=str(pki / "server.crt"), key=str(pki / "server.key"))
                                        + f"basic_auth_users:\n  prom: '{_hash(PASSWORD)}'\n", "slow.yml"))
    agent = Agent(*extra)
    u = urllib.parse.urlparse(agent.url)
    addr = (u.hostname or "127.0.0.1", u.port or 0)
    verify: ssl.SSLContext | bool = _client_ctx(pki) if secure else False
    auth = ("prom", PASSWORD) if secure else None
    try:
        wait_for(lambda: httpx.get(agent.url, verify=verify, auth=auth, timeout=5).status_code == 200, 20,
                 "the agent serving")
        tls = ssl.create_default_context(cafile=str(pki / "ca.crt")) if secure else None
        with Slowloris(addr, 200, tls) as attack:
            wait_for(lambda: attack.holding >= 190, 20, "the slowloris holding 200 connections")
            times = scrape_times(agent.url, verify, auth, count=8)  # 8 s: past the 5 s head deadline
            held = attack.holding
        assert all(isinstance(t, float) and t < 1.0 for t in times), times
        assert held >= 150, held  # the attack really held its connections while the scrapes ran
    finally:
        err = agent.stop()
    assert "Traceback" not in err, err[-3000:]


# ---- the waiting room's limits, in process ----

class _Exporter:
    """A stand-in exporter whose body waits on ``release`` (a slow render holds its worker)."""

    def __init__(self) -> None:
        self.scrapes = 0
        self.release = threading.Event()
        self.release.set()

    def body(self) -> bytes:
        self.release.wait(10)
        return b"up 1\n"


def _serve(max_connections: int, max_waiting: int):  # noqa: ANN202
    ex = _Exporter()
    server = make_server(("127.0.0.1", 0), ex, None, max_connections=max_connections, max_waiting=max_waiting)
    t = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.25}, daemon=True)
    t.start()
    return ex, server, t


def _stop(server, t) -> None:  # noqa: ANN001
    server.shutdown()
    server.server_close()
    t.join(5)


def _closed_by_server(s: socket.socket, timeout: float = 5.0) -> bool:
    s.settimeout(timeout)
    try:
        return s.recv(100) == b""
    except ConnectionResetError:
        return True


def test_a_full_waiting_room_drops_its_oldest_unfinished_head():
    ex, server, t = _serve(max_connections=2, max_waiting=4)
    addr = server.server_address[:2]
    held = []
    try:
        for _ in range(4):
            s = socket.create_connection(addr, timeout=5)
            s.sendall(b"GET /metrics HTTP/1.1\r\n")  # half a head, forever
            held.append(s)
        wait_for(lambda: server.waiting == 4, 10, "four heads waiting")
        r = httpx.get(f"http://{addr[0]}:{addr[1]}/metrics", timeout=5)
        assert r.status_code == 200 and r.text == "up 1\n"
        assert _closed_by_server(held[0])  # the oldest made room
        assert server.evicted == 1 and server.refused == 0
        held[1].settimeout(0.2)
        with pytest.raises(TimeoutError):  # the others still wait for their heads
            held[1].recv(100)
    finally:
        for s in held:
            s.close()
        _stop(server, t)


def test_complete_heads_wait_for_a_worker_and_the_excess_gets_503():
    """Complete heads are never dropped for newcomers: with every worker busy and the room full of them,
    the next connection is refused (503), and those waiting are served once a worker is free."""
    ex, server, t = _serve(max_connections=1, max_waiting=2)
    addr = server.server_address[:2]
    ex.release.clear()  # the first request holds the only worker
    socks = []
    try:
        for k in range(3):
            s = socket.create_connection(addr, timeout=5)
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            socks.append(s)
            if k == 0:
                wait_for(lambda: server.busy == 1, 10, "the first request on the worker")
        wait_for(lambda: server.ready == 2, 10, "two complete heads waiting for the worker")
        with socket.create_connection(addr, timeout=5) as s:
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            assert s.recv(200).startswith(b"HTTP/1.1 503 ")
        assert server.refused == 1 and server.evicted == 0
        ex.release.set()
        for s in socks:
            s.settimeout(5)
            assert s.recv(200).startswith(b"HTTP/1.1 200 ")
    finally:
        for s in socks:
            s.close()
        _stop(server, t)


def test_a_head_has_a_deadline_from_accept_not_per_read(monkeypatch):
    """A line every 0.3 s never waits out a per-read timeout; the deadline from accept ends it."""
    import gpuscope.outputs.exporter_http as eh

    monkeypatch.setattr(eh, "HEAD_DEADLINE_S", 1.0)
    ex, server, t = _serve(max_connections=2, max_waiting=8)
    addr = server.server_address[:2]
    try:
        with socket.create_connection(addr, timeout=5) as s:
            s.sendall(b"GET /metrics HTTP/1.1\r\n")
            t0 = time.monotonic()
            s.settimeout(0.3)
            closed = False
            while time.monotonic() - t0 < 5 and not closed:
                try:
                    closed = s.recv(100) == b""
                except TimeoutError:
                    try:
                        s.sendall(b"X-Slow: 1\r\n")
                    except OSError:
                        closed = True
                except ConnectionResetError:
                    closed = True
            assert closed and 0.9 < time.monotonic() - t0 < 2.0
    finally:
        _stop(server, t)


def test_a_kept_alive_connection_waits_between_requests_without_a_worker():
    """A scraper that keeps its connection between scrapes holds no worker meanwhile: one worker serves two
    kept-alive connections in turn."""
    import http.client

    ex, server, t = _serve(max_connections=1, max_waiting=8)
    host, port = server.server_address[:2]
    conns = [http.client.HTTPConnection(host, port, timeout=5) for _ in range(2)]
    try:
        for _ in range(3):
            for c in conns:
                c.request("GET", "/metrics")
                r = c.getresponse()
                assert r.status == 200 and r.read() == b"up 1\n"
        wait_for(lambda: server.busy == 0 and server.waiting == 2, 10, "both idle in the waiting room")
    finally:
        for c in conns:
            c.close()
        _stop(server, t)


def _read_all(s: socket.socket) -> bytes:
    data = b""
    while chunk := s.recv(65536):
        data += chunk
    return data


def test_pipelined_requests_are_answered_in_order():
    """Two requests in one write: the second head waits in the buffer and is answered after the first."""
    ex, server, t = _serve(max_connections=2, max_waiting=8)
    try:
        with socket.create_connection(server.server_address[:2], timeout=5) as s:
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\nGET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            data = _read_all(s)
        assert data.startswith(b"HTTP/1.1 200 ") and data.count(b"HTTP/1.1 ") == 2 and b"HTTP/1.1 404 " in data
    finally:
        _stop(server, t)


def test_a_head_over_16_kib_gets_431():
    ex, server, t = _serve(max_connections=2, max_waiting=8)
    try:
        with socket.create_connection(server.server_address[:2], timeout=5) as s:
            s.sendall(b"GET /metrics HTTP/1.1\r\n" + b"X-Pad: " + b"a" * (17 << 10) + b"\r\n")
            assert _read_all(s).startswith(b"HTTP/1.1 431 ")
        assert ex.scrapes == 0
    finally:
        _stop(server, t)
