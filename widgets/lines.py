"""A widget drawn line by line from Rich ``Text`` lines (Textual's line API).

The panels that change every second (GPU panels, the compact table, the findings panel) show a list of
lines. Drawn as one ``Static``, any change repaints and re-renders the whole panel, and a new text can
re-run layout; drawn here, a refresh repaints only the lines whose text or style changed, and layout
runs only when the number of lines changed (profiled: repainting unchanged lines and re-laying out was
most of the TUI's CPU and of the bytes it wrote to the terminal; benchmarks/bench_tui_cost.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widget import Widget

from gpuscope.widgets.fit import narrow


def _first_diff(a: str, b: str) -> int:
    """The first index where two different strings of one length differ: a binary search over
    prefixes, compared in C."""
    lo, hi = 0, len(a)  # a[:lo] == b[:lo], a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid
    return lo


def changed_cells(old: Strip, new: Strip) -> tuple[int, int] | None:
    """The cells ``[start, end)`` where two strips of one width differ (text or style); ``None`` when they
    draw the same. Strips holding double-width characters count as changed throughout.

    Equal whole segments at either end are skipped first (a tuple compare each; the strips of one line
    are usually cut alike), then the cells in between are compared one by one."""
    width = new.cell_length
    if old.cell_length != width:
        return (0, width)
    sa, sb = list(old), list(new)
    if len("".join([seg.text for seg in sa])) != width or len("".join([seg.text for seg in sb])) != width:
        return (0, width)  # a wide character: cells and characters do not line up
    ends = _equal_ends(sa, sb, width)
    if ends is None:
        return None
    i, pos, j, end = ends
    ma, mb = sa[i:len(sa) - j], sb[i:len(sb) - j]  # cells [pos, end) of each
    if len(ma) == len(mb) and all(len(x.text) == len(y.text) and x.style == y.style for x, y in zip(ma, mb)):
        ta, tb = "".join([x.text for x in ma]), "".join([y.text for y in mb])  # same styles: the text decides
        if ta == tb:
            return None
        return (pos + _first_diff(ta, tb), end - _first_diff(ta[::-1], tb[::-1]))
    return _cell_by_cell(ma, mb, pos)


def _equal_ends(sa: list[Segment], sb: list[Segment], width: int) -> tuple[int, int, int, int] | None:
    """``(i, pos, j, end)``: the first ``i`` segments of both strips are equal and end at cell ``pos``, the last
    ``j`` are equal and start at cell ``end``; ``None`` when every segment is equal."""
    n = min(len(sa), len(sb))
    i = pos = 0
    while i < n and sa[i] == sb[i]:
        pos += len(sa[i].text)
        i += 1
    if i == len(sa) == len(sb):
        return None
    j, end = 0, width
    while j < n - i and sa[-1 - j] == sb[-1 - j]:
        end -= len(sa[-1 - j].text)
        j += 1
    return i, pos, j, end


def _cell_by_cell(ma: list[Segment], mb: list[Segment], pos: int) -> tuple[int, int] | None:
    """The cells where the segments ``ma`` and ``mb`` (from cell ``pos`` of two strips, cut or styled unlike)
    differ, compared a cell at a time; ``None`` when they draw the same."""
    a = [(ch, seg.style) for seg in ma for ch in seg.text]
    b = [(ch, seg.style) for seg in mb for ch in seg.text]
    k, m = 0, len(a)
    while k < m and a[k] == b[k]:
        k += 1
    if k == m:
        return None
    while m > k and a[m - 1] == b[m - 1]:
        m -= 1
    return (pos + k, pos + m)


def text_cells(a: Text, b: Text, width: int) -> tuple[int, int] | None:
    """The cells ``[start, end)`` where two lines differ when both are drawn by :func:`line_segments` with the same
    style layout (equal spans and base style, the same length, one cell a character): there the styles of
    every cell are the same, so the texts decide, compared in C. ``None`` when that does not hold (compare
    the strips: :func:`changed_cells`) or when they draw the same."""
    pa, pb = a.plain, b.plain
    n = len(pa)
    if (len(pb) != n or n > width or a.spans != b.spans or a.style != b.style or pa == pb
            or not narrow(pa) or not narrow(pb) or not spans_in_order(a)):
        return None
    return (_first_diff(pa, pb), n - _first_diff(pa[::-1], pb[::-1]))


def spans_in_order(text: Text) -> bool:
    """Whether ``text``'s spans follow one another without overlapping (what :func:`line_segments` draws)."""
    pos, n = 0, len(text.plain)
    for start, end, _ in text.spans:
        if end <= start:
            continue
        if start < pos or end > n:
            return False
        pos = end
    return True


def same_line(a: Text, b: Text) -> bool:
    """Whether two lines draw the same cells (text, spans and base style)."""
    return a is b or a.plain == b.plain and a.spans == b.spans and a.style == b.style


