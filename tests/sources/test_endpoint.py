"""Inference endpoints: parsers on real captures, rate logic tables, and real HTTP servers."""

from __future__ import annotations

import http.server
import os
import re
import socket
import threading
import time

import pytest
from helpers import FIXTURES, HttpServer, examples, wait_for

from gpuscope.sources.endpoint import (
    EndpointPoller,
    EndpointTracker,
    MetricsError,
    counter_rate,
    detect_kind,
    histogram_quantile,
    metrics_url,
    parse_metrics,
    total,
)
from gpuscope.sources.live import parse_headers

FIX = FIXTURES / "inference"


@pytest.mark.parametrize("name,kind", [
    ("vllm_v0.txt", "vllm"), ("vllm_v1.txt", "vllm"), ("sglang.txt", "sglang"),
    ("sglang_datadog_fixture_UNVERIFIED.txt", "sglang"), ("tgi.txt", "tgi"), ("triton_tensorrtllm.txt", "triton"),
    ("llamacpp_b5994.txt", "llamacpp"), ("llamacpp_b8180.txt", "llamacpp"), ("llamacpp_b9383.txt", "llamacpp"),
    ("llamacpp_b10452.txt", "llamacpp"),
])
def test_every_capture_parses_and_is_detected(name, kind):
    samples = parse_metrics((FIX / name).read_text())
    assert detect_kind(samples) == kind
    tr = EndpointTracker(url="http://x")
    tr.feed(100.0, (FIX / name).read_text())
    r = tr.reading()
    assert r.kind == kind and r.up and tr.garbage == 0


def test_capture_values():
    s = parse_metrics((FIX / "sglang.txt").read_text())
    assert total(s, ["sglang:num_running_reqs"]) == 162.0
    r = _one("sglang.txt")
    assert r.gen_tokens_per_s is None  # one scrape: the counter has no rate yet (its gauge does not stand in)
    assert r.kv_cache_pct is not None and 0 <= r.kv_cache_pct <= 100
    t = _one("triton_tensorrtllm.txt")
    assert t.kv_cache_pct == pytest.approx(48.75) and t.requests_running == 0 and t.requests_waiting == 1
    v = _one("vllm_v0.txt")
    assert v.requests_running is not None and v.model


def _one(name):
    tr = EndpointTracker(url="http://x")
    tr.feed(1.0, (FIX / name).read_text())
    return tr.reading()


def test_llamacpp_exponent_counters():
    s = parse_metrics((FIX / "llamacpp_b10452.txt").read_text())
    v = total(s, ["llamacpp:tokens_predicted_total"])
    assert v is not None and v >= 0


@pytest.mark.parametrize("text,why", [
    ("<html><body>502 Bad Gateway</body></html>", "not Prometheus text: line 1 looks like HTML or XML"),
    ("{\"json\": true}", "not Prometheus text: line 1 looks like JSON"),
    ("metric{broken 1\n", "not Prometheus text: line 1 has a '{' with no '}' after it"),
    ("\x00\x01\x02", "not Prometheus text: line 1 is binary data, not text"),
])
def test_garbage_is_counted_not_raised(text, why):
    with pytest.raises(MetricsError, match=re.escape(why)):  # the parser refuses it, saying why
        parse_metrics(text)
    tr = EndpointTracker(url="http://x")
    tr.feed(1.0, text)  # the tracker counts it instead of raising
    assert tr.garbage == 1 and tr.reading().error


def test_an_empty_page_is_no_samples_not_an_error():
    assert parse_metrics("") == {} and parse_metrics("# only a comment\n\n") == {}


@pytest.mark.parametrize("points,rate", [
    ([(0, 0), (10, 100)], 10.0),
    ([(0, 100), (5, 150), (10, 20)], (50 + 20) / 10),  # restart at t=10: the counter began again from 0
    ([(0, 5)], None),
    ([(0, 5), (0, 9)], None),
    ([(0, 1.90511e06), (2, 1.90531e06)], 100.0),  # llama.cpp's 6-digit exponent counters
    ([(0, 0), (1, 0), (2, 0)], 0.0),
])
def test_counter_rate(points, rate):
    r = counter_rate(points)
    assert (r is None and rate is None) or r == pytest.approx(rate)


