"""The replay timeline: position, speed, markers and findings along the recording."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from gpuscope.widgets.style import ANSI_PALETTE, Palette, fmt_duration


def timeline_text(width: int, t0: float, t1: float, pos: float, marks: list[tuple[float, str]], speed: float,
                  playing: bool, palette: Palette = ANSI_PALETTE) -> Text:
    """A one-line track: ``▶ 1.0× 0m12s/1m49s ━━━━●──|──!──``. ``marks`` are (t, kind) with kind
    ``marker`` or ``finding``; coloured with ``palette``."""
    span = max(t1 - t0, 1e-9)
    total = fmt_duration(span)
    # fixed widths (play state, speed, position as wide as the total): the track and its marks stay put
    # while the position label grows from 7s to 1m38s or the speed changes
    head = f"{'▶ ' if playing else '❚❚'} {f'{speed:g}×':<5} {fmt_duration(pos - t0):>{len(total)}}/{total} "
    w = max(10, width - len(head) - 1)
    cells = ["─"] * w
    styles = [palette.dim] * w
    for t, kind in marks:
        k = min(w - 1, max(0, int((t - t0) / span * (w - 1))))
        cells[k] = "|" if kind == "marker" else "!"
        styles[k] = palette.accent if kind == "marker" else palette.warn
    at = min(w - 1, max(0, int((pos - t0) / span * (w - 1))))
    for k in range(at):
        if cells[k] == "─":
            cells[k] = "━"
            styles[k] = palette.ok
    cells[at] = "●"
    styles[at] = "bold white"
    text = Text(head, style="bold")
    for c, s in zip(cells, styles):
        text.append(c, style=s)
    return text


class Timeline(Static):
    DEFAULT_CSS = "Timeline { height: 1; }"
    palette = ANSI_PALETTE  # the App sets the theme's (widgets/style.py Palette)

    def show_position(self, t0: float, t1: float, pos: float, marks: list[tuple[float, str]], speed: float,
                      playing: bool) -> None:
        self.update(timeline_text(max(20, self.size.width or 80), t0, t1, pos, marks, speed, playing,
                                  self.palette))
