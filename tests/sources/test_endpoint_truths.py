"""Smaller truths about endpoint readings, on the real captures in
tests/fixtures/inference: a histogram without ``_sum`` has no mean ("–", never 0 ms); a reading made before
any answer does not say the server is up; SGLang's token counter wins over its sticky throughput gauge; past
:data:`MAX_MODELS` served models the busiest are shown, the rest said once and still counted in the total."""

from __future__ import annotations

import re

import pytest
from helpers import FIXTURES

from gpuscope.core.codec import frame_from_dict, frame_to_dict
from gpuscope.core.model import EndpointReading, Frame
from gpuscope.core.stats import SERVING_EXPORT_COLUMNS, export_serving_rows
from gpuscope.core.vocab import EndpointState
from gpuscope.sources.endpoint import (
    MAX_MODELS,
    EndpointPoller,
    EndpointTracker,
    _Snap,
    busiest,
    counter_rate,
    model_rates,
)
from gpuscope.widgets.inference_panel import endpoint_lines, header_line, unsummed_models

FIX = FIXTURES / "inference"
VLLM = (FIX / "vllm_0.32.0_v1_cpu_load.txt").read_text()  # real vLLM 0.32 under load: model "tiny", engine "0"
SGLANG = (FIX / "sglang.txt").read_text()  # real SGLang: gen counter 7.557572e+06, gen_throughput 86.508


def scaled(text: str, family: str, factor: float) -> str:
    """``text`` with every sample of ``family`` (its _bucket, _sum, _count) multiplied by ``factor``: the
    same capture as it was earlier, when fewer requests had been observed."""
    def one(m: re.Match[str]) -> str:
        return f"{m.group(1)} {float(m.group(2)) * factor!r}"
    return re.sub(rf"^({re.escape(family)}_(?:bucket|sum|count)(?:{{[^}}]*}})?) (\S+)$", one, text, flags=re.M)


def without(text: str, family: str, suffix: str) -> str:
    """``text`` without the ``family + suffix`` samples (a server, or a proxy, that does not export them)."""
    return re.sub(rf"^{re.escape(family + suffix)}(?:{{[^}}]*}})? .*\n", "", text, flags=re.M)


def two_scrapes(text: str, families: tuple[str, ...]) -> EndpointTracker:
    """A tracker fed the capture as it was 10 s before (each histogram at half its counts), then as captured."""
    early = text
    for fam in families:
        early = scaled(early, fam, 0.5)
    tr = EndpointTracker(url="http://x", window_s=30)
    tr.feed(0.0, early)
    tr.feed(10.0, text)
    return tr


TTFT, ITL = "vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds"
SG_TTFT = "sglang:time_to_first_token_seconds"


# 1. the mean is Δsum / Δcount: without _sum it is unknown, shown "–", never "0.0 ms"
@pytest.mark.parametrize(("text", "fam", "drop", "field", "mean_s", "shown"), [
    (VLLM, TTFT, None, "ttft_mean_s", 260.7081289291382 / 143, "TTFT mean 1,823 ms"),
    (VLLM, ITL, None, "itl_mean_s", 685.1524232720014 / 36210, "ITL mean 18.9 ms"),
    (VLLM, TTFT, "_sum", "ttft_mean_s", None, "TTFT mean –"),
    (VLLM, ITL, "_sum", "itl_mean_s", None, "ITL mean –"),
    (VLLM, TTFT, "_count", "ttft_mean_s", 260.7081289291382 / 143, "TTFT mean 1,823 ms"),  # the +Inf bucket counts
    (SGLANG, SG_TTFT, None, "ttft_mean_s", 2.3518979474117756e+06 / 11008, "TTFT mean 213,654 ms"),
    (SGLANG, SG_TTFT, "_sum", "ttft_mean_s", None, "TTFT mean –"),
])
def test_a_histogram_without_sum_has_no_mean(text, fam, drop, field, mean_s, shown):
    tr = two_scrapes(without(text, fam, drop) if drop else text, (fam,))
    (r,) = tr.readings()
    got = getattr(r, field)
    assert got == (pytest.approx(mean_s) if mean_s is not None else None)
    lines = [ln.plain for ln in endpoint_lines(r)]
    assert any(shown in ln for ln in lines), lines
    assert not any("0.0 ms" in ln for ln in lines)


