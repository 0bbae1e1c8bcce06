"""No secret leaves the process: every output path, walked with a password in the ``--endpoint`` URL, an
``--endpoint-header`` key and a GPU process started with ``--api-key``; then with a kubectl-made token (its
trailing newline), a Cookie with ``;`` in it, a password from a file, a failing probe, and inputs refused at
start-up (a header with CR/LF, a password that breaks the URL), which must be named, never quoted.

A real HTTP server answers /metrics only with the right Basic auth and header (so the secrets are used:
the readings are up and the server counts every request it had to refuse), a real Mosquitto takes the
agent's frames, and the outputs are read as bytes: the screen (a headless App), the log, the recording
(frames and header), summary, compare, export (CSV, Parquet, --serving), the Prometheus exporter's text
and every MQTT payload. None may hold any of :data:`SECRETS`; each must show the endpoint, as
``http://127.0.0.1:PORT``, where it shows endpoints at all (else the test would pass on an empty file).
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import http.server
import json
import os
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import pytest
from helpers import FIXTURES, Broker, HttpServer, free_port, needs_mosquitto, until

USER, PASSWORD, API_KEY, PROC_KEY = "alicia7", "S3cretPW", "K3yV4lue", "sk-PR0CSECRET"
TOKEN, COOKIE1, COOKIE2, HASHSEC = "T0KSECRET", "C00KSEC1", "C00KSEC2", "HASHSEC"
# the user name goes with its password: nowhere either
SECRETS = (PASSWORD, API_KEY, PROC_KEY, USER, TOKEN, COOKIE1, COOKIE2, HASHSEC)
SCENARIO = Path(__file__).parents[2] / "sources" / "scenarios" / "a6000-tp2-pcie-gen1.toml"

pytestmark = pytest.mark.slow


class AuthServer(HttpServer):
    """vLLM's /metrics (a captured exposition) for requests with Basic auth alicia7:S3cretPW and
    ``X-Api-Key: K3yV4lue`` only; any other request is a 401, counted in ``refused``."""

    def __init__(self) -> None:
        body = (FIXTURES / "inference" / "vllm_v1.txt").read_bytes()
        want = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
        self.served = self.refused = 0
        srv = self

        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                ok = self.headers.get("Authorization") == want and self.headers.get("X-Api-Key") == API_KEY
                if ok:
                    srv.served += 1
                else:
                    srv.refused += 1
                self.send_response(200 if ok else 401)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.end_headers()
                self.wfile.write(body if ok else b"unauthorized")

            def log_message(self, *a: object) -> None:
                pass

        HttpServer.__init__(self, H)
        self.public = self.url
        self.secret_url = f"http://{USER}:{PASSWORD}@127.0.0.1:{self.port}"


@pytest.fixture
def server():
    s = AuthServer()
    yield s
    s.close()


@pytest.fixture
def scenario(tmp_path) -> Path:
    """The TP=2 vLLM scenario with its (simulated) server started with ``--api-key``."""
    text = SCENARIO.read_text()
    assert "api_server --model" in text
    p = tmp_path / "keyed.toml"
    p.write_text(text.replace("api_server --model", f"api_server --api-key {PROC_KEY} --model"))
    return p


def secret_args(server: AuthServer) -> list[str]:
    return ["--endpoint", server.secret_url, "--endpoint-header", f"X-Api-Key: {API_KEY}"]


def no_secret(what: str, data: bytes | str) -> str:
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    for s in SECRETS:
        assert s not in text, f"{s!r} in {what}: …{text[max(0, text.find(s) - 120):text.find(s) + 40]}…"
    return text


def polled(frame: dict, server: AuthServer) -> bool:
    """True when a frame (as written: defaults left out) holds the server's reading, up and read as vLLM."""
    return any(e["url"] == server.public and e.get("up", True) and e.get("kind") == "vllm"
               for e in frame.get("endpoints", ()))


