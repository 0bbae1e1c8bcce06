"""Secure serving of the exporter, as node_exporter's users configure it: ``--web-config`` in the exporter-toolkit
format (TLS, client CA, basic auth with bcrypt), gzip, honest answers to plain HTTP on the TLS port, and hang-ups
that print nothing (slow clients: test_exporter_slow_clients.py).

Real parts throughout: certificates made by the ``openssl`` binary, a real HTTPS server on loopback, real
clients (httpx, raw sockets), the agent as a subprocess with its stderr captured, and a real Prometheus
scraping over TLS with basic auth.
"""

from __future__ import annotations

import base64
import gzip
import os
import re
import shutil
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time
import urllib.parse
from pathlib import Path

import bcrypt
import httpx
import pytest
from helpers import run_frames, sim_source, stop_prometheus, wait_for

from gpuscope.core.session import Session
from gpuscope.outputs.exporter_http import GzipCache, san_allowed, wants_gzip
from gpuscope.outputs.prometheus import PrometheusExporter, SamplerHealth
from gpuscope.outputs.webconfig import BasicAuth, WebConfigError, load_web_config, parse, parse_basic

needs_openssl = pytest.mark.skipif(shutil.which("openssl") is None, reason="the openssl binary is not installed")
needs_prometheus = pytest.mark.skipif(shutil.which("prometheus") is None,
                                      reason="the prometheus binary is not installed (Debian: apt-get install prometheus)")

PASSWORD = "s3cret-scraper"


def _hash(password: str, cost: int = 4) -> str:
    """A bcrypt hash (cost 4, bcrypt's minimum, keeps the tests fast; the format is the same as cost 10)."""
    return bcrypt.hashpw(password.encode(), bcrypt.gensalt(cost)).decode()


# ---- certificates, made by openssl ----

def _openssl(*args: str, cwd: Path) -> None:
    p = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr


def _ca(d: Path, name: str) -> None:
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
             f"{name}.key", "-out", f"{name}.crt", "-days", "2", "-subj", f"/CN={name}",
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)


