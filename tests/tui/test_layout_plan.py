"""Every GPU keeps its row before the topology panel gets any (tui/layout.py ``plan_layout``), the panels keep to
the rows the plan gave them (tui/layout_controller.py), and a terminal too short for every GPU says how many
are left out (``+N GPU``)."""

from __future__ import annotations

import math
import re

import pytest
from helpers import WALL0, run_frames
from helpers import pilot_until as until

from gpuscope.core.session import Session
from gpuscope.sources.groups import with_groups
from gpuscope.sources.live import open_source
from gpuscope.tui.app import GpuscopeApp
from gpuscope.tui.layout import plan_layout
from gpuscope.widgets.gpu_table import GpuTable, rows_shown
from gpuscope.widgets.keybar import KeyBar

GEN1 = "a6000-tp2-pcie-gen1"
# a6000-tp2-pcie-gen1 at 60 columns with its simulated vLLM: topology matrix 7 lines, pair list 5, the
# inference panel wants 7, six findings
GEN1_60 = {"topo_lines": (7, 5), "inference_lines": 7, "legend_lines": 2, "panel_rows": 9}


@pytest.mark.parametrize("width,height,n,want", [
    # (width, height, GPUs) → (GPU rows given, GPUs left out, topology form, topology rows)
    (60, 20, 2, (2, 0, 1, 7)),  # the pair list: GPU1's row stays
    (60, 24, 2, (2, 0, 0, 9)),  # the matrix
    (60, 16, 2, (2, 0, -1, 0)),  # no room for the topology: hidden, the GPUs' rows kept
    (80, 24, 2, (2, 0, 0, 9)),
    (60, 11, 8, (8, 0, -1, 0)),  # exactly the table: every GPU, nothing else
    (60, 10, 8, (6, 2, -1, 0)),  # one row short: six GPUs and "+2 GPU"
    (60, 4, 8, (0, 8, -1, 0)),  # the header and "+8 GPU"
    (120, 40, 8, (8, 0, 0, 11)),  # the matrix and its legend
])
def test_every_gpu_keeps_its_row_before_the_topology_panel(width, height, n, want):
    """At 60x20 and 60x24 with two GPUs, GPU1's row disappeared (no "+1 GPU") while a 7-row topology panel
    stayed."""
    p = plan_layout(width, height, n, 6, **GEN1_60)
    assert (p.gpus_shown, p.gpus_hidden, p.topology, p.topology_rows) == want
    table = n + 1 if p.gpus_hidden == 0 else p.gpus_shown + 2
    used = 2 + table + p.findings_rows + (p.inference_lines + 2 if p.inference_lines else 0) + p.topology_rows
    assert used <= height


@pytest.mark.parametrize("width", [60, 80, 120, 200])
@pytest.mark.parametrize("n", [1, 2, 4, 8])
def test_the_rows_given_never_exceed_the_terminal(width, n):
    """Every height from 3 to 60 rows: the panels' rows and the GPUs' add up to the terminal at most; every
    GPU has a row while the table fits; the topology panel gets rows only once every GPU has one."""
    for height in range(3, 61):
        p = plan_layout(width, height, n, 6, **GEN1_60)
        gpus = math.ceil(n / p.cols) * GEN1_60["panel_rows"] if not p.compact else (
            n + 1 if p.gpus_hidden == 0 else p.gpus_shown + 2)
        used = (2 + gpus + p.findings_rows + (p.inference_lines + 2 if p.inference_lines else 0)
                + p.topology_rows + p.procs_rows)
        assert used <= max(height, 2 + 2), (height, p)
        assert (p.gpus_shown == n) is (height - 2 >= n + 1), (height, p)
        if p.gpus_hidden:
            assert p.topology_rows == 0 and p.findings_lines == 0 and p.inference_lines == 0, (height, p)


@pytest.mark.parametrize("rows,n,want", [(0, 2, 2), (3, 2, 2), (10, 2, 2), (2, 2, 0), (10, 8, 8), (9, 8, 8),
                                         (8, 8, 6), (2, 8, 0), (1, 8, 0)])
def test_rows_shown(rows, n, want):
    """GPUs with a row in a table of ``rows`` rows (0: not laid out: all); the last row says ``+N GPU``."""
    assert rows_shown(rows, n) == want


def _app(scenario: str) -> GpuscopeApp:
    src = with_groups(open_source(scenario, virtual_at=0.0, pcie_block_s=0.0, wall0=WALL0), scenario)
    session = Session(src.inventory, interval_s=1.0)
    for f in run_frames(src, 0, 30):
        session.ingest(f)
    return GpuscopeApp(session, None, label="SIMULATED", interval_s=1.0)


def _screen(app: GpuscopeApp) -> list[str]:
    update = app.screen._compositor.render_full_update()
    return ["".join(seg.text for seg in strip) for strip in update.strips]


@pytest.mark.parametrize("size", [(60, 20), (60, 24)])
async def test_both_gpu_rows_at_60_columns_with_a_server(size):
    """`gpuscope --simulate a6000-tp2-pcie-gen1` at 60x20: the inference panel's first line wrapped to two rows
    and GPU1's row went (no "+1 GPU") while the topology panel kept its 7 rows."""
    app = _app(GEN1)
    async with app.run_test(size=size) as pilot:
        await until(pilot, lambda: app.layout_control.plan is not None and any(
            re.match(r" 1 RTX A6000", ln) for ln in _screen(app)))
        await pilot.pause()
        lines = _screen(app)
        assert any(re.match(r" 0 RTX A6000", ln) for ln in lines), "\n".join(lines)
        assert any(re.match(r" 1 RTX A6000", ln) for ln in lines), "\n".join(lines)
        table = app.query_one(GpuTable)
        assert table.size.height >= 3  # its header and both GPUs
        for panel in ("#findings", "#inference", "#bottom"):  # each within the rows the plan gave it
            assert app.query_one(panel).size.height <= {
                "#findings": app.layout_control.plan.findings_rows,
                "#inference": app.layout_control.plan.inference_lines + 2,
                "#bottom": app.layout_control.plan.topology_rows}[panel]


async def test_a_terminal_too_short_for_every_gpu_says_how_many_are_left_out():
    """Eight GPUs in 10 rows: six rows and "+2 GPU", and the topology hidden says "t topology" early in the
    footer."""
    app = _app("h200-nvswitch-8")
    async with app.run_test(size=(60, 10)) as pilot:
        await until(pilot, lambda: any("+2 GPU" in ln for ln in _screen(app)))
        lines = _screen(app)
        assert any(re.match(r" 5 H200", ln) for ln in lines) and not any(re.match(r" 6 H200", ln) for ln in lines)
        assert app.query_one(KeyBar).hints[2] == ("t", "topology")
        assert "t topology" in lines[-1]
    app = _app("h200-nvswitch-8")
    async with app.run_test(size=(120, 40)) as pilot:  # room for it: the usual order
        await until(pilot, lambda: app.layout_control.plan is not None)
        assert app.query_one(KeyBar).hints[2] == ("p", "pause")