def test_without_sum_the_quantile_buckets_still_come_from_the_buckets():
    r = two_scrapes(without(VLLM, ITL, "_sum"), (ITL,)).readings()[0]
    assert r.itl_mean_s is None and r.itl_p50_bounds_s == (0.01, 0.025)  # docs/serving.md: bucket 10–25 ms


# 2. before the first answer, whether the server is up is not known
def _step(tr: EndpointTracker, t: float, step: str) -> None:
    if step == "good":
        tr.feed(t, VLLM)
    elif step == "garbage":
        tr.feed(t, "<html><body>502 Bad Gateway</body></html>")
    else:
        tr.failed(t, "connection refused")


@pytest.mark.parametrize(("steps", "up", "state"), [
    ([], None, EndpointState.STARTING),  # not asked yet
    (["garbage"], True, EndpointState.BAD_RESPONSE),  # it answered, with no metrics
    (["refused"], False, EndpointState.UNREACHABLE),
    (["good"], True, EndpointState.STARTING),
    (["refused", "good"], True, EndpointState.STARTING),
])
def test_up_is_unknown_until_the_first_answer(steps, up, state):
    tr = EndpointTracker(url="http://x")
    for t, step in enumerate(steps):
        _step(tr, float(t), step)
    (r,) = tr.readings()
    assert r.up is up and r.state is state


def test_the_first_serving_row_before_any_scrape_has_up_unknown():
    p = EndpointPoller(["http://127.0.0.1:9/"])  # never started: the readings a first frame carries
    first = p.latest()
    assert [e.up for e in first] == [None]
    frame = frame_from_dict(frame_to_dict(Frame(t=1.0, gpus=(), endpoints=first)))  # as recorded and read back
    (row,) = export_serving_rows([frame])
    assert row[SERVING_EXPORT_COLUMNS.index("up")] is None
    assert frame.endpoints[0].state is EndpointState.STARTING
    assert header_line(first) == ("– tok/s", "  waiting for two scrapes")


@pytest.mark.parametrize(("d", "up", "state"), [
    ({"url": "u", "up": None}, None, EndpointState.STARTING),
    ({"url": "u", "up": None, "state": "unreachable"}, None, EndpointState.STARTING),  # contradicts: derived
    ({"url": "u", "up": None, "state": "bad_response", "error": "1 bad response"}, None,
     EndpointState.BAD_RESPONSE),
    ({"url": "u"}, True, EndpointState.STARTING),  # older recordings: up was always written
])
def test_an_unknown_up_decodes_and_never_reads_as_down(d, up, state):
    frame = frame_from_dict({"t": 1.0, "gpus": [], "endpoints": [d]})
    assert frame.endpoints[0].up is up and frame.endpoints[0].state is state


# 4. SGLang: the generated-token counter's rate wins over the gen_throughput gauge (sticky, a batch average)
GEN_LINE = re.compile(r"^(sglang:generation_tokens_total\{[^}]*\}) (\S+)$", re.M)
RUN_LINE = re.compile(r"^(sglang:num_running_reqs\{[^}]*\}) (\S+)$", re.M)


def sglang(gen: float | None, running: float) -> str:
    """The real SGLang capture with its gen counter at ``gen`` (None: not exported) and ``running`` requests."""
    text = RUN_LINE.sub(lambda m: f"{m.group(1)} {running}", SGLANG)
    if gen is None:
        return GEN_LINE.sub("", text)
    return GEN_LINE.sub(lambda m: f"{m.group(1)} {gen}", text)


