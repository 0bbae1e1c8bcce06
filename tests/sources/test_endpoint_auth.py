"""Endpoint credentials and failures: headers and tokens checked at start-up without quoting them, transport
failures said as fixed phrases (never an exception's text, which quotes header values), the URL's query
kept, and a failing probe carried in the reading. Tables for the pure parts, real loopback servers for the rest."""

from __future__ import annotations

import asyncio
import base64
import errno
import http.server
import socket
import ssl
import threading

import httpx
import pytest
from helpers import FIXTURES, HttpServer, wait_for

from gpuscope.sources.endpoint import (
    EndpointPoller,
    connect_reason,
    probe_status_error,
    transport_reason,
)
from gpuscope.sources.live import bearer_token, env_header_items, header_value_problem, parse_headers

SECRET = "T0KSECRET"
VLLM = (FIXTURES / "inference" / "vllm_v1.txt").read_bytes()


# ------------------------------------------------------------------ headers and tokens (pure)
@pytest.mark.parametrize(("values", "env", "want"), [
    ([], {}, {}),
    (["X-A:1", "  X-B :  two  "], {}, {"X-A": "1", "X-B": "two"}),
    (["X-A: a:b:c"], {}, {"X-A": "a:b:c"}),  # only the first ':' splits
    ([], {"GPUSCOPE_ENDPOINT_TOKEN": f"{SECRET}\n"}, {"Authorization": f"Bearer {SECRET}"}),  # kubectl --from-file
    ([], {"GPUSCOPE_ENDPOINT_TOKEN": f"  Bearer {SECRET}\r\n"}, {"Authorization": f"Bearer {SECRET}"}),
    ([], {"GPUSCOPE_ENDPOINT_TOKEN": ""}, {}),  # set but empty: as not set
    (["X-A: 1\n"], {}, {"X-A": "1"}),  # a value's trailing newline dropped
    # a ';' splits only before 'Name:': a Cookie keeps its own ';'
    ([], {"GPUSCOPE_ENDPOINT_HEADERS": "X-Api-Key: k; Cookie: a=1; b=2"}, {"X-Api-Key": "k", "Cookie": "a=1; b=2"}),
    ([], {"GPUSCOPE_ENDPOINT_HEADERS": "Cookie: a=1; b=2; X-K: v"}, {"Cookie": "a=1; b=2", "X-K": "v"}),
    # one header a line: a ';' never splits there
    ([], {"GPUSCOPE_ENDPOINT_HEADERS": "Cookie: a=1; X-Not: header\nX-K: v\n"}, {"Cookie": "a=1; X-Not: header",
                                                                              "X-K": "v"}),
    ([], {"GPUSCOPE_ENDPOINT_HEADERS": "X-A: 1\r\n\r\nX-B: 2"}, {"X-A": "1", "X-B": "2"}),
    ([], {"GPUSCOPE_ENDPOINT_HEADERS": " ; "}, {}),
])
def test_headers_accepted(values, env, want):
    assert parse_headers(values, env) == want


