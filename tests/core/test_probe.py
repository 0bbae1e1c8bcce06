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
    row = next(x for x in lines if x.startswith("GPU0 host→device"))
    # the link now with its own ceiling and typical figure; the best link's typical figure in its own column
    assert row.split()[3:10] == ["GB/s", "Gen1×16", "4.0", "3.2", "G4×16", "25.2", "12"] and "✖" in row
    assert "ceil 4.0 typ 25.2" not in text
    assert "the link trained at" in text
    assert "GPU0←GPU1 read" in text and "SYS P2P off" in text


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


# ------------------------------------------------------------------ how a figure was copied, P2P off, the table's columns
def _h100_pair(p2p: bool | None, read_gb: float) -> P.ProbeResult:
    """Two H100 SXM (Gen5×16 host links measured 54.6 / 55.0 GB/s) joined by NV18: one read figure."""
    p = P.PairResult(0, 1, "NODE", nvlinks=18, nvlink_version=6, p2p=p2p,
                     read=P.Measurement(read_gb * GB, 5, 1 << 28, method=P.METHOD_PEER))
    return _result(_gpu(0, gen_now=5, gen_max=5, h2d=54.6, d2h=55.0, bidir=98.0),
                   _gpu(1, gen_now=5, gen_max=5, h2d=54.9, d2h=55.2, bidir=97.0), pairs=(p,),
                   rates={0: 25e9, 1: 25e9})


@pytest.mark.parametrize("p2p,read_gb,level,off,words", [
    (True, 372.0, "ok", False, "as expected"),  # a healthy NVLink4 pair one way
    (True, 150.0, "bad", False, "nvlink -s"),  # low, but far above what the host links give: NVLink itself
    (True, 37.0, "bad", True, "near what the host links give (54.6 GB/s): the copy did not take the NVLinks"),
    (False, 37.0, "bad", True, "near what the host links give (54.6 GB/s): peer access unavailable"),
    (False, 300.0, "warn", True, "peer access unavailable"),  # the driver said no peer access, whatever the figure
])
def test_nvlink_pair_at_host_staged_speed_says_p2p_off(p2p: bool, read_gb: float, level: str, off: bool,
                                                       words: str) -> None:
    r = _h100_pair(p2p, read_gb)
    v = P.pair_verdict(r, r.pairs[0], "read")
    assert v is not None and v.level == level and v.p2p_off is off, v
    assert ("P2P off or routed through the host" in v.text) is off
    assert words in v.text
    if off:  # with the figures: measured, the NVLink's typical figure, what the host links give
        shown = f"{read_gb:.0f}" if read_gb >= 100 else f"{read_gb:.1f}"  # GB/s as the verdicts write them
        assert v.text.startswith(f"GPU0←GPU1 read {shown} GB/s: P2P off or routed through the host: ")
        assert "typical 378" in v.text


def test_staged_pcie_pair_says_p2p_off_and_stays_ok() -> None:
    p = P.PairResult(0, 1, "SYS", p2p=False, read=P.Measurement(11.0 * GB, 5, 1 << 28))
    r = _result(_gpu(0), _gpu(1), pairs=(p,))
    v = P.pair_verdict(r, p, "read")
    assert v is not None and v.level == "ok" and v.p2p_off
    assert v.text == ("GPU0←GPU1 read 11.0 GB/s: P2P off or routed through the host: 97 % of SYS, staged through "
                      "host (typical 11.3): as expected for a copy staged through host memory (no peer reference "
                      "published: a rough figure)")


def _rows(lines: list[str], start: str) -> list[str]:
    return [x for x in lines if x.startswith(start)]


def test_table_typ_is_the_link_now_and_the_best_link_has_its_own_column() -> None:
    """A Gen1 row once read "ceil 4.0 typ 25.2" (the ceiling of the link now beside the typical figure of
    the best link); now typ is Gen1's 3.2 beside its ceiling 4.0, and Gen4×16's 25.2 is in "at best"."""
    r = _result(_gpu(0, gen_now=1, h2d=3.1, d2h=3.2, bidir=5.9), _gpu(1), simulated=False)
    lines = P.table_lines(r)
    header = next(x for x in lines if x.startswith("figure"))
    assert header.split() == ["figure", "measured", "link", "now", "ceil", "typ", "at", "best", "%best", "how"]
    (gen1,) = _rows(lines, "GPU0 host→device")
    assert gen1.split()[2:] == ["3.1", "GB/s", "Gen1×16", "4.0", "3.2", "G4×16", "25.2", "12", "%", "✖", "?"]
    (healthy,) = _rows(lines, "GPU1 host→device")
    assert healthy.split()[2:] == ["25.0", "GB/s", "Gen4×16", "31.5", "25.2", "99", "%", "✓", "?"]  # no best: at it
    (both,) = _rows(lines, "GPU0 host↔device")
    assert both.split()[5:9] == ["8.0", "5.4", "G4×16", "42.9"]  # both ways: ceilings and typicals ×2 / ×1.7
    # the columns line up under the header: "typ" ends where the typical figures end
    assert gen1.index("3.2") + 3 == header.index("typ") + 3 == healthy.index("25.2") + 4


