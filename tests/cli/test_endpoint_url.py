"""--endpoint URLs that httpx only rejects at the first request are refused up front, in one line."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gpuscope.cli.endpoint_url import duplicate_problem, endpoint_url_problem, shown_in_error, with_basic_auth
from gpuscope.core.errors import GpuscopeError
from gpuscope.core.redact import split_endpoint


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
    ("http://h:8000?token=t", None),
    ("http://h:8000/m#frag", "no '#' part"),                # never sent: and in user info it hides the host
    ("http://eve:#HASHSEC@h:8000", "no '#' part"),         # a '#' in a password: write it %23
    ("http://eve:pa/ss@h:8000", "%2F"),                    # a '/' in a password: the port looks like 'pa'
    ("http://eve/ss@h:8000", "an '@' after the host"),     # would have polled host 'eve'
    ("http://eve:?QSEC@h:8000", "%3F"),
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
    assert p.returncode == 2, p.stderr
    assert p.stderr.count("\n") == 1 and p.stderr.startswith("gpuscope: error: --endpoint"), p.stderr
    assert "Traceback" not in p.stderr and "internal error" not in p.stderr
    assert not out.exists()


def _source(*urls: str, headers: tuple[str, ...] = (), user: str | None = None, password_file: str | None = None):
    from gpuscope.cli.options import SourceOptions

    return SourceOptions(simulate=None, interval=1.0, pcie_source="auto", endpoint=urls, endpoint_kind=None,
                         endpoint_header=headers, endpoint_window=10.0, endpoint_timeout=2.0,
                         endpoint_insecure=False, probe=None, probe_model=None, endpoint_user=user,
                         endpoint_password_file=password_file)


SEC = "PWSECRET"


@pytest.mark.parametrize(("url", "shown"), [
    ("http://h:8000", "http://h:8000"),
    (f"http://eve:#{SEC}@h:8000", "http://…@h:8000"),               # urlsplit: user info 'eve:', fragment the rest
    (f"http://eve:a/{SEC}@h:99999/m", "http://…@h:99999/m"),
    (f"http://eve:{SEC}@a@h", "http://…@h"),                         # to the last '@'
    (f"http://h:8000/m?token={SEC}#x", "http://h:8000/m?…"),
    (f"eve:{SEC}@localhost:8000", "…@localhost:8000"),               # no scheme
    (f"http://h:1/\x1b[2J{SEC}", None),                             # escapes shown as text, cut
])
def test_shown_in_error(url, shown):
    got = shown_in_error(url)
    assert "\x1b" not in got and len(got) <= 80
    if shown is not None:
        assert got == shown
    else:
        assert got.startswith("http://h:1/")


@pytest.mark.parametrize("url", [f"http://eve:#{SEC}@h:8000", f"http://eve:{SEC}/x@h:8000", f"http://eve:?{SEC}@h:8000",
                                 f"http://eve:{SEC}#@h:99999", f"http://eve:{SEC}@h:99999", f"http://eve:{SEC} x@h:0"])
def test_a_password_that_breaks_the_url_is_never_quoted(url):
    """A password with '#', '?' or '/' is not user info to a URL parser: the refusal quoted it whole
    ("--endpoint 'http://eve:#HASHSEC@…': the port must be…"); now the flag, the host, and how to write it."""
    with pytest.raises(GpuscopeError) as e:
        _source(url).checked(env={})
    msg = str(e.value)
    assert SEC not in msg and "eve" not in msg and msg.startswith("--endpoint 'http://…@h") and "\n" not in msg, msg
    assert e.value.exit_status == 2


@pytest.mark.parametrize(("urls", "problem"), [
    (("http://h:8000", "http://h:9000"), None),
    (("http://a:x@h:8000", "http://b:y@h:8000"), "--endpoint given twice for http://h:8000 (they differ only in credentials)"),
    (("http://h:8000?token=a", "http://h:8000?token=b"),
     "--endpoint given twice for http://h:8000?token=<redacted> (they differ only in credentials)"),
    (("http://h:8000", "http://h:8000"), "--endpoint given twice for http://h:8000"),
    (("http://a:x@h:8000", "http://h:8000"), "--endpoint given twice for http://h:8000 (they differ only in credentials)"),
])
def test_duplicate_problem(urls, problem):
    """Two URLs that differ only by credentials were two endpoints with one label: duplicate Prometheus series."""
    assert duplicate_problem([split_endpoint(u) for u in urls]) == problem


def test_endpoints_that_differ_only_in_credentials_are_refused():
    with pytest.raises(GpuscopeError) as e:
        _source(f"http://a:{SEC}@h:8000", f"http://b:{SEC}2@h:8000").checked(env={})
    assert str(e.value) == "--endpoint given twice for http://h:8000 (they differ only in credentials)"


@pytest.mark.parametrize(("urls", "user", "pw_file", "env", "auth", "source"), [
    (("http://h:1",), None, None, {}, [None], None),
    (("http://h:1",), None, None, {"GPUSCOPE_ENDPOINT_PASSWORD": SEC}, None, "needs a user name"),
    (("http://h:1",), "bob", None, {}, [("bob", "")], "--endpoint-user"),
    (("http://h:1", "http://h:2"), "bob", None, {"GPUSCOPE_ENDPOINT_PASSWORD": f" {SEC}\n"},
     [("bob", SEC), ("bob", SEC)], "GPUSCOPE_ENDPOINT_PASSWORD"),
    (("http://bob@h:1",), None, None, {"GPUSCOPE_ENDPOINT_PASSWORD": SEC}, [("bob", SEC)], "GPUSCOPE_ENDPOINT_PASSWORD"),
    (("http://bob@h:1",), None, "FILE", {}, [("bob", SEC)], "--endpoint-password-file"),
    ((f"http://bob:{SEC}@h:1",), None, None, {}, [("bob", SEC)], "the --endpoint URL"),
    # the same thing from two places: refused, not silently decided
    ((f"http://bob:{SEC}@h:1",), None, None, {"GPUSCOPE_ENDPOINT_PASSWORD": "x"}, None,
     "--endpoint http://h:1 has a password in it and GPUSCOPE_ENDPOINT_PASSWORD gives one"),
    (("http://bob@h:1",), "carol", None, {}, None, "--endpoint http://h:1 has a user name in it and --endpoint-user"),
    (("http://h:1",), "bob", "FILE", {"GPUSCOPE_ENDPOINT_PASSWORD": "x"}, None, "the endpoint password given twice"),
    (("http://h:1",), "bo:b", None, {}, None, "--endpoint-user: a user name cannot"),
    (("http://h:1",), "bob", "MISSING", {}, None, "MISSING: No such file"),
    (("http://h:1",), "bob", "EMPTY", {}, None, "holds no password"),
    (("http://h:1",), "bob", None, {"GPUSCOPE_ENDPOINT_PASSWORD": " \n"}, None, "holds no password"),
])
def test_with_basic_auth(tmp_path, urls, user, pw_file, env, auth, source):
    (tmp_path / "FILE").write_text(SEC + "\n")
    (tmp_path / "EMPTY").write_text("\n")
    path = None if pw_file is None else str(tmp_path / pw_file)
    targets = [split_endpoint(u) for u in urls]
    if auth is None:
        with pytest.raises(ValueError) as e:
            with_basic_auth(targets, user, path, env)
        assert source in str(e.value) and SEC not in str(e.value) and "\n" not in str(e.value), str(e.value)
        return
    got = with_basic_auth(targets, user, path, env)
    assert [t.auth for t in got.targets] == auth and got.source == source
    assert [t.url for t in got.targets] == [split_endpoint(u).url for u in urls]
    assert bool(got.notes) == any("@" in u for u in urls)  # credentials in a URL: said, once per URL


def test_a_password_in_the_url_is_said_to_be_in_the_process_list():
    """The note no longer claims the password is "never shown": every local user can read it with ps."""
    opts = _source(f"http://bob:{SEC}@h:1").checked(env={})
    (note,) = opts.notes
    assert "process list" in note and "--endpoint-password-file" in note and "never shown" not in note
    assert SEC not in note and "bob" not in note


@pytest.mark.parametrize(("url", "headers", "env", "said"), [
    (f"http://bob:{SEC}@h:1", ("Authorization: Bearer x",), {},
     "Basic auth (the --endpoint URL) and an Authorization header (--endpoint-header) both given: give one"),
    ("http://h:1", ("Authorization: Bearer x",), {"GPUSCOPE_ENDPOINT_PASSWORD": SEC},
     "needs a user name"),
    ("http://bob@h:1", (), {"GPUSCOPE_ENDPOINT_PASSWORD": SEC, "GPUSCOPE_ENDPOINT_TOKEN": "t"},
     "Basic auth (GPUSCOPE_ENDPOINT_PASSWORD) and an Authorization header (GPUSCOPE_ENDPOINT_TOKEN) both given"),
])
def test_basic_auth_beside_an_authorization_header_is_refused(url, headers, env, said):
    """URL user info silently beat an Authorization header (httpx's auth= wins): now the clash is refused."""
    with pytest.raises(GpuscopeError) as e:
        _source(url, headers=headers).checked(env=env)
    assert said in str(e.value) and SEC not in str(e.value) and e.value.exit_status == 2


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
