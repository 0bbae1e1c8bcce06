"""Findings over time and across machines: change events, durations from the condition's start,
episodes, "since" after a seek, NVLink capacity by part, idle judgement, one line for quiet slow paths,
and ``summary`` compared with what the live engine showed at the same moments."""

from __future__ import annotations

from dataclasses import replace

import pytest
from helpers import ROOT, run_frames, sim_source

from gpuscope.core.findings import (
    Finding,
    FindingsEngine,
    finding_line,
    group_str,
    rule_bottleneck,
    rule_link_saturated,
    rule_pcie_below_max,
    rule_slow_path,
    tp_groups,
)
from gpuscope.core.model import DeviceInfo, Frame, GpuReading, Inventory, PairLink
from gpuscope.core.session import Session
from gpuscope.core.stats import finding_durations, summarize
from gpuscope.core.topology import (
    device_nvlink_capacity_bytes_per_s,
    nvlink_link_bytes_per_s,
    pair_bandwidth_bytes_per_s,
)
from gpuscope.outputs.recorder import Recorder
from gpuscope.sources import scenario as scenario_mod
from gpuscope.sources.live import VirtualClock
from gpuscope.sources.nvml import NvmlSource
from gpuscope.sources.recording import open_recording
from gpuscope.sources.simnvml import SimNvml

DEMO = ROOT / "recordings" / "h200-2gpu-load-phases.jsonl.gz"


def dev(i=0, name="NVIDIA T", width=16, numa=0, nvlinks=0, version=6, arch=None, field_rate=None, gen_max=4):
    return DeviceInfo(index=i, name=name, uuid="", bus_id=f"00000000:{i:02x}:00.0", pcie_gen_gpu_max=gen_max,
                      pcie_gen_sys_max=gen_max, pcie_width_sys_max=width, numa_node=numa, nvlinks_active=nvlinks,
                      nvlink_version=version, architecture=arch, sm_clock_max_mhz=2100, power_limit_w=300,
                      nvlink_link_bytes_per_s=field_rate)


def inv(devs, pairs=()):
    return Inventory(host="t", devices=tuple(devs), pairs=tuple(pairs))


def gpu(i=0, **kw):
    base = dict(util_gpu_pct=0.0, pcie_gen=4, pcie_width=16, pcie_rx_bytes_per_s=0.0, pcie_tx_bytes_per_s=0.0)
    base.update(kw)
    return GpuReading(index=i, **base)


def one(*readings):
    return [Frame(t=1000.0, gpus=tuple(readings))]


# ------------------------------------------------------------------ 2. NVLink capacity by part
@pytest.mark.parametrize("name,version,arch,field_rate,per_link_gb", [
    ("NVIDIA RTX A6000", 4, "ampere", None, 14.0625),  # GA102 bridge
    ("NVIDIA GeForce RTX 3090", 4, "ampere", None, 14.0625),
    ("NVIDIA GeForce RTX 3090 Ti", 4, "ampere", None, 14.0625),
    ("NVIDIA A40", 4, "ampere", None, 14.0625),
    ("NVIDIA A100-SXM4-80GB", 4, "ampere", None, 25.0),  # NVLink 3, data centre
    ("NVIDIA H200", 6, "hopper", None, 25.0),  # NVLink 4 (the field is NOT_SUPPORTED there)
    ("NVIDIA B200", 7, "blackwell", None, 50.0),  # NVLink 5
    ("NVIDIA B200", None, "blackwell", None, 50.0),
    ("NVIDIA RTX A6000", 4, "ampere", 14.062e9, 14.062),  # NVML's own answer wins
    ("NVIDIA H200", 6, "hopper", 26.562e9, 26.562),
    ("NVIDIA Mystery", None, None, None, None),
])
def test_nvlink_link_rate_by_part(name, version, arch, field_rate, per_link_gb):
    got = nvlink_link_bytes_per_s(name, version, arch, field_rate)
    assert (got / 1e9 if got else None) == (pytest.approx(per_link_gb) if per_link_gb else None)


