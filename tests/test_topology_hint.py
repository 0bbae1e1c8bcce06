"""The topology panel's "(t: …)" hint offers only what t adds: with 2 GPUs there are no other pairs, and
a legend already on screen is nothing new (120×40, `gpuscope --simulate power-capped`: the hint said
"(t: other pairs, legend)" under a visible legend, and t changed nothing; trial2)."""

from __future__ import annotations

import pytest
from conftest import run_frames, sim_source

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
    text = "\n".join(t.plain for t in topology_lines(_view(scenario), 118, legend_on=legend_on))
    if hint is None:
        assert "(t:" not in text, text
    else:
        assert hint in text, text
