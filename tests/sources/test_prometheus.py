"""The Prometheus exporter: exposition (checked with prometheus_client's parser), the HTTP server, the agent
flags, and end to end against a real Prometheus and promtool (skipped, with the reason, when absent)."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import (
    needs_prometheus,
    needs_promtool,
    run_frames,
    sim_source,
    start_agent,
    start_prometheus,
    stop_prometheus,
)
from helpers import prom_query as _query
from helpers import stop_agent as stop
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from gpuscope.core import catalogue
from gpuscope.core.catalogue import Metric, Series
from gpuscope.core.findings import Finding
from gpuscope.core.model import EndpointReading, ServingGroup, XidCount, server_histograms
from gpuscope.core.session import Session
from gpuscope.core.text import clean
from gpuscope.outputs.prometheus import (
    DEFAULT_PORT,
    OPT_IN,
    PrometheusError,
    PrometheusExporter,
    Renderer,
    SamplerHealth,
    dcgm_canonical,
    escape_label,
    families,
    fmt,
    hostname_keys,
    labels,
    name_set,
    parse_dcgm_counters,
    parse_listen,
    skipped_ticks,
)

ROOT = Path(__file__).resolve().parents[2]
ALERTS = ROOT / "docs" / "prometheus-alerts.yml"
DCGM_LABELS = {"gpu", "UUID", "pci_bus_id", "device", "modelName", "hostname", "DCGM_FI_DRIVER_VERSION"}

# dcgm-exporter's etc/default-counters.csv and etc/dcp-metrics-included.csv: name → (type, unit in its help)
DCGM_SPEC = {
    "DCGM_FI_DEV_SM_CLOCK": ("gauge", "MHz"),
    "DCGM_FI_DEV_MEM_CLOCK": ("gauge", "MHz"),
    "DCGM_FI_DEV_MEMORY_TEMP": ("gauge", "C"),
    "DCGM_FI_DEV_GPU_TEMP": ("gauge", "C"),
    "DCGM_FI_DEV_POWER_USAGE": ("gauge", "W"),
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": ("counter", "mJ"),
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": ("counter", ""),
    "DCGM_FI_DEV_GPU_UTIL": ("gauge", "%"),
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("gauge", "%"),
    "DCGM_FI_DEV_FB_FREE": ("gauge", "MiB"),
    "DCGM_FI_DEV_FB_USED": ("gauge", "MiB"),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": ("gauge", ""),
    "DCGM_FI_PROF_DRAM_ACTIVE": ("gauge", ""),
    "DCGM_FI_PROF_PCIE_TX_BYTES": ("gauge", "bytes per second"),
    "DCGM_FI_PROF_PCIE_RX_BYTES": ("gauge", "bytes per second"),
    "DCGM_FI_DEV_FB_RESERVED": ("gauge", "MiB"),
    "DCGM_FI_DEV_XID_ERRORS": ("gauge", "XID"),
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": ("counter", "remapped rows"),
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": ("counter", "remapped rows"),
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": ("gauge", "remapping of rows has failed"),
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": ("gauge", "NVLink bandwidth"),  # a gauge since 4.6.0-4.8.3
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("gauge", "graphics engine"),
}


def parse(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Exposition → {sample name as written: [(labels, value)]}, and the family types in ``parse.types``."""
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    types = {}
    for fam in text_string_to_metric_families(text):
        types[fam.name] = fam.type
        for s in fam.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    parse.types = types  # type: ignore[attr-defined]
    # prometheus_client appends _total to counter samples that lack it; map back to the names as written
    written = set(re.findall(r"^([A-Za-z_:][A-Za-z0-9_:]*)[{ ]", text, re.M))
    return {(n[:-6] if n not in written and n.endswith("_total") else n): v for n, v in out.items()}


def frames_of(scenario: str, seconds: int = 8, at: float = 20.0):
    src = sim_source(scenario, at=at)
    session = Session(src.inventory, interval_s=1.0, history_s=60)
    for f in run_frames(src, at, at + seconds):
        session.ingest(f)
    src.close()
    return src.inventory, session


# ---- small pure functions, as tables ----

@pytest.mark.parametrize("spec,want", [
    ("19400", ("127.0.0.1", 19400)),
    ("0", ("127.0.0.1", 0)),
    ("0.0.0.0:9999", ("0.0.0.0", 9999)),
    (":9999", ("0.0.0.0", 9999)),
    ("[::1]:9999", ("::1", 9999)),
    ("gpu-box.lan:19400", ("gpu-box.lan", 19400)),
])
def test_parse_listen(spec, want):
    assert parse_listen(spec) == want


@pytest.mark.parametrize("spec", ["abc", "70000", "::1:99", "host:", "[::1]9999", "-1", "[::1]:x", ""])
def test_parse_listen_rejects(spec):
    with pytest.raises(PrometheusError, match="--prometheus"):
        parse_listen(spec)


@pytest.mark.parametrize("raw,escaped", [
    ("plain", "plain"),
    ('a"b', 'a\\"b'),
    ("a\\b", "a\\\\b"),
    ("a\nb", "a b"),  # a newline is outside text's: one line, like everywhere else
    ('\\"\n', '\\\\\\" '),
    ("NVIDIA H200 · 141 GB", "NVIDIA H200 · 141 GB"),
    ("\x1b]52;c;ZXZpbA==\x07\x1b[2J\x1b[31mLLM", "LLM"),  # a clipboard write and a screen clear from a model name
    ("x" * 300, "x" * 255 + "…"),
])
def test_escape_label(raw, escaped):
    assert escape_label(raw) == escaped


@given(st.text(max_size=40))
def test_label_values_round_trip_through_the_parser(value):
    text = f"# TYPE x gauge\nx{labels([('v', value)])} 1\n"
    (fam,) = text_string_to_metric_families(text)
    assert fam.samples[0].labels == {"v": clean(value, 256)}  # what is safe on a terminal, read back intact


@pytest.mark.parametrize("v,text", [
    (0, "0"), (5, "5"), (True, "1"), (False, "0"), (2.0, "2"), (2.5, "2.5"), (1e20, "1e+20"),
    (float("nan"), "NaN"), (float("inf"), "+Inf"), (float("-inf"), "-Inf"), (0.023, "0.023"),
])
def test_fmt(v, text):
    assert fmt(v) == text


@pytest.mark.parametrize("prev,start,interval,skipped", [
    (None, 10.0, 1.0, 0), (10.0, 11.0, 1.0, 0), (10.0, 11.3, 1.0, 0), (10.0, 13.0, 1.0, 2),
    (10.0, 12.6, 1.0, 2), (10.0, 10.5, 0.5, 0), (10.0, 12.0, 0.5, 3),
])
def test_skipped_ticks(prev, start, interval, skipped):
    assert skipped_ticks(prev, start, interval) == skipped


