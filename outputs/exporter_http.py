"""The HTTP(S) server behind ``gpuscope agent --prometheus``: what is served is the exporter's business
(:class:`~gpuscope.outputs.prometheus.PrometheusExporter`), how it is served is this module's.

* **Heads apart from work.** One thread accepts connections and reads their request heads (and runs their TLS
  handshakes) on a selector, never blocking on one; only a complete head goes to a worker (at most
  :data:`MAX_CONNECTIONS`, started as needed), which answers it and hands a kept-alive connection back to the
  selector to wait for its next request. A client that trickles its head, or connects and sends nothing, holds
  no worker: a slowloris of 64 such connections used to hold every worker, and every scrape failed meanwhile.
* **Deadlines, not per-read timeouts**: the handshake and head must be complete :data:`HEAD_DEADLINE_S` after
  accept (a line every few seconds never waits out a per-read timeout); a kept-alive connection may idle
  :data:`IDLE_TIMEOUT_S` before its next request starts, then has the same deadline for its head.
* **Bounded**: at most :data:`MAX_WAITING` connections wait (fewer where the open-files limit is lower).
  When full, the oldest unfinished head is dropped (``Server.evicted``) to make room, so a flood of slow
  clients cannot shut out a scraper that sends its head at once. Only when every waiting connection holds a
  complete head queued for a busy worker is the newcomer refused: a 503 (on TLS just closed, ``refused``).
* **TLS, client certificates, basic auth** from ``--web-config`` (:mod:`gpuscope.outputs.webconfig`). Plain
  HTTP sent to the TLS port is answered with a 400 saying so, as Go's servers do, rather than an empty reply.
  A missing or wrong password is 401 with ``WWW-Authenticate``.
* **gzip** when the scraper asks (``Accept-Encoding``, as Prometheus always does): compressed once per
  rendered body and served from a cache after that, like the body itself.
* **Quiet**: a client that hangs up, times out or fails its handshake is counted (``Server.dropped``), never
  a traceback on stderr; anything else is a bug, logged once per request with its traceback.
"""

from __future__ import annotations

import collections
import errno
import gzip
import io
import logging
import queue
import re
import selectors
import socket
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any, Protocol

from gpuscope.outputs.webconfig import WebConfig

log = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
MAX_CONNECTIONS = 64  # requests served at once (worker threads); Prometheus needs one per scraper
MAX_WAITING = 1024  # connections waiting for a head (new, or kept alive between requests), or for a worker
HEAD_DEADLINE_S = 5.0  # from accept (or a kept-alive connection's first byte): TLS handshake and request head
IDLE_TIMEOUT_S = 10.0  # a kept-alive connection between requests
WRITE_TIMEOUT_S = 10.0  # a worker writing an answer to a client that does not read it
MAX_HEAD_BYTES = 16 << 10  # a scrape's head is ~300 bytes; a larger one is refused (431)
SWEEP_S = 0.1  # how often deadlines are checked
GZIP_LEVEL = 1  # Prometheus text compresses ~10× even at level 1, at a fraction of level 6's CPU
_BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nRetry-After: 1\r\n"
         b"Content-Length: 30\r\nConnection: close\r\n\r\nbusy: too many connections\r\n\r\n")
PLAIN_TO_TLS = b"Client sent an HTTP request to an HTTPS server.\n"  # Go's words, so users can search them


def _answer(status: str, text: bytes) -> bytes:
    """A whole HTTP/1.1 answer that closes the connection (sent by the selector thread, which has no handler)."""
    return (f"HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {len(text)}\r\n"
            "Connection: close\r\n\r\n").encode() + text


_PLAIN_TO_TLS = _answer("400 Bad Request", PLAIN_TO_TLS)
_TOO_LARGE = _answer("431 Request Header Fields Too Large", b"request head too large\n")
_TLS_HANDSHAKE = 0x16  # the first byte of a TLS record carrying a ClientHello
_HEAD_END = re.compile(rb"\n\r?\n")


def head_end(buf: bytes) -> int | None:
    """Where the request head in ``buf`` ends (just past its empty line, ``\\r\\n`` or a bare ``\\n`` as
    Python's parser accepts); None while it is incomplete."""
    m = _HEAD_END.search(buf)
    return m.end() if m else None


class Scrapeable(Protocol):
    scrapes: int

    def body(self) -> bytes: ...


