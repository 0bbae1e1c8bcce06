"""The metric catalogue reaches the gate and the screen: every numeric field of every reading has a valid
range, and the panels, the detail view, the compact table and the findings scale a metric to one ceiling."""

from __future__ import annotations

import dataclasses
import math
import typing

import pytest
from rich.text import Text

from gpuscope.core import catalogue
from gpuscope.core.catalogue import Metric
from gpuscope.core.codec import frame_from_dict, frame_to_dict
from gpuscope.core.model import DeviceInfo, EndpointReading, Frame, GpuReading, Inventory, ProcessInfo
from gpuscope.core.stats import SERVING_EXPORT_COLUMNS, export_serving_rows
from gpuscope.core.topology import device_nvlink_capacity_bytes_per_s
from gpuscope.core.validate import (
    DEVICE_RANGES,
    ENDPOINT_BOUNDS,
    ENDPOINT_COUNTS,
    Tally,
    check_endpoint,
    check_gpu,
)
from gpuscope.tui.screens import detail_top
from gpuscope.widgets.gpu_table import COLUMNS, scale_top
from gpuscope.widgets.panel_graphs import metric_top

# numbers a reading type holds that are not readings: identities and the per-process figures (checked apart)
NOT_READINGS = {"index", "nvlinks_active"}


def _numeric_fields(cls: type) -> list[str]:
    """The fields of ``cls`` that hold a number (int or float, optional or not, or a tuple of them); bool is
    not a number here."""
    out = []
    for name, tp in typing.get_type_hints(cls).items():
        args = set(typing.get_args(tp)) | {tp}
        inner = {a for t in args for a in typing.get_args(t)} if any(typing.get_origin(t) is tuple for t in args) else set()
        if (args | inner) & {int, float} and name not in NOT_READINGS:
            out.append(name)
    return out


@pytest.mark.parametrize("cls,ranges", [
    (GpuReading, lambda: catalogue.ranges("gpu")),
    (EndpointReading, lambda: {**catalogue.ranges("endpoint"), **ENDPOINT_COUNTS, **dict.fromkeys(ENDPOINT_BOUNDS)}),
    (DeviceInfo, lambda: DEVICE_RANGES),
])
def test_every_numeric_field_of_every_reading_type_has_a_range(cls: type, ranges) -> None:
    fields = _numeric_fields(cls)
    assert fields  # the walk finds numbers at all
    missing = [f for f in fields if f not in ranges()]
    assert not missing, f"{cls.__name__}: no valid range for {missing}"


def test_every_catalogue_metric_has_a_range_and_ranges_are_sane() -> None:
    for m in catalogue.METRICS:
        assert m.valid is not None or m.read is not None, m.name
        if m.valid is not None:
            lo, hi = m.valid
            assert lo < hi and math.isfinite(lo) and math.isfinite(hi), m.name


def test_a_metric_without_a_range_is_a_catalogue_mistake(monkeypatch) -> None:
    monkeypatch.setattr(catalogue, "METRICS", (*catalogue.METRICS, Metric("fan_rpm", "fan rpm")))
    with pytest.raises(ValueError, match="fan_rpm has no valid range"):
        catalogue.ranges("gpu")


def test_a_metric_added_to_the_catalogue_is_range_checked_at_once(monkeypatch) -> None:
    """The gate reads the catalogue at use time (cached per catalogue), not a copy made at import."""
    tight = dataclasses.replace(next(m for m in catalogue.METRICS if m.name == "fan_pct"), valid=(0.0, 50.0))
    monkeypatch.setattr(catalogue, "METRICS", tuple(tight if m.name == "fan_pct" else m for m in catalogue.METRICS))
    tally = Tally()
    assert check_gpu(GpuReading(index=0, fan_pct=70.0), tally).fan_pct is None and tally.readings == 1


# ------------------------------------------------------------------ the endpoint fields the gate used to pass
HOSTILE = {"preemptions_per_min": math.inf, "queue_mean_s": math.nan, "prefix_cache_hit_pct": -5.0,
           "prefill_mean_s": -1.0, "prompt_computed_tokens_per_s": math.inf, "prompt_cached_tokens_per_s": -3.0,
           "probe_ttft_s": math.nan, "probe_decode_tokens_per_s": -1.0, "rate_window_s": math.inf}


@pytest.mark.parametrize("field,value", list(HOSTILE.items()))
def test_hostile_endpoint_numbers_become_unknown(field: str, value: float) -> None:
    tally = Tally()
    e = check_endpoint(EndpointReading(url="http://x", **{field: value}), tally)  # type: ignore[arg-type]
    assert getattr(e, field) is None and tally.readings == 1


@pytest.mark.parametrize("kw,field,want", [
    ({"resets": -4}, "resets", 0),  # a count is never unknown: 0
    ({"models_dropped": 2**70}, "models_dropped", 0),
    ({"ttft_p50_bounds_s": (0.01, math.inf)}, "ttft_p50_bounds_s", None),
    ({"itl_p95_bounds_s": (-1.0,)}, "itl_p95_bounds_s", None),
    ({"itl_p95_bounds_s": (0.5,)}, "itl_p95_bounds_s", (0.5,)),  # "> 0.5 s" is a real answer
    ({"ttft_p95_bounds_s": (0.1, 0.25)}, "ttft_p95_bounds_s", (0.1, 0.25)),
    ({"probe_fields": ("gen_tokens_per_s", "\x1b[31m", "nope")}, "probe_fields", ("gen_tokens_per_s",)),
])
def test_endpoint_numbers_that_are_not_metrics_are_checked_too(kw, field, want) -> None:
    assert getattr(check_endpoint(EndpointReading(url="http://x", **kw)), field) == want