@pytest.mark.parametrize("q,buckets,expect", [
    (0.5, {0.1: 0, 0.2: 10, 0.5: 20, float("inf"): 20}, 0.2),
    (0.95, {0.1: 0, 0.2: 10, 0.5: 20, float("inf"): 20}, 0.2 + 0.3 * 9 / 10),
    (0.5, {1.0: 0, float("inf"): 0}, None),
    (0.99, {0.1: 5, float("inf"): 10}, 0.1),  # in the +Inf bucket: the largest finite bound
])
def test_histogram_quantile(q, buckets, expect):
    r = histogram_quantile(q, buckets)
    assert (r is None and expect is None) or r == pytest.approx(expect)


def _vllm(gen, engines=("0", "1"), running=3):
    lines = ["# TYPE vllm:generation_tokens_total counter"]
    for e in engines:
        lines.append(f'vllm:generation_tokens_total{{engine="{e}",model_name="m"}} {gen / len(engines)}')
    lines += ["# TYPE vllm:num_requests_running gauge", f'vllm:num_requests_running{{model_name="m"}} {running}']
    return "\n".join(lines) + "\n"


def test_several_engines_are_summed_and_a_restart_is_a_reset():
    tr = EndpointTracker(url="http://x", window_s=100)
    tr.feed(0, _vllm(1000))
    tr.feed(10, _vllm(3000))
    assert tr.reading().gen_tokens_per_s == pytest.approx(200.0)
    tr.feed(20, _vllm(500))  # restarted: counts from zero again; the window starts afresh
    assert tr.reading().gen_tokens_per_s is None and tr.resets == 1
    tr.feed(30, _vllm(2500))
    assert tr.reading().gen_tokens_per_s == pytest.approx(200.0)


def test_sglang_sticky_gauge_reads_zero_when_idle():
    text = ("# TYPE sglang:gen_throughput gauge\nsglang:gen_throughput 812.5\n"
            "# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs {}\n")
    tr = EndpointTracker(url="http://x")
    tr.feed(1, text.format(4))
    assert tr.reading().gen_tokens_per_s == 812.5
    tr.feed(2, text.format(0))
    assert tr.reading().gen_tokens_per_s == 0.0


def test_latency_from_histogram_deltas_and_spec_decode():
    def text(n, s, acc, drafts, dtok):
        return ("# TYPE vllm:time_to_first_token_seconds histogram\n"
                f'vllm:time_to_first_token_seconds_bucket{{le="0.1"}} {n // 2}\n'
                f'vllm:time_to_first_token_seconds_bucket{{le="0.5"}} {n}\n'
                f'vllm:time_to_first_token_seconds_bucket{{le="+Inf"}} {n}\n'
                f"vllm:time_to_first_token_seconds_sum {s}\nvllm:time_to_first_token_seconds_count {n}\n"
                "# TYPE vllm:spec_decode_num_accepted_tokens_total counter\n"
                f"vllm:spec_decode_num_accepted_tokens_total {acc}\n"
                "# TYPE vllm:spec_decode_num_drafts_total counter\n"
                f"vllm:spec_decode_num_drafts_total {drafts}\n"
                "# TYPE vllm:spec_decode_num_draft_tokens_total counter\n"
                f"vllm:spec_decode_num_draft_tokens_total {dtok}\n")

    tr = EndpointTracker(url="http://x")
    tr.feed(0, text(100, 20.0, 0, 0, 0))
    tr.feed(5, text(200, 40.0, 300, 100, 400))
    r = tr.reading()
    assert r.ttft_mean_s == pytest.approx(0.2)
    assert r.ttft_p50_s is None and r.ttft_p50_bounds_s == (0.0, 0.1)  # one wide bucket: bounds, no value
    assert r.spec_accept_length == pytest.approx(4.0) and r.spec_accept_rate == pytest.approx(0.75)