def wants_gzip(accept_encoding: str | None) -> bool:
    """Whether an ``Accept-Encoding`` value accepts gzip (``gzip``, ``x-gzip`` or ``*``, with q > 0)."""
    if not accept_encoding:
        return False
    star = gz = None
    for part in accept_encoding.split(","):
        coding, *params = (x.strip() for x in part.split(";"))
        q = 1.0
        for p in params:
            k, _, v = p.partition("=")
            if k.strip().lower() == "q":
                try:
                    q = float(v)
                except ValueError:
                    q = 0.0
        coding = coding.lower()
        if coding in ("gzip", "x-gzip"):
            gz = q > 0 if gz is None else gz or q > 0
        elif coding == "*":
            star = q > 0
    return gz if gz is not None else bool(star)


class GzipCache:
    """The gzip of the last body asked for, made once per body (bodies are immutable ``bytes`` that the
    exporter hands out again until a new frame is rendered, so identity is the cache key)."""

    def __init__(self) -> None:
        self._pair: tuple[bytes | None, bytes] = (None, b"")
        self._lock = threading.Lock()
        self.compressions = 0

    def of(self, body: bytes) -> bytes:
        pair = self._pair
        if pair[0] is body:
            return pair[1]
        with self._lock:
            if self._pair[0] is body:
                return self._pair[1]
            gz = gzip.compress(body, compresslevel=GZIP_LEVEL, mtime=0)
            self._pair = (body, gz)
            self.compressions += 1
            return gz


class _Conn:
    """A connection the selector thread holds: its socket (TLS once wrapped), what it has sent of its head, and
    the time by which the head must be complete. A worker gets it with ``head`` set, and may hand it back."""

    __slots__ = ("sock", "addr", "deadline", "buf", "phase", "head", "kept")

    def __init__(self, sock: socket.socket, addr: Any, deadline: float, phase: str) -> None:
        self.sock = sock
        self.addr = addr
        self.deadline = deadline
        self.buf = b""
        self.phase = phase  # "sniff" (TLS port: the first byte not seen yet), "handshake", "head"
        self.head = b""
        self.kept = False  # kept alive after a request: waiting for the next one