@pytest.mark.parametrize("device,gb", [
    (dev(name="NVIDIA RTX A6000", nvlinks=4, version=4), 56.25),  # not 100
    (dev(name="NVIDIA A100-SXM4-80GB", nvlinks=12, version=4), 300.0),
    (dev(name="NVIDIA H200", nvlinks=18, version=6), 450.0),
    (dev(name="NVIDIA B200", nvlinks=18, version=7, arch="blackwell"), 900.0),
    (dev(name="NVIDIA RTX A6000", nvlinks=0, version=None), None),
])
def test_device_nvlink_capacity(device, gb):
    got = device_nvlink_capacity_bytes_per_s(device)
    assert (got / 1e9 if got else None) == (pytest.approx(gb) if gb else None)


def test_pair_over_an_a6000_bridge_expects_56_25():
    i = inv([dev(0, name="NVIDIA RTX A6000", nvlinks=4, version=4), dev(1, name="NVIDIA RTX A6000", nvlinks=4, version=4)],
            [PairLink(0, 1, "SYS", nvlinks=4)])
    assert pair_bandwidth_bytes_per_s(i, i.pairs[0]) / 1e9 == pytest.approx(56.25)


@pytest.mark.parametrize("device,tx_gb,saturated,bound", [
    (dev(name="NVIDIA RTX A6000", nvlinks=4, version=4), 50.0, True, True),  # 89 % of 56.25
    (dev(name="NVIDIA RTX A6000", nvlinks=4, version=4), 40.0, False, False),  # 71 %
    (dev(name="NVIDIA A100-SXM4-80GB", nvlinks=4, version=4), 50.0, False, False),  # 50 % of 100
    (dev(name="NVIDIA Sim", nvlinks=4, version=4, field_rate=14.0e9), 50.0, True, True),  # NVML's field
])
def test_nvlink_saturation_and_bound_follow_the_true_capacity(device, tx_gb, saturated, bound):
    frames = one(gpu(util_gpu_pct=90, sm_active_pct=20, nvlink_tx_bytes_per_s=tx_gb * 1e9))
    i = inv([device])
    assert ("nvlink-saturated:gpu0" in {c.id for c in rule_link_saturated(i, frames)}) is saturated
    out = rule_bottleneck(i, frames)
    assert (bool(out) and "NVLink-bound" in out[0].message and out[0].variant == "nvlink") is bound


def _sim_inventory(data):
    src = NvmlSource(SimNvml(scenario_mod.parse(data), clock=VirtualClock(0.0), pcie_block_s=0), simulated=True)
    return src.open()


TWO_BRIDGED = {"phases": [{"duration_s": 5}], "topology": {"default_path": "SYS", "pairs": [{"a": 0, "b": 1, "nvlinks": 4}]}}


@pytest.mark.parametrize("gpus,rate_gb,capacity_gb", [
    ({"count": 2, "name": "NVIDIA RTX A6000", "nvlink_version": 4}, 14.062, 56.248),  # the field answers 14062 MB/s
    ({"count": 2, "name": "NVIDIA H200", "architecture": "hopper"}, None, 100.0),  # NOT_SUPPORTED: the table
    ({"count": 2, "name": "NVIDIA RTX A6000", "nvlink_speed_mbps": 0}, None, 56.25),  # scenario: not supported
    ({"count": 2, "name": "NVIDIA Sim", "nvlink_speed_mbps": 20000}, 20.0, 80.0),  # scenario override
])
def test_simulated_nvml_answers_the_speed_field_for_the_part(gpus, rate_gb, capacity_gb):
    invy = _sim_inventory({**TWO_BRIDGED, "gpus": [gpus]})
    d = invy.devices[0]
    assert (d.nvlink_link_bytes_per_s / 1e9 if d.nvlink_link_bytes_per_s else None) == (
        pytest.approx(rate_gb) if rate_gb else None)
    assert device_nvlink_capacity_bytes_per_s(d) / 1e9 == pytest.approx(capacity_gb, abs=0.01)


def test_scenario_rejects_a_bad_nvlink_speed():
    with pytest.raises(scenario_mod.ScenarioError, match=r"gpus\[0\]\.nvlink_speed_mbps"):
        scenario_mod.parse({**TWO_BRIDGED, "gpus": [{"count": 2, "nvlink_speed_mbps": -5}]})


