"""A widget drawn line by line from Rich ``Text`` lines (Textual's line API).

The panels that change every second (GPU panels, the compact table, the findings panel) show a list of
lines. Drawn as one ``Static``, any change repaints and re-renders the whole panel, and a new text can
re-run layout; drawn here, a refresh repaints only the lines whose text or style changed, and layout
runs only when the number of lines changed (profiled: repainting unchanged lines and re-laying out was
most of the TUI's CPU and of the bytes it wrote to the terminal; benchmarks/bench_tui_cost.py).
"""

from __future__ import annotations

from typing import Any

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widget import Widget


def changed_cells(old: Strip, new: Strip) -> tuple[int, int] | None:
    """The cells ``[start, end)`` where two strips of one width differ (text or style); ``None`` when they
    draw the same. Strips holding double-width characters count as changed throughout."""
    width = new.cell_length
    if old.cell_length != width:
        return (0, width)
    a = [(ch, seg.style) for seg in old for ch in seg.text]
    b = [(ch, seg.style) for seg in new for ch in seg.text]
    if len(a) != width or len(b) != width:  # a wide character: cells and characters do not line up
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


def same_line(a: Text, b: Text) -> bool:
    """Whether two lines draw the same cells (text, spans and base style)."""
    return a is b or a.plain == b.plain and a.spans == b.spans and a.style == b.style


class LineWidget(Widget):
    """A widget whose content is a list of one-row ``Text`` lines, set with :meth:`set_lines`.

    ``_gs_last`` holds the whole content (lines joined by newlines) for tests and the screen check,
    and :meth:`render` returns it, so ``str(widget.render())`` reads what is shown.
    """

    def __init__(self, *args: Any, **kw: Any):
        super().__init__(*args, **kw)
        self._lines: list[Text] = []
        self._strips: list[Strip | None] = []
        self._base_style: Style | None = None  # self.rich_style, cached: it walks the ancestors' CSS
        self._gs_last: Text | None = None

    def render(self) -> Text:  # type: ignore[override]
        """The whole content as one text (not used to paint: :meth:`render_line` does)."""
        return self._gs_last if self._gs_last is not None else Text("")

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return max(1, len(self._lines))

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._base_style = None
        self._strips = [None] * len(self._lines)

    def on_resize(self) -> None:
        self._strips = [None] * len(self._lines)

    def _style(self) -> Style:
        style = self._base_style
        if style is None:
            style = self._base_style = self.rich_style
        return style

    def _strip(self, text: Text, width: int) -> Strip:
        """One line as a strip of exactly ``width`` cells, in the widget's style."""
        console, style = self.app.console, self._style()
        segments = list(text.render(console))
        if text.style and not text.spans:  # Rich applies a span-less text's own style only in __rich_console__
            segments = list(Segment.apply_style(segments, console.get_style(text.style)))
        return Strip(segments).crop_extend(0, width, style).apply_style(style)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if not 0 <= y < len(self._lines):
            return Strip.blank(width, self._style())
        strip = self._strips[y]
        if strip is None or strip.cell_length != width:
            strip = self._strips[y] = self._strip(self._lines[y], width)
        return strip

    def set_lines(self, lines: list[Text]) -> bool:
        """Show ``lines`` (one row each: wider ones are cut at the edge, so fit them first).

        Repaints only the lines that changed; re-lays out only when their number changed. Returns
        True when anything changed."""
        old = self._lines
        if len(old) == len(lines) and all(same_line(a, b) for a, b in zip(old, lines)):
            return False
        self._lines = lines
        self._gs_last = Text("\n").join(lines)
        if len(old) != len(lines):
            self._strips = [None] * len(lines)
            self.refresh(layout=True)
            return True
        width = self.size.width
        for y, (a, b) in enumerate(zip(old, lines)):
            if same_line(a, b):
                continue
            prev = self._strips[y]
            if prev is None or not width:
                self._strips[y] = None
                self.refresh(Region(0, y, width, 1))
                continue
            # only the cells that changed go to the terminal: "400 KB/s" → "410 KB/s" is 1 cell, not the line
            new = self._strips[y] = self._strip(b, width)
            cells = changed_cells(prev, new)
            if cells is not None:
                self.refresh(Region(cells[0], y, cells[1] - cells[0], 1))
        return True
