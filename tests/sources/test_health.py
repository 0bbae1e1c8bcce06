"""GPU health: memory info v2, Xid errors, ECC and row remapping — the pure rules (tables), the
simulated NVML against nvidia-ml-py's real signatures, the NVML source over both driver shapes, the
scenarios through recording and summary, the exporter, and hostile health fields in recordings."""

from __future__ import annotations

import dataclasses
import inspect
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pynvml
import pytest
from helpers import ROOT, run_frames, sim_source, wait_for

from gpuscope.cli.report import render_summary
from gpuscope.core import health
from gpuscope.core.codec import frame_from_dict, frame_to_dict, inventory_from_dict, inventory_to_dict
from gpuscope.core.findings import FindingsEngine, evaluate
from gpuscope.core.model import DeviceInfo, Frame, GpuReading, Inventory, XidCount
from gpuscope.core.session import Session
from gpuscope.core.stats import summarize
from gpuscope.core.validate import Tally
from gpuscope.outputs.prometheus import Renderer
from gpuscope.outputs.recorder import Recorder
from gpuscope.sources.live import open_source
from gpuscope.sources.recording import open_recording
from gpuscope.sources.scenario import load
from gpuscope.sources.simnvml import SimNvml

MIB = 2**20


def inv(n: int = 2) -> Inventory:
    return Inventory(host="h", devices=tuple(DeviceInfo(index=i, name="NVIDIA H100", uuid=f"u{i}", bus_id=f"b{i}")
                                            for i in range(n)))


def frame(t: float, *gpus: GpuReading) -> Frame:
    return Frame(t=t, gpus=gpus)


# ------------------------------------------------------------------ the Xid catalogue and the rules (pure)
@pytest.mark.parametrize("xid, severity, words", [
    (79, "critical", "fell off the bus — check power and seating; the node needs a reset"),
    (94, "warning", "contained ECC error"),
    (95, "critical", "uncontained ECC error"),
    (48, "critical", "double-bit ECC error"),
    (63, "warning", "reset the GPU when it is idle"),
    (64, "critical", "the GPU should be replaced"),
    (13, "warning", "graphics engine exception"),
    (31, "warning", "page fault"),
    (43, "warning", "stopped processing"),
    (45, "info", "preemptive cleanup"),
    (61, "warning", "micro-controller"),
    (62, "critical", "micro-controller halted"),
    (68, "warning", "NVDEC"),
    (74, "critical", "NVLink error"),
    (92, "warning", "single-bit ECC error rate"),
    (119, "critical", "GSP timeout"),
    (145, "critical", "NVLink 5 error in the RLW unit"),
    (149, "critical", "the Xid 154 beside it"),
    (120, "critical", "GSP error"),
    (999, "warning", "not in gpuscope's table"),
])
def test_xid_finding_names_the_fault_and_what_to_do(xid, severity, words):
    r = GpuReading(index=1, xids=(XidCount(xid=xid, count=1, last_t=100.0),))
    (c,) = health.rule_xid(inv(), [frame(101.0, GpuReading(index=0), r)])
    assert (c.id, c.rule, c.severity, c.subject) == (f"xid:gpu1:{xid}", "xid", severity, "GPU1")
    assert c.message.startswith(f"GPU1 Xid {xid}: ") and words in c.message + health.xid_info(xid).action


def test_every_listed_xid_is_in_the_catalogue():
    assert set(health.XID_CATALOGUE) >= {13, 31, 43, 45, 48, 61, 62, 63, 64, 68, 74, 79, 92, 94, 95, 119, 120}
    assert all(x.severity in ("critical", "warning", "info") for x in health.XID_CATALOGUE.values())


def test_the_link_xids_are_the_nvlink_family_and_the_bus():
    """What the link verdict reads (core/link_verdict.py): Xid 74 and 144-150 speak of NVLink, 79 of the bus."""
    assert health.LINK_XIDS == {74: "nvlink", 79: "pcie", **dict.fromkeys(range(144, 151), "nvlink")}
    assert health.xid_info(145).severity == "critical" and "subcode" in health.xid_info(145).action


def test_a_repeating_xid_is_one_finding_with_its_count():
    tally: dict[int, XidCount] = {}
    for t in (10.0, 11.0, 12.5):
        health.tally_xid(tally, 13, t)
    health.tally_xid(tally, 31, 11.0)
    assert tally[13] == XidCount(xid=13, count=3, last_t=12.5)
    r = GpuReading(index=0, xids=tuple(tally.values()))
    cands = health.rule_xid(inv(1), [frame(13.0, r)])
    assert sorted(c.id for c in cands) == ["xid:gpu0:13", "xid:gpu0:31"]
    assert "(3×, last at " in next(c.message for c in cands if c.id == "xid:gpu0:13")


