"""Small pure rendering helpers shared by the panels (no widget state, easy to test)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeGuard

from rich.cells import cell_len
from rich.text import Span, Text

from gpuscope.core.history import History, resample_rows
from gpuscope.core.text import clean
from gpuscope.core.units import duration
from gpuscope.core.units import fmt_gb as fmt_gb  # ``X as X``: re-exported for the panels (mypy: explicitly)
from gpuscope.core.units import fmt_num as fmt_num
from gpuscope.core.units import fmt_rate as fmt_rate
from gpuscope.core.vocab import SEV_LEVEL, SEVERITIES, path_level
from gpuscope.core.vocab import SEV_MARK as SEV_MARK  # re-exported for the findings panel

SPARK = "▁▂▃▄▅▆▇█"
BAR_FULL = "█"
BAR_PARTIAL = " ▏▎▍▌▋▊▉"

# Semantic colours (work in 256 colours).
OK = "green"
WARN = "yellow"
BAD = "red"
DIM = "bright_black"
ACCENT = "cyan"
# The TUI's colour for each semantic level of core/vocab.py (plain: the default colour).
LEVEL_STYLE = {"bad": BAD, "warn": WARN, "ok": OK, "dim": DIM, "plain": ""}
# Emphasised (bold) colours, for words that must stand out: severities, topology paths.
LEVEL_STYLE_STRONG = {"bad": f"bold {BAD}", "warn": WARN, "ok": f"bold {OK}", "dim": DIM, "plain": ""}
SEV_STYLE = {s: LEVEL_STYLE_STRONG[SEV_LEVEL[s]] for s in SEVERITIES}


@dataclass(frozen=True)
class Palette:
    """The semantic colours of the screen's chrome (the header, the note line, the hint, the replay timeline),
    as Rich colours. By default the terminal's own ANSI colours (:data:`ANSI_PALETTE`: the look the snapshots
    pin, recoloured by the terminal's theme); with a Textual theme picked in the palette (ctrl+p, "Change
    theme"), that theme's (:func:`theme_palette`). The panels' data colours stay ANSI (:data:`LEVEL_STYLE`)."""

    ok: str = OK
    warn: str = WARN
    bad: str = BAD
    dim: str = DIM
    accent: str = ACCENT


ANSI_PALETTE = Palette()
DEFAULT_THEME = "textual-dark"  # Textual's default theme: the chrome keeps the ANSI colours under it


def theme_palette(variables: Mapping[str, str]) -> Palette:
    """The chrome's colours from a Textual theme's CSS variables (``App.get_css_variables()``): ``$success``,
    ``$warning``, ``$error``, ``$accent``; dim is the foreground blended halfway into the background.
    A variable missing or unreadable keeps the ANSI colour."""
    from textual.color import Color, ColorParseError

    def colour(name: str, default: str) -> str:
        try:
            return Color.parse(variables[name]).hex6
        except (KeyError, ColorParseError):
            return default

    try:
        dim = Color.parse(variables["background"]).blend(Color.parse(variables["foreground"]), 0.5).hex6
    except (KeyError, ColorParseError):
        dim = DIM
    return Palette(ok=colour("success", OK), warn=colour("warning", WARN), bad=colour("error", BAD), dim=dim,
                   accent=colour("accent", ACCENT))


def level_style(share: float | None, warn: float = 0.8, bad: float = 0.95) -> str:
    if share is None:
        return DIM
    if share >= bad:
        return BAD
    if share >= warn:
        return WARN
    return OK


def bar(value: float | None, maximum: float | None, width: int, style: str | None = None) -> Text:
    """A horizontal bar of ``width`` cells with eighth-cell resolution; grey when unknown."""
    return runs_text(bar_runs(value, maximum, width, style))


