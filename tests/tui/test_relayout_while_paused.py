"""A layout change inside a redraw (a note line that comes or goes, findings that come or go) draws the
panels again at their new size, also while paused: a seek in a paused replay left a blank row at the
bottom of every GPU panel (tmux, the bundled demo at 120×40)."""

from __future__ import annotations

from helpers import pilot_until as until

from gpuscope.core.session import Session
from gpuscope.sources.recording import open_recording
from gpuscope.tui.app import GpuscopeApp
from gpuscope.tui.feeders import ReplayFeeder
from gpuscope.tui.run import demo_path
from gpuscope.widgets.gpu_panel import GpuPanel


def _filled(app: GpuscopeApp) -> bool:
    """Every GPU panel draws as many lines as it has rows."""
    return all(len(p._lines) == p.size.height for p in app.query(GpuPanel) if p.display)


async def test_seek_while_paused_leaves_no_blank_row_in_the_gpu_panels():
    rec = open_recording(demo_path())
    session = Session(rec.inventory, interval_s=0.5)
    app = GpuscopeApp(session, None, label="REPLAY", interval_s=0.5)
    app.feeder = ReplayFeeder(rec, session, app.notify_update, window_s=lambda: app.window_s)
    async with app.run_test(size=(120, 40)) as pilot:
        f = app.feeder
        await until(pilot, lambda: session.last_frame is not None and _filled(app))
        for key in ("right", "right", "right"):
            await pilot.press(key)
        await pilot.press("space")  # pause
        await until(pilot, lambda: not f.status().playing)
        for key in ("left", "left"):
            await pilot.press(key)
        await until(pilot, lambda: f._seek_to is None)
        await until(pilot, lambda: _filled(app), timeout=10)
        assert app.paused or not f.status().playing
