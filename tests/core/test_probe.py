"""gpuscope probe: verdicts, findings, JSON round trip and the 80-column table (core/probe.py)."""

from __future__ import annotations

import json

import pytest
from helpers import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuscope.core import probe as P

GB = 1e9


def _gpu(index: int = 0, gen_now: int = 4, gen_max: int = 4, width_now: int = 16, width_max: int = 16,
         h2d: float | None = 25.0, d2h: float | None = 26.0, bidir: float | None = 42.0, **kw) -> P.GpuResult:
    def m(x: float | None) -> P.Measurement | None:
        return None if x is None else P.Measurement(x * GB, 5, 256 << 20, x * GB * 0.98, x * GB * 1.01)

    return P.GpuResult(index, "NVIDIA RTX A6000", P.HostLink(gen_now, width_now, gen_max, width_max), numa_node=0,
                       h2d=m(h2d), d2h=m(d2h), bidir=m(bidir), h2d_latency=P.Measurement(2.5, 20, 4),
                       d2h_latency=P.Measurement(2.7, 20, 4), **kw)


def _result(*gpus: P.GpuResult, pairs: tuple[P.PairResult, ...] = (), rates: dict[int, float] | None = None,
            simulated: bool = False) -> P.ProbeResult:
    return P.ProbeResult(t=1_764_626_400.0, host="h", backend="test", gpus=gpus, pairs=pairs,
                         simulated=simulated, scenario="s" if simulated else None,
                         nvlink_link_bytes_per_s=rates or {})


@pytest.mark.parametrize("gen_now,gen_max,width_now,h2d,level,words", [
    (4, 4, 16, 25.0, "ok", "as expected"),
    (4, 4, 16, 21.0, "ok", "as expected"),  # 83 % of typical 25.2
    (4, 4, 16, 15.0, "warn", "at its best but delivers less"),
    (1, 4, 16, 3.1, "bad", "the link trained at Gen1×16"),  # the design story: 12 % of Gen4×16 (typical 25.2)
    (4, 4, 8, 12.0, "bad", "the link trained at Gen4×8"),
    (5, 5, 16, 54.8, "ok", "as expected"),  # H200 measured (docs/real-gpus.md, *Measured NVML facts*)
    (3, 3, 16, 12.5, "ok", "as expected"),
    (5, 5, 16, 20.0, "bad", "at its best but delivers less"),
])
def test_host_verdicts(gen_now: int, gen_max: int, width_now: int, h2d: float, level: str, words: str) -> None:
    g = _gpu(gen_now=gen_now, gen_max=gen_max, width_now=width_now, h2d=h2d)
    v = P.host_verdict(g, "h2d")
    assert v is not None and v.level == level
    assert words in v.text
    assert v.text.startswith(f"GPU0 host→device {h2d:.1f} GB/s: ")


def test_design_story_sentence() -> None:
    v = P.host_verdict(_gpu(gen_now=1, h2d=3.1), "h2d")
    assert v is not None
    assert v.text.startswith("GPU0 host→device 3.1 GB/s: 12 % of Gen4×16 (typical 25.2): the link trained at Gen1×16")
    assert "which gives 3.2" in v.text  # what Gen1 gives: the figure is right for the link it trained at


@pytest.mark.parametrize("kind,typical_gb", [("h2d", 25.2), ("d2h", 25.2), ("bidir", 42.8)])
def test_typical_and_ceiling(kind: str, typical_gb: float) -> None:
    g = _gpu()
    assert P.host_typical(g, kind) == pytest.approx(typical_gb * GB, rel=0.01)
    assert P.host_ceiling(g, kind) == pytest.approx((63.0 if kind == "bidir" else 31.5) * GB, rel=0.01)


