"""Findings: a table of cases per rule (pure functions), then whole scenarios through the engine."""

from __future__ import annotations

import pytest
from helpers import run_frames, sim_source

from gpuscope.core.findings import (
    COUNTER_WINDOW_S,
    FindingsEngine,
    evaluate,
    is_busy,
    rule_bottleneck,
    rule_busy_not_computing,
    rule_clock_events,
    rule_gpu_lost,
    rule_link_saturated,
    rule_pcie_below_max,
    rule_pcie_errors,
    rule_slow_path,
)
from gpuscope.core.model import DeviceInfo, Frame, GpuReading, Inventory, PairLink
from gpuscope.core.topology import pcie_capacity_bytes_per_s
from gpuscope.core.window import AVG_S, GpuWindow, RuleWindow, build_gpu_windows, gpu_windows


def dev(i=0, gen_max=4, sys_max=4, width=16, numa=0, nvlinks=0, version=6):
    return DeviceInfo(index=i, name="NVIDIA T", uuid="", bus_id=f"00000000:{i:02x}:00.0", pcie_gen_gpu_max=gen_max,
                      pcie_gen_sys_max=sys_max, pcie_width_sys_max=width, numa_node=numa, nvlinks_active=nvlinks,
                      nvlink_version=version, sm_clock_max_mhz=2100, power_limit_w=300)


def inv(devs, pairs=()):
    return Inventory(host="t", devices=tuple(devs), pairs=tuple(pairs))


def frames_of(*readings_per_frame, dt=1.0):
    return [Frame(t=1000 + k * dt, gpus=tuple(rs)) for k, rs in enumerate(readings_per_frame)]


def gpu(i=0, **kw):
    base = dict(util_gpu_pct=0.0, pcie_gen=4, pcie_width=16, pcie_rx_bytes_per_s=0.0, pcie_tx_bytes_per_s=0.0)
    base.update(kw)
    return GpuReading(index=i, **base)


@pytest.mark.parametrize("util,traffic,cap,busy", [
    (95, 0, 31.5e9, True), (0, 0, 31.5e9, False), (5, 3.5e9, 4e9, True), (5, 0.1e9, 31.5e9, False),
    (None, None, None, False), (30, None, None, True),
])
def test_is_busy(util, traffic, cap, busy):
    assert is_busy(util, traffic, cap) is busy


@pytest.mark.parametrize("case,reading,device,expect_id,severity,words", [
    ("trained low under load", gpu(util_gpu_pct=97, pcie_gen=1, pcie_rx_bytes_per_s=3.9e9), dev(),
     "pcie-below-max:gpu0", "critical", "GPU0 PCIe Gen1×16 under load, GPU supports Gen4×16: 4.0 of 31.5 GB/s"),
    ("low at idle is the power saving", gpu(pcie_gen=1), dev(), "pcie-idle-downshift:gpu0", "info", "power-saving"),
    ("slot limits the link", gpu(util_gpu_pct=80, pcie_gen=3), dev(sys_max=3), "pcie-slot-limited:gpu0", "warning",
     "slot limits the link: Gen3×16 (GPU supports Gen4): 15.8 of 31.5"),
    ("slot limits and trained lower still", gpu(util_gpu_pct=80, pcie_gen=1), dev(sys_max=3), "pcie-below-max:gpu0",
     "critical", "the slot allows only Gen3"),
    ("width trained low", gpu(util_gpu_pct=90, pcie_width=8), dev(), "pcie-below-max:gpu0", "critical", "Gen4×8"),
    # severity: critical when half the bandwidth or less is left, else a warning (cases well clear of half)
    ("a quarter lost (x12 of x16) is a warning", gpu(util_gpu_pct=90, pcie_width=12), dev(), "pcie-below-max:gpu0",
     "warning", "Gen4×12 under load, GPU supports Gen4×16: 23.6 of 31.5"),
    ("three quarters lost (Gen3 x8 of Gen4 x16) is critical", gpu(util_gpu_pct=90, pcie_gen=3, pcie_width=8), dev(),
     "pcie-below-max:gpu0", "critical", "Gen3×8 under load, GPU supports Gen4×16: 7.9 of 31.5"),
    ("at max: nothing", gpu(util_gpu_pct=99), dev(), None, None, None),
])
def test_rule_pcie_below_max(case, reading, device, expect_id, severity, words):
    out = rule_pcie_below_max(inv([device]), frames_of([reading]))
    if expect_id is None:
        assert out == []
        return
    (c,) = out
    assert (c.id, c.severity) == (expect_id, severity), case
    assert words in c.message