def _fd_bounded(max_waiting: int, max_connections: int) -> int:
    """``max_waiting``, lowered where the open-files limit could not hold that many sockets besides the
    workers' and the process's own (systemd's default soft limit is 1024)."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return max_waiting
    if soft == resource.RLIM_INFINITY:
        return max_waiting
    return min(max_waiting, max(8, soft - max_connections - 64))


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()


_LISTEN, _WAKE = object(), object()


class Server(HTTPServer):
    """Heads read on one selector thread (:meth:`serve_forever`), complete requests answered by at most
    ``max_connections`` workers; at most ``max_waiting`` connections wait for either."""

    allow_reuse_address = True
    request_queue_size = 1024  # the listen backlog (the kernel caps it at somaxconn): a burst of connects waits here

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], web: WebConfig | None,
                 max_connections: int = MAX_CONNECTIONS, max_waiting: int = MAX_WAITING):
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.web = web
        self.max_connections = max_connections
        self.max_waiting = _fd_bounded(max_waiting, max_connections)
        self.refused = 0  # connections turned away: the room full of complete heads waiting for busy workers
        self.evicted = 0  # unfinished heads dropped to make room for a newcomer
        self.dropped = 0  # connections that ended in a network or TLS error (client hung up, timed out, …)
        self._waiting: dict[_Conn, None] = {}  # unfinished heads, oldest first (the selector thread's alone)
        self._ready: queue.SimpleQueue[_Conn | None] = queue.SimpleQueue()  # complete heads for the workers
        self._returned: collections.deque[_Conn] = collections.deque()  # kept alive: back to the selector
        self._lock = threading.Lock()
        self._queued = self._idle = self._busy = 0  # under _lock
        self._workers: list[threading.Thread] = []
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._sel: selectors.BaseSelector | None = None
        self._stop = threading.Event()
        self._stopped = threading.Event()
        self._stopped.set()
        super().__init__(address, handler)

    @property
    def scheme(self) -> str:
        return "https" if self.web is not None and self.web.tls is not None else "http"

    @property
    def waiting(self) -> int:
        """Connections waiting for (the rest of) a head."""
        return len(self._waiting)

    @property
    def ready(self) -> int:
        """Complete heads waiting for a worker."""
        return self._queued

    @property
    def busy(self) -> int:
        """Workers answering a request now."""
        return self._busy

    # -- the selector thread
    def serve_forever(self, poll_interval: float = 0.5) -> None:
        """Accept, read heads and hand them to workers until :meth:`shutdown`."""
        self._stopped.clear()
        sel = self._sel = selectors.DefaultSelector()
        try:
            self.socket.setblocking(False)
            sel.register(self.socket, selectors.EVENT_READ, _LISTEN)
            sel.register(self._wake_r, selectors.EVENT_READ, _WAKE)
            next_sweep = 0.0
            while not self._stop.is_set():
                for key, _mask in sel.select(SWEEP_S if self._waiting else poll_interval):
                    if key.data is _LISTEN:
                        self._accept()
                    elif key.data is _WAKE:
                        self._drain_wake()
                    else:
                        self._advance(key.data)
                self._take_returned()
                now = time.monotonic()
                if now >= next_sweep:
                    next_sweep = now + SWEEP_S
                    for conn in [c for c in self._waiting if c.deadline <= now]:
                        self._drop(conn)
        finally:
            for conn in list(self._waiting):
                self._forget(conn)
                _close(conn.sock)
            sel.close()
            self._sel = None
            self._stopped.set()

    def shutdown(self) -> None:
        """Stop :meth:`serve_forever` and wait until it has (at once: a wake-up, not a poll)."""
        self._stop.set()
        self._wake()
        self._stopped.wait()

    def server_close(self) -> None:
        super().server_close()
        while self._returned:
            _close(self._returned.popleft().sock)
        for _ in self._workers:
            self._ready.put(None)
        self._wake_r.close()
        self._wake_w.close()

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"x")
        except OSError:  # full (a wake-up is pending anyway) or closed
            pass

    def _drain_wake(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except OSError:
            pass

    def _accept(self) -> None:
        for _ in range(64):  # then the selector again: heads in progress get their turn
            try:
                sock, addr = self.socket.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:  # out of file descriptors: make room, or wait a little
                if e.errno in (errno.EMFILE, errno.ENFILE) and self._evict_oldest():
                    continue
                if e.errno in (errno.EMFILE, errno.ENFILE):
                    self._stop.wait(0.05)
                return
            self._admit(sock, addr)

    def _admit(self, sock: socket.socket, addr: Any) -> None:
        sock.setblocking(False)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as Go's servers do
        except OSError:
            pass
        if len(self._waiting) + self._queued >= self.max_waiting and not self._evict_oldest():
            self.refused += 1
            if self.scheme == "http":
                self._send_now(sock, _BUSY)
            _close(sock)
            return
        tls = self.web is not None and self.web.tls is not None
        conn = _Conn(sock, addr, time.monotonic() + HEAD_DEADLINE_S, "sniff" if tls else "head")
        self._wait(conn, selectors.EVENT_READ)

    def _evict_oldest(self) -> bool:
        """Drop the oldest unfinished head; False when there is none."""
        conn = next(iter(self._waiting), None)
        if conn is None:
            return False
        self.evicted += 1
        self._forget(conn)
        _close(conn.sock)
        return True

    def _wait(self, conn: _Conn, events: int) -> None:
        """Have the selector watch ``conn`` for ``events`` (registered, or its events changed)."""
        assert self._sel is not None
        if conn in self._waiting:
            self._sel.modify(conn.sock, events, conn)
        else:
            self._waiting[conn] = None
            self._sel.register(conn.sock, events, conn)

    def _forget(self, conn: _Conn) -> None:
        if self._waiting.pop(conn, False) is None and self._sel is not None:
            try:
                self._sel.unregister(conn.sock)
            except (KeyError, ValueError):
                pass

    def _drop(self, conn: _Conn) -> None:
        """A connection that timed out, hung up mid-head or failed its handshake: closed and counted."""
        self.dropped += 1
        self._forget(conn)
        _close(conn.sock)

    @staticmethod
    def _send_now(sock: socket.socket, data: bytes) -> None:
        """A short answer that fits the socket buffer: never blocks the selector thread."""
        try:
            sock.send(data)
        except OSError:
            pass

    def _advance(self, conn: _Conn) -> None:
        """Take ``conn`` as far as its bytes allow: the first byte, the handshake, the head."""
        try:
            if conn.phase == "sniff" and not self._sniff(conn):
                return
            if conn.phase == "handshake" and not self._handshake(conn):
                return
            self._read_head(conn)
        except OSError:  # reset, TLS alerts and errors (ssl.SSLError is an OSError)
            self._drop(conn)

    def _sniff(self, conn: _Conn) -> bool:
        """TLS port: a ClientHello starts the handshake; plain HTTP gets a 400 saying so."""
        first = conn.sock.recv(1, socket.MSG_PEEK)
        if not first:
            self._drop(conn)
            return False
        if first[0] != _TLS_HANDSHAKE:
            self._forget(conn)
            self._send_now(conn.sock, _PLAIN_TO_TLS)
            self.dropped += 1
            _close(conn.sock)
            return False
        ctx = self.web.tls if self.web is not None else None
        assert ctx is not None
        self._forget(conn)  # the selector must not hold the plain socket that wrapping detaches
        conn.sock = ctx.wrap_socket(conn.sock, server_side=True, do_handshake_on_connect=False)
        conn.phase = "handshake"
        self._wait(conn, selectors.EVENT_READ)
        return True

    def _handshake(self, conn: _Conn) -> bool:
        try:
            conn.sock.do_handshake()  # type: ignore[attr-defined]
        except ssl.SSLWantReadError:
            self._wait(conn, selectors.EVENT_READ)
            return False
        except ssl.SSLWantWriteError:
            self._wait(conn, selectors.EVENT_WRITE)
            return False
        allowed = self.web.allowed_sans if self.web is not None else None
        if allowed and not san_allowed(conn.sock.getpeercert(), allowed):  # type: ignore[attr-defined]
            self._drop(conn)  # refused at the TLS layer, as the toolkit does
            return False
        conn.phase = "head"
        self._wait(conn, selectors.EVENT_READ)
        return True

    def _read_head(self, conn: _Conn) -> None:
        while len(conn.buf) <= MAX_HEAD_BYTES:
            try:
                data = conn.sock.recv(65536)
            except (BlockingIOError, ssl.SSLWantReadError):
                break
            except ssl.SSLWantWriteError:
                self._wait(conn, selectors.EVENT_WRITE)
                return
            if not data:  # hung up: an error mid-head, the normal end of a kept-alive connection otherwise
                if conn.buf or not conn.kept:
                    self.dropped += 1
                self._forget(conn)
                _close(conn.sock)
                return
            if not conn.buf and conn.kept:  # the next request begins: its head has the deadline
                conn.deadline = time.monotonic() + HEAD_DEADLINE_S
            conn.buf += data
        self._wait(conn, selectors.EVENT_READ)
        self._hand_over(conn)

    def _hand_over(self, conn: _Conn) -> None:
        """A complete head goes to a worker; one too large is refused; an incomplete one waits."""
        end = head_end(conn.buf[:MAX_HEAD_BYTES + 4])
        if end is None:
            if len(conn.buf) > MAX_HEAD_BYTES:
                self._forget(conn)
                self._send_now(conn.sock, _TOO_LARGE)
                _close(conn.sock)
            return
        self._forget(conn)
        conn.head, conn.buf = conn.buf[:end], conn.buf[end:]
        with self._lock:
            self._queued += 1
            start = self._queued > self._idle and len(self._workers) < self.max_connections
        self._ready.put(conn)
        if start:
            t = threading.Thread(target=self._work, name=f"gpuscope-exporter-{len(self._workers)}", daemon=True)
            self._workers.append(t)
            t.start()

    def _take_returned(self) -> None:
        """Kept-alive connections the workers handed back: a pipelined head goes straight on, others wait."""
        while self._returned:
            conn = self._returned.popleft()
            if self._stop.is_set():
                _close(conn.sock)
                continue
            if len(self._waiting) + self._queued >= self.max_waiting and not self._evict_oldest():
                _close(conn.sock)
                continue
            self._wait(conn, selectors.EVENT_READ)
            self._hand_over(conn)

    # -- the workers
    def _work(self) -> None:
        while True:
            with self._lock:
                self._idle += 1
            conn = self._ready.get()
            with self._lock:
                self._idle -= 1
                if conn is None:
                    return
                self._queued -= 1
                self._busy += 1
            try:
                self._answer(conn)
            finally:
                with self._lock:
                    self._busy -= 1

    def _answer(self, conn: _Conn) -> None:
        """Answer the one request in ``conn.head``; a connection kept alive goes back to the selector."""
        keep = False
        try:
            conn.sock.settimeout(WRITE_TIMEOUT_S)
            handler = self.RequestHandlerClass(conn, conn.addr, self)  # type: ignore[arg-type]
            keep = not getattr(handler, "close_connection", True)
        except OSError:  # ConnectionReset, BrokenPipe, timeouts, ssl.SSLError…
            self.dropped += 1
        except Exception as e:  # noqa: BLE001 - a bug: logged with its traceback, the connection closed
            log.error("exporter: a request from %s failed: %r", conn.addr[0] if conn.addr else "?", e, exc_info=True)
        if not keep or self._stop.is_set():
            _close(conn.sock)
            return
        conn.sock.setblocking(False)
        conn.kept, conn.head = True, b""
        conn.deadline = time.monotonic() + IDLE_TIMEOUT_S
        self._returned.append(conn)
        self._wake()


def san_allowed(cert: dict[str, Any] | None, allowed: frozenset[str]) -> bool:
    """Whether a verified client certificate (``getpeercert()``) names one of ``allowed`` in its SANs
    (DNS name, IP address, e-mail or URI, matched exactly, as the toolkit's ``client_allowed_sans``)."""
    if not cert:
        return False
    return any(str(value) in allowed for _kind, value in cert.get("subjectAltName", ()))


class _SocketWriter(io.BufferedIOBase):
    """The handler's ``wfile``: each write goes out whole, at once (the handler gathers an answer first)."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        self._sock.sendall(b)
        with memoryview(b) as view:
            return view.nbytes


class Handler(BaseHTTPRequestHandler):
    """``GET``/``HEAD /metrics``; 404 elsewhere, 405 for other methods, 401 without valid credentials.

    One request per instance: the server hands it a connection whose head is complete (``request`` is the
    server's ``_Conn``); the connection's next request waits on the server's selector, not here."""

    exporter: Scrapeable
    web: WebConfig | None = None
    gzip_cache: GzipCache
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        conn: _Conn = self.request
        self.connection = conn.sock
        self.rfile = io.BytesIO(conn.head)
        self.wfile = _SocketWriter(conn.sock)

    def handle(self) -> None:
        self.close_connection = True
        self.handle_one_request()

    def version_string(self) -> str:
        """The Server header: gpuscope, no version and no Python (to anyone, 401s included)."""
        return "gpuscope"

    def _send(self, code: int, body: bytes, ctype: str = "text/plain; charset=utf-8",
              extra: dict[str, str] | None = None, head: bool = False) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        if self.web is not None:
            for k, v in self.web.headers:
                self.send_header(k, v)
        # Headers and body in one write: two small writes wait on Nagle and the client's delayed ACK (a
        # gzipped 8 kB answer took 40 ms of wall time and twice the CPU that way).
        buf = getattr(self, "_headers_buffer", None)
        if buf is None:  # an HTTP/0.9 request ("GET /metrics"): no headers, the body alone
            if not head:
                self.wfile.write(body)
            return
        buf.append(b"\r\n" if head else b"\r\n" + body)
        self.flush_headers()

    def _authorised(self, head: bool = False) -> bool:
        auth = self.web.auth if self.web is not None else None
        if auth is None or auth.check(self.headers.get("Authorization")):
            return True
        extra = {"WWW-Authenticate": 'Basic realm="gpuscope"'}
        if self.close_connection:  # the client must not send its next request on a connection about to close
            extra["Connection"] = "close"
        self._send(401, b"Unauthorized\n", extra=extra, head=head)
        return False

    def _get(self, head: bool) -> None:
        if not self._authorised(head):
            return
        path = self.path.split("?", 1)[0]
        if path != "/metrics":
            self._send(404, b"not found: gpuscope serves /metrics\n", head=head)
            return
        self.exporter.scrapes += 1
        body = self.exporter.body()
        if wants_gzip(self.headers.get("Accept-Encoding")):
            self._send(200, self.gzip_cache.of(body), CONTENT_TYPE,
                       extra={"Content-Encoding": "gzip", "Vary": "Accept-Encoding"}, head=head)
        else:
            self._send(200, body, CONTENT_TYPE, extra={"Vary": "Accept-Encoding"}, head=head)

    def do_GET(self) -> None:  # noqa: N802
        self._get(False)

    def do_HEAD(self) -> None:  # noqa: N802
        self._get(True)

    def _not_allowed(self) -> None:
        self.close_connection = True  # a request body may follow; don't read it as the next request
        if self._authorised():
            self._send(405, b"method not allowed: use GET\n", extra={"Allow": "GET, HEAD", "Connection": "close"})

    def __getattr__(self, name: str) -> Any:
        if name.startswith("do_"):  # any other method (POST, PUT, DELETE, …)
            return self._not_allowed
        raise AttributeError(name)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


def make_server(address: tuple[str, int], exporter: Scrapeable, web: WebConfig | None = None,
                max_connections: int = MAX_CONNECTIONS, max_waiting: int = MAX_WAITING) -> Server:
    """A server for ``exporter`` on ``address`` (not yet serving); raises OSError when it cannot bind."""

    class _Bound(Handler):
        pass

    _Bound.exporter = exporter
    _Bound.web = web
    _Bound.gzip_cache = GzipCache()
    return Server(address, _Bound, web, max_connections, max_waiting)