def test_shipped_mixed_4_bridge_reads_56_not_100():
    d = sim_source("mixed-4").inventory.devices[0]
    assert device_nvlink_capacity_bytes_per_s(d) / 1e9 == pytest.approx(56.25, abs=0.01)


# ------------------------------------------------------------------ 3. idle judgement
@pytest.mark.parametrize("case,reading,expect_id,severity,words", [
    ("×8 of ×16 at idle is never power saving", gpu(pcie_width=8), "pcie-below-max:gpu0", "warning",
     "seating, riser or slot"),
    ("×8 at Gen1 idle: still the width", gpu(pcie_gen=1, pcie_width=8), "pcie-below-max:gpu0", "warning",
     "not power saving"),
    ("×8 under load", gpu(util_gpu_pct=90, pcie_width=8), "pcie-below-max:gpu0", "critical", "narrow link"),
    ("Gen1 ×16 at idle stays info", gpu(pcie_gen=1), "pcie-idle-downshift:gpu0", "info", "power-saving"),
    ("Gen1 ×16 at idle names what it can reach", gpu(pcie_gen=1), "pcie-idle-downshift:gpu0", "info",
     "can reach Gen4×16, 31.5 GB/s"),
])
def test_width_below_max_is_never_power_saving(case, reading, expect_id, severity, words):
    (c,) = rule_pcie_below_max(inv([dev()]), one(reading))
    assert (c.id, c.severity) == (expect_id, severity), case
    assert words in c.message, case
    if reading.pcie_width != 16:
        assert "power-saving" not in c.message and "power saving downshift" not in c.message


# ------------------------------------------------------------------ 4. slow paths: one line without peer traffic
MIXED = inv([dev(0, numa=0), dev(1, numa=0), dev(2, numa=1), dev(3, numa=1)],
            [PairLink(0, 1, "PIX", nvlinks=4), PairLink(2, 3, "PXB", nvlinks=4), PairLink(0, 2, "SYS"),
             PairLink(0, 3, "SYS"), PairLink(1, 2, "SYS"), PairLink(1, 3, "SYS")])
BUSY = dict(util_gpu_pct=97, pcie_rx_bytes_per_s=20e9)


@pytest.mark.parametrize("busy_gpus,expect", [
    ((), [("slow-paths", "info", "4 pairs cross NUMA nodes")]),
    ((0,), [("slow-paths", "info", "4 pairs cross NUMA nodes")]),  # one busy GPU is no peer traffic
    ((0, 2), [("slow-path:gpu0-gpu2", "critical", "both links are carrying heavy traffic now"),
              ("slow-paths", "info", "3 pairs cross NUMA nodes")]),
    ((0, 1, 2, 3), [("slow-path:gpu0-gpu2", "critical", "crawls"), ("slow-path:gpu0-gpu3", "critical", "crawls"),
                    ("slow-path:gpu1-gpu2", "critical", "crawls"), ("slow-path:gpu1-gpu3", "critical", "crawls")]),
])
def test_slow_paths_escalate_per_pair_only_with_peer_traffic(busy_gpus, expect):
    frames = one(*(gpu(i, **(BUSY if i in busy_gpus else {})) for i in range(4)))
    out = sorted(rule_slow_path(MIXED, frames), key=lambda c: c.id)
    assert [(c.id, c.severity) for c in out] == [(i, s) for i, s, _w in expect]
    for c, (_i, _s, words) in zip(out, expect):
        assert words in c.message
    machine = [c for c in out if c.id == "slow-paths"]
    if machine:
        assert "keep tensor-parallel groups inside GPU0-1, GPU2-3" in machine[0].message


@pytest.mark.parametrize("path,words", [
    ("SYS", "GPU0↔GPU1 crosses NUMA nodes"), ("PHB", "GPU0↔GPU1 goes through a host bridge"),
    ("NODE", "GPU0↔GPU1 goes through a host bridge"),
])
def test_one_quiet_slow_pair_is_named(path, words):
    (c,) = rule_slow_path(inv([dev(0, numa=0), dev(1, numa=1)], [PairLink(0, 1, path)]), one(gpu(0), gpu(1)))
    assert (c.id, c.severity) == ("slow-paths", "info") and words in c.message
    assert "no pair here avoids it" in c.message and "31.5 GB/s per direction at the links' best" in c.message