@pytest.mark.parametrize("path,nvlinks,busy,severity", [
    ("SYS", 0, False, "info"), ("SYS", 0, True, "critical"), ("PHB", 0, False, "info"), ("NODE", 0, True, "warning"),
    ("SYS", 4, True, None), ("PIX", 0, True, None), ("PXB", 0, True, None),
])
def test_rule_slow_path(path, nvlinks, busy, severity):  # idle: the machine's one info line (more: test_findings_history)
    devs = [dev(0, numa=0), dev(1, numa=1)]
    g = dict(util_gpu_pct=97, pcie_gen=1, pcie_rx_bytes_per_s=3.9e9) if busy else {}
    out = rule_slow_path(inv(devs, [PairLink(0, 1, path, nvlinks=nvlinks)]), frames_of([gpu(0, **g), gpu(1, **g)]))
    if severity is None:
        assert out == []
        return
    (c,) = out
    assert c.severity == severity and c.id == ("slow-path:gpu0-gpu1" if busy else "slow-paths")
    if path == "SYS" and busy:
        assert "(NUMA 0 ↔ 1)" in c.message and "CPU interconnect" in c.message
    if busy:
        assert "at most 4.0 GB/s" in c.message


@pytest.mark.parametrize("reading,device,expect", [
    (gpu(util_gpu_pct=90, pcie_gen=1, pcie_rx_bytes_per_s=3.9e9), dev(), "pcie-saturated:gpu0"),
    (gpu(util_gpu_pct=90, pcie_rx_bytes_per_s=20e9), dev(), None),
    (gpu(util_gpu_pct=90, nvlink_tx_bytes_per_s=400e9), dev(nvlinks=18), "nvlink-saturated:gpu0"),
    (gpu(util_gpu_pct=90, nvlink_tx_bytes_per_s=210e9), dev(nvlinks=18), None),
])
def test_rule_link_saturated(reading, device, expect):
    out = rule_link_saturated(inv([device]), frames_of([reading]))
    assert [c.id for c in out] == ([expect] if expect else [])


@pytest.mark.parametrize("mask,severity,words", [
    (0x4, "warning", "power capped: 299 of 300 W, SM clock 1500 of 2100 MHz (−600 MHz)"),
    (0x40, "critical", "hardware thermal slowdown"),
    (0x8, "critical", "hardware slowdown"),
    (0x20 | 0x40, "critical", "hardware thermal slowdown + thermal slowdown (driver)"),
    (0x1, None, None), (0, None, None),
])
def test_rule_clock_events(mask, severity, words):
    r = gpu(util_gpu_pct=99, clock_event_reasons=mask, power_w=299.0, sm_clock_mhz=1500, temp_gpu_c=90.0)
    out = rule_clock_events(inv([dev()]), frames_of([r]))
    if severity is None:
        assert out == []
        return
    (c,) = out
    assert c.severity == severity and words in c.message


@pytest.mark.parametrize("power,clock,finding", [
    (299.0, 1500, True),  # at the limit, clocks pulled down: capped
    (299.0, 2100, True),  # at the limit (within 5 %), clocks still at max: capped, about to bite
    (196.0, 1700, True),  # well under the limit but clocks held 400 MHz down: the cap costs something
    (196.0, 2100, False),  # the reason bit lingers after the load dropped (seen on H200): no finding
    (None, 2100, True),  # power unknown: trust NVML's reason
])
def test_power_cap_is_a_finding_only_while_it_costs_something(power, clock, finding):
    r = gpu(util_gpu_pct=99, clock_event_reasons=0x4, power_w=power, sm_clock_mhz=clock)
    out = rule_clock_events(inv([dev()]), frames_of([r]))
    assert bool(out) is finding, out


@pytest.mark.parametrize("before,after,severity", [
    ((0, 0, 0), (10, 0, 0), "warning"), ((0, 5, 0), (0, 7, 0), "critical"), ((3, 3, 3), (3, 3, 3), None),
    ((None, None, None), (5, 5, 5), None), ((100, 0, 0), (100, 0, 4), "critical"),
])
def test_rule_pcie_errors(before, after, severity):
    def r(v):
        return gpu(pcie_replay_count=v[0], pcie_recovery_count=v[1], pcie_error_count=v[2])

    out = rule_pcie_errors(inv([dev()]), frames_of([r(before)], [r(after)], dt=5))
    assert [c.severity for c in out] == ([severity] if severity else [])
    if severity:
        assert "suspect the riser, cable or slot" in out[0].message


