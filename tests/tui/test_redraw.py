"""The redraw scheduler (tui/redraw.py): the dirty flag, the 250 ms throttle, the graphs' cadence and the seek
that is never held back, on a fake clock and without a terminal."""

from __future__ import annotations

import pytest

from gpuscope.tui.redraw import GRAPH_S, MIN_REDRAW_S, RedrawScheduler


class Clock:
    def __init__(self, t: float = 100.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_one_wake_up_is_pending_at_most():
    r = RedrawScheduler(clock=Clock())
    assert r.mark_dirty() is True  # the first frame posts a wake-up
    assert r.mark_dirty() is False and r.mark_dirty() is False  # more frames before the redraw: none more
    r.start(force=False, seeks=0)
    assert not r.dirty and r.mark_dirty() is True  # after a redraw the next frame wakes the UI again


def test_paused_drops_the_pending_redraw():
    r = RedrawScheduler(clock=Clock())
    r.mark_dirty()
    r.drop()
    assert not r.dirty and r.mark_dirty() is True


@pytest.mark.parametrize(("since_s", "hold_s"), [(0.0, MIN_REDRAW_S), (0.1, MIN_REDRAW_S - 0.1), (MIN_REDRAW_S, 0.0),
                                                 (5.0, 0.0)])
def test_redraws_are_held_back_to_four_a_second(since_s, hold_s):
    clock = Clock()
    r = RedrawScheduler(clock=clock)
    r.start(force=False, seeks=0)
    clock.t += since_s
    assert r.hold_s(seeks=0) == pytest.approx(hold_s)


def test_the_answer_to_a_seek_is_not_held_back_and_redraws_the_graphs():
    clock = Clock()
    r = RedrawScheduler(clock=clock)
    r.start(force=True, seeks=0)
    clock.t += 0.05
    assert r.hold_s(seeks=1) == 0.0  # the feeder did a seek the screen has not shown
    assert r.start(force=False, seeks=1) is True  # ... and its redraw draws the graphs at once
    clock.t += 0.05
    assert r.hold_s(seeks=1) > 0 and r.start(force=False, seeks=1) is False  # shown: back to the cadence


def test_graphs_are_drawn_about_once_a_second_or_when_forced():
    clock = Clock()
    r = RedrawScheduler(clock=clock)
    assert r.start(force=False, seeks=0) is True  # never drawn yet
    drawn = []
    for _ in range(8):  # redraws every 0.25 s for 2 s
        clock.t += MIN_REDRAW_S
        drawn.append(r.start(force=False, seeks=0))
    assert drawn == [False, False, False, True] * 2
    clock.t += 0.01
    assert r.start(force=True, seeks=0) is True  # a key that changes the picture draws them at once
    assert r.last_graph == clock.t and GRAPH_S == 1.0


@pytest.mark.parametrize("module", ["redraw", "recording_controller", "layout"])
def test_the_apps_helpers_without_a_screen_import_no_textual(module):
    """The redraw scheduler, the recording controller and the layout plan are tested without a terminal:
    they import neither Textual nor Rich (nor any gpuscope module that draws)."""
    import ast
    from pathlib import Path

    tree = ast.parse((Path(__file__).parents[2] / "tui" / f"{module}.py").read_text())
    names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert not [n for n in names if n.split(".")[0] in ("textual", "rich")
                or n.startswith(("gpuscope.widgets", "gpuscope.tui.app", "gpuscope.tui.base"))]
