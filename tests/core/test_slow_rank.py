"""The slow rank in a serving group: which GPU lags its peers, and why (core/slow_rank.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from helpers import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscope.core.findings import FindingsEngine, evaluate
from gpuscope.core.model import (
    CLOCK_EVENT_BITS,
    DeviceInfo,
    Frame,
    GpuReading,
    Inventory,
    PairLink,
    ServingGroup,
)
from gpuscope.core.slow_rank import (
    CAUSES,
    RankReading,
    lags,
    median,
    rule_slow_rank,
    shortfall,
    slow_rank_brief,
    slow_ranks,
)
from gpuscope.core.topology import pcie_capacity_bytes_per_s
from gpuscope.core.window import RuleWindow

GEN4 = pcie_capacity_bytes_per_s(4, 16)
GEN1 = pcie_capacity_bytes_per_s(1, 16)


def rr(gpu: int, **kw) -> RankReading:
    """A busy H100-like GPU keeping pace, with ``kw`` changed."""
    base = dict(gpu=gpu, busy=True, sm_clock_mhz=1980.0, mem_clock_mhz=2619.0, power_w=640.0, power_limit_w=700.0,
                temp_gpu_c=66.0, temp_mem_c=75.0, reasons=frozenset(), pcie_gen=4, pcie_width=16,
                pcie_capacity_bytes_per_s=GEN4)
    base.update(kw)
    return RankReading(**base)


def peers(n: int = 3, **kw) -> list[RankReading]:
    return [rr(i, **kw) for i in range(1, n + 1)]


CAP = frozenset({"sw_power_cap"})

# (what, the GPU, its peers, the causes found: [(cause, also)])
CASES = [
    ("equal GPUs", rr(0), peers(), []),
    ("lower power limit, held at it", rr(0, power_limit_w=550.0, power_w=549.0, sm_clock_mhz=1590.0),
     peers(), [("power_limit", ())]),
    ("lower power limit with the cap reason: one cause, the reason beside it",
     rr(0, power_limit_w=550.0, power_w=540.0, sm_clock_mhz=1590.0, reasons=CAP), peers(),
     [("power_limit", ("sw_power_cap",))]),
    ("lower power limit not reached: no cost", rr(0, power_limit_w=550.0, power_w=400.0), peers(), []),
    ("lower power limit reached but the clock keeps pace", rr(0, power_limit_w=550.0, power_w=549.0), peers(), []),
    ("lower limit, clock unknown everywhere: the draw at the limit decides",
     rr(0, power_limit_w=550.0, power_w=549.0, sm_clock_mhz=None), peers(sm_clock_mhz=None), [("power_limit", ())]),
    ("higher power limit is never a lag", rr(0, power_limit_w=800.0), peers(), []),
    ("power cap on it alone", rr(0, reasons=CAP, power_w=699.0, sm_clock_mhz=1800.0), peers(),
     [("sw_power_cap", ())]),
    ("power cap on every GPU: none lags", rr(0, reasons=CAP, sm_clock_mhz=1800.0),
     peers(reasons=CAP, sm_clock_mhz=1800.0), []),
    ("power cap on two of four: it is not alone", rr(0, reasons=CAP, sm_clock_mhz=1800.0),
     [rr(1, reasons=CAP, sm_clock_mhz=1800.0), rr(2), rr(3)], [("sw_power_cap", ())]),
    ("power cap on three of four: the rest are the odd ones", rr(0, reasons=CAP, sm_clock_mhz=1800.0),
     [rr(1, reasons=CAP, sm_clock_mhz=1800.0), rr(2, reasons=CAP, sm_clock_mhz=1800.0), rr(3)], []),
    ("a reason that costs nothing (clock at peers')", rr(0, reasons=CAP), peers(), []),
    ("HW thermal", rr(0, reasons=frozenset({"hw_thermal"}), temp_gpu_c=92.0, sm_clock_mhz=1650.0), peers(),
     [("hw_thermal", ())]),
    ("SW thermal", rr(0, reasons=frozenset({"sw_thermal"}), temp_gpu_c=86.0, sm_clock_mhz=1700.0), peers(),
     [("sw_thermal", ())]),
    ("HW slowdown", rr(0, reasons=frozenset({"hw_slowdown"}), sm_clock_mhz=1200.0), peers(), [("hw_slowdown", ())]),
    ("power brake", rr(0, reasons=frozenset({"hw_power_brake"}), sm_clock_mhz=900.0), peers(),
     [("hw_power_brake", ())]),
    ("worst reason first", rr(0, reasons=frozenset({"sw_thermal", "hw_slowdown"}), sm_clock_mhz=1200.0), peers(),
     [("hw_slowdown", ("sw_thermal",))]),
    ("idle reason is not a cause", rr(0, reasons=frozenset({"gpu_idle"}), sm_clock_mhz=1800.0), peers(),
     [("sm_clock", ())]),
    ("hot memory that slows it", rr(0, temp_mem_c=97.0, sm_clock_mhz=1700.0, reasons=frozenset({"sw_thermal"})),
     peers(), [("mem_temp", ("sw_thermal",))]),
    ("hot memory, memory clock lower, SM clock unknown", rr(0, temp_mem_c=97.0, mem_clock_mhz=2000.0,
                                                            sm_clock_mhz=None), peers(sm_clock_mhz=None),
     [("mem_temp", ())]),
    ("hot memory that costs nothing", rr(0, temp_mem_c=97.0), peers(), []),
    ("warm memory, not hot enough", rr(0, temp_mem_c=84.0, sm_clock_mhz=1700.0), peers(), [("sm_clock", ())]),
    ("SM clock 10 % low, no reason", rr(0, sm_clock_mhz=1780.0), peers(), [("sm_clock", ())]),
    ("SM clock 3 % low: within the spread of equal parts", rr(0, sm_clock_mhz=1920.0), peers(), []),
    ("SM clock above peers", rr(0, sm_clock_mhz=1980.0), peers(sm_clock_mhz=1700.0), []),
    ("PCIe link lower under load", rr(0, pcie_gen=1, pcie_capacity_bytes_per_s=GEN1), peers(), [("pcie_link", ())]),
    ("PCIe link and a clock cause: one of each", rr(0, pcie_gen=1, pcie_capacity_bytes_per_s=GEN1,
                                                    sm_clock_mhz=1700.0), peers(),
     [("sm_clock", ()), ("pcie_link", ())]),
    ("PCIe link lower at idle: never", rr(0, busy=False, pcie_gen=1, pcie_capacity_bytes_per_s=GEN1),
     peers(busy=False), []),
    ("a peer idle: the group is not working", rr(0, sm_clock_mhz=1500.0), [rr(1), rr(2, busy=False)], []),
    ("no peers", rr(0, sm_clock_mhz=1500.0), [], []),
    ("two GPUs: the slower one", rr(0, sm_clock_mhz=1500.0), [rr(1)], [("sm_clock", ())]),
    ("two GPUs: the faster one", rr(1), [rr(0, sm_clock_mhz=1500.0)], []),
    ("its readings unknown: never read as 0", rr(0, sm_clock_mhz=None, power_limit_w=None, power_w=None,
                                                 temp_mem_c=None, mem_clock_mhz=None, pcie_capacity_bytes_per_s=None,
                                                 pcie_gen=None, pcie_width=None), peers(), []),
    ("peers' readings unknown: never read as 0", rr(0), peers(sm_clock_mhz=None, power_limit_w=None, power_w=None,
                                                           temp_mem_c=None, pcie_capacity_bytes_per_s=None), []),
    ("one peer unknown: the others' median", rr(0, sm_clock_mhz=1700.0),
     [rr(1, sm_clock_mhz=None), rr(2), rr(3)], [("sm_clock", ())]),
]


@pytest.mark.parametrize("what,me,others,want", CASES, ids=[c[0] for c in CASES])
def test_lags_names_each_cause_and_only_against_peers(what, me, others, want):
    assert [(lag.cause, also) for lag, also in lags(me, others)] == want


@pytest.mark.parametrize("values,want", [([], None), ([None], None), ([1.0, None, 3.0], 2.0), ([5.0, 1.0, 3.0], 3.0),
                                         ([0.0], 0.0)])
def test_median_skips_unknowns_and_keeps_zero(values, want):
    assert median(values) == want


@pytest.mark.parametrize("mine,theirs,want", [(90.0, 100.0, 0.1), (110.0, 100.0, -0.1), (None, 100.0, None),
                                              (90.0, None, None), (0.0, 0.0, None), (0.0, 100.0, 1.0)])
def test_shortfall(mine, theirs, want):
    got = shortfall(mine, theirs)
    assert got == (pytest.approx(want) if want is not None else None)


# ------------------------------------------------------------------ over frames, as the engine sees them
def _inv(n: int, limit: float = 700.0, nvlink: bool = True) -> Inventory:
    devs = tuple(DeviceInfo(index=i, name="NVIDIA H100 80GB HBM3", uuid=f"u{i}", bus_id=f"0000:{i:02x}:00.0",
                            sm_clock_max_mhz=1980, power_limit_w=limit, pcie_gen_gpu_max=5, pcie_gen_sys_max=5,
                            pcie_width_gpu_max=16, pcie_width_sys_max=16) for i in range(n))
    pairs = tuple(PairLink(a=a, b=b, pcie_path="SYS", nvlinks=18 if nvlink else 0)
                  for a in range(n) for b in range(a + 1, n))
    return Inventory(host="h", devices=devs, pairs=pairs)


def _group(gpus: tuple[int, ...], port: int = 8000) -> ServingGroup:
    return ServingGroup(server="vLLM", kind="vllm", endpoint=f"http://localhost:{port}", model="meta-llama/L-70B",
                        port=port, gpus=gpus, tp=len(gpus))


def _reading(i: int, **kw) -> GpuReading:
    base = dict(index=i, util_gpu_pct=97.0, sm_clock_mhz=1980, mem_clock_mhz=2619, power_w=640.0, power_limit_w=700.0,
                temp_gpu_c=66.0, pcie_gen=5, pcie_width=16, clock_event_reasons=0)
    base.update(kw)
    return GpuReading(**base)


def _frames(n: int, groups: tuple[ServingGroup, ...], special: dict[int, dict], seconds: int = 6,
            lost: tuple[int, ...] = ()) -> list[Frame]:
    out = []
    for t in range(seconds):
        gpus = tuple(GpuReading(index=i, lost=True) if i in lost else _reading(i, **special.get(i, {}))
                     for i in range(n))
        out.append(Frame(t=1000.0 + t, gpus=gpus, groups=groups))
    return out


HELD_550 = {"power_limit_w": 550.0, "power_w": 549.0, "sm_clock_mhz": 1590,
            "clock_event_reasons": CLOCK_EVENT_BITS["sw_power_cap"]}
IDLE = {"util_gpu_pct": 0.0, "pcie_gen": 1, "clock_event_reasons": CLOCK_EVENT_BITS["gpu_idle"], "sm_clock_mhz": 345,
        "power_w": 70.0}
TP4 = (_group((0, 1, 2, 3)), _group((4, 5, 6, 7), 8001))

FRAME_CASES = [
    ("the brief's example: GPU5 held at 550 W", 8, TP4, {5: HELD_550}, (), [(5, "power_limit")]),
    ("equal GPUs", 8, TP4, {}, (), []),
    ("idle group, one GPU idling lower", 8, TP4, {i: IDLE for i in range(4, 8)} | {5: {**IDLE, "sm_clock_mhz": 210}},
     (), []),
    ("idle PCIe downshift on one GPU of an idle group", 4, TP4[:1], {i: IDLE for i in range(4)}
     | {2: {**IDLE, "pcie_gen": 1}} | {0: {**IDLE, "pcie_gen": 5}}, (), []),
    ("single-GPU group", 2, (_group((1,)),), {1: HELD_550}, (), []),
    ("GPU outside every group", 3, (_group((0, 1)),), {2: HELD_550}, (), []),
    ("a lost GPU is left out, the rest compared", 4, TP4[:1], {1: HELD_550}, (3,), [(1, "power_limit")]),
    ("a lost GPU leaves one: nothing", 2, (_group((0, 1)),), {0: HELD_550}, (1,), []),
    ("no groups", 8, (), {5: HELD_550}, (), []),
    ("PCIe link lower under load", 4, TP4[:1], {3: {"pcie_gen": 1}}, (), [(3, "pcie_link")]),
]


@pytest.mark.parametrize("what,n,groups,special,lost,want", FRAME_CASES, ids=[c[0] for c in FRAME_CASES])
def test_slow_ranks_over_frames(what, n, groups, special, lost, want):
    frames = _frames(n, groups, special, lost=lost)
    assert [(s.gpu, s.cause) for s in slow_ranks(_inv(n), frames)] == want


def test_power_limit_from_the_inventory_when_the_reading_has_none():
    inv = _inv(2)
    inv = replace(inv, devices=(replace(inv.devices[0], power_limit_w=550.0), inv.devices[1]))
    frames = _frames(2, (_group((0, 1)),), {0: {"power_limit_w": None, "power_w": 549.0, "sm_clock_mhz": 1590},
                                            1: {"power_limit_w": None}})
    assert [(s.gpu, s.cause, s.value) for s in slow_ranks(inv, frames)] == [(0, "power_limit", 550.0)]
    assert [s.cause for s in slow_ranks(_inv(2), frames)] == ["sm_clock"]  # both 700 W: the clock alone names it


def test_the_brief_example_message_and_evidence():
    (s,) = slow_ranks(_inv(8), _frames(8, TP4, {5: HELD_550}))
    assert s.message == ("vLLM :8001 TP=4: GPU5 held at its 550 W power limit while GPU4, GPU6, GPU7 draw 640 W "
                         "(limit 700 W); SM clock 1,590 vs 1,980 MHz; the group runs at GPU5's pace")
    assert (s.group, s.value, s.peer_value, s.unit, s.peers) == (
        "http://localhost:8001", 550.0, 700.0, "W", ((4, 700.0), (6, 700.0), (7, 700.0)))
    assert s.id == "slow-rank:http://localhost:8001:gpu5:power_limit" and s.also == ("sw_power_cap",)
    (c,) = rule_slow_rank(_inv(8), _frames(8, TP4, {5: HELD_550}))
    assert (c.id, c.rule, c.severity, c.subject, c.variant) == (s.id, "slow_rank", "warning", "GPU5", "power_limit")
    ev = c.evidence
    assert ev["model"] == "meta-llama/L-70B" and ev["also"] == ["sw_power_cap"]
    by_gpu = {r["gpu"]: r for r in ev["readings"]}
    assert sorted(by_gpu) == [4, 5, 6, 7]
    assert by_gpu[5]["power_limit_w"] == 550.0 and by_gpu[5]["reasons"] == ["sw_power_cap"]
    assert by_gpu[4]["sm_clock_mhz"] == 1980.0 and by_gpu[4]["pcie_capacity_bytes_per_s"] > 0


@pytest.mark.parametrize("special,nvlink,want", [
    ({0: {"clock_event_reasons": CLOCK_EVENT_BITS["hw_thermal"], "temp_gpu_c": 92.0, "sm_clock_mhz": 1650}}, True,
     "vLLM :8000 TP=2: GPU0 in hardware thermal slowdown at 92 °C while GPU1 runs at 66 °C; SM clock 1,650 vs "
     "1,980 MHz; the group runs at GPU0's pace"),
    ({1: {"sm_clock_mhz": 1700}}, True,
     "vLLM :8000 TP=2: GPU1 SM clock at 1,700 MHz (no reason given by NVML) while GPU0 runs at 1,980 MHz; the group "
     "runs at GPU1's pace"),
    ({1: {"pcie_gen": 1}}, False,
     "vLLM :8000 TP=2: GPU1 PCIe Gen1×16 under load (4.0 GB/s) while GPU0 runs at Gen5×16 (63.0 GB/s); the group "
     "runs at GPU1's pace"),
    ({1: {"pcie_gen": 1}}, True,
     "vLLM :8000 TP=2: GPU1 PCIe Gen1×16 under load (4.0 GB/s) while GPU0 runs at Gen5×16 (63.0 GB/s); the group's "
     "host transfers run at GPU1's pace (its GPUs talk over NVLink)"),
])
def test_messages(special, nvlink, want):
    (s,) = slow_ranks(_inv(2, nvlink=nvlink), _frames(2, (_group((0, 1)),), special))
    assert s.message == want


def test_a_reason_held_in_half_the_window_counts_a_blip_does_not():
    frames = _frames(2, (_group((0, 1)),), {0: {"sm_clock_mhz": 1880}})  # 5 % low: the clock alone is not enough
    cap = CLOCK_EVENT_BITS["sw_power_cap"]
    blip = [replace(f, gpus=(replace(f.gpus[0], clock_event_reasons=cap), f.gpus[1])) if k == 5 else f
                 for k, f in enumerate(frames)]
    held = [replace(f, gpus=(replace(f.gpus[0], clock_event_reasons=cap), f.gpus[1])) if k >= 2 else f
            for k, f in enumerate(frames)]
    assert [s.cause for s in slow_ranks(_inv(2), blip)] == ["sm_clock"]
    assert [s.cause for s in slow_ranks(_inv(2), held)] == ["sw_power_cap"]


def test_engine_raises_it_after_the_hold_and_shares_the_rule_window():
    inv = _inv(8)
    eng = FindingsEngine(inv)
    raised = []
    for k in range(12):
        for f in _frames(8, TP4, {5: HELD_550}, seconds=1):
            raised += [e.data["id"] for e in eng.update(replace(f, t=2000.0 + k)) if e.kind == "finding_raised"]
    assert "slow-rank:http://localhost:8001:gpu5:power_limit" in raised
    window = RuleWindow(_frames(8, TP4, {5: HELD_550}))
    assert [c.id for c in evaluate(inv, window) if c.rule == "slow_rank"] == [
        "slow-rank:http://localhost:8001:gpu5:power_limit"]


@pytest.mark.parametrize("fid,want", [
    ("slow-rank:http://localhost:8001:gpu5:power_limit", "GPU5 lags: power limit"),
    ("slow-rank:vLLM:gpu12:pcie_link", "GPU12 lags: PCIe link"),
    ("slow-rank:x:gpu1:new_cause", "GPU1 lags: new_cause"),
    ("slow-rank:garbage", None),
    ("clocks:gpu5", None),
    ("", None),
])
def test_brief(fid, want):
    assert slow_rank_brief(fid) == want


def test_every_cause_has_words():
    from gpuscope.core.slow_rank import CLOCK_CAUSES, LINK_CAUSES
    assert {k for k, _ in CLOCK_CAUSES + LINK_CAUSES} == set(CAUSES)


# ------------------------------------------------------------------ fuzz: never raises
_num = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True, width=32))
_reasons = st.frozensets(st.sampled_from(sorted(CLOCK_EVENT_BITS)))


@st.composite
def _rank_reading(draw, gpu: int) -> RankReading:
    return RankReading(gpu=gpu, busy=draw(st.booleans()), sm_clock_mhz=draw(_num), mem_clock_mhz=draw(_num),
                       power_w=draw(_num), power_limit_w=draw(_num), temp_gpu_c=draw(_num), temp_mem_c=draw(_num),
                       reasons=draw(_reasons), pcie_gen=draw(st.one_of(st.none(), st.integers(0, 7))),
                       pcie_width=draw(st.one_of(st.none(), st.integers(0, 32))), pcie_capacity_bytes_per_s=draw(_num))


@settings(max_examples=examples(400), deadline=None)
@given(st.integers(1, 6).flatmap(lambda n: st.tuples(*(_rank_reading(i) for i in range(n)))))
def test_lags_never_raises(readings):
    for me in readings:
        for lag, _also in lags(me, [r for r in readings if r is not me]):
            assert lag.cause in CAUSES


_int = st.one_of(st.none(), st.integers(0, 5000))


@st.composite
def _gpu_reading(draw, i: int) -> GpuReading:
    return GpuReading(index=i, lost=draw(st.booleans()) and draw(st.booleans()), util_gpu_pct=draw(_num),
                      sm_clock_mhz=draw(_int), mem_clock_mhz=draw(_int), power_w=draw(_num),
                      power_limit_w=draw(_num), temp_gpu_c=draw(_num), temp_mem_c=draw(_num),
                      clock_event_reasons=draw(st.one_of(st.none(), st.integers(0, 0x1FF))),
                      pcie_gen=draw(st.one_of(st.none(), st.integers(0, 6))),
                      pcie_width=draw(st.one_of(st.none(), st.sampled_from([0, 1, 4, 8, 16]))),
                      pcie_tx_bytes_per_s=draw(_num), pcie_rx_bytes_per_s=draw(_num))


@settings(max_examples=examples(200), deadline=None)
@given(st.data())
def test_slow_ranks_never_raises_on_arbitrary_frames(data):
    n = data.draw(st.integers(1, 5))
    groups = tuple(ServingGroup(server="s\x1b[2J", endpoint=data.draw(st.one_of(st.none(), st.just("http://x:1"))),
                                gpus=tuple(data.draw(st.lists(st.integers(0, n + 1), max_size=5))))
                   for _ in range(data.draw(st.integers(0, 2))))
    frames = [Frame(t=float(t), gpus=tuple(data.draw(_gpu_reading(i)) for i in range(n)), groups=groups)
              for t in range(data.draw(st.integers(0, 4)))]
    for s in slow_ranks(_inv(n), frames):
        assert "\x1b" not in s.message and s.cause in CAUSES
        assert s.gpu in {r.gpu for r in s.readings} and not frames[-1].gpus[s.gpu].lost


def test_the_span_is_the_engines():
    """core.findings imports this module (its RULES), so the span is a constant of its own: the same."""
    from gpuscope.core.slow_rank import SPAN_S
    from gpuscope.core.window import AVG_S

    assert SPAN_S == AVG_S
