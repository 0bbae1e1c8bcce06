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


# ------------------------------------------------------------------ the link probe beside the links
def _probe(scenario: str):
    from gpuscope.sources import simprobe

    v = _view(scenario)
    return v, simprobe.simulate(scenario, v.inventory, t=1_764_000_000.0)


@pytest.mark.parametrize("width", [116, 76, 60, 40, 30])
def test_probe_lines_keep_the_gen1_verdict_numbers_at_every_width(width):
    """Each GPU's host↔device figures and each pair's device↔device figure with the worse % of typical and its
    level colour; narrower, the link's name goes, then the words shorten: the numbers stay."""
    from gpuscope.widgets.style import LEVEL_STYLE
    from gpuscope.widgets.topology_panel import probe_lines

    _, r = _probe("a6000-tp2-pcie-gen1")
    lines = probe_lines(r, width)
    assert all(t.cell_len <= width for t in lines)
    text = [t.plain for t in lines]
    assert text[0].startswith("Link probe") and "SIMULATED" in text[0]
    assert len(lines) == 4  # title, GPU0, GPU1, the pair
    for t in lines[1:]:
        assert "3.3" in t.plain or "1.5" in t.plain
        assert "13 %" in t.plain and ("✖" in t.plain or width < 40)
        assert any(span.style == LEVEL_STYLE["bad"] for span in t.spans)  # critical colour
    if width >= 76:
        assert "GPU0 host→dev 3.3 dev→host 3.3 GB/s: 13 % of typ 25.2 ✖ (Gen1×16<Gen4×16)" in text
        assert "GPU0↔GPU1 read 1.5 write 1.5 GB/s: 13 % of typ 11.3 ✖ (SYS staged)" in text


def test_probe_lines_of_a_healthy_8_gpu_machine_show_the_worst_and_the_selected_pair():
    from gpuscope.widgets.topology_panel import probe_lines

    _, r = _probe("h200-nvswitch-8")
    text = [t.plain for t in probe_lines(r, 116, sel=(5, 2))]
    assert sum(ln.startswith("GPU") and "host→dev" in ln for ln in text) == 8
    pairs = [ln for ln in text if "↔GPU" in ln]
    assert len(pairs) == 2 and any(ln.startswith("GPU2↔GPU5") for ln in pairs)
    assert all("✓" in ln and "(NV18)" in ln for ln in pairs)


def test_topology_panel_shows_the_probe_and_redraws_for_a_new_one():
    from dataclasses import replace

    v, r = _probe("a6000-tp2-pcie-gen1")
    before = [t.plain for t in topology_lines(v, 116)]
    after = [t.plain for t in topology_lines(replace(v, probe=r), 116)]
    assert not any("Link probe" in ln for ln in before)
    k = next(i for i, ln in enumerate(after) if ln.startswith("Link probe"))
    assert after[:k] == before[:k] and after[-1] == before[-1]  # beside the links, before the selected pair
