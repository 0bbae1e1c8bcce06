"""The detail view (``d``, 1-8): graphs laid out to the screen, never wrapped, aligned under one label column,
taller when rows are spare, scrolling (and saying so) when they are not; memory in GiB.

The Pilot tests fill a history longer than the graph is wide (4 samples a second on a virtual clock, no
sleeps) and compare the composed screen with the detail view's own lines, live and paused.
"""

from __future__ import annotations

import re
import time

import pytest
from helpers import run_frames, sim_source
from rich.cells import cell_len
from rich.text import Text

from gpuscope.core import catalogue
from gpuscope.core.model import DeviceInfo, GpuReading
from gpuscope.core.session import Session
from gpuscope.tui.app import GpuDetailScreen, GpuscopeApp
from gpuscope.tui.screens import detail_number, detail_top, round_up_2
from gpuscope.widgets.detail_graphs import LABEL_MIN, graph_block, graph_heights, graph_labels, label_width
from gpuscope.widgets.processes_panel import fmt_mem
from gpuscope.widgets.style import BAR_FULL, SPARK

BLOCKS = set(SPARK) | {BAR_FULL}
STEP = 0.25  # seconds between samples: a 60 s window holds 240, more than any graph here is wide


@pytest.mark.parametrize("free,n,want", [
    (34, 12, [3] * 10 + [2] * 2),  # 120x40, 12 graphs: the remainder goes to the first graphs
    (35, 9, [4] * 8 + [3]),  # 120x40, 9 graphs: the ~15 spare rows of 3-row graphs go to taller ones
    (19, 9, [3] + [2] * 8),
    (10, 9, [2] * 9),  # too short: 2 rows each, and the view scrolls
    (-5, 3, [2] * 3),  # no rows left at all (a long process list)
    (200, 4, [10] * 4),  # capped: rows beyond the cap stay blank
    (41, 4, [10] * 4),
    (0, 0, []),
])
def test_graph_heights(free: int, n: int, want: list[int]) -> None:
    assert graph_heights(free, n) == want


@pytest.mark.parametrize("height,want", [
    (4, ["power W", "now 205.2  peak 205.5", "scale 0–300", ""]),
    (3, ["power W", "now 205.2  peak 205.5", "scale 0–300"]),
    (2, ["power W  0–300", "now 205.2  peak 205.5"]),  # the scale joins the title
    (1, ["power W 205.2"]),
])
def test_graph_labels(height: int, want: list[str]) -> None:
    assert graph_labels("power W", "205.2", "205.5", "300", height) == want


def test_graph_labels_fold_alike() -> None:
    assert graph_labels("power W", "205.2", "205.5", "300", 3, fold=True) == ["power W  0–300", "now 205.2  peak 205.5", ""]


@pytest.mark.parametrize("labels,total,want", [
    (["power W"], 120, LABEL_MIN),
    (["now 1440.0  peak 1980.0"], 120, 24),  # the label that pushed its graph one column right
    (["x" * 60], 120, 40),  # a third of the width at most
    (["x" * 60], 40, LABEL_MIN),
    (["x" * 60], 25, 15),  # the graph keeps 10 columns
])
def test_label_width(labels: list[str], total: int, want: int) -> None:
    assert label_width(labels, total) == want


@pytest.mark.parametrize("label", ["power W", "now 1440.0  peak 1980.0", "x" * 40, ""])
@pytest.mark.parametrize("cells", [[None] * 30, [1.0] * 30, [None] * 10 + [0.5] * 20, [0.0, 2.0] * 15])
def test_graph_block_lines_are_exact(label: str, cells: list[float | None]) -> None:
    lines = graph_block([label, "b", "c"], cells, 1.0, 22)
    assert len(lines) == 3
    for t in lines:
        assert cell_len(t.plain) == 22 + 30 and t.no_wrap
        assert not BLOCKS & set(t.plain[:22])  # nothing of the graph in the label column
        assert t.plain[21] == " "  # a space between label and graph, even for a cut label


@pytest.mark.parametrize("n,want", [(None, "–"), (45.2 * 2**30, "45.2 GiB"), (141 * 10**9, "131 GiB"),
                                    (99.96 * 2**30, "100 GiB"), (512 * 2**20, "512 MiB"), (2 * 2**40, "2.0 TiB"),
                                    (4096, "4 KiB"), (1023.9 * 2**30, "1024 GiB")])
def test_fmt_mem_binary_and_narrow(n: float | None, want: str) -> None:
    got = fmt_mem(None if n is None else int(n))
    assert got == want and len(got) <= 8


