"""The one vocabulary (core/vocab.py, core/units.py) and the one metric catalogue (core/catalogue.py).

The words are tables of cases; then the same readings are put before every front end (GPU panel,
compact table, topology panel, ``topo``, ``summary``) and must be called the same everywhere.
"""

from __future__ import annotations

import dataclasses
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from helpers import run_frames, sim_source

from gpuscope.cli.report import render_summary
from gpuscope.cli.topo import LEVEL_COLOR, label_color, render_text, topo_json
from gpuscope.core import catalogue
from gpuscope.core.catalogue import Metric, Series
from gpuscope.core.history import History
from gpuscope.core.model import CLOCK_EVENT_REASONS, GpuReading, decode_clock_events
from gpuscope.core.session import Session
from gpuscope.core.stats import export_rows, summarize
from gpuscope.core.units import duration, human_bytes
from gpuscope.core.vocab import (
    CLOCK_EVENTS,
    LEVELS,
    LINK_LEVEL,
    LINK_STATES,
    SERVER_KINDS,
    SEV_LEVEL,
    SEV_MARK,
    SEVERITIES,
    is_busy,
    link_label,
    link_state,
    path_level,
    reading_busy,
)
from gpuscope.sources.endpoint import KINDS
from gpuscope.sources.scenario import CLOCK_EVENT_NAMES
from gpuscope.widgets.style import LEVEL_STYLE, SEV_STYLE, path_style


# ------------------------------------------------------------------ words, as tables of cases
@pytest.mark.parametrize("gen,width,short,text", [
    (1, 16, False, "Gen1×16"), (4, 8, False, "Gen4×8"), (5, 16, True, "G5×16"),
    (None, 16, False, "Gen?×16"), (3, None, False, "Gen3×?"), (None, None, True, "G?×?"),
])
def test_link_label(gen, width, short, text):
    assert link_label(gen, width, short=short) == text


@pytest.mark.parametrize("gen,width,best_gen,best_width,busy,state", [
    (4, 16, 4, 16, True, "at_max"),
    (4, 16, 4, 16, False, "at_max"),
    (1, 16, 4, 16, True, "below_max_busy"),
    (1, 16, 4, 16, False, "below_max_idle"),
    (4, 8, 4, 16, False, "narrow"),  # a narrow link is a fault at any load, never power saving
    (4, 8, 4, 16, True, "narrow"),
    (1, 8, 4, 16, False, "narrow"),
    (3, 16, 3, 16, True, "at_max"),  # the slot's best is Gen3: at its max
    (None, None, 4, 16, True, "at_max"),  # unknown is never "below"
    (1, 16, None, None, True, "at_max"),  # unknown best: nothing to be below
])
def test_link_state(gen, width, best_gen, best_width, busy, state):
    assert link_state(gen, width, best_gen, best_width, busy) == state
    assert state in LINK_STATES and LINK_LEVEL[state] in LEVELS


@pytest.mark.parametrize("util,link,cap,busy", [
    (30.0, None, None, True),  # computing
    (29.9, None, None, False),
    (None, 0.4e9, 4e9, True),  # 10 % of the link
    (None, 0.39e9, 4e9, False),
    (5.0, 2e9, 4e9, True),  # low utilization but the link is busy: the case the compact table got wrong
    (5.0, 2e9, None, False),  # link capacity unknown
    (None, None, None, False),
])
def test_busy(util, link, cap, busy):
    assert is_busy(util, link, cap) is busy
    r = GpuReading(index=0, util_gpu_pct=util, pcie_rx_bytes_per_s=link, pcie_tx_bytes_per_s=(link or 0) / 2)
    assert reading_busy(r, cap) is busy  # the busier direction counts


@pytest.mark.parametrize("label,level,tui,ansi", [
    ("NV12", "ok", "bold green", "green"), ("SYS", "bad", "bold red", "red"), ("PHB", "warn", "yellow", "amber"),
    ("NODE", "warn", "yellow", "amber"), ("PIX", "plain", "", None), ("PXB", "plain", "", None),
    ("X", "dim", "bright_black", "dim"),
])
def test_path_levels_and_both_front_ends_colours(label, level, tui, ansi):
    assert path_level(label) == level
    assert path_style(label) == tui
    assert label_color(label) == ansi