@pytest.mark.parametrize("before, after, raised", [
    (0, 0, False), (0, 2, True), (3, 3, False), (None, 2, False), (2, None, False), (5, 4, False),
])
def test_uncorrectable_ecc_rising(before, after, raised):
    f0 = frame(0.0, GpuReading(index=0, ecc_uncorrected_volatile=before))
    f1 = frame(10.0, GpuReading(index=0, ecc_uncorrected_volatile=after, ecc_uncorrected_aggregate=7))
    got = health.rule_ecc_uncorrectable(inv(1), [f0, f1])
    assert bool(got) == raised
    if raised:
        assert got[0].severity == "critical" and "+2 in 10 s" in got[0].message and "7 over the GPU's life" in got[0].message


def test_uncorrectable_ecc_falls_back_to_the_aggregate_count():
    f0 = frame(0.0, GpuReading(index=0, ecc_uncorrected_aggregate=1))
    f1 = frame(5.0, GpuReading(index=0, ecc_uncorrected_aggregate=2))
    assert [c.id for c in health.rule_ecc_uncorrectable(inv(1), [f0, f1])] == ["ecc-uncorrectable:gpu0"]


@pytest.mark.parametrize("pending, failure, want", [
    (None, None, []), (False, False, []),
    (True, False, [("row-remap-pending:gpu0", "warning", "reset the GPU when it is idle to apply")]),
    (True, True, [("row-remap-failure:gpu0", "critical", "the GPU should be replaced")]),
    (False, True, [("row-remap-failure:gpu0", "critical", "the GPU should be replaced")]),
])
def test_row_remap(pending, failure, want):
    r = GpuReading(index=0, remap_pending=pending, remap_failure=failure, remapped_rows_uncorrectable=1)
    got = [(c.id, c.severity, c.message) for c in health.rule_row_remap(inv(1), [frame(0.0, r)])]
    assert [(i, s) for i, s, _ in got] == [(i, s) for i, s, _ in want]
    for (_i, _s, msg), (_wi, _ws, words) in zip(got, want):
        assert words in msg and "1 for uncorrectable errors remapped" in msg


def test_health_rules_run_in_the_findings_engine():
    r = GpuReading(index=0, remap_pending=True, xids=(XidCount(xid=79, last_t=1.0),))
    assert {c.rule for c in evaluate(inv(1), [frame(1.0, r)])} >= {"xid", "row_remap"}
    eng = FindingsEngine(inv(1), hold_s=5.0)
    events = [e for t in range(8) for e in eng.update(frame(float(t), r))]
    raised = [e.data["id"] for e in events if e.kind == "finding_raised"]
    assert sorted(raised) == ["row-remap-pending:gpu0", "xid:gpu0:79"]  # once each: no flood


# ------------------------------------------------------------------ the simulated NVML follows nvidia-ml-py
@pytest.mark.parametrize("name", ["nvmlDeviceGetMemoryInfo", "nvmlDeviceGetTotalEccErrors", "nvmlDeviceGetEccMode",
                                  "nvmlDeviceGetRemappedRows", "nvmlEventSetCreate", "nvmlDeviceRegisterEvents",
                                  "nvmlEventSetWait_v2", "nvmlEventSetFree", "nvmlDeviceGetIndex"])
def test_simulated_calls_have_nvidia_ml_pys_signatures(name):
    real = list(inspect.signature(getattr(pynvml, name)).parameters)
    sim = list(inspect.signature(getattr(SimNvml, name)).parameters)[1:]  # less self
    assert sim == real, name


