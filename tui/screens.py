"""The App's screens besides the main one: help, marker label prompt, one GPU's detail graphs."""

from __future__ import annotations

import math
from array import array
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.css.query import NoMatches
from textual.screen import ModalScreen, Screen
from textual.widgets import Input, Static

from gpuscope.core import catalogue
from gpuscope.core.catalogue import Metric
from gpuscope.core.history import carry_span, resample
from gpuscope.core.model import DeviceInfo, GpuReading
from gpuscope.core.text import clean
from gpuscope.core.units import NONE, is_whole_unit
from gpuscope.core.view import ViewState
from gpuscope.widgets.detail_graphs import graph_block, graph_heights, graph_labels, label_width
from gpuscope.widgets.fit import fit_words, key_names
from gpuscope.widgets.keybar import KeyBar
from gpuscope.widgets.processes_panel import process_lines
from gpuscope.widgets.status_bar import StatusBar
from gpuscope.widgets.style import DIM, fmt_duration, short_name

DETAIL_PROCESS_LINES = 9  # the header and up to 8 processes (then "+k more") above the graphs


def detail_metrics() -> list[Metric]:
    """The metrics graphed in the detail view, from the catalogue (those kept in history and marked detail)."""
    return catalogue.metrics("gpu", history=True, detail=True)


class HelpScreen(ModalScreen[None]):
    """Every key, as the user types it; scrolls (arrows, page keys, mouse) when the terminal is short."""

    BINDINGS = [Binding("escape,q,question_mark,h", "dismiss", "close")]
    DEFAULT_CSS = "HelpScreen { align: center middle; } " \
                  "#help-scroll { width: 84; max-width: 100%; height: auto; max-height: 100%; " \
                  "border: round $accent; background: $surface; } #help { padding: 0 1; }"
    AUTO_FOCUS = "#help-scroll"

    def __init__(self, bindings: list[Binding]):
        super().__init__()
        self._b = bindings

    def compose(self) -> ComposeResult:
        t = Text("gpuscope keys", style="bold")
        t.append("  (esc closes; ↑↓ scroll)\n\n", style=DIM)
        for b in self._b:
            if b.description:
                t.append(f"{key_names(b.key):<16}", style="bold cyan")
                t.append(f"{b.description}\n")
        t.append(f"{'ctrl+p':<16}command palette: every command by name\n")
        t.append("\nColours: red = over the limit, or a link below its max under load; yellow = near it; "
                 "green = fine; grey = idle or unknown.\n"
                 "Topology: SYS red (across NUMA nodes), PHB/NODE amber, NV# green.", style=DIM)
        with VerticalScroll(id="help-scroll"):
            yield Static(t, id="help")


class FindingsScreen(ModalScreen[None]):
    """Every active finding with its full text (the panel shows one line each)."""

    BINDINGS = [Binding("escape,q,f", "dismiss", "close")]
    DEFAULT_CSS = "FindingsScreen { align: center middle; } " \
                  "#findings-scroll { width: 100; max-width: 100%; height: auto; max-height: 100%; " \
                  "border: round $accent; background: $surface; } #findings-all { padding: 0 1; }"
    AUTO_FOCUS = "#findings-scroll"

    def __init__(self, text: Text):
        super().__init__()
        self._text = text

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="findings-scroll"):
            yield Static(self._text, id="findings-all")


class MarkerScreen(ModalScreen[str | None]):
    BINDINGS = [Binding("escape", "dismiss(None)", "cancel")]
    DEFAULT_CSS = "MarkerScreen { align: center middle; } MarkerScreen Input { width: 60; max-width: 100%; }"
    AUTO_FOCUS = "#marker"  # typing goes to the label at once

    def compose(self) -> ComposeResult:
        yield Input(placeholder="marker label (enter to drop, esc to cancel)", id="marker")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value)