def _leaf(d: Path, name: str, ca: str, sans: str, usage: str) -> None:
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", f"{name}.key",
             "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=d)
    (d / f"{name}.ext").write_text(f"subjectAltName={sans}\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\n"
                                   f"extendedKeyUsage={usage}\nauthorityKeyIdentifier=keyid,issuer\n")
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key", "-CAcreateserial",
             "-out", f"{name}.crt", "-days", "2", "-extfile", f"{name}.ext", cwd=d)


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Path:
    """A server CA and its server certificate (localhost, 127.0.0.1); a client CA with two client certificates
    (SANs scraper.example and other.example); a rogue CA with a client certificate of its own."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl binary is not installed")
    d = tmp_path_factory.mktemp("pki")
    _ca(d, "ca")
    _leaf(d, "server", "ca", "DNS:localhost,IP:127.0.0.1", "serverAuth")
    _ca(d, "clientca")
    _leaf(d, "client", "clientca", "DNS:scraper.example", "clientAuth")
    _leaf(d, "other", "clientca", "DNS:other.example", "clientAuth")
    _ca(d, "rogue")
    _leaf(d, "rogueclient", "rogue", "DNS:scraper.example", "clientAuth")
    return d


def _write(d: Path, text: str, name: str = "web.yml") -> str:
    p = d / name
    p.write_text(text)
    return str(p)


def _client_ctx(pki: Path, cert: str | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    if cert is not None:
        ctx.load_cert_chain(str(pki / f"{cert}.crt"), str(pki / f"{cert}.key"))
    return ctx


def _exporter(web=None, max_connections: int | None = None) -> PrometheusExporter:  # noqa: ANN001
    src = sim_source("h200-nvswitch-8", at=20.0)
    session = Session(src.inventory, interval_s=1.0, history_s=60)
    for f in run_frames(src, 20.0, 24.0):
        session.ingest(f)
    src.close()
    ex = PrometheusExporter(("127.0.0.1", 0), src.inventory, web=web)
    ex.update(session.last_frame, session.findings.active, SamplerHealth(ticks=1))
    if max_connections is not None:
        import gpuscope.outputs.prometheus as prom

        real = prom.make_server
        prom.make_server = lambda addr, exp, web: real(addr, exp, web, max_connections)  # type: ignore[assignment]
        try:
            return ex.start()
        finally:
            prom.make_server = real
    return ex.start()


# ---- small pure functions, as tables ----

@pytest.mark.parametrize("header,want", [
    (None, False), ("", False), ("gzip", True), ("GZIP", True), ("x-gzip", True), ("deflate, gzip;q=1.0", True),
    ("gzip;q=0", False), ("gzip; q=0.0", False), ("identity", False), ("*", True), ("*;q=0", False),
    ("gzip;q=0, *", False), ("br, *;q=0.1", True), ("gzip;q=nope", False), ("deflate", False),
    ("gzip, deflate, br, zstd", True),
])
def test_wants_gzip(header, want):
    assert wants_gzip(header) is want


def _basic(raw: bytes) -> str:
    return "Basic " + base64.b64encode(raw).decode()


@pytest.mark.parametrize("header,want", [
    (None, None), ("", None), (_basic(b"prom:pw"), ("prom", b"pw")), (_basic(b"prom:p:w"), ("prom", b"p:w")),
    ("basic " + base64.b64encode(b"a:").decode(), ("a", b"")), (_basic(b"nocolon"), None),
    ("Bearer abc", None), ("Basic !!!notbase64", None), ("Basic", None), (_basic(b"\xff:x"), None),
    ("Basic " + base64.b64encode("é:pw".encode()).decode(), ("é", b"pw")), ("Basic é", None),
])
def test_parse_basic(header, want):
    assert parse_basic(header) == want


@pytest.mark.parametrize("cert,want", [
    ({"subjectAltName": (("DNS", "scraper.example"),)}, True),
    ({"subjectAltName": (("DNS", "other.example"), ("IP Address", "10.0.0.1"))}, True),
    ({"subjectAltName": (("DNS", "nope.example"),)}, False),
    ({"subject": ((("commonName", "scraper.example"),),)}, False),  # the CN is not a SAN
    (None, False), ({}, False),
])
def test_san_allowed(cert, want):
    assert san_allowed(cert, frozenset({"scraper.example", "10.0.0.1"})) is want


def test_gzip_cache_compresses_once_per_body():
    c = GzipCache()
    body = b"DCGM_FI_DEV_POWER_USAGE 1\n" * 1000
    a, b = c.of(body), c.of(body)
    assert a is b and c.compressions == 1 and gzip.decompress(a) == body and len(a) < len(body) / 10
    body2 = bytes(bytearray(body))  # equal but another object: a new frame's body
    assert body2 is not body
    assert gzip.decompress(c.of(body2)) == body and c.compressions == 2


# ---- the parser: what is accepted, and the one line for what is not ----

H = "$2y$10$X0h1gDsPszWURQaxFh.zoubFi6DXncSjhoQNJgRrnGs7EsimhC7zG"  # the toolkit docs' example format


@pytest.mark.parametrize("text", [
    "", "# nothing\n", "basic_auth_users:\n", "tls_server_config:\n",
    f"basic_auth_users:\n  prom: '{H}'\n",
    "tls_server_config:\n  cert_file: a.crt\n  key_file: a.key\n  min_version: TLS13\n",
    "tls_server_config:\n  cert_file: a.crt\n  key_file: a.key\n  client_auth_type: RequireAndVerifyClientCert\n"
    "  client_ca_file: ca.crt\n  client_allowed_sans: [scraper.example]\n",
    "http_server_config:\n  http2: false\n  headers:\n    X-Frame-Options: deny\n    X-Content-Type-Options: nosniff\n",
    "tls_server_config:\n  cert_file: a.crt\n  key_file: a.key\n  cipher_suites: []\n",  # empty: Go's default
])
def test_parse_accepts(text):
    parse(text)


@pytest.mark.parametrize("text,msg", [
    ("- a\n- b\n", "the file: expected a mapping"),
    ("tls_config:\n  cert_file: x\n", "unknown key 'tls_config'"),
    ("tls_server_config:\n  cert_fil: x\n", "tls_server_config: unknown key 'cert_fil'"),
    ("http_server_config:\n  http3: true\n", "http_server_config: unknown key 'http3'"),
    ("tls_server_config:\n  cert_file: a.crt\n", "key_file is missing"),
    ("tls_server_config:\n  key_file: a.key\n", "cert_file is missing"),
    ("tls_server_config:\n  cert_file: 3\n  key_file: a.key\n", "cert_file: expected a non-empty string"),
    ("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: RequireAnyClientCert\n",
     "accepts certificates nobody verified"),
    ("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: Always\n",
     "client_auth_type 'Always': expected one of"),
    ("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: RequireAndVerifyClientCert\n",
     "needs client_ca_file"),
    ("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_ca_file: ca.crt\n", "client_auth_type is NoClientCert"),
    ("tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS13\n  max_version: TLS12\n",
     "min_version TLS13 is above max_version TLS12"),
    ("tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: SSL3\n", "min_version 'SSL3'"),
    ("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_allowed_sans: [x]\n",
     "client_allowed_sans needs client_auth_type RequireAndVerifyClientCert"),
    ("tls_server_config:\n  cert: '-----BEGIN CERTIFICATE-----'\n", "inline certificates are not supported"),
    ("tls_server_config:\n  cert_file: a\n  key_file: b\n  cipher_suites: [TLS_AES_128_GCM_SHA256]\n",
     "Go cipher-suite names are not supported"),
    ("rate_limit:\n  interval: 1s\n  burst: 5\n", "rate_limit: not supported"),
    ("basic_auth_users:\n  prom: hunter2\n", "basic_auth_users.prom: the password is not a bcrypt hash"),
    ("basic_auth_users:\n  prom: 42\n", "not a bcrypt hash"),
    (f"basic_auth_users:\n  'a:b': '{H}'\n", "contains ':'"),
    (f"basic_auth_users:\n  prom: '{H}'\n  prom: '{H}'\n", "duplicate key 'prom'"),
    ("basic_auth_users: [a, b]\n", "basic_auth_users: expected a mapping, got list"),
    ("http_server_config:\n  headers:\n    X-Powered-By: me\n", "'X-Powered-By' cannot be set"),
    ("http_server_config:\n  headers:\n    X-Frame-Options: allow\n", "X-Frame-Options 'allow': expected one of"),
    ("http_server_config:\n  http2: yes please\n", "http2: expected true or false"),
    ("tls_server_config: {cert_file: a\n", "not valid YAML (line"),
    ("a: b: c\n", "not valid YAML (line 1"),
    ("? [a]\n: b\n", "key must be a string"),
    ("x: !!python/object:os.system ls\n", "not valid YAML"),  # a safe loader: no Python tags
    ("\x1b[2Jevil: 1\n", "unacceptable character"),
    ('"\\e[2Jevil": 1\n', "unknown key 'evil'"),  # an escape sequence in a key: cleaned from the line
])
def test_parse_refuses_in_one_line(text, msg):
    with pytest.raises(ValueError) as e:
        parse(text)
    line = str(e.value)
    assert msg in line and "\n" not in line and "\x1b" not in line


# ---- loading: files, PEM, keys ----

def _tls_yml(pki: Path, extra: str = "", cert: str = "server.crt", key: str = "server.key") -> str:
    return f"tls_server_config:\n  cert_file: {cert}\n  key_file: {key}\n{extra}"


def test_load_resolves_files_relative_to_the_config(pki):
    web = load_web_config(_write(pki, _tls_yml(pki, "  client_auth_type: RequireAndVerifyClientCert\n"
                                                    "  client_ca_file: clientca.crt\n") +
                                 f"basic_auth_users:\n  prom: '{_hash(PASSWORD)}'\n"))
    assert web.tls is not None and web.tls.verify_mode == ssl.CERT_REQUIRED and web.auth is not None
    assert web.describe() == "TLS, client certificates, basic auth"


@pytest.mark.parametrize("setup,msg", [
    (lambda d: _tls_yml(d, cert="missing.crt"), "/missing.crt': no such file"),
    (lambda d: _tls_yml(d, cert="notpem.crt"), "not a PEM certificate"),
    (lambda d: _tls_yml(d, key="server.crt"), "key_file"),  # a certificate where the key should be
    (lambda d: _tls_yml(d, key="client.key"), "the key does not match the certificate"),
    (lambda d: _tls_yml(d, key="encrypted.key"), "is encrypted"),
    (lambda d: _tls_yml(d, cert="."), "is a folder"),
    (lambda d: _tls_yml(d, "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: notpem.crt\n"),
     "client_ca_file"),
    (lambda d: _tls_yml(d, "  client_auth_type: RequireAndVerifyClientCert\n  client_ca: nope\n"),
     "client_ca: not a PEM certificate"),
])
def test_load_refuses_bad_files_in_one_line(pki, setup, msg):
    (pki / "notpem.crt").write_text("hello\n")
    if not (pki / "encrypted.key").exists():
        _openssl("ec", "-in", "server.key", "-out", "encrypted.key", "-aes256", "-passout", "pass:pw", cwd=pki)
    path = _write(pki, setup(pki), "bad.yml")
    with pytest.raises(WebConfigError) as e:
        load_web_config(path)
    line = str(e.value)
    assert line.startswith(f"--web-config {path}: ") and msg in line and "\n" not in line, line


def test_a_config_padded_past_the_limit_is_refused_not_cut(pki):
    """A config is never read in part: 1 MiB of comments before the TLS and auth sections would have left a
    prefix with neither (the exporter then served in the open, exit 0)."""
    good = _tls_yml(pki) + f"basic_auth_users:\n  prom: '{_hash(PASSWORD)}'\n"
    padded = _write(pki, ("# " + "x" * 98 + "\n") * 10500 + good, "padded.yml")
    with pytest.raises(WebConfigError, match=r"padded\.yml: larger than 1 MiB"):
        load_web_config(padded)
    (pki / "huge.crt").write_bytes(b"-----BEGIN CERTIFICATE-----\n" + b"A" * (1 << 20))
    with pytest.raises(WebConfigError, match=r"larger than 1 MiB \(not a PEM file\)"):
        load_web_config(_write(pki, _tls_yml(pki, cert="huge.crt"), "hugecert.yml"))


def test_load_missing_and_unreadable_config(tmp_path):
    with pytest.raises(WebConfigError, match=r"no such file"):
        load_web_config(str(tmp_path / "nope.yml"))
    os.mkfifo(tmp_path / "fifo.yml")  # opening it would wait for a writer: the exporter never started
    with pytest.raises(WebConfigError, match=r"fifo\.yml: is a named pipe \(FIFO\), not a file"):
        load_web_config(str(tmp_path / "fifo.yml"))
    (tmp_path / "bin.yml").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(WebConfigError, match=r"not UTF-8"):
        load_web_config(str(tmp_path / "bin.yml"))


@pytest.mark.parametrize("missing,text,msg", [
    ("yaml", "basic_auth_users:\n", "reading it needs PyYAML (pip install 'gpuscope-inference[web]')"),
    ("bcrypt", f"basic_auth_users:\n  prom: '{H}'\n", "basic_auth_users needs the bcrypt package"),
])
def test_without_the_web_extra_one_line(tmp_path, monkeypatch, missing, text, msg):
    from gpuscope.outputs import webconfig

    monkeypatch.setitem(sys.modules, missing, None)  # import fails, as where the package is not installed
    webconfig._strict_loader.cache_clear()
    try:
        with pytest.raises(WebConfigError, match=re.escape(msg)):
            load_web_config(_write(tmp_path, text))
    finally:
        webconfig._strict_loader.cache_clear()


def test_basic_auth_caches_successes_only():
    auth = BasicAuth({"prom": _hash(PASSWORD, 6).encode()})
    good = _basic(f"prom:{PASSWORD}".encode())
    assert all(auth.check(good) for _ in range(20)) and auth.checks == 1  # bcrypt once, then the cache
    bad = _basic(b"prom:wrong")
    assert not auth.check(bad) and not auth.check(bad) and auth.checks == 3  # failures are never cached
    assert not auth.check(_basic(f"nobody:{PASSWORD}".encode()))  # an unknown user: a (dummy) check too
    assert not auth.check(_basic(b"prom:" + b"x" * 100)) and not auth.check(None)  # over 72 bytes: refused


def test_the_dummy_hash_costs_what_a_real_one_does():
    """Unknown users are checked against a dummy hash so they take as long as known ones: it must be valid."""
    from gpuscope.outputs import webconfig

    assert webconfig.BCRYPT_HASH.fullmatch(webconfig._DUMMY.decode())
    assert bcrypt.checkpw(b"anything", webconfig._DUMMY) is False


# ---- a real HTTPS server and real clients ----

def test_https_basic_auth_and_gzip(pki):
    web = load_web_config(_write(pki, _tls_yml(pki) + f"basic_auth_users:\n  prom: '{_hash(PASSWORD)}'\n"
                                 "http_server_config:\n  headers:\n    X-Content-Type-Options: nosniff\n"))
    ex = _exporter(web)
    try:
        assert ex.url.startswith("https://127.0.0.1:")
        with httpx.Client(verify=_client_ctx(pki), timeout=10) as c:
            r = c.get(ex.url)  # no credentials
            assert r.status_code == 401 and r.headers["WWW-Authenticate"].startswith("Basic")
            assert r.headers["Server"] == "gpuscope"  # no version, no Python, no trailing space
            assert "DCGM" not in r.text
            r = c.get(ex.url, auth=("prom", "wrong"))
            assert r.status_code == 401 and r.headers["WWW-Authenticate"].startswith("Basic")
            assert c.get(ex.url, auth=("other", PASSWORD)).status_code == 401
            assert c.head(ex.url).status_code == 401
            r = c.post(ex.url)  # the server closes after any other method: its 401 says so, or the client reuses a
            assert r.status_code == 401 and r.headers.get("Connection") == "close"  # dead connection (CI, under load)
            assert c.get(ex.url.replace("/metrics", "/x")).status_code == 401  # auth before anything else
            r = c.get(ex.url, auth=("prom", PASSWORD), headers={"Accept-Encoding": "gzip"})
            assert r.status_code == 200 and r.headers["Content-Encoding"] == "gzip"
            assert r.headers["X-Content-Type-Options"] == "nosniff" and r.headers["Vary"] == "Accept-Encoding"
            assert int(r.headers["Content-Length"]) < len(r.content) / 5  # on the wire vs decoded
            assert r.text.count("DCGM_FI_DEV_POWER_USAGE{") == 8
            r2 = c.get(ex.url, auth=("prom", PASSWORD), headers={"Accept-Encoding": "identity"})
            assert "Content-Encoding" not in r2.headers and r2.content == r.content == ex.body()
            assert int(r2.headers["Content-Length"]) == len(ex.body())
            assert c.post(ex.url, auth=("prom", PASSWORD)).status_code == 405
        with httpx.Client(timeout=10) as c, pytest.raises(httpx.ConnectError):  # the system CAs don't know ours
            c.get(ex.url)
    finally:
        ex.stop()


def test_mutual_tls_with_a_client_ca_and_allowed_sans(pki):
    web = load_web_config(_write(pki, _tls_yml(pki, "  client_auth_type: RequireAndVerifyClientCert\n"
                                                    "  client_ca_file: clientca.crt\n"
                                                    "  client_allowed_sans: [scraper.example]\n")))
    ex = _exporter(web)
    try:
        with httpx.Client(verify=_client_ctx(pki, "client"), timeout=10) as c:
            r = c.get(ex.url)
            assert r.status_code == 200 and "DCGM_FI_DEV_POWER_USAGE" in r.text
        for who in (None, "rogueclient", "other"):  # no certificate; another CA's; the right CA, a SAN not allowed
            with httpx.Client(verify=_client_ctx(pki, who), timeout=10) as c, pytest.raises(httpx.TransportError):
                c.get(ex.url)
    finally:
        ex.stop()


def test_verify_client_cert_if_given(pki):
    web = load_web_config(_write(pki, _tls_yml(pki, "  client_auth_type: VerifyClientCertIfGiven\n"
                                                    "  client_ca_file: clientca.crt\n")))
    ex = _exporter(web)
    try:
        for who in (None, "client"):
            with httpx.Client(verify=_client_ctx(pki, who), timeout=10) as c:
                assert c.get(ex.url).status_code == 200
        with httpx.Client(verify=_client_ctx(pki, "rogueclient"), timeout=10) as c, pytest.raises(httpx.TransportError):
            c.get(ex.url)
    finally:
        ex.stop()


def test_plain_http_gzip_without_a_web_config():
    ex = _exporter()
    try:
        for _ in range(5):
            r = httpx.get(ex.url, headers={"Accept-Encoding": "gzip"}, timeout=10)
            assert r.status_code == 200 and r.headers["Content-Encoding"] == "gzip" and r.content == ex.body()
            assert int(r.headers["Content-Length"]) < len(ex.body()) / 5
        assert ex._server is not None and ex._server.RequestHandlerClass.gzip_cache.compressions == 1  # type: ignore[attr-defined]
        ex.update(*ex._state[1:4])  # type: ignore[arg-type]  # a new frame: compressed once more
        assert httpx.get(ex.url, headers={"Accept-Encoding": "gzip"}, timeout=10).content == ex.body()
        assert ex._server.RequestHandlerClass.gzip_cache.compressions == 2  # type: ignore[attr-defined]
    finally:
        ex.stop()


def test_a_kept_alive_gzip_scrape_does_not_wait_for_a_delayed_ack():
    """Headers and body go out in one write: written apart, a small (gzipped) answer waited ~40 ms on Nagle and
    the client's delayed ACK, on every scrape of a kept-alive connection (Prometheus keeps its connections)."""
    import http.client
    import statistics

    ex = _exporter()
    host, port = ex.address
    conn = http.client.HTTPConnection(host, port, timeout=10)
    try:
        times = []
        for _ in range(15):
            t0 = time.perf_counter()
            conn.request("GET", "/metrics", headers={"Accept-Encoding": "gzip"})
            r = conn.getresponse()
            assert r.status == 200 and gzip.decompress(r.read()) == ex.body()
            times.append(time.perf_counter() - t0)
        assert statistics.median(times) < 0.025, times
    finally:
        conn.close()
        ex.stop()