def test_peer_traffic_names_the_rate_now_and_what_the_links_can_reach():
    busy = dict(util_gpu_pct=97, pcie_gen=1, pcie_rx_bytes_per_s=3.9e9)
    (c,) = rule_slow_path(inv([dev(0, numa=0), dev(1, numa=1)], [PairLink(0, 1, "SYS")]),
                          one(gpu(0, **busy), gpu(1, **busy)))
    assert "at most 4.0 GB/s per direction at the links' rate now (they can reach 31.5)" in c.message


@pytest.mark.parametrize("pairs,groups", [
    ([PairLink(0, 1, "PIX", nvlinks=4), PairLink(2, 3, "SYS", nvlinks=4), PairLink(0, 2, "SYS")], ["GPU0-1", "GPU2-3"]),
    ([PairLink(0, 2, "PXB"), PairLink(1, 3, "SYS")], ["GPU0,2"]),
    ([PairLink(0, 1, "SYS"), PairLink(2, 3, "NODE")], []),
    ([PairLink(0, 1, "PIX"), PairLink(1, 2, "PIX"), PairLink(2, 3, "PIX")], ["GPU0-3"]),
])
def test_tp_groups(pairs, groups):
    assert [group_str(g) for g in tp_groups(inv([dev(i) for i in range(4)], pairs))] == groups


def test_mixed_4_scenario_shows_one_line_not_four():
    src = sim_source("mixed-4")
    eng = FindingsEngine(src.inventory)
    for f in run_frames(src, 0, 30):
        eng.update(f)
    assert [(f.id, f.severity) for f in eng.active] == [("slow-paths", "info")]
    assert "keep tensor-parallel groups inside GPU0-1, GPU2-3" in eng.active[0].message


# ------------------------------------------------------------------ 1. change events, durations, episodes
def run_engine(readings_per_t, inventory, hold_s=5.0):
    eng = FindingsEngine(inventory, hold_s=hold_s)
    events = []
    for t, rs in readings_per_t:
        events += eng.update(Frame(t=float(t), gpus=tuple(rs)))
    return eng, events


def test_severity_change_is_an_event_and_keeps_the_condition_start():
    # t 0-9 idle at ×8 (warning), t 10-19 busy at ×8 (critical once the 5 s average says busy), t 20-34 ×16
    seq = [(t, [gpu(pcie_width=8)]) for t in range(10)] + [(t, [gpu(util_gpu_pct=95, pcie_width=8)])
                                                            for t in range(10, 20)]
    seq += [(t, [gpu()]) for t in range(20, 35)]
    eng, events = run_engine(seq, inv([dev()]))
    kinds = [(e.kind, e.t, e.data["severity"]) for e in events]
    assert kinds == [("finding_raised", 5.0, "warning"), ("finding_changed", 11.0, "critical"),  # 5 s average util ≥ 30 %
                     ("finding_cleared", 25.0, "critical")]
    raised, changed, cleared = events
    assert raised.t - raised.data["started_s"] == 0.0  # the condition began at 0, raised at 5
    assert changed.data["old_severity"] == "warning" and changed.data["since_s"] == 0.0
    assert changed.t - changed.data["started_s"] == 0.0
    assert cleared.data["held_s"] == 20.0 and cleared.data["worst"] == "critical"  # 0 → 20, not 5 → 25
    (f,) = finding_durations(events, t_end=34.0)
    assert (f["severity"], f["duration_s"], len(f["episodes"])) == ("critical", 20.0, 1)
    assert f["episodes"][0]["changes"][0]["old_severity"] == "warning"
    assert f["duration_s"] == cleared.data["held_s"]