@pytest.mark.parametrize("util,sm,tensor,fires", [
    (96, 17, 0.1, True), (96, 90, 85, False), (40, 5, 0, False), (96, None, None, False),
])
def test_rule_busy_not_computing(util, sm, tensor, fires):
    out = rule_busy_not_computing(inv([dev()]), frames_of([gpu(util_gpu_pct=util, sm_active_pct=sm,
                                                                tensor_active_pct=tensor)]))
    assert bool(out) is fires


def test_rule_gpu_lost():
    out = rule_gpu_lost(inv([dev(0), dev(1)]), frames_of([gpu(0), GpuReading(index=1, lost=True)]))
    assert [(c.id, c.severity) for c in out] == [("gpu-lost:gpu1", "critical")]


@pytest.mark.parametrize("readings,words", [
    ([gpu(util_gpu_pct=97, pcie_gen=1, pcie_rx_bytes_per_s=3.9e9, sm_active_pct=22.0)],
     "looks interconnect-bound: GPU0 PCIe RX 3.9 of 4.0 GB/s at Gen1 (Gen4 would give 31.5), SM activity 22 %"),
    ([gpu(util_gpu_pct=99, clock_event_reasons=4, power_w=299.0, sm_clock_mhz=1500)], "looks power-bound"),
    ([gpu(util_gpu_pct=99, sm_active_pct=95.0, tensor_active_pct=92.0)], "looks compute-bound"),
    ([gpu(util_gpu_pct=60, sm_active_pct=50.0, pcie_rx_bytes_per_s=2e9)], None),  # unclear: say nothing
    ([gpu(util_gpu_pct=0)], None),
])
def test_rule_bottleneck(readings, words):
    out = rule_bottleneck(inv([dev()]), frames_of(readings))
    if words is None:
        assert out == []
    else:
        assert words in out[0].message


def test_engine_holds_before_raising_and_before_clearing():
    i = inv([dev()])
    eng = FindingsEngine(i, hold_s=5)
    busy_low = gpu(util_gpu_pct=97, pcie_gen=1, pcie_rx_bytes_per_s=1e9)
    ok = gpu(util_gpu_pct=97)
    events = []
    for k in range(12):
        events += eng.update(Frame(t=100 + k, gpus=(busy_low if k < 8 else ok,)))
    raised = [e for e in events if e.kind == "finding_raised"]
    assert [e.t for e in raised] == [105]  # held 5 s first
    assert not any(e.kind == "finding_cleared" for e in events)  # gone 3 s only: not cleared yet
    for k in range(12, 16):
        events += eng.update(Frame(t=100 + k, gpus=(ok,)))
    cleared = [e for e in events if e.kind == "finding_cleared"]
    assert [e.t for e in cleared] == [113] and cleared[0].data["id"] == "pcie-below-max:gpu0"


def test_engine_ignores_a_blip():
    eng = FindingsEngine(inv([dev()]), hold_s=5)
    ev = []
    for k in range(10):
        ev += eng.update(Frame(t=k, gpus=(gpu(util_gpu_pct=97, pcie_gen=1 if k in (3, 4) else 4),)))
    assert ev == [] and eng.active == []


# ------------------------------------------------------------------ scenarios through the engine
def scenario_findings(name, start, end, hold_s=5.0):
    src = sim_source(name)
    eng = FindingsEngine(src.inventory, hold_s=hold_s)
    raised = {}
    for f in run_frames(src, start, end):
        for e in eng.update(f):
            if e.kind == "finding_raised":
                raised[e.data["id"]] = e
    return raised, eng.active


def test_design_story_raises_below_max_and_slow_path_with_numbers():
    """The story's links are wrong (Gen1, SYS) and said so; its traffic is what TP=2 decode moves (~0.09 GB/s, 2 %
    of the Gen1 link), so nothing calls the server interconnect-bound (the group's link-cost finding says what the
    link costs: tests/core/test_link_cost.py)."""
    raised, active = scenario_findings("a6000-tp2-pcie-gen1", 10, 30)
    ids = {f.id for f in active}
    assert {"pcie-below-max:gpu0", "pcie-below-max:gpu1", "slow-paths"} <= ids
    msg = raised["pcie-below-max:gpu0"].text
    assert "Gen1×16 under load, GPU supports Gen4×16: 4.0 of 31.5 GB/s available" in msg
    assert "GPU0↔GPU1 crosses NUMA nodes (SYS, no NVLink)" in raised["slow-paths"].text
    assert not any("interconnect-bound" in f.message or f.rule == "link_saturated" for f in active)