class ConfirmScreen(ModalScreen[bool]):
    """A small question: its lines, then "enter: ACTION   esc: cancel". Dismissed with True (enter) or False."""

    BINDINGS = [Binding("enter", "dismiss(True)", "run", id="confirm"),
                Binding("escape", "dismiss(False)", "cancel", id="cancel")]
    DEFAULT_CSS = """
    ConfirmScreen { align: center middle; }
    ConfirmScreen #confirm { width: 72; max-width: 100%; height: auto; border: round $warning; padding: 0 1;
                             background: $surface; }
    """

    def __init__(self, lines: list[str], action: str, title: str = "Link probe"):
        super().__init__()
        self._lines = [clean(ln, 400) for ln in lines]
        self._action = action
        self._title = title

    def compose(self) -> ComposeResult:
        text = Text("\n".join(self._lines))
        text.append(f"\n\nenter: {self._action}   esc: cancel", style=DIM)
        box = Static(text, id="confirm")
        box.border_title = self._title
        yield box


class GpuDetailScreen(Screen[None]):
    """Larger graphs of every metric of one GPU over the current window, sized to the screen: spare rows
    make the graphs taller (up to MAX_GRAPH_ROWS); when even MIN_GRAPH_ROWS each do not fit, the view
    scrolls (arrows, page keys, mouse) and the footer says so."""

    BINDINGS = [Binding("escape,q,d", "app.pop_screen", "back"), Binding("w", "app.cycle_window", "window")]
    # a one-cell scrollbar gutter kept whether or not the view scrolls, so the graph width never depends on it
    DEFAULT_CSS = "GpuDetailScreen #detail { padding: 0 1; } " \
                  "GpuDetailScreen #detail-scroll { scrollbar-gutter: stable; scrollbar-size-vertical: 1; }"
    AUTO_FOCUS = "#detail-scroll"  # the arrow and page keys scroll at once
    HINTS = [("esc", "back"), ("w", "window"), ("1-8", "GPU")]
    SCROLL_HINT = ("↑↓", "scroll")
    CHROME_COLS = 3  # the padding either side and the scrollbar gutter
    CHROME_ROWS = 2  # the header and the footer

    def __init__(self, index: int):
        super().__init__()
        self.index = index
        self.scrolls = False  # the last drawing was taller than the screen

    def on_mount(self) -> None:
        """This view lists the GPU's processes with their SM %: the live source reads it while one is open
        (tui/run.py read_on_demand asks ``details_open``, a plain count, from the sampler's thread)."""
        app: Any = self.app
        app.details_open = getattr(app, "details_open", 0) + 1  # another App (tests) has no such count: starts at 0

    def on_unmount(self) -> None:
        app: Any = self.app
        app.details_open = max(0, getattr(app, "details_open", 0) - 1)

    def compose(self) -> ComposeResult:
        yield StatusBar(id="status")
        yield VerticalScroll(Static(id="detail"), id="detail-scroll")
        yield KeyBar(list(self.HINTS), id="keys")

    def show(self, v: ViewState) -> None:
        """Draw ``v``. A screen whose widgets are not there (pushed but not composed yet, or being removed) draws
        nothing: the next refresh draws it. (A redraw queued before a key that opened or closed this view
        raised NoMatches on a loaded machine and ended the app.)"""
        try:
            bar = self.query_one(StatusBar)
            keys = self.query_one(KeyBar)
            detail = self.query_one("#detail", Static)
        except NoMatches:
            return
        bar.show(v)
        size = self.size if self.size.width else self.app.size
        lines = detail_lines(v, self.index, size.width - self.CHROME_COLS, size.height - self.CHROME_ROWS)
        scrolls = len(lines) > size.height - self.CHROME_ROWS
        if scrolls != self.scrolls:
            self.scrolls = scrolls
            keys.set_hints([self.HINTS[0], self.SCROLL_HINT, *self.HINTS[1:]] if scrolls else list(self.HINTS))
        detail.update(Text("\n", no_wrap=True, overflow="crop").join(lines))


