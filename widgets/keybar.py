"""The footer: key hints chosen to fit the width (``? help`` always), instead of Textual's Footer,
which cuts hints off at 80 columns."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widgets import Static

from gpuscope.widgets.style import set_content


def key_hints(hints: list[tuple[str, str]], width: int) -> Text:
    """``hints`` in priority order (first kept longest), drawn in that order as ``key desc`` pairs;
    as many as fit in ``width`` cells. Each hint is whole or absent."""
    out = Text()
    for key, desc in hints:
        item = Text()
        item.append(f" {key}", style="bold reverse")
        item.append(f" {desc} ")
        if out.cell_len + item.cell_len > width:
            continue
        out.append_text(item)
    return out


class KeyBar(Static):
    DEFAULT_CSS = "KeyBar { height: 1; dock: bottom; background: $panel; }"

    def __init__(self, hints: list[tuple[str, str]], **kw: Any):
        super().__init__(**kw)
        self.hints = hints

    def set_hints(self, hints: list[tuple[str, str]]) -> None:
        self.hints = hints
        self.redraw()

    def on_resize(self) -> None:
        self.redraw()

    def on_mount(self) -> None:
        self.redraw()

    def redraw(self) -> None:
        set_content(self, key_hints(self.hints, max(10, self.size.width or 80)))