def test_idle_downshift_raises_no_warning_at_idle_or_under_load():
    _r, idle = scenario_findings("idle-downshift", 0, 18)
    assert {f.severity for f in idle} <= {"info"}
    assert any(f.id == "pcie-idle-downshift:gpu0" for f in idle)
    _r, load = scenario_findings("idle-downshift", 21, 55)
    assert [f for f in load if f.severity != "info"] == []
    assert not any(f.rule == "pcie_below_max" for f in load)


def test_mixed_4_flags_only_its_sys_pairs():  # no peer traffic on them: one line for the machine
    _r, active = scenario_findings("mixed-4", 0, 20)
    (slow,) = [f for f in active if f.rule == "slow_path"]
    assert slow.id == "slow-paths" and slow.severity == "info"
    assert slow.evidence["pairs"] == ["0-2", "0-3", "1-2", "1-3"]
    assert {f.rule for f in active} == {"slow_path"}


def test_riser_errors_raise_pcie_errors_on_gpu1_only():
    _r, active = scenario_findings("pcie-riser-errors", 0, 20)
    assert [f.id for f in active if f.rule == "pcie_errors"] == ["pcie-errors:gpu1"]


def test_gpu_lost_raises_and_nothing_crashes():
    raised, active = scenario_findings("gpu-lost", 0, 25)
    assert "gpu-lost:gpu2" in {f.id for f in active}
    assert raised["gpu-lost:gpu2"].t == pytest.approx(12 + 1_800_000_000, abs=1.01)


def test_h200_nvswitch_heavy_nvlink_says_nothing_about_slow_paths():
    _r, active = scenario_findings("h200-nvswitch-8", 6, 40)
    assert active == []


@pytest.mark.parametrize("name,rule", [
    ("power-capped", "clock_events"), ("thermal-slowdown", "clock_events"),
    ("nccl-busy-not-computing", "busy_not_computing"), ("slot-limited", "pcie_below_max"),
])
def test_own_scenarios_raise_their_rule(name, rule):
    _r, active = scenario_findings(name, 0, 20)
    assert rule in {f.rule for f in active}


def test_healthy_scenario_stays_silent():
    _r, active = scenario_findings("healthy-gen4", 0, 40)
    assert active == []


def test_evaluate_sorts_bottleneck_then_severity():
    src = sim_source("power-capped")
    cands = evaluate(src.inventory, run_frames(src, 20, 26))
    assert cands[0].id == "bottleneck" and len(cands) > 2
    sev = [c.severity for c in cands[1:]]
    assert sev == sorted(sev, key=["critical", "warning", "info"].index)


# ------------------------------------------------------------------ findings windows
# Per-GPU window figures (core.findings.build_gpu_windows): a table of frames and the figures they give.


GEN4_X16 = pcie_capacity_bytes_per_s(4, 16)  # 31.5 GB/s
GEN1_X16 = pcie_capacity_bytes_per_s(1, 16)  # 4.0 GB/s


def r(i: int = 0, **kw) -> GpuReading:
    """A reading on a Gen4 ×16 link unless ``kw`` says otherwise."""
    return GpuReading(index=i, **{"pcie_gen": 4, "pcie_width": 16, **kw})


def frames(*per_frame: tuple[GpuReading, ...] | GpuReading, dt: float = 1.0) -> list[Frame]:
    """One frame per argument (a reading or a tuple of readings), ``dt`` seconds apart."""
    return [Frame(t=1000 + k * dt, gpus=rs if isinstance(rs, tuple) else (rs,)) for k, rs in enumerate(per_frame)]