def test_simulated_structs_have_nvidia_ml_pys_field_names():
    fake = SimNvml(load("h100-xid-errors"), clock=lambda: 0.0)
    fake.nvmlInit()
    h = fake.nvmlDeviceGetHandleByIndex(0)
    v2 = fake.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2)
    assert set(vars(v2)) == {n for n, _ in pynvml.c_nvmlMemory_v2_t._fields_}
    assert set(vars(fake.nvmlDeviceGetMemoryInfo(h))) == {n for n, _ in pynvml.c_nvmlMemory_t._fields_}
    assert v2.used + v2.reserved + v2.free == v2.total
    v1 = fake.nvmlDeviceGetMemoryInfo(h)
    # v1's used includes the driver's reserved memory (docs/real-gpus.md, *Measured NVML facts*)
    assert v1.used == v2.used + v2.reserved
    assert len(fake.nvmlDeviceGetRemappedRows(h)) == 4
    es = fake.nvmlEventSetCreate()
    fake.nvmlDeviceRegisterEvents(h, pynvml.nvmlEventTypeXidCriticalError, es)
    with pytest.raises(pynvml.NVMLError_Timeout):
        fake.nvmlEventSetWait_v2(es, 0)


def _scenario_file(tmp_path: Path, **gpu: object) -> str:
    extra = "".join(f"{k} = {json.dumps(v)}\n" for k, v in gpu.items())
    p = tmp_path / "s.toml"
    p.write_text(f'name = "t"\n[[gpus]]\ncount = 2\nname = "NVIDIA H100"\nmemory_gib = 80\nmemory_reserved_mib = 615\n'
                 f'{extra}[[phases]]\nduration_s = 10\nmem_used_gib = 1\n')
    return str(p)


def test_memory_v2_used_excludes_reserved(tmp_path):
    src = open_source(_scenario_file(tmp_path), virtual_at=0.0, pcie_block_s=0.0)
    try:
        assert [d.memory_info_version for d in src.inventory.devices] == [2, 2]
        g = src.sample().gpus[0]
        assert (g.mem_used_bytes, g.mem_reserved_bytes) == (1 * 2**30, 615 * MIB)
    finally:
        src.close()


def test_memory_v1_fallback_where_the_driver_lacks_v2(tmp_path):
    src = open_source(_scenario_file(tmp_path, memory_info_v2=False), virtual_at=0.0, pcie_block_s=0.0)
    try:
        assert [d.memory_info_version for d in src.inventory.devices] == [1, 1]
        g = src.sample().gpus[0]
        assert (g.mem_used_bytes, g.mem_reserved_bytes) == (2**30 + 615 * MIB, None)
        with pytest.raises(pynvml.NVMLError_FunctionNotFound):  # as nvidia-ml-py on a driver without _v2
            src.nvml.nvmlDeviceGetMemoryInfo(src._handles[0], version=pynvml.nvmlMemory_v2)
    finally:
        src.close()


def test_ecc_off_and_no_row_remapper_read_as_unknown(tmp_path):
    src = open_source(_scenario_file(tmp_path, ecc=False, row_remapping=False, xid_events=False), virtual_at=0.0,
                      pcie_block_s=0.0)
    try:
        f = src.sample()
        g = f.gpus[0]
        assert all(getattr(g, k) is None for k in ("ecc_corrected_volatile", "ecc_uncorrected_aggregate",
                                                   "remapped_rows_correctable", "remap_pending", "remap_failure"))
        notes = [e.text for e in f.events if e.kind == "note"]
        assert len(notes) == 1 and "Xid errors are not watched" in notes[0]  # said once
        src.nvml.clock.now = 6.0
        assert not [e for e in src.sample().events if e.kind == "note"]
    finally:
        src.close()


def test_ecc_and_row_remap_read_on_the_slow_path():
    src = sim_source("h100-row-remap-pending")
    try:
        g = src.sample().gpus[2]
        assert (g.ecc_uncorrected_volatile, g.ecc_corrected_volatile, g.remapped_rows_uncorrectable) == (2, 5, 2)
        assert g.remap_pending is True and g.remap_failure is False
        assert src.sample().gpus[2].remap_pending is True  # carried between slow reads
        assert src.sample().gpus[0].ecc_uncorrected_volatile == 0
    finally:
        src.close()


def test_xid_events_reach_frames_readings_and_a_lost_gpu():
    src = sim_source("h100-xid-errors")
    try:
        run_frames(src, 0.0, 1.0)
        src.nvml.clock.now = 2.5  # Xid 79 on GPU3, which is lost from 2 s on (virtual clock: taken in sample())
        f = src.sample()
        (ev,) = [e for e in f.events if e.kind == "xid"]
        assert ev.text == "GPU3 Xid 79: fell off the bus" and ev.data == {"gpu": 3, "xid": 79}
        assert f.gpus[3].lost and f.gpus[3].xids == (XidCount(xid=79, count=1, last_t=ev.t),)
        assert all(g.xids is None for g in f.gpus if g.index != 3)
        src.nvml.clock.now = 3.0
        assert not [e for e in src.sample().events if e.kind == "xid"]  # one event per Xid
    finally:
        src.close()
    assert src._xid_thread is None and src._event_set is None


