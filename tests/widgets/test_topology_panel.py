"""The topology panel (widgets/topology_panel.py): its hint line and its CPU-affinity column."""

from __future__ import annotations

import pytest
from helpers import run_frames, sim_source

from gpuscope.core.session import Session
from gpuscope.core.view import ViewState
from gpuscope.widgets.topology_panel import topology_lines


def _view(scenario: str) -> ViewState:
    src = sim_source(scenario)
    s = Session(src.inventory, interval_s=1.0)
    for f in run_frames(src, 0, 3):
        s.ingest(f)
    return ViewState(inventory=s.inventory, frame=s.last_frame, history=s.history, findings=[],
                     now=s.last_frame.t if s.last_frame else 0.0)


@pytest.mark.parametrize(("scenario", "legend_on", "hint"), [
    ("power-capped", False, "(t: legend)"),
    ("power-capped", True, None),
    ("mixed-4", False, "(t: other pairs, legend)"),
    ("mixed-4", True, "(t: other pairs)"),
])
def test_hint_offers_what_t_adds(scenario, legend_on, hint):
    """The topology panel's "(t: …)" hint offers only what t adds: with 2 GPUs there are no other pairs, and a
    legend already on screen is nothing new (120×40, `gpuscope --simulate power-capped`: the hint said "(t:
    other pairs, legend)" under a visible legend, and t changed nothing; trial2)."""
    text = "\n".join(t.plain for t in topology_lines(_view(scenario), 118, legend_on=legend_on))
    if hint is None:
        assert "(t:" not in text, text
    else:
        assert hint in text, text


@pytest.mark.parametrize(("affs", "room", "want"), [
    (["0-55,112-167", "56-111,168-223"], 60, 14),   # the longest, whole
    (["0-55,112-167", "56-111,168-223"], 13, 13),   # no room: the old width (short_affinity shortens)
    (["0-31"], 60, 13),                             # never narrower than the header's column
    ([None, None], 60, 13),
])
def test_affinity_width(affs, room, want):
    """The CPU-affinity column is as wide as the longest affinity that fits in the room there is."""
    from gpuscope.widgets.topology_panel import affinity_width

    assert affinity_width(affs, room) == want


def test_affinity_whole_where_there_is_room():
    """8×H200 at 120×40: "56-111,+1" beside 28 empty columns; now "56-111,168-223"."""
    lines = [t.plain for t in topology_lines(_view("h200-nvswitch-8"), 92)]
    assert any("56-111,168-223" in x for x in lines) and not any(",+1" in x for x in lines), lines
    narrow = [t.plain for t in topology_lines(_view("h200-nvswitch-8"), 65)]
    assert any("CPU affinity" in x for x in narrow) and all(len(x) <= 65 for x in narrow), narrow