def gpuscope(*args: str, env: dict[str, str] | None = None, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuscope", *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "GPUSCOPE_LOG_LEVEL": "DEBUG", **(env or {})})


def test_record_log_summary_compare_export_hold_no_secret(tmp_path, server, scenario):
    rec, log = tmp_path / "r.jsonl.gz", tmp_path / "gpuscope.log"
    r = gpuscope("--log-file", str(log), "record", "--simulate", str(scenario), *secret_args(server),
                 "--interval", "0.5", "--duration", "3", "-o", str(rec))
    assert r.returncode == 0, r.stderr
    assert server.served >= 2 and server.refused == 0  # the password and the header were sent, every time
    err = no_secret("record's stderr", r.stderr)
    # said once, and truthfully: the process list shows it (gpuscope itself never logs or records it)
    assert err.count(f"the password in --endpoint {server.public} can be read by every local user in the process "
                     "list") == 1, err
    no_secret("record's stdout", r.stdout)
    no_secret("the log", log.read_bytes())
    raw = no_secret("the recording", gzip.decompress(rec.read_bytes()))
    lines = [json.loads(ln) for ln in raw.splitlines()]
    assert "X-Api-Key: <redacted>" in lines[0]["command"] and server.public in lines[0]["command"]
    assert any(polled(f, server) for f in lines[1:])  # read with the secrets, shown without them
    assert "--api-key <redacted>" in raw  # the process's command line is kept, its key is not

    for args in (["summary"], ["summary", "--json"], ["summary", "--by-marker"], ["compare"]):
        out = gpuscope(*args, str(rec), *([str(rec)] if args == ["compare"] else []))
        assert out.returncode == 0, out.stderr
        no_secret(" ".join(args), out.stdout + out.stderr)
    for fmt in ("csv", "parquet"):
        main, serving = tmp_path / f"gpus.{fmt}", tmp_path / f"serving.{fmt}"
        out = gpuscope("export", str(rec), f"--{fmt}", str(main), "--serving", str(serving))
        assert out.returncode == 0, out.stderr
        no_secret(f"export --{fmt}", main.read_bytes())
        text = no_secret(f"export --serving ({fmt})", serving.read_bytes())
        assert server.public in text  # the column is there, with the public URL


def test_a_recording_that_holds_secrets_shows_none(tmp_path, server, scenario):
    """A recording written before redaction (or by hand) with the password in its URLs and the key in a
    process's command line: summary, compare and export pass it through the validation gate, which
    removes both."""
    rec = tmp_path / "r.jsonl.gz"
    r = gpuscope("record", "--simulate", str(scenario), *secret_args(server), "--interval", "0.5", "--duration", "2",
                 "-o", str(rec))
    assert r.returncode == 0, r.stderr
    raw = gzip.decompress(rec.read_bytes()).decode()
    old = tmp_path / "old.jsonl.gz"
    leaky = raw.replace(f'"url":"{server.public}"', f'"url":"{server.secret_url}"') \
               .replace("--api-key <redacted>", f"--api-key {PROC_KEY}")
    assert leaky.count(PASSWORD) >= 2 and leaky.count(PROC_KEY) >= 2
    old.write_bytes(gzip.compress(leaky.encode()))
    for args in (["summary", str(old)], ["summary", "--json", str(old)], ["compare", str(old), str(rec)]):
        out = gpuscope(*args)
        assert out.returncode == 0, out.stderr
        no_secret(" ".join(args[:-1]), out.stdout + out.stderr)
    csv = tmp_path / "serving.csv"
    out = gpuscope("export", str(old), "--csv", str(tmp_path / "g.csv"), "--serving", str(csv))
    assert out.returncode == 0, out.stderr
    assert server.public in no_secret("export --serving of the old recording", csv.read_bytes())


class MqttTap:
    """Every payload published under ``gpuscope/#`` on a real broker, collected on a thread (aiomqtt)."""

    def __init__(self, port: int) -> None:
        self.payloads: list[tuple[str, bytes]] = []
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run(port)), daemon=True)
        self._thread.start()
        assert self._ready.wait(20), "the tap did not subscribe"

    async def _run(self, port: int) -> None:
        import aiomqtt

        async with aiomqtt.Client("127.0.0.1", port) as c:
            await c.subscribe("gpuscope/#", qos=1)
            self._ready.set()
            while not self._stop.is_set():
                try:
                    msg = await asyncio.wait_for(anext(aiter(c.messages)), 0.2)
                except asyncio.TimeoutError:
                    continue
                self.payloads.append((str(msg.topic), bytes(msg.payload)))  # type: ignore[arg-type]

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)