def test_an_http_0_9_request_gets_the_body_alone():
    """``GET /metrics`` without a version (HTTP/0.9, or half a request line cut by a hang-up): no headers."""
    ex = _exporter()
    try:
        with socket.create_connection(ex.address, timeout=5) as s:
            s.sendall(b"GET /metrics\r\n\r\n")  # (Python's server reads headers even then)
            data = b""
            while chunk := s.recv(65536):
                data += chunk
        assert data == ex.body()
    finally:
        ex.stop()


# ---- bounded connections ----

@pytest.mark.parametrize("first", [b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", b"POST / HTTP/1.0\r\n\r\n",
                                   b"\r\n"])
def test_plain_http_to_the_tls_port_gets_a_400_saying_so(pki, first):
    """The first byte of a TLS connection is a handshake record's; anything else is answered as Go's servers
    answer it, not with an empty reply that leaves the user guessing."""
    ex = _exporter(load_web_config(_write(pki, _tls_yml(pki))))
    try:
        with socket.create_connection(ex.address, timeout=5) as s:
            s.sendall(first)
            data = b""
            while chunk := s.recv(4096):
                data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 400 Bad Request\r\n") and b"Connection: close" in head
        assert body == b"Client sent an HTTP request to an HTTPS server.\n"
        r = httpx.get(ex.url.replace("https:", "http:"), timeout=5)
        assert r.status_code == 400 and r.text == "Client sent an HTTP request to an HTTPS server.\n"
        with httpx.Client(verify=_client_ctx(pki), timeout=5) as c:  # and TLS still works
            assert c.get(ex.url).status_code == 200
    finally:
        ex.stop()


