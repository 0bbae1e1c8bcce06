"""The App (tui/app.py) with Pilot: its messages and keys at the edges of the screen."""

from __future__ import annotations

import pytest
from helpers import pilot_until as until
from helpers import run_frames, sim_source
from rich.cells import cell_len

from gpuscope.core.session import Session
from gpuscope.tui.app import GpuscopeApp


def make_app(scenario: str, start: float, end: float) -> GpuscopeApp:
    src = sim_source(scenario)
    session = Session(src.inventory, interval_s=1.0)
    for f in run_frames(src, start, end):
        session.ingest(f)
    return GpuscopeApp(session, None, label="SIMULATED", interval_s=1.0)




@pytest.mark.parametrize(("scenario", "key", "rows", "advice"), [
    ("idle-downshift", "t", 24, "gpuscope topo"),
    ("h200-nvswitch-8", "P", 14, "detail (1-8)"),
])
async def test_no_room_message_fits_80_columns(scenario, key, rows, advice):
    """The "no room" messages of t and P fit an 80-column terminal whole: at 80×24 the line ended in "…or run…"
    and "…open a…", the advice cut off (tmux, gpuscope --simulate idle-downshift, key t; trial2)."""
    app = make_app(scenario, 0, 20)
    async with app.run_test(size=(80, rows)) as pilot:
        await pilot.pause()
        await pilot.press(key)
        await until(pilot, lambda: "no room" in app.message_line)
        assert app.message_line.endswith(advice)
        assert cell_len(" " + app.message_line) <= 80, app.message_line  # the note line's leading space
