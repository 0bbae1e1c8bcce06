"""widgets/textual_private.py (partial writes): a partial update writes only from the segment where a changed span starts, and
the terminal ends up showing exactly what Textual's own (longer) output would have shown."""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from textual.geometry import Region
from textual.strip import Strip

from gpuscope.widgets import textual_private as partial_writes

if not partial_writes.MATCHES:  # the code under test is for one Textual; another has its public paths only
    pytest.skip(f"written for Textual {partial_writes.WRITTEN_FOR}", allow_module_level=True)
from textual._compositor import ChopsUpdate  # noqa: E402

ORIGINAL = partial_writes.TEXTUAL_RENDER_SEGMENTS
MOVE = re.compile(r"\x1b\[(\d+);(\d+)H")
SGR = re.compile(r"\x1b\[[0-9;]*m")


def apply(screen: list[list[str]], data: str) -> None:
    """Write ``data`` (text, cursor moves and styles, which are ignored) onto ``screen`` as a terminal would."""
    y = x = 0
    data = SGR.sub("", data)
    for k, part in enumerate(MOVE.split(data)):
        if k % 3 == 1:
            y = int(part) - 1
        elif k % 3 == 2:
            x = int(part) - 1
        else:
            for ch in part:
                if ch == "\n":
                    continue
                screen[y][x] = ch
                x += 1


def update(lines: list[list[str]], spans: list[tuple[int, int, int]]) -> ChopsUpdate:
    """One chop per line (a widget as wide as the screen), each line cut into runs of several styles."""
    chops = [{0: Strip([Segment(run, Style(bold=k % 2 == 1)) for k, run in enumerate(_runs("".join(ln)))])}
             for ln in lines]
    return ChopsUpdate(chops, spans, [[len(ln)] for ln in lines])


def _runs(s: str) -> list[str]:
    out, k = [], 0
    while k < len(s):
        n = 1 + (k * 7) % 5
        out.append(s[k:k + n])
        k += n
    return out


CONSOLE = Console(color_system=None, force_terminal=True, width=200)


@pytest.mark.parametrize("x1,x2,want_start", [(0, 3, 0), (3, 5, 1), (10, 12, 10), (19, 20, 18), (5, 20, 4)])
def test_starts_at_the_segment_holding_the_span(x1: int, x2: int, want_start: int) -> None:
    line = list("abcdefghijklmnopqrst")  # runs (see _runs): a|bcd|efgh|ij|k|lmn|opqr|st
    out = partial_writes.render_segments(update([line], [(0, x1, x2)]), CONSOLE)
    m = MOVE.match(out)
    assert m and int(m.group(2)) - 1 == want_start
    assert SGR.sub("", out[m.end():]) == "".join(line)[want_start:x2]


@pytest.mark.parametrize("seed", range(20))
def test_screen_is_the_same_as_with_textuals_output(seed: int) -> None:
    rnd = random.Random(seed)
    w, h = 40, 6
    new = [[rnd.choice("abc xyz01") for _ in range(w)] for _ in range(h)]
    spans = sorted({(y, a, a + rnd.randint(1, w - a)) for y in rnd.sample(range(h), 3) for a in [rnd.randrange(w)]})
    upd = update(new, spans)
    ours = partial_writes.render_segments(upd, CONSOLE)
    theirs = ORIGINAL(upd, CONSOLE)
    a = [["."] * w for _ in range(h)]
    b = [["."] * w for _ in range(h)]
    apply(a, theirs)
    apply(b, ours)
    # every cell of a span shows the new text either way; ours writes no more than Textual's
    for y, x1, x2 in spans:
        assert b[y][x1:x2] == new[y][x1:x2] == a[y][x1:x2]
    assert all(b[y][x] in (".", new[y][x]) for y in range(h) for x in range(w))
    assert len(ours) <= len(theirs)