BASE = 7.557572e+06


@pytest.mark.parametrize(("scrapes", "want"), [
    ([(BASE, 162)], None),  # one scrape: no rate yet, and the gauge does not stand in for the counter
    ([(BASE, 162), (BASE + 2500, 162)], 250.0),  # the counter's rate, not the gauge's 86.5
    ([(BASE, 162), (BASE, 162)], 0.0),  # nothing finished in the window: 0, whatever the gauge says
    ([(BASE, 0), (BASE + 400, 0)], 40.0),  # finished just now, idle since: the counter still counts them
    ([(None, 162)], pytest.approx(86.50814177726902)),  # no counter exported: the gauge
    ([(None, 162), (None, 162)], pytest.approx(86.50814177726902)),
    ([(None, 162), (None, 0)], 0.0),  # no counter and idle: the sticky gauge reads 0
])
def test_sglang_counter_rate_wins_over_the_gauge(scrapes, want):
    tr = EndpointTracker(url="http://x", window_s=30)
    for k, (gen, running) in enumerate(scrapes):
        tr.feed(10.0 * k, sglang(gen, running))
    (r,) = tr.readings()
    assert r.kind == "sglang" and r.gen_tokens_per_s == want


# 5. past MAX_MODELS served models: the busiest shown, the rest one reading, the header the true total
def many_models(rates: dict[str, float], t: float, running: dict[str, float] | None = None) -> str:
    """The real vLLM capture served as several models: each ``model_name="tiny"`` line once per model, its
    gen counter at 36353 + rate × t (and its requests running, when given); the rest of the page once."""
    out = []
    for line in VLLM.splitlines():
        if 'model_name="tiny"' not in line:
            out.append(line)
            continue
        for name, rate in rates.items():
            ln = line.replace('model_name="tiny"', f'model_name="{name}"')
            if ln.startswith("vllm:generation_tokens_total{"):
                ln = f"{ln.rsplit(' ', 1)[0]} {36353.0 + rate * t}"
            elif ln.startswith("vllm:num_requests_running{") and running is not None:
                ln = f"{ln.rsplit(' ', 1)[0]} {running[name]}"
            out.append(ln)
    return "\n".join(out) + "\n"


ELEVEN = {f"m{k:02d}": float(r) for k, r in enumerate([5, 300, 0, 40, 900, 7, 120, 60, 2, 800, 450])}
# nine whose alphabetical first eight are the quiet ones: the busiest sorts last
NINE = {**{f"a{k}": 1.0 for k in range(8)}, "zz-busy": 5000.0}


@pytest.mark.parametrize(("rates", "shown", "rest"), [
    (ELEVEN, {"m01", "m03", "m04", "m06", "m07", "m09", "m10", "m05"}, {"m00", "m02", "m08"}),
    (NINE, {"zz-busy", *(f"a{k}" for k in range(7))}, {"a7"}),  # a tie among the quiet: by name
    ({f"m{k}": 10.0 * k for k in range(MAX_MODELS)}, {f"m{k}" for k in range(MAX_MODELS)}, set()),  # 8: all shown
])
def test_the_busiest_models_are_shown_and_the_total_is_the_endpoints(rates, shown, rest):
    tr = EndpointTracker(url="http://x", window_s=30)
    for t in (0.0, 10.0, 20.0):
        tr.feed(t, many_models(rates, t))
    rs = tr.readings()
    models = [r for r in rs if r.model is not None]
    assert {r.model for r in models} == shown and len(models) <= MAX_MODELS
    for r in models:
        assert r.gen_tokens_per_s == pytest.approx(rates[r.model]) and r.models_dropped == 0
    others = [r for r in rs if r.model is None]
    if rest:
        (o,) = others  # said once
        assert o.models_dropped == len(rest) and o.gen_tokens_per_s == pytest.approx(sum(rates[m] for m in rest))
    else:
        assert others == []
    num, _what = header_line(rs)
    assert num == f"{sum(rates.values()):,.0f} tok/s"  # the endpoint's true total, not the 8 shown
    text = "\n".join(ln.plain for r in rs for ln in endpoint_lines(r))
    assert len(re.findall(r"\+\d+ models?\b", text)) == (1 if rest else 0)  # "+N models" once
    if rest:
        assert f"+{len(rest)} model{'s' if len(rest) > 1 else ''} " in text


