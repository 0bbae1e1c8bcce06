"""What the link costs each token, and traffic that is true: the shipped scenarios move
what their models' all-reduces move; the link's share of time, the tok/s a better path allows, the latency words."""

from __future__ import annotations

import pytest
from helpers import run_frames, sim_source
from hypothesis import given
from hypothesis import strategies as st

from gpuscope.core.link_cost import (
    MEASURED,
    RATED,
    PairFigures,
    link_cost,
    link_costs,
    message,
    probe_pairs,
    rule_link_cost,
    severity,
    short_text,
)
from gpuscope.core.model import (
    DeviceInfo,
    EndpointReading,
    Event,
    Frame,
    GpuReading,
    Inventory,
    PairLink,
    ServingGroup,
)
from gpuscope.core.model_shapes import allreduce_bytes_per_token, allreduces_per_step, shape_of
from gpuscope.sources import scenario as scenario_mod


@pytest.mark.parametrize("model,tp,pp,want_mb", [
    ("google/gemma-2-27b-it", 2, None, 0.848),  # the figure: ~0.85 MB per token per GPU each way
    ("Qwen/Qwen2.5-32B-Instruct", 2, None, 1.311),
    ("meta-llama/Llama-3.1-405B-Instruct-FP8", 8, None, 14.45),
    ("meta-llama/Meta-Llama-3.1-70B-Instruct", 4, None, 3.932),
    ("meta-llama/Llama-3.1-70B-Instruct", 4, 2, 1.966),
])
def test_allreduce_bytes_per_token(model, tp, pp, want_mb):
    shape = shape_of(model)
    assert shape is not None
    assert allreduce_bytes_per_token(shape, tp, pp) / 1e6 == pytest.approx(want_mb, rel=1e-3)


@pytest.mark.parametrize("model,want", [("google/gemma-2-27b-it", 92), ("Qwen/qwen3-27b", None), (None, None),
                                        ("", None), ("mistralai/Mistral-Small-24B-Instruct-2501", 80)])
def test_allreduces_per_step(model, want):
    shape = shape_of(model)
    assert (allreduces_per_step(shape) if shape else None) == want


def _scenario_servers():
    for name in scenario_mod.shipped():
        sc = scenario_mod.load(name)
        for s in sc.servers:
            if (s.tp or 1) > 1 and shape_of(s.model) is not None:
                yield name, s


@pytest.mark.parametrize("name,server", list(_scenario_servers()), ids=lambda x: x if isinstance(x, str) else "")
def test_shipped_scenarios_move_what_their_model_moves(name, server):
    """Every shipped server with TP > 1 and a known model moves between 0.5× and 4× what its all-reduces move per
    generated token (4×: speculation's rejected drafts, host traffic) on the path its collectives take."""
    sc = scenario_mod.load(name)
    want = allreduce_bytes_per_token(shape_of(server.model), server.tp, server.pp)
    t = 0.0
    checked = 0
    for k, ph in enumerate(sc.phases):
        mid = t + ph.duration_s / 2
        t += ph.duration_s
        if not server.tok_s[k]:
            continue
        src = sim_source(name, at=mid - 6)
        f = run_frames(src, mid - 6, mid)[-1]  # rates need two samples, NVLink's a few seconds apart
        src.close()
        nv = all(sc.pairs.get((a, b), ("", 0))[1] or sc.nvswitch_links for a in server.gpus for b in server.gpus
                 if a < b)
        for r in f.gpus:
            if r.index in server.gpus:
                for v in ((r.nvlink_tx_bytes_per_s, r.nvlink_rx_bytes_per_s) if nv else
                          (r.pcie_tx_bytes_per_s, r.pcie_rx_bytes_per_s)):
                    assert 0.5 * want <= v / server.tok_s[k] <= 4 * want, (name, r.index, v / server.tok_s[k], want)
                    checked += 1
    assert checked