def bar_runs(value: float | None, maximum: float | None, width: int, style: str | None = None) -> list[Run]:
    """:func:`bar` as side-by-side runs (the bar, then the dots' run in their own style: spans that do not
    overlap, drawn without Rich's style stack, widgets/lines.py)."""
    if width <= 0:
        return []
    if value is None or not maximum or maximum <= 0 or math.isnan(value):
        return [("·" * width, DIM)]
    share = max(0.0, min(1.0, value / maximum))
    eighths = int(round(share * width * 8))
    full, part = divmod(eighths, 8)
    s = BAR_FULL * full + (BAR_PARTIAL[part] if part and full < width else "")
    return [(s, style or level_style(share)), ("·" * (width - len(s)), DIM)]


Run = tuple[str, str]  # a piece of a line and its style ("": none)


def label_and_graph(label: str, label_style: str, graph: str, column: int) -> Text:
    """A graph's row: ``label`` (in the line's own style, ``label_style``) padded to ``column``, then the graph in
    OK green, made in one go: the same text, style and spans as ``Text(label, style=label_style)``, padded
    with ``pad_right`` and the graph appended (tests/widgets/test_style.py), at a fraction of the cost (a
    panel has up to 29 of them, rebuilt every second while the graphs move)."""
    if not label.isprintable():  # control characters: Text drops them before measuring
        label = Text(label).plain
    width = len(label) if label.isascii() and label.isprintable() else cell_len(label)  # Text keeps tab and ESC
    head = label + " " * max(0, column - width)
    if not graph.isprintable():
        graph = Text(graph).plain
    return Text(head + graph, style=label_style, spans=[Span(len(head), len(head) + len(graph), OK)] if graph else [])


def runs_text(runs: Sequence[Run]) -> Text:
    """One line from side-by-side runs of (text, style), made in one go: the same text and spans as
    appending each run to a ``Text`` (tests/widgets/test_lines.py), at a third of the cost."""
    plain: list[str] = []
    spans: list[Span] = []
    pos = 0
    for text, style in runs:
        end = pos + len(text)
        if style and end > pos:
            spans.append(Span(pos, end, style))
        plain.append(text)
        pos = end
    out = Text("".join(plain), spans=spans)
    if len(out.plain) != pos:  # a control character was dropped: the spans would be off, append run by run
        out = Text()
        for text, style in runs:
            out.append(text, style=style or None)
    return out


class RunsMemo:
    """:func:`runs_text` of a widget's lines, remembered from one refresh to the next: a line made of the same runs
    as last refresh is the same ``Text`` object (LineWidget.set_lines then skips it at once, and it is not made
    again). Holds the lines of the last refresh and of this one only (:meth:`next_refresh`)."""

    def __init__(self) -> None:
        self._last: dict[tuple[Run, ...], Text] = {}
        self._now: dict[tuple[Run, ...], Text] = {}

    def next_refresh(self) -> None:
        """A refresh starts: the lines of the refresh before it are forgotten."""
        self._last, self._now = self._now, {}

    def text(self, runs: Sequence[Run]) -> Text:
        key = tuple(runs)
        got = self._now.get(key)
        if got is None:
            got = self._last.get(key)
            if got is None:
                got = runs_text(key)
            self._now[key] = got
        return got


def bar_key(value: float | None, maximum: float | None, width: int) -> tuple[int, str] | None:
    """What :func:`bar` draws, in short: (filled eighths, colour); None for the grey unknown bar. Equal keys
    draw equal bars (the panels use it to skip rebuilding a line whose bar did not move)."""
    if width <= 0 or value is None or not maximum or maximum <= 0 or math.isnan(value):
        return None
    share = max(0.0, min(1.0, value / maximum))
    return int(round(share * width * 8)), level_style(share)


def sparkline(values: Sequence[float | None], maximum: float | None = None) -> str:
    """One character per value; blank where no value; scaled to ``maximum`` (or the largest value)."""
    known = [v for v in values if v is not None and not math.isnan(v)]
    top = maximum if maximum else (max(known) if known else 0.0)
    out = []
    for v in values:
        if v is None or math.isnan(v):
            out.append(" ")
        elif top <= 0:
            out.append(SPARK[0])
        else:
            k = int(round(max(0.0, min(1.0, v / top)) * (len(SPARK) - 1)))
            out.append(SPARK[k])
    return "".join(out)


