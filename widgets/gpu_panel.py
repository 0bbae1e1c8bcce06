"""The per-GPU panel: clocks, power, memory, PCIe and NVLink against their ceilings, with history."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.text import Text
from textual.message import Message

from gpuscope.core import catalogue
from gpuscope.core.boards import memory_temp_label
from gpuscope.core.catalogue import Metric
from gpuscope.core.health import mig_text
from gpuscope.core.model import DeviceInfo, GpuReading
from gpuscope.core.text import clean
from gpuscope.core.topology import best_link, pcie_capacity_bytes_per_s
from gpuscope.core.view import ViewState
from gpuscope.core.vocab import CLOCK_EVENT_BY_NAME, LINK_LEVEL, link_label, link_state, reading_busy
from gpuscope.widgets.fit import cells, fit_words
from gpuscope.widgets.lines import LineWidget
from gpuscope.widgets.panel_graphs import (
    current,
    graph_heights,
    graph_labels,
)
from gpuscope.widgets.style import (
    DIM,
    LEVEL_STYLE,
    OK,
    bar,
    bar_key,
    fmt_num,
    fmt_rate,
    label_and_graph,
    level_style,
    live_block,
    live_sparks,
    short_name,
)


def badges(r: GpuReading) -> Text:
    """The clock-event reasons as badges (words and levels from core/vocab.py; alarming ones reversed)."""
    t = Text()
    for name in r.clock_events:
        e = CLOCK_EVENT_BY_NAME.get(name)
        label, style = (e.badge, LEVEL_STYLE[e.level]) if e else (name, DIM)
        t.append(f" {label} ", style=f"reverse {style}" if style != DIM else DIM)
        t.append(" ")
    return t


def link_text(dev: DeviceInfo, r: GpuReading, busy: bool) -> Text:
    """``Gen1×16`` coloured by the link's state (red below max under load), with the max beside it."""
    bg, bw = best_link(dev)
    state = link_state(r.pcie_gen, r.pcie_width, bg, bw, busy)
    t = Text(link_label(r.pcie_gen, r.pcie_width), style=f"bold {LEVEL_STYLE[LINK_LEVEL[state]]}")
    if state != "at_max":
        t.append(f" max {link_label(bg, bw)}", style=DIM)
        if state == "below_max_idle":
            t.append(" (idle)", style=DIM)
    return t


def rate_line(label: str, val: float | None, cap: float | None) -> Text:
    """``  RX  398.5 GB/s  88% of 450.0 GB/s`` (at most 35 cells: the graphs start at column 36)."""
    t = Text(f"{label:<5} ")  # a space of its own: "NV RX 204.6 GB/s", never "NV RX204.6"
    share = (val / cap) if (val is not None and cap) else None
    t.append(f"{fmt_rate(val):>10}", style="bold " + level_style(share))
    t.append(f" {share * 100:3.0f}%" if share is not None else "     ", style=level_style(share))
    if cap:
        t.append(" of " + fmt_rate(cap), style=DIM)
    return t


GRAPH_AT = 36  # every graph starts at this column, so their time axes line up


def rate_rows(dev: DeviceInfo, r: GpuReading, cap: float | None) -> list[tuple[str, float | None, str, float | None]]:
    """(label, bytes/s, metric, ceiling) of each link rate the panel shows: PCIe RX and TX, then NVLink's
    when the GPU has active links."""
    rates = [("  RX", r.pcie_rx_bytes_per_s, "pcie_rx", cap), ("  TX", r.pcie_tx_bytes_per_s, "pcie_tx", cap)]
    if dev.nvlinks_active:
        ncap = catalogue.raw_ceiling(catalogue.by_key("nvlink_rx"), dev, r)  # the findings' ceiling too
        rates += [("NV RX", r.nvlink_rx_bytes_per_s, "nvlink_rx", ncap),
                  ("NV TX", r.nvlink_tx_bytes_per_s, "nvlink_tx", ncap)]
    return rates


