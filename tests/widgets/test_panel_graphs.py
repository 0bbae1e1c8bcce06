"""Spare rows become graphs: the GPU panel's several metrics (heights, words, ceilings), the graphs under the
compact table (which metrics, GPUs side by side when rows are short), rate graphs scaled to the link, the
inference panel's prompt rate said once, and the newest sample drawn in the last cell."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from helpers import run_frames, sim_source

from gpuscope.core import catalogue
from gpuscope.core.history import resample
from gpuscope.core.model import EndpointReading
from gpuscope.core.session import Session
from gpuscope.core.view import ViewState
from gpuscope.widgets.gpu_table import link_top, spare_plan, table_metrics
from gpuscope.widgets.inference_panel import endpoint_lines, prompt_head, prompt_split
from gpuscope.widgets.panel_graphs import CAP_ROWS, graph_heights, graph_labels, metric_top
from gpuscope.widgets.style import spark_window

METRIC = {m.key: m for m in catalogue.panel_metrics()}


@pytest.mark.parametrize("rows,n,want", [
    (0, 5, []),
    (1, 5, [1]),
    (3, 5, [3]),  # one graph of three rows beats a second of one row
    (4, 5, [2, 2]),
    (9, 5, [3, 2, 2, 2]),
    (10, 5, [2, 2, 2, 2, 2]),  # every metric before any graph grows
    (36, 5, [8, 7, 7, 7, 7]),  # 200x60, 2 GPUs: five graphs of 7-8 rows, not one of 36
    (36, 1, [36]),  # one metric with data: it takes the rows (never a blank band)
    (50, 5, [10] * 5),  # past the cap they grow evenly
    (5, 0, []),
])
def test_graph_heights(rows: int, n: int, want: list[int]) -> None:
    got = graph_heights(rows, n)
    assert got == want and sum(got) == (rows if n else 0)
    if len(got) < n:  # a metric left out: no graph is tall
        assert max(got, default=0) < 4
    if rows <= n * CAP_ROWS:
        assert max(got, default=0) <= CAP_ROWS


@pytest.mark.parametrize("key,now,peak,top,height,over,want", [
    ("util", 96.0, 99.0, 100.0, 3, "over 1 min", ["util 96% over 1 min", "scale 0–100%", "peak 99%"]),
    ("power", 165.4, 167.0, 300.0, 2, "", ["power 165 W", "scale 0–300 W"]),
    ("power", 165.4, 167.0, 300.0, 1, "", ["power 165 W of 300 W"]),
    ("mem_used", 45.2, 45.2, 48.0, 4, "", ["memory 45.2 GiB", "scale 0–48 GiB", "peak 45.2 GiB", ""]),
    ("mem_used", 10.0, 10.0, 141.06, 2, "", ["memory 10.0 GiB", "scale 0–141.1 GiB"]),
    ("sm_clock", None, 1951.0, 2100.0, 2, "", ["SM clock –", "scale 0–2100 MHz"]),  # a lost GPU: no reading
    ("util", 5.0, 9.0, 100.0, 1, "over 1 min", ["util 5% over 1 min"]),
])
def test_graph_labels(key: str, now: float | None, peak: float, top: float, height: int, over: str,
                      want: list[str]) -> None:
    assert graph_labels(METRIC[key], now, peak, top, height, over) == want


def _view(scenario: str = "a6000-tp2-pcie-gen1", end: float = 20) -> ViewState:
    src = sim_source(scenario)
    s = Session(src.inventory, interval_s=1.0)
    for f in run_frames(src, 0, end):
        s.ingest(f)
    frame = s.last_frame
    assert frame is not None
    return ViewState(inventory=s.inventory, frame=frame, history=s.history, findings=[], window_s=60.0,
                     now=frame.t, label="SIMULATED", graphs=True)


def test_ceilings_are_the_limits_not_the_peak() -> None:
    v = _view()
    dev, r = v.inventory.devices[0], v.frame.gpus[0]  # type: ignore[union-attr]
    assert metric_top("util", dev, r, 3.0) == 100.0
    assert metric_top("power", dev, r, 20.0) == (r.power_limit_w or dev.power_limit_w)
    assert metric_top("sm_clock", dev, r, 200.0) == dev.sm_clock_max_mhz
    assert metric_top("mem_used", dev, r, 1.0) == pytest.approx(r.mem_total_bytes / 2**30)  # type: ignore[operator]
    lost = dataclasses.replace(r, lost=True, mem_total_bytes=None, power_limit_w=None)
    assert metric_top("mem_used", dev, lost, 1.0) == pytest.approx((dev.memory_total_bytes or 2**30) / 2**30)
    assert metric_top("temp", dev, r, 64.0) == 100.0 and metric_top("temp", dev, r, 104.0) == 104.0


def test_rate_graphs_of_a_lost_gpu_are_scaled_to_its_link() -> None:
    """A lost GPU has no current link: its PCIe graphs are scaled to the link at its best, so the last
    readings' noise is not drawn full height."""
    v = _view("gpu-lost", 30)
    dev, r = v.inventory.devices[2], v.frame.gpus[2]  # type: ignore[union-attr]
    assert r.lost and r.pcie_gen is None
    assert link_top(dev, r) == pytest.approx(31.5e9, rel=0.01)  # Gen4 x16 at its best
    assert link_top(dev, None) == pytest.approx(31.5e9, rel=0.01)
    times, vals = v.history.window("pcie_rx", 2, 60.0, v.now)
    drawn = spark_window(times, vals, v.now, 60.0, 40, link_top(dev, r)).strip()
    assert drawn and set(drawn) <= set("▁▂▃"), drawn  # a few GB/s of 31.5: low, not full height