def test_memory_metrics_in_gib() -> None:
    for name in ("mem_used_bytes", "mem_total_bytes"):
        m = next(m for m in catalogue.METRICS if m.name == name)
        assert m.unit == "GiB" and m.scale == 2**30 and m.label.endswith("GiB")


# ---------------------------------------------------------------------------------------------- Pilot

def screen_lines(app: GpuscopeApp) -> list[str]:
    update = app.screen._compositor.render_full_update()
    return ["".join(seg.text for seg in strip) for strip in update.strips]


def detail_content(app: GpuscopeApp) -> list[str]:
    content = app.screen.query_one("#detail").content
    assert isinstance(content, Text)
    return content.plain.split("\n")


def layout_problems(app: GpuscopeApp, size: tuple[int, int]) -> list[str]:
    """What is wrong with the detail screen: a line wider than the terminal or the view, a wrapped line
    (the screen differs from the view's lines), graphs not starting at one column."""
    w, h = size
    out = []
    lines = detail_content(app)
    view_w = w - GpuDetailScreen.CHROME_COLS
    for ln in lines:
        if cell_len(ln) > view_w:
            out.append(f"line of {cell_len(ln)} cells in {view_w}: {ln!r}")
    static = app.screen.query_one("#detail")
    if static.size.height != len(lines):
        out.append(f"{len(lines)} lines drawn in {static.size.height} rows (wrapped)")
    scroll_y = round(app.screen.query_one("#detail-scroll").scroll_y)
    screen = screen_lines(app)
    for k, row in enumerate(screen[1:-1]):  # between the header and the footer
        want = lines[scroll_y + k] if scroll_y + k < len(lines) else ""
        if row[1:w - 2].rstrip() != want.rstrip():
            out.append(f"screen row {k + 1} is not view line {scroll_y + k}:\n  {row!r}\n  {want!r}")
    graph = [ln for ln in lines if BLOCKS & set(ln)]
    if not graph:
        out.append("no graph drawn")
    starts = {min(ln.index(c) for c in BLOCKS if c in ln) for ln in graph}
    widths = {cell_len(ln) for ln in graph}
    if widths != {view_w}:
        out.append(f"graph lines of {sorted(widths)} cells, want {view_w}")
    # the history is longer than the window: some graph fills its row from the first column, none starts left
    first = min(starts, default=0)
    if any(BLOCKS & set(ln[:first]) for ln in graph) or first < LABEL_MIN:
        out.append(f"a graph starts at column {first}, inside the label column")
    full = [ln for ln in graph if not set(ln[first:]) - BLOCKS]
    if not full:
        out.append(f"no graph row is full from column {first}: the history does not fill the window")
    return out


def make_app(scenario: str, end: float) -> tuple[GpuscopeApp, object, Session]:
    src = sim_source(scenario)
    session = Session(src.inventory, interval_s=STEP)
    for f in run_frames(src, 0, end, step=STEP):
        session.ingest(f)
    return GpuscopeApp(session, None, label="SIMULATED", interval_s=STEP), src, session