def line_segments(text: Text, width: int, base: Style,
                  styled: Callable[[str | Style, str | Style | None], Style]) -> list[Segment] | None:
    """A one-row ``Text`` as the segments of exactly ``width`` cells, built straight from its spans: the same
    segments and styles as Rich's ``Text.render`` followed by Textual's ``crop_extend`` and
    ``apply_style(base)`` (tests/widgets/test_lines.py compares them), at a fraction of the cost, and no ``Strip``
    (each makes seven caches). ``styled`` combines ``base``, the text's style and a span's style. ``None`` when
    this shortcut does not apply (overlapping spans, a line wider than ``width``, a character that is not one
    cell wide): use Rich.
    """
    plain = text.plain
    n = len(plain)
    if n > width or not narrow(plain):
        return None
    tstyle = text.style
    segments: list[Segment] = []
    pos = 0
    for start, end, span_style in text.spans:
        if end <= start:
            continue  # an empty span draws nothing (Text.append_text of an empty styled text makes one)
        if start < pos or end > n:
            return None  # overlapping or out of order: Rich's stack of styles decides
        if start > pos:
            segments.append(Segment(plain[pos:start], styled(tstyle, None)))
        segments.append(Segment(plain[start:end], styled(tstyle, span_style)))
        pos = end
    if pos < n:
        segments.append(Segment(plain[pos:], styled(tstyle, None)))
    if n < width:
        segments.append(Segment(" " * (width - n), base))
    return segments


class LineWidget(Widget):
    """A widget whose content is a list of one-row ``Text`` lines, set with :meth:`set_lines`.

    ``_gs_last`` is the whole content (lines joined by newlines, when first asked for) for tests and the
    screen check, and :meth:`render` returns it, so ``str(widget.render())`` reads what is shown.
    """

    def __init__(self, *args: Any, **kw: Any):
        super().__init__(*args, **kw)
        self._lines: list[Text] = []
        self._made: list[tuple[Strip, int] | None] = []  # each content row as made: its strip, width
        self._pass_width: int | None = None  # the content's width during a render pass (render_lines)
        self._base_style: Style | None = None  # self.rich_style, cached: it walks the ancestors' CSS
        self._style_memo: dict[tuple[str | Style, str | Style | None], Style] = {}
        self._joined: Text | None = None  # _gs_last, once asked for

    @property
    def _gs_last(self) -> Text | None:
        """The lines joined by newlines (None before any): joined when asked for, not at every update."""
        if self._joined is None and self._lines:
            self._joined = Text("\n").join(self._lines)
        return self._joined

    def render(self) -> Text:
        """The whole content as one text (not used to paint: :meth:`render_line` does)."""
        return self._gs_last if self._gs_last is not None else Text("")

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return max(1, len(self._lines))

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._base_style = None
        self._style_memo = {}
        self._made = [None] * len(self._lines)

    def on_resize(self) -> None:
        self._made = [None] * len(self._lines)

    def _style(self) -> Style:
        style = self._base_style
        if style is None:
            style = self._base_style = self.rich_style
        return style

    def _make_row(self, text: Text, width: int) -> list[Segment]:
        """One line as the segments of exactly ``width`` cells, in the widget's style."""
        fast = line_segments(text, width, self._styled("", None), self._styled)
        if fast is not None:
            return fast
        style = self._style()
        console = self.app.console
        segments = list(text.render(console))
        if text.style and not text.spans:  # Rich applies a span-less text's own style only in __rich_console__
            segments = list(Segment.apply_style(segments, console.get_style(text.style)))
        return list(Strip(segments).crop_extend(0, width, style).apply_style(style))

    def _styled(self, text_style: str | Style, span_style: str | Style | None) -> Style:
        """The widget's style, then a text's own, then a span's: what Rich's ``Text.render`` and
        Textual's ``Strip.apply_style`` make of them, cached (a panel uses a dozen combinations)."""
        key = (text_style, span_style)
        got = self._style_memo.get(key)
        if got is None:
            get = self.app.console.get_style
            got = self._style()
            if text_style:
                got = got + get(text_style, default=Style.null())
            if span_style:
                got = got + get(span_style, default=Style.null())
            self._style_memo[key] = got
        return got

    def render_lines(self, crop: Region) -> list[Strip]:
        """Textual's, with the content's width read once for the pass, not once a line (``size`` walks the DOM)."""
        self._pass_width = self.size.width
        try:
            return super().render_lines(crop)
        finally:
            self._pass_width = None

    def render_line(self, y: int) -> Strip:
        width = self._pass_width
        if width is None:
            width = self.size.width
        if not 0 <= y < len(self._lines):
            return Strip([Segment(" " * width, self._styled("", None))], width)
        got = self._made[y]
        if got is None or got[1] != width:  # each row's strip made once, kept until its text or the width changes
            got = self._made[y] = (Strip(self._make_row(self._lines[y], width), width), width)
        return got[0]

    def set_lines(self, lines: list[Text]) -> bool:
        """Show ``lines`` (one row each: wider ones are cut at the edge, so fit them first).

        Repaints only the lines that changed; re-lays out only when their number changed. Returns
        True when anything changed."""
        old = self._lines
        if len(old) == len(lines) and all(same_line(a, b) for a, b in zip(old, lines)):
            return False
        self._lines = lines
        self._joined = None
        if len(old) != len(lines):
            self._made = [None] * len(lines)
            self.refresh(layout=True)
            return True
        width = self.size.width
        dirty: list[Region] = []
        for y, (a, b) in enumerate(zip(old, lines)):
            if same_line(a, b):
                continue
            prev = self._made[y]
            if prev is None or prev[1] != width or not width:
                self._made[y] = None
                dirty.append(Region(0, y, width, 1))
                continue
            # only the cells that changed go to the terminal: "400 KB/s" → "410 KB/s" is 1 cell, not the line
            new = Strip(self._make_row(b, width), width)
            self._made[y] = (new, width)
            cells = text_cells(a, b, width) or changed_cells(prev[0], new)
            if cells is not None:
                dirty.append(Region(cells[0], y, cells[1] - cells[0], 1))
        if dirty:
            self.refresh(*dirty)  # one call: the bookkeeping once, not once a line
        return True