def test_install_is_idempotent_and_only_when_active() -> None:
    assert partial_writes.install() is partial_writes.install() is partial_writes.ACTIVE
    assert (ChopsUpdate.render_segments is partial_writes.render_segments) is partial_writes.ACTIVE


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
async def test_partial_updates_leave_the_screen_as_a_full_redraw_would(size: tuple[int, int]) -> None:
    """Change a few cells in two GPU panels (or table rows) far apart; apply the partial update Textual
    sends (with both replacements installed) to the screen as it was: it must read exactly like a full
    redraw of the new screen, and it must have been rendered from the changed rows only."""

    from helpers import make_app

    from gpuscope.widgets.lines import LineWidget

    captured: list[ChopsUpdate] = []
    original_init = ChopsUpdate.__init__

    def spy(self, chops, spans, chop_ends):  # type: ignore[no-untyped-def]
        captured.append(self)
        original_init(self, chops, spans, chop_ends)

    app = make_app("h200-nvswitch-8", 0, 30)
    async with app.run_test(size=size) as pilot:
        for _ in range(6):
            await pilot.pause()
        assert (ChopsUpdate.render_segments is partial_writes.render_segments) is partial_writes.ACTIVE
        comp = app.screen._compositor
        before = [[ch for ch in "".join(s.text for s in row)] for row in comp.render_full_update().strips]
        widgets = [w for w in app.screen.query(LineWidget) if w.display and w.size.height > 1]
        first, last = widgets[0], widgets[-1]
        for w, k in ((first, 1), (last, len(last._lines) - 1)):
            lines = list(w._lines)
            t = lines[k]
            lines[k] = t[:5] + type(t)("#", style="bold") + t[6:]
            w.set_lines(lines)
        ChopsUpdate.__init__ = spy  # type: ignore[method-assign]
        try:
            for _ in range(3):
                await pilot.pause()
        finally:
            ChopsUpdate.__init__ = original_init  # type: ignore[method-assign]
        assert captured, "no partial update was sent"
        for upd in captured:
            apply(before, partial_writes.render_segments(upd, CONSOLE))
        after = ["".join(s.text for s in row) for row in comp.render_full_update().strips]
        assert ["".join(r) for r in before] == after
        assert any("#" in row for row in after)


@pytest.mark.parametrize("x, y", [(0, 0), (5, 0), (0, 7), (79, 23), (199, 59)])
def test_move_to_is_richs_cursor_sequence(x: int, y: int) -> None:
    from rich.control import Control

    assert partial_writes.move_to(x, y) == Control.move_to(x, y).segment.text


class _Driver:
    """Records what the app writes (the terminal end of Textual's driver)."""

    is_inline = False

    def __init__(self) -> None:
        self.writes: list[str] = []
        self.flushes = 0

    def write(self, data: str) -> None:
        self.writes.append(data)

    def flush(self) -> None:
        self.flushes += 1


@pytest.mark.parametrize("sync", [True, False])
def test_an_update_is_one_write(sync: bool) -> None:
    """Textual writes synchronized-output start, update and end separately; write_update writes them as
    one string, in the same order, and the cursor goes where Textual puts it."""
    from types import SimpleNamespace

    from textual._ansi_sequences import SYNC_END, SYNC_START
    from textual.geometry import Offset, Size

    line = list("abcdefghijklmnopqrst")
    upd = update([line, line], [(0, 2, 6), (1, 0, 20)])
    driver = _Driver()
    app = SimpleNamespace(_driver=driver, is_headless=False, _running=True, _closed=False, _batch_count=0,
                          _sync_available=sync, console=CONSOLE, cursor_position=Offset(3, 1),
                          screen=SimpleNamespace(outer_size=Size(20, 2)), _previous_cursor_position=None)
    assert partial_writes.write_update(app, upd)
    assert len(driver.writes) == 1 and driver.flushes == 1
    body = upd.render_segments(CONSOLE) + "\x1b[2;4H"  # ours where installed (textual_private.ACTIVE)
    assert driver.writes[0] == (SYNC_START + body + SYNC_END if sync else body)
    assert not partial_writes.write_update(app, "not a compositor update")  # left to Textual


_seg_texts = st.text(alphabet="ab 日█–\u200b\u0301\x07\t", min_size=0, max_size=5)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(_seg_texts, st.sampled_from([None, Style(bold=True), Style(color="red")])),
                min_size=1, max_size=8),
       st.integers(0, 12), st.integers(-3, 30), st.integers(-3, 30))
