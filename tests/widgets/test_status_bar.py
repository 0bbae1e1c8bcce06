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


async def test_header_is_made_again_exactly_when_what_it_shows_changes(monkeypatch) -> None:
    """The header's words are made only when something they show changed (most refreshes change nothing
    there): each change below shows at once, and a refresh with nothing new, or with the recording's time
    still in the same second, makes nothing."""
    from helpers import make_app

    import gpuscope.widgets.status_bar as status_bar
    from gpuscope.core.session import TickErrors
    from gpuscope.widgets.style import Palette

    made: list[int] = []
    fit = status_bar.fit_segments
    monkeypatch.setattr(status_bar, "fit_segments", lambda *a: made.append(1) or fit(*a))
    app = make_app("healthy-gen4", 0, 10)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        bar = app.query_one(status_bar.StatusBar)
        v = app.build_view(False)
        bar.show(v)
        before = len(made)
        bar.show(dataclasses.replace(v))  # another view of the same instant
        assert len(made) == before
        st = v.status
        rec = RecordingStatus(path="r.gsrec", elapsed_s=61.2)
        cases = [
            (dataclasses.replace(v, status=dataclasses.replace(st, paused=True)), "PAUSED"),
            (dataclasses.replace(v, window_s=600.0), "window 10m"),
            (dataclasses.replace(v, status=dataclasses.replace(st, tick_errors=TickErrors(2, "ValueError: x"))),
             "2 sampling errors, last: ValueError: x"),
            (dataclasses.replace(v, status=dataclasses.replace(st, recording=rec)), "REC 1m01s"),
            (dataclasses.replace(v, status=dataclasses.replace(st, recording=dataclasses.replace(rec, elapsed_s=62.1))),
             "REC 1m02s"),
            (dataclasses.replace(v, status=dataclasses.replace(st, record_error="disk full")), "disk full"),
            (dataclasses.replace(v, status=dataclasses.replace(st, interval_s=2.0)), "every 2s"),
            (dataclasses.replace(v, now=v.now + 120), clock_text(v.now + 120, False)),
            (dataclasses.replace(v, status=dataclasses.replace(st, recording=dataclasses.replace(rec, dropped=3))),
             "3 frames dropped"),
            (dataclasses.replace(v, status=dataclasses.replace(st, origin_note="replay of run.jsonl.gz",
                                                               origin_name="run.jsonl.gz")), "replay of run.jsonl.gz"),
            (dataclasses.replace(v, label="REPLAY"), " REPLAY "),
            (dataclasses.replace(v, inventory=dataclasses.replace(v.inventory, host="other-host")), "other-host"),
        ]
        for view, want in cases:
            bar.show(view)
            assert want in str(bar.render()), want
        n = len(made)
        same_second = dataclasses.replace(rec, elapsed_s=62.9)  # shown as the case before it: 1m02s
        bar.show(dataclasses.replace(v, status=dataclasses.replace(st, recording=rec)))
        bar.show(dataclasses.replace(v, status=dataclasses.replace(st, recording=same_second)))
        assert len(made) == n + 2  # 1m01s, then 1m02s once: 62.1 → 62.9 s is not made again...
        bar.show(dataclasses.replace(v, status=dataclasses.replace(st, recording=same_second)))
        assert len(made) == n + 2
        bar.palette = Palette(warn="#00ff00")  # a theme picked: the SIMULATED badge's colour
        bar.show(v)
        assert len(made) == n + 3
        assert "Color(0, 255, 0" in str(bar.render().spans)
