"""The label of the mark n/N jumped to leaves the screen when a seek leaves the mark: at 34 s of the demo
the message line still said "+4s phase: idle" (tmux, 80×24, keys space n n N → → →)."""

from __future__ import annotations

from helpers import pilot_until as until

from gpuscope.core.session import Session
from gpuscope.sources.recording import open_recording
from gpuscope.tui.app import GpuscopeApp
from gpuscope.tui.feeders import ReplayFeeder
from gpuscope.tui.run import demo_path


async def test_a_seek_clears_the_mark_label_but_not_other_messages():
    rec = open_recording(demo_path())
    session = Session(rec.inventory, interval_s=0.5)
    app = GpuscopeApp(session, None, label="REPLAY", interval_s=0.5)
    app.feeder = ReplayFeeder(rec, session, app.notify_update, window_s=lambda: app.window_s)
    async with app.run_test(size=(80, 24)) as pilot:
        f = app.feeder
        await until(pilot, lambda: session.last_frame is not None)
        await pilot.press("space")
        await until(pilot, lambda: not f.status().playing)
        await pilot.press("n")
        await until(pilot, lambda: f._seek_to is None)
        said = app.message_line
        assert "phase" in said or "start" in said, said
        await pilot.press("right")
        await until(pilot, lambda: f._seek_to is None)
        assert app.message_line == ""
        app.message_line = "recording is not available during replay"  # any other message stays
        await pilot.press("left")
        await until(pilot, lambda: f._seek_to is None)
        assert app.message_line == "recording is not available during replay"