def test_a_recording_with_hostile_endpoint_numbers_exports_unknowns() -> None:
    """A recording whose readings say preemptions_per_min = inf, queue_mean_s = NaN, prefix_cache_hit_pct = -5:
    decoding it (the path of replay, summary and export) leaves them unknown, so ``export --serving`` writes
    empty cells and the KV-pressure rule sees nothing."""
    inv = Inventory(host="h", devices=(DeviceInfo(index=0, name="x", uuid="u", bus_id="b"),))
    f = Frame(t=1.0, gpus=(GpuReading(index=0),),
              endpoints=(EndpointReading(url="http://x", kv_cache_pct=99.0, **HOSTILE),))  # type: ignore[arg-type]
    tally = Tally()
    back = frame_from_dict(frame_to_dict(f), inv, tally)
    assert tally.readings == len(HOSTILE)
    row = dict(zip(SERVING_EXPORT_COLUMNS, next(iter(export_serving_rows([back])))))
    assert all(row[k] is None for k in HOSTILE if k in row)
    assert row["kv_cache_pct"] == 99.0


# ------------------------------------------------------------------ one ceiling per metric, every view
A6000_BRIDGED = DeviceInfo(index=0, name="NVIDIA RTX A6000", uuid="u", bus_id="b", architecture="Ampere",
                           nvlink_version=3, nvlinks_active=4, power_limit_w=300.0, sm_clock_max_mhz=2100,
                           memory_total_bytes=48 * 2**30, pcie_gen_gpu_max=4, pcie_width_gpu_max=16,
                           pcie_gen_sys_max=4, pcie_width_sys_max=16)
LIVE = GpuReading(index=0, pcie_gen=1, pcie_width=16, power_limit_w=250.0, mem_total_bytes=48 * 2**30)


def test_nvlink_ceiling_of_a_bridged_a6000_is_the_same_in_every_view() -> None:
    """RTX A6000 with a 4-link bridge: the detail view scaled NVLink to 100 GB/s (NVLink 3's data-centre link
    rate), the panel and the findings to 56.25 (the GA102 bridge's 14.06 GB/s a link)."""
    findings = device_nvlink_capacity_bytes_per_s(A6000_BRIDGED)
    assert findings == pytest.approx(56.25e9)
    for key in ("nvlink_rx", "nvlink_tx"):
        m = catalogue.by_key(key)
        assert catalogue.raw_ceiling(m, A6000_BRIDGED, LIVE) == findings  # the panel's rate lines
        assert detail_top(key, A6000_BRIDGED, LIVE, 3.0) == round(findings / 1e9, 1)  # was 100.0
        assert scale_top(key)(A6000_BRIDGED, LIVE) == findings  # the graphs under the compact table


@pytest.mark.parametrize("key,want_raw", [
    ("util", 100.0),
    ("power", 250.0),  # the reading's enforced limit beats the inventory's
    ("sm_clock", 2100.0),
    ("mem_used", 48 * 2**30),
    ("pcie_rx", 4.0e9),  # the link as trained now (Gen1 ×16), not its best
    ("temp", None),  # no ceiling: the views use the peak over a floor
])
def test_panel_detail_and_table_share_each_ceiling(key: str, want_raw: float | None) -> None:
    m = catalogue.by_key(key)
    raw = catalogue.raw_ceiling(m, A6000_BRIDGED, LIVE)
    assert raw == (pytest.approx(want_raw) if want_raw is not None else None)
    if raw is None:
        assert metric_top(key, A6000_BRIDGED, LIVE, 64.0) == m.floor == 100.0
        return
    assert metric_top(key, A6000_BRIDGED, LIVE, 1.0) == pytest.approx(raw / m.scale)
    assert detail_top(key, A6000_BRIDGED, LIVE, 1.0) == pytest.approx(round(raw / m.scale, 1))
    assert scale_top(key)(A6000_BRIDGED, LIVE) == pytest.approx(raw)


def _cell(header: str, r: GpuReading) -> str:
    cell = next(c for h, _w, _p, c in COLUMNS if h == header)
    return Text("").join(Text(s) for s, _style in cell(A6000_BRIDGED, r)).plain


@pytest.mark.parametrize("header,known,unknown", [
    ("SM MHz", {"sm_clock_mhz": 1950}, "     –"),
    ("°C", {"temp_gpu_c": 70.4}, "  –"),
    ("W", {"power_w": 162.2}, "  –/250 "),
])
def test_compact_table_prints_unknown_as_a_dash_never_0(header: str, known: dict, unknown: str) -> None:
    """The compact table printed an unknown SM clock, power or temperature as 0 (``or 0``)."""
    assert _cell(header, dataclasses.replace(LIVE)) == unknown
    shown = _cell(header, dataclasses.replace(LIVE, **known))
    assert "–" not in shown and shown.strip().startswith(str(round(next(iter(known.values())))))


def test_process_numbers_are_range_checked() -> None:
    g = GpuReading(index=0, processes=(ProcessInfo(pid=1, used_memory_bytes=-1, sm_pct=500.0, mem_pct=3.0),))
    p = check_gpu(g).processes[0]  # type: ignore[index]
    assert (p.used_memory_bytes, p.sm_pct, p.mem_pct) == (None, None, 3.0)