@needs_mosquitto
@pytest.mark.parametrize("auth", ["basic", "token"])
def test_agent_mqtt_and_prometheus_hold_no_secret(tmp_path, server, scenario, auth):
    """``basic``: Basic auth in the URL and a key header; ``token``: a kubectl-made token (trailing newline), a
    Cookie with ';' and a probe the server refuses (its fixed phrase published, in the frames)."""
    extra: dict[str, str] = {}
    if auth == "token":
        server = TokenServer()  # the fixture's stays up (closed by the fixture), unused
        server.public = server.url
        args, extra = ["--endpoint", server.url, "--probe", "0.5"], TOKEN_ENV
    else:
        args = secret_args(server)
    broker = Broker(tmp_path)
    tap = MqttTap(broker.port)
    prom = free_port()
    agent = subprocess.Popen([sys.executable, "-m", "gpuscope", "--log-file", str(tmp_path / "agent.log"), "agent",
                              "--simulate", str(scenario), *args, "--interval", "0.5",
                              "--broker", broker.url, "--prometheus", str(prom)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "GPUSCOPE_LOG_LEVEL": "DEBUG", **extra})
    metrics = ""
    try:
        def scraped() -> bool:
            nonlocal metrics
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{prom}/metrics", timeout=2) as resp:
                    metrics = resp.read().decode()
            except OSError:
                return False
            frames = [json.loads(p) for t, p in list(tap.payloads) if t.endswith("/frame")]
            probed = auth == "basic" or any(e.get("probe_error") == "probe: HTTP 401 (needs a token?)"
                                            for f in frames for e in f.get("endpoints", ()))
            return f'endpoint="{server.public}"' in metrics and probed and any(polled(f, server) for f in frames)
        assert until(scraped, 40), metrics[-2000:]
    finally:
        agent.terminate()
        out, err = agent.communicate(timeout=20)
        tap.stop()
        broker.stop()
        if auth == "token":
            server.close()
    assert server.served >= 1 and server.refused == 0
    no_secret("the Prometheus text", metrics)
    assert tap.payloads
    for t, p in tap.payloads:
        no_secret(f"MQTT {t}", p)
    no_secret("the agent's stderr", out + err)
    no_secret("the agent's log", (tmp_path / "agent.log").read_bytes())


async def test_screen_shows_the_endpoint_without_its_secrets(server, scenario):
    """The live view (headless App, the same source `gpuscope --endpoint …` opens): the endpoint up (the
    panel names it by its model), a second one with a password and nothing listening shown by its URL, and
    no secret on any row."""
    from helpers import until as until_sync

    from gpuscope.cli.main import _open
    from gpuscope.cli.options import SourceOptions
    from gpuscope.core.session import Session
    from gpuscope.tui.app import GpuscopeApp
    from gpuscope.tui.feeders import LiveFeeder

    closed = free_port()  # nothing listens there: the panel shows that endpoint by its URL

    opts = SourceOptions(simulate=str(scenario), interval=0.5, pcie_source="auto",
                         endpoint=(server.secret_url, f"http://{USER}:{PASSWORD}@127.0.0.1:{closed}"),
                         endpoint_kind=None,
                         endpoint_header=(f"X-Api-Key: {API_KEY}",), endpoint_window=10.0, endpoint_timeout=2.0,
                         endpoint_insecure=False, probe=None, probe_model=None).checked(env={})
    assert opts.endpoint == (server.public, f"http://127.0.0.1:{closed}") and PASSWORD not in repr(opts)
    src = _open(opts)
    session = Session(src.inventory, interval_s=0.5)
    app = GpuscopeApp(session, None, label="SIMULATED", interval_s=0.5)
    app.feeder = LiveFeeder(src, session, 0.5, app.notify_update)
    async with app.run_test(size=(200, 60)) as pilot:
        assert until_sync(lambda: session.last_frame is not None and any(
            e.url == server.public and e.up and e.kind == "vllm" for e in session.last_frame.endpoints), 30)
        await pilot.pause()
        app.refresh_view(force=True)
        await pilot.pause()
        update = app.screen._compositor.render_full_update()
        text = "\n".join("".join(seg.text for seg in strip) for strip in update.strips)
    assert server.served >= 1 and server.refused == 0
    no_secret("the screen", text)
    assert f"127.0.0.1:{closed}" in text and "facebook/opt-125m" in text, text