def spark_window(times: Sequence[float], values: Sequence[float], t_end: float, seconds: float, columns: int,
                 maximum: float | None = None) -> str:
    """``sparkline(resample(times, values, t_end, seconds, columns), maximum)`` through the panels' fast path
    (:func:`resample_rows`, :func:`spark_cells`): the same picture, character for character."""
    if columns <= 0:
        return ""
    return spark_cells(resample_rows(times, [values], t_end, seconds, columns)[0], maximum)


_STEPS = len(SPARK) - 1
_STEPS_F = float(_STEPS)
_BIG = 1.7976931348623157e308  # the largest float: an infinite value draws as the largest finite one


def _spark_text(row: Sequence[float], top: float) -> str:
    """One sparkline character per cell of ``row`` (NaN: blank) scaled to ``top`` (positive, finite): the
    cell's level is ``round(min(max(v / top, 0), 1) * 7)``, the clamps written as comparisons (the
    built-in min and max cost more than the rest of a cell)."""
    return "".join([" " if v != v else SPARK[round(((x if x < 1.0 else 1.0) if (x := v / top) > 0.0 else 0.0) * _STEPS_F)]
                    for v in row])


def spark_cells(row: Sequence[float], maximum: float | None = None) -> str:
    """A sparkline of one row of :func:`gpuscope.core.history.resample_rows` (NaN = blank; the cells between
    the first and the last known one are all known), scaled to ``maximum`` or the row's largest value:
    ``sparkline`` of the same cells, character for character."""
    columns = len(row)
    first = 0
    while first < columns and row[first] != row[first]:
        first += 1
    if first == columns:
        return " " * columns
    last = columns - 1
    while row[last] != row[last]:
        last -= 1
    mid = row[first:last + 1]
    top = maximum if maximum else max(mid)
    if top <= 0:
        body = SPARK[0] * (last + 1 - first)
    elif math.isfinite(top) and math.inf not in mid and -math.inf not in mid:
        body = _spark_text(mid, top)
    else:  # a huge value over a small scale (or an infinite scale): as numpy's nan_to_num, then clipped
        body = "".join([SPARK[round(min(max((0.0 if v != v else max(-_BIG, min(_BIG, v))) / top, 0.0), 1.0)
                                    * _STEPS)] for v in mid])
    return " " * first + body + " " * (columns - 1 - last)


def spark_rows(block: Sequence[Sequence[float]], maxima: Sequence[float | None]) -> list[str]:
    """:func:`spark_cells` of each row of ``block`` (rows of columns, NaN = blank) with its own maximum (the
    same strings: a row whose values and scale are finite in one comprehension, blanks included; the others
    through :func:`spark_cells`)."""
    out = []
    for row, top in zip(block, maxima):
        if not top:
            known = [v for v in row if v == v]
            top = max(known) if known else None
        if (top is not None and 0 < top < math.inf and math.inf not in row and -math.inf not in row):
            out.append(_spark_text(row, top))
        else:
            out.append(spark_cells(row, top))
    return out


def fixed_scale(top: float | None) -> TypeGuard[float]:
    """Whether a graph drawn at full height ``top`` is column by column (a positive finite scale), so that its
    old columns can be kept when it moves (:func:`spark_update`, :func:`block_update`); else its scale is the
    window's own peak, which moves with it."""
    return top is not None and top > 0 and math.isfinite(top)


def _moves(change: tuple[int, int], columns: int) -> bool:
    """Whether ``change`` ((shift, first): the old columns moved left by ``shift``, the columns from ``first`` on
    new) fits graphs ``columns`` wide, so that their old columns can be kept (:func:`spark_update`,
    :func:`block_update`)."""
    shift, first = change
    return shift >= 0 and 0 <= first <= columns - shift