def test_on_the_first_scrape_the_busiest_are_those_running_most():
    running = {name: float(k) for k, name in enumerate(sorted(ELEVEN))}  # m10 runs 10 requests, m00 none
    tr = EndpointTracker(url="http://x", window_s=30)
    tr.feed(0.0, many_models(ELEVEN, 0.0, running))
    assert tr.models == [f"m{k:02d}" for k in range(3, 11)] and tr.dropped == ["m00", "m01", "m02"]
    rest = tr.readings()[-1]
    assert rest.model is None and rest.requests_running == 0 + 1 + 2 and rest.gen_tokens_per_s is None


@pytest.mark.parametrize(("rates", "running", "n", "want"), [
    ({"a": 10.0, "b": 5.0, "c": 90.0}, {}, 2, ["a", "c"]),  # in name order, not rank order
    ({"a": 10.0, "b": None, "c": None}, {"b": 3.0, "c": 9.0}, 2, ["a", "c"]),  # a rate first, then running
    ({"a": None, "b": None, "c": None}, {"a": 1.0, "c": 1.0}, 2, ["a", "c"]),  # then running, then name
    ({"b": None, "a": None}, {}, 1, ["a"]),
    ({"a": 0.0, "b": None}, {"b": 50.0}, 1, ["a"]),  # a known 0 tok/s outranks an unknown rate
    ({"a": 1.0, "b": 1.0}, {}, 5, ["a", "b"]),  # fewer than n: all
    ({}, {"x": 2.0}, 1, ["x"]),  # running, no gen counter at all
])
def test_busiest(rates, running, n, want):
    assert busiest(rates, running, n) == want


@pytest.mark.parametrize(("values", "key", "want"), [
    ([{"a": 0.0}, {"a": 50.0}, {"a": 100.0}], "gen", {"a": 5.0}),
    ([{"a": 100.0}, {"a": 5.0}, {"a": 25.0}], "gen", {"a": 1.25}),  # a drop counts from zero (as counter_rate)
    ([{}, {"a": 10.0}, {"a": 30.0}], "gen", {"a": 2.0}),  # came in during the window: from its own scrapes
    ([{"a": 1.0}, {"a": 2.0}, {}], "gen", {"a": None}),  # gone from the newest scrape: no rate now
    ([{"a": 1.0}], "gen", {"a": None}),  # one scrape: none yet
])
def test_model_rates(values, key, want):
    snaps = [_Snap(10.0 * k, {"a": {key: v["a"]}} if v else {}, {}) for k, v in enumerate(values)]
    assert model_rates(snaps, ["a"], key) == want
    if want["a"] is not None:  # the same as counter_rate over every scrape that has it
        pts = [(x.t, x.counters["a"][key]) for x in snaps if x.counters]
        assert want["a"] == pytest.approx(counter_rate(pts))


@pytest.mark.parametrize(("eps", "want"), [
    ([EndpointReading("u", "vllm", "a", models_dropped=3), EndpointReading("u", "vllm", "b", models_dropped=3)],
     [("vllm", 3)]),  # an older recording: the count on every model's reading, said once
    ([EndpointReading("u", "vllm", "a"), EndpointReading("u", "vllm", None, models_dropped=3)], []),  # its own line
    ([EndpointReading("u", "vllm", "a")], []),
])
def test_unsummed_models_said_once(eps, want):
    assert unsummed_models(eps) == want