# ------------------------------------------------------------------ the cost model on hand-built frames
def _inv(nvlinks: int = 0, numa=(0, 1, 0, 1), name="NVIDIA RTX A6000", path="SYS") -> Inventory:
    devs = tuple(DeviceInfo(index=i, name=name, uuid=f"u{i}", bus_id=f"0000:{i:02x}:00.0", pcie_gen_gpu_max=4,
                            pcie_gen_sys_max=4, pcie_width_gpu_max=16, pcie_width_sys_max=16, numa_node=numa[i],
                            nvlink_version=3 if nvlinks else None, nvlinks_active=nvlinks) for i in range(4))
    pairs = [PairLink(a=0, b=1, pcie_path=path, nvlinks=nvlinks), PairLink(a=0, b=2, pcie_path="PIX"),
             PairLink(a=1, b=3, pcie_path="PIX"), PairLink(a=0, b=3, pcie_path="SYS"), PairLink(a=1, b=2, pcie_path="SYS"),
             PairLink(a=2, b=3, pcie_path="SYS")]
    return Inventory(host="h", devices=devs, pairs=tuple(pairs))


G = ServingGroup(server="vLLM", kind="vllm", endpoint="http://h:8000", model="google/gemma-2-27b-it", port=8000,
                 gpus=(0, 1), tp=2)


def _frame(bps: float, tok: float = 55.0, gen: int = 1, itl: float | None = 0.018, nv: float | None = None,
           events=()) -> Frame:
    gpus = tuple(GpuReading(index=i, util_gpu_pct=97, pcie_gen=gen if i < 2 else 4, pcie_width=16,
                            pcie_tx_bytes_per_s=bps, pcie_rx_bytes_per_s=bps * 0.9, nvlink_tx_bytes_per_s=nv,
                            nvlink_rx_bytes_per_s=nv) for i in range(4))
    ep = EndpointReading(url="http://h:8000", kind="vllm", gen_tokens_per_s=tok, itl_mean_s=itl, requests_running=1)
    return Frame(t=100.0, gpus=gpus, groups=(G,), endpoints=(ep,), events=tuple(events))


PROBE = {"pairs": [{"a": 0, "b": 1, "read": {"gb_per_s": 1.8}, "write": {"gb_per_s": 2.0}, "latency": {"us": 9.0}}]}


@pytest.mark.parametrize("bps,probe,want_busy,want_source,want_sev", [
    (0.09e9, None, 0.09 / 1.92, RATED, "info"),  # the story: Gen1×16 SYS, rated 4.0 × 0.8 × 0.6 = 1.92 GB/s
    (0.09e9, PROBE, 0.09 / 1.8, MEASURED, "info"),  # the probe's slower way (read 1.8) is what the path delivers
    (1.2e9, None, 1.2 / 1.92, RATED, "warning"),
    (1.8e9, None, 1.8 / 1.92, RATED, "critical"),
    (3.0e9, None, 1.0, RATED, "critical"),  # carried more than the estimate: the estimate is raised, never > 100 %
])
def test_busy_share(bps, probe, want_busy, want_source, want_sev):
    (c,) = link_costs(_inv(), _frame(bps), probe)
    assert c.busy_share == pytest.approx(want_busy, rel=1e-6)
    assert c.delivered_source.startswith(want_source) and severity(c) == want_sev
    assert c.bytes_per_token == pytest.approx(bps / 55)
    assert c.evidence["estimate"] is True and c.evidence["link_busy_share"] == c.busy_share


def test_link_bound_gives_ceilings_on_better_paths():
    (c,) = link_costs(_inv(), _frame(1.8e9))
    assert c.link_bound and c.ceiling_now == pytest.approx(1.92e9 / (1.8e9 / 55))
    whats = [b.what for b in c.better]
    assert whats == ["at Gen4×16 (the GPUs' and slots' best)", "over an NVLink bridge (the board takes one)",
                     "on GPU0+GPU2 (PIX, one NUMA node)"]
    per_token = 1.8e9 / 55
    assert [round(b.tokens_per_s) for b in c.better] == [round(31.5e9 * 0.8 * 0.6 / per_token),
                                                         round(56.25e9 * 0.84 / per_token),
                                                         round(31.5e9 * 0.8 * 0.95 / per_token)]
    text = message(c)
    assert "the link is busy 94 % of the time" in text and "(estimates)" in text
    assert "caps the server at ~59 tok/s now" in text