def test_default_port_is_none_of_the_known_ones():
    assert DEFAULT_PORT not in (8000, 9090, 9400) and not 9100 <= DEFAULT_PORT <= 9999


# ---- the exposition ----

def test_dcgm_series_names_types_units_and_labels():
    inv, session = frames_of("mixed-4")
    text = Renderer(inv).render(session.last_frame, session.findings.active, SamplerHealth(ticks=9))
    got = parse(text)
    types = parse.types  # type: ignore[attr-defined]
    for name in ("DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED",
                 "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER"):
        rows = got[name]
        assert len(rows) == 4, name
        for lab, _v in rows:
            assert set(lab) == DCGM_LABELS
            assert lab["device"] == f"nvidia{lab['gpu']}"
            assert lab["modelName"] == "NVIDIA RTX A6000" and lab["hostname"] == "sim-mixed-4"
            assert lab["DCGM_FI_DRIVER_VERSION"] == inv.driver_version
            dev = inv.devices[int(lab["gpu"])]
            assert lab["UUID"] == dev.uuid and lab["pci_bus_id"] == dev.bus_id
    for line in text.splitlines():
        m = re.match(r"# HELP (DCGM_\w+) (.*)", line)
        if m and m.group(1) in DCGM_SPEC:
            typ, unit = DCGM_SPEC[m.group(1)]
            fam = m.group(1)
            assert types[fam] == typ, fam
            assert unit in m.group(2), (fam, m.group(2))
    # units: MiB and W as dcgm-exporter writes them
    last = session.last_frame.gpus[0]
    used = {lab["gpu"]: v for lab, v in got["DCGM_FI_DEV_FB_USED"]}
    assert used["0"] == round(last.mem_used_bytes / 2**20)
    power = {lab["gpu"]: v for lab, v in got["DCGM_FI_DEV_POWER_USAGE"]}
    assert power["0"] == pytest.approx(last.power_w)
    # no GPM on RTX A6000: the profiling series are absent, not 0
    assert not [n for n in got if n.startswith("DCGM_FI_PROF_")]


def test_profiling_series_only_where_gpm_gives_them():
    inv, session = frames_of("h200-nvswitch-8", seconds=4)
    got = parse(Renderer(inv).render(session.last_frame))
    for name in ("DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "DCGM_FI_PROF_PCIE_TX_BYTES",
                 "DCGM_FI_PROF_NVLINK_TX_BYTES"):
        assert len(got[name]) == 8, name
    assert all(0.0 <= v <= 1.0 for _l, v in got["DCGM_FI_PROF_SM_ACTIVE"])


def test_unreadable_is_absent_and_a_lost_gpu_has_no_dcgm_series():
    inv, session = frames_of("mixed-4", seconds=2)
    f = session.last_frame
    gpus = list(f.gpus)
    gpus[1] = replace(gpus[1], power_w=None, temp_mem_c=None, clock_event_reasons=None)
    gpus[3] = replace(gpus[3], lost=True)
    got = parse(Renderer(inv).render(replace(f, gpus=tuple(gpus))))
    assert sorted(lab["gpu"] for lab, _v in got["DCGM_FI_DEV_POWER_USAGE"]) == ["0", "2"]
    assert sorted(lab["gpu"] for lab, _v in got["DCGM_FI_DEV_SM_CLOCK"]) == ["0", "1", "2"]
    assert {lab["gpu"] for lab, _v in got["gpuscope_clock_event_active"]} == {"0", "2"}
    assert {lab["gpu"]: v for lab, v in got["gpuscope_gpu_lost"]} == {"0": 0, "1": 0, "2": 0, "3": 1}
    assert "DCGM_FI_DEV_MEMORY_TEMP" not in got  # mixed-4 has no memory sensor on any GPU


def test_gpuscope_series_links_topology_and_clock_events():
    inv, session = frames_of("mixed-4", seconds=2)
    f = session.last_frame
    gpus = list(f.gpus)
    gpus[2] = replace(gpus[2], clock_event_reasons=0x4 | 0x40)  # sw_power_cap + hw_thermal
    got = parse(Renderer(inv).render(replace(f, gpus=tuple(gpus))))
    assert {(lab["gpu_a"], lab["gpu_b"], lab["path"]) for lab, _v in got["gpuscope_topology_path"]} == {
        ("0", "1", "NV4"), ("2", "3", "NV4"), ("0", "2", "SYS"), ("0", "3", "SYS"), ("1", "2", "SYS"),
        ("1", "3", "SYS")}
    active = {lab["reason"] for lab, v in got["gpuscope_clock_event_active"] if lab["gpu"] == "2" and v == 1}
    assert active == {"sw_power_cap", "hw_thermal"}
    cap = {lab["gpu"]: v for lab, v in got["gpuscope_pcie_link_capacity_bytes_per_second"]}
    assert cap["0"] == pytest.approx(31.5e9, rel=0.01)  # Gen4 x16
    assert {lab["gpu"]: v for lab, v in got["gpuscope_nvlink_links_active"]}["0"] == 4
    nv = {lab["gpu"]: v for lab, v in got["gpuscope_nvlink_capacity_bytes_per_second"]}["0"]
    assert nv == pytest.approx(56.25e9, rel=1e-3)  # an A6000 bridge: 4 × 14.0625 GB/s, not 4 × 25
    assert got["gpuscope_info"][0][0]["simulated"] == "true"


def test_slot_limited_link_reads_against_its_maxima():
    inv, session = frames_of("slot-limited", seconds=2)
    got = parse(Renderer(inv).render(session.last_frame))
    d = inv.devices[0]
    r = session.last_frame.gpus[0]
    assert {lab["gpu"]: v for lab, v in got["gpuscope_pcie_link_generation"]}["0"] == r.pcie_gen
    if d.pcie_gen_sys_max is not None:
        assert {lab["gpu"]: v for lab, v in got["gpuscope_pcie_link_generation_slot_max"]}["0"] == d.pcie_gen_sys_max


