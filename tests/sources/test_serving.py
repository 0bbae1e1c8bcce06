"""Serving metrics that survive restarts and say what they mean: tables over the pure parts, a restart that
once gave wrong rates, the real vLLM 0.32 capture, and a real HTTP server that restarts mid-run."""

from __future__ import annotations

import http.server
import time
from collections import deque
from dataclasses import replace

import pytest
from helpers import FIXTURES, HttpServer

from gpuscope.sources.endpoint import (
    EndpointPoller,
    EndpointTracker,
    _Snap,
    buckets,
    next_backoff,
    parse_metrics,
    quantile_with_bounds,
    reset_reason,
    trim_window,
)

FIX = FIXTURES / "inference"
VLLM032 = (FIX / "vllm_0.32.0_v1_cpu_load.txt").read_text()
GEN = 'vllm:generation_tokens_total{engine="0",model_name="tiny"}'
PROMPT = 'vllm:prompt_tokens_total{engine="0",model_name="tiny"}'
COMPUTED = 'vllm:prompt_tokens_by_source_total{engine="0",model_name="tiny",source="local_compute"}'
CACHED = 'vllm:prompt_tokens_by_source_total{engine="0",model_name="tiny",source="local_cache_hit"}'
QUERIES = 'vllm:prefix_cache_queries_total{engine="0",model_name="tiny"}'
HITS = 'vllm:prefix_cache_hits_total{engine="0",model_name="tiny"}'
PREEMPT = 'vllm:num_preemptions_total{engine="0",model_name="tiny"}'
START = "process_start_time_seconds"


def vllm_text(values: dict[str, float], zero_rest: bool = False) -> str:
    """The real vLLM 0.32 capture with some samples set to ``values`` (and, with ``zero_rest``, every
    other count zeroed: the same server just after it started)."""
    out = []
    for line in VLLM032.splitlines():
        if line and line[0] != "#":
            key, _sp, _v = line.rpartition(" ")
            if key in values:
                line = f"{key} {values[key]!r}"
            elif zero_rest and not (key == START or "_created" in key or "_info" in key):
                line = f"{key} 0.0"
        out.append(line)
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------ pure parts, tables
@pytest.mark.parametrize("prev,interval,expect", [
    (0.0, 1.0, 1.0), (1.0, 1.0, 2.0), (2.0, 1.0, 4.0), (4.0, 1.0, 5.0), (5.0, 1.0, 5.0),  # cap 5 s
    (0.0, 0.25, 0.25), (4.0, 0.25, 5.0), (0.0, 10.0, 10.0), (10.0, 10.0, 20.0), (20.0, 10.0, 20.0),  # cap 2x
    (30.0, 1.0, 5.0),
])
def test_backoff_is_capped_at_max_5s_or_twice_the_interval(prev, interval, expect):
    assert next_backoff(prev, interval) == expect


def _snap(t, gen=None, ttft_n=None, start=None, model=None):
    c = {} if gen is None else {"gen": gen}
    h = {} if ttft_n is None else {"ttft": ({1.0: ttft_n}, ttft_n * 0.1, ttft_n)}
    return _Snap(t, {model: c}, {model: h}, start)


@pytest.mark.parametrize("prev,new,was_down,expect", [
    (None, _snap(1, 10), False, None),
    (_snap(1, 10), _snap(2, 20), False, None),
    (_snap(1, 10), _snap(2, 20), True, "outage"),  # recovered: the old scrape predates the downtime
    (_snap(1, 10, start=(100.0,)), _snap(2, 20, start=(100.0,)), False, None),
    (_snap(1, 10, start=(100.0,)), _snap(2, 2000, start=(150.0,)), False, "restarted"),  # counter higher, new process
    (_snap(1, 10), _snap(2, 5), False, "counter reset"),
    (_snap(1, 10, ttft_n=50), _snap(2, 20, ttft_n=3), False, "counter reset"),  # histogram count dropped
    (_snap(5, 10), _snap(2, 20), False, "clock"),
    (_snap(1, 10, start=None), _snap(2, 20, start=(5.0,)), False, None),  # start time newly exposed: no reset
])
def test_reset_reason(prev, new, was_down, expect):
    why = reset_reason(prev, new, was_down)
    assert (why is None) if expect is None else (expect in why)