@pytest.mark.parametrize("url,kind,expect", [
    ("http://h:8000", None, "http://h:8000/metrics"), ("http://h:8000/", "trtllm", "http://h:8000/prometheus/metrics"),
    ("https://h/custom/path", None, "https://h/custom/path"),
    # the query is kept with or without a path (it was dropped where the URL had none: ?token= never sent)
    ("http://h:8000?token=t", None, "http://h:8000/metrics?token=t"),
    ("http://h:8000/?token=t&x=1", "trtllm", "http://h:8000/prometheus/metrics?token=t&x=1"),
    ("https://h/custom/path?token=t", None, "https://h/custom/path?token=t"),
])
def test_metrics_url(url, kind, expect):
    assert metrics_url(url, kind) == expect


def test_headers_from_flags_and_environment():
    h = parse_headers(["X-A: 1"], {"GPUSCOPE_ENDPOINT_HEADERS": "X-B: two; X-C:3", "GPUSCOPE_ENDPOINT_TOKEN": "s3"})
    assert h == {"X-A": "1", "X-B": "two", "X-C": "3", "Authorization": "Bearer s3"}
    with pytest.raises(ValueError):
        parse_headers(["no colon"], {})


@pytest.mark.parametrize(("metrics", "base"), [
    ("http://h:8000/metrics", ("http://h:8000", "")),
    ("http://h:8000/metrics?token=t/x", ("http://h:8000", "?token=t/x")),  # a '/' in the query is not the path's
    ("http://h:8000/prometheus/metrics?k=v", ("http://h:8000", "?k=v")),
    ("https://h/llm/metrics", ("https://h/llm", "")),
])
def test_probe_base_keeps_the_query_apart(metrics, base):
    from gpuscope.sources.endpoint import probe_base

    assert probe_base(metrics) == base


# ------------------------------------------------------------------ real HTTP servers
_Server = HttpServer


def _exposition_server(kind: str, rate: float, t0: float):
    """A prometheus_client exposition whose token counter advances at ``rate`` tokens/s."""
    from prometheus_client import CollectorRegistry, generate_latest
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    class Collector:
        def collect(self):
            n = rate * (time.time() - t0)
            if kind == "vllm":
                c = CounterMetricFamily("vllm:generation_tokens", "gen", labels=["model_name", "engine"])
                c.add_metric(["m", "0"], n * 0.25)
                c.add_metric(["m", "1"], n * 0.75)
                yield c
                g = GaugeMetricFamily("vllm:num_requests_running", "r", labels=["model_name"])
                g.add_metric(["m"], 7)
                yield g
            else:  # sglang counter (bursty in reality; here smooth)
                c = CounterMetricFamily("sglang:generation_tokens", "gen", labels=["model_name"])
                c.add_metric(["m"], n)
                yield c

    reg = CollectorRegistry()
    reg.register(Collector())

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = generate_latest(reg)
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    return _Server(H)


def _llamacpp_server(rate: float, t0: float):
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            n = 1_000_000 + rate * (time.time() - t0)
            body = ("# HELP llamacpp:tokens_predicted_total Number of generation tokens processed.\n"
                    "# TYPE llamacpp:tokens_predicted_total counter\n"
                    f"llamacpp:tokens_predicted_total {n:g}\n"  # C++ default: 6 significant digits
                    "# TYPE llamacpp:requests_processing gauge\nllamacpp:requests_processing 2\n").encode()
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    return _Server(H)


def _poll_until(poller, cond, timeout=30.0, what="the reading"):
    """The first endpoint's reading once ``cond`` holds for it; fails after ``timeout`` seconds."""
    return wait_for(lambda: next((r for r in [poller.latest()[0]] if cond(r)), None), timeout, what)


def _window_full(poller, span_s):
    """The poller's first tracker holds scrapes spanning ``span_s`` seconds (its rate window is full)."""
    snaps = poller.trackers[0].snaps
    return len(snaps) >= 2 and snaps[-1].t - snaps[0].t >= span_s


@pytest.mark.slow
@pytest.mark.parametrize("kind,rate", [("vllm", 1234.0), ("sglang", 250.0)])
def test_reports_the_served_rate_within_2_percent(kind, rate):
    srv = _exposition_server(kind, rate, time.time())
    p = EndpointPoller([srv.url], interval_s=0.25, window_s=4.0).start()
    try:
        wait_for(lambda: _window_full(p, 3.9), 30, "4 s of scrapes")
        r = p.latest()[0]
        assert r.kind == kind and r.up
        assert r.gen_tokens_per_s == pytest.approx(rate, rel=0.02)
    finally:
        p.stop()
        srv.close()