def test_bottleneck_cause_change_is_an_event_and_resets_since():
    d = dev()
    power = gpu(util_gpu_pct=95, sm_active_pct=70, power_w=300.0, clock_event_reasons=0x4, sm_clock_mhz=1500)
    pcie = gpu(util_gpu_pct=95, sm_active_pct=10, pcie_rx_bytes_per_s=30e9)
    seq = [(t, [power]) for t in range(12)] + [(t, [pcie]) for t in range(12, 30)]
    eng, events = run_engine(seq, inv([d]))
    bn = [e for e in events if e.data["id"] == "bottleneck"]
    assert [(e.kind, e.data.get("old_cause"), e.data.get("cause")) for e in bn] == [
        ("finding_raised", None, None), ("finding_changed", "power", "pcie")]
    assert "power-bound" in bn[0].text and "interconnect-bound" in bn[1].text
    (f,) = [f for f in eng.active if f.id == "bottleneck"]
    assert f.started_at == 0.0 and f.since == bn[1].t  # "since" is the interconnect-bound start
    text, state = finding_line(f, 29.0)
    assert state == "active" and "interconnect-bound" in text


def test_a_finding_raised_on_the_last_frame_lasts_the_hold_not_zero():
    seq = [(t, [gpu(pcie_width=8)]) for t in range(6)]  # raised at t=5, the last frame
    _eng, events = run_engine(seq, inv([dev()]))
    (f,) = finding_durations(events, t_end=5.0)
    assert f["duration_s"] == 5.0 and f["cleared_at"] is None


def test_episodes_add_up():
    seq = ([(t, [gpu(pcie_width=8)]) for t in range(8)] + [(t, [gpu()]) for t in range(8, 20)]
           + [(t, [gpu(pcie_width=8)]) for t in range(20, 30)])
    _eng, events = run_engine(seq, inv([dev()]))
    (f,) = finding_durations(events, t_end=29.0)
    assert [(e["started_at"], e["duration_s"]) for e in f["episodes"]] == [(0.0, 8.0), (20.0, 9.0)]
    assert f["duration_s"] == 17.0


def test_older_recordings_without_offsets_fall_back():
    from gpuscope.core.model import Event
    evs = [Event(t=10.0, kind="finding_raised", text="x", data={"id": "a", "rule": "r", "severity": "warning"}),
           Event(t=30.0, kind="finding_cleared", text="x", data={"id": "a", "severity": "warning", "held_s": 25.0})]
    (f,) = finding_durations(evs, t_end=40.0)
    assert f["episodes"][0]["started_at"] == 5.0 and f["severity"] == "warning"


# ------------------------------------------------------------------ 5. finding_line
def _f(**kw):
    base = dict(id="pcie-saturated:gpu0", rule="link_saturated", severity="warning", subject="GPU0",
                message="GPU0 PCIe TX 57.4 of 63.0 GB/s (91 %): the link is saturated", evidence={},
                started_at=1000.0, raised_at=1005.0, basis="avg", since=1000.0)
    base.update(kw)
    return Finding(**base)


@pytest.mark.parametrize("finding,now,state,has,lacks", [
    (_f(), 1010.0, "active", ["57.4 of 63.0", "5 s average, since ", "(<1m)"], ["ended"]),
    (_f(), 1000.0 + 4 * 60 + 5, "active", ["(4m)"], ["ended"]),
    (_f(basis="live"), 1010.0, "active", ["since "], ["average", "ended"]),
    (_f(basis="static"), 1010.0, "active", ["since "], ["average"]),
    (_f(ended_at=1020.0), 1023.0, "clearing", ["ended 3s ago: GPU0 PCIe TX 57.4"], ["since"]),
    (_f(ended_at=1020.0), 1020.0, "clearing", ["ended 0s ago:"], []),
])
def test_finding_line(finding, now, state, has, lacks):
    text, st = finding_line(finding, now)
    assert st == state
    for w in has:
        assert w in text
    for w in lacks:
        assert w not in text


def test_finding_line_since_is_the_current_wording_not_the_first_raise():
    import time as _time
    f = _f(started_at=1000.0, since=1600.0)
    text, _st = finding_line(f, 1700.0)
    assert f"since {_time.strftime('%H:%M:%S', _time.localtime(1600.0))} (1m)" in text