@pytest.mark.parametrize(("values", "env", "basic", "said"), [
    ([f"Authorization Bearer {SECRET}"], {}, None, "bad header in --endpoint-header: expected 'Name: value' (there is no ':')"),
    ([f"Authorization: Bearer {SECRET}\r\nY: z"], {}, None, "bad header in --endpoint-header: the value of header 'Authorization' has a line break"),
    ([f"X-Key: {SECRET}\x00"], {}, None, "the value of header 'X-Key' has a control character"),
    ([f"X-Key: {SECRET}é"], {}, None, "the value of header 'X-Key' has a character outside ASCII"),
    ([f"Bad Name{SECRET}: v"], {}, None, "the name before ':' must be one word"),
    ([f": {SECRET}"], {}, None, "the name before ':' must be one word"),
    ([], {"GPUSCOPE_ENDPOINT_HEADERS": f"X-A: 1; {SECRET}"}, None, None),  # a ';' not before 'Name:': one value
    ([], {"GPUSCOPE_ENDPOINT_HEADERS": f"Authorization Bearer {SECRET}"}, None, "bad header in GPUSCOPE_ENDPOINT_HEADERS"),
    ([], {"GPUSCOPE_ENDPOINT_TOKEN": f"{SECRET}\nX: y"}, None, "GPUSCOPE_ENDPOINT_TOKEN has a line break in it"),
    ([], {"GPUSCOPE_ENDPOINT_TOKEN": " \n"}, None, "GPUSCOPE_ENDPOINT_TOKEN is set but holds no token"),
    ([], {"GPUSCOPE_ENDPOINT_TOKEN": f"{SECRET}\x7f"}, None, "GPUSCOPE_ENDPOINT_TOKEN has a control character"),
    # the same header from two places: nothing silently wins
    ([f"X-Key: {SECRET}", "x-key: 2"], {}, None, "header 'x-key' given twice (--endpoint-header)"),
    ([f"Authorization: Bearer {SECRET}"], {"GPUSCOPE_ENDPOINT_TOKEN": SECRET}, None,
     "header 'Authorization' given twice (--endpoint-header and GPUSCOPE_ENDPOINT_TOKEN)"),
    ([f"X-Key: {SECRET}"], {"GPUSCOPE_ENDPOINT_HEADERS": "X-Key: 2"}, None,
     "header 'X-Key' given twice (--endpoint-header and GPUSCOPE_ENDPOINT_HEADERS)"),
    ([], {"GPUSCOPE_ENDPOINT_TOKEN": SECRET}, "the --endpoint URL",
     "Basic auth (the --endpoint URL) and an Authorization header (GPUSCOPE_ENDPOINT_TOKEN) both given"),
])
def test_headers_refused_in_one_line_without_the_value(values, env, basic, said):
    if said is None:  # not an error: the whole rest is the value, kept
        assert SECRET in parse_headers(values, env)["X-A"]
        return
    with pytest.raises(ValueError) as e:
        parse_headers(values, env, basic_auth_from=basic)
    msg = str(e.value)
    assert said in msg and SECRET not in msg and "\n" not in msg and "\r" not in msg, msg


@pytest.mark.parametrize(("value", "problem"), [
    ("Bearer abc.def-ghi_~+/=", None), ("a\tb", None), ("", None),
    ("a\nb", "line break"), ("a\rb", "line break"), ("a\x1bb", "control character"), ("é", "outside ASCII"),
])
def test_header_value_problem(value, problem):
    got = header_value_problem(value)
    assert (got is None) if problem is None else (got is not None and problem in got)


@pytest.mark.parametrize(("text", "items"), [
    ("A: 1; B: 2", ["A: 1", "B: 2"]), ("Cookie: a=1; b=2", ["Cookie: a=1; b=2"]), ("A: 1;", ["A: 1"]),
    ("A: 1\nB: 2; c=3", ["A: 1", "B: 2; c=3"]), ("\n\nA: 1\n", ["A: 1"]), ("", []),
])
def test_env_header_items(text, items):
    assert env_header_items(text) == items


@pytest.mark.parametrize(("text", "token"), [
    ("abc\n", "abc"), ("  abc  ", "abc"), ("Bearer abc", "abc"), ("bearer  abc\r\n", "abc"), ("Bearerabc", "Bearerabc"),
])
def test_bearer_token(text, token):
    assert bearer_token(text) == token


# ------------------------------------------------------------------ failures as fixed phrases (pure)
def _chained(top: BaseException, *inner: BaseException) -> BaseException:
    """``top`` raised from ``inner[0]`` raised from ``inner[1]`` …, as httpx chains them."""
    exc = top
    for x in inner:
        exc.__cause__ = x
        exc = x
    return top


def _verify_error(code: int) -> ssl.SSLCertVerificationError:
    e = ssl.SSLCertVerificationError(1, f"certificate verify failed {SECRET}")
    e.verify_code = code
    return e


