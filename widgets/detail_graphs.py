"""The detail view's graphs laid out to the screen: how tall each graph is, and one labelled graph's lines.

Pure functions (no widget): the detail screen (tui/screens.py) measures the screen and calls these. Every
line they return is exactly ``label_w + len(cells)`` cells, so a graph never wraps under its label and
every graph row starts at the same column.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.cells import cell_len
from rich.text import Text

from gpuscope.widgets.style import DIM, graph_rows

MIN_GRAPH_ROWS = 2  # below this a graph is unreadable: the view scrolls instead
MAX_GRAPH_ROWS = 10  # above this spare rows stay blank (a 10-row graph resolves 80 levels)
LABEL_MIN = 24  # the label column: "now 1980.0  peak 1980.0" and a space, so 4-digit readings do not shift the graphs
SCALE_SEP = "  "


def graph_heights(free_rows: int, n: int, lo: int = MIN_GRAPH_ROWS, hi: int = MAX_GRAPH_ROWS) -> list[int]:
    """Rows for each of ``n`` graphs sharing ``free_rows`` terminal rows: equal shares, the remainder one
    row each to the first graphs, each between ``lo`` and ``hi`` (the view scrolls when even ``lo`` rows
    each do not fit; rows beyond ``hi`` each are left blank)."""
    if n <= 0:
        return []
    base = max(lo, min(hi, free_rows // n))
    extra = max(0, free_rows - base * n) if base < hi else 0
    return [min(hi, base + (1 if k < extra else 0)) for k in range(n)]


def graph_labels(title: str, now: str, peak: str, top: str, height: int, fold: bool = False) -> list[str]:
    """The words left of a ``height``-row graph, one per row: title, ``now X  peak Y``, ``scale 0–T``
    (``top``: the full-height value). Folded (in two rows, or when ``fold``: every graph alike when some
    have two rows), the scale joins the title (``utilization %  0–100``); in one row, the title and now."""
    reading = f"now {now}  peak {peak}"
    if height >= 3 and not fold:
        return [title, reading, f"scale 0–{top}"] + [""] * (height - 3)
    if height >= 2:
        return [f"{title}{SCALE_SEP}0–{top}", reading] + [""] * (height - 2)
    return [f"{title} {now}"]


def label_width(labels: Sequence[str], total: int) -> int:
    """The label column: wide enough for every label and a space, at least :data:`LABEL_MIN`, at most a
    third of ``total`` cells (longer labels are then cut)."""
    want = max([cell_len(s) + 1 for s in labels] + [LABEL_MIN])
    return max(1, min(want, max(LABEL_MIN, total // 3), total - 10))


def _cut(s: str, width: int) -> str:
    """``s`` in at most ``width`` cells, ``…`` ending it when cut."""
    if cell_len(s) <= width:
        return s
    out = ""
    for ch in s:
        if cell_len(out + ch) > width - 1:
            break
        out += ch
    return out + "…"


def graph_block(labels: Sequence[str], cells: Sequence[float | None], top: float, label_w: int) -> list[Text]:
    """One graph: ``len(labels)`` rows, each a label padded (or cut) to ``label_w - 1`` cells and a space,
    then one block character per cell (``top`` is full height). Every line is ``label_w + len(cells)``
    cells and does not wrap."""
    rows = graph_rows(cells, len(labels), top)
    out = []
    for k, (label, row) in enumerate(zip(labels, rows)):
        lab = _cut(label, label_w - 1)
        t = Text(lab + " " * (label_w - cell_len(lab)), style="bold" if k == 0 else DIM, no_wrap=True,
                 overflow="crop")
        t.append(row, style="green")
        out.append(t)
    return out