def test_engine_marks_clearing_until_the_hold_passes():
    seq = [(t, [gpu(pcie_width=8)]) for t in range(8)] + [(t, [gpu()]) for t in range(8, 11)]
    eng, _ev = run_engine(seq, inv([dev()]))
    (f,) = eng.active
    assert f.ended_at == 8.0
    text, state = finding_line(f, 10.0)
    assert state == "clearing" and text.startswith("ended 2s ago:")


# ------------------------------------------------------------------ 6. recordings through summary vs live
def record_and_watch(inventory, frames, path):
    """Feed frames through a Session that records; return what the live engine showed at each frame."""
    s = Session(inventory)
    s.start_recording(Recorder(path, inventory, fsync=False))
    shown = []
    for f in frames:
        s.ingest(f)
        shown.append((f.t, {x.id: (x.severity, x.started_at, x.since) for x in s.findings.active}))
    s.stop_recording()
    return shown


def check_summary_matches_live(shown, doc):
    by_id = {f["id"]: f for f in doc["findings"]}
    worst: dict[str, str] = {}
    order = ["critical", "warning", "info"]
    for t, act in shown:
        for fid, (sev, started, _since) in act.items():
            assert fid in by_id, f"{fid} shown live at {t} but not in the summary"
            eps = [e for e in by_id[fid]["episodes"] if abs(e["started_at"] - started) < 0.01]
            assert eps, f"{fid}: live start {started} not an episode start in the summary"
            ep = eps[0]
            end = ep["ended_at"] if ep["ended_at"] is not None else doc["end"]
            assert ep["raised_at"] <= t + 1e-6 and (ep["cleared_at"] is None or t < ep["cleared_at"])
            assert ep["started_at"] <= t and end >= started
            worst[fid] = min(worst.get(fid, "info"), sev, key=order.index)
    for fid, f in by_id.items():
        assert f["severity"] == worst[fid], f"{fid}: summary {f['severity']}, live worst {worst[fid]}"
        for ep in f["episodes"]:
            if ep["cleared_at"] is not None:
                assert ep["duration_s"] == pytest.approx(ep["ended_at"] - ep["started_at"])


@pytest.mark.parametrize("name,start,end", [("a6000-tp2-pcie-gen1", 0, 60), ("mixed-4", 0, 40),
                                            ("power-capped", 0, 40), ("idle-downshift", 0, 60)])
def test_scenario_summary_agrees_with_the_live_engine(tmp_path, name, start, end):
    src = sim_source(name)
    frames = run_frames(src, start, end)
    shown = record_and_watch(src.inventory, frames, tmp_path / "r.jsonl.gz")
    rec = open_recording(tmp_path / "r.jsonl.gz")
    doc = summarize(rec)
    check_summary_matches_live(shown, doc)
    cleared = [e for e in rec.events if e.kind == "finding_cleared"]
    for e in cleared:  # the cleared event's held_s is the summary's episode duration
        (f,) = [f for f in doc["findings"] if f["id"] == e.data["id"]]
        assert any(ep["cleared_at"] == e.t and ep["duration_s"] == pytest.approx(e.data["held_s"])
                   for ep in f["episodes"])


def test_design_story_summary_says_critical_like_the_live_screen(tmp_path):
    src = sim_source("a6000-tp2-pcie-gen1")
    shown = record_and_watch(src.inventory, run_frames(src, 0, 60), tmp_path / "r.jsonl.gz")
    doc = summarize(open_recording(tmp_path / "r.jsonl.gz"))
    live = shown[-1][1]
    assert live["pcie-below-max:gpu1"][0] == "critical"
    (f,) = [f for f in doc["findings"] if f["id"] == "pcie-below-max:gpu1"]
    assert f["severity"] == "critical"
    # durations count from the condition's start: load began at 8 s, raised 5 s later
    (b,) = [f for f in doc["findings"] if f["id"] == "pcie-below-max:gpu0"]
    assert b["episodes"][0]["raised_at"] - b["started_at"] == pytest.approx(5.0)


def _demo_frames():
    rec = open_recording(DEMO)
    drop = ("finding_raised", "finding_changed", "finding_cleared")
    return rec.inventory, [replace(f, events=tuple(e for e in f.events if e.kind not in drop)) for f in rec.frames()]