def test_findings_by_id_with_gpu_and_pair_and_a_count_by_severity():
    inv, session = frames_of("mixed-4", seconds=8)
    fake = [Finding("x:gpu2", "clock_events", "critical", "GPU2", "hot", {}, 0.0, 0.0),
            Finding("srv", "bottleneck", "info", "server", 'says "hi"\nthere', {}, 0.0, 0.0)]
    got = parse(Renderer(inv).render(session.last_frame, list(session.findings.active) + fake))
    fake.append(Finding("slow-path:gpu0-gpu2", "slow_path", "critical", "GPU0-GPU2", "peer traffic", {}, 0.0, 0.0))
    got = parse(Renderer(inv).render(session.last_frame, list(session.findings.active) + fake))
    rows = {lab["id"]: lab for lab, v in got["gpuscope_finding"] if v == 1}
    assert rows["slow-path:gpu0-gpu2"]["pair"] == "0-2" and rows["slow-path:gpu0-gpu2"]["gpu"] == ""
    # mixed-4 without peer traffic: its SYS pairs are one machine-wide info line (docs/findings.md § 2)
    assert rows["slow-paths"]["severity"] == "info" and rows["slow-paths"]["gpu"] == rows["slow-paths"]["pair"] == ""
    assert rows["x:gpu2"]["gpu"] == "2" and rows["x:gpu2"]["pair"] == ""
    assert rows["srv"]["gpu"] == rows["srv"]["pair"] == ""
    counts = {lab["severity"]: v for lab, v in got["gpuscope_findings_active"]}
    assert counts == {"critical": 2, "warning": 0, "info": 2}


def test_no_findings_still_counts_zero_per_severity():
    inv, session = frames_of("healthy-gen4", seconds=2)
    got = parse(Renderer(inv).render(session.last_frame, []))
    assert "gpuscope_finding" not in got
    assert {lab["severity"]: v for lab, v in got["gpuscope_findings_active"]} == {"critical": 0, "warning": 0,
                                                                                  "info": 0}


def test_endpoints_per_model_with_latency_stats_and_down_servers():
    inv, session = frames_of("mixed-4", seconds=1)
    eps = (EndpointReading(url="http://a:8000", kind="vllm", model='llama "3"\n8B', gen_tokens_per_s=812.5,
                           prompt_tokens_per_s=2000.0, requests_running=12, requests_waiting=3, kv_cache_pct=42.0,
                           ttft_mean_s=0.2, ttft_p50_s=0.15, ttft_p95_s=0.9, itl_mean_s=0.02),
           EndpointReading(url="http://b:30000", kind="sglang", up=False, error="unreachable"),
           EndpointReading(url="http://c:8080", up=None))  # not asked yet: up is not known
    got = parse(Renderer(inv).render(replace(session.last_frame, endpoints=eps)))
    up = {lab["endpoint"]: v for lab, v in got["gpuscope_endpoint_up"]}
    assert up == {"http://a:8000": 1, "http://b:30000": 0}  # no sample for c: neither 1 nor 0 is true
    (lab, v), = got["gpuscope_endpoint_generation_tokens_per_second"]
    assert lab["model"] == 'llama "3" 8B' and v == 812.5  # the newline is gone: one line on any terminal
    assert got["gpuscope_endpoint_kv_cache_usage_ratio"][0][1] == pytest.approx(0.42)
    ttft = {lab["stat"]: v for lab, v in got["gpuscope_endpoint_time_to_first_token_seconds"]}
    assert ttft == {"mean": 0.2, "p50": 0.15, "p95": 0.9}
    assert {lab["stat"] for lab, _v in got["gpuscope_endpoint_inter_token_latency_seconds"]} == {"mean"}


# The families that do not come from core/catalogue.py, and why: derived from two fields (FB_FREE, link
# capacity), facts of the device not of a reading (info, maxima, NVLink, topology), one series per bit or per
# finding, an endpoint's up/down (written for down servers too), the sampler's own health.
EXPORTER_OWN = {
    "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "gpuscope_pcie_link_capacity_bytes_per_second",
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",  # the legacy set's second name of DCGM_FI_DEV_CLOCK_THROTTLE_REASONS
    "gpuscope_info", "gpuscope_gpu_info", "gpuscope_pcie_link_generation_gpu_max",
    "gpuscope_pcie_link_generation_slot_max", "gpuscope_pcie_link_width_gpu_max_lanes",
    "gpuscope_pcie_link_width_slot_max_lanes", "gpuscope_pcie_link_max_capacity_bytes_per_second",
    "gpuscope_nvlink_links_active", "gpuscope_nvlink_capacity_bytes_per_second", "gpuscope_topology_path",
    "gpuscope_gpu_lost", "gpuscope_clock_event_active", "gpuscope_finding", "gpuscope_findings_active",
    "gpuscope_endpoint_up", "gpuscope_last_frame_timestamp_seconds", "gpuscope_sampler_ticks_total",
    "gpuscope_sampler_ticks_skipped_total", "gpuscope_sampler_interval_seconds",
    "gpuscope_sampler_last_tick_duration_seconds", "gpuscope_mqtt_frames_dropped_total", "gpuscope_xid_errors_total",
    # serving groups (docs/groups.md): facts of a group of GPUs, not of one reading
    "gpuscope_serving_group_info", "gpuscope_serving_group_pcie_bytes_per_second",
    "gpuscope_serving_group_nvlink_bytes_per_second", "gpuscope_serving_group_generated_tokens_per_second",
    "gpuscope_serving_group_bytes_per_token",
    "gpuscope_serving_group_link_verdict"}  # a verdict over a group's GPUs and the window (core/link_verdict.py)


def test_every_family_comes_from_the_catalogue_or_is_one_of_the_exporters_own():
    written: set[str] = set()
    for scenario in ("h200-nvswitch-8", "mixed-4"):  # GPM and an HBM sensor; findings, slot maxima
        inv, session = frames_of(scenario, seconds=4)
        ep = EndpointReading(url="http://a:8000", kind="vllm", model="m", **{
            m.name: 1.0 for m in catalogue.metrics("endpoint") if m.prom is not None})
        inv = replace(inv, devices=tuple(replace(d, pcie_width_gpu_max=16) for d in inv.devices))
        finding = Finding("x:gpu0", "clock_events", "critical", "GPU0", "hot", {}, 0.0, 0.0)
        group = ServingGroup(server="vLLM", endpoint="http://a:8000", gpus=(0, 1), tp=2)
        xid = (XidCount(xid=79, count=2, last_t=1.0),)  # the Xid series appear once a GPU had one
        gpus = (replace(session.last_frame.gpus[0], xids=xid), *session.last_frame.gpus[1:])
        text = Renderer(inv).render(replace(session.last_frame, gpus=gpus, endpoints=(ep,), groups=(group,)), [finding],
                                    SamplerHealth(ticks=3, last_tick_s=0.01, mqtt_dropped=0))
        written |= set(re.findall(r"^# TYPE (\S+)", text, re.M))
    declared = {s.name for m in catalogue.METRICS for s in (m.dcgm, m.prom) if s is not None}
    assert declared <= written  # every catalogue family has samples
    assert written - declared == EXPORTER_OWN  # and every other family is on the exporter's own list
    assert len(declared) == 57, sorted(declared)  # 33 DCGM, 15 gpuscope per-GPU, 9 per-endpoint families