def test_table_and_json_say_how_each_figure_was_copied() -> None:
    r = _h100_pair(True, 372.0)
    r = P.ProbeResult(**{**{f: getattr(r, f) for f in r.__dataclass_fields__},
                         "gpus": tuple(P.GpuResult(g.index, g.name, g.link, h2d=P.Measurement(
                             54.6 * GB, 5, 1 << 28, method=P.METHOD_H2D)) for g in r.gpus)})
    lines = P.table_lines(r)
    assert _rows(lines, "GPU0 host→device")[0].endswith(" ✓ CE")
    assert _rows(lines, "GPU0←GPU1 read")[0].endswith(" ✓ CE")
    legend = " ".join(lines)
    assert "how CE: copy engine (cuMemcpy*Async)" in legend and "~35 GB/s vs ~55" in legend
    d = P.to_json(r)
    assert d["gpus"][0]["h2d"]["method"] == "copy engine (cuMemcpyHtoDAsync)"
    assert d["pairs"][0]["read"]["method"] == "copy engine (cuMemcpyPeerAsync, peer access)"
    assert P.from_json(d).gpus[0].h2d.method == P.METHOD_H2D  # type: ignore[union-attr]


def test_json_from_before_the_method_reads_as_not_recorded() -> None:
    old = _valid_doc()
    for g in old["gpus"]:
        for k in ("h2d", "d2h", "bidir", "h2d_latency", "d2h_latency"):
            if g.get(k):
                g[k].pop("method")
    r = P.from_json(old)
    assert r.gpus[0].h2d is not None and r.gpus[0].h2d.method is None
    lines = P.table_lines(r)
    assert _rows(lines, "GPU0 host→device")[0].endswith(" ?")
    assert any(x.startswith("how ?: method not recorded") for x in lines)


@pytest.mark.parametrize("method,tag", [(P.METHOD_H2D, "CE"), (P.METHOD_PEER_STAGED, "CE"), (P.METHOD_SIMULATED, "sim"),
                                        ("SM kernel copy", "SM"), ("NCCL all-reduce", "SM"), (None, "?"), ("", "?")])
def test_method_tags(method: str | None, tag: str) -> None:
    assert P.method_tag(method) == tag


def test_simulated_figures_say_simulated() -> None:
    r = _simulate("mixed-4")
    assert {m.method for m in P.measurements(r)} == {P.METHOD_SIMULATED}
    assert "how sim: simulated" in "\n".join(P.table_lines(r))
    assert P.method_summary(r) == "simulated"
    assert P.method_summary(_h100_pair(True, 372.0)) == "method not recorded + copy-engine copies"  # _gpu: none


def test_json_judged_fields_and_the_recording_form() -> None:
    r = _h100_pair(False, 37.0)
    d = P.to_json(r)
    read = d["pairs"][0]["read"]
    assert read["p2p_off"] is True and read["typical_gb_per_s"] == pytest.approx(378.0)
    assert read["typical_now_gb_per_s"] == pytest.approx(378.0) and read["best_link"] is None
    assert "P2P off or routed through the host" in read["verdict"]
    ev = P.probe_event(r)  # the recording's form: figures only (an event's data is bounded in items)
    assert "verdict" not in ev.data["pairs"][0]["read"] and ev.data["findings"] == []
    assert ev.data["pairs"][0]["read"]["method"] == P.METHOD_PEER
    assert P.verdicts(P.from_json(ev.data)) == P.verdicts(r)


def test_pair_figures_each_way_and_latency() -> None:
    """The API the group's link cost reads: GB/s each way and the small-copy latency of a pair."""
    p = P.PairResult(0, 1, "NODE", nvlinks=18, nvlink_version=6, p2p=True,
                     read=P.Measurement(360e9, 5, 1 << 28, method=P.METHOD_PEER),
                     write=P.Measurement(380e9, 5, 1 << 28, method=P.METHOD_PEER),
                     latency=P.Measurement(2.1, 10, 4, method=P.METHOD_PEER))
    r = _result(_gpu(0), _gpu(1), pairs=(p,))
    f = P.pair_figures(r, 0, 1)
    assert f is not None and (f.src_to_dst_bytes_per_s, f.dst_to_src_bytes_per_s) == (380e9, 360e9)
    assert f.latency_us == 2.1 and f.method == P.METHOD_PEER and f.p2p is True
    back = P.pair_figures(r, 1, 0)
    assert back is not None and (back.src_to_dst_bytes_per_s, back.dst_to_src_bytes_per_s) == (360e9, 380e9)
    assert P.pair_figures(r, 0, 2) is None and r.pair(1, 0) is p


def test_group_probe_says_its_group() -> None:
    r = P.ProbeResult(**{**{f: getattr(_result(_gpu()), f) for f in P.ProbeResult.__dataclass_fields__},
                         "group": "vLLM :8000 qwen"})
    assert P.table_lines(r)[2] == "serving group vLLM :8000 qwen (its GPUs and the pairs among them)"
    long = P.ProbeResult(**{**{f: getattr(r, f) for f in P.ProbeResult.__dataclass_fields__},
                            "group": "vLLM :8001 Mistral-Small-24B-Instruct-2501"})
    assert P.table_lines(long)[2:4] == ["serving group vLLM :8001 Mistral-Small-24B-Instruct-2501",
                                        "(its GPUs and the pairs among them)"]
    d = P.to_json(r)
    assert d["group"] == "vLLM :8000 qwen" and P.from_json(d).group == "vLLM :8000 qwen"
    assert P.summary_line(r) == "probe of vLLM :8000 qwen: all 3 figures as expected"
