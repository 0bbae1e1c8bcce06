"""The compact GPU panel: one line per GPU (fits 8 GPUs at 80×24); spare rows below go to graphs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.text import Text

from gpuscope.core.model import DeviceInfo, GpuReading
from gpuscope.core.topology import best_link, pcie_capacity_bytes_per_s
from gpuscope.core.view import ViewState
from gpuscope.core.vocab import LINK_LEVEL, link_label, link_state, reading_busy
from gpuscope.widgets.lines import LineWidget
from gpuscope.widgets.style import (
    DIM,
    LEVEL_STYLE,
    OK,
    WARN,
    bar,
    fmt_gb,
    level_style,
    short_name,
    spark_cells,
)

Cell = Callable[[DeviceInfo, GpuReading], Text]


def _util(d: DeviceInfo, r: GpuReading) -> Text:
    u = r.util_gpu_pct
    return Text(f"{u:4.0f}%" if u is not None else "   – ", style="bold")


def _bar(d: DeviceInfo, r: GpuReading) -> Text:
    return bar(r.util_gpu_pct, 100, 8, style=OK)


def _power(d: DeviceInfo, r: GpuReading) -> Text:
    plimit = r.power_limit_w or d.power_limit_w or 0
    pw = r.power_w or 0
    return Text(f"{pw:>3.0f}/{plimit:<4.0f}", style=level_style(pw / plimit if plimit else None))


def _link(d: DeviceInfo, r: GpuReading) -> Text:
    bg, bw = best_link(d)
    state = link_state(r.pcie_gen, r.pcie_width, bg, bw, reading_busy(r, pcie_capacity_bytes_per_s(r.pcie_gen, r.pcie_width)))
    link = link_label(r.pcie_gen, r.pcie_width, short=True) + ("" if state == "at_max" else "▼")
    return Text(f"{link:<7}", style=LEVEL_STYLE[LINK_LEVEL[state]])


def _rate(attr: str) -> Cell:
    def cell(d: DeviceInfo, r: GpuReading) -> Text:
        x = getattr(r, attr)
        cap = pcie_capacity_bytes_per_s(r.pcie_gen, r.pcie_width)
        return Text(f"{fmt_gb(x):>5}", style=level_style(x / cap if x is not None and cap else None))
    return cell


def _nv(d: DeviceInfo, r: GpuReading) -> Text:
    nv = max([x for x in (r.nvlink_rx_bytes_per_s, r.nvlink_tx_bytes_per_s) if x is not None], default=None)
    return Text(f"{fmt_gb(nv) if d.nvlinks_active else '–':>5}")


# (header, width, priority: lower is dropped last, cell); widths include no separator
COLUMNS: list[tuple[str, int, int, Cell]] = [
    ("util", 5, 0, _util),
    ("", 8, 5, _bar),
    ("SM MHz", 6, 3, lambda d, r: Text(f"{r.sm_clock_mhz or 0:>6}")),
    ("W", 8, 2, _power),
    ("°C", 3, 4, lambda d, r: Text(f"{r.temp_gpu_c or 0:>3.0f}")),
    ("link", 7, 1, _link),
    ("PCIe↓", 5, 0, _rate("pcie_rx_bytes_per_s")),
    ("↑GB/s", 5, 0, _rate("pcie_tx_bytes_per_s")),
    ("NV", 5, 2, _nv),
]
NAME_W = 11


def table_columns(width: int) -> list[int]:
    """Indices of the columns that fit in ``width`` cells (each with a 1-cell gap), dropping the
    highest priority number first; the GPU name column is always there."""
    keep = list(range(len(COLUMNS)))
    while keep and NAME_W + sum(COLUMNS[i][1] + 1 for i in keep) > width:
        worst = max((i for i in keep if COLUMNS[i][2] > 0), key=lambda i: (COLUMNS[i][2], i), default=None)
        if worst is None:
            break
        keep.remove(worst)
    return keep


def table_name(name: str, width: int) -> str:
    """A GPU's model in ``width`` cells: brand words dropped first (``RTX A6000`` → ``A6000``), then cut
    with ``…``, never silently mid-number (``RTX A600`` would read as another card)."""
    s = short_name(name)
    for drop in ("RTX ", "Tesla ", " PCIe", " SXM5", " SXM4", " SXM", " NVL"):
        if len(s) <= width:
            break
        s = s.replace(drop, "")
    return s if len(s) <= width else s[:width - 1] + "…"


class GpuTable(LineWidget):
    """One line per GPU, drawn line by line (widgets/lines.py): only the rows that changed repaint."""

    DEFAULT_CSS = "GpuTable { height: auto; padding: 0 1; }"

    def __init__(self, **kw: Any):
        super().__init__(**kw)
        self._graph_cache: dict[tuple[str, int], str] = {}  # (metric, GPU) → sparkline

    def _graph(self, v: ViewState, metric: str, index: int, cols: int, top: float | None, tag: str = "") -> str:
        """A GPU's sparkline over the window, recomputed only when the graphs are redrawn (about once a
        second: ``v.graphs``) or the width changed."""
        key = (tag + metric, index)
        g = self._graph_cache.get(key)
        if v.graphs or g is None or len(g) != cols:
            g = self._graph_cache[key] = spark_cells(v.history.cells(metric, v.window_s, cols, v.now or None)[index], top)
        return g

    def show(self, v: ViewState) -> None:
        width = max(30, self.size.width - 2 if self.size.width else 78)
        cols = table_columns(width)
        used = NAME_W + sum(COLUMNS[i][1] + 1 for i in cols)
        graphw = width - used - 1
        head = Text(f"{'GPU':<{NAME_W}}", style="bold")
        for i in cols:
            head.append(" " + f"{COLUMNS[i][0]:>{COLUMNS[i][1]}}")
        lines = [head]
        for dev in v.inventory.devices:
            r = v.frame.gpus[dev.index] if v.frame and dev.index < len(v.frame.gpus) else None
            t = Text(f"{dev.index:<2}{table_name(dev.name, NAME_W - 3):<{NAME_W - 2}}")
            if r is None:
                t.append("waiting…", style=DIM)
            elif r.lost:
                t.append("LOST: fell off the bus", style="bold red")
            else:
                for i in cols:
                    t.append(" ")
                    t.append_text(COLUMNS[i][3](dev, r))
                if graphw >= 8:
                    t.append("  " + self._graph(v, "util", dev.index, graphw - 1, 100), style=OK)
                if r.clock_events and set(r.clock_events) - {"gpu_idle"}:
                    t.append(" !", style=WARN)
            lines.append(t)
        lines += self._spare_graphs(v, width, len(lines))
        self.set_lines(lines)

    def _spare_graphs(self, v: ViewState, width: int, used: int) -> list[Text]:
        """Rows left below the table (the panel is given all spare rows) show each GPU's utilisation
        and PCIe history over the window, one graph a row, as many as fit."""
        spare = (self.size.height or 0) - used
        n = len(v.inventory.devices)
        if spare < n + 1 or not v.frame:
            return []
        metrics: list[tuple[str, str, float | None]] = [("util", "util %", 100.0)]
        if spare >= 2 * n + 1:
            metrics.append(("pcie_rx", "PCIe↓", None))
        if spare >= 3 * n + 1:
            metrics.append(("pcie_tx", "PCIe↑", None))
        out = [Text(f"over {int(v.window_s // 60)} min", style=DIM)]
        gw = max(8, width - 14)
        for metric, title, top in metrics:
            for dev in v.inventory.devices:
                r = v.frame.gpus[dev.index] if dev.index < len(v.frame.gpus) else None
                cap = top or (pcie_capacity_bytes_per_s(r.pcie_gen, r.pcie_width) if r else None)
                t = Text(f"{dev.index} {title:<7}", style=DIM)
                t.pad_right(13 - t.cell_len)
                t.append(self._graph(v, metric, dev.index, gw, cap, tag="spare:"), style=OK)
                out.append(t)
        return out