def test_catalogue_families_group_by_name_and_members_must_agree(monkeypatch):
    fams = {f.name: f for f in families("endpoint", "prom")}
    ttft = fams["gpuscope_endpoint_time_to_first_token_seconds"]
    assert [m[3] for m in ttft.members] == [',stat="mean"', ',stat="p50"', ',stat="p95"']
    assert [f.name for f in families("gpu", "dcgm")][:3] == [
        "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL", "DCGM_FI_DEV_FB_USED"]  # catalogue order
    bad = Metric("requests_waiting", "x", scope="endpoint", export=False,
                 prom=Series("gpuscope_endpoint_requests_running", "Another help."))
    monkeypatch.setattr(catalogue, "METRICS", (*catalogue.METRICS, bad))
    with pytest.raises(ValueError, match="gpuscope_endpoint_requests_running"):
        families("endpoint", "prom")


def test_sampler_health_series():
    inv, session = frames_of("mixed-4", seconds=1)
    got = parse(Renderer(inv).render(session.last_frame, (), SamplerHealth(ticks=42, skipped=2, last_tick_s=0.004,
                                                                              interval_s=0.5, mqtt_dropped=7)))
    assert got["gpuscope_sampler_ticks_total"][0][1] == 42
    assert got["gpuscope_sampler_ticks_skipped_total"][0][1] == 2
    assert got["gpuscope_sampler_last_tick_duration_seconds"][0][1] == 0.004
    assert got["gpuscope_mqtt_frames_dropped_total"][0][1] == 7
    assert got["gpuscope_last_frame_timestamp_seconds"][0][1] == session.last_frame.t


@pytest.mark.parametrize("key", ["hostname", "Hostname", "node"])
def test_hostname_label_key_is_configurable(key):
    inv, session = frames_of("mixed-4", seconds=1)
    got = parse(Renderer(inv, hostname_label=key).render(session.last_frame))
    lab = got["DCGM_FI_DEV_POWER_USAGE"][0][0]
    assert lab[key] == "sim-mixed-4" and set(lab) == (DCGM_LABELS - {"hostname"}) | {key}


@pytest.mark.parametrize("key", ["", "2x", "host-name", "__name", "gpu", "DCGM_FI_DRIVER_VERSION"])
def test_bad_hostname_label_is_a_clear_error(key):
    inv, _ = frames_of("mixed-4", seconds=0)
    with pytest.raises(PrometheusError):
        Renderer(inv, hostname_label=key)


def test_no_frame_yet_serves_the_static_part():
    inv, _ = frames_of("mixed-4", seconds=0)
    got = parse(Renderer(inv).render(None))
    assert "gpuscope_topology_path" in got and "DCGM_FI_DEV_POWER_USAGE" not in got


# ---- the HTTP server ----

def _get(url: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


@pytest.fixture
def exporter():
    inv, session = frames_of("mixed-4", seconds=6)
    ex = PrometheusExporter(("127.0.0.1", 0), inv).start()
    ex.update(session.last_frame, session.findings.active, SamplerHealth(ticks=1))
    yield ex, session
    ex.stop()


def test_http_metrics_head_404_405(exporter):
    ex, _ = exporter
    code, headers, body = _get(ex.url)
    assert code == 200 and headers["Content-Type"].startswith("text/plain; version=0.0.4")
    assert "DCGM_FI_DEV_POWER_USAGE" in parse(body.decode())
    code, headers, body = _get(ex.url, "HEAD")
    assert code == 200 and body == b"" and int(headers["Content-Length"]) > 1000
    assert _get(ex.url + "?x=1")[0] == 200
    assert _get(ex.url.replace("/metrics", "/"))[0] == 404
    assert _get(ex.url.replace("/metrics", "/metricsx"))[0] == 404
    for method in ("POST", "PUT", "DELETE", "PATCH", "OPTIONS"):
        code, headers, _ = _get(ex.url, method)
        assert code == 405 and headers["Allow"] == "GET, HEAD", method


def test_rendered_once_per_frame_and_update_never_renders(exporter):
    ex, session = exporter
    for _ in range(5):
        _get(ex.url)
    assert ex.renders == 1
    for _ in range(100):  # the tick side: hand-over only
        ex.update(session.last_frame, (), None)
    assert ex.renders == 1
    body = _get(ex.url)[2]
    assert ex.renders == 2 and b"gpuscope_finding{" not in body  # the new state (no findings) is served


def test_many_concurrent_scrapes(exporter):
    ex, _ = exporter
    want = _get(ex.url)[2]
    results: list[tuple[int, bytes]] = []
    lock = threading.Lock()

    def worker() -> None:
        for _ in range(10):
            code, _h, body = _get(ex.url)
            with lock:
                results.append((code, body))

    threads = [threading.Thread(target=worker) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(results) == 160 and all(c == 200 and b == want for c, b in results)
    assert ex.renders == 1


def test_port_in_use_is_one_clear_error(exporter):
    ex, _ = exporter
    inv, _s = frames_of("mixed-4", seconds=0)
    with pytest.raises(PrometheusError, match=r"cannot listen"):
        PrometheusExporter(ex.address, inv).start()


# ---- the agent command line ----

def _gpuscope(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuscope", *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("args,msg,rc", [
    # a command line the options refuse is a usage error (2), as every argparse refusal is
    (["agent", "--simulate", "mixed-4"], "agent needs --broker URL, --prometheus [HOST:]PORT, or both", 2),
    (["agent", "--simulate", "mixed-4", "--prometheus", "nope"], "--prometheus 'nope'", 2),
    (["agent", "--simulate", "mixed-4", "--prometheus", "70000"], "the port must be a number", 2),
    (["agent", "--simulate", "mixed-4", "--prometheus", "0", "--prometheus-hostname-label", "a-b"],
     "not a valid Prometheus label name", 2),
    (["agent", "--simulate", "mixed-4", "--prometheus", "0", "--prometheus-hostname-label", "instance"],
     "instance", 2),
])
def test_agent_bad_flags_are_one_line_errors(args, msg, rc):
    p = _gpuscope(*args)
    assert p.returncode == rc and msg in p.stderr and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1


def poll(cond, deadline_s: float, what: str):  # noqa: ANN001, ANN201
    end = time.monotonic() + deadline_s
    last = None
    while time.monotonic() < end:
        try:
            last = cond()
        except (OSError, ValueError, KeyError) as e:
            last = e
        if last and not isinstance(last, Exception):
            return last
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}; last: {last!r}")


@pytest.mark.slow
def test_agent_serves_metrics_alone():
    p, url = start_agent()
    try:
        got = poll(lambda: (g := parse(_get(url)[2].decode())).get("gpuscope_finding") and g, 20, "a finding")
        assert len(got["DCGM_FI_DEV_POWER_USAGE"]) == 4
        assert got["gpuscope_sampler_ticks_total"][0][1] >= 5
    finally:
        err = stop(p)
    assert "stopped" in err and "scrapes served" in err and "Traceback" not in err