@pytest.mark.slow
def test_a_slow_first_answer_does_not_skew_the_rate():
    """The server reads its counter 0.6 s after the first request arrived (a cold connection, a busy server):
    timed from the request's start a 2 s rate read 23 % low; timed when the answer arrives it is right."""
    rate, t0 = 1000.0, time.time()
    first = threading.Event()

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if not first.is_set():
                first.set()
                time.sleep(0.6)
            body = f"# TYPE vllm:generation_tokens counter\nvllm:generation_tokens_total {rate * (time.time() - t0):.3f}\n"
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *a):
            pass

    srv = _Server(H)
    p = EndpointPoller([srv.url], interval_s=0.25, window_s=4.5, timeout_s=3.0).start()
    try:
        wait_for(lambda: len(p.trackers[0].snaps) >= 2 and p.trackers[0].snaps[-1].t - p.trackers[0].snaps[0].t >= 2.0,
                 30, "2 s of scrapes")
        assert p.latest()[0].gen_tokens_per_s == pytest.approx(rate, rel=0.03)
    finally:
        p.stop()
        srv.close()


@pytest.mark.slow
def test_llamacpp_six_digit_counter_rate_over_a_long_window():
    rate = 500.0  # 6 significant digits of ~1e6 = 10-token steps: a long window keeps the error small
    srv = _llamacpp_server(rate, time.time())
    p = EndpointPoller([srv.url], interval_s=0.25, window_s=5.0).start()
    try:
        wait_for(lambda: _window_full(p, 4.9), 30, "5 s of scrapes")
        r = p.latest()[0]
        assert r.kind == "llamacpp" and r.requests_running == 2
        assert r.gen_tokens_per_s == pytest.approx(rate, rel=0.02)
    finally:
        p.stop()
        srv.close()


def test_hanging_endpoint_times_out_and_says_since_when():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)  # accepts connections, never answers
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    p = EndpointPoller([url], interval_s=0.2, timeout_s=0.5).start()
    try:
        r = _poll_until(p, lambda r: r.up is False, what="the hanging endpoint to be marked down")
        assert not r.up and "unreachable since" in r.error and "no answer in 0.5 s" in r.error
    finally:
        p.stop()
        sock.close()


def test_refused_connection():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    p = EndpointPoller([f"http://127.0.0.1:{port}"], interval_s=0.2).start()
    try:
        r = _poll_until(p, lambda r: r.up is False, what="the refused endpoint to be marked down")
        assert "connection refused" in r.error
    finally:
        p.stop()


