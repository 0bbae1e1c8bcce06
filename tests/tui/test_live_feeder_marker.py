"""A marker dropped just before quitting reaches the recording: the live feeder takes one more real sample
when its thread stops with events still waiting for a frame (it used to be lost: markers travel with the
next frame, and none came)."""
from __future__ import annotations

import time

from helpers import sim_source

from gpuscope.core.session import Session
from gpuscope.outputs.recorder import Recorder
from gpuscope.sources.recording import open_recording
from gpuscope.tui.feeders import LiveFeeder


def _record(tmp_path, drop_marker: bool):
    src = sim_source("mixed-4")
    session = Session(src.inventory, interval_s=30.0)
    path = tmp_path / "r.jsonl.gz"
    session.start_recording(Recorder(str(path), src.inventory, command=["test"], interval_s=30.0))
    feeder = LiveFeeder(src, session, 30.0, lambda: None)  # no second tick comes within the test
    feeder.start()
    deadline = time.monotonic() + 10
    while session.frames_seen < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert session.frames_seen == 1
    if drop_marker:
        session.add_marker("just before q")
        assert session.unrecorded_events
    feeder.stop()
    session.stop_recording()
    return open_recording(path), session


def test_a_marker_dropped_before_quitting_is_in_the_recording(tmp_path):
    rec, session = _record(tmp_path, drop_marker=True)
    assert rec.n_frames == 2  # the frame at start and the one taken at the stop, with the marker
    assert [e.text for e in rec.events if e.kind == "marker"] == ["just before q"]
    assert not session.unrecorded_events


def test_no_extra_frame_without_a_waiting_event(tmp_path):
    rec, _ = _record(tmp_path, drop_marker=False)
    assert rec.n_frames == 1