def test_live_xids_are_polled_in_the_tick_without_a_thread():
    """By default (live too) no thread waits: each tick takes the queued events with zero-timeout waits (a wait
    thread cost 0.29 ms of CPU a second on H200, a third of a tick; a zero wait costs 0.003 ms)."""
    from gpuscope.sources.nvml import NvmlSource

    src = NvmlSource(SimNvml(load("h100-xid-errors"), clock=lambda: 10.0, pcie_block_s=0.0), simulated=True)
    src.open()
    try:
        assert src._xid_thread is None and src._event_set is not None
        assert not [t for t in threading.enumerate() if t.name == "gpuscope-xid"]
        f = src.sample()
        assert [(e.data["gpu"], e.data["xid"]) for e in f.events if e.kind == "xid"] == [(5, 94)]
        assert not [e for e in src.sample().events if e.kind == "xid"]  # taken once
    finally:
        src.close()
    assert src._event_set is None


def test_xid_thread_queues_events_without_blocking_sampling():
    """With ``xid_thread`` (a real-time clock), the Xids come from the gpuscope-xid thread's waits; close() stops
    it at once."""
    from gpuscope.sources.nvml import NvmlSource

    src = NvmlSource(SimNvml(load("h100-xid-errors"), clock=lambda: 10.0, pcie_block_s=0.0), simulated=True,
                     xid_thread=True)
    src.open()
    try:
        assert src._xid_thread is not None and src._xid_thread.name == "gpuscope-xid"
        wait_for(lambda: src._xid_queue, what="the Xid thread to queue Xid 94")
        f = src.sample()
        # GPU3 was lost before the source started (2 s < 10 s): it could not be registered, and says so once
        assert [(e.data["gpu"], e.data["xid"]) for e in f.events if e.kind == "xid"] == [(5, 94)]
        assert [e.text for e in f.events if e.kind == "note"] == [
            "Xid errors are not watched on GPU3 (GPU is lost)"]
        assert f.gpus[3].lost and f.gpus[3].xids is None and [x.xid for x in f.gpus[5].xids] == [94]
    finally:
        t0 = time.monotonic()
        src.close()
    assert time.monotonic() - t0 < 0.4 and src._xid_thread is None


def test_scenarios_recorded_and_summarised_name_the_fault(tmp_path):
    for name, words in (("h100-xid-errors", ["Xid 79: fell off the bus — check power and seating; the node needs "
                                             "a reset", "Xid 94: contained ECC error",
                                             "uncorrectable ECC errors rising", "row remap pending"]),
                        ("h100-row-remap-pending", ["row remap pending: reset the GPU when it is idle to apply",
                                                    "Xid 63", "remapped rows: 2 for correctable errors"])):
        src = sim_source(name)
        path = tmp_path / f"{name}.jsonl.gz"
        session = Session(src.inventory)
        session.start_recording(Recorder(path, src.inventory, fsync=False))
        try:
            for k in range(25):  # 12 s of virtual time, sampled every 0.5 s
                src.nvml.clock.now = k * 0.5
                session.ingest(src.sample())
        finally:
            session.stop_recording()
            src.close()
        text = render_summary(summarize(open_recording(path)))
        assert "SIMULATED" in text
        for w in words:
            assert w in text, (name, w, text)


@pytest.mark.slow  # a 5 s recording / the tool in a subprocess
def test_cli_record_and_summary_of_the_xid_scenario(tmp_path):
    out = tmp_path / "x.jsonl.gz"
    gs = [sys.executable, "-m", "gpuscope.cli.main"]
    rec = subprocess.run([*gs, "record", "-o", str(out), "--simulate", "h100-xid-errors", "--interval", "0.5",
                          "--duration", "5"], capture_output=True, text=True, timeout=60)
    assert rec.returncode == 0, rec.stderr
    text = subprocess.run([*gs, "summary", str(out)], capture_output=True, text=True, timeout=60).stdout
    assert "GPU3 NVIDIA H100 80GB HBM3  LOST" in text and "Xid 79: fell off the bus" in text, text
    assert "Xid 94: contained ECC error" in text, text