class TokenServer(HttpServer):
    """vLLM's /metrics for requests with ``Authorization: Bearer T0KSECRET`` and the Cookie ``a=C00KSEC1;
    b=C00KSEC2`` only (401 otherwise, counted); the probe's POST is always a 401, as vLLM started with
    ``--api-key`` answers a request it does not accept."""

    def __init__(self) -> None:
        body = (FIXTURES / "inference" / "vllm_v1.txt").read_bytes()
        self.served = self.refused = 0
        srv = self

        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                ok = (self.headers.get("Authorization") == f"Bearer {TOKEN}"
                      and self.headers.get("Cookie") == f"a={COOKIE1}; b={COOKIE2}")
                if ok:
                    srv.served += 1
                else:
                    srv.refused += 1
                text = (b'{"data": [{"id": "m"}]}' if self.path == "/v1/models" else body) if ok else b"no"
                self.send_response(200 if ok else 401)
                self.send_header("Content-Length", str(len(text)))
                self.end_headers()
                self.wfile.write(text)

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                self.send_response(401)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"no")

            def log_message(self, *a: object) -> None:
                pass

        HttpServer.__init__(self, H)


# a kubectl-made Secret (--from-file) ends in a newline; a Cookie keeps its ';' (only '; Name:' splits)
TOKEN_ENV = {"GPUSCOPE_ENDPOINT_TOKEN": f"{TOKEN}\n", "GPUSCOPE_ENDPOINT_HEADERS": f"Cookie: a={COOKIE1}; b={COOKIE2}"}


def test_a_kubectl_token_a_cookie_and_a_failing_probe(tmp_path, scenario):
    """The token's newline was sent, httpx refused the header and its text (quoting the token) became the
    endpoint's error in every frame; a Cookie with ';' could not be given; a failing --probe showed nothing.
    Now: the server is read with both, the probe's failure is a fixed phrase in the frames, no secret anywhere."""
    srv = TokenServer()
    rec, log = tmp_path / "r.jsonl.gz", tmp_path / "gpuscope.log"
    try:
        r = gpuscope("--log-file", str(log), "record", "--simulate", str(scenario), "--endpoint", srv.url,
                     "--probe", "0.5", "--interval", "0.5", "--duration", "3", "-o", str(rec), env=TOKEN_ENV)
    finally:
        srv.close()
    assert r.returncode == 0, r.stderr
    assert srv.served >= 2 and srv.refused == 0
    no_secret("record's stderr", r.stderr + r.stdout)
    no_secret("the log", log.read_bytes())
    raw = no_secret("the recording", gzip.decompress(rec.read_bytes()))
    frames = [json.loads(ln) for ln in raw.splitlines()[1:]]
    eps = [e for f in frames for e in f.get("endpoints", ())]
    assert any(e.get("kind") == "vllm" and e.get("up", True) for e in eps)
    assert any(e.get("probe_error") == "probe: HTTP 401 (needs a token?)" for e in eps), eps[-1]
    out = gpuscope("summary", str(rec))
    assert out.returncode == 0, out.stderr
    no_secret("summary", out.stdout + out.stderr)