def test_every_level_and_severity_has_a_colour_in_every_front_end():
    assert set(LEVEL_STYLE) == set(LEVELS) == set(LEVEL_COLOR)
    assert set(SEV_MARK) == set(SEV_LEVEL) == set(SEV_STYLE) == set(SEVERITIES)
    assert SEV_STYLE == {"critical": "bold red", "warning": "yellow", "info": "bright_black"}


def test_clock_events_are_one_list():
    bits = [e.bit for e in CLOCK_EVENTS]
    assert len(set(bits)) == len(bits) and all(b & (b - 1) == 0 for b in bits)  # distinct single bits
    assert tuple(CLOCK_EVENT_REASONS.values()) == CLOCK_EVENT_NAMES  # model and scenarios share vocab's names
    assert decode_clock_events(0x4 | 0x40) == ("sw_power_cap", "hw_thermal")
    assert all(e.level in LEVELS and (e.severity is None or e.severity in SEVERITIES) for e in CLOCK_EVENTS)


def test_server_kinds_are_one_list():
    assert KINDS is SERVER_KINDS


@pytest.mark.parametrize("s,short,text", [
    (0, False, "0s"), (-3, False, "0s"), (12.9, False, "13s"), (12.4, False, "12s"), (59.6, False, "1m00s"), (3.998, False, "4s"), (65, False, "1m05s"), (3600, False, "1h00m00s"),
    (3723, False, "1h02m03s"), (3723, True, "1h02m"), (65, True, "1m05s"),
])
def test_duration(s, short, text):
    assert duration(s, short=short) == text


@pytest.mark.parametrize("n,text", [(0, "0 B"), (999, "999 B"), (1500, "1.5 KB"), (3.2e6, "3.2 MB"),
                                    (12e9, "12.0 GB"), (5e12, "5000.0 GB")])
def test_human_bytes(n, text):
    assert human_bytes(n) == text


# ------------------------------------------------------------------ every front end calls a reading the same
def _style_at(text, needle: str) -> str:
    """The style of the span that starts ``needle`` in a rich Text (raises if absent)."""
    at = text.plain.index(needle)
    styles = [str(s.style) for s in text.spans if s.start <= at < s.end]
    return " ".join(styles)


class _Recording:
    """What summarize() reads, over frames held in memory (no file)."""

    def __init__(self, inv, frames):
        self.inventory, self._frames, self.path = inv, frames, Path("mem")
        self.times = np.array([f.t for f in frames])
        self.n_frames, self.simulated, self.complete, self.problems = len(frames), True, True, []

    def frames(self, start=0, stop=None):
        return iter(self._frames[start:stop])


def _frames_busy_and_idle():
    """a6000 Gen1 (max Gen4): GPU0 at 5 % utilization moving 2 GB/s (busy by its link), GPU1 idle."""
    src = sim_source("a6000-tp2-pcie-gen1")
    out = []
    for f in run_frames(src, 0, 5):
        g0 = replace(f.gpus[0], pcie_gen=1, pcie_width=16, util_gpu_pct=5.0, pcie_rx_bytes_per_s=2e9,
                     pcie_tx_bytes_per_s=0.0)
        g1 = replace(f.gpus[1], pcie_gen=1, pcie_width=16, util_gpu_pct=5.0, pcie_rx_bytes_per_s=0.0,
                     pcie_tx_bytes_per_s=0.0)
        out.append(replace(f, gpus=(g0, g1)))
    return src.inventory, out