@pytest.mark.parametrize("times,t,window,kept", [
    ([0, 1, 2, 3], 3, 10, [0, 1, 2, 3]),
    ([0, 1, 2, 3, 12], 12, 10, [2, 3, 12]),  # one point at or before t - window anchors the rate
    ([0, 10, 35], 35, 10, [35]),  # a 25 s gap: no point older than 2 x window survives → no rate
    ([0, 19, 20], 20, 10, [0, 19, 20]),  # exactly 2 x window: the limit
    ([0, 5, 20], 20, 10, [5, 20]),  # 15 s span ≤ 2 x window: kept
])
def test_window_never_spans_more_than_twice_its_length(times, t, window, kept):
    snaps = deque(_snap(x, x) for x in times)
    trim_window(snaps, t, window)
    assert [s.t for s in snaps] == kept
    assert snaps[-1].t - snaps[0].t <= 2 * window


@pytest.mark.parametrize("cum,q,value,bounds", [
    ({0.01: 0, 0.025: 32681, 0.05: 36096, float("inf"): 36210}, 0.5, None, (0.01, 0.025)),  # vLLM ITL: too coarse
    ({1.0: 0, 1.1: 100, float("inf"): 100}, 0.5, pytest.approx(1.05), (1.0, 1.1)),  # 10 % wide: supported
    ({0.1: 50, 0.5: 100, float("inf"): 100}, 0.5, None, (0.0, 0.1)),
    ({0.1: 0, 80.0: 10, float("inf"): 100}, 0.95, None, (80.0,)),  # in +Inf: only "> 80 s"
    ({0.1: 0, float("inf"): 0}, 0.5, None, None),  # no observations
])
def test_quantile_only_where_the_histogram_supports_it(cum, q, value, bounds):
    v, b = quantile_with_bounds(q, cum)
    assert v == value and b == bounds


# ------------------------------------------------------------------ a restart that once gave wrong rates
def _counter_text(n: float, start: float | None = None) -> str:
    s = f"# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds {start}\n" if start else ""
    return s + f'# TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total{{model_name="m"}} {n}\n'


@pytest.mark.parametrize("case", ["failed_then_restart", "restart_no_failures_seen", "restart_counter_higher",
                                  "outage_no_restart"])
def test_rates_after_an_outage_and_restart_are_right_from_the_second_scrape(case):
    """250 tok/s for t=0-10, failed() for t=11-61, the server restarted at t=54: after recovery at
    t=62 the rate is "–" for one scrape, then within 10 % of 250 (it was 31.6 → 61 tok/s)."""
    tr = EndpointTracker(url="http://x", window_s=10.0)
    base = 10_000.0 if case == "restart_counter_higher" else 0.0
    for t in range(0, 11):
        tr.feed(t, _counter_text(250.0 * t, start=1000.0))
    assert tr.reading().gen_tokens_per_s == pytest.approx(250.0)
    if case != "restart_no_failures_seen":
        for t in range(11, 62):
            tr.failed(t, "connection refused")
        assert not tr.reading().up and tr.reading().gen_tokens_per_s is None  # "–", never 0
    got = []
    for t in range(62, 75):
        if case == "outage_no_restart":
            tr.feed(t, _counter_text(250.0 * t, start=1000.0))
        else:
            tr.feed(t, _counter_text(base + 250.0 * (t - 54), start=1054.0))
        got.append(tr.reading().gen_tokens_per_s)
    assert got[0] is None  # one fresh scrape: no rate yet
    for g in got[1:]:
        assert g == pytest.approx(250.0, rel=0.10)
    assert tr.resets == 1


def test_a_gap_in_scrapes_gives_no_rate_rather_than_a_long_average():
    tr = EndpointTracker(url="http://x", window_s=10.0)
    for t in range(0, 11):
        tr.feed(t, _counter_text(250.0 * t))
    tr.feed(35, _counter_text(250.0 * 10 + 20.0 * 25))  # 25 s later, slower: a 25 s average would be 40
    assert tr.reading().gen_tokens_per_s is None
    tr.feed(36, _counter_text(250.0 * 10 + 20.0 * 26))
    assert tr.reading().gen_tokens_per_s == pytest.approx(20.0)


