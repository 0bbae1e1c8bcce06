"""widgets/lines.py changed_cells: the fast comparison (strings and style runs) finds the same cells as
comparing the two strips cell by cell."""

from __future__ import annotations

from helpers import examples
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

from gpuscope.widgets.lines import changed_cells

STYLES = [None, Style(bold=True), Style(color="red"), Style(bold=True, color="red"), Style(dim=True)]


def cell_by_cell(old: Strip, new: Strip) -> tuple[int, int] | None:
    """The reference: every cell's (character, style) compared."""
    width = new.cell_length
    if old.cell_length != width:
        return (0, width)
    a = [(ch, seg.style) for seg in old for ch in seg.text]
    b = [(ch, seg.style) for seg in new for ch in seg.text]
    if len(a) != width or len(b) != width:
        return (0, width)
    start = 0
    while start < width and a[start] == b[start]:
        start += 1
    if start == width:
        return None
    end = width
    while end > start and a[end - 1] == b[end - 1]:
        end -= 1
    return (start, end)


segments = st.lists(st.tuples(st.text(alphabet="ab ▁█", min_size=1, max_size=6), st.sampled_from(range(len(STYLES)))),
                    min_size=1, max_size=8)


def strip_of(segs: list[tuple[str, int]]) -> Strip:
    return Strip([Segment(text, STYLES[k]) for text, k in segs])


@settings(max_examples=examples(400), deadline=None)
@given(old=segments, edits=st.lists(st.tuples(st.integers(0, 40), st.sampled_from("ab ▁"), st.sampled_from(range(len(STYLES)))),
                                    max_size=3), resplit=st.booleans())
def test_same_cells_as_cell_by_cell(old: list[tuple[str, int]], edits: list[tuple[int, str, int]], resplit: bool) -> None:
    cells = [(ch, k) for text, k in old for ch in text]
    for pos, ch, k in edits:  # change a few cells' text and/or style
        if cells:
            cells[pos % len(cells)] = (ch, k)
    # the new strip cut into segments differently (one per cell, or runs), as Rich may
    new = [(ch, k) for ch, k in cells] if resplit else old if not edits else [(ch, k) for ch, k in cells]
    a, b = strip_of(old), strip_of(new)
    assert changed_cells(a, b) == cell_by_cell(a, b)


def test_examples() -> None:
    s = Strip([Segment("PWR ", None), Segment("640", STYLES[1]), Segment(" W", None)])
    t = Strip([Segment("PWR ", None), Segment("641", STYLES[1]), Segment(" W", None)])
    assert changed_cells(s, t) == (6, 7)
    assert changed_cells(s, s) is None
    u = Strip([Segment("PWR ", None), Segment("640", STYLES[2]), Segment(" W", None)])
    assert changed_cells(s, u) == (4, 7)
    assert changed_cells(s, Strip([Segment("PWR 640 W!", None)])) == (0, 10)
    wide = Strip([Segment("PWR 6漢 W", None)])
    assert changed_cells(wide, wide) == (0, 9)