def test_the_server_header_is_the_name_alone():
    ex = _exporter()
    try:
        for path in ("/metrics", "/nope"):
            with socket.create_connection(ex.address, timeout=5) as s:
                s.sendall(f"GET {path} HTTP/1.0\r\n\r\n".encode())
                data = b""
                while chunk := s.recv(65536):
                    data += chunk
            assert b"\r\nServer: gpuscope\r\n" in data.partition(b"\r\n\r\n")[0], data[:300]
    finally:
        ex.stop()


def test_a_slow_tls_handshake_does_not_block_others(pki):
    """A client that connects and sends nothing holds one slot, not the accept loop."""
    ex = _exporter(load_web_config(_write(pki, _tls_yml(pki))))
    try:
        stalled = [socket.create_connection(ex.address, timeout=5) for _ in range(3)]
        t0 = time.monotonic()
        with httpx.Client(verify=_client_ctx(pki), timeout=5) as c:
            assert c.get(ex.url).status_code == 200
        assert time.monotonic() - t0 < 2.0
        for s in stalled:
            s.close()
    finally:
        ex.stop()


# ---- clients that hang up: the agent's stderr stays clean ----

def _rst(s: socket.socket) -> None:
    """Close with a TCP reset (SO_LINGER 0): the abrupt hang-up a killed scraper makes."""
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()


