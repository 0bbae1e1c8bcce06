"""widgets/lines.py line_segments: a line's segments built straight from its spans draw exactly what Rich's
``Text.render`` + Textual's ``crop_extend`` + ``apply_style`` draw (the path it replaces)."""

from __future__ import annotations

import pytest
from helpers import examples
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Span, Text
from textual.strip import Strip

from gpuscope.widgets.lines import changed_cells, line_segments

CONSOLE = Console(width=200, color_system="truecolor")
BASE = Style(color="white", bgcolor="black")
SPAN_STYLES = ["", "bold", "dim", "bold red", "reverse yellow", Style(italic=True), "green on blue", "not-a-style x"]


def line_strip(text: Text, width: int, base: Style, styled_: object) -> Strip | None:
    """:func:`line_segments` as a strip (None where it does not apply)."""
    segments = line_segments(text, width, base, styled_)  # type: ignore[arg-type]
    return None if segments is None else Strip(segments, width)


def rich_path(text: Text, width: int) -> Strip:
    """What LineWidget drew before: Rich renders, Textual pads and applies the widget's style."""
    segments = list(text.render(CONSOLE))
    if text.style and not text.spans:
        segments = list(Segment.apply_style(segments, CONSOLE.get_style(text.style)))
    return Strip(segments).crop_extend(0, width, BASE).apply_style(BASE)


def styled(text_style: str | Style, span_style: str | Style | None) -> Style:
    got = BASE
    if text_style:
        got = got + CONSOLE.get_style(text_style, default=Style.null())
    if span_style:
        got = got + CONSOLE.get_style(span_style, default=Style.null())
    return got


def cells(strip: Strip) -> list[tuple[str, Style | None]]:
    """Each cell's character and its full style (what the terminal gets)."""
    return [(ch, seg.style) for seg in strip for ch in seg.text]


def same_cells(a: Strip, b: Strip) -> bool:
    return a.cell_length == b.cell_length and [(c, s or Style.null()) for c, s in cells(a)] == \
        [(c, s or Style.null()) for c, s in cells(b)]


pieces = st.lists(st.tuples(st.text(alphabet="ab 9%▁█°×", min_size=0, max_size=7), st.sampled_from(SPAN_STYLES)),
                  min_size=0, max_size=8)


@settings(max_examples=examples(300), deadline=None)
@given(pieces, st.sampled_from(["", "dim", "yellow", Style(bold=True)]), st.integers(1, 60))
def test_same_cells_as_rich(parts, text_style, width):
    t = Text(style=text_style)
    for s, style in parts:
        t.append(s, style=style)
    fast = line_strip(t, width, BASE, styled)
    if fast is None:
        assert t.cell_len > width  # the only case here where Rich must crop
        return
    assert same_cells(fast, rich_path(t, width))
    assert fast.cell_length == width


@pytest.mark.parametrize("text, width, shortcut", [
    (Text("util 100%"), 20, True),
    (Text("x" * 21), 20, False),                   # wider than the widget: Rich crops
    (Text("GPU 日本"), 20, False),                  # double-width characters: cells and characters differ
    (Text.assemble(("ab", "bold"), ("cd", "red")), 4, True),
    (Text("scale 0–100%  ▁▂█"), 20, True),         # en dash and blocks: one cell each (the graphs' scale rows)
    (Text("a\tb"), 20, False),                     # a tab: Rich measures it 0 cells
    (Text("a\u200bb"), 20, False),                 # a zero-width space
])
def test_when_the_shortcut_applies(text, width, shortcut):
    assert (line_strip(text, width, BASE, styled) is not None) is shortcut


@pytest.mark.parametrize("text", [
    Text.from_markup("ab[b][/b]cd"),  # an empty span after plain text: drawn once, not twice
    Text.assemble("ab", Text("", style="bold"), ("cd", "red")),
    Text.from_markup("[b][/b]abcd"),
])
def test_empty_spans_draw_nothing(text: Text) -> None:
    from gpuscope.widgets.lines import spans_in_order

    fast = line_strip(text, 10, BASE, styled)
    assert fast is not None and spans_in_order(text)
    assert same_cells(fast, rich_path(text, 10))


def test_overlapping_spans_fall_back_to_rich():
    t = Text("abcdef")
    t.stylize("bold", 0, 4)
    t.stylize("red", 2, 6)
    assert line_strip(t, 10, BASE, styled) is None