@pytest.mark.slow
def test_html_and_dropping_endpoints():
    class Html(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(b"<html><body>login</body></html>")

        def log_message(self, *a):
            pass

    class Drop(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.connection.shutdown(socket.SHUT_RDWR)

        def log_message(self, *a):
            pass

    html, drop = _Server(Html), _Server(Drop)
    p = EndpointPoller([html.url, drop.url], interval_s=0.2).start()
    try:
        wait_for(lambda: p.trackers[0].garbage >= 2 and p.latest()[1].up is False, 30,
                 "two bad HTML answers and the dropping endpoint down")
        a, b = p.latest()
        assert a.up is True and "bad responses" in (a.error or "") and p.trackers[0].garbage >= 2
        assert not b.up and "unreachable since" in b.error
    finally:
        p.stop()
        html.close()
        drop.close()


@pytest.mark.slow
def test_record_with_an_endpoint_keeps_tok_s_in_recording_summary_and_export(tmp_path):
    import json
    import subprocess
    import sys

    srv = _exposition_server("vllm", 800.0, time.time())
    out = tmp_path / "r.jsonl.gz"
    try:
        p = subprocess.run([sys.executable, "-m", "gpuscope", "record", "-o", str(out), "--simulate", "mixed-4",
                            "--interval", "0.5", "--duration", "6", "--endpoint", srv.url, "--endpoint-window", "3"],
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
    finally:
        srv.close()
    s = json.loads(subprocess.run([sys.executable, "-m", "gpuscope", "summary", str(out), "--json"],
                                  capture_output=True, text=True).stdout)
    (ep,) = s["endpoints"]
    assert ep["kind"] == "vllm" and ep["stats"]["gen_tokens_per_s"]["p50"] == pytest.approx(800, rel=0.05)
    csv_out = tmp_path / "r.csv"
    subprocess.run([sys.executable, "-m", "gpuscope", "export", str(out), "--csv", str(csv_out)], check=True,
                   capture_output=True)
    last = csv_out.read_text().splitlines()[-1].split(",")
    assert float(last[-1]) == pytest.approx(800, rel=0.05)


def test_bad_endpoint_flags_are_one_line_errors():
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "gpuscope", "record", "-o", "/tmp/x.gz", "--simulate", "mixed-4",
                        "--endpoint", "localhost:8000"], capture_output=True, text=True)
    assert p.returncode == 2 and "expected http://HOST:PORT" in p.stderr and "Traceback" not in p.stderr
    p = subprocess.run([sys.executable, "-m", "gpuscope", "record", "-o", "/tmp/x.gz", "--simulate", "mixed-4",
                        "--endpoint", "http://h:1", "--endpoint-header", "nocolon"], capture_output=True, text=True)
    assert p.returncode == 2 and "bad header in --endpoint-header" in p.stderr and p.stderr.count("\n") == 1
    assert "nocolon" not in p.stderr  # the flag is named, its value (perhaps a token) never quoted


def _reference(text):
    from prometheus_client.parser import text_string_to_metric_families

    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append((dict(s.labels), s.value))
    return out


def _norm(d):
    import math

    # prometheus_client appends _total to counters that lack it; servers (TGI, Triton) emit them bare
    return {k.removesuffix("_total"): sorted((tuple(sorted(lab.items())), "nan" if math.isnan(v) else v)
                                             for lab, v in rows) for k, rows in d.items()}


@pytest.mark.parametrize("name", sorted(p.name for p in FIX.glob("*.txt") if "sse" not in p.name))
def test_fast_parser_agrees_with_prometheus_client(name):
    text = (FIX / name).read_text()
    if name.startswith("ollama"):
        with pytest.raises(MetricsError):
            parse_metrics(text)
        return
    assert _norm(parse_metrics(text)) == _norm(_reference(text))


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=examples(300), deadline=None)
@given(st.text(max_size=300))
def test_parser_never_crashes_on_garbage(text):
    try:
        parse_metrics(text)
    except MetricsError:
        pass


# ------------------------------------------------------------------ the active probe
def test_measure_stream_on_the_llamacpp_capture():
    from gpuscope.sources.endpoint import measure_stream, sse_events

    lines = (FIX / "llamacpp_sse_chat_stream_b10452.txt").read_text().splitlines()
    events = list(sse_events(lines))
    timed = [(1.0 + 0.01 * k, ev) for k, ev in enumerate(events)]
    r = measure_stream(timed, t_start=0.5)
    assert r.completion_tokens == 7  # from llama.cpp's timings.predicted_n (no usage in this stream)
    assert r.ttft_s == pytest.approx(0.51)  # the role-only first chunk is not a token
    assert r.decode_tokens_per_s is not None and r.decode_tokens_per_s > 0