async def test_gpu_panel_compact_table_topology_topo_and_summary_agree():
    from gpuscope.tui.app import GpuscopeApp
    from gpuscope.widgets.gpu_panel import GpuPanel
    from gpuscope.widgets.gpu_table import GpuTable
    from gpuscope.widgets.topology_panel import TopologyPanel

    inv, frames = _frames_busy_and_idle()
    session = Session(inv, interval_s=1.0)
    for f in frames:
        session.ingest(f)
    app = GpuscopeApp(session, None, label="SIMULATED", interval_s=1.0, compact=False)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        v = app.build_view(True)
        panels = [app.query_one(f"#gpu{i}", GpuPanel) for i in (0, 1)]
        table, topo_panel = app.query_one(GpuTable), app.query_one(TopologyPanel)
        for w in (*panels, table, topo_panel):
            w.show(v)
        text_panel = [p._gs_last for p in panels]
        text_table = table._gs_last
        text_topo = topo_panel._gs_last
    table_rows = text_table.plain.split("\n")
    topo_rows = text_topo.plain.split("\n")
    doc = topo_json(inv, frames[-1], [])
    ansi = render_text(doc, color=True)
    summary = summarize(_Recording(inv, frames))
    expected = {0: "below_max_busy", 1: "below_max_idle"}
    for i, state in expected.items():
        colour = LEVEL_STYLE[LINK_LEVEL[state]]
        # the GPU panel: Gen1×16, red when busy, grey (and "(idle)") when not
        assert colour in _style_at(text_panel[i], "Gen1×16")
        assert ("(idle)" in text_panel[i].plain) is (state == "below_max_idle")
        # the compact table: the short label, same colour
        row = next(r for r in table_rows if r.startswith(f"{i} "))
        assert "G1×16▼" in row
        start = sum(len(r) + 1 for r in table_rows[:table_rows.index(row)])
        at = start + row.index("G1×16▼")
        assert colour in " ".join(str(s.style) for s in text_table.spans if s.start <= at < s.end)
        # the topology panel's link column
        trow = next(r for r in topo_rows if r.startswith(f"GPU{i} PCIe"))
        start = sum(len(r) + 1 for r in topo_rows[:topo_rows.index(trow)])
        at = start + trow.index("Gen1×16 < Gen4×16")
        assert colour in " ".join(str(s.style) for s in text_topo.spans if s.start <= at <= s.end)
        # topo: the state in JSON, the label and its colour in text
        assert doc["gpus"][i]["pcie"]["state"] == state
        code = {"red": "\x1b[31m", "amber": "\x1b[33m", "dim": "\x1b[2m"}[LEVEL_COLOR[LINK_LEVEL[state]]]
        assert any(line.startswith(f"GPU{i} ") and f"{code}Gen1×16" in line for line in ansi.split("\n")), ansi
        # summary: the link counted as "while busy" only when busy, under the same label
        links = summary["gpus"][i]["pcie_links_while_busy"]
        assert links == ({"Gen1×16": len(frames)} if state == "below_max_busy" else {})
    assert "PCIe link while busy: Gen1×16 100%" in render_summary(summary)


# ------------------------------------------------------------------ one catalogue
OLD_EXPORT_COLUMNS = [  # the export header before the catalogue: kept, in this order
    "t", "gpu", "lost", "util_gpu_pct", "util_mem_pct", "mem_used_bytes", "mem_total_bytes", "sm_clock_mhz",
    "mem_clock_mhz", "graphics_clock_mhz", "power_w", "power_limit_w", "energy_j", "temp_gpu_c", "temp_mem_c",
    "fan_pct", "pstate", "clock_event_reasons", "pcie_gen", "pcie_width", "pcie_tx_bytes_per_s",
    "pcie_rx_bytes_per_s", "pcie_replay_count", "pcie_recovery_count", "pcie_error_count", "nvlink_tx_bytes_per_s",
    "nvlink_rx_bytes_per_s", "sm_active_pct", "sm_occupancy_pct", "tensor_active_pct", "dram_bw_util_pct",
    "gen_tokens_per_s"]
HEALTH_EXPORT_COLUMNS = [  # GPU health: after the old GPU columns, before the endpoint ones
    "mem_reserved_bytes", "ecc_corrected_volatile", "ecc_uncorrected_volatile", "ecc_corrected_aggregate",
    "ecc_uncorrected_aggregate", "remapped_rows_correctable", "remapped_rows_uncorrectable", "remap_pending",
    "remap_failure"]


NVLINK_ERROR_COLUMNS = [  # the NVLink error counters (a link verdict's inputs), after GPM's graphics engine
    "nvlink_crc_flit_count", "nvlink_crc_data_count", "nvlink_replay_count", "nvlink_recovery_count"]
POWER_MGMT_COLUMNS = [  # the power management limit (dcgm-exporter's opt-in DCGM_FI_DEV_POWER_MGMT_LIMIT), after them
    "power_mgmt_limit_w"]