@pytest.mark.slow
def test_agent_name_is_the_hostname_label():
    """``--name`` is what the agent publishes as: on the broker and as the DCGM series' Hostname."""
    p, url = start_agent("--name", "rack7-node3")
    try:
        got = poll(lambda: parse(_get(url)[2].decode()).get("DCGM_FI_DEV_POWER_USAGE"), 20, "a power series")
        assert {labels["hostname"] for labels, _ in got} == {"rack7-node3"}
    finally:
        stop(p)


# ---- a real Prometheus and promtool ----

# The lint messages dcgm-exporter's own names and labels draw (UUID, modelName, counters without _total):
# kept for compatibility, so they are allowed on DCGM_* series only.
DCGM_LINT = re.compile(r"^DCGM_FI_\w+ (label names should be written in 'snake_case' not 'camelCase'|counter metrics "
                       r"should have \"_total\" suffix|metric name should not include type 'counter')$")


@needs_promtool
def test_promtool_check_metrics_on_a_scrape(exporter):
    ex, _ = exporter
    text = _get(ex.url)[2].decode()
    p = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)
    problems = [x for x in (p.stdout + p.stderr).splitlines() if x.strip()]
    assert p.returncode in (0, 3), problems  # 3: lint findings only; 1 would be a parse error
    assert [x for x in problems if not DCGM_LINT.match(x)] == []
    own = "".join(block for block in re.split(r"(?=^# HELP )", text, flags=re.M) if "DCGM_" not in block)
    p = subprocess.run(["promtool", "check", "metrics"], input=own, capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stdout + p.stderr  # gpuscope's own series are lint-clean


@needs_promtool
def test_promtool_check_rules_on_the_alert_rules():
    p = subprocess.run(["promtool", "check", "rules", str(ALERTS)], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stdout + p.stderr
    assert re.search(r"SUCCESS: [1-9]\d* rules found", p.stdout + p.stderr)


@needs_prometheus
@pytest.mark.slow
def test_a_real_prometheus_scrapes_the_agent(tmp_path):
    agent, url = start_agent()
    target = urllib.parse.urlparse(url).netloc
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n"
                   f"  - {ALERTS}\nscrape_configs:\n  - job_name: gpuscope\n"
                   f"    static_configs:\n      - targets: ['{target}']\n")
    prom = None
    try:
        prom, base = start_prometheus(tmp_path, cfg)
        power = poll(lambda: len(r := _query(base, "DCGM_FI_DEV_POWER_USAGE")) == 4 and r, 40,
                     "one DCGM_FI_DEV_POWER_USAGE per GPU")
        assert sorted(x["metric"]["gpu"] for x in power) == ["0", "1", "2", "3"]
        for x in power:
            m = x["metric"]
            assert DCGM_LABELS <= set(m) and m["device"] == f"nvidia{m['gpu']}" and m["hostname"] == "sim-mixed-4"
            assert m["modelName"] == "NVIDIA RTX A6000" and m["UUID"].startswith("GPU-") and m["job"] == "gpuscope"
            assert 100 < float(x["value"][1]) <= 300  # the scenario's 230 W, give or take its noise
        found = poll(lambda: _query(base, 'gpuscope_finding{rule="slow_path",id="slow-paths"} == 1'), 40,
                     "the machine's slow_path finding (its SYS pairs carry no peer traffic)")
        assert found[0]["metric"]["severity"] == "info"
        energy = poll(lambda: len(r := _query(base, "rate(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION[10s])")) == 4 and r,
                      30, "a rate of the energy counter")
        assert all(float(x["value"][1]) >= 0 for x in energy)
        # one tick a second (the first few seconds read low: the series is younger than the range)
        poll(lambda: (r := _query(base, "rate(gpuscope_sampler_ticks_total[5s])")) and 0.7 <= float(r[0]["value"][1])
             <= 1.3, 30, "a tick rate of 1/s")
        # mixed-4 has no warning any more (a well-placed TP=2 server): check the alert rules loaded and evaluate
        rules = poll(lambda: [r for g in json.loads(_get(f"{base}/api/v1/rules")[2])["data"]["groups"]
                              for r in g["rules"] if r["name"] == "GpuscopeFindingWarning"
                              and r.get("health") == "ok" and r.get("lastEvaluation", "").startswith("2")], 40,
                     "the warning alert rule loaded and evaluated")
        assert rules[0]["state"] == "inactive"
    finally:
        if prom is not None:
            stop_prometheus(prom)
        stop(agent)


@pytest.mark.slow
def test_agent_exporter_survives_a_flood_without_delaying_ticks():
    """Scrapes hammer the agent; its own tick counter still advances one a second."""
    p, url = start_agent()
    try:
        first = poll(lambda: parse(_get(url)[2].decode())["gpuscope_sampler_ticks_total"][0][1], 20, "the first tick")
        t0 = time.monotonic()
        stop_flag = threading.Event()
        errors: list[object] = []

        def flood() -> None:
            while not stop_flag.is_set():
                try:
                    _get(url)
                except OSError as e:
                    errors.append(e)

        threads = [threading.Thread(target=flood) for _ in range(8)]
        for t in threads:
            t.start()
        time.sleep(4.0)  # the measured window itself, not a wait for a condition
        stop_flag.set()
        for t in threads:
            t.join(10)
        got = parse(_get(url)[2].decode())
        elapsed = time.monotonic() - t0
        ticks = got["gpuscope_sampler_ticks_total"][0][1] - first
        assert ticks >= elapsed - 2.0, (ticks, elapsed)
        assert not errors
    finally:
        stop(p)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("mosquitto") is None and not os.path.exists("/usr/sbin/mosquitto"),
                    reason="mosquitto not installed (.ci/run installs it)")
def test_agent_serves_prometheus_beside_the_broker(tmp_path):
    from helpers import Broker

    from gpuscope.sources.mqtt import Subscriber, parse_broker

    b = Broker(tmp_path)
    sub = Subscriber(parse_broker(b.url, env={}), only_host="sim-mixed-4").start()  # that host's frames too
    p, url = start_agent("--broker", b.url)
    try:
        poll(lambda: any(h.host == "sim-mixed-4" and h.frames >= 3 for h in sub.snapshot()), 30, "frames over MQTT")
        got = poll(lambda: (g := parse(_get(url)[2].decode())).get("gpuscope_mqtt_frames_dropped_total") and g, 20,
                   "the MQTT health series")
        assert got["gpuscope_mqtt_frames_dropped_total"][0][1] == 0
        assert len(got["DCGM_FI_DEV_POWER_USAGE"]) == 4
    finally:
        err = stop(p)
        sub.stop()
        b.stop()
    assert "sent to the broker" in err and "scrapes served" in err