def test_span_text_is_crop_skip_render(parts, x, x1_off, right):
    """span_text (no Strips built) writes what the Strip path wrote: crop(0, right), whole segments
    left of x1 skipped, rendered; with empty segments, double-width characters, and zero-width ones beside them
    (a wide and a zero-width character are two characters in two cells, not one each)."""
    strip = Strip([Segment(t, s) for t, s in parts])
    x1 = x + x1_off
    cropped = strip.crop(0, right)
    segments, start = list(cropped), x
    if start < x1:
        k = 0
        while k < len(segments) and start + segments[k].cell_length <= x1:
            start += segments[k].cell_length
            k += 1
        segments = segments[k:]
    console = Console(color_system="truecolor", force_terminal=True, width=200)
    assert partial_writes.span_text(strip, x, x1, right, console) == (start, Strip(segments).render(console))


@pytest.mark.parametrize("rows, x, x1, above, want", [
    ([], 0, 10, [], []),
    ([1, 2, 3], 0, 10, [], [1, 2, 3]),  # nothing in front
    ([1, 2, 3], 0, 10, [(0, 0, 10, 3)], [3]),  # hidden in rows 0-2
    ([1, 2, 3], 0, 10, [(0, 0, 9, 5)], [1, 2, 3]),  # one column still shows
    ([1, 2, 3], 2, 8, [(0, 0, 9, 5)], []),  # a narrower widget, hidden
    ([1, 2, 3], 0, 10, [(0, 0, 5, 5), (5, 2, 10, 5)], [1]),  # two side by side, joined where both are
    ([1, 2, 3], 0, 10, [(0, 0, 4, 5), (5, 0, 10, 5)], [1, 2, 3]),  # a gap of one column between them
    ([1, 2, 3], 0, 10, [(6, 0, 10, 5), (0, 0, 7, 5)], []),  # overlapping, given right to left
    ([4], 0, 10, [(0, 0, 10, 4)], [4]),  # the row below a widget
])
def test_uncovered(rows: list[int], x: int, x1: int, above: list[tuple[int, int, int, int]], want: list[int]) -> None:
    assert partial_writes.uncovered(rows, x, x1, above) == want


def _chops(comp, rows: list[int], ours: bool, skip: bool) -> list[dict[int, object]]:
    """The chops of a partial update of ``rows`` (every row's whole width): Textual's own renders or ours
    (with or without leaving hidden rows out), each chop as the text and styles of its segments."""
    crop = Region(0, rows[0], comp.size.width, rows[-1] + 1 - rows[0])
    saved = partial_writes.SKIP_HIDDEN
    partial_writes.SKIP_HIDDEN = skip
    comp._gs_rows = rows if ours else None
    get = partial_writes.get_renders if ours else partial_writes.TEXTUAL_GET_RENDERS
    original = type(comp)._get_renders
    type(comp)._get_renders = get
    try:
        chops = comp._render_chops(crop, set(rows).__contains__)
    finally:
        type(comp)._get_renders = original
        partial_writes.SKIP_HIDDEN = saved
        comp._gs_rows = None
    return [{cut: (None if strip is None else list(strip)) for cut, strip in chops[y].items()} for y in rows]


@pytest.mark.parametrize("scenario, size", [("h200-nvswitch-8", (120, 40)), ("h200-nvswitch-8", (80, 24)),
                                            ("power-capped", (120, 40)), ("mixed-4", (200, 60))])
async def test_hidden_rows_left_out_give_textuals_chops(scenario: str, size: tuple[int, int]) -> None:
    """For any set of changed rows, the chops are Textual's own: rows hidden by the widgets in front (the
    containers behind the panels) and the rows between a panel's changed ones are not drawn, and nothing
    drawn changes (with a notification on top of the panels; 4 GPUs' panels side by side at 200×60)."""
    from helpers import make_app, pilot_until

    app = make_app(scenario, 0, 30)
    async with app.run_test(size=size, notifications=True) as pilot:
        await pilot_until(pilot, lambda: app.query("GpuPanel, GpuTable"))
        app.notify("a toast over the panels", timeout=30)
        comp = app.screen._compositor
        await pilot_until(pilot, lambda: any(type(w).__name__ == "Toast" for w in comp.visible_widgets))
        rnd = random.Random(size[0] * 7 + len(scenario))
        cases = [list(range(size[1]))] + [sorted(rnd.sample(range(size[1]), rnd.randint(1, 12))) for _ in range(20)]
        for rows in cases:
            theirs = _chops(comp, rows, ours=False, skip=False)
            assert _chops(comp, rows, ours=True, skip=True) == theirs
            assert _chops(comp, rows, ours=True, skip=False) == theirs