def detail_lines(v: ViewState, index: int, width: int, rows: int) -> list[Text]:
    """The detail view of GPU ``index`` as lines of at most ``width`` cells, graphs sized to share ``rows``
    (rows left after the head and the processes; the graphs scroll when they need more)."""
    width = max(12, width)
    dev = v.inventory.devices[index]
    head = [fit_words(Text(f"GPU{index} {short_name(dev.name)}  window {fmt_duration(v.window_s)}  "
                           f"{clean(dev.bus_id, 20)}  NUMA {dev.numa_node}  affinity {dev.cpu_affinity or NONE}",
                           style="bold"), width)]
    if dev.memory_info_version == 1:  # the driver has no memory info v2: used includes the reserved memory
        head.append(fit_words(Text("memory info v1 (used includes driver-reserved)", style="dim"), width))
    r = v.frame.gpus[index] if v.frame else None
    head.append(Text("Processes" + (" (simulated)" if v.inventory.simulated else ""), style="bold"))
    head += process_lines(v.frame, width, DETAIL_PROCESS_LINES, gpu=index)
    graphs = []  # (metric, times, values in displayed units, now, peak, top)
    for m in detail_metrics():
        key = m.key or m.name
        # two windows: the graph's cells are pinned to the clock (as the panels'), and a carry into its first
        # cells comes from up to a window before; the peak is the window's own
        times, vals = v.history.window(key, index, carry_span(v.window_s, 1), v.now or None)  # any width
        th = (v.now or (times[-1] if len(times) else 0.0)) - v.window_s
        finite = [x / m.scale for t, x in zip(times, vals) if t >= th and x == x]
        if not finite:
            continue
        raw = m.value(r) if r is not None else None
        cur = None if raw is None else raw / m.scale
        peak = max(finite + ([cur] if cur is not None else []))  # the readings' peak (cells are means)
        top = detail_top(key, dev, r, peak)
        graphs.append((m, times, array("f", [x / m.scale for x in vals]), cur, peak, top))  # float32, as stored
    heights = graph_heights(rows - len(head), len(graphs))
    fold = min(heights, default=3) < 3  # some graphs have two rows: all label alike, the scale by the title
    labels = [graph_labels(m.label, detail_number(cur, m.unit), detail_number(peak, m.unit),
                           detail_number(top, m.unit, ceiling=True), h, fold)
              for (m, _, _, cur, peak, top), h in zip(graphs, heights)]
    label_w = label_width([s for ls in labels for s in ls], width)
    cols = width - label_w
    out = list(head)
    for (_, times, vals, _, _, top), ls in zip(graphs, labels):
        out += graph_block(ls, resample(times, vals, v.now or 0, v.window_s, cols, pinned=True), top, label_w)
    return out


def detail_number(x: float | None, unit: str, *, ceiling: bool = False) -> str:
    """A detail graph's reading (``now``, ``peak``) or, with ``ceiling``, its scale's top, in the metric's
    displayed ``unit``: clocks (MHz) as whole numbers (``1754``, never ``1754.0``); other readings with one
    decimal (``45.3``); other ceilings as short as they go (``100``, ``31.5``); ``–`` when unknown."""
    if x is None or x != x:
        return NONE
    if is_whole_unit(unit):
        return f"{x:.0f}"
    return f"{x:g}" if ceiling else f"{x:.1f}"


def detail_top(metric: str, dev: DeviceInfo, r: GpuReading | None, peak: float) -> float:
    """The full-height value of a detail graph (history key ``metric``): the catalogue's ceiling (link
    capacity, NVLinks' capacity, power limit, clock max, memory size) to one decimal, so noise on an idle link
    draws flat and the scale reads ``0–31.5``; else the peak, with the metric's floor, rounded up to two
    significant digits."""
    m = catalogue.by_key(metric)
    top = catalogue.ceiling(m, dev, r)
    if top:
        return round(top, 1)
    return round_up_2(max(peak, m.floor)) or 1.0


def round_up_2(x: float) -> float:
    """``x`` rounded up to two significant digits (a peak as a scale's top: ``1.02678`` → 1.1, ``257.3`` →
    260), so the label reads "0–1.1", not "0–1.02678"; 0, negative and non-finite values unchanged."""
    if not x or x < 0 or not math.isfinite(x):
        return x
    step = 10.0 ** (math.floor(math.log10(x)) - 1)
    return round(math.ceil(round(x / step, 9)) * step, 12)