def test_serving_group_series_for_the_design_story():
    """The exporter's serving-group series: labelled by the server and its GPUs, never by PID."""
    import re

    from gpuscope.sources.groups import with_groups
    from gpuscope.sources.live import open_source

    src = with_groups(open_source("a6000-tp2-pcie-gen1", virtual_at=30.0), "a6000-tp2-pcie-gen1")
    try:
        frame = src.sample()
        text = Renderer(src.inventory).render(frame)
    finally:
        src.close()
    (info,) = re.findall(r"^gpuscope_serving_group_info\{(.*)\} 1$", text, re.M)
    assert 'server="vLLM"' in info and 'endpoint="http://localhost:8000"' in info and 'gpus="0,1"' in info
    assert 'tp="2"' in info and 'pp=""' in info and 'path="SYS"' in info and 'simulated="true"' in info
    assert "pid" not in info and "2811" not in text.split("gpuscope_serving_group")[1]
    key = '{server="vLLM",endpoint="http://localhost:8000",gpus="0,1"}'
    tok = float(re.search(r"^gpuscope_serving_group_generated_tokens_per_second" + re.escape(key) + r" (\S+)$", text,
                          re.M).group(1))
    per = float(re.search(r"^gpuscope_serving_group_bytes_per_token" + re.escape(key) + r" (\S+)$", text, re.M).group(1))
    pcie = float(re.search(r"^gpuscope_serving_group_pcie_bytes_per_second" + re.escape(key) + r" (\S+)$", text,
                           re.M).group(1))
    assert 50 < tok < 60 and per * tok == pytest.approx(pcie, rel=1e-3)
    assert "gpuscope_serving_group_nvlink_bytes_per_second" not in text  # A6000 without NVLink: absent, not 0


# ---- the DCGM name sets ----

# Written out here, apart from outputs/prometheus.py's dcgm_canonical(), so a slip in either shows: legacy family → (its
# canonical DCGM field name, canonical value / legacy value, a unit word its help must carry). Only names DCGM's public
# dcgmlib/dcgm_fields.h defines (docs/prometheus.md); the 7 it does not (Hz clocks, framebuffer bytes, joules, memory
# ratio) are written under their legacy names in every set.
NAMES_CANONICAL = {
    "DCGM_FI_DEV_GPU_UTIL": ("DCGM_FI_DEV_GPU_UTIL_RATIO", 1 / 100, "ratio"),  # % → 0-1
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": ("DCGM_FI_DEV_NVLINK_THROUGHPUT_BYTES_PER_SECOND", 1e6, "bytes per second"),
    "DCGM_FI_DEV_POWER_USAGE": ("DCGM_FI_DEV_BOARD_POWER_WATTS", 1, "W"),
    "DCGM_FI_DEV_GPU_TEMP": ("DCGM_FI_DEV_GPU_TEMP_CELSIUS", 1, "C"),
    "DCGM_FI_DEV_MEMORY_TEMP": ("DCGM_FI_DEV_MEMORY_TEMP_CELSIUS", 1, "C"),
    "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", 1, "bitmask"),
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": ("DCGM_FI_DEV_PCIE_REPLAY_TOTAL", 1, "retries"),
    "DCGM_FI_DEV_XID_ERRORS": ("DCGM_FI_DEV_XID_ERROR", 1, "XID"),
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": ("DCGM_FI_DEV_ROW_REMAP_UNCORRECTABLE_TOTAL", 1, "rows"),
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": ("DCGM_FI_DEV_ROW_REMAP_CORRECTABLE_TOTAL", 1, "rows"),
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": ("DCGM_FI_DEV_ROW_REMAP_FAILED", 1, "rows"),
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO", 1, "atio"),
    "DCGM_FI_PROF_SM_ACTIVE": ("DCGM_FI_PROF_SM_UTIL_RATIO", 1, "atio"),
    "DCGM_FI_PROF_SM_OCCUPANCY": ("DCGM_FI_PROF_SM_OCCUPANCY_RATIO", 1, "atio"),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": ("DCGM_FI_PROF_TENSOR_UTIL_RATIO", 1, "atio"),
    "DCGM_FI_PROF_DRAM_ACTIVE": ("DCGM_FI_PROF_DRAM_UTIL_RATIO", 1, "atio"),
}
NOT_IN_THE_HEADER = {"DCGM_FI_DEV_SM_CLOCK_HERTZ", "DCGM_FI_DEV_MEMORY_CLOCK_HERTZ", "DCGM_FI_DEV_FB_FREE_BYTES",
                     "DCGM_FI_DEV_FB_USED_BYTES", "DCGM_FI_DEV_FB_RESERVED_BYTES", "DCGM_FI_DEV_GPU_ENERGY_JOULES_TOTAL",
                     "DCGM_FI_DEV_MEMORY_UTIL_RATIO", "DCGM_FI_SYSTEM_DRIVER_VERSION"}


def _busy_h200_frame():
    """A frame with every DCGM family present: GPM, HBM sensor, NVLink, a remap failure, ECC and an Xid."""
    inv, session = frames_of("h200-nvswitch-8", seconds=4)
    f = session.last_frame
    g0 = replace(f.gpus[0], xids=(XidCount(xid=79, count=1, last_t=1.0),), remap_failure=True,
                 clock_event_reasons=0x4, ecc_corrected_volatile=3, ecc_uncorrected_volatile=0,
                 ecc_corrected_aggregate=5, ecc_uncorrected_aggregate=0)
    return inv, replace(f, gpus=(g0, *f.gpus[1:]))


def _by_gpu(got, name):
    return {lab["gpu"]: (lab, v) for lab, v in got[name]}


def test_the_rename_table_is_the_header_names_only():
    assert {k: v[0] for k, v in dcgm_canonical().items()} == {k: v[0] for k, v in NAMES_CANONICAL.items()}
    assert len(NAMES_CANONICAL) == 16


@pytest.mark.parametrize("legacy", sorted(NAMES_CANONICAL))
def test_each_canonical_family_is_the_legacy_one_in_its_unit(legacy):
    inv, frame = _busy_h200_frame()
    old = parse(Renderer(inv).render(frame))
    text = Renderer(inv, dcgm_names="dcgm-fields").render(frame)
    new = parse(text)
    name, factor, unit = NAMES_CANONICAL[legacy]
    assert unit in re.search(rf"^# HELP {name} (.*)$", text, re.M).group(1)
    assert legacy not in new or legacy == name
    for gpu, (lab, v) in _by_gpu(new, name).items():
        olab, ov = _by_gpu(old, legacy)[gpu]
        assert lab == olab and lab["DCGM_FI_DRIVER_VERSION"] == inv.driver_version and lab["hostname"]
        assert v == pytest.approx(ov * factor, rel=1e-3, abs=1.0 if factor >= 1e6 else 1e-6)