def test_catalogue_declares_every_reading_field_once():
    names = [m.name for m in catalogue.METRICS]
    assert len(names) == len(set(names))
    keys = [m.key for m in catalogue.METRICS if m.key]
    assert len(keys) == len(set(keys))
    gpu_fields = [f.name for f in dataclasses.fields(GpuReading) if f.name not in ("index", "lost", "processes")]
    assert [m.name for m in catalogue.metrics("gpu")] == gpu_fields
    assert catalogue.export_columns() == [*OLD_EXPORT_COLUMNS[:-1], *HEALTH_EXPORT_COLUMNS,
                                          "gr_engine_active_pct",  # GPM's graphics engine
                                          *NVLINK_ERROR_COLUMNS, *POWER_MGMT_COLUMNS, OLD_EXPORT_COLUMNS[-1]]
    assert all(m.history for m in catalogue.metrics("gpu", detail=True))


def _exposition(inv, frame) -> dict[str, tuple[str, list[tuple[dict[str, str], float]]]]:
    """The Prometheus exporter's text for ``frame`` → {family: [(labels, value)]} via prometheus_client's parser."""
    from prometheus_client.parser import text_string_to_metric_families

    from gpuscope.outputs.prometheus import Renderer
    return {f.name: (f.type, [(s.labels, s.value) for s in f.samples])
            for f in text_string_to_metric_families(Renderer(inv).render(frame))}


def test_a_metric_added_in_one_place_reaches_history_summary_export_and_detail(monkeypatch):
    from gpuscope.tui.screens import detail_metrics

    def free(r):
        return None if r.mem_total_bytes is None or r.mem_used_bytes is None else r.mem_total_bytes - r.mem_used_bytes

    new = Metric("mem_free_bytes", "memory free GB", key="mem_free", unit="GB", scale=1e9, digits=1,
                 summary=True, detail=True, read=free,
                 prom=Series("gpuscope_memory_free_bytes", "Framebuffer free."),
                 dcgm=Series("DCGM_FI_DEV_FB_FREE_KIB", "Framebuffer memory free (in KiB).", scale=1024, integer=True))
    monkeypatch.setattr(catalogue, "METRICS", (*catalogue.METRICS, new))
    inv, frames = _frames_busy_and_idle()
    want = frames[-1].gpus[0].mem_total_bytes - frames[-1].gpus[0].mem_used_bytes
    assert want > 0
    # history
    h = History(len(inv.devices), 16)
    for f in frames:
        h.add(f)
    _, vals = h.window("mem_free", 0, 60.0)
    assert len(vals) == len(frames) and vals[-1] == pytest.approx(want, rel=1e-6)
    # summary (JSON and text)
    doc = summarize(_Recording(inv, frames))
    assert doc["gpus"][0]["stats"]["mem_free_bytes"]["max"] == pytest.approx(want)
    assert "  memory free GB" in render_summary(doc)
    # export
    cols = catalogue.export_columns()
    assert "mem_free_bytes" in cols
    row = next(iter(export_rows(frames[-1:])))
    assert len(row) == len(cols) and row[cols.index("mem_free_bytes")] == want
    # the detail view's list
    assert new in detail_metrics()
    # the Prometheus exporter: gpuscope's own family (base units, label gpu) and a DCGM-style one (its labels,
    # its unit), each sample from the same reading
    got = _exposition(inv, frames[-1])
    typ, rows = got["gpuscope_memory_free_bytes"]
    assert typ == "gauge" and {lab["gpu"]: v for lab, v in rows}["0"] == want
    assert len(rows) == len(inv.devices)
    typ, rows = got["DCGM_FI_DEV_FB_FREE_KIB"]
    lab, v = next((lab, v) for lab, v in rows if lab["gpu"] == "0")
    assert v == round(want / 1024) and lab["UUID"] == inv.devices[0].uuid and lab["device"] == "nvidia0"