def test_demo_recording_through_summary_agrees_with_the_live_engine(tmp_path):
    inventory, frames = _demo_frames()
    shown = record_and_watch(inventory, frames, tmp_path / "demo.jsonl.gz")
    rec = open_recording(tmp_path / "demo.jsonl.gz")
    doc = summarize(rec)
    check_summary_matches_live(shown, doc)
    changes = [e for e in rec.events if e.kind == "finding_changed" and e.data["id"] == "bottleneck"]
    causes = [(e.data["old_cause"], e.data["cause"]) for e in changes]
    assert ("pcie", "nvlink") in causes and causes[0][0] == "power"  # power → … → interconnect → NVLink


# ------------------------------------------------------------------ 1. "since" survives a replay seek
def test_seek_keeps_since_from_the_events(tmp_path):
    from gpuscope.tui.feeders import ReplayFeeder

    src = sim_source("a6000-tp2-pcie-gen1")
    frames = run_frames(src, 0, 60)
    shown = dict(record_and_watch(src.inventory, frames, tmp_path / "r.jsonl.gz"))
    rec = open_recording(tmp_path / "r.jsonl.gz")
    session = Session(rec.inventory)
    feeder = ReplayFeeder(rec, session, on_update=lambda: None, window_s=lambda: 10.0)
    t = frames[50].t
    feeder.seek(t)
    live = shown[t]
    rebuilt = {f.id: (f.severity, f.started_at, f.since) for f in session.findings.active}
    assert set(rebuilt) == set(live)
    for fid, (sev, started, since) in live.items():
        assert rebuilt[fid][0] == sev
        assert rebuilt[fid][1] == pytest.approx(started, abs=0.01), fid  # not the window's start (t - 10)
        assert rebuilt[fid][2] == pytest.approx(since, abs=0.01), fid
    assert min(started for _s, started, _x in live.values()) < t - 10  # the case the window alone can't know



def test_a_summary_quotes_a_finding_as_raised_not_as_it_faded():
    from gpuscope.core.model import Event
    d = {"id": "clocks:gpu1", "rule": "clock_events", "severity": "warning", "started_s": 5.0}
    evs = [Event(t=10.0, kind="finding_raised", text="GPU1 power capped: 691 of 700 W (−465 MHz)", data=d),
           Event(t=30.0, kind="finding_cleared", text="GPU1 power capped: 458 of 700 W (−0 MHz)",
                 data={**d, "ended_s": 5.0, "held_s": 20.0})]
    (f,) = finding_durations(evs, t_end=40.0)
    assert f["message"] == "GPU1 power capped: 691 of 700 W (−465 MHz)"


class _ListSink:
    """A recorder that keeps frames in memory (the FrameSink protocol)."""

    def __init__(self):
        self.error, self.dropped, self.got = None, 0, []

    @property
    def frames(self):
        return len(self.got)

    def write(self, frame):
        self.got.append(frame)

    def close(self, wait=True):
        pass


def test_a_recording_started_mid_session_knows_the_findings_already_raised():
    """`r` in the TUI 30 s into the design story: the file's first frame carries every raised finding
    with its true start, so summary lists them (it said "findings: none")."""
    from helpers import run_frames, sim_source

    from gpuscope.core.session import Session

    src = sim_source("a6000-tp2-pcie-gen1")
    frames = run_frames(src, 0, 40)
    session = Session(src.inventory)
    for f in frames[:30]:
        session.ingest(f)
    before = {f.id: f.started_at for f in session.findings.active}
    assert len(before) >= 3
    sink = _ListSink()
    session.start_recording(sink)
    for f in frames[30:]:
        session.ingest(f)
    first = sink.got[0]
    raised = {e.data["id"]: e for e in first.events if e.kind == "finding_raised"}
    assert set(raised) == set(before)
    assert all(e.t - e.data["started_s"] == pytest.approx(before[fid]) for fid, e in raised.items())
    later = [e for f in sink.got[1:] for e in f.events if e.kind == "finding_raised" and e.data["id"] in before]
    assert not later, "announced once, not again"
    found = {f["id"]: f for f in finding_durations([e for f in sink.got for e in f.events], t_end=sink.got[-1].t)}
    assert set(before) <= set(found)
