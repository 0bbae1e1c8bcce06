"""--endpoint URLs that httpx only rejects at the first request are refused up front, in one line."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gpuscope.cli.endpoint_url import endpoint_url_problem


@pytest.mark.parametrize(("url", "problem"), [
    ("http://127.0.0.1:8000", None),
    ("https://[::1]:8000/metrics", None),
    ("HTTP://gpu-host", None),                      # schemes are case-insensitive
    ("http://user@h:80/x?y=1", None),
    ("http://[::1", "not a valid URL"),             # was: internal error: ValueError
    ("http://h:99999", "port must be a number"),    # was: poller thread died, exit 0
    ("http://h:abc", "port must be a number"),      # was: poller thread died, exit 0
    ("http://h:0", "port must be a number"),
    ("http://h:", "port must be a number"),
    ("http://", "no host"),                         # was: polled forever, "missing protocol"
    ("http:///metrics", "no host"),
    ("http://a b", "spaces"),
    ("http://a\tb", "spaces"),
    ("ftp://x", "expected http://HOST:PORT"),
    ("localhost:8000", "expected http://HOST:PORT"),
    ("http:/x", "expected http://HOST:PORT"),
])
def test_endpoint_url_problem(url: str, problem: str | None) -> None:
    got = endpoint_url_problem(url)
    if problem is None:
        assert got is None
    else:
        assert got is not None and problem in got


@pytest.mark.slow
@pytest.mark.parametrize("url", ["http://127.0.0.1:99999", "http://[::1", "http://"])
def test_record_refuses_bad_endpoint_url(url: str, tmp_path) -> None:
    out = tmp_path / "r.jsonl.gz"
    p = subprocess.run([sys.executable, "-m", "gpuscope", "record", "-o", str(out), "--simulate", "healthy-gen4",
                        "--duration", "2", "--endpoint", url], capture_output=True, text=True, timeout=120)
    assert p.returncode == 1, p.stderr
    assert p.stderr.count("\n") == 1 and p.stderr.startswith("gpuscope: error: --endpoint"), p.stderr
    assert "Traceback" not in p.stderr and "internal error" not in p.stderr
    assert not out.exists()


def _source(*urls: str, headers: tuple[str, ...] = ()):
    from gpuscope.cli.options import SourceOptions

    return SourceOptions(simulate=None, interval=1.0, pcie_source="auto", endpoint=urls, endpoint_kind=None,
                         endpoint_header=headers, endpoint_window=10.0, endpoint_timeout=2.0,
                         endpoint_insecure=False, probe=None, probe_model=None)


@pytest.mark.parametrize(("url", "public", "auth"), [
    ("http://alice:S3cretPW@h:8000", "http://h:8000", ("alice", "S3cretPW")),
    ("https://tok@h/metrics", "https://h/metrics", ("tok", "")),
    ("http://h:8000", "http://h:8000", None),
])
def test_checked_keeps_the_credentials_apart_from_the_url(url: str, public: str, auth) -> None:
    """After the check the options hold the public URL only; the credentials travel apart (``targets``),
    out of the repr, and a second check keeps them (the live view checks the options it was given)."""
    opts = _source(url, headers=("X-Api-Key: K3y",)).checked(env={})
    again = opts.checked(env={})
    for o in (opts, again):
        assert o.endpoint == (public,) and [t.auth for t in o.targets] == [auth]
        assert "S3cret" not in repr(o) and "K3y" not in repr(o)
    assert opts.headers == {"X-Api-Key": "K3y"}


@pytest.mark.parametrize("url", ["http://alice:S3cretPW@h:99999", "http://alice:S3cretPW@[::1", "ftp://alice:S3cretPW@h",
                                 "http://alice:S3cretPW@"])
def test_a_refused_endpoint_url_is_quoted_without_its_password(url: str) -> None:
    from gpuscope.core.errors import GpuscopeError

    with pytest.raises(GpuscopeError) as e:
        _source(url).checked(env={})
    assert "S3cretPW" not in str(e.value) and "alice" not in str(e.value) and "--endpoint" in str(e.value)


@pytest.mark.slow
def test_basic_auth_from_the_url_is_sent_by_the_poller() -> None:
    """A real server that answers only with the right Basic auth: the poller's reading is up, and its URL
    is the public one."""
    import base64
    import http.server
    import threading

    from helpers import FIXTURES, until

    from gpuscope.sources.endpoint import EndpointPoller

    body = (FIXTURES / "inference" / "vllm_v1.txt").read_bytes()
    want = "Basic " + base64.b64encode(b"alice:p@ss:w").decode()
    seen: list[str | None] = []

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.headers.get("Authorization"))
            ok = seen[-1] == want
            self.send_response(200 if ok else 401)
            self.end_headers()
            self.wfile.write(body if ok else b"no")

        def log_message(self, *a: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    port = httpd.server_address[1]
    opts = _source(f"http://alice:p%40ss%3Aw@127.0.0.1:{port}").checked(env={})
    poller = EndpointPoller(list(opts.targets), interval_s=0.2).start()
    try:
        assert until(lambda: any(r.up and r.kind == "vllm" for r in poller.latest()), 20), poller.latest()
        assert {r.url for r in poller.latest()} == {f"http://127.0.0.1:{port}"}
    finally:
        poller.stop()
        httpd.shutdown()
        httpd.server_close()
    assert seen and set(seen) == {want}  # every request carried it, decoded from the URL's escapes


@pytest.mark.parametrize("url", ["mqtt://bob:S3cretPW@", "ftp://bob:S3cretPW@h", "mqtt://bob:S3cretPW@h:1883",
                                 "mqtt://bob:S3cretPW@h:x"])
def test_a_refused_broker_url_is_quoted_without_its_password(url: str) -> None:
    from gpuscope.sources.mqtt import BrokerError, parse_broker

    with pytest.raises(BrokerError) as e:
        parse_broker(url, env={})
    assert "S3cretPW" not in str(e.value) and "\n" not in str(e.value)