class EchoServer(HttpServer):
    """A server whose /metrics answer repeats the request's Authorization header (a misconfigured proxy, a debug
    endpoint): not Prometheus text, and a secret in the body."""

    def __init__(self) -> None:
        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                text = f"{self.headers.get('Authorization', '')}\n".encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(text)))
                self.end_headers()
                self.wfile.write(text)

            def log_message(self, *a: object) -> None:
                pass

        HttpServer.__init__(self, H)


@pytest.mark.parametrize("how", ["token", "basic"])
def test_an_answer_that_echoes_the_credential_is_never_quoted(tmp_path, scenario, how):
    """A /metrics body that repeated the request's Authorization header was quoted in the "not Prometheus text"
    error: the Bearer token (or base64 of user:password) on stderr and in every recorded frame."""
    srv = EchoServer()
    rec, log, pw = tmp_path / "r.jsonl.gz", tmp_path / "gpuscope.log", tmp_path / "pw"
    pw.write_text(PASSWORD + "\n")
    auth = (["--endpoint-user", USER, "--endpoint-password-file", str(pw)] if how == "basic" else [])
    env = {"GPUSCOPE_ENDPOINT_TOKEN": TOKEN} if how == "token" else {}
    basic = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    try:
        r = gpuscope("--log-file", str(log), "record", "--simulate", str(scenario), "--endpoint", srv.url, *auth,
                     "--interval", "0.5", "--duration", "2", "-o", str(rec), env=env)
    finally:
        srv.close()
    assert r.returncode == 0, r.stderr
    raw = gzip.decompress(rec.read_bytes()).decode()
    assert "not Prometheus text" in raw, raw[-2000:]
    for what, text in (("stderr", r.stderr + r.stdout), ("the log", log.read_text()), ("the recording", raw),
                       ("summary", gpuscope("summary", str(rec)).stdout)):
        no_secret(what, text)
        assert basic not in text, what


def test_basic_auth_from_a_password_file(tmp_path, server, scenario):
    """The password out of the process list: the user name in the URL, the password in a file (a trailing
    newline, as kubectl writes it), the key in the environment. Read with them; no note; no secret anywhere."""
    pw = tmp_path / "pw"
    pw.write_text(PASSWORD + "\n")
    rec, log = tmp_path / "r.jsonl.gz", tmp_path / "gpuscope.log"
    r = gpuscope("--log-file", str(log), "record", "--simulate", str(scenario), "--endpoint",
                 f"http://{USER}@127.0.0.1:{server.port}", "--endpoint-password-file", str(pw), "--interval", "0.5",
                 "--duration", "2", "-o", str(rec), env={"GPUSCOPE_ENDPOINT_HEADERS": f"X-Api-Key: {API_KEY}"})
    assert r.returncode == 0, r.stderr
    assert server.served >= 1 and server.refused == 0
    assert "process list" in no_secret("record's stderr", r.stderr)  # the user name in the URL is said, once
    no_secret("the log", log.read_bytes())
    raw = no_secret("the recording", gzip.decompress(rec.read_bytes()))
    assert any(polled(json.loads(ln), server) for ln in raw.splitlines()[1:])


