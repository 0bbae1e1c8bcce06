"""The header's clock (widgets/status_bar.py): whole minutes while watching live, seconds in a replay or
while recording; an overdue sample is said in words, so a frozen screen is never mistaken for an idle one."""

from __future__ import annotations

import dataclasses
import re
import time

import pytest

from gpuscope.core.model import Inventory
from gpuscope.core.view import RecordingStatus, ReplayStatus, StatusInfo, ViewState
from gpuscope.widgets.status_bar import clock_seconds, clock_text, stale_text

T = time.mktime((2026, 11, 30, 14, 5, 9, 0, 0, -1))


@pytest.mark.parametrize("now,seconds,want", [(T, False, "14:05"), (T, True, "14:05:09"), (0.0, False, ""),
                                              (T + 50.9, False, "14:05"), (T + 51, False, "14:06")])
def test_clock_text(now: float, seconds: bool, want: str) -> None:
    assert clock_text(now, seconds) == want


def _view(label: str, recording: bool = False, replay: bool = False) -> ViewState:
    rec = RecordingStatus(path="r.jsonl.gz", elapsed_s=3.0, frames=3, dropped=0) if recording else None
    rep = ReplayStatus(t0=0.0, t1=10.0, position=1.0, marks=(), speed=1.0, playing=True) if replay else None
    return ViewState(inventory=Inventory(host="h", devices=()), frame=None, history=None, findings=(),  # type: ignore[arg-type]
                     window_s=60.0, now=T, label=label, graphs=False, status=StatusInfo(recording=rec), replay=rep)


@pytest.mark.parametrize("label,recording,replay,want", [
    ("LIVE", False, False, False), ("SIMULATED", False, False, False), ("LIVE", True, False, True),
    ("REPLAY", False, True, True), ("REMOTE", False, False, False),
])
def test_clock_seconds_only_where_they_matter(label: str, recording: bool, replay: bool, want: bool) -> None:
    assert clock_seconds(_view(label, recording, replay)) is want


@pytest.mark.parametrize("age,interval,want", [(0.5, 1.0, ""), (4.9, 1.0, ""), (5.0, 1.0, ""), (12.0, 1.0, "no sample for 12s"),
                                               (12.0, 5.0, ""), (16.0, 5.0, "no sample for 16s"),
                                               (125.0, 1.0, "no sample for 2m05s")])
def test_stale_text(age: float, interval: float, want: str) -> None:
    assert stale_text(age, interval) == want


async def test_header_says_when_samples_stop_and_clears_when_they_return() -> None:
    """With the clock in whole minutes, a stalled sampler must not look like an idle machine: the app's
    check (every 2 s) puts "no sample for …" in the header; the next sample takes it away."""

    from helpers import make_app

    from gpuscope.widgets.status_bar import StatusBar

    app = make_app("healthy-gen4", 0, 10)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        bar = app.query_one(StatusBar)
        bar.watch_stale = True
        assert not bar.stale_changed(1.0)
        bar._seen_at -= 20  # the last sample arrived 20 s ago (plus however long this loaded machine took)
        app._check_stale()
        said = re.search(r"no sample for (\d+)s", str(bar.render()))
        assert said and 20 <= int(said[1]) <= bar.sample_age() + 1, str(bar.render())  # the age, whole seconds
        assert re.search(r"\d\d:\d\d$", str(bar.render()).rstrip())  # the clock stays (whole minutes)
        frame = app.session.last_frame
        app.session.ingest(dataclasses.replace(frame, t=frame.t + 1))  # a new sample arrives
        app.refresh_view(force=True)
        assert "no sample" not in str(bar.render())