# ------------------------------------------------------------------ the real vLLM 0.32 capture
def test_vllm_032_capture_latency_means_exact_quantiles_honest():
    s = parse_metrics(VLLM032)
    itl = buckets(s, ["vllm:inter_token_latency_seconds"])
    assert itl is not None
    b, total_s, n = itl
    assert total_s / n == pytest.approx(685.1524232720014 / 36210)  # 18.92 ms exact mean
    v, bounds = quantile_with_bounds(0.5, b)
    assert v is None and bounds == (0.01, 0.025)  # "p50 10–25 ms": the buckets cannot place it closer

    tr = EndpointTracker(url="http://x", window_s=120.0)
    tr.feed(0.0, vllm_text({}, zero_rest=True))  # the same server just after it started
    tr.feed(60.0, VLLM032)
    r = tr.reading()
    assert r.kind == "vllm" and r.model == "tiny" and r.resets == 0 and r.rate_window_s == 60.0
    assert r.gen_tokens_per_s == pytest.approx(36353 / 60)
    assert r.prompt_tokens_per_s == pytest.approx(6132 / 60)
    assert r.prompt_computed_tokens_per_s == pytest.approx(6132 / 60) and r.prompt_cached_tokens_per_s == 0.0
    assert r.prefix_cache_hit_pct == 0.0  # 0 hits of 6132 queries: a real zero
    assert r.ttft_mean_s == pytest.approx(260.7081289291382 / 143)
    assert r.itl_mean_s == pytest.approx(685.1524232720014 / 36210)
    assert r.queue_mean_s == pytest.approx(221.21533544100146 / 142)  # at 16 streams TTFT is mostly queueing
    assert r.prefill_mean_s == pytest.approx(22.051064816998178 / 142)
    assert r.itl_p50_s is None and r.itl_p50_bounds_s == (0.01, 0.025)
    assert r.ttft_p50_bounds_s == (0.1, 0.25) and r.ttft_p95_bounds_s == (5.0, 7.5)
    assert r.preemptions_per_min == 0.0 and r.requests_waiting == 7.0


def test_prefix_cache_hits_are_not_counted_as_prompt_work():
    """20 identical 391-token prompts: +7,820 prompt tokens, of which 524 computed and 7,296 cache hits."""
    base = {PROMPT: 6132.0, COMPUTED: 6132.0, CACHED: 0.0, QUERIES: 6132.0, HITS: 0.0, GEN: 36353.0}
    after = {PROMPT: 6132.0 + 7820, COMPUTED: 6132.0 + 524, CACHED: 7296.0, QUERIES: 6132.0 + 7820, HITS: 7296.0,
             GEN: 36353.0 + 100}
    tr = EndpointTracker(url="http://x")
    tr.feed(0.0, vllm_text(base))
    tr.feed(4.0, vllm_text(after))
    r = tr.reading()
    assert r.prompt_tokens_per_s == pytest.approx(7820 / 4)
    assert r.prompt_computed_tokens_per_s == pytest.approx(524 / 4)
    assert r.prompt_cached_tokens_per_s == pytest.approx(7296 / 4)
    assert r.prefix_cache_hit_pct == pytest.approx(100 * 7296 / 7820)


def test_preemptions_rate_and_sglang_cache_hit_rate():
    tr = EndpointTracker(url="http://x", window_s=60.0)
    tr.feed(0.0, vllm_text({PREEMPT: 10.0}))
    tr.feed(30.0, vllm_text({PREEMPT: 16.0}))
    assert tr.reading().preemptions_per_min == pytest.approx(12.0)
    sg = EndpointTracker(url="http://y")
    sg.feed(1.0, (FIX / "sglang.txt").read_text())
    assert sg.reading().prefix_cache_hit_pct == pytest.approx(0.7507552643049313)


def test_served_models_are_capped_and_the_rest_counted():
    lines = ["# TYPE vllm:generation_tokens_total counter"]
    lines += [f'vllm:generation_tokens_total{{model_name="m{i:04d}"}} {i}' for i in range(5000)]
    tr = EndpointTracker(url="http://x")
    tr.feed(1.0, "\n".join(lines) + "\n")
    rs = tr.readings()
    *shown, rest = rs  # the 8 shown (no rate, no requests yet: by name), then one reading for the rest
    assert [r.model for r in shown] == [f"m{i:04d}" for i in range(8)] and all(r.models_dropped == 0 for r in shown)
    assert rest.model is None and rest.models_dropped == 4992