@pytest.mark.parametrize("name,dcgm,family,labels,value", [
    # exporter facts added to a metric the catalogue already has: a DCGM field of dcgm-exporter's
    ("fan_pct", Series("DCGM_FI_DEV_FAN_SPEED", "Fan speed (in %)."), "DCGM_FI_DEV_FAN_SPEED", None,
     lambda r: r.fan_pct),
    # and a gpuscope family, in base units (MHz → Hz)
    ("graphics_clock_mhz", Series("gpuscope_graphics_clock_hertz", "Graphics clock.", scale=1e-6),
     "gpuscope_graphics_clock_hertz", {"gpu"}, lambda r: r.graphics_clock_mhz * 1e6),
])
def test_exporter_fields_added_to_a_catalogue_metric_reach_the_exporter(monkeypatch, name, dcgm, family, labels,
                                                                       value):
    field = "dcgm" if family.startswith("DCGM_") else "prom"
    inv, frames = _frames_busy_and_idle()
    assert family not in _exposition(inv, frames[-1])
    monkeypatch.setattr(catalogue, "METRICS", tuple(replace(m, **{field: dcgm}) if m.name == name else m
                                                    for m in catalogue.METRICS))
    _typ, rows = _exposition(inv, frames[-1])[family]
    r0 = frames[-1].gpus[0]
    assert value(r0) is not None
    assert {lab["gpu"]: v for lab, v in rows}["0"] == pytest.approx(value(r0))
    assert set(rows[0][0]) == (labels or {"gpu", "UUID", "pci_bus_id", "device", "modelName", "hostname",
                                          "DCGM_FI_DRIVER_VERSION"})


# ------------------------------------------------------------------ the catalogue drives the scenario keys and the exporter
# GPU metrics a scenario phase does not set, each with where the simulated NVML takes it from instead.
NOT_A_PHASE_KEY = {
    "mem_total_bytes": "[[gpus]] memory_gib",
    "graphics_clock_mhz": "follows the SM clock",
    "power_limit_w": "[[gpus]] power_limit_w",
    "power_mgmt_limit_w": "[[gpus]] power_limit_w",
    "energy_j": "power integrated over the clock",
    "clock_event_reasons": "the phase's clock_events list",
    "pcie_gen": "[[gpus]] pcie_gen_idle / pcie_gen_load",
    "pcie_width": "[[gpus]] pcie_width_idle / pcie_width_load",
    "pcie_replay_count": "[[events]] pcie_errors", "pcie_recovery_count": "[[events]] pcie_errors",
    "pcie_error_count": "[[events]] pcie_errors",
    "nvlink_crc_flit_count": "[[events]] nvlink_errors", "nvlink_crc_data_count": "[[events]] nvlink_errors",
    "nvlink_replay_count": "[[events]] nvlink_errors", "nvlink_recovery_count": "[[events]] nvlink_errors",
    "mem_reserved_bytes": "[[gpus]] memory_reserved_mib",
    "ecc_corrected_volatile": "[[events]] ecc", "ecc_uncorrected_volatile": "[[events]] ecc",
    "ecc_corrected_aggregate": "[[events]] ecc", "ecc_uncorrected_aggregate": "[[events]] ecc",
    "remapped_rows_correctable": "[[events]] row_remap", "remapped_rows_uncorrectable": "[[events]] row_remap",
    "remap_pending": "[[events]] row_remap", "remap_failure": "[[events]] row_remap",
    "xids": "[[events]] xid",
    "gr_engine_active_pct": "GPM's, from the phase's utilization",
}
# Metrics in no Prometheus family: shown, recorded and exported to CSV only.
NOT_EXPORTED = {
    "graphics_clock_mhz": "dcgm-exporter has no graphics-clock field by default",
    "fan_pct": "not in dcgm-exporter's default counters",
    "pstate": "not in dcgm-exporter's default counters",
    **dict.fromkeys(("queue_mean_s", "prefill_mean_s", "prompt_computed_tokens_per_s", "prompt_cached_tokens_per_s",
                     "prefix_cache_hit_pct", "preemptions_per_min", "probe_ttft_s", "probe_decode_tokens_per_s",
                     "rate_window_s"), "the inference panel's detail, not a series"),
}


def _one_phase_scenario(**phase):
    return {"gpus": [{"count": 1}], "phases": [{"duration_s": 1.0, **phase}]}