def status_text(dev: DeviceInfo, r: GpuReading, util: str) -> Text:
    """``util  97%  P0  71°C HBM 80°C  fan 40%  mem 70.1/80 GiB`` and the clock-event badges."""
    t = Text()
    t.append(f"util {util:>4}", style="bold " + level_style((r.util_gpu_pct or 0) / 100, 2, 2))
    t.append(f"  P{r.pstate if r.pstate is not None else '?'}", style=DIM)
    t.append(f"  {fmt_num(r.temp_gpu_c, '°C')}")
    if r.temp_mem_c is not None:
        t.append(f" {memory_temp_label(dev.name)} {fmt_num(r.temp_mem_c, '°C')}", style=DIM)
    if r.fan_pct is not None:
        t.append(f"  fan {r.fan_pct:.0f}%", style=DIM)
    if r.mem_used_bytes is not None and r.mem_total_bytes:
        t.append(f"  mem {r.mem_used_bytes / 2**30:.1f}/{r.mem_total_bytes / 2**30:.0f} GiB")
    t.append("  ")
    t.append_text(badges(r))
    return t


def clock_text(r: GpuReading, sm_max: int | None, barw: int) -> Text:
    """The SM clock against its max, as a bar ``barw`` cells wide and in MHz; the memory clock."""
    t = Text("SM  ")
    t.append_text(bar(r.sm_clock_mhz, sm_max, barw, style=OK))
    t.append(f" {fmt_num(r.sm_clock_mhz)}/{fmt_num(sm_max)} MHz")
    t.append(f"   MEM {fmt_num(r.mem_clock_mhz)} MHz", style=DIM)
    return t


def power_text(r: GpuReading, plimit: float | None, barw: int) -> Text:
    """Power against its limit, as a bar ``barw`` cells wide and in W; SM, tensor and DRAM activity where
    the GPU reports them."""
    t = Text("PWR ")
    t.append_text(bar(r.power_w, plimit, barw))
    t.append(f" {fmt_num(r.power_w)}/{fmt_num(plimit)} W")
    if r.sm_active_pct is not None:
        t.append("   SM act ", style=DIM)
        t.append(f"{r.sm_active_pct:.0f}%", style="bold")
        t.append(f" tensor {fmt_num(r.tensor_active_pct, '%')} DRAM {fmt_num(r.dram_bw_util_pct, '%')}",
                 style=DIM)
    return t


def pcie_text(dev: DeviceInfo, r: GpuReading, busy: bool) -> Text:
    """``PCIe Gen4×16`` (:func:`link_text`) and the GPU's active NVLinks."""
    t = Text("PCIe ")
    t.append_text(link_text(dev, r, busy))
    if dev.nvlinks_active:
        t.append(f"  NVLink ×{dev.nvlinks_active}", style=DIM)
    return t


def rate_graph_text(name: str, val: float | None, c: float | None, share: float | None, graph: str) -> Text:
    """:func:`rate_line` and its sparkline from column :data:`GRAPH_AT`, in the share's level colour."""
    t = rate_line(name, val, c)
    t.pad_right(GRAPH_AT - t.cell_len)
    t.append(graph, style=level_style(share))
    return t


def util_graph_text(head_text: str, graph: str) -> Text:
    """The closing line of a panel without spare rows: util and the window, dim, and its sparkline."""
    t = Text(head_text, style=DIM)
    t.pad_right(GRAPH_AT - t.cell_len)
    t.append(graph, style=OK)
    return t