# ------------------------------------------------------------------ a real server that restarts mid-run
class RestartingVllm(HttpServer):
    """A real http.server on a free port serving the vLLM 0.32 capture whose token counters advance
    at ``rate`` tok/s since the process "started"; :meth:`restart` closes the socket for ``down_s``
    and comes back on the same port with counters from zero and a new process start time."""

    def __init__(self, rate: float):
        self.rate = rate
        self.started = time.time()
        self.port = 0
        self._serve()

    def _serve(self) -> None:
        owner = self

        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                n = owner.rate * (time.time() - owner.started)
                body = vllm_text({GEN: n, PROMPT: n / 4, COMPUTED: n / 4, START: owner.started}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        HttpServer.__init__(self, H, self.port)

    def restart(self, down_s: float) -> None:
        self.close()
        time.sleep(down_s)  # the server is down (this is the scenario, not a wait for a condition)
        self.started = time.time()
        self._serve()


@pytest.mark.slow
def test_a_real_server_restarting_mid_run_gives_blank_then_right_rates():
    srv = RestartingVllm(250.0)
    p = EndpointPoller([srv.url], interval_s=0.5, window_s=3.0).start()
    try:
        deadline = time.time() + 15
        while time.time() < deadline and p.latest()[0].gen_tokens_per_s is None:
            time.sleep(0.05)
        assert p.latest()[0].gen_tokens_per_s == pytest.approx(250.0, rel=0.10)
        srv.restart(down_s=2.0)
        t_back = time.time()
        seen = []
        deadline = time.time() + 15
        while time.time() < deadline:
            r = p.latest()[0]
            seen.append(r)
            if r.up and r.resets >= 1 and r.gen_tokens_per_s is not None:
                break
            time.sleep(0.05)
        after = [r for r in seen if r.up and r.resets >= 1]
        assert after and after[-1].gen_tokens_per_s == pytest.approx(250.0, rel=0.10)
        assert all(r.gen_tokens_per_s is None or r.gen_tokens_per_s == pytest.approx(250.0, rel=0.10) for r in after)
        assert any(r.up is False for r in seen) or after[0].gen_tokens_per_s is None  # the outage showed
        assert time.time() - t_back < 5 + 2 * 0.5 + 2  # noticed within the backoff cap
        end = time.time() + 1.5  # and it stays right on the following scrapes
        while time.time() < end:
            assert p.latest()[0].gen_tokens_per_s == pytest.approx(250.0, rel=0.10)
            time.sleep(0.1)
    finally:
        p.stop()
        srv.close()


def test_labels_name_what_a_number_is():
    tr = EndpointTracker(url="http://x", window_s=10.0)
    for t in range(0, 15):
        tr.feed(t, _counter_text(100.0 * t))
    r = tr.reading()
    assert r.rate_window_s == pytest.approx(10.0)  # the span the rate is over, shown as "10 s rate"


# ------------------------------------------------------------------ what the panel and the findings say
def _full_reading(**kw):
    from gpuscope.core.model import EndpointReading

    base = dict(url="http://gpu-server-01.example:8000", kind="vllm", model="meta-llama/Llama-3.1-70B-Instruct",
                gen_tokens_per_s=12345.6, prompt_tokens_per_s=98765.4, prompt_computed_tokens_per_s=5234.0,
                prompt_cached_tokens_per_s=93531.4, prefix_cache_hit_pct=94.7, preemptions_per_min=1234.0,
                requests_running=256.0, requests_waiting=1024.0, kv_cache_pct=99.9, ttft_mean_s=12.345,
                queue_mean_s=11.234, prefill_mean_s=1.111, itl_mean_s=0.0137, itl_p50_bounds_s=(0.01, 0.025),
                rate_window_s=10.0, spec_accept_length=2.53, probe_ttft_s=0.052, probe_decode_tokens_per_s=49.3,
                models_dropped=4992)
    base.update(kw)
    return EndpointReading(**base)


@pytest.mark.parametrize("bounds,value,expect", [
    ((0.01, 0.025), None, "p50 10–25 ms"), ((0.0, 0.01), None, "p50 0–10 ms"), ((5.0, 7.5), None, "p50 5–7.5 s"),
    ((0.5, 2.5), None, "p50 500 ms–2.5 s"), ((80.0,), None, "p50 > 80 s"), (None, None, ""),
    ((1.0, 1.1), 1.05, "p50 1,050 ms"),
])
def test_quantile_labels(bounds, value, expect):
    from gpuscope.widgets.inference_panel import fmt_bounds

    assert fmt_bounds("p50", value, bounds) == expect


def test_panel_lines_fit_80_columns_and_keep_every_number():
    from gpuscope.widgets.inference_panel import endpoint_lines

    r = _full_reading()
    lines = [x.plain for x in endpoint_lines(r)]
    assert all(len(x) <= 76 for x in lines), [(len(x), x) for x in lines]  # 80 columns minus border and padding
    text = "\n".join(lines)
    for number in ("12346", "98765", "5234", "93531", "95%", "1234/min", "256", "1024", "99.9%", "12,345 ms",
                   "11,234 ms", "1,111 ms", "13.7 ms", "p50 10–25 ms", "rates over 10 s", "probe", "52.0 ms", "49"):
        assert number in text, number
    # the models beyond the 8 shown: one line, every number kept
    rest = replace(r, model=None, models_dropped=4992, gen_tokens_per_s=123456.0, prompt_tokens_per_s=987654.0,
                   requests_running=25600, requests_waiting=102400)
    lines = [x.plain for x in endpoint_lines(rest)]
    assert all(len(x) <= 76 for x in lines), [(len(x), x) for x in lines]
    for number in ("+4992 models", "123456", "987654", "25600", "102400"):
        assert number in "\n".join(lines), number


@pytest.mark.parametrize("eps,expect", [
    ([], ("– tok/s", "  waiting for two scrapes")),
    ([dict(up=False, gen_tokens_per_s=None, rate_window_s=None)], ("– tok/s", "  unreachable")),  # never "0 tok/s"
    ([dict(gen_tokens_per_s=None, rate_window_s=None)], ("– tok/s", "  waiting for two scrapes")),
    ([dict(gen_tokens_per_s=357.0)], ("357 tok/s", "  10 s rate")),
    ([dict(gen_tokens_per_s=0.0)], ("0 tok/s", "  10 s rate")),  # idle is a real 0
    ([dict(gen_tokens_per_s=50.0, rate_window_s=None, probe_fields=("gen_tokens_per_s",))],
     ("50 tok/s", "  (probe)")),
])
def test_header_says_unknown_not_zero_and_names_the_window(eps, expect):
    from gpuscope.widgets.inference_panel import header_line

    assert header_line([_full_reading(**kw) for kw in eps]) == expect


@pytest.mark.parametrize("rates,kv,expect", [
    ([0.0, 0.0], 99.0, None),
    ([None, None], 99.0, None),
    ([12.0, 12.0], 98.0, ("warning", "KV cache pressure: 12 preemptions/min, KV 98 %")),
    ([3.0, 5.0], 60.0, ("info", "KV cache pressure: 4 preemptions/min, KV 60 %")),
])
def test_kv_pressure_finding(rates, kv, expect):
    from gpuscope.core.findings import rule_kv_pressure
    from gpuscope.core.model import Frame, Inventory

    inv = Inventory(host="h", devices=())
    frames = [Frame(t=float(i), gpus=(), endpoints=(_full_reading(preemptions_per_min=r, kv_cache_pct=kv),))
              for i, r in enumerate(rates)]
    got = rule_kv_pressure(inv, frames)
    if expect is None:
        assert got == []
    else:
        assert len(got) == 1 and got[0].severity == expect[0] and got[0].message.startswith(expect[1])


_READ = {"up": dict(up=True, gen_tokens_per_s=10.0), "down": dict(up=False, error="unreachable since 10:00:00 (refused)"),
         "bad": dict(up=True, error="3 bad responses: response larger than 8 MB refused")}


@pytest.mark.parametrize("seq,want", [
    (["up", "up"], []),
    (["down"], ["unreachable"]),
    (["down", "down", "up"], ["unreachable", "back"]),
    (["up", "down", "down", "up", "down"], ["unreachable", "back", "unreachable"]),
    (["bad", "bad"], ["bad responses"]),  # every answer refused: said once, not silently "waiting"
    (["up", "bad", "down", "up"], ["bad responses", "unreachable", "back"]),
])
def test_record_says_when_an_endpoint_goes_away_or_comes_back(seq, want):
    from gpuscope.cli.record import endpoint_changes
    from gpuscope.core.model import EndpointReading

    state: dict[str, str] = {}
    lines = []
    for what in seq:
        lines += endpoint_changes([EndpointReading(url="http://h:8000", **_READ[what])], state)
    assert [("back" if "back" in ln else "bad responses" if "bad responses" in ln else "unreachable")
            for ln in lines] == want
    assert all("http://h:8000" in ln for ln in lines)


@pytest.mark.parametrize("error,shown", [
    ("3 bad responses: response larger than 8 MB refused", "3 bad responses: response larger than 8 MB refused"),
    ("waiting for the first scrape", "rates: waiting for two scrapes"),
    (None, "rates: waiting for two scrapes"),
])
def test_the_panel_says_why_there_is_no_rate(error, shown):
    from gpuscope.core.model import EndpointReading
    from gpuscope.widgets.inference_panel import endpoint_lines

    lines = [str(x) for x in endpoint_lines(EndpointReading(url="http://h:8000/metrics", up=True, error=error),
                                            120)]  # room for the whole reason (it is cut to the room there is)
    assert any(shown in ln for ln in lines), lines