@pytest.mark.parametrize("names", ["legacy", "before-4.8.3", "dcgm-fields", "both"])
def test_name_sets_write_the_names_and_host_label_they_promise(names):
    inv, frame = _busy_h200_frame()
    got = parse(Renderer(inv, dcgm_names=names).render(frame))
    dcgm = [n for n in got if n.startswith("DCGM_")]
    host = "Hostname" if names == "before-4.8.3" else "hostname"
    assert all(host in lab and lab["DCGM_FI_DRIVER_VERSION"] for n in dcgm for lab, _v in got[n])
    assert not NOT_IN_THE_HEADER & set(dcgm)
    canonical = {v[0] for v in NAMES_CANONICAL.values()}
    if names in ("legacy", "before-4.8.3"):
        assert not (canonical - {"DCGM_FI_DEV_CLOCKS_EVENT_REASONS"}) & set(dcgm)
    else:
        assert canonical <= set(dcgm)
        assert {"DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"} <= set(dcgm)


def test_old_4_9_value_is_an_alias_with_a_note():
    assert name_set("4.9")[0] == "dcgm-fields" and "dcgm-fields" in name_set("4.9")[1]
    with pytest.raises(PrometheusError, match="--dcgm-names"):
        name_set("5.0")


def test_both_hostname_spellings_for_a_migration():
    inv, frame = _busy_h200_frame()
    got = parse(Renderer(inv, hostname_label="hostname,Hostname").render(frame))
    lab = got["DCGM_FI_DEV_GPU_TEMP"][0][0]
    assert lab["hostname"] == lab["Hostname"] == inv.host
    with pytest.raises(PrometheusError):
        hostname_keys("hostname,hostname")


def test_xid_errors_is_zero_from_the_first_scrape():
    inv, session = frames_of("mixed-4")
    got = parse(Renderer(inv).render(session.last_frame))
    assert {v for _lab, v in got["DCGM_FI_DEV_XID_ERRORS"]} == {0}


def test_opt_in_counters_as_dcgm_exporter_names_them():
    inv, frame = _busy_h200_frame()
    exp = PrometheusExporter(("127.0.0.1", 0), inv, counters=parse_dcgm_counters(
        "DCGM_EXP_XID_ERRORS_TOTAL,DCGM_EXP_CLOCK_EVENTS_TOTAL,DCGM_FI_DEV_ENFORCED_POWER_LIMIT"))
    quiet = replace(frame, gpus=tuple(replace(g, clock_event_reasons=0) for g in frame.gpus))
    for f in (quiet, frame, quiet, frame):  # sw_power_cap turns on twice on GPU 0
        exp.update(f)
    got = parse(exp.body().decode())
    ce = {(lab["gpu"], lab["clock_event"]): v for lab, v in got["DCGM_EXP_CLOCK_EVENTS_TOTAL"]}
    assert ce[("0", "sw_power_cap")] == 2 and ce[("1", "sw_power_cap")] == 0
    xid = got["DCGM_EXP_XID_ERRORS_TOTAL"]
    assert [(lab["gpu"], lab["xid"], v) for lab, v in xid] == [("0", "79", 1)] and "hostname" in xid[0][0]
    assert _by_gpu(got, "DCGM_FI_DEV_ENFORCED_POWER_LIMIT")["0"][1] == frame.gpus[0].power_limit_w
    plain = parse(Renderer(inv).render(frame))
    assert not {"DCGM_EXP_XID_ERRORS_TOTAL", "DCGM_EXP_CLOCK_EVENTS_TOTAL", "DCGM_FI_DEV_ENFORCED_POWER_LIMIT",
                "DCGM_FI_DEV_POWER_MGMT_LIMIT"} & set(plain)


def test_both_power_limits_opt_in_with_dcgm_labels():
    """dcgm-exporter 4.8.4 offers both power-limit fields as opt-ins (its issue #720): the enforced limit and the
    power management limit, each a W gauge under the DCGM labels, from the simulated NVML's answers (the scenario's
    [[gpus]] power_limit_w); absent without the flag, and a GPU whose reading has none has no sample (never 0)."""
    inv, frame = _busy_h200_frame()
    g0 = frame.gpus[0]
    assert g0.power_limit_w == g0.power_mgmt_limit_w == 700.0  # the scenario's limit, read through NVML
    frame = replace(frame, gpus=(replace(g0, power_limit_w=550.0), replace(frame.gpus[1], power_mgmt_limit_w=None),
                                 *frame.gpus[2:]))  # GPU 0 held below its set limit; GPU 1 does not report it
    names = ("DCGM_FI_DEV_ENFORCED_POWER_LIMIT", "DCGM_FI_DEV_POWER_MGMT_LIMIT")
    for spec in (",".join(names), ",".join(reversed(names))):
        text = Renderer(inv, counters=parse_dcgm_counters(spec)).render(frame)
        got = parse(text)
        enforced, mgmt = (_by_gpu(got, n) for n in names)
        assert enforced["0"][1] == 550.0 and mgmt["0"][1] == 700.0
        assert set(enforced) == {str(d.index) for d in inv.devices} and "1" not in mgmt
        assert set(mgmt) == set(enforced) - {"1"}
        lab = mgmt["0"][0]
        assert lab == enforced["0"][0] == got["DCGM_FI_DEV_GPU_TEMP"][0][0]  # the DCGM label set, as the others
        assert (lab["UUID"], lab["device"], lab["hostname"]) == (inv.devices[0].uuid, "nvidia0", inv.host)
        assert "# TYPE DCGM_FI_DEV_POWER_MGMT_LIMIT gauge\n" in text
        assert "# HELP DCGM_FI_DEV_POWER_MGMT_LIMIT Current Power limit for the device (in W).\n" in text
    only = parse(Renderer(inv, counters=parse_dcgm_counters("DCGM_FI_DEV_POWER_MGMT_LIMIT")).render(frame))
    assert "DCGM_FI_DEV_POWER_MGMT_LIMIT" in only and "DCGM_FI_DEV_ENFORCED_POWER_LIMIT" not in only
    plain = parse(Renderer(inv).render(frame))
    assert not set(names) & set(plain)
    # gpuscope's own series carries the management limit without the flag (base units, label gpu)
    assert {lab["gpu"]: v for lab, v in plain["gpuscope_power_management_limit_watts"]}["0"] == 700.0