async def settle(pilot, cond, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond() and time.monotonic() < deadline:
        await pilot.pause(0.02)


@pytest.mark.slow
@pytest.mark.parametrize("paused", [False, True], ids=["live", "paused"])
@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
@pytest.mark.parametrize("scenario", ["a6000-tp2-pcie-gen1", "h200-nvswitch-8"])
async def test_detail_fits_with_a_long_history(scenario: str, size: tuple[int, int], paused: bool) -> None:
    app, src, session = make_app(scenario, 90.0)  # 360 samples, 240 of them in the 60 s window
    n = len(session.inventory.devices)
    async with app.run_test(size=size) as pilot:
        if paused:
            await pilot.press("p")
            assert app.paused
        await pilot.press(str(n))  # the last GPU
        await settle(pilot, lambda: isinstance(app.screen, GpuDetailScreen) and not layout_problems(app, size))
        assert isinstance(app.screen, GpuDetailScreen) and app.screen.index == n - 1
        found = layout_problems(app, size)
        assert not found, "\n".join(found + screen_lines(app))
        before = detail_content(app)
        # time goes on: 10 s more frames while the detail view is open
        for f in run_frames(src, 90.0 + STEP, 100.0, step=STEP):
            with session.lock:
                session.ingest(f)
        app.notify_update()
        if paused:  # a paused view stays as it was, and stays whole
            await pilot.pause(0.1)
            assert detail_content(app) == before
        else:
            await settle(pilot, lambda: detail_content(app) != before and not layout_problems(app, size))
            assert detail_content(app) != before
        found = layout_problems(app, size)
        assert not found, "\n".join(found + screen_lines(app))
        foot = screen_lines(app)[-1]
        scrolls = len(detail_content(app)) > size[1] - 2
        assert ("↑↓ scroll" in foot) == scrolls, foot
        if scrolls:  # the hint is true: the keys reach the last graph
            last = detail_content(app)[-1]
            await pilot.press("end")
            await settle(pilot, lambda: screen_lines(app)[-2][1:size[0] - 2].rstrip() == last.rstrip())
            assert screen_lines(app)[-2][1:size[0] - 2].rstrip() == last.rstrip()
            assert not layout_problems(app, size)


@pytest.mark.slow
@pytest.mark.parametrize("size,scenario", [((120, 40), "a6000-tp2-pcie-gen1"), ((200, 60), "h200-nvswitch-8"),
                                           ((120, 40), "h200-nvswitch-8")])
async def test_spare_rows_go_to_the_graphs(size: tuple[int, int], scenario: str) -> None:
    app, _, _ = make_app(scenario, 70.0)
    async with app.run_test(size=size) as pilot:
        await pilot.press("1")
        await settle(pilot, lambda: isinstance(app.screen, GpuDetailScreen) and not layout_problems(app, size))
        lines = detail_content(app)
        assert len(lines) == size[1] - 2, "\n".join(screen_lines(app))  # no blank row, nothing to scroll
        assert "↑↓ scroll" not in screen_lines(app)[-1]
        text = "\n".join(lines)
        assert "memory used GiB" in text and " GB " not in text


@pytest.mark.parametrize(("x", "unit", "ceiling", "want"), [
    (1754.0, "MHz", False, "1754"),  # was 1754.0
    (1754.4, "MHz", False, "1754"),  # a cell's mean: still a whole number
    (1754.6, "MHz", False, "1755"),
    (1980.0, "MHz", True, "1980"),
    (1979.5, "MHz", True, "1980"),  # a ceiling from the data's peak (no clock max known)
    (0.0, "MHz", False, "0"),
    (None, "MHz", False, "–"),
    (float("nan"), "MHz", False, "–"),
    (45.25, "%", False, "45.2"),  # other readings keep one decimal
    (100.0, "%", True, "100"),
    (349.0, "W", False, "349.0"),
    (31.5, "GB/s", True, "31.5"),
    (None, "W", False, "–"),
])
def test_detail_number(x, unit, ceiling, want):
    """The detail view (``d``) printed clocks with a decimal ("now 1754.0  peak 1980.0"): clocks
    (MHz) are whole numbers everywhere; other readings keep their one decimal."""
    assert detail_number(x, unit, ceiling=ceiling) == want


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
async def test_the_detail_view_shows_clocks_as_whole_numbers(size):
    """The detail view (``d``) printed clocks with a decimal ("now 1754.0  peak 1980.0"): clocks
    (MHz) are whole numbers everywhere; other readings keep their one decimal."""
    from textual.widgets import Static

    from gpuscope.tui.app import GpuDetailScreen, GpuscopeApp

    src = sim_source("h200-nvswitch-8")
    session = Session(src.inventory, interval_s=1.0)
    for f in run_frames(src, 0, 30):
        session.ingest(f)
    app = GpuscopeApp(session, None, label="SIMULATED", interval_s=1.0, compact=False)
    async with app.run_test(size=size) as pilot:
        await pilot.press("1")
        for _ in range(200):
            if isinstance(app.screen, GpuDetailScreen):
                break
            await pilot.pause(0.02)
        assert isinstance(app.screen, GpuDetailScreen)
        await pilot.pause()
        lines = str(app.screen.query_one("#detail", Static).content).split("\n")
    k = next(i for i, ln in enumerate(lines) if ln.startswith("SM clock MHz"))
    mine = lines[k:k + 2] + [ln for ln in lines[k + 2:k + 3] if ln.startswith("scale")]
    words = " ".join(ln[:40] for ln in mine)  # its labels: title (with the scale when folded), now/peak, scale
    assert re.search(r"now \d+  peak \d+\b", words), words
    assert re.search(r"0–\d+\b", words), words
    assert not re.search(r"\d\.\d", words), words  # no decimal anywhere in a clock's labels
    assert any(re.search(r"now \d+\.\d  peak", ln) for ln in lines), lines  # other readings keep theirs


A100 = DeviceInfo(index=2, name="NVIDIA A100 80GB PCIe", uuid="u", bus_id="b", memory_total_bytes=80 * 2**30,
                  sm_clock_max_mhz=1410, power_limit_w=300.0, pcie_gen_gpu_max=4, pcie_width_gpu_max=16,
                  pcie_gen_sys_max=4, pcie_width_sys_max=16)
LOST = GpuReading(index=2, lost=True)
LIVE = GpuReading(index=2, mem_total_bytes=40 * 2**30, pcie_gen=1, pcie_width=16)


@pytest.mark.parametrize(("metric", "reading", "peak", "want"), [
    ("mem_used", LOST, 70.0, 80.0),      # was 70.0 (the peak)
    ("mem_used", None, 70.0, 80.0),
    ("mem_used", LIVE, 30.0, 40.0),      # a reading's own size wins
    ("pcie_tx", LOST, 1.02678, 31.5),    # was 1.02678: Gen4×16 is the best this link trains to
    ("pcie_rx", None, 2.57, 31.5),
    ("pcie_rx", LIVE, 2.57, 4.0),        # the trained link (Gen1×16), not the best one
    ("power", LOST, 246.3, 300.0),
    ("sm_clock", LOST, 1320.0, 1410.0),
    ("temp", LOST, 66.0, 100.0),
])
def test_detail_top_of_a_lost_gpu(metric, reading, peak, want):
    """A lost GPU's detail graphs keep their ceilings from the inventory: its last reading has no memory size and
    no link, so the scales fell back to the window's peak ("memory used 0–70" on an 80 GiB A100, drawn full
    height; "PCIe TX 0–1.02678" drawn full height for 1.0 of 31.5 GB/s). gpuscope --simulate gpu-lost, key 3,
    120×40 (trial2)."""
    assert detail_top(metric, A100, reading, peak) == want


def test_pcie_without_any_link_facts_falls_back_to_a_round_peak():
    """A lost GPU's detail graphs keep their ceilings from the inventory: its last reading has no memory size and
    no link, so the scales fell back to the window's peak ("memory used 0–70" on an 80 GiB A100, drawn full
    height; "PCIe TX 0–1.02678" drawn full height for 1.0 of 31.5 GB/s). gpuscope --simulate gpu-lost, key 3,
    120×40 (trial2)."""
    bare = DeviceInfo(index=0, name="x", uuid="u", bus_id="b")
    top = detail_top("pcie_tx", bare, LOST, 1.02678)
    assert top == 1.1 and detail_number(top, "GB/s", ceiling=True) == "1.1"


@pytest.mark.parametrize(("x", "want"), [
    (1.02678, 1.1), (2.57321, 2.6), (70.0, 70.0), (257.3, 260.0), (99.0, 99.0), (100.0, 100.0),
    (0.013, 0.013), (0.0131, 0.014), (0.0, 0.0), (-3.0, -3.0), (float("inf"), float("inf")),
])
def test_round_up_2(x, want):
    """A lost GPU's detail graphs keep their ceilings from the inventory: its last reading has no memory size and
    no link, so the scales fell back to the window's peak ("memory used 0–70" on an 80 GiB A100, drawn full
    height; "PCIe TX 0–1.02678" drawn full height for 1.0 of 31.5 GB/s). gpuscope --simulate gpu-lost, key 3,
    120×40 (trial2)."""
    assert round_up_2(x) == want


async def test_a_redraw_of_a_detail_view_without_its_widgets_draws_nothing():
    """A redraw queued before a key that opened or closed a GPU's detail view reached the view while its widgets
    were not there (pushed but not composed, or being removed) and raised NoMatches, which ended the app: seen
    on a loaded machine (CI running two suites at once), `2` then `P` then escape in the processes test."""
    src = sim_source("mixed-4")
    session = Session(src.inventory, interval_s=1.0)
    for f in run_frames(src, 0, 5):
        session.ingest(f)
    app = GpuscopeApp(session, None, label="SIMULATED", interval_s=1.0)
    async with app.run_test(size=(100, 30)) as pilot:
        view = app.build_view(True)
        GpuDetailScreen(1).show(view)  # never mounted: no widgets, no error
        await pilot.press("2")
        screen = app.screen
        assert isinstance(screen, GpuDetailScreen)
        await pilot.press("escape")
        screen.show(view)  # removed: no error either
        assert not isinstance(app.screen, GpuDetailScreen)