@pytest.mark.parametrize("spare,n,width,want", [
    (0, 8, 78, []),
    (1, 8, 78, []),  # the header alone says nothing
    (4, 8, 78, [("util", 3)]),  # 80x24, 8 GPUs: three rows of three GPUs side by side, no blank band
    (4, 2, 78, [("util", 1), ("power", 2)]),  # the row left after util: both GPUs' power side by side
    (7, 2, 78, [("util", 1), ("power", 1), ("pcie_rx", 1)]),
    (9, 8, 118, [("util", 1)]),
    (13, 8, 118, [("util", 1), ("power", 2)]),
    (3, 8, 30, []),  # too narrow to pack four GPUs a row: nothing rather than unreadable graphs
    # 200x60, 8 GPUs (NVLink): every metric, the first two one GPU a row, the rest two a row, no row left
    (41, 8, 198, [("util", 1), ("power", 1), ("pcie_rx", 2), ("pcie_tx", 2), ("nvlink_rx", 2), ("nvlink_tx", 2),
                  ("sm_clock", 2), ("mem_used", 2)]),
    (30, 8, 198, [("util", 2), ("power", 2), ("pcie_rx", 2), ("pcie_tx", 2), ("nvlink_rx", 2), ("nvlink_tx", 2),
                  ("sm_clock", 2), ("mem_used", 8)]),  # 80-column graphs two a row: more metrics, not wider graphs
    (41, 2, 198, [("util", 1), ("power", 1), ("pcie_rx", 1), ("pcie_tx", 1), ("nvlink_rx", 1), ("nvlink_tx", 1),
                  ("sm_clock", 1), ("mem_used", 1)]),  # two GPUs: one a row (the graphs then grow taller)
])
def test_spare_plan(spare: int, n: int, width: int, want: list[tuple[str, int]]) -> None:
    metrics = table_metrics(_view("h200-nvswitch-8", 3))
    plan = spare_plan(spare, n, width, metrics)
    assert [(m[0], per_row) for m, per_row in plan] == want
    used = 1 + sum(-(-n // per_row) for _, per_row in plan) if plan else 0
    assert used <= spare
    if plan and len(plan) < len(metrics):
        assert spare - used < 2 or spare - used < -(-n // 8)  # what is left could not hold another graph


def _ep(**kw: object) -> EndpointReading:
    return EndpointReading(url="http://x", kind="vllm", model="m", up=True, gen_tokens_per_s=100.0,
                           rate_window_s=10.0, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("kw,head,split", [
    ({}, " prompt –", ""),
    ({"prompt_tokens_per_s": 500.0}, " prompt 500", ""),
    ({"prompt_computed_tokens_per_s": 0.0, "prompt_cached_tokens_per_s": 0.0}, "", "prompt computed 0 cached 0 tok/s"),
    ({"prompt_tokens_per_s": 500.0, "prompt_computed_tokens_per_s": 120.0, "prompt_cached_tokens_per_s": 380.0},
     " prompt 500", "prompt: computed 120 cached 380 tok/s"),
    ({"prompt_cached_tokens_per_s": 3.0}, "", "prompt cached 3 tok/s"),
])
def test_prompt_rate_is_said_once(kw: dict[str, float], head: str, split: str) -> None:
    e = _ep(**kw)
    assert prompt_head(e) == head and prompt_split(e) == split
    text = "\n".join(t.plain for t in endpoint_lines(e))
    assert not ("prompt –" in text and "prompt computed" in text)  # a dash and numbers for one thing


@pytest.mark.parametrize("columns", [10, 37, 80, 131])
def test_newest_sample_is_in_the_last_cell(columns: int) -> None:
    """Cells cover (now - window, now]: a sample taken now is drawn at the right edge, not dropped."""
    t = np.arange(0.0, 61.0)
    v = np.full(61, 50.0)
    drawn = spark_window(t, v, 60.0, 60.0, columns, 100.0)
    assert drawn[-1] == "▅" and set(drawn.strip()) == {"▅"}  # from the first sample in the window to now
    cells = resample(t, v, 60.0, 60.0, columns)
    assert cells[-1] == 50.0 and None not in cells[2:]
    assert resample(np.array([60.0]), np.array([1.0]), 60.0, 60.0, columns)[-1] == 1.0
    assert resample(np.array([0.0]), np.array([1.0]), 60.0, 60.0, columns) == [None] * columns  # t0 is out


@pytest.mark.parametrize(("key", "top", "want"), [
    ("sm_clock", 1979.5, "1980 MHz"),  # a window's peak as the scale: a clock is whole
    ("sm_clock", 1980.0, "1980 MHz"),
    ("power", 300.0, "300 W"),
    ("power", 349.4, "349.4 W"),
    ("mem_used", 141.1, "141.1 GiB"),
])
def test_fmt_top(key: str, top: float, want: str) -> None:
    from gpuscope.widgets.panel_graphs import fmt_top

    m = catalogue.by_key(key)
    assert fmt_top(top, m) == want


@pytest.mark.parametrize(("rows", "same", "want"), [
    (5, 4, [3, 2]),  # one row taller than the shortest panel: its first graph is a row taller
    (4, 4, [2, 2]),
    (5, 5, [3, 2]),
    (13, 12, [3, 2, 2, 2, 2, 2]),  # the same six metrics as a panel with 12 spare rows
    (12, 12, [2, 2, 2, 2, 2, 2]),
    (3, 2, [3]),  # the shortest panel holds one graph: so does this one, three rows tall
    (4, 3, [4]),  # without the shortest panel's count this panel would show two metrics ([2, 2])
    (6, 5, [3, 3]),  # and three ([2, 2, 2])
])
def test_graph_heights_count_the_metrics_of_the_shortest_panel(rows: int, same: int, want: list[int]) -> None:
    """GPU panels one row apart in height (a grid's rows split unevenly) show the same metrics: the count
    comes from the shortest panel's rows, the extra row makes a graph taller instead of another metric."""
    got = graph_heights(rows, 6, metrics_rows=same)
    assert got == want and sum(got) == rows
    assert len(got) == len(graph_heights(same, 6))


@pytest.mark.parametrize(("names", "most", "want"), [
    (["NVIDIA A100 80GB PCIe"], 60, 17),  # "A100 80GB PCIe" whole, with the index and a space
    (["NVIDIA A100 80GB PCIe"], 12, 12),  # no room: the table cuts it (table_name)
    (["NVIDIA H200"], 60, 11),  # never narrower than the usual column
    ([], 60, 11),
])
def test_name_width(names: list[str], most: int, want: int) -> None:
    """The compact table's name column grows into the columns the inline util graph leaves (gpu-lost at
    120x40 cut 'A100 80GB PCIe' to 'A100 80…' beside 50 empty columns)."""
    from gpuscope.widgets.gpu_table import name_width

    assert name_width(names, most) == want