@pytest.mark.parametrize("probe,itl,want", [
    (PROBE, 0.018, "its latency: 92 all-reduces a step × each all-reduce ≥ 18 µs (probe) ≈ 1.66 ms a step of "
                   "18.0 ms (ITL), 9.2 % (estimates)"),
    (PROBE, None, "its latency: 92 all-reduces a step × each all-reduce ≥ 18 µs (probe) ≈ 1.66 ms a step of "
                  "18.2 ms (running ÷ tok/s), 9.1 % (estimates)"),
    (None, 0.018, "its latency may be, and was not measured: `gpuscope probe --group :8000` measures it "
                  "(estimates)"),
])
def test_latency_words(probe, itl, want):
    (c,) = link_costs(_inv(), _frame(0.09e9, itl=itl), probe)
    assert not c.link_bound and message(c).endswith(want)
    if probe is None:
        assert ": bandwidth is not the limit, the link is busy" in message(c)
    else:  # the answer first
        up = 1 / (1 - c.busy_share - c.latency_share)
        assert f"gemma-2-27b-it TP=2: a better link would make it at most {up:.2f}× faster: the link is busy" in message(c)


def test_nvlink_group_uses_nvlink_counters_and_no_better_path():
    inv = _inv(nvlinks=4, path="PIX")
    (c,) = link_costs(inv, _frame(0.05e9, tok=1450.0, nv=1.9e9))
    assert c.nvlink and c.better == ()
    assert c.bytes_per_token == pytest.approx(1.9e9 / 1450)
    assert "MB/token per GPU each way" in short_text(c)


@pytest.mark.parametrize("frame_kw,group", [
    ({"tok": 0.0}, G),  # nothing generated
    ({"bps": None}, G),  # traffic unknown: no figure, never 0
    ({}, ServingGroup(server="vLLM", endpoint="http://h:8000", gpus=(0, 1), tp=1)),  # not tensor-parallel
    ({}, ServingGroup(server="vLLM", endpoint="http://h:8000", gpus=(0,), tp=2)),
])
def test_no_cost(frame_kw, group):
    kw = {"bps": 1e9, **frame_kw}
    f = _frame(kw.pop("bps") or 0.0, **kw) if kw.get("tok", 1) is not None else None
    if frame_kw.get("bps", 1) is None:
        f = Frame(t=1.0, gpus=tuple(GpuReading(index=i) for i in range(4)), groups=(group,), endpoints=f.endpoints)
    f = Frame(t=f.t, gpus=f.gpus, groups=(group,), endpoints=f.endpoints)
    assert link_cost(group, _inv(), f, {}) is None


def test_rule_reads_the_probe_event_in_the_window():
    frames = [_frame(0.09e9, events=(Event(t=99.0, kind="probe", data=PROBE),)), _frame(0.09e9)]
    (c,) = rule_link_cost(_inv(), frames)
    assert c.rule == "link_cost" and c.evidence["delivered_from"] == MEASURED and c.variant == "latency"


@pytest.mark.parametrize("data,want", [
    (PROBE, {(0, 1): PairFigures(1.8e9, 2.0e9, 9e-6)}),
    ({"pairs": [{"a": 1, "b": 0, "read": {"gb_per_s": "x"}, "latency": {"us": -1}}]}, {(0, 1): PairFigures(None, None, None)}),
    ({"pairs": "nope"}, {}), (None, {}), ([], {}), ({"pairs": [{"a": True, "b": 1}]}, {}),
])
def test_probe_pairs(data, want):
    assert probe_pairs(data) == want


json_like = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=5)),
                         lambda c: st.one_of(st.lists(c, max_size=3), st.dictionaries(st.text(max_size=6), c, max_size=4)),
                         max_leaves=12)


@given(json_like)
def test_probe_pairs_never_raise(data):
    probe_pairs(data)
    probe_pairs({"pairs": [data]})


@given(st.floats(allow_nan=True, allow_infinity=True), st.floats(allow_nan=True, allow_infinity=True),
       st.one_of(st.none(), st.floats()))
def test_cost_never_raises(bps, tok, itl):
    f = _frame(bps, tok=tok, itl=itl)
    for c in link_costs(_inv(), f, PROBE):
        message(c), short_text(c)
        assert 0 <= c.busy_share <= 1 and c.ceiling_now >= 0


# ------------------------------------------------------------------ summary: the span's link cost and worst verdict
def _story_frames(n: int = 40, probe=None):
    from gpuscope.sources.groups import with_groups

    raw = sim_source("a6000-tp2-pcie-gen1", at=0.0)
    src = with_groups(raw, simulate="a6000-tp2-pcie-gen1")
    frames = []
    for t in range(n):
        raw.nvml.clock.now = float(t)
        f = src.sample()
        if probe is not None and t == 5:
            f = Frame(t=f.t, gpus=f.gpus, endpoints=f.endpoints, events=(Event(t=f.t, kind="probe", data=probe),),
                      groups=f.groups)
        frames.append(f)
    raw.close()
    return raw.inventory, frames