async def test_a_line_widget_draws_what_rich_draws():
    """The widget's own style combinations (``LineWidget._styled``) give the same cells as the Rich path
    with the widget's style, in a running app."""
    from textual.app import App, ComposeResult

    from gpuscope.widgets.lines import LineWidget

    class One(App[None]):
        def compose(self) -> ComposeResult:
            yield LineWidget(id="w")

    lines = [Text.assemble(("util ", "dim"), ("100%", "bold red"), "  P0"), Text("plain"),
             Text("styled whole", style="yellow"), Text.assemble(("GPU0 ", Style(bold=True)), ("▁▂█", "dim green")),
             Text.assemble(("GPU 日本 ", "bold red"), ("dim", "dim red"))]  # wide characters: Rich's path, then the filter
    app = One()
    async with app.run_test(size=(40, 8)) as pilot:
        w = app.query_one(LineWidget)
        w.set_lines(lines)
        await pilot.pause()
        base = w.rich_style
        background = w.background_colors[1]

        def filtered(strip: Strip) -> Strip:  # as drawn: the content rows may be made through the filter already
            for f in app.get_line_filters():
                strip = strip.apply_filter(f, background)
            return strip

        for y, t in enumerate(lines):
            segments = list(t.render(app.console))
            if t.style and not t.spans:
                segments = list(Segment.apply_style(segments, app.console.get_style(t.style)))
            want = Strip(segments).crop_extend(0, w.size.width, base).apply_style(base)
            assert same_cells(filtered(w.render_line(y)), filtered(want)), y


run_text = st.text(alphabet=st.sampled_from(["a", " ", "█", "·", "×", "\x1b", "\x07", "é", "1"]), max_size=6)


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.tuples(run_text, st.sampled_from(["", "bold", "green", "bright_black", "bold red"])), max_size=8))
def test_runs_text_is_appending_each_run(runs):
    """widgets/style.py runs_text (a line made in one go from side-by-side runs) is the Text that appending
    run by run makes: same text (control characters dropped), same spans."""
    from gpuscope.widgets.style import runs_text

    want = Text()
    for text, style in runs:
        want.append(text, style=style or None)
    got = runs_text(runs)
    assert got.plain == want.plain
    assert got.spans == want.spans
    assert not got.style


def test_runs_memo_gives_the_last_refresh_s_line_for_the_same_runs():
    """widgets/style.py RunsMemo: the same runs as this refresh or the one before give the same Text object (what
    runs_text makes of them); other runs a new one; a line two refreshes old is forgotten."""
    from gpuscope.widgets.style import RunsMemo, runs_text

    memo = RunsMemo()
    a, b = [("GPU0 ", ""), ("▁▂█", "green")], [("GPU1 ", ""), ("▁▂▃", "green")]
    memo.next_refresh()
    first = memo.text(a)
    assert first.plain == runs_text(a).plain and first.spans == runs_text(a).spans
    assert memo.text(list(a)) is first  # twice in one refresh (an equal list): one Text
    memo.next_refresh()
    assert memo.text(a) is first  # the refresh after: still the same object
    other = memo.text(b)
    assert other is not first and other.plain == "GPU1 ▁▂▃"
    memo.next_refresh()
    memo.next_refresh()  # two refreshes without it: made again
    again = memo.text(a)
    assert again is not first and again.plain == first.plain and again.spans == first.spans


# ------------------------------------------------------------------ changed cells
# widgets/lines.py changed_cells: the fast comparison (strings and style runs) finds the same cells as
# comparing the two strips cell by cell.


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


# ------------------------------------------------------------------ text_cells
# widgets/lines.py text_cells: for two lines of one style layout, the plain texts' difference is the cells
# that changed (what changed_cells finds comparing the strips), or None where it cannot say.


def _line(parts: list[tuple[str, str | Style]], text_style: str | Style) -> Text:
    t = Text(style=text_style)
    for s, style in parts:
        t.append(s, style=style)
    return t


@settings(max_examples=examples(400), deadline=None)
@given(pieces, st.sampled_from(["", "dim", Style(bold=True)]), st.sampled_from([60, 60, 60, 20, 8]),
       st.lists(st.tuples(st.integers(0, 60), st.sampled_from("ab 9▁█" * 3 + "日\n")), max_size=4),
       st.sampled_from([False] * 3 + [True]))
def test_text_cells_are_the_changed_cells(parts, text_style, width, edits, restyle):
    from gpuscope.widgets.lines import text_cells

    a = _line(parts, text_style)
    plain = list(a.plain)
    for pos, ch in edits:  # new characters in place: the same spans, a new text
        if plain:
            plain[pos % len(plain)] = ch
    b = a.copy()
    b.plain = "".join(plain)
    if restyle and b.spans:  # or another layout: text_cells must not answer from the texts
        b.spans = [b.spans[0]._replace(style="reverse"), *b.spans[1:]]
    got = text_cells(a, b, width)
    sa, sb = line_strip(a, width, BASE, styled), line_strip(b, width, BASE, styled)
    if got is None:  # it cannot say (or nothing changed): changed_cells decides
        if sa is not None and sb is not None and a.spans == b.spans and a.style == b.style and "日" not in \
                a.plain + b.plain and "\n" not in a.plain + b.plain and len(a.plain) <= width:
            assert changed_cells(sa, sb) is None  # the texts are equal
        return
    assert sa is not None and sb is not None
    assert got == changed_cells(sa, sb)