@pytest.mark.parametrize("pair,value,level,words", [
    (P.PairResult(0, 1, "NODE", nvlinks=18, nvlink_version=6, p2p=True), 390.9, "ok", "NV18 (NVLink 4.0)"),
    (P.PairResult(0, 1, "NODE", nvlinks=18, nvlink_version=6, p2p=True), 150.0, "bad", "nvlink -s"),
    (P.PairResult(0, 1, "PIX", p2p=True), 23.0, "ok", "PIX, peer access"),
    (P.PairResult(0, 1, "SYS", p2p=False), 11.0, "ok", "staged through host"),
    (P.PairResult(0, 1, "SYS", p2p=False), 2.0, "bad", "rough figure"),
])
def test_pair_verdicts(pair: P.PairResult, value: float, level: str, words: str) -> None:
    from dataclasses import replace

    p = replace(pair, read=P.Measurement(value * GB, 5, 1 << 28))
    r = _result(_gpu(0, gen_now=5, gen_max=5), _gpu(1, gen_now=5, gen_max=5) if pair.nvlinks else _gpu(1),
                pairs=(p,), rates={0: 25e9, 1: 25e9} if pair.nvlinks else None)
    r = replace(r, gpus=(_gpu(0), _gpu(1))) if not pair.nvlinks else r
    v = P.pair_verdict(r, p, "read")
    assert v is not None and v.level == level, v
    assert words in v.text


def test_nvlink_ceiling_and_typical() -> None:
    p = P.PairResult(0, 1, "NODE", nvlinks=18, nvlink_version=6, p2p=True)
    r = _result(_gpu(0), _gpu(1), pairs=(p,), rates={0: 25e9, 1: 25e9})
    assert P.pair_ceiling(r, p, "read") == pytest.approx(450e9)
    assert P.pair_ceiling(r, p, "bidir_read") == pytest.approx(900e9)
    assert 370e9 <= P.pair_typical(r, p, "read") <= 390e9  # type: ignore[operator]


def test_findings_critical_only_when_far_below() -> None:
    r = _result(_gpu(0, gen_now=1, h2d=3.1, d2h=3.2, bidir=5.5), _gpu(1))
    fs = P.probe_findings(r)
    assert {f.subject for f in fs} == {"GPU0"}
    assert all(f.severity == "critical" and f.rule == "probe_link" and f.basis == "static" for f in fs)
    assert len({f.id for f in fs}) == 3
    sim = P.probe_findings(_result(_gpu(0, gen_now=1, h2d=3.1), simulated=True))
    assert sim[0].message.startswith("SIMULATED: ")


def test_json_round_trip() -> None:
    p = P.PairResult(0, 1, "SYS", p2p=False, read=P.Measurement(11e9, 5, 1 << 28, 10e9, 12e9),
                     latency=P.Measurement(12.0, 20, 4))
    r = _result(_gpu(0, gen_now=1, h2d=3.1), _gpu(1), pairs=(p,), simulated=True)
    r = P.ProbeResult(**{**{f: getattr(r, f) for f in r.__dataclass_fields__},
                         "allreduce": P.AllReduceResult((0, 1), P.Measurement(5e9, 5, 1 << 26)),
                         "notes": ("host buffers: NUMA placement unknown",)})
    d = P.to_json(r)
    assert d["schema"] == P.PROBE_SCHEMA and d["simulated"] is True
    assert d["gpus"][0]["h2d"]["level"] == "bad" and "trained at Gen1" in d["gpus"][0]["h2d"]["verdict"]
    assert d["findings"] and d["findings"][0]["severity"] == "critical"
    back = P.from_json(json.loads(json.dumps(d)))
    assert P.to_json(back) == d