def test_every_gpu_metric_is_a_scenario_phase_key_or_says_where_it_comes_from():
    """Scenario phases accepted only the keys the parser listed: a new metric needed a fifth file."""
    from gpuscope.sources.scenario import parse, phase_fields

    fields = phase_fields()
    for m in catalogue.metrics("gpu"):
        if m.phase is None:
            assert m.name in NOT_A_PHASE_KEY, f"{m.name}: give it a phase key or say where the simulation takes it"
            continue
        assert m.name not in NOT_A_PHASE_KEY
        assert m.phase.kind in catalogue.PHASE_KINDS and m.phase.name in fields
        value = 0 if m.phase.kind == "integer" else 50.0
        sc = parse(_one_phase_scenario(**{m.phase.name: value}))
        assert sc.phases[0].values[m.phase.name] == value
    assert set(NOT_A_PHASE_KEY) <= {m.name for m in catalogue.metrics("gpu")}


def test_every_metric_has_an_exporter_family_or_an_explicit_not_exported_mark():
    """The DCGM canonical-name table (once the 4.9 table) lived apart from the catalogue: a renamed DCGM field needed a second file."""
    from gpuscope.outputs.prometheus import CANONICAL_DERIVED, dcgm_canonical

    for m in catalogue.METRICS:
        exported = m.dcgm is not None or m.prom is not None
        assert exported != (m.name in NOT_EXPORTED), m.name
    table = dcgm_canonical()
    for m in catalogue.metrics("gpu"):
        if m.dcgm is not None and m.dcgm.canonical is not None:
            v = m.dcgm.canonical
            assert table[m.dcgm.name] == (v.name, v.factor, v.integer, v.type, v.help)
    assert len(table) == len(CANONICAL_DERIVED) + sum(1 for m in catalogue.METRICS if m.dcgm and m.dcgm.canonical)


def test_a_metric_added_to_the_catalogue_is_a_scenario_key_and_exported_under_both_dcgm_names(monkeypatch):
    """Adding encoder utilization took five files (the scenario parser's list) and seven with the DCGM 4.9 table:
    one catalogue entry now gives the phase key, the DCGM family and its 4.9 name."""
    from prometheus_client.parser import text_string_to_metric_families

    from gpuscope.core.catalogue import PhaseKey, Renamed
    from gpuscope.outputs.prometheus import Renderer, dcgm_canonical
    from gpuscope.sources.scenario import ScenarioError, parse

    with pytest.raises(ScenarioError, match="enc_util_pct: unknown field"):
        parse(_one_phase_scenario(enc_util_pct=40))
    new = Metric("enc_util_pct", "encoder %", unit="%", maximum=100.0, read=lambda r: r.util_gpu_pct,
                 phase=PhaseKey("enc_util_pct", "pct"),
                 dcgm=Series("DCGM_FI_DEV_ENC_UTIL", "Encoder utilization (in %).",
                             canonical=Renamed("DCGM_FI_DEV_ENC_UTIL_RATIO", 0.01, False, "gauge",
                                         "Encoder utilization (ratio 0-1).")))
    monkeypatch.setattr(catalogue, "METRICS", (*catalogue.METRICS, new))
    # the scenario parser: a phase and an override may set it, with the catalogue's kind checked
    sc = parse(_one_phase_scenario(enc_util_pct=40, overrides=[{"gpus": [0], "enc_util_pct": 10}]))
    assert sc.phases[0].values["enc_util_pct"] == 40.0 and sc.phases[0].overrides[0][1] == {"enc_util_pct": 10.0}
    assert sc.idle["enc_util_pct"] is None
    with pytest.raises(ScenarioError, match=r"phases\[0\].enc_util_pct: expected a percentage 0-100"):
        parse(_one_phase_scenario(enc_util_pct=140))
    # the exporter: its legacy family and its canonical name, from the same reading
    assert dcgm_canonical()["DCGM_FI_DEV_ENC_UTIL"][0] == "DCGM_FI_DEV_ENC_UTIL_RATIO"
    inv, frames = _frames_busy_and_idle()
    text = Renderer(inv, dcgm_names="both").render(frames[-1])
    got = {f.name: {s.labels.get("gpu"): s.value for s in f.samples} for f in text_string_to_metric_families(text)}
    util = frames[-1].gpus[0].util_gpu_pct
    assert got["DCGM_FI_DEV_ENC_UTIL"]["0"] == pytest.approx(util)
    assert got["DCGM_FI_DEV_ENC_UTIL_RATIO"]["0"] == pytest.approx(util / 100)