@pytest.mark.parametrize("a, b, want", [
    (Text("PWR 640 W"), Text("PWR 641 W"), (6, 7)),
    (Text("PWR 640 W"), Text("PWR 640 W"), None),  # the same: nothing to say
    (Text("PWR 640 W"), Text("PWR 64 W"), None),  # lengths differ: the padding's style is the widget's
    (Text.assemble(("a", "bold"), "bc"), Text.assemble("a", ("bc", "bold")), None),  # another layout
    (Text("GPU 日本"), Text("GPU 日日"), None),  # double-width characters
    (Text("x" * 30), Text("y" * 30), None),  # wider than the widget
])
def test_text_cells_examples(a: Text, b: Text, want: tuple[int, int] | None) -> None:
    from gpuscope.widgets.lines import text_cells

    assert text_cells(a, b, 20) == want


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.one_of(st.sampled_from("ab –…✔▁█·°×日−≥≈⚠☔⌚␛⁹\t\x1b\u200b\u0301"), st.characters()),
               max_size=12))
def test_narrow_and_cells_agree_with_rich(text: str) -> None:
    """widgets/fit.py: ``cells`` is Rich's ``cell_len``; ``narrow`` only where every character is one cell."""
    from rich.cells import cell_len

    from gpuscope.widgets.fit import cells, narrow

    assert cells(text) == cell_len(text)
    if narrow(text):
        assert all(cell_len(c) == 1 for c in text)


def test_the_narrow_set_is_rich_s_cell_len_without_its_caches() -> None:
    """widgets/fit.py measures its characters past Rich's LRU caches (0.5 MB they would keep): the same set as
    ``cell_len(c) == 1`` over the same ranges, and nothing put in ``cell_len``'s cache."""
    from rich.cells import cached_cell_len, cell_len

    from gpuscope.widgets.fit import _NARROW, NARROW_RANGES, _measure

    every = [c for lo, hi in NARROW_RANGES for c in map(chr, range(lo, hi + 1))]
    cached_cell_len.cache_clear()
    assert frozenset(c for c in every if _measure(c) == 1) == _NARROW
    assert cached_cell_len.cache_info().currsize == 0
    assert _NARROW == frozenset(c for c in every if cell_len(c) == 1)


@settings(max_examples=examples(400), deadline=None)
@given(st.text(alphabet=st.sampled_from("ab ·−…日\t"), max_size=14), st.data())
def test_text_head_is_rich_s_slice(plain: str, data: st.DataObject) -> None:
    """widgets/fit.py text_head(text, end) is Rich's ``text[:end]``: the same text, style, justify, overflow and
    spans."""
    from gpuscope.widgets.fit import text_head

    n = len(plain)
    bounds = st.integers(0, n)
    spans = data.draw(st.lists(st.tuples(bounds, bounds, st.sampled_from(["bold", "red", "dim"])), max_size=5))
    text = Text(plain, style=data.draw(st.sampled_from(["", "bold"])),
                justify=data.draw(st.sampled_from([None, "left", "right", "full"])),
                overflow=data.draw(st.sampled_from([None, "fold", "ellipsis"])))
    text.spans = [Span(min(a, b), max(a, b), style) for a, b, style in spans]
    end = data.draw(st.integers(0, n))
    want, got = text[:end], text_head(text, end)
    assert (got.plain, got.spans, got.style, got.justify, got.overflow) == (
        want.plain, want.spans, want.style, want.justify, want.overflow)


@pytest.mark.parametrize("text, want", [
    ("util 100%", True), ("scale 0–100%", True), ("✔ nothing", True), ("…", True), ("", True),
    ("日本", False), ("a\tb", False), ("e\u0301", False), ("\x1b[31m", False),
    # a finding's minus sign and comparisons, the warning sign, a shown ESC: one cell each; wide emoji are not
    ("SM clock 1485 of 1980 MHz (−495 MHz)", True), ("≥ 90 % ≈ 1.2 GB/s", True), ("⚠ ␛", True),
    ("☔", False), ("⌚", False),
])
def test_narrow_examples(text: str, want: bool) -> None:
    from gpuscope.widgets.fit import narrow

    assert narrow(text) is want