@pytest.mark.parametrize("data,words", [
    ([], "is not an object"),
    ({"schema": "gpuscope.topo/1"}, "is not gpuscope.probe/1"),
    ({"schema": P.PROBE_SCHEMA}, "t is missing"),
    ({"schema": P.PROBE_SCHEMA, "t": 1, "gpus": {}}, "gpus is not a list"),
    ({"schema": P.PROBE_SCHEMA, "t": 1, "gpus": [{"index": "0"}]}, "gpus[0].index is not a whole number"),
    ({"schema": P.PROBE_SCHEMA, "t": 1, "gpus": [{"index": 0, "h2d": {"gb_per_s": float("nan")}}]}, "out of range"),
    ({"schema": P.PROBE_SCHEMA, "t": 1, "pairs": [{"a": 0, "b": 1, "path": "XYZ"}]}, "is not one of"),
])
def test_json_errors_are_one_line(data: object, words: str) -> None:
    with pytest.raises(P.ProbeError) as e:
        P.from_json(data)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_table_fits_80_columns() -> None:
    p = P.PairResult(0, 1, "SYS", p2p=False, read=P.Measurement(2e9, 5, 1 << 28), write=P.Measurement(2e9, 5, 1 << 28),
                     bidir_read=P.Measurement(3e9, 5, 1 << 28), bidir_write=P.Measurement(3e9, 5, 1 << 28),
                     latency=P.Measurement(14.2, 20, 4))
    r = _result(_gpu(0, gen_now=1, h2d=3.1, d2h=3.2, bidir=5.9), _gpu(1, gen_now=1, h2d=3.2), pairs=(p,),
                simulated=True)
    lines = P.table_lines(r)
    assert all(len(x) <= 80 for x in lines), [x for x in lines if len(x) > 80]
    text = "\n".join(lines)
    assert "SIMULATED" in lines[0] and "SIMULATED" in lines[-1]
    assert "GPU0 host→device" in text and "Gen1×16<G4×16" in text and "✖" in text
    assert "the link trained at" in text
    assert "GPU0←GPU1 read" in text and "SYS staged" in text


def test_summary_line() -> None:
    assert P.summary_line(_result(_gpu())) == "probe: all 3 figures as expected"
    assert "worst: GPU0 host→device 3.1 GB/s" in P.summary_line(_result(_gpu(gen_now=1, h2d=3.1, d2h=3.3)))


def _simulate(name: str, gpus: list[int] | None = None) -> P.ProbeResult:
    from gpuscope.sources import simprobe
    from gpuscope.sources.live import open_source

    src = open_source(name, virtual_at=0.0)
    try:
        return simprobe.simulate(name, src.inventory, gpus, t=1_764_626_400.0)
    finally:
        src.close()


@pytest.mark.parametrize("name,gpus,critical,nvlink", [
    ("a6000-tp2-pcie-gen1", None, True, False),  # the design story: Gen1 under load, SYS, no NVLink
    ("h200-nvswitch-8", [0, 1], False, True),
    ("healthy-gen4", None, False, True),
])
def test_simulated_scenarios(name: str, gpus: list[int] | None, critical: bool, nvlink: bool) -> None:
    r = _simulate(name, gpus)
    assert r.simulated and r.scenario == name
    assert bool([f for f in P.probe_findings(r) if f.severity == "critical"]) == critical
    assert all(p.nvlinks > 0 for p in r.pairs) == nvlink and r.pairs
    text = "\n".join(P.table_lines(r))
    assert "SIMULATED" in text and all(len(x) <= 80 for x in text.splitlines())
    assert _simulate(name, gpus) == r  # seeded: the same scenario gives the same figures


def test_simulated_design_story_words() -> None:
    r = _simulate("a6000-tp2-pcie-gen1")
    v = P.host_verdict(r.gpus[0], "h2d")
    assert v is not None and v.level == "bad"
    assert "% of Gen4×16 (typical 25.2): the link trained at Gen1×16" in v.text
    assert r.pairs[0].p2p is False and r.notes


@pytest.mark.parametrize("max_memory,size", [(1 << 30, 256 << 20), (64 << 20, 32 << 20), (8 << 20, 4 << 20)])
def test_plan_sizes(max_memory: int, size: int) -> None:
    plan = P.make_plan([0, 1], {0: 25e9, 1: 25e9}, {(0, 1): 10e9}, max_memory=max_memory, trials=5)
    assert plan.copy_bytes == size and plan.device_bytes_per_gpu <= max_memory
    assert plan.pairs == ((0, 1),) and plan.seconds > 0
    assert "about" in plan.announce() and "MiB device + " in plan.announce()


def test_plan_refuses_tiny_budget() -> None:
    with pytest.raises(P.ProbeError, match="too small"):
        P.copy_bytes_for(1 << 20)


# ------------------------------------------------------------------ fuzz: the JSON reader
_json = st.recursive(st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=20),
                     lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=12), kids, max_size=5),
                     max_leaves=25)