def spark_update(old: Sequence[str], block: Sequence[Sequence[float]], maxima: Sequence[float | None],
                 change: tuple[int, int]) -> list[str] | None:
    """:func:`spark_rows` of ``block`` from the sparklines drawn before (``old``), when ``block`` is the block
    they were drawn from moved left by ``shift`` columns with only the columns from ``first`` on changed
    (``change``: (shift, first), :meth:`gpuscope.core.history.History.cells_change`): the old characters are
    kept and only the new columns drawn. None when a row's scale is not a positive finite number (its scale
    is then the window's own peak, which moves: redraw it all)."""
    shift, first = change
    rows = len(block)
    columns = len(block[0]) if rows else 0
    if len(old) != rows or not _moves(change, columns):
        return None
    out = []
    for k in range(rows):
        top = maxima[k]
        if not fixed_scale(top) or len(old[k]) != columns:
            return None
        out.append(old[k][shift:shift + first] + _spark_text(block[k][first:], top))
    return out


def live_sparks(history: History, seconds: float, cols: int, now: float | None, block: Sequence[Sequence[float]],
                tops: Sequence[float | None], drawn: tuple[int, Sequence[float | None], Sequence[str]] | None
                ) -> tuple[int, list[str]]:
    """:func:`spark_rows` of ``block`` (rows of ``history.cells(…, seconds, cols, now)``) and the cells' version
    (:meth:`History.cells_change`): from ``drawn`` (version, scales, sparklines drawn before) when those were
    drawn from the version just before at the same scales, only the changed columns drawn
    (:func:`spark_update`); else all of them."""
    version, change = history.cells_change(seconds, cols, now)
    sparks = None
    if drawn is not None and change is not None and change[0] == drawn[0] and list(drawn[1]) == list(tops):
        sparks = spark_update(drawn[2], block, tops, change[1:])
    return version, sparks or spark_rows(block, tops)


def graph_rows(values: Sequence[float | None], height: int, maximum: float | None = None) -> list[str]:
    """A ``height``-row block graph (top row first), 8 levels per row; a known value draws at least ``▁``
    in the bottom row, a gap (None, NaN) nothing.

    A column depends only on its value's height in eighths (whole eighths, and whether exactly so): each
    column is looked up in a cache of such columns (:func:`_graph_column`), and the rows are the columns
    read across (``zip``), all in plain Python."""
    if height <= 0:
        return []
    known = [v for v in values if v is not None and v == v]
    if not known and not len(values):
        return [""] * height
    top = maximum if maximum else (max(known) if known else 1.0)
    top = float(top or 1.0)
    cache = _GRAPH_COLUMNS.get(height)
    if cache is None:
        cache = _GRAPH_COLUMNS[height] = {}
    vals = [NAN if v is None else v for v in values]
    # eighths high: max(max(0, min(1, v / top)) * height * 8, 0.5), the clamps written as comparisons (the
    # built-in min and max cost more than the rest); at least the bottom eighth, as a sparkline draws it:
    # 0 % reads as a reading, not as a gap in the data (a NaN's column is blanked below)
    h = float(height)
    keys: list[float] = []
    for v in vals:
        x = v / top
        y = x if x < 1.0 else 1.0  # min(1, x): NaN (inf / inf) is 1
        e = (y if y > 0.0 else 0.0) * h * 8.0
        if e < 0.5:
            e = 0.5
        q = e // 1.0
        keys.append(q + q + (e != q))  # 2q: exactly q eighths; 2q + 1: more
    for key in set(keys).difference(cache):
        cache[key] = _graph_column(key / 2, height)
    cols = list(map(cache.__getitem__, keys))
    if len(known) != len(vals):  # gaps draw nothing
        blank = (" ",) * height
        for i, v in enumerate(vals):
            if v != v:
                cols[i] = blank
    return ["".join(row) for row in zip(*cols)]