# (case, frames, GPU position, the figures expected of it: None when it has no window)
CASES = [
    ("one frame: its readings", frames(r(util_gpu_pct=40, sm_active_pct=20, tensor_active_pct=5, power_w=300.0,
                                         pcie_tx_bytes_per_s=1e9, pcie_rx_bytes_per_s=3e9,
                                         nvlink_tx_bytes_per_s=7e9, nvlink_rx_bytes_per_s=2e9)), 0,
     dict(util_gpu_pct=40.0, sm_active_pct=20.0, tensor_active_pct=5.0, power_w=300.0, pcie_tx_bytes_per_s=1e9,
          pcie_rx_bytes_per_s=3e9, pcie_peak_bytes_per_s=3e9, pcie_capacity_bytes_per_s=GEN4_X16,
          nvlink_tx_bytes_per_s=7e9, nvlink_rx_bytes_per_s=2e9, nvlink_peak_bytes_per_s=7e9, busy=True)),
    ("means over the frames of the last AVG_S s (the boundary frame included)",
     frames(*(r(util_gpu_pct=10.0 * k, power_w=100.0 + k) for k in range(10))), 0,
     dict(util_gpu_pct=65.0, power_w=106.5)),  # t = 4 … 9 s: 40 … 90 %, 104 … 109 W
    ("a frame without the reading is skipped, not counted as zero",
     frames(r(util_gpu_pct=90), r(), r(util_gpu_pct=30)), 0, dict(util_gpu_pct=60.0)),
    ("never present: None; peaks 0.0",
     frames(r(), r()), 0,
     dict(util_gpu_pct=None, sm_active_pct=None, tensor_active_pct=None, power_w=None, pcie_tx_bytes_per_s=None,
          pcie_rx_bytes_per_s=None, pcie_peak_bytes_per_s=0.0, nvlink_tx_bytes_per_s=None,
          nvlink_rx_bytes_per_s=None, nvlink_peak_bytes_per_s=0.0, busy=False)),
    ("peak is the busier direction's mean", frames(r(pcie_tx_bytes_per_s=5e9), r(pcie_rx_bytes_per_s=2e9)), 0,
     dict(pcie_tx_bytes_per_s=5e9, pcie_rx_bytes_per_s=2e9, pcie_peak_bytes_per_s=5e9)),
    ("capacity is the link's now (Gen1 after Gen4)", frames(r(), r(pcie_gen=1)), 0,
     dict(pcie_capacity_bytes_per_s=GEN1_X16)),
    ("link unknown: no capacity", frames(r(pcie_gen=None, pcie_width=None, pcie_rx_bytes_per_s=9e9)), 0,
     dict(pcie_capacity_bytes_per_s=None, pcie_peak_bytes_per_s=9e9, busy=False)),
    ("busy by utilization", frames(r(util_gpu_pct=30)), 0, dict(busy=True)),
    ("busy by PCIe traffic alone (≥ 10 % of the link)", frames(r(util_gpu_pct=0, pcie_rx_bytes_per_s=3.5e9)), 0,
     dict(busy=True)),
    ("idle", frames(r(util_gpu_pct=29, pcie_rx_bytes_per_s=1e9)), 0, dict(busy=False)),
    ("the second GPU's figures are its own", frames((r(0, util_gpu_pct=10), r(1, util_gpu_pct=80))), 1,
     dict(gpu=1, util_gpu_pct=80.0, busy=True)),
    ("a GPU absent from older frames: the frames that have it",
     frames((r(0),), (r(0), r(1, util_gpu_pct=50)), (r(0), r(1, util_gpu_pct=70))), 1, dict(util_gpu_pct=60.0)),
    ("lost now: no window", frames(r(util_gpu_pct=90), GpuReading(index=0, lost=True)), 0, None),
    ("lost before, back now: the readings it had", frames(GpuReading(index=0, lost=True), r(util_gpu_pct=90)), 0,
     dict(util_gpu_pct=90.0, busy=True)),
    ("not in the last frame: no window", frames((r(0), r(1)), (r(0),)), 1, None),
]


@pytest.mark.parametrize("case,fs,i,expect", CASES, ids=[c[0] for c in CASES])
def test_build_gpu_windows(case, fs, i, expect):
    windows = build_gpu_windows(fs)
    if expect is None:
        assert i not in windows, case
        return
    w = windows[i]
    assert isinstance(w, GpuWindow)
    assert (w.gpu, w.now) == (i, fs[-1].gpus[i])
    got = {k: getattr(w, k) for k in expect}
    assert got == pytest.approx(expect), case


def test_the_span_is_avg_s():
    assert AVG_S == 5.0  # CASES' "last AVG_S s" case counts frames at 1 s steps against it


def test_no_frames_no_windows():
    assert build_gpu_windows([]) == {}
    assert gpu_windows([]) == {}


def test_every_gpu_not_lost_in_position_order():
    fs = frames((r(0), GpuReading(index=1, lost=True), r(2), r(3)))
    assert list(build_gpu_windows(fs)) == [0, 2, 3]


def test_a_window_is_frozen():
    w = build_gpu_windows(frames(r()))[0]
    with pytest.raises(AttributeError):
        w.busy = True  # type: ignore[misc]


