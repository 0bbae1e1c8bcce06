"""One link verdict per serving group (core/link_verdict.py): the verdict table case by case, the findings rule,
the one-line text, a hypothesis run that never raises, and the link scenarios through the simulated NVML and the
findings engine (their verdicts, links and finding messages)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from helpers import examples, run_frames, sim_source
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuscope.core import link_verdict as lv
from gpuscope.core.findings import FindingsEngine, evaluate
from gpuscope.core.model import DeviceInfo, Frame, GpuReading, Inventory, PairLink, ServingGroup, XidCount
from gpuscope.sources.groups import with_groups

VLLM = ServingGroup(server="vLLM", kind="vllm", endpoint="http://localhost:8000", model="org/qwen3", port=8000,
                    gpus=(0, 1), tp=2)


def inventory(n: int = 2, nvlinks: int = 4, switch: bool = False) -> Inventory:
    devs = tuple(DeviceInfo(index=i, name="NVIDIA H100", uuid=f"u{i}", bus_id=f"b{i}", pcie_gen_gpu_max=5,
                            pcie_gen_sys_max=5, pcie_width_gpu_max=16, pcie_width_sys_max=16) for i in range(n))
    pairs = tuple(PairLink(a, b, "SYS", nvlinks, switch) for a in range(n) for b in range(a + 1, n))
    return Inventory(host="h", devices=devs, pairs=pairs)


def reading(i: int, **kw: object) -> GpuReading:
    """A busy GPU on a Gen5 ×16 link with every counter at 0 (what ``kw`` changes)."""
    base: dict[str, object] = dict(index=i, util_gpu_pct=90.0, pcie_gen=5, pcie_width=16, pcie_replay_count=0,
                                   pcie_recovery_count=0, nvlink_crc_flit_count=0, nvlink_crc_data_count=0,
                                   nvlink_replay_count=0, nvlink_recovery_count=0)
    return GpuReading(**{**base, **kw})  # type: ignore[arg-type]


def window(before: dict[int, dict[str, object]], now: dict[int, dict[str, object]], n: int = 2, dt: float = 10.0,
           group: ServingGroup = VLLM) -> list[Frame]:
    """Two frames ``dt`` apart: the counter base and now."""
    return [Frame(t=100.0, gpus=tuple(reading(i, **before.get(i, {})) for i in range(n)), groups=(group,)),
            Frame(t=100.0 + dt, gpus=tuple(reading(i, **now.get(i, {})) for i in range(n)), groups=(group,))]


XID145 = {"xids": (XidCount(xid=145, count=1, last_t=105.0),)}
IDLE = {"util_gpu_pct": 0.0, "pcie_gen": 1}

# (case, figures before, figures now, verdict, link, check)
CASES = [
    ("sound links under load", {}, {}, "healthy", "GPU0↔GPU1 NVLink", ""),
    ("Xid 145 on GPU1", {}, {1: XID145}, "at_risk", "GPU0↔GPU1 NVLink", "nvlink_xid"),
    ("Xid 74 on GPU0", {}, {0: {"xids": (XidCount(74, 2, 104.0),)}}, "at_risk", "GPU0↔GPU1 NVLink", "nvlink_xid"),
    ("Xid 150 on GPU0", {}, {0: {"xids": (XidCount(150, 1, 104.0),)}}, "at_risk", "GPU0↔GPU1 NVLink", "nvlink_xid"),
    ("Xid 79, GPU1 lost", {}, {1: {"lost": True, "xids": (XidCount(79, 1, 104.0),)}}, "at_risk", "GPU1 PCIe",
     "bus_xid"),
    ("GPU1 lost without an Xid", {}, {1: {"lost": True}}, "at_risk", "GPU1 PCIe", "gpu_lost"),
    ("NVLink recoveries rising", {}, {0: {"nvlink_recovery_count": 1}}, "at_risk", "GPU0↔GPU1 NVLink",
     "nvlink_recovery"),
    ("PCIe recoveries rising", {1: {"pcie_recovery_count": 3}}, {1: {"pcie_recovery_count": 4}}, "at_risk",
     "GPU1 PCIe", "pcie_recovery"),
    ("PCIe replays 20/s", {}, {1: {"pcie_replay_count": 200}}, "at_risk", "GPU1 PCIe", "pcie_replay_rate"),
    ("NVLink replays 10/s", {}, {1: {"nvlink_replay_count": 100}}, "at_risk", "GPU0↔GPU1 NVLink",
     "nvlink_replay_rate"),
    ("PCIe Gen1 under load", {}, {1: {"pcie_gen": 1}}, "degraded", "GPU1 PCIe", "pcie_below_max"),
    ("PCIe ×8 under load", {}, {0: {"pcie_width": 8}}, "degraded", "GPU0 PCIe", "pcie_below_max"),
    ("PCIe replays 0.5/s", {}, {1: {"pcie_replay_count": 5}}, "degraded", "GPU1 PCIe", "pcie_replays"),
    ("PCIe replays 0.1/s: the threshold", {}, {1: {"pcie_replay_count": 1}}, "degraded", "GPU1 PCIe", "pcie_replays"),
    ("NVLink replays 2/s", {}, {0: {"nvlink_replay_count": 20}}, "degraded", "GPU0↔GPU1 NVLink", "nvlink_replays"),
    ("NVLink CRC errors rising", {}, {1: {"nvlink_crc_data_count": 3}}, "degraded", "GPU0↔GPU1 NVLink",
     "nvlink_crc"),
    ("Gen1 at idle: never judged", {0: IDLE, 1: IDLE}, {0: IDLE, 1: IDLE}, "healthy", "GPU0↔GPU1 NVLink", ""),
    ("an Xid that is not a link's", {}, {1: {"xids": (XidCount(94, 1, 104.0),)}}, "healthy", "GPU0↔GPU1 NVLink", ""),
    ("a counter that went back (driver reload)", {1: {"pcie_recovery_count": 9}}, {1: {"pcie_recovery_count": 0}},
     "healthy", "GPU0↔GPU1 NVLink", ""),
    ("the gravest row decides", {}, {0: {"pcie_gen": 1}, 1: {**XID145, "pcie_replay_count": 500}}, "at_risk",
     "GPU0↔GPU1 NVLink", "nvlink_xid"),
]


@pytest.mark.parametrize("case, before, now, verdict, link, check", CASES, ids=[c[0] for c in CASES])
def test_the_verdict_table(case, before, now, verdict, link, check):
    (v,) = lv.link_verdicts(inventory(), window(before, now))
    assert (v.verdict, v.link, v.check) == (verdict, link, check), v.reason
    assert v.key == "http://localhost:8000:0+1" and v.label == "vLLM :8000 qwen3" and v.gpus == (0, 1)
    assert v.evidence["verdict"] == verdict and v.evidence["link"] == link and v.evidence["gpus"] == [0, 1]
    assert bool(v.advice) == (verdict in ("degraded", "at_risk"))


def test_the_evidence_has_every_input_figure():
    (v,) = lv.link_verdicts(inventory(), window({1: {"pcie_replay_count": 7}}, {1: {"pcie_replay_count": 12}}))
    ev = v.evidence
    assert (ev["window_s"], ev["gpu1_pcie_replay_count_rise"], ev["gpu0_pcie_replay_count_rise"]) == (10.0, 5, 0)
    assert (ev["gpu1_pcie_gen"], ev["gpu1_pcie_width"], ev["gpu1_pcie_gen_max"], ev["gpu1_pcie_width_max"]) == (5, 16, 5, 16)
    assert ev["gpu1_busy"] is True and ev["gpu1_xids"] == [] and ev["gpu1_lost"] is False
    assert ev["issues"] == ["pcie_replays: PCIe replays 0.5/s on GPU1 (+5 in 10 s; 0.1/s or more)"]
    assert (ev["replay_degraded_per_s"], ev["replay_at_risk_per_s"]) == (0.1, 10.0)


def test_nothing_readable_is_unknown_never_healthy():
    blank = {k: None for k in ("util_gpu_pct", "pcie_gen", "pcie_width", *lv.COUNTERS)}
    (v,) = lv.link_verdicts(inventory(), window({0: blank, 1: blank}, {0: blank, 1: blank}))
    assert (v.verdict, v.reason) == ("unknown", "no link readings")
    assert lv.verdict_text(v) == "link unknown: GPU0↔GPU1 NVLink (no link readings)"
    assert lv.rule_link_verdict(inventory(), window({0: blank, 1: blank}, {0: blank, 1: blank})) == []


def test_one_frame_judges_what_needs_no_window():
    """Without a second frame the counters give no rate: an Xid still decides, sound links are healthy."""
    (v,) = lv.link_verdicts(inventory(), window({}, {1: XID145})[1:])
    assert (v.verdict, v.check) == ("at_risk", "nvlink_xid")
    (v,) = lv.link_verdicts(inventory(), window({}, {})[1:])
    assert (v.verdict, v.reason) == ("healthy", "no link errors seen; PCIe at its best under load")


@pytest.mark.parametrize("inv, gpus, link", [
    (inventory(2, nvlinks=0), (0, 1), "GPU1 NVLink"),  # no NVLink between them: the GPU's own (to elsewhere)
    (inventory(4, nvlinks=18, switch=True), (0, 1, 2, 3), "GPU1 NVLink"),  # several peers: the GPU's links
])
def test_the_link_named_for_an_nvlink_xid(inv, gpus, link):
    g = replace(VLLM, gpus=gpus, tp=len(gpus))
    (v,) = lv.link_verdicts(inv, window({}, {1: XID145}, n=len(gpus), group=g))
    assert (v.verdict, v.link) == ("at_risk", link)


@pytest.mark.parametrize("inv, gpus, link", [
    (inventory(2, nvlinks=0), (0, 1), "GPU0+1 PCIe"),
    (inventory(4, nvlinks=18, switch=True), (0, 1, 2, 3), "GPU0–3 NVLink"),
    (inventory(2), (1,), "GPU1 PCIe"),
])
def test_a_healthy_verdict_names_the_groups_links(inv, gpus, link):
    g = replace(VLLM, gpus=gpus)
    (v,) = lv.link_verdicts(inv, window({}, {}, n=max(gpus) + 1, group=g))
    assert (v.verdict, v.link) == ("healthy", link)


def test_groups_without_gpus_or_elsewhere_are_left_out_and_a_twin_once():
    frames = window({}, {1: XID145})
    gone = replace(VLLM, endpoint="http://far:8000", local=False)
    frames[-1] = replace(frames[-1], groups=(VLLM, VLLM, replace(VLLM, gpus=()), gone))
    assert [v.key for v in lv.link_verdicts(inventory(), frames)] == ["http://localhost:8000:0+1"]
    assert lv.link_verdicts(inventory(), []) == []


def test_the_rule_raises_only_degraded_and_at_risk_with_the_link_and_evidence():
    inv = inventory()
    assert lv.rule_link_verdict(inv, window({}, {})) == []
    (c,) = lv.rule_link_verdict(inv, window({}, {1: XID145}))
    assert (c.id, c.rule, c.severity, c.subject, c.variant, c.basis) == (
        "link-verdict:http://localhost:8000:0+1", "link_verdict", "critical", "GPU0-GPU1", "at_risk:nvlink_xid",
        "window")
    assert c.message == ("vLLM :8000 qwen3: link at risk: GPU0↔GPU1 NVLink — Xid 145 on GPU1 (NVLink 5 error in the "
                         "RLW unit); NVLink errors like this precede a hang of the group's collectives: drain the "
                         "group, read `dmesg`, reset the GPU")
    assert c.evidence["gpu1_xids"] == [145]
    (c,) = lv.rule_link_verdict(inv, window({}, {1: {"pcie_gen": 2}}))
    assert (c.severity, c.subject, c.variant) == ("warning", "GPU1", "degraded:pcie_below_max")
    assert "GPU1 PCIe Gen2×16 under load, GPU and slot allow Gen5×16" in c.message
    assert any(x.rule == "link_verdict" for x in evaluate(inv, window({}, {1: XID145})))  # registered


def test_verdict_text_in_every_form():
    inv = inventory()
    (bad,) = lv.link_verdicts(inv, window({}, {1: {"pcie_replay_count": 5}}))
    assert lv.verdict_text(bad) == ("link degraded: GPU1 PCIe — PCIe replays 0.5/s on GPU1 (+5 in 10 s; 0.1/s or more); "
                                    "resends cost bandwidth: suspect the riser, cable or slot if it keeps on")
    assert lv.verdict_text(bad, advice=False) == "link degraded: GPU1 PCIe — PCIe replays 0.5/s on GPU1 (+5 in 10 s; 0.1/s or more)"
    (ok,) = lv.link_verdicts(inv, window({}, {}))
    assert lv.verdict_text(ok) == "link healthy: GPU0↔GPU1 NVLink (no link errors in 10 s; PCIe at its best under load)"
    (idle,) = lv.link_verdicts(inv, window({0: IDLE, 1: IDLE}, {0: IDLE, 1: IDLE}))
    assert lv.verdict_text(idle).endswith("(no link errors in 10 s; idle: PCIe speed not judged)")


# ------------------------------------------------------------------ never raises
_count = st.none() | st.integers(min_value=-5, max_value=2**40)
_reading = st.builds(
    GpuReading, index=st.integers(-1, 5), lost=st.booleans(), util_gpu_pct=st.none() | st.floats(-10, 200),
    pcie_gen=st.none() | st.integers(0, 9), pcie_width=st.none() | st.integers(0, 32),
    pcie_tx_bytes_per_s=st.none() | st.floats(0, 1e12), pcie_replay_count=_count, pcie_recovery_count=_count,
    nvlink_crc_flit_count=_count, nvlink_crc_data_count=_count, nvlink_replay_count=_count,
    nvlink_recovery_count=_count,
    xids=st.none() | st.lists(st.builds(XidCount, xid=st.sampled_from([74, 79, 94, 145, 150, 999]),
                                        count=st.integers(1, 9), last_t=st.floats(0, 200)), max_size=3).map(tuple))
_group = st.builds(ServingGroup, server=st.text(max_size=8), endpoint=st.none() | st.text(max_size=8),
                   gpus=st.lists(st.integers(-1, 6), max_size=4).map(tuple), local=st.booleans())
_frame = st.builds(Frame, t=st.floats(0, 100), gpus=st.lists(_reading, max_size=4).map(tuple),
                   groups=st.lists(_group, max_size=3).map(tuple))


@settings(derandomize=True, deadline=None, database=None, max_examples=examples(200),
          suppress_health_check=[HealthCheck.too_slow])
@given(frames=st.lists(_frame, max_size=4).map(lambda fs: sorted(fs, key=lambda f: f.t)),
       n=st.integers(0, 4), nvlinks=st.integers(0, 18))
def test_never_raises_on_odd_readings(frames, n, nvlinks):
    inv = inventory(n, nvlinks)
    for v in lv.link_verdicts(inv, frames):
        assert v.verdict in lv.VERDICTS and v.link and lv.verdict_text(v)
    for c in lv.rule_link_verdict(inv, frames):
        assert c.severity in ("warning", "critical")


# ------------------------------------------------------------------ the scenarios, with known answers
def _run(name: str, start: float, end: float):
    """The scenario from ``start`` to ``end`` s at 1 Hz through the simulated NVML (with its servers' groups) and
    the findings engine: the verdicts over the engine's last window, the raised link-verdict findings."""
    src = with_groups(sim_source(name, at=start), name)
    try:
        eng = FindingsEngine(src.inventory)
        for f in run_frames(src, start, end):
            eng.update(f)
        verdicts = {v.label: v for v in lv.link_verdicts(src.inventory, list(eng.frames))}
        return verdicts, {f.id: f for f in eng.active if f.rule == "link_verdict"}
    finally:
        src.close()


def test_scenario_nvlink_xid145_puts_the_tp2_group_at_risk_and_leaves_the_other_healthy():
    verdicts, found = _run("link-nvlink-xid145", 0, 15)
    bad, good = verdicts["vLLM :8000 Llama-3.1-70B-Instruct"], verdicts["vLLM :8001 Qwen3-32B"]
    assert (bad.verdict, bad.link, bad.check) == ("at_risk", "GPU0↔GPU1 NVLink", "nvlink_xid")
    assert (good.verdict, good.link) == ("healthy", "GPU2↔GPU3 NVLink")
    (f,) = found.values()
    assert (f.id, f.severity, f.subject) == ("link-verdict:http://localhost:8000:0+1", "critical", "GPU0-GPU1")
    assert f.message == ("vLLM :8000 Llama-3.1-70B-Instruct: link at risk: GPU0↔GPU1 NVLink — Xid 145 on GPU1 "
                         "(NVLink 5 error in the RLW unit); NVLink errors like this precede a hang of the group's "
                         "collectives: drain the group, read `dmesg`, reset the GPU")
    _v, before = _run("link-nvlink-xid145", 0, 2)  # before the Xid: nothing
    assert before == {}


def test_scenario_pcie_replays_is_degraded_then_at_risk_by_rate():
    verdicts, found = _run("link-pcie-replays", 0, 45)
    (f,) = found.values()
    assert (f.severity, f.subject, f.variant) == ("warning", "GPU1", "degraded:pcie_replays")
    assert f.message.startswith("vLLM :8000 gemma-2-27b-it: link degraded: GPU1 PCIe — PCIe replays ")
    assert "/s on GPU1 (+" in f.message and f.message.endswith(
        "; 0.1/s or more); resends cost bandwidth: suspect the riser, cable or slot if it keeps on")
    assert 1.5 <= f.evidence["gpu1_pcie_replay_count_rise"] / f.evidence["window_s"] <= 3.0  # 2 a second
    _v, found = _run("link-pcie-replays", 60, 100)
    (f,) = found.values()
    assert (f.severity, f.subject, f.variant) == ("critical", "GPU1", "at_risk:pcie_replay_rate")
    assert "PCIe replays " in f.message and "; 10/s or more); the PCIe link resends all the time" in f.message


def test_scenario_healthy_group():
    verdicts, found = _run("link-nvlink-healthy", 0, 40)
    (v,) = verdicts.values()
    assert (v.verdict, v.link, v.label) == ("healthy", "GPU0↔GPU1 NVLink", "vLLM :8000 Llama-3.1-8B-Instruct")
    assert v.evidence["gpu0_nvlink_replay_count_rise"] == 0 and v.evidence["gpu1_pcie_gen"] == 5  # read, not guessed
    assert found == {}