@pytest.mark.parametrize(("args", "env", "said"), [
    (["--endpoint", f"http://eve:#{HASHSEC}@127.0.0.1:8000"], {}, "--endpoint 'http://…@127.0.0.1:8000': a URL"),
    (["--endpoint", f"http://eve:{HASHSEC}/x@127.0.0.1:8000"], {}, "must be written %2F"),
    (["--endpoint", f"http://eve:?{HASHSEC}@127.0.0.1:8000"], {}, "the port must be"),
    (["--endpoint", "http://h:1", "--endpoint-header", f"Authorization: Bearer {TOKEN}\r\nY: z"], {},
     "bad header in --endpoint-header: the value of header 'Authorization' has a line break in it"),
    (["--endpoint", "http://h:1", "--endpoint-header", f"Authorization Bearer {TOKEN}"], {},
     "bad header in --endpoint-header: expected 'Name: value'"),
    (["--endpoint", "http://h:1"], {"GPUSCOPE_ENDPOINT_TOKEN": f"{TOKEN}\nX-Injected: 1"},
     "GPUSCOPE_ENDPOINT_TOKEN has a line break in it"),
    (["--endpoint", "http://h:1"], {"GPUSCOPE_ENDPOINT_HEADERS": f"Cookie a={COOKIE1}"},
     "bad header in GPUSCOPE_ENDPOINT_HEADERS"),
    (["--endpoint", f"http://{USER}:{PASSWORD}@h:1", "--endpoint", f"http://bob:{HASHSEC}@h:1"], {},
     "--endpoint given twice for http://h:1 (they differ only in credentials)"),
    (["--endpoint", f"http://{USER}:{PASSWORD}@h:1"], {"GPUSCOPE_ENDPOINT_PASSWORD": HASHSEC},
     "has a password in it and GPUSCOPE_ENDPOINT_PASSWORD gives one"),
    (["--endpoint", f"http://{USER}:{PASSWORD}@h:1", "--endpoint-header", f"Authorization: Bearer {TOKEN}"], {},
     "Basic auth (the --endpoint URL) and an Authorization header (--endpoint-header) both given"),
])
def test_refused_secrets_are_named_never_quoted(tmp_path, scenario, args, env, said):
    """Each refused at start-up: one line naming the flag or variable (exit 2), the value on neither stderr
    nor the log file."""
    log = tmp_path / "gpuscope.log"
    r = gpuscope("--log-file", str(log), "record", "--simulate", str(scenario), *args, "--duration", "1",
                 "-o", str(tmp_path / "r.jsonl.gz"), env=env)
    assert r.returncode == 2 and said in r.stderr and r.stderr.count("\n") == 1, r.stderr
    no_secret("stderr", r.stderr + r.stdout)
    no_secret("the log", log.read_bytes() if log.exists() else b"")
    assert not (tmp_path / "r.jsonl.gz").exists()


# ------------------------------------------------------------------ secrets on command lines
# No secret from a command line reaches a recording: the command `record -- CMD` runs (its ``start:``
# marker, the markers it writes), gpuscope's own command line (the header's ``command``, a password with
# spaces in an ``--endpoint``) and the GPU processes' command lines, each holding a secret in every place one was
# once seen unredacted. Real ``gpuscope record`` runs; the file (gzip JSONL), ``summary``, ``summary --by-marker``
# and ``compare --by-marker`` are read as text, and none may hold any of :data:`CMD_SECRETS`; each still shows the
# command around them (else the test would pass on an empty file).
# one secret per place where one was once seen unredacted
CMD_SECRETS = {
    "env": "hf_EnvT0kenSecretValue1234",  # env HF_TOKEN=…
    "api": "ApiK3ySecret",  # --api-key …
    "bearer": "B3arerSecret",  # curl -H "Authorization: Bearer …"
    "user": "CurlUs3rSecret",  # curl -u bob:…
    "key": "PlainK3ySecret", "hmac": "Hm4cSecret", "wandb": "W4ndbSecret", "license": "L1censeSecret",
    "azure": "Azur3Secret", "pat": "P4tSecret", "p": "Pw0rdSecret", "jwt": "Jw7Secret", "tokens": "T0kensSecret",
    "token_eq": "T0kenEqSecret",  # --token= X
    "sk": "sk-proj-Abc123Def456Ghi789Jkl0",  # a positional key
    "sig": "S1gSecret", "amz": "AmzS1gSecret", "code": "C0deSecret", "session": "Sess1onSecret",  # URL queries
    "space": "SP4CE",  # a word of an --endpoint password with spaces
}
CS = CMD_SECRETS
CMD_SECRET_WORDS = (*CMD_SECRETS.values(), "hank", "SEC0ND")
CHILD = (f": env HF_TOKEN={CS['env']} vllm serve --api-key {CS['api']} --max-tokens 512; "  # ':' runs nothing
         f": curl -H 'Authorization: Bearer {CS['bearer']}' -u bob:{CS['user']} "
         f"'https://h/x?sig={CS['sig']}&X-Amz-Signature={CS['amz']}&code={CS['code']}&session={CS['session']}' "
         f"--key {CS['key']} --hmac-key {CS['hmac']} --wandb-key {CS['wandb']} --license-key {CS['license']} "
         f"AZURE_OPENAI_KEY={CS['azure']} GITHUB_PAT={CS['pat']} -p {CS['p']} --jwt {CS['jwt']} "
         f"--tokens {CS['tokens']} --token= {CS['token_eq']} {CS['sk']}; "
         f"echo \"phase: decode --api-key {CS['api']}\" > \"$GPUSCOPE_MARKERS\"; sleep 1.5")