# ------------------------------------------------------------------ exporter, codec, old recordings
def test_exporter_health_series():
    from prometheus_client.parser import text_string_to_metric_families

    g = GpuReading(index=0, mem_used_bytes=1169 * MIB, mem_total_bytes=143771 * MIB, mem_reserved_bytes=615 * MIB,
                   ecc_uncorrected_volatile=1, remapped_rows_uncorrectable=2, remapped_rows_correctable=0,
                   remap_pending=True, remap_failure=False,
                   xids=(XidCount(xid=94, count=1, last_t=20.0), XidCount(xid=13, count=2, last_t=10.0)))
    text = Renderer(inv(1)).render(frame(30.0, g))
    got = {f.name: f.samples[0].value for f in text_string_to_metric_families(text) if f.samples}
    assert got["DCGM_FI_DEV_FB_USED"] == 1169 and got["DCGM_FI_DEV_FB_RESERVED"] == 615
    assert got["DCGM_FI_DEV_FB_FREE"] == 143771 - 1169 - 615
    assert got["DCGM_FI_DEV_XID_ERRORS"] == 94  # the last one
    assert got["gpuscope_xid_errors"] == 3  # the parser drops _total
    assert got["DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"] == 2 and got["DCGM_FI_DEV_ROW_REMAP_FAILURE"] == 0
    assert got["gpuscope_row_remap_pending"] == 1
    assert "# HELP DCGM_FI_DEV_ROW_REMAP_FAILURE Whether remapping of rows has failed" in text


def test_health_fields_round_trip_and_old_recordings_read():
    g = GpuReading(index=0, mem_reserved_bytes=5, ecc_corrected_aggregate=3, remap_pending=False,
                   xids=(XidCount(xid=79, count=2, last_t=1.7e9),))
    assert frame_from_dict(frame_to_dict(frame(1.7e9, g))).gpus[0] == g
    d = dataclasses.replace(inv(1).devices[0], memory_info_version=1)
    assert inventory_from_dict(inventory_to_dict(dataclasses.replace(inv(1), devices=(d,)))).devices[0] == d
    old = inventory_from_dict({"host": "h", "devices": [{"index": 0, "name": "G", "uuid": "u", "bus_id": "b"}]})
    assert old.devices[0].memory_info_version is None
    assert frame_from_dict({"t": 1.0, "gpus": [{"index": 0}]}).gpus[0].xids is None


@pytest.mark.parametrize("bad", [{"xid": -1}, {"xid": 79, "count": 0}, {"xid": 79, "last_t": float("nan")},
                                 {"xid": 2**40}])
def test_out_of_range_xids_are_dropped_and_counted(bad):
    tally = Tally()
    f = frame_from_dict({"t": 1.0, "gpus": [{"index": 0, "xids": [bad, {"xid": 13}], "mem_reserved_bytes": -1,
                                             "ecc_uncorrected_volatile": 2**70}]}, tally=tally)
    g = f.gpus[0]
    assert [x.xid for x in g.xids] == [13] and g.mem_reserved_bytes is None and g.ecc_uncorrected_volatile is None
    assert tally.readings == 3


def test_detail_view_says_memory_info_v1(tmp_path):
    from gpuscope.tui.app import GpuscopeApp
    from gpuscope.tui.screens import detail_lines

    for v2, said in ((False, True), (True, False)):
        src = open_source(_scenario_file(tmp_path, memory_info_v2=v2), virtual_at=0.0, pcie_block_s=0.0)
        try:
            session = Session(src.inventory)
            for f in run_frames(src, 0.0, 3.0):
                session.ingest(f)
            view = GpuscopeApp(session, None, label="SIMULATED", interval_s=1.0).build_view(True)
            text = "\n".join(line.plain for line in detail_lines(view, 0, 100, 40))
            assert ("memory info v1 (used includes driver-reserved)" in text) == said, text
        finally:
            src.close()


@pytest.mark.slow  # a 5 s recording / the tool in a subprocess
def test_device_health_check_dry_run():
    """tools/device_health_check.py over the simulated NVML (the lead runs it on a real H200): it reports every
    part and imports this checkout without an install."""
    tool = ROOT / "tools" / "device_health_check.py"
    p = subprocess.run([sys.executable, str(tool), "--simulate", "h100-row-remap-pending", "--reps", "5"],
                       capture_output=True, text=True, timeout=120, cwd="/")
    assert p.returncode == 0, p.stderr
    for words in ("SIMULATED NVML", "gpuscope from this checkout", "(a) memory, idle", "nvmlDeviceGetRemappedRows",
                  "nvmlEventSetWait_v2 (timeout 0)", "(c) gpuscope's reading", "Xid events: polled each tick",
                  "nothing was changed on any GPU"):
        assert words in p.stdout, (words, p.stdout)


