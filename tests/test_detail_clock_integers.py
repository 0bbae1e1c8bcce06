"""The detail view (``d``) printed clocks with a decimal ("now 1754.0  peak 1980.0", new-user trial): clocks
(MHz) are whole numbers everywhere; other readings keep their one decimal."""

from __future__ import annotations

import re

import pytest
from helpers import run_frames, sim_source

from gpuscope.core.session import Session
from gpuscope.tui.screens import detail_number


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
    assert detail_number(x, unit, ceiling=ceiling) == want


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
async def test_the_detail_view_shows_clocks_as_whole_numbers(size):
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