class Agent:
    """The agent on a simulated 8-GPU machine serving a free loopback port, its stderr drained by a thread (as
    a terminal or journald would: a full pipe would block the writers); ``line`` is its start-up line."""

    def __init__(self, *extra: str):
        self.p = subprocess.Popen([sys.executable, "-m", "gpuscope", "agent", "--simulate", "h200-nvswitch-8",
                                   "--prometheus", "127.0.0.1:0", *extra], stderr=subprocess.PIPE, text=True)
        assert self.p.stderr is not None
        self.line = self.p.stderr.readline()
        m = re.search(r"serving (https?://\S+/metrics)", self.line)
        if not m:
            self.p.kill()
            raise AssertionError(f"agent did not start: {self.line}{self.p.stderr.read()}")
        self.url = m.group(1)
        self._err: list[str] = []
        self._drain = threading.Thread(target=lambda: self._err.extend(self.p.stderr or ()), daemon=True)
        self._drain.start()

    def stop(self) -> str:
        """Stop it; the rest of its stderr."""
        self.p.terminate()
        try:
            self.p.wait(15)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        self._drain.join(10)
        return "".join(self._err)


@pytest.mark.slow
@pytest.mark.parametrize("tls", [False, True])
def test_200_aborted_connections_print_no_traceback(pki, tls):
    extra = ("--web-config", _write(pki, _tls_yml(pki), "abort.yml")) if tls else ()
    agent = Agent(*extra)
    url = agent.url
    u = urllib.parse.urlparse(url)
    addr = (u.hostname or "127.0.0.1", u.port or 0)
    try:
        ctx = _client_ctx(pki)
        wait_for(lambda: httpx.get(url, verify=ctx, timeout=5).status_code == 200, 20, "the agent serving")
        for k in range(200):
            s = socket.create_connection(addr, timeout=5)
            if tls and k % 4 == 0:  # a hang-up mid-handshake
                s.sendall(b"\x16\x03\x01\x00\x10partial-hello")
                _rst(s)
                continue
            if tls:
                s = ctx.wrap_socket(s, server_hostname="127.0.0.1")
            if k % 2:  # half a request line, then a reset
                s.sendall(b"GET /met")
            else:  # a whole request, a reset before reading the 53 KB answer
                s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
                time.sleep(0.002)
            _rst(s)
        wait_for(lambda: httpx.get(url, verify=ctx, timeout=5).status_code == 200, 10, "still serving")
    finally:
        err = agent.stop()
    assert "Traceback" not in err and "Error" not in err, err[-3000:]
    assert "scrapes served" in err


