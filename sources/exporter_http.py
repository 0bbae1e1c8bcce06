"""The HTTP(S) server behind ``gpuscope agent --prometheus``: what is served is the exporter's business
(:class:`~gpuscope.sources.prometheus.PrometheusExporter`), how it is served is this module's.

* **TLS, client certificates, basic auth** from ``--web-config`` (:mod:`gpuscope.sources.webconfig`). The
  TLS handshake runs in the connection's own thread with a timeout, never in the accept loop, so a client
  that stalls mid-handshake holds up nobody. A missing or wrong password is 401 with ``WWW-Authenticate``.
* **gzip** when the scraper asks (``Accept-Encoding``, as Prometheus always does): compressed once per
  rendered body and served from a cache after that, like the body itself.
* **Bounded**: at most :data:`MAX_CONNECTIONS` connections are served at once (one thread each); the next
  gets a 503 and is closed at once (a TLS one is just closed), so a flood costs neither threads nor memory.
* **Quiet**: a client that hangs up, times out or fails its handshake is counted (``Server.dropped``), never
  a traceback on stderr; anything else is a bug, logged once per request with its traceback.
"""

from __future__ import annotations

import gzip
import logging
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from gpuscope import __version__
from gpuscope.sources.webconfig import WebConfig

log = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
MAX_CONNECTIONS = 64  # connections served at once; Prometheus needs one per scraper
HANDSHAKE_TIMEOUT_S = 10.0
GZIP_LEVEL = 1  # Prometheus text compresses ~10× even at level 1, at a fraction of level 6's CPU
_BUSY = (b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nRetry-After: 1\r\n"
         b"Content-Length: 30\r\nConnection: close\r\n\r\nbusy: too many connections\r\n\r\n")


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


class Server(ThreadingHTTPServer):
    """A thread per connection, at most ``max_connections`` at once; TLS per connection, in its thread."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], web: WebConfig | None,
                 max_connections: int = MAX_CONNECTIONS):
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.web = web
        self.max_connections = max_connections
        self._slots = threading.BoundedSemaphore(max_connections)
        self.refused = 0  # connections turned away: all slots busy
        self.dropped = 0  # connections that ended in a network or TLS error (client hung up, timed out, …)
        super().__init__(address, handler)

    @property
    def scheme(self) -> str:
        return "https" if self.web is not None and self.web.tls is not None else "http"

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.refused += 1
            if self.scheme == "http":
                try:
                    request.setblocking(False)
                    request.send(_BUSY)  # fits the socket buffer: never blocks the accept loop
                except OSError:
                    pass
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def finish_request(self, request: Any, client_address: Any) -> None:
        try:
            request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as Go's servers do
        except OSError:
            pass
        ctx = self.web.tls if self.web is not None else None
        if ctx is None:
            super().finish_request(request, client_address)
            return
        request.settimeout(HANDSHAKE_TIMEOUT_S)
        tls = ctx.wrap_socket(request, server_side=True, do_handshake_on_connect=False)  # detaches `request`
        try:
            tls.do_handshake()
            if self.web is not None and self.web.allowed_sans and not san_allowed(tls.getpeercert(),
                                                                                  self.web.allowed_sans):
                self.dropped += 1  # refused at the TLS layer, as the toolkit does
                return
            super().finish_request(tls, client_address)
        finally:
            try:
                tls.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            tls.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, OSError):  # ConnectionReset, BrokenPipe, timeouts, ssl.SSLError…
            self.dropped += 1
            return
        log.error("exporter: a request from %s failed: %r", client_address[0] if client_address else "?", exc,
                  exc_info=True)


def san_allowed(cert: dict[str, Any] | None, allowed: frozenset[str]) -> bool:
    """Whether a verified client certificate (``getpeercert()``) names one of ``allowed`` in its SANs
    (DNS name, IP address, e-mail or URI, matched exactly, as the toolkit's ``client_allowed_sans``)."""
    if not cert:
        return False
    return any(str(value) in allowed for _kind, value in cert.get("subjectAltName", ()))


class Handler(BaseHTTPRequestHandler):
    """``GET``/``HEAD /metrics``; 404 elsewhere, 405 for other methods, 401 without valid credentials."""

    exporter: Scrapeable
    web: WebConfig | None = None
    gzip_cache: GzipCache
    server_version = f"gpuscope/{__version__}"
    sys_version = ""  # the Server header names gpuscope only, not the Python it runs on (to anyone, 401s included)
    protocol_version = "HTTP/1.1"
    timeout = 10

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
                max_connections: int = MAX_CONNECTIONS) -> Server:
    """A server for ``exporter`` on ``address`` (not yet serving); raises OSError when it cannot bind."""

    class _Bound(Handler):
        pass

    _Bound.exporter = exporter
    _Bound.web = web
    _Bound.gzip_cache = GzipCache()
    return Server(address, _Bound, web, max_connections)