@pytest.mark.parametrize(("exc", "phrase"), [
    (_chained(httpx.ConnectError(SECRET), OSError(SECRET), ConnectionRefusedError(errno.ECONNREFUSED, SECRET)),
     "connection refused"),
    (_chained(httpx.ConnectError(SECRET), socket.gaierror(-2, SECRET)), "host name not found"),
    (_chained(httpx.ConnectError(SECRET), _verify_error(18)), "TLS error: self-signed certificate"),
    (_chained(httpx.ConnectError(SECRET), _verify_error(20)), "TLS error: certificate of an unknown issuer"),
    (_chained(httpx.ConnectError(SECRET), _verify_error(999)), "TLS error: certificate not trusted"),
    (_chained(httpx.ConnectError(SECRET), ssl.SSLError(1, SECRET)), "TLS error"),
    (_chained(httpx.ConnectError(SECRET), OSError(errno.EHOSTUNREACH, SECRET)), "host unreachable"),
    (httpx.ConnectError(SECRET), "cannot connect"),
    (httpx.LocalProtocolError(f"Illegal header value b'Bearer {SECRET}\\n'"), "bad header"),
    (UnicodeEncodeError("ascii", SECRET + "é", 9, 10, SECRET), "bad header"),
    (httpx.RemoteProtocolError(SECRET), "connection closed, or the answer is not HTTP"),
    (httpx.ReadError(SECRET), "connection lost"),
    (httpx.ProxyError(SECRET), "proxy error"),
    (httpx.TooManyRedirects(SECRET), "too many redirects"),
    (httpx.UnsupportedProtocol(SECRET), "redirected to a URL that is not http(s)"),
    (httpx.DecodingError(SECRET), "the answer could not be decoded"),
    (httpx.ReadTimeout(SECRET), "timed out"),
    (RuntimeError(SECRET), "request failed (RuntimeError)"),
])
def test_transport_failures_are_fixed_phrases(exc, phrase):
    """A transport exception's text quotes what it refused (httpx: the header's value, the token) or the URL:
    a reading says why by the exception's type only."""
    assert transport_reason(exc) == phrase
    if isinstance(exc, httpx.ConnectError):
        assert connect_reason(exc) == phrase


@pytest.mark.parametrize(("status", "said"), [
    (401, "probe: HTTP 401 (needs a token?)"), (403, "probe: HTTP 403 (token refused?)"), (501, "probe: HTTP 501"),
    (404, "probe: HTTP 404 (no such path or model?)"),
])
def test_probe_status_error(status, said):
    assert probe_status_error(status) == said