# ---- the command line ----

@pytest.mark.parametrize("args,msg,rc", [
    # a combination the options refuse: a usage error; a file that cannot be read when the agent starts: 1
    (["--broker", "mqtt://127.0.0.1:1", "--web-config", "x.yml"], "--web-config needs --prometheus", 2),
    (["--prometheus", "0", "--web-config", "/nonexistent/web.yml"], "--web-config /nonexistent/web.yml: no such file", 1),
])
def test_agent_web_config_errors_are_one_line(args, msg, rc):
    p = subprocess.run([sys.executable, "-m", "gpuscope", "agent", "--simulate", "mixed-4", *args],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == rc and msg in p.stderr and "Traceback" not in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def test_agent_bad_web_config_names_the_file_and_key(tmp_path):
    cfg = _write(tmp_path, "tls_server_config:\n  cert_file: a.crt\n  key_file: a.key\n  bogus: 1\n")
    p = subprocess.run([sys.executable, "-m", "gpuscope", "agent", "--simulate", "mixed-4", "--prometheus", "0",
                        "--web-config", cfg], capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and p.stderr.strip() == (f"gpuscope: error: --web-config {cfg}: tls_server_config: "
                                                      "unknown key 'bogus'")


# ---- a real Prometheus scraping over TLS with basic auth ----

@needs_prometheus
@needs_openssl
@pytest.mark.slow
def test_a_real_prometheus_scrapes_over_tls_with_basic_auth(pki, tmp_path):
    from test_prometheus import _query, poll, start_prometheus

    web = _write(tmp_path, _tls_yml(pki, cert=str(pki / "server.crt"), key=str(pki / "server.key")) +
                 f"basic_auth_users:\n  prom: '{_hash(PASSWORD, 10)}'\n")
    agent = Agent("--web-config", web)
    url = agent.url
    assert url.startswith("https://") and agent.line.rstrip().endswith("(TLS, basic auth); every 1 s"), agent.line
    target = urllib.parse.urlparse(url).netloc
    cfg = tmp_path / "prometheus.yml"
    job = ("  - job_name: {name}\n    scheme: https\n    tls_config:\n      ca_file: {ca}\n"
           "    basic_auth:\n      username: prom\n      password: {pw}\n"
           "    static_configs:\n      - targets: ['{target}']\n")
    cfg.write_text("global:\n  scrape_interval: 1s\nscrape_configs:\n" +
                   job.format(name="good", ca=pki / "ca.crt", pw=PASSWORD, target=target) +
                   job.format(name="wrongpw", ca=pki / "ca.crt", pw="wrong", target=target))
    prom = None
    try:
        prom, base = start_prometheus(tmp_path, cfg)
        power = poll(lambda: len(r := _query(base, 'DCGM_FI_DEV_POWER_USAGE{job="good"}')) == 8 and r, 40,
                     "one DCGM_FI_DEV_POWER_USAGE per GPU over TLS + basic auth")
        assert sorted(int(x["metric"]["gpu"]) for x in power) == list(range(8))
        poll(lambda: _query(base, 'up{job="good"} == 1'), 30, "the good job up")
        poll(lambda: _query(base, 'up{job="wrongpw"} == 0'), 30, "the wrong-password job down (401)")
        assert _query(base, 'DCGM_FI_DEV_POWER_USAGE{job="wrongpw"}') == []
    finally:
        if prom is not None:
            stop_prometheus(prom)
        err = agent.stop()
    assert "Traceback" not in err


def test_the_cache_key_includes_the_stored_hash():
    """A user whose hash changes never matches a cache entry made with the old one."""
    auth = BasicAuth({"u": _hash("old").encode()})
    assert auth.check(_basic(b"u:old"))
    auth.users["u"] = _hash("new").encode()
    assert not auth.check(_basic(b"u:old")) and auth.check(_basic(b"u:new"))