def block_update(old: Sequence[str], values: Sequence[float], height: int, top: float | None,
                 change: tuple[int, int]) -> list[str] | None:
    """:func:`graph_rows` of ``values`` at full height ``top`` from the rows drawn before (``old``), when
    ``values`` are the ones they were drawn from moved left by ``shift`` columns with only the columns from
    ``first`` on changed (``change``: (shift, first), as :func:`spark_update`): a column depends only on its
    own value at a fixed scale, so the old columns are kept and only the new ones drawn. None when ``top`` is
    not a positive finite number (the window's own peak, which moves: redraw it all)."""
    shift, first = change
    columns = len(values)
    if not fixed_scale(top) or len(old) != height or not _moves(change, columns) or any(len(r) != columns for r in old):
        return None
    new = graph_rows(values[first:], height, top)
    return [row[shift:shift + first] + fresh for row, fresh in zip(old, new)]


def live_block(history: History, seconds: float, now: float | None, values: Sequence[float], height: int,
               top: float | None, drawn: tuple[int, int, float | None, list[str]] | None
               ) -> tuple[int, int, float | None, list[str]]:
    """:func:`graph_rows` of one GPU's ``values`` (a row of ``history.cells(…, seconds, len(values), now)``),
    kept as (cells' version, height, top, rows): from ``drawn`` when that was drawn from the version just before
    at the same height and scale, only the changed columns drawn (:func:`block_update`); else all of them."""
    version, change = history.cells_change(seconds, len(values), now)
    rows = None
    if drawn is not None and change is not None and change[0] == drawn[0] and drawn[1:3] == (height, top):
        rows = block_update(drawn[3], values, height, top, change[1:])
    return version, height, top, rows if rows is not None else graph_rows(values, height, top)


NAN = math.nan
_GRAPH_COLUMNS: dict[int, dict[float, tuple[str, ...]]] = {}  # height → key of graph_rows → column, top first


def _graph_column(scaled: float, height: int) -> tuple[str, ...]:
    """One column of :func:`graph_rows`, top row first, for a value ``scaled`` eighths high."""
    return tuple(_block(scaled - r * 8) for r in range(height - 1, -1, -1))


def _block(level: float) -> str:
    """The block character of one cell of a :func:`graph_rows` column, ``level`` eighths filled."""
    return " " if level <= 0 else (BAR_FULL if level >= 8 else SPARK[max(0, int(level) - 1)])


def fmt_duration(s: float) -> str:
    """A compact duration (``1h02m``, ``3m05s``, ``12s``): :func:`gpuscope.core.units.duration`, short form."""
    return duration(s, short=True)


def short_name(name: str) -> str:
    """A GPU name for a panel title, terminal-safe (names can come from recordings and brokers)."""
    return clean(name, 60).replace("NVIDIA ", "").replace("GeForce ", "")


def path_style(label: str) -> str:
    """The style of a ``topo -m`` label, from its level (:func:`gpuscope.core.vocab.path_level`)."""
    return LEVEL_STYLE_STRONG[path_level(label)]


def rows_of(text: str, wrap_width: int | None) -> int:
    """Screen rows a text takes: its lines, each wrapped at ``wrap_width`` cells."""
    from rich.cells import cell_len

    lines = text.split("\n")
    if not wrap_width:
        return len(lines)
    return sum(max(1, -(-cell_len(line) // wrap_width)) for line in lines)


def set_content(widget: object, content: Text, wrap_width: int | None = None) -> bool:
    """Update a Static only when its content changed; re-layout only when its line count or its width changed
    (content first drawn before the widget had its width may have wrapped into more rows than it now needs).

    Returns True when the widget was updated. Redrawing unchanged panels and re-running layout on
    every refresh was most of the TUI's CPU (profiled), so every panel goes through here.
    """
    prev = getattr(widget, "_gs_last", None)
    if prev is not None and prev == content and prev.plain == content.plain:
        return False
    rows = (rows_of(content.plain, wrap_width), getattr(getattr(widget, "size", None), "width", None))
    layout = prev is None or getattr(widget, "_gs_rows", None) != rows
    widget._gs_rows = rows  # type: ignore[attr-defined]
    widget._gs_last = content  # type: ignore[attr-defined]
    widget.update(content, layout=layout)  # type: ignore[attr-defined]
    return True