# ------------------------------------------------------------------ real loopback servers
class Vllm(HttpServer):
    """vLLM's /metrics (a captured exposition) for requests whose Authorization is ``want`` (any when None);
    POST (the probe) answered with ``post_status``. Every request's path and Authorization is kept."""

    def __init__(self, want: str | None = None, post_status: int = 501) -> None:
        self.seen: list[tuple[str, str, str | None]] = []
        srv = self

        class H(http.server.BaseHTTPRequestHandler):
            def _answer(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                srv.seen.append(("GET", self.path, self.headers.get("Authorization")))
                ok = want is None or self.headers.get("Authorization") == want
                if self.path.startswith("/v1/models"):
                    self._answer(200 if ok else 401, b'{"data": [{"id": "m"}]}' if ok else b"no")
                else:
                    self._answer(200 if ok else 401, VLLM if ok else b"no")

            def do_POST(self) -> None:
                srv.seen.append(("POST", self.path, self.headers.get("Authorization")))
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                self._answer(post_status, b'{"error": "not here"}')

            def log_message(self, *a: object) -> None:
                pass

        HttpServer.__init__(self, H)


@pytest.fixture
def vllm():
    s = Vllm()
    yield s
    s.close()


@pytest.mark.parametrize("headers", [{"Authorization": f"Bearer {SECRET}\n"},
                                     {"Authorization": f"Bearer X\r\nY: {SECRET}"},
                                     {"X-Key": f"{SECRET}é"}])
def test_a_header_httpx_refuses_is_said_without_its_value(vllm, headers):
    """The poller made without the start-up checks (as a library user would): httpx refuses the header and
    quotes it in its exception; the reading says "bad header", the poller thread lives on."""
    p = EndpointPoller([vllm.url], interval_s=0.2, headers=headers).start()
    try:
        r = wait_for(lambda: next((r for r in p.latest() if r.up is False), None), 20, "the endpoint marked down")
        assert r.error is not None and r.error.endswith("(bad header)") and SECRET not in repr(r), r
    finally:
        p.stop()


def test_the_query_of_a_url_without_a_path_is_sent(vllm):
    """``http://h:8000?token=t``: the query went missing when the URL had no path (metrics_url)."""
    p = EndpointPoller([f"{vllm.url}?token={SECRET}"], interval_s=0.2).start()
    try:
        wait_for(lambda: next((r for r in p.latest() if r.up and r.kind == "vllm"), None), 20, "the vLLM reading")
        assert p.latest()[0].url == f"{vllm.url}?token=<redacted>"
    finally:
        p.stop()
    assert ("GET", f"/metrics?token={SECRET}", None) in vllm.seen


@pytest.mark.parametrize(("post_status", "said"), [(501, "probe: HTTP 501"), (401, "probe: HTTP 401 (needs a token?)")])
def test_a_failing_probe_is_carried_in_the_reading(post_status, said):
    """vLLM's metrics served, the probe's POST refused (501; 401 as vLLM started with --api-key answers): the
    reading stays the server's (up, its kind, no error) and ``probe_error`` says why the probe failed; the
    probe's requests carry the URL's query."""
    srv = Vllm(post_status=post_status)
    p = EndpointPoller([f"{srv.url}/metrics?k=v"], interval_s=0.2, probe_every_s=0.2).start()
    try:
        r = wait_for(lambda: next((r for r in p.latest() if r.probe_error and r.kind == "vllm"), None), 20,
                     "a reading with the probe's failure")
        assert r.probe_error == said and r.up and r.error is None and not r.probe
    finally:
        p.stop()
        srv.close()
    assert ("POST", "/v1/chat/completions?k=v", None) in srv.seen


def test_a_failing_probe_of_a_server_without_metrics_says_why_on_its_line():
    """No metrics (404 on /metrics) and the probe refused: the reading's error is the probe's phrase too."""
    class NoMetrics(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_POST(self) -> None:
            self.do_GET()

        def log_message(self, *a: object) -> None:
            pass

    srv = HttpServer(NoMetrics)
    p = EndpointPoller([srv.url], interval_s=0.2, probe_every_s=0.2).start()
    try:
        r = wait_for(lambda: next((r for r in p.latest() if r.probe_error), None), 20, "the probe's failure")
        assert r.probe_error == "probe: HTTP 404 (no such path or model?)" and r.error == r.probe_error
    finally:
        p.stop()
        srv.close()


def test_probe_with_no_answer_says_so_by_a_fixed_phrase():
    """A listener that never answers: the probe's failure is its deadline, not httpx's text."""
    from gpuscope.sources.endpoint import probe_chat

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)

    async def go():
        async with httpx.AsyncClient(timeout=0.3) as c:
            return await probe_chat(c, f"http://127.0.0.1:{sock.getsockname()[1]}", "m", timeout_s=0.3)

    try:
        assert asyncio.run(go()).error == "probe: no answer in 0.3 s"
    finally:
        sock.close()


@pytest.mark.parametrize("how", ["file", "env"])
def test_basic_auth_from_a_file_or_the_environment_is_sent(tmp_path, how):
    """``--endpoint-user`` with ``--endpoint-password-file`` (a kubectl-made file: trailing newline) or
    ``GPUSCOPE_ENDPOINT_PASSWORD``: every request carries the Basic auth; no note about the process list."""
    from gpuscope.cli.options import SourceOptions

    want = "Basic " + base64.b64encode(f"bob:{SECRET}".encode()).decode()
    srv = Vllm(want=want)
    pw = tmp_path / "pw"
    pw.write_text(SECRET + "\n")
    opts = SourceOptions(simulate=None, interval=1.0, pcie_source="auto", endpoint=(srv.url,), endpoint_kind=None,
                         endpoint_header=(), endpoint_window=10.0, endpoint_timeout=2.0, endpoint_insecure=False,
                         probe=None, probe_model=None, endpoint_user="bob",
                         endpoint_password_file=str(pw) if how == "file" else None)
    opts = opts.checked(env={"GPUSCOPE_ENDPOINT_PASSWORD": f"{SECRET}\n"} if how == "env" else {})
    assert opts.notes == () and SECRET not in repr(opts)
    p = EndpointPoller(list(opts.targets), interval_s=0.2).start()
    try:
        wait_for(lambda: next((r for r in p.latest() if r.up and r.kind == "vllm"), None), 20, "the vLLM reading")
    finally:
        p.stop()
        srv.close()
    assert srv.seen and {a for _, _, a in srv.seen} == {want}


def test_poller_thread_survives_any_failure(vllm, monkeypatch):
    """An exception that is not httpx's (a bug in a transport, say) is this endpoint's failure, by type."""
    async def broken(*a, **kw):
        raise RuntimeError(SECRET)

    p = EndpointPoller([vllm.url], interval_s=0.2)
    monkeypatch.setattr(p, "_fetch", broken)
    p.start()
    try:
        r = wait_for(lambda: next((r for r in p.latest() if r.up is False), None), 20, "the endpoint marked down")
        assert r.error.endswith("(request failed (RuntimeError))") and SECRET not in r.error
        assert any(t.name == "gpuscope-endpoints" for t in threading.enumerate())
    finally:
        p.stop()