def test_one_evaluation_builds_the_windows_once():
    fs = frames((r(0, util_gpu_pct=50), r(1)), (r(0, util_gpu_pct=70), r(1)))
    window = RuleWindow(fs)
    first = gpu_windows(window)
    assert gpu_windows(window) is first  # shared by every rule of the evaluation
    assert first == build_gpu_windows(fs)  # the same figures as a plain list of frames gives


@pytest.mark.parametrize("reading,want", [
    # busy from PCIe traffic alone, link full, neither SM activity nor utilization known
    (r(pcie_gen=1, pcie_rx_bytes_per_s=3.9e9), "looks interconnect-bound: GPU0 PCIe RX 3.9 of 4.0 GB/s at Gen1"),
    # tensor pipe busy, SM activity unknown
    (r(util_gpu_pct=95, tensor_active_pct=80), "looks compute-bound: GPU0 tensor 80 %"),
    (r(util_gpu_pct=95, sm_active_pct=90, tensor_active_pct=80), "looks compute-bound: GPU0 SM activity 90 %, tensor 80 %"),
])
def test_bottleneck_words_with_unknown_readings(reading: GpuReading, want: str) -> None:
    """The bottleneck rule formatted an unknown (None) SM activity or utilization with ``:.0f`` and raised
    TypeError: a GPU busy by PCIe traffic alone without utilization, or a tensor pipe busy without SM activity."""
    from gpuscope.core.findings import rule_bottleneck
    from gpuscope.core.model import DeviceInfo, Inventory

    inv = Inventory(host="h", devices=(DeviceInfo(index=0, name="x", uuid="u", bus_id="b"),))
    got = rule_bottleneck(inv, frames(*([reading] * 6)))
    assert [c.message for c in got] == [want]


INV = Inventory(host="t", devices=(DeviceInfo(index=0, name="L40S", uuid="", bus_id="00000000:18:00.0"),))


def _frames(rising_until_s: float, end_s: float, read_every_s: float = 15.0, per_s: float = 40.0):
    """One frame a second; the counter as the NVML source carries it: read every ``read_every_s``."""
    for k in range(int(end_s) + 1):
        last_read = (k // read_every_s) * read_every_s
        value = int(per_s * min(last_read, rising_until_s))
        yield Frame(t=1000.0 + k, gpus=(GpuReading(index=0, pcie_replay_count=value),))


def _events(frames):
    eng = FindingsEngine(INV, hold_s=5.0)
    return [(e.t - 1000.0, e.kind) for f in frames for e in eng.update(f) if e.data.get("id") == "pcie-errors:gpu0"]


@pytest.mark.parametrize("read_every_s", [15.0, 16.0, 20.0])  # 15 s, later when a slow tick is late
def test_a_steady_rise_read_every_15_s_is_one_finding(read_every_s):
    """PCIe error counters read every 15 s (sources/nvml.py HEALTH_INTERVAL_S) and carried between reads make one
    finding while they keep rising, not one that comes and goes: with the engine's 10 s window the
    `pcie-riser-errors` scenario's GPU1 showed "critical 9s (then cleared)" in `gpuscope summary` of a 33 s
    recording, and the live TUI said "nothing limits this server" two thirds of the time (trial2)."""
    ev = _events(_frames(rising_until_s=1e9, end_s=120, read_every_s=read_every_s))
    assert [k for _t, k in ev] == ["finding_raised"], ev  # was raised/cleared every 15 s


@pytest.mark.parametrize("stop_s", [45.0, 60.0])
def test_it_clears_once_the_counters_stop(stop_s):
    """PCIe error counters read every 15 s (sources/nvml.py HEALTH_INTERVAL_S) and carried between reads make one
    finding while they keep rising, not one that comes and goes: with the engine's 10 s window the
    `pcie-riser-errors` scenario's GPU1 showed "critical 9s (then cleared)" in `gpuscope summary` of a 33 s
    recording, and the live TUI said "nothing limits this server" two thirds of the time (trial2)."""
    ev = _events(_frames(rising_until_s=stop_s, end_s=stop_s + 2 * COUNTER_WINDOW_S))
    kinds = [k for _t, k in ev]
    assert kinds == ["finding_raised", "finding_cleared"], ev
    last_step = (stop_s // 15) * 15 + 15  # the first read that sees no rise
    assert ev[1][0] <= last_step + COUNTER_WINDOW_S + 5.0 + 1.0
