"""Parsing a 2,000-line /metrics, and the CPU that polling one endpoint at 1 Hz costs.

    python benchmarks/bench_endpoint.py

Targets (docs/performance.md, *Without GPUs*): parse ≤ 5 ms; polling at 1 Hz ≤ 1 % of a core. The server
runs in another process, so only the poller's CPU is counted.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import write_json  # noqa: E402

SERVER = r"""
import http.server, sys, time
body = open(sys.argv[1], 'rb').read()
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200); self.send_header('Content-Length', str(len(body))); self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a): pass
s = http.server.ThreadingHTTPServer(('127.0.0.1', 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
"""


def metrics_text(lines: int) -> str:
    """vLLM-named series: counters per engine, gauges, and histograms, until ``lines`` lines."""
    out = []
    les = ["0.001", "0.005", "0.01", "0.02", "0.04", "0.06", "0.08", "0.1", "0.25", "0.5", "0.75", "1.0", "2.5",
           "5.0", "7.5", "10.0", "+Inf"]
    e = 0
    while len(out) < lines:
        lab = f'engine="{e}",model_name="meta-llama/Llama-3.1-70B-Instruct"'
        out += ["# TYPE vllm:generation_tokens_total counter", f"vllm:generation_tokens_total{{{lab}}} {1.234567e6 + e}",
                "# TYPE vllm:num_requests_running gauge", f"vllm:num_requests_running{{{lab}}} 12.0",
                "# TYPE vllm:time_to_first_token_seconds histogram"]
        out += [f'vllm:time_to_first_token_seconds_bucket{{{lab},le="{le}"}} {k * 10}' for k, le in enumerate(les)]
        out += [f"vllm:time_to_first_token_seconds_sum{{{lab}}} 123.4", f"vllm:time_to_first_token_seconds_count{{{lab}}} 160"]
        out += ["# TYPE vllm:inter_token_latency_seconds histogram"]
        out += [f'vllm:inter_token_latency_seconds_bucket{{{lab},le="{le}"}} {k * 100}' for k, le in enumerate(les)]
        out += [f"vllm:inter_token_latency_seconds_sum{{{lab}}} 42.0", f"vllm:inter_token_latency_seconds_count{{{lab}}} 1600"]
        e += 1
    return "\n".join(out[:lines]) + "\n"


def main(argv: list[str] | None = None) -> int:
    from gpuscope.sources.endpoint import EndpointPoller, EndpointTracker, parse_metrics

    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--json", metavar="FILE")
    a = ap.parse_args(argv)
    text = metrics_text(2000)
    times = []
    for _ in range(30):
        t = time.perf_counter()
        parse_metrics(text)
        times.append(time.perf_counter() - t)
    times.sort()
    tr = EndpointTracker(url="x")
    ft = []
    for k in range(30):
        t = time.perf_counter()
        tr.feed(float(k), text)
        tr.reading()
        ft.append(time.perf_counter() - t)
    ft.sort()
    import os
    import tempfile

    def poll_cpu(body: str) -> tuple[float, str | None]:
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write(body)
        srv = subprocess.Popen([sys.executable, "-c", SERVER, f.name], stdout=subprocess.PIPE, text=True)
        port = int(srv.stdout.readline())
        p = EndpointPoller([f"http://127.0.0.1:{port}"], interval_s=1.0).start()
        time.sleep(2)
        c0, w0 = time.process_time(), time.monotonic()
        time.sleep(a.seconds)
        cpu = (time.process_time() - c0) / (time.monotonic() - w0)
        r = p.latest()[0]
        p.stop()
        srv.terminate()
        os.unlink(f.name)
        return 100 * cpu, r.kind

    real = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "inference", "vllm_v0.txt")
    cpu_big, kind = poll_cpu(text)
    cpu_real, _ = poll_cpu(open(real).read())
    rows = {"parse_2000_lines_ms_p50": 1000 * times[15], "feed_and_reading_ms_p50": 1000 * ft[15],
            "poll_1hz_cpu_pct_2000_lines": cpu_big, "poll_1hz_cpu_pct_vllm_capture": cpu_real, "kind": kind}
    print(f"{'measure':<40} {'result':>10}  target")
    print(f"{'parse a 2,000-line /metrics (p50)':<40} {rows['parse_2000_lines_ms_p50']:>8.2f} ms  ≤ 5 ms")
    print(f"{'parse + rates + quantiles (p50)':<40} {rows['feed_and_reading_ms_p50']:>8.2f} ms")
    print(f"{'polling 2,000 lines at 1 Hz (CPU)':<40} {rows['poll_1hz_cpu_pct_2000_lines']:>8.2f} %   ≤ 1 %")
    print(f"{'polling a real vLLM capture at 1 Hz':<40} {rows['poll_1hz_cpu_pct_vllm_capture']:>8.2f} %   ≤ 1 %")
    write_json(a.json, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