# ------------------------------------------------------------------ MIG (simulated only)
def test_mig_mode_read_from_the_simulated_nvml_and_said_by_topo():
    src = sim_source("h100-mig")
    try:
        assert [d.mig_instances for d in src.inventory.devices] == [3, None]
        g = src.sample().gpus
        assert g[0].util_gpu_pct is None and g[1].util_gpu_pct is not None  # N/A in MIG mode, as nvidia-smi
        assert [p.gpu_instance for p in g[0].processes] == [1, 2, 3]  # each process names its MIG instance
        assert [p.gpu_instance for p in g[1].processes] == [None]
    finally:
        src.close()
    gs = [sys.executable, "-m", "gpuscope.cli.main", "topo", "--simulate", "h100-mig"]
    text = subprocess.run(gs, capture_output=True, text=True, timeout=60).stdout
    assert "GPU0 MIG: 3 instances" in text and "GPU1 MIG" not in text, text
    doc = json.loads(subprocess.run([*gs, "--json"], capture_output=True, text=True, timeout=60).stdout)
    assert [g["mig_instances"] for g in doc["gpus"]] == [3, None]


@pytest.mark.parametrize("n, words", [(3, "MIG: 3 instances"), (1, "MIG: 1 instance"), (0, "MIG: no instances")])
def test_mig_words(n, words):
    assert health.mig_text(dataclasses.replace(inv(1).devices[0], mig_instances=n)) == words
    assert health.mig_text(inv(1).devices[0]) is None


async def test_mig_in_header_panel_and_topology():
    from gpuscope.tui.app import GpuscopeApp

    src = sim_source("h100-mig")
    try:
        session = Session(src.inventory)
        for f in run_frames(src, 0.0, 3.0):
            session.ingest(f)
        app = GpuscopeApp(session, None, label="SIMULATED", interval_s=1.0)
        async with app.run_test(size=(160, 50)) as pilot:
            def text() -> str:
                update = app.screen._compositor.render_full_update()
                return "\n".join("".join(seg.text for seg in strip) for strip in update.strips)

            deadline = 100
            while "MIG: 3 instances" not in text() and deadline:
                await pilot.pause(0.05)
                deadline -= 1
            screen = text()
            head = screen.split("\n")[0]
            assert "GPU0 MIG: 3 instances" in head, head  # the header
            assert screen.count("MIG: 3 instances") >= 3, screen  # header, GPU0's panel, the topology panel
            await pilot.press("P")  # the processes panel names each process's instance
            deadline = 100
            while "[MIG 2] python3 -m vllm" not in text() and deadline:
                await pilot.pause(0.05)
                deadline -= 1
            assert "[MIG 2] python3 -m vllm" in text(), text()
    finally:
        src.close()


def test_a_lost_gpu_keeps_its_xid_series_only():
    lost = GpuReading(index=1, lost=True, xids=(XidCount(xid=79, count=1, last_t=5.0),))
    text = Renderer(inv(2)).render(frame(6.0, GpuReading(index=0, power_w=100.0), lost))
    gpu1 = [ln for ln in text.splitlines() if not ln.startswith("#") and 'gpu="1"' in ln]
    assert sorted(ln.split("{")[0] for ln in gpu1 if "DCGM_FI" in ln) == ["DCGM_FI_DEV_XID_ERRORS"], gpu1
    assert any(ln.startswith("gpuscope_xid_errors_total{") and ln.endswith(" 1") for ln in gpu1), gpu1


def test_out_of_range_mig_fields_are_unknown():
    tally = Tally()
    d = inventory_from_dict({"host": "h", "devices": [{"index": 0, "name": "G", "uuid": "u", "bus_id": "b",
                                                       "mig_instances": 99, "memory_info_version": 3}]}, tally)
    assert (d.devices[0].mig_instances, d.devices[0].memory_info_version) == (None, None) and tally.readings == 2
    f = frame_from_dict({"t": 1.0, "gpus": [{"index": 0, "processes": [{"pid": 5, "gpu_instance": -1},
                                                                       {"pid": 6, "gpu_instance": 2}]}]})
    assert [p.gpu_instance for p in f.gpus[0].processes] == [None, 2]