# GPU processes' command lines (each cut at 120 characters once redacted: two of them, to hold every secret)
PROCESSES = (f"--max-num-batched-tokens 8192 --api-key {CS['api']} --key {CS['key']} -p {CS['p']} {CS['sk']}",
             f"--tokens {CS['tokens']} --webhook https://h/x?sig={CS['sig']} AZURE_OPENAI_KEY={CS['azure']}")

def cmd_no_secret(what: str, data: bytes | str) -> str:
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    for s in CMD_SECRET_WORDS:
        at = text.find(s)
        assert at < 0, f"{s!r} in {what}: …{text[max(0, at - 160):at + 40]}…"
    return text


@pytest.fixture
def cmd_scenario(tmp_path) -> Path:
    """The TP=2 vLLM scenario with its (simulated) server's command line, and one more process's, holding the
    secrets."""
    text = SCENARIO.read_text()
    assert "api_server --model" in text
    p = tmp_path / "keyed.toml"
    text = text.replace("api_server --model", f"api_server {PROCESSES[0]} --model")
    p.write_text(text + f'''
[[processes]]
gpus = [1]
pid = 2999
user = "vllm"
name = "python3"
command = "python3 serve.py {PROCESSES[1]}"
''')
    return p


def test_record_a_command_keeps_no_secret(tmp_path, cmd_scenario):
    rec, log = tmp_path / "r.jsonl.gz", tmp_path / "gpuscope.log"
    endpoint = f"http://hank:{CS['space']} SEC0ND@127.0.0.1:{free_port()}"  # nothing listens: the URL is what counts
    r = gpuscope("--log-file", str(log), "record", "-o", str(rec), "--simulate", str(cmd_scenario), "--interval", "0.3",
                 "--endpoint", endpoint, "--", "sh", "-c", CHILD)
    assert r.returncode == 0, r.stderr
    cmd_no_secret("record's stderr", r.stdout + r.stderr)
    cmd_no_secret("the log", log.read_bytes())
    raw = cmd_no_secret("the recording", gzip.decompress(rec.read_bytes()))
    lines = [json.loads(ln) for ln in raw.splitlines()]
    header = " ".join(lines[0]["command"])
    assert "--endpoint http://127.0.0.1:" in header and "HF_TOKEN=<redacted>" in header, header
    markers = [e["text"] for f in lines[1:] for e in f.get("events", ()) if e.get("kind") == "marker"]
    start = next(m for m in markers if m.startswith("start: "))
    for kept in ("HF_TOKEN=<redacted>", "--api-key <redacted>", "--max-tokens 512"):
        assert kept in start, start  # the command is shown (its first 200 characters), its secrets are not
    assert any(m.startswith("phase: decode --api-key <redacted>") for m in markers), markers
    # the GPU processes' command lines are kept, their secrets are not
    assert "--max-num-batched-tokens 8192 --api-key <redacted>" in raw and "--tokens <redacted>" in raw
    for args in (["summary", str(rec)], ["summary", "--json", str(rec)], ["summary", "--by-marker", str(rec)],
                 ["compare", "--by-marker", str(rec), str(rec)], ["compare", "--json", "--by-marker", str(rec), str(rec)]):
        out = gpuscope(*args)
        assert out.returncode == 0, out.stderr
        text = cmd_no_secret(" ".join(args[:-1]), out.stdout + out.stderr)
        if "--by-marker" in args:
            assert "start: sh -c" in text, text  # the phase of the command is there, by its redacted name