def _sse_server(first_delay: float, n: int, gap: float):
    import json as _json

    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            if self.path == "/v1/models":
                body = b'{"data": [{"id": "tiny"}]}'
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            else:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()

            def send(obj):
                self.wfile.write(b"data: " + _json.dumps(obj).encode() + b"\n\n")
                self.wfile.flush()

            send({"choices": [{"delta": {"role": "assistant", "content": None}}]})
            time.sleep(first_delay)
            for k in range(n):
                if k:
                    time.sleep(gap)
                send({"choices": [{"delta": {"content": f"{k} "}}]})
            send({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": n}})
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            self.close_connection = True

        def log_message(self, *a):
            pass

    return _Server(H)


def test_probe_against_a_real_streaming_server():
    import asyncio

    import httpx

    from gpuscope.sources.endpoint import probe_chat

    srv = _sse_server(first_delay=0.15, n=21, gap=0.02)

    async def go():
        async with httpx.AsyncClient(timeout=5) as c:
            return await probe_chat(c, srv.url)

    try:
        r = asyncio.run(go())
    finally:
        srv.close()
    assert r.error is None and r.completion_tokens == 21
    assert r.ttft_s == pytest.approx(0.15, abs=0.06)
    assert r.decode_tokens_per_s == pytest.approx(20 / 0.4, rel=0.2)  # 50 tok/s


def test_probe_fills_in_for_a_server_without_metrics():
    srv = _sse_server(first_delay=0.05, n=11, gap=0.02)
    p = EndpointPoller([srv.url], interval_s=0.5, probe_every_s=0.5).start()
    try:
        r = _poll_until(p, lambda r: r.probe, what="a probe result")
        assert r.probe and r.up and r.kind == "probe"
        assert r.gen_tokens_per_s == pytest.approx(10 / 0.2, rel=0.3)
        assert r.probe_ttft_s is not None and r.ttft_p50_s is None  # the probe's TTFT in its own field
        assert r.probe_fields == ("gen_tokens_per_s",)
    finally:
        p.stop()
        srv.close()


def test_several_models_get_a_reading_each():
    def text(a, b):
        return ("# TYPE vllm:generation_tokens_total counter\n"
                f'vllm:generation_tokens_total{{model_name="big",engine="0"}} {a}\n'
                f'vllm:generation_tokens_total{{model_name="big",engine="1"}} {a}\n'
                f'vllm:generation_tokens_total{{model_name="small",engine="0"}} {b}\n'
                "# TYPE vllm:num_requests_running gauge\n"
                'vllm:num_requests_running{model_name="big"} 7\nvllm:num_requests_running{model_name="small"} 2\n')

    tr = EndpointTracker(url="http://x")
    tr.feed(0, text(0, 0))
    tr.feed(10, text(500, 300))
    by = {r.model: r for r in tr.readings()}
    assert set(by) == {"big", "small"}
    assert by["big"].gen_tokens_per_s == pytest.approx(100.0) and by["big"].requests_running == 7
    assert by["small"].gen_tokens_per_s == pytest.approx(30.0) and by["small"].requests_running == 2


@pytest.mark.parametrize(("n", "want"), [(1, "1 bad response"), (2, "2 bad responses"), (8, "8 bad responses")])
def test_bad_responses_counted_in_words(n: int, want: str) -> None:
    from gpuscope.core.model import EndpointReading
    from gpuscope.core.vocab import endpoint_state
    from gpuscope.sources.endpoint import bad_responses

    assert bad_responses(n) == want
    assert endpoint_state(EndpointReading(url="http://x", error=want + ": not Prometheus text")) == "bad"


BINARY = bytes(range(256)) * 4 + os.urandom(512)


@pytest.mark.parametrize(("text", "want"), [
    ("<html><body>502 Bad Gateway</body></html>",
     "not Prometheus text: line 1 looks like HTML or XML (it says 502 Bad Gateway)"),
    ("<html><title>401 Authorization Required</title>Bearer sk-secret</html>",
     "not Prometheus text: line 1 looks like HTML or XML (it says 401 Authorization Required)"),
    ("<html>Bearer MySuperSecretTokenValue123</html>", "not Prometheus text: line 1 looks like HTML or XML"),
    ('{"error": "unauthorized"}', "not Prometheus text: line 1 looks like JSON"),
    ("[1, 2]", "not Prometheus text: line 1 looks like JSON"),
    ("\x00\x01\x02\x03 1", "not Prometheus text: line 1 is binary data, not text"),
    ("ok_metric 1\nbad\ufffd\ufffd 2", "not Prometheus text: line 2 is binary data, not text"),  # invalid UTF-8
    ("\x1b[2J\x1b]0;pwned\x07x 1 2 3", "not Prometheus text: line 1 is binary data, not text"),  # escapes
    ("# HELP x\nx 1\n\nx{a=b} 1", 'not Prometheus text: line 4 has labels that are not name="value" pairs'),
    ("metric{broken 1", "not Prometheus text: line 1 has a '{' with no '}' after it"),
    ("9lives 1", "not Prometheus text: line 1 does not start with a metric name"),
    ("lonely_name", "not Prometheus text: line 1 has no value"),
    ("a 1 2 3", "not Prometheus text: line 1 has more than a value and a timestamp"),
    ("x one", "not Prometheus text: line 1 has a value that is not a number"),
    # a server that echoes the request's Authorization header: the token must not be quoted back
    ("Bearer MySuperSecretTokenValue123", "not Prometheus text: line 1 has a value that is not a number"),
    ("Basic Ym9iOmh1bnRlcjJwYXNz", "not Prometheus text: line 1 has a value that is not a number"),
    ("hf_abcdefghijklmnopqrstuvwxyz123456 sk-proj-AAAA", "not Prometheus text: line 1 has a value that is not a number"),
])
def test_garbage_is_said_in_words(text, want):
    """A /metrics body that is not Prometheus text is said in words ("not Prometheus text: line 1 is binary data,
    not text"), never with the line's text: a server echoing the request's Authorization header had its Bearer
    token quoted on stderr and in every recorded frame. Only an HTTP status a proxy's page names is quoted."""
    with pytest.raises(MetricsError) as e:
        parse_metrics(text)
    assert str(e.value) == want


BAD_LINE_WORDS = ("is binary data, not text", "looks like HTML or XML", "looks like JSON",
                  'has labels that are not name="value" pairs', "has a '{' with no '}' after it",
                  "does not start with a metric name", "has no value", "has more than a value and a timestamp",
                  "has a value that is not a number")


@settings(max_examples=examples(300), deadline=None)
@given(st.text(min_size=1, max_size=300) | st.binary(min_size=1, max_size=300).map(
    lambda b: b.decode("utf-8", "replace")))
def test_any_garbage_error_is_short_printable_and_escapes_nothing(text):
    """Any body that is not Prometheus text gives a one-line error made of the parser's own words only (and an HTTP
    status a page names): never a byte, an escape or a word of the body."""
    try:
        parse_metrics(text)
    except MetricsError as e:
        msg = str(e)
        assert msg.startswith("not Prometheus text: line ")
        assert msg.isprintable() and "\ufffd" not in msg
        # only the parser's own words, and at most an HTTP status a page names: never the body's text
        whats = "|".join(map(re.escape, BAD_LINE_WORDS))
        assert re.fullmatch(rf"not Prometheus text: line \d+ ({whats})( \(it says [1-5]\d\d [A-Za-z ]+\))?", msg), msg


class _Garbage(http.server.BaseHTTPRequestHandler):
    served = 0

    def do_GET(self) -> None:
        type(self).served += 1
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(BINARY)))
        self.end_headers()
        self.wfile.write(BINARY)

    def log_message(self, *a: object) -> None:
        pass


@pytest.mark.slow
def test_a_real_server_serving_binary_garbage_is_said_in_words():
    """A real server answering binary garbage: the endpoint stays up, its error counts the bad responses and says
    what they were in words, and the poller backs off (a bad answer is retried like an unreachable server)."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Garbage)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    p = EndpointPoller([f"http://127.0.0.1:{httpd.server_address[1]}"], interval_s=0.2).start()
    try:
        wait_for(lambda: p.trackers[0].garbage >= 1, 30, "a garbage answer")
        r = p.latest()[0]
        assert r.up is True
        assert r.error is not None and re.search(r"\d+ bad responses?: not Prometheus text: line 1 is binary data, "
                                                 r"not text$", r.error), r.error
        assert "\\x" not in r.error and len(r.error) < 80
        # backoff: at a 0.2 s interval, retries wait 0.2, 0.4, 0.8, 1.6, 3.2 s (15 polls in 3 s without it)
        first = _Garbage.served
        time.sleep(3.0)
        assert _Garbage.served - first <= 7, _Garbage.served - first
    finally:
        p.stop()
        httpd.shutdown()
        httpd.server_close()