_FIELDS = ["schema", "t", "host", "gpus", "pairs", "allreduce", "notes", "nvlink_link_gb_per_s", "index", "link",
           "h2d", "gb_per_s", "a", "b", "path", "p2p", "read", "latency", "us", "trials", "size_bytes", "busbw"]


def _mutate(doc: object, rnd: st.DataObject) -> object:
    """A valid probe JSON with one value somewhere replaced by arbitrary JSON."""
    if isinstance(doc, dict) and doc:
        k = rnd.draw(st.sampled_from(sorted(doc)))
        if rnd.draw(st.booleans()):
            return {**doc, k: rnd.draw(_json)}
        return {**doc, k: _mutate(doc[k], rnd)}
    if isinstance(doc, list) and doc:
        i = rnd.draw(st.integers(0, len(doc) - 1))
        return [*doc[:i], _mutate(doc[i], rnd), *doc[i + 1:]]
    return rnd.draw(_json)


def _valid_doc() -> dict:
    p = P.PairResult(0, 1, "NODE", nvlinks=18, nvlink_version=6, p2p=True, read=P.Measurement(380e9, 5, 1 << 28),
                     latency=P.Measurement(2.0, 10, 4))
    r = _result(_gpu(0, gen_now=5, gen_max=5, h2d=54.0), _gpu(1, gen_now=1, h2d=3.1), pairs=(p,),
                rates={0: 25e9, 1: 25e9})
    return json.loads(json.dumps(P.to_json(r)))


@settings(derandomize=True, deadline=None, database=None, max_examples=examples(300),
          suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_fuzz_probe_json_reader(data: st.DataObject) -> None:
    doc = _mutate(_valid_doc(), data) if data.draw(st.booleans()) else data.draw(
        st.dictionaries(st.sampled_from(_FIELDS), _json, max_size=6).map(lambda d: {"schema": P.PROBE_SCHEMA, **d}))
    try:
        r = P.from_json(doc)
    except P.ProbeError as e:
        assert "\n" not in str(e) and str(e).startswith("probe JSON: ")
        return
    P.to_json(r)  # whatever reads back renders: verdicts, findings, table
    assert all(len(x) <= 80 for x in P.table_lines(r))
    P.summary_line(r)


def test_slot_limited_link_is_said() -> None:
    g = _gpu(gen_now=3, gen_max=3, h2d=12.9)
    g = P.GpuResult(g.index, g.name, P.HostLink(3, 16, 3, 16, 4, 16), h2d=g.h2d)
    v = P.host_verdict(g, "h2d")
    assert v is not None and v.level == "ok"
    assert v.text.endswith("as expected for the slot (the GPU does Gen4×16 in a faster one)")


def test_probe_findings_as_raised_findings_and_the_recording_event():
    """The TUI's palette probe shows its findings at once (raised when measured) and records the same event
    as `record --probe-links`."""
    from helpers import sim_source

    from gpuscope.sources import simprobe

    src = sim_source("a6000-tp2-pcie-gen1")
    try:
        r = simprobe.simulate("a6000-tp2-pcie-gen1", src.inventory, t=1_764_000_000.0)
    finally:
        src.close()
    fs = P.probe_finding_list(r)
    cands = {c.id: c for c in P.probe_findings(r)}
    assert len(cands) == 10 and {f.id for f in fs} <= set(cands)
    assert [f.subject for f in fs] == ["GPU0", "GPU1", "GPU0-GPU1"]  # the worst figure of each, one each
    assert fs[0].id == "probe_link:GPU0:bidir"  # 12 % of typical, the lowest of GPU0's three
    assert all(f.raised_at == f.since == f.started_at == r.t and f.basis == "static" for f in fs)
    assert {f.severity for f in fs} == {"critical"}
    ev = P.probe_event(r)
    assert ev.kind == P.PROBE_EVENT == "probe" and ev.t == r.t and ev.text == P.summary_line(r)
    assert [g.index for g in P.from_json(ev.data).gpus] == [g.index for g in r.gpus]