def test_a_command_that_cannot_run_is_named_without_its_secret(tmp_path):
    """`record -- HF_TOKEN=… cmd` (a variable written where a program goes): the error names it redacted."""
    rec = tmp_path / "r.jsonl.gz"
    r = gpuscope("record", "-o", str(rec), "--simulate", "mixed-4", "--", f"HF_TOKEN={CS['env']}", "true")
    assert r.returncode == 127
    assert "cannot run HF_TOKEN=<redacted>" in cmd_no_secret("the error", r.stdout + r.stderr), r.stderr


def test_the_endpoint_user_name_is_not_recorded(tmp_path):
    """`--endpoint-user NAME` (Basic auth's user name, half a credential) is hidden in the header's ``command``
    as the password is; neither reaches the file, the log, stderr or a summary. Nothing listens: the command
    line is what counts."""
    rec, log, pw = tmp_path / "r.jsonl.gz", tmp_path / "gpuscope.log", tmp_path / "pw"
    user, password = "Us3rNameSecret", "Passw0rdSecret"
    pw.write_text(password + "\n")
    r = gpuscope("--log-file", str(log), "record", "-o", str(rec), "--simulate", "a6000-tp2-pcie-gen1",
                 "--interval", "0.3", "--duration", "1", "--endpoint", f"http://127.0.0.1:{free_port()}",
                 "--endpoint-user", user, "--endpoint-password-file", str(pw))
    assert r.returncode == 0, r.stderr
    outs = [("record's stderr", r.stdout + r.stderr), ("the log", log.read_bytes()),
            ("the recording", gzip.decompress(rec.read_bytes()))]
    for args in (["summary", str(rec)], ["summary", "--json", str(rec)], ["summary", "--by-marker", str(rec)]):
        out = gpuscope(*args)
        assert out.returncode == 0, out.stderr
        outs.append((" ".join(args[:-1]), out.stdout + out.stderr))
    for what, data in outs:
        text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
        for s in (user, password):
            assert s not in text, f"{s!r} in {what}"
    header = json.loads(gzip.decompress(rec.read_bytes()).splitlines()[0])
    command = " ".join(header["command"])
    assert "--endpoint-user <redacted>" in command and f"--endpoint-password-file {pw}" in command, command


OLD_START = (f"start: env HF_TOKEN={CS['env']} vllm serve --api-key {CS['sk']} --port 8000 "
             f"-H 'Authorization: Bearer {CS['bearer']}' --max-tokens 512")


def test_a_start_marker_of_an_older_recording_is_redacted_when_read(tmp_path):
    """A recording made before `record -- CMD` redacted its child's command (written here as it was: the
    marker raw, through the session's marker door, which only cleans): summary, summary --by-marker, compare
    --by-marker and replay show the start: phase by its name, never its secrets."""
    from helpers import record_sim

    from gpuscope.sources.recording import open_recording

    rec = record_sim(tmp_path / "old.jsonl.gz", "a6000-tp2-pcie-gen1", 12, marker=OLD_START)
    raw = gzip.decompress(rec.read_bytes()).decode()
    assert CS["sk"] in raw and CS["env"] in raw  # the file holds them, as an older one does
    (start,) = [e.text for e in open_recording(str(rec)).events if e.kind == "marker"]  # what replay shows
    assert start == ("start: env HF_TOKEN=<redacted> vllm serve --api-key <redacted> --port 8000 -H "
                     "Authorization: <redacted> --max-tokens 512"), start
    for args in (["summary", str(rec)], ["summary", "--json", str(rec)], ["summary", "--by-marker", str(rec)],
                 ["compare", "--by-marker", str(rec), str(rec)], ["compare", "--json", "--by-marker", str(rec), str(rec)]):
        out = gpuscope(*args)
        assert out.returncode == 0, out.stderr
        text = cmd_no_secret(" ".join(args[:-1]), out.stdout + out.stderr)
        assert "start: env HF_TOKEN=<redacted> vllm serve" in text, text