def test_summary_row_carries_the_span_cost_and_the_worst_verdict():
    from gpuscope.core.group_stats import group_rows, group_text

    inv, frames = _story_frames()
    (r,) = group_rows(inv, frames)
    cost = r["link_cost"]
    assert cost["link_busy_share"] == pytest.approx(0.09 / 1.92, rel=0.05)  # the story's Gen1 SYS link, rated
    assert cost["delivered_from"] == RATED and cost["frames"] > 20
    assert r["link_verdict"]["verdict"] == "degraded" and "Gen1×16 under load" in r["link_verdict"]["text"]
    assert "link 4." in group_text(r) and "busy" in group_text(r) and "worst link degraded" in group_text(r)


def test_summary_uses_a_recorded_probe_for_latency():
    from gpuscope.core.group_stats import group_rows

    inv, frames = _story_frames(probe=PROBE)
    (r,) = group_rows(inv, frames)
    cost = r["link_cost"]
    assert cost["delivered_from"] == MEASURED and cost["step_from"] == "ITL"
    assert cost["latency_share_of_step"] == pytest.approx(92 * 18e-6 / 0.0182, rel=0.02)


def test_a_probe_queued_beside_a_frame_reaches_the_link_cost_rule():
    """A probe run from the TUI is queued as an event for the next frame: the engine reads it that very tick."""
    from gpuscope.core.session import Session

    inv, frames = _story_frames(30)
    s = Session(inv, interval_s=1.0)
    for f in frames[:20]:
        s.ingest(f)
    s.add_event(Event(t=frames[20].t, kind="probe", data=PROBE))
    for f in frames[20:]:
        s.ingest(f)
    assert s.findings.probe == PROBE
    (cost,) = [f for f in s.findings.active if f.rule == "link_cost"]
    assert cost.evidence["delivered_from"] == MEASURED and cost.evidence["speedup_at_most"] > 1


def test_an_8_gpu_probe_survives_the_recording_gate_whole():
    """A recorded probe of 8 GPUs (28 pairs) keeps every pair: the link-cost rule and summary read them."""
    from gpuscope.core import probe as P
    from gpuscope.core.validate import MAX_DATA_ITEMS, check_event
    from gpuscope.sources import simprobe

    src = sim_source("h200-nvswitch-8")
    ev = P.probe_event(simprobe.simulate("h200-nvswitch-8", src.inventory))
    src.close()
    back = check_event(ev)
    assert len(back.data["pairs"]) == len(ev.data["pairs"]) == 28
    assert probe_pairs(back.data) == probe_pairs(ev.data) and len(probe_pairs(back.data)) == 28
    marker = check_event(Event(t=1.0, kind="marker", data={str(k): k for k in range(5 * MAX_DATA_ITEMS)}))
    assert len(marker.data) == MAX_DATA_ITEMS  # other events keep their cap


@pytest.mark.parametrize("latency_us,read_gbs,want_delivered,want_words", [
    (1e308, 1e308, RATED, "latency may be, and was not measured"),  # damaged figures: out of range, not used
    (500.0, 1.8, MEASURED, "more than the whole step (18.0 ms, ITL): the probe does not fit this server, not used"),
])
def test_a_probe_that_cannot_be_true_is_not_used(latency_us, read_gbs, want_delivered, want_words):
    probe = {"pairs": [{"a": 0, "b": 1, "read": {"gb_per_s": read_gbs}, "write": {"gb_per_s": read_gbs},
                        "latency": {"us": latency_us}}]}
    (c,) = link_costs(_inv(), _frame(0.09e9), probe)
    assert c.delivered_source.startswith(want_delivered) and want_words in message(c)
    assert c.latency_share is None and c.speedup_at_most is None and severity(c) == "info"


def test_probe_ranges_agree_with_the_probe_reader():
    from gpuscope.core.link_cost import PROBE_RANGES
    from gpuscope.core.probe import FIGURE_MAX

    assert PROBE_RANGES == FIGURE_MAX
