"""What a scrape costs the exporter with ``--web-config`` (TLS, basic auth) and gzip, for 8 GPUs.

    python benchmarks/bench_webserve.py [--scrapes 200] [--json FILE]

The exporter runs in a child process on bench_prometheus.py's fixture (8 simulated H200s of the
h200-nvswitch-8 scenario with their findings, 2 endpoints × 2 models of made-up readings: all simulated);
the child reports its own process CPU time (``time.process_time``, asked over a pipe), so the client's CPU is
not counted, and its idle CPU over a measured second is subtracted. Certificates are made by the ``openssl`` binary in a temporary folder; the basic-auth hash
has bcrypt cost 10 (the toolkit docs' example), so its one real check is in the first scrape, not measured.

Cases, each with and without ``Accept-Encoding: gzip`` (Prometheus always sends it):

* **plain HTTP** and **TLS + basic auth**,
* **one kept-alive connection** (as Prometheus scrapes) and **a new connection per scrape** (thread start,
  and for TLS the handshake, included: a scraper without keep-alive),
* **cached frame** (several scrapes per agent tick) and **a new frame before every scrape** (every scrape
  renders the text, and gzips it when asked: Prometheus scraping less often than the agent ticks).

Each figure is the median of three runs (the machine may be shared).

Target: ≤ 1 ms of exporter CPU per scrape with 8 GPUs.
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_prometheus import fixture  # noqa: E402
from common import write_json  # noqa: E402

PASSWORD = "bench-password"


def child(mode: str, web_path: str) -> int:
    """Serve the fixture with ``web_path`` ('-': none); ``fresh``: a new state before every scrape (so every
    scrape renders, and gzips when asked: Prometheus scraping less often than the agent ticks)."""
    from gpuscope.outputs.prometheus import PrometheusExporter, SamplerHealth
    from gpuscope.outputs.webconfig import load_web_config

    inv, frame, findings = fixture()
    web = load_web_config(web_path) if web_path != "-" else None
    ex = PrometheusExporter(("127.0.0.1", 0), inv, web=web).start()
    ex.update(frame, findings, SamplerHealth(ticks=1))
    if mode == "fresh":
        body, n = ex.body, [1]

        def fresh_body() -> bytes:
            n[0] += 1
            ex.update(frame, findings, SamplerHealth(ticks=n[0]))
            return body()

        ex.body = fresh_body  # type: ignore[method-assign]
    print(ex.url, flush=True)
    for _line in sys.stdin:  # each line asks for this process's CPU time (ns resolution, unlike /proc's ticks)
        print(time.process_time(), flush=True)
    print(ex.renders, ex.scrapes, flush=True)
    ex.stop()
    return 0


def make_pki(d: str) -> str:
    """A CA, a server certificate for 127.0.0.1 signed by it, and a web config with TLS and basic auth."""
    import bcrypt

    def ossl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True, timeout=60)

    ossl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "ca.key",
         "-out", "ca.crt", "-days", "2", "-subj", "/CN=bench-ca")
    ossl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "server.key", "-out",
         "server.csr", "-subj", "/CN=127.0.0.1")
    with open(os.path.join(d, "ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\nauthorityKeyIdentifier=keyid,issuer\n")
    ossl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-out",
         "server.crt", "-days", "2", "-extfile", "ext")
    h = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(10)).decode()
    path = os.path.join(d, "web.yml")
    with open(path, "w") as f:
        f.write(f"tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\nbasic_auth_users:\n  prom: '{h}'\n")
    return path


def measure(mode: str, web: str, ca: str | None, scrapes: int) -> dict[str, float]:
    import httpx

    p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child", mode, web], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdin is not None
    url = p.stdout.readline().strip()

    def cpu() -> float:
        assert p.stdin is not None and p.stdout is not None
        p.stdin.write("\n")
        p.stdin.flush()
        return float(p.stdout.readline())

    auth = ("prom", PASSWORD) if web != "-" else None
    verify: object = ca if ca else True
    out: dict[str, float] = {}
    with httpx.Client(verify=verify, auth=auth, timeout=10) as c:  # type: ignore[arg-type]
        r = c.get(url, headers={"Accept-Encoding": "identity"})
        out["bytes"] = len(r.content)
        r = c.get(url, headers={"Accept-Encoding": "gzip"})
        out["gzip_bytes"] = int(r.headers["Content-Length"])
    time.sleep(0.3)
    c0, t0 = cpu(), time.monotonic()
    time.sleep(1.0)
    idle_per_s = (cpu() - c0) / (time.monotonic() - t0)
    for name, keep in (("keepalive", True), ("new_connection", False)):
        for enc in ("identity", "gzip"):
            runs = []
            for _rep in range(3):  # the median of three: the machine is shared
                c0, t0 = cpu(), time.monotonic()
                if keep:
                    with httpx.Client(verify=verify, auth=auth, timeout=10) as c:  # type: ignore[arg-type]
                        for _ in range(scrapes):
                            c.get(url, headers={"Accept-Encoding": enc}).raise_for_status()
                else:
                    for _ in range(scrapes):
                        httpx.get(url, verify=verify, auth=auth, timeout=10,  # type: ignore[arg-type]
                                  headers={"Accept-Encoding": enc}).raise_for_status()
                wall = time.monotonic() - t0
                runs.append((cpu() - c0 - idle_per_s * wall) / scrapes * 1000)
            out[f"{name}_{enc}_cpu_ms"] = sorted(runs)[1]
    p.stdin.close()
    renders, served = (int(x) for x in p.stdout.readline().split())
    p.wait(10)
    out["renders"], out["served"] = renders, served
    return out


def gzip_levels() -> dict[str, float]:
    """Rendering one 8-GPU body, and its gzip at levels 1 and 6, in process: CPU ms and size."""
    from gpuscope.outputs.prometheus import Renderer, SamplerHealth

    inv, frame, findings = fixture()
    r, h = Renderer(inv), SamplerHealth(ticks=1)
    c0 = time.process_time()
    for _ in range(200):
        body = r.render(frame, findings, h).encode()
    out: dict[str, float] = {"bytes": len(body), "render_ms": (time.process_time() - c0) / 200 * 1000}
    for level in (1, 6):
        c0 = time.process_time()
        for _ in range(200):
            gz = gzip.compress(body, compresslevel=level, mtime=0)
        out[f"level{level}_ms"] = (time.process_time() - c0) / 200 * 1000
        out[f"level{level}_bytes"] = len(gz)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", nargs=2, metavar=("MODE", "WEB"), help=argparse.SUPPRESS)
    ap.add_argument("--scrapes", type=int, default=200)
    ap.add_argument("--json", metavar="FILE")
    a = ap.parse_args(argv)
    if a.child:
        return child(*a.child)
    if shutil.which("openssl") is None:
        print("needs the openssl binary", file=sys.stderr)
        return 1
    gz = gzip_levels()
    d = tempfile.mkdtemp()
    try:
        web = make_pki(d)
        ca = os.path.join(d, "ca.crt")
        res = {f"{w}_{m}": measure(m, web if w == "tls" else "-", ca if w == "tls" else None, a.scrapes)
               for w in ("plain", "tls") for m in ("cached", "fresh")}
    finally:
        shutil.rmtree(d, ignore_errors=True)
    b = res["plain_cached"]
    print(f"one 8-GPU scrape: {b['bytes'] / 1000:.1f} kB, gzipped {b['gzip_bytes'] / 1000:.1f} kB (level 1); "
          f"gzip level 1 {gz['level1_ms']:.2f} ms → {gz['level1_bytes'] / 1000:.1f} kB, level 6 {gz['level6_ms']:.2f} "
          f"ms → {gz['level6_bytes'] / 1000:.1f} kB; rendering the text {gz['render_ms']:.2f} ms (in process)")
    print(f"{'exporter CPU per scrape (ms)':<46} {'identity':>9} {'gzip':>9}")
    for w, wl in (("plain", "HTTP"), ("tls", "TLS+auth")):
        for kind, kl in (("keepalive", "kept-alive"), ("new_connection", "new connection")):
            for m, ml in (("cached", "cached frame"), ("fresh", "new frame each scrape")):
                r = res[f"{w}_{m}"]
                print(f"{f'{wl}, {kl}, {ml}':<46} {r[f'{kind}_identity_cpu_ms']:>9.2f} {r[f'{kind}_gzip_cpu_ms']:>9.2f}")
    print(f"(target ≤ 1 ms; cores: {os.cpu_count()}; the client runs on the same machine; simulated GPUs and "
          "made-up endpoint readings)")
    write_json(a.json, {"gzip": gz, **res})
    return 0


if __name__ == "__main__":
    sys.exit(main())