@pytest.mark.parametrize("spec, msg", [("", "empty"), ("DCGM_EXP_NOPE", "not one of"),
                                       ("DCGM_FI_DEV_POWER_MGMT_LIMIT,,", "empty")])
def test_bad_opt_in_counter_is_one_line(spec, msg):
    with pytest.raises(PrometheusError, match=msg):
        parse_dcgm_counters(spec)


@given(st.text(max_size=80))
def test_opt_in_parser_gives_known_names_or_one_line(spec):
    try:
        got = parse_dcgm_counters(spec)
    except PrometheusError as e:
        assert "\n" not in str(e)
    else:
        assert got and set(got) <= set(OPT_IN)


def test_server_histograms_for_histogram_quantile():
    from gpuscope.sources.endpoint import EndpointTracker

    t = EndpointTracker("http://x")
    text = (ROOT / "tests/fixtures/inference/vllm_0.32.0_v1_cpu_load.txt").read_text()
    t.feed(0.0, text)
    t.feed(1.0, text)
    inv, session = frames_of("mixed-4")
    frame = replace(session.last_frame, endpoints=tuple(t.readings()))
    out = Renderer(inv).render(frame)
    fams = {f.name: f for f in text_string_to_metric_families(out)}
    h = fams["gpuscope_endpoint_server_time_to_first_token_seconds"]
    assert h.type == "histogram"
    buckets = [(float(s.labels["le"]), s.value) for s in h.samples if s.name.endswith("_bucket")]
    assert buckets[0][0] == 0.001 and buckets[-1][0] == math.inf  # vLLM's own layout, +Inf last
    assert all(b[1] >= a[1] for a, b in zip(buckets, buckets[1:]))
    assert {s.labels["model"] for s in h.samples} == {"tiny"} and "itl" not in out.split("server_time")[0]
    assert "gpuscope_endpoint_server_inter_token_latency_seconds_bucket" in out


def test_hostile_histograms_are_left_out():
    e = EndpointReading(url="http://x", histograms=(("ttft", (0.2, 0.1), (1.0, 2.0), 1.0, 2.0),
                                                   ("itl", (0.1,), (5.0,), None, 4.0), ("nope", (), (), None, 0.0),
                                                   ("ttft", (0.1, 0.2), (1.0, float("nan")), 1.0, 2.0)))
    assert server_histograms(e) == []


def test_new_default_fields_read_what_dcgm_exporter_reads():
    inv, frame = _busy_h200_frame()
    got = parse(Renderer(inv).render(frame))
    r = frame.gpus[0]
    nv = _by_gpu(got, "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL")["0"][1]
    assert nv == round((r.nvlink_tx_bytes_per_s + r.nvlink_rx_bytes_per_s) / 1e6)  # MB/s, both directions
    assert nv > 100_000  # this scenario moves ~58 GB/s each way per GPU (TP=8 decode of a 405B model)
    assert _by_gpu(got, "DCGM_FI_PROF_GR_ENGINE_ACTIVE")["0"][1] == pytest.approx(r.gr_engine_active_pct / 100)
    assert _by_gpu(got, "DCGM_FI_DEV_XID_ERRORS")["0"][1] == 79
    assert _by_gpu(got, "DCGM_FI_DEV_ROW_REMAP_FAILURE")["0"][1] == 1
    # no NVLink (mixed-4's PCIe-only pairs still have bridges; a GPU without any): absent, not 0
    gpus = tuple(replace(g, nvlink_tx_bytes_per_s=None, nvlink_rx_bytes_per_s=None) for g in frame.gpus)
    assert "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL" not in parse(Renderer(inv).render(replace(frame, gpus=gpus)))


def _verdict_samples(text: str) -> dict[tuple[str, str], float]:
    """gpuscope_serving_group_link_verdict samples: (gpus, link) → value."""
    out = {}
    for fam in text_string_to_metric_families(text):
        if fam.name == "gpuscope_serving_group_link_verdict":
            assert fam.type == "gauge"
            for s in fam.samples:
                assert set(s.labels) == {"server", "endpoint", "gpus", "link"}
                out[(s.labels["gpus"], s.labels["link"])] = s.value
    return out


def test_link_verdict_series_per_group_from_the_raised_finding():
    from gpuscope.core.link_verdict import rule_link_verdict
    from gpuscope.core.model import DeviceInfo, Frame, GpuReading, Inventory, PairLink

    inv = Inventory(host="h", devices=tuple(DeviceInfo(index=i, name="NVIDIA H100", uuid=f"u{i}", bus_id=f"b{i}",
                                                       pcie_gen_gpu_max=5, pcie_width_gpu_max=16)
                                            for i in range(4)), pairs=(PairLink(0, 1, "SYS", 18, True),))
    a = ServingGroup(server="vLLM", endpoint="http://localhost:8000", gpus=(0, 1), tp=2)
    b = ServingGroup(server="vLLM", endpoint="http://localhost:8001", gpus=(2,))
    c = ServingGroup(server="python train.py", gpus=(3,))  # nothing readable: absent
    gpus = (GpuReading(0, util_gpu_pct=90.0, pcie_gen=5, pcie_width=16),
            GpuReading(1, util_gpu_pct=90.0, pcie_gen=5, pcie_width=16, xids=(XidCount(145, 1, 9.0),)),
            GpuReading(2, util_gpu_pct=90.0, pcie_gen=5, pcie_width=16), GpuReading(3))
    frame = Frame(t=10.0, gpus=gpus, groups=(a, b, c))
    r = Renderer(inv)
    # before the finding is raised (held 5 s like every finding): 0, named by the group's links
    assert _verdict_samples(r.render(frame)) == {("0,1", "GPU0↔GPU1 NVLink"): 0, ("2", "GPU2 PCIe"): 0}
    (cand,) = rule_link_verdict(inv, [frame])
    raised = Finding(cand.id, cand.rule, cand.severity, cand.subject, cand.message, cand.evidence, 5.0, 10.0)
    text = r.render(frame, [raised])
    assert _verdict_samples(text) == {("0,1", "GPU0↔GPU1 NVLink"): 2, ("2", "GPU2 PCIe"): 0}
    assert 'gpuscope_finding{id="link-verdict:http://localhost:8000:0+1",rule="link_verdict",severity="critical",' \
           'gpu="",pair="0-1",subject="GPU0-GPU1"} 1' in text
    # a degraded finding: 1, on the link it names
    degraded = replace(raised, severity="warning", evidence={**raised.evidence, "verdict": "degraded",
                                                             "link": "GPU1 PCIe"})
    assert _verdict_samples(r.render(frame, [degraded]))[("0,1", "GPU1 PCIe")] == 1
    assert "gpuscope_serving_group_link_verdict" not in r.render(replace(frame, groups=(c,)))
