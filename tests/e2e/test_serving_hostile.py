"""Endpoints can't hurt sampling: real local HTTP servers that are huge, slow or hostile
beside a real `gpuscope record`; the poller's memory with a 200 MB body."""

from __future__ import annotations

import http.server
import subprocess
import sys
import textwrap
import threading
import time

import pytest
from helpers import HttpServer

from gpuscope.sources.endpoint import EndpointPoller

pytestmark = pytest.mark.slow  # real servers and real seconds: .ci/run runs these on one Python


class Server(HttpServer):
    """A real ThreadingHTTPServer on a free port with the given GET handler body."""

    def __init__(self, do_get):
        handler = type("H", (http.server.BaseHTTPRequestHandler,),
                       {"do_GET": do_get, "log_message": lambda self, *a: None, "protocol_version": "HTTP/1.0"})
        self.stop = threading.Event()
        HttpServer.__init__(self, handler)

    def close(self):
        self.stop.set()
        HttpServer.close(self)


def many_series_server(n: int = 5000) -> Server:
    """A vLLM-looking /metrics with ``n`` series, every one a different served model."""
    t0 = time.time()

    def do_get(self):
        k = time.time() - t0
        body = "# TYPE vllm:generation_tokens_total counter\n" + "".join(
            f'vllm:generation_tokens_total{{engine="0",model_name="model-{i:05d}"}} {i * k:.1f}\n' for i in range(n))
        self.send_response(200)
        self.end_headers()
        self.wfile.write(body.encode())

    return Server(do_get)


def drip_server() -> Server:
    """Answers 200, then drips one metric line every 0.1 s forever (a read timeout never fires)."""
    srv: Server

    def do_get(self):
        self.send_response(200)
        self.end_headers()
        try:
            while not srv.stop.is_set():
                self.wfile.write(b"vllm:num_requests_running 1\n")
                self.wfile.flush()
                srv.stop.wait(0.1)
        except OSError:
            pass

    srv = Server(do_get)
    return srv


def huge_body_server(mb: int = 200) -> Server:
    """A /metrics body of ``mb`` MB of valid-looking lines, generated as it is sent."""
    chunk = b'vllm:generation_tokens_total{model_name="m"} 1\n' * (2**20 // 47)

    def do_get(self):
        self.send_response(200)
        self.send_header("Content-Length", str(len(chunk) * mb))
        self.end_headers()
        try:
            for _ in range(mb):
                self.wfile.write(chunk)
        except OSError:
            pass

    return Server(do_get)


def test_a_slow_drip_endpoint_is_cut_off_at_the_whole_response_deadline():
    srv = drip_server()
    p = EndpointPoller([srv.url], interval_s=0.2, timeout_s=0.6).start()
    try:
        deadline = time.time() + 10
        r = p.latest()[0]
        while time.time() < deadline and r.up is not False:
            time.sleep(0.05)
            r = p.latest()[0]
        assert not r.up and "no answer in 0.6 s" in (r.error or "")  # not "waiting for the first scrape" forever
    finally:
        p.stop()
        srv.close()


def test_a_200_mb_body_is_refused_as_it_arrives_and_memory_stays_small():
    srv = huge_body_server(200)
    script = textwrap.dedent(f"""
        import time
        from gpuscope.sources.endpoint import EndpointPoller
        def hwm():  # this process's peak RSS in MB (VmHWM: unlike ru_maxrss, not inherited from the forking parent)
            line = next(x for x in open("/proc/self/status") if x.startswith("VmHWM:"))
            return int(line.split()[1]) // 1024
        p = EndpointPoller([{srv.url!r}], interval_s=0.3, timeout_s=20).start()
        end = time.time() + 30
        while time.time() < end and p.trackers[0].garbage < 3:
            time.sleep(0.05)
        r = p.latest()[0]
        p.stop()
        print(p.trackers[0].garbage, hwm(), r.error)
    """)
    try:
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    finally:
        srv.close()
    assert out.returncode == 0, out.stderr
    garbage, rss_mb, *err = out.stdout.split()
    assert int(garbage) >= 3 and "larger than 8 MB refused" in " ".join(err)
    assert int(rss_mb) < 150, f"peak RSS {rss_mb} MB"


def test_gpu_frames_keep_their_schedule_beside_hostile_endpoints(tmp_path):
    """A 1 Hz recording beside a 5,000-series endpoint and a slow-drip one keeps ≥ 95 % of its frames."""
    from gpuscope.sources.recording import open_recording

    big, drip = many_series_server(), drip_server()
    out = tmp_path / "r.jsonl.gz"
    duration = 20
    try:
        p = subprocess.run([sys.executable, "-m", "gpuscope", "record", "-o", str(out), "--simulate", "mixed-4",
                            "--interval", "1", "--duration", str(duration), "--endpoint", big.url,
                            "--endpoint", drip.url], capture_output=True, text=True, timeout=90)
    finally:
        big.close()
        drip.close()
    assert p.returncode == 0, p.stderr
    rec = open_recording(out)
    frames = list(rec.frames())
    assert len(frames) >= 0.95 * duration, f"{len(frames)} frames of {duration}"
    per_frame = [len(f.endpoints) for f in frames]
    assert max(per_frame) <= 8 + 1 + 1  # the 8 busiest served models, one reading for the rest, the drip one
    big_r = [e for f in frames for e in f.endpoints if e.url == big.url and e.up and e.models_dropped and e.model is None]
    assert big_r and big_r[-1].models_dropped == 5000 - 8