class GpuPanel(LineWidget):
    """One GPU, several lines. ``index`` is the GPU's NVML index.

    Drawn line by line (Textual's line API): a refresh repaints only the lines whose text changed, so
    an idle GPU whose power moved by a watt costs one line on the wire, not the whole panel (the
    panels were most of the bytes the TUI wrote: benchmarks/bench_peers_concurrent.py).
    """

    DEFAULT_CSS = """
    GpuPanel { height: auto; border: round $primary-darken-2; padding: 0 1; }
    GpuPanel:focus { border: round $accent; }
    GpuPanel.lost { border: round red; }
    """

    def __init__(self, index: int, **kw: Any):
        super().__init__(**kw)
        self.index = index
        self.can_focus = True
        # rows to draw in at most: the shortest GPU panel's (set by the app), so that panels one or two rows
        # apart in height (a grid's rows split unevenly) draw the same graphs at the same heights
        self.rows_cap: int | None = None
        self._graph_cache: dict[str, str] = {}
        self._graph_drawn: tuple[int, list[tuple[str, float | None]]] = (-1, [])  # cells' version, what was drawn
        self._line_cache: dict[str, tuple[tuple[object, ...], Text]] = {}
        self._graph_slots: dict[str | None, list[str]] = {}  # a panel metric → its graph rows' names in _line_cache
        # the spare-row graphs: (metric, height, rows, peak, top) each, and what they were drawn for
        self._panel_cache: tuple[tuple[int, int, int], list[tuple[Metric, int, list[str], float | None, float]]] = (
            (0, 0, 0), [])
        self._block_drawn: dict[str, tuple[int, int, float | None, list[str]]] = {}  # metric → live_block's

    class Opened(Message):
        """The user clicked the panel: open this GPU's detail view."""

        def __init__(self, index: int):
            super().__init__()
            self.index = index

    def on_click(self) -> None:
        self.post_message(self.Opened(self.index))

    def show(self, v: ViewState) -> None:
        dev = v.inventory.devices[self.index]
        r = v.frame.gpus[self.index] if v.frame and self.index < len(v.frame.gpus) else None
        title = f"GPU{self.index} {short_name(dev.name)}"
        if self.border_title != title:
            self.border_title = title
        if r is None:
            self.set_lines([Text("waiting for the first sample…", style=DIM)])
            return
        if r.lost:
            self._show_lost(v, dev, r)
            return
        if self.has_class("lost"):
            self.remove_class("lost")
        size = self.size  # read once: each read walks the DOM
        width = max(20, size.width or 76)  # the content area: inside the border and padding
        cap = pcie_capacity_bytes_per_s(r.pcie_gen, r.pcie_width)
        util = fmt_num(r.util_gpu_pct, '%')
        lines = self._reading_lines(dev, r, util, width, reading_busy(r, cap))
        rates = rate_rows(dev, r, cap)
        # spare rows (the panel is taller than its lines) go to block graphs of several metrics, each
        # scaled to its ceiling (widgets/panel_graphs.py); ``size`` is the content area (inside border
        # and padding), so every row of it is used. Without them, a util sparkline closes the panel.
        spare = max(0, (size.height or 0) - len(lines) - len(rates))
        same = max(0, self.rows(size.height) - len(lines) - len(rates))  # as many in every GPU's panel: what is shown
        graphs = self._graphs(v, [(metric, c) for _, _, metric, c in rates] + ([] if same >= 2 else [("util", 100.0)]),
                              max(8, width - GRAPH_AT))
        lines += [self._rate_line(name, val, c, graphs[metric], width) for name, val, metric, c in rates]
        over = f"over {int(v.window_s // 60)} min"
        if same >= 2:
            lines += self._graph_lines(v, dev, r, spare, width, over, same)
        else:
            head_text = f"util {util} {over}"
            lines.append(self._line("g0", (head_text, graphs["util"]), util_graph_text, width, head_text,
                                    graphs["util"]))
        sub = mig_text(dev) or ""  # "MIG: 3 instances": the GPU is split, its figures are the whole GPU's
        if self.border_subtitle != sub:
            self.border_subtitle = sub
        self.set_lines(lines)

    def _show_lost(self, v: ViewState, dev: DeviceInfo, r: GpuReading) -> None:
        """A GPU that fell off the bus: said so, then what it was doing before, where there are rows."""
        self.add_class("lost")
        if self.border_subtitle != "LOST":
            self.border_subtitle = "LOST"
        lost = [self._line("lost", (dev.bus_id,), lambda: Text(
            f"LOST: fell off the bus ({clean(dev.bus_id, 20)}); the other GPUs go on", style="bold red"),
            max(20, self.size.width or 76))]
        spare = (self.size.height or 0) - 2  # all its rows: it draws unlike the others anyway
        if spare >= 1:  # what it was doing before it fell off: its graphs up to that moment
            lost.append(Text("before it was lost:", style=DIM))
            lost += self._graph_lines(v, dev, r, spare, max(20, self.size.width or 76),
                                      f"over {int(v.window_s // 60)} min")
        self.set_lines(lost)

    def _reading_lines(self, dev: DeviceInfo, r: GpuReading, util: str, width: int, busy: bool) -> list[Text]:
        """The reading's four lines: util and temperatures, clocks, power, the PCIe link; each rebuilt only
        when what it shows changed (keys: the shown values)."""
        line = self._line
        barw = max(8, min(30, width // 4))
        mem = (f"{r.mem_used_bytes / 2**30:.1f}/{r.mem_total_bytes / 2**30:.0f}"
               if r.mem_used_bytes is not None and r.mem_total_bytes else None)
        sm_max = dev.sm_clock_max_mhz
        plimit = r.power_limit_w or dev.power_limit_w
        return [
            line("1", (util, r.pstate, fmt_num(r.temp_gpu_c), fmt_num(r.temp_mem_c), fmt_num(r.fan_pct), mem,
                       tuple(r.clock_events)), status_text, width, dev, r, util),
            line("2", (bar_key(r.sm_clock_mhz, sm_max, barw), fmt_num(r.sm_clock_mhz), sm_max,
                       fmt_num(r.mem_clock_mhz)), clock_text, width, r, sm_max, barw),
            line("3", (bar_key(r.power_w, plimit, barw), fmt_num(r.power_w), fmt_num(plimit),
                       fmt_num(r.sm_active_pct), fmt_num(r.tensor_active_pct), fmt_num(r.dram_bw_util_pct)),
                 power_text, width, r, plimit, barw),
            line("4", (r.pcie_gen, r.pcie_width, best_link(dev), busy, dev.nvlinks_active), pcie_text, width,
                 dev, r, busy),
        ]

    def _rate_line(self, name: str, val: float | None, c: float | None, graph: str, width: int) -> Text:
        """A link's rate line (:func:`rate_line`) and its sparkline, rebuilt only when what it shows changed."""
        share = (val / c) if (val is not None and c) else None
        pct = f"{share * 100:3.0f}" if share is not None else None
        return self._line(name, (fmt_rate(val), pct, level_style(share), c, graph), rate_graph_text, width,
                          name, val, c, share, graph)

    def rows(self, height: int | None = None) -> int:
        """The content rows to fill: the panel's height (``height``, else read), or :attr:`rows_cap` when that is
        lower."""
        height = (self.size.height if height is None else height) or 0
        return height if self.rows_cap is None else min(height, self.rows_cap)

    def _line(self, slot: str, key: tuple[object, ...], build: Callable[..., Text], width: int, *args: Any) -> Text:
        """The line in ``slot``: the one shown before (the same object) when ``key`` (the values it shows,
        as shown) and the width are unchanged, else ``build(*args)`` fitted to ``width``. Most lines of an
        idle GPU do not change from one second to the next: this skips building and comparing them."""
        key = (key, width)
        old = self._line_cache.get(slot)
        if old is not None and old[0] == key:
            return old[1]
        t = build(*args)
        if cells(t.plain) > width:
            t = fit_words(t, width)
        self._line_cache[slot] = (key, t)
        return t

    def _graphs(self, v: ViewState, wanted: list[tuple[str, float | None]], cols: int) -> dict[str, str]:
        """Sparklines of this GPU's ``wanted`` (metric, scale) over the window, ``cols`` wide: rebuilt, all
        in one pass, when the graphs are redrawn (about once a second: ``v.graphs``) or one is missing or
        of another width; else the ones drawn before. Live, only the columns that changed since the last redraw
        are drawn (:func:`live_sparks`)."""
        cache = self._graph_cache
        if v.graphs or any(len(cache.get(m, "")) != cols for m, _ in wanted):
            block = [v.history.cells(m, v.window_s, cols, v.now or None)[self.index] for m, _ in wanted]
            tops = [c for _, c in wanted]
            drawn = ((self._graph_drawn[0], tops, [cache[m] for m, _ in wanted])
                     if self._graph_drawn[1] == wanted else None)  # the same graphs drawn last time
            version, sparks = live_sparks(v.history, v.window_s, cols, v.now or None, block, tops, drawn)
            cache.update(zip([m for m, _ in wanted], sparks))
            self._graph_drawn = (version, list(wanted))
        return cache

    def _graph_lines(self, v: ViewState, dev: DeviceInfo, r: GpuReading, spare: int, width: int, over: str,
                     same: int | None = None) -> list[Text]:
        """``spare`` rows of block graphs (:meth:`_panel_graphs`; the metrics that ``same`` rows hold, so that
        every GPU's panel shows the same ones), their words in the first 36 columns and every graph starting
        at column 36, as the rate sparklines do (one time axis)."""
        prefix = GRAPH_AT
        out = []
        for k, (m, h, rows, peak, top) in enumerate(self._panel_graphs(v, dev, r, spare, max(8, width - prefix),
                                                                       spare if same is None else same)):
            now = None if r.lost else current(m, r)
            labels = graph_labels(m, now, peak, top, h, over if k == 0 else "")
            slots = self._graph_slots.get(m.key)
            if slots is None or len(slots) < h:  # the lines' names in _line_cache: made once, not every second
                slots = self._graph_slots[m.key] = [f"g{m.key}{j}" for j in range(max(h, 8))]
            for j, (label, row) in enumerate(zip(labels, rows)):  # a row of every spare row: no closure each
                out.append(self._line(slots[j], (label, row), label_and_graph, width, label, DIM if j else "", row,
                                      prefix))
        return out

    def _panel_graphs(self, v: ViewState, dev: DeviceInfo, r: GpuReading, rows: int, cols: int, same: int
                      ) -> list[tuple[Metric, int, list[str], float | None, float]]:
        """The graphs in ``rows`` spare rows, ``cols`` wide: (metric, height, its rows top first, the
        window's peak, full height), as many metrics as ``same`` rows hold (:func:`graph_heights`), redrawn
        with the other graphs (about once a second) or on resize."""
        if not v.graphs and self._panel_cache[0] == (rows, cols, same) and self._panel_cache[1]:
            return self._panel_cache[1]
        # the panel metrics with a value in the window, in priority order, each with its cells and peak
        shown: list[tuple[Metric, list[float], float]] = []
        for m in catalogue.panel_metrics():
            try:  # every GPU's window of this metric, resampled once per sample (History.cells)
                cells = v.history.cells(m.key or m.name, v.window_s, cols, v.now or None)[self.index]
            except KeyError:
                continue
            row = cells if m.scale == 1 else [x / m.scale for x in cells]
            peak = max([x for x in row if x == x], default=None)  # NaN: a blank cell
            if peak is not None:
                shown.append((m, row, peak))
        out: list[tuple[Metric, int, list[str], float | None, float]] = []
        for (m, cells, peak), h in zip(shown, graph_heights(rows, len(shown), metrics_rows=same)):
            top = catalogue.full_scale(m, dev, r, peak)
            # live, only the columns that changed since the last redraw are drawn (widgets/style.py live_block)
            drawn = self._block_drawn[m.name] = live_block(v.history, v.window_s, v.now or None, cells, h, top,
                                                           self._block_drawn.get(m.name))
            out.append((m, h, drawn[3], peak, top))
        self._panel_cache = ((rows, cols, same), out)
        return out
