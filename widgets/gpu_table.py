"""The compact GPU panel: one line per GPU (fits 8 GPUs at 80×24); spare rows below go to graphs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.cells import cell_len
from rich.text import Text

from gpuscope.core import catalogue
from gpuscope.core.model import DeviceInfo, GpuReading
from gpuscope.core.topology import best_link, pcie_capacity_bytes_per_s
from gpuscope.core.units import NONE, fmt_num
from gpuscope.core.view import ViewState
from gpuscope.core.vocab import LINK_LEVEL, link_label, link_state, reading_busy
from gpuscope.widgets.fit import fit_words
from gpuscope.widgets.lines import LineWidget
from gpuscope.widgets.style import (
    DIM,
    LEVEL_STYLE,
    OK,
    WARN,
    Run,
    RunsMemo,
    bar_runs,
    fmt_gb,
    level_style,
    live_block,
    live_sparks,
    short_name,
)

Cell = Callable[[DeviceInfo, GpuReading], list[Run]]  # a column's runs of text and style for one GPU
_POWER = catalogue.by_key("power")


def _util(d: DeviceInfo, r: GpuReading) -> list[Run]:
    u = r.util_gpu_pct
    return [(f"{u:4.0f}%" if u is not None else "   – ", "bold")]


def _bar(d: DeviceInfo, r: GpuReading) -> list[Run]:
    return bar_runs(r.util_gpu_pct, 100, 8, style=OK)


def _power(d: DeviceInfo, r: GpuReading) -> list[Run]:
    plimit = catalogue.raw_ceiling(_POWER, d, r)
    pw = r.power_w
    return [(f"{fmt_num(pw):>3}/{fmt_num(plimit):<4}", level_style(pw / plimit if pw is not None and plimit else None))]


def _sm_clock(d: DeviceInfo, r: GpuReading) -> list[Run]:
    return [(f"{fmt_num(r.sm_clock_mhz):>6}", "")]


def _temp(d: DeviceInfo, r: GpuReading) -> list[Run]:
    return [(f"{fmt_num(r.temp_gpu_c):>3}", "")]


def _link(d: DeviceInfo, r: GpuReading) -> list[Run]:
    bg, bw = best_link(d)
    state = link_state(r.pcie_gen, r.pcie_width, bg, bw, reading_busy(r, pcie_capacity_bytes_per_s(r.pcie_gen, r.pcie_width)))
    link = link_label(r.pcie_gen, r.pcie_width, short=True) + ("" if state == "at_max" else "▼")
    return [(f"{link:<7}", LEVEL_STYLE[LINK_LEVEL[state]])]


def _rate(attr: str) -> Cell:
    def cell(d: DeviceInfo, r: GpuReading) -> list[Run]:
        x = getattr(r, attr)
        cap = pcie_capacity_bytes_per_s(r.pcie_gen, r.pcie_width)  # the link now (the catalogue's ceiling)
        return [(f"{fmt_gb(x):>5}", level_style(x / cap if x is not None and cap else None))]
    return cell


def _nv(d: DeviceInfo, r: GpuReading) -> list[Run]:
    nv = max([x for x in (r.nvlink_rx_bytes_per_s, r.nvlink_tx_bytes_per_s) if x is not None], default=None)
    return [(f"{fmt_gb(nv) if d.nvlinks_active else NONE:>5}", "")]


# (header, width, priority: lower is dropped last, cell); widths include no separator
COLUMNS: list[tuple[str, int, int, Cell]] = [
    ("util", 5, 0, _util),
    ("", 8, 5, _bar),
    ("SM MHz", 6, 3, _sm_clock),
    ("W", 8, 2, _power),
    ("°C", 3, 4, _temp),
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


def pad(text: str, width: int) -> str:
    """``text`` padded with spaces to ``width`` cells (never cut: as ``Text.pad_right``)."""
    return text + " " * (width - cell_len(text))


def name_width(names: list[str], most: int) -> int:
    """The GPU name column's width (index, name, a space): enough for the longest short name, between
    :data:`NAME_W` and ``most``."""
    need = max((len(short_name(n)) for n in names), default=0) + 3
    return max(NAME_W, min(most, need))


class GpuTable(LineWidget):
    """One line per GPU, drawn line by line (widgets/lines.py): only the rows that changed repaint."""

    DEFAULT_CSS = "GpuTable { height: auto; padding: 0 1; }"

    def __init__(self, **kw: Any):
        super().__init__(**kw)
        # tag + metric → the cells' version (History.cells_change), the scales, every GPU's sparkline
        self._graph_cache: dict[str, tuple[int, list[float | None], list[str]]] = {}
        # (height:metric, GPU) → its block graph (live_block's: cells' version, height, top, rows)
        self._block_cache: dict[tuple[str, int], tuple[int, int, float | None, list[str]]] = {}
        self._texts = RunsMemo()  # the lines of the last refresh: an unchanged line is the same Text

    def _graphs(self, v: ViewState, metric: str, cols: int, tops: list[float | None], tag: str = "") -> list[str]:
        """Every GPU's sparkline of ``metric`` over the window (in the inventory's order, each scaled to its
        ``tops`` entry), all in one pass (:func:`spark_rows`), recomputed only when the graphs are redrawn
        (about once a second: ``v.graphs``) or the width changed; live, only the columns that changed since
        the last redraw are drawn (:func:`live_sparks`)."""
        devs = v.inventory.devices
        drawn = self._graph_cache.get(tag + metric)
        if v.graphs or drawn is None or drawn[1] != tops or len(drawn[2]) != len(devs) or len(drawn[2][0]) != cols:
            cells = v.history.cells(metric, v.window_s, cols, v.now or None)
            rows = [cells[d.index] for d in devs]
            version, sparks = live_sparks(v.history, v.window_s, cols, v.now or None, rows, tops, drawn)
            drawn = self._graph_cache[tag + metric] = (version, tops, sparks)
        return drawn[2]

    def show(self, v: ViewState) -> None:
        width = max(30, self.size.width or 78)  # the content area (inside the padding)
        cols = table_columns(width)
        used = NAME_W + sum(COLUMNS[i][1] + 1 for i in cols)
        graphw = width - used - 1
        n = len(v.inventory.devices)
        texts = self._texts
        texts.next_refresh()
        # rows below the table (the panel is given all spare rows) go to history graphs; the util graph
        # there is wider than the one at the end of each row, which is then left out
        plan = spare_plan((self.size.height or 0) - (n + 1), n, width, table_metrics(v)) if v.frame else []
        inline = graphw >= 8 and not any(m[0] == "util" for m, _ in plan)
        # without the util graph at the end of each row, its columns let the GPU names show whole (less the two
        # a row's clock-event mark " !" takes)
        name_w = NAME_W if inline else name_width([d.name for d in v.inventory.devices], NAME_W + max(0, graphw - 2))
        lines = [Text(f"{'GPU':<{name_w}}" + "".join([" " + f"{COLUMNS[i][0]:>{COLUMNS[i][1]}}" for i in cols]),
                      style="bold")]
        utils = self._graphs(v, "util", graphw - 1, [100.0] * n) if inline and v.frame else []
        for k, dev in enumerate(v.inventory.devices):
            r = v.frame.gpus[dev.index] if v.frame and dev.index < len(v.frame.gpus) else None
            runs: list[Run] = [(f"{dev.index:<2}{table_name(dev.name, name_w - 3):<{name_w - 2}}", "")]
            if r is None:
                runs.append(("waiting…", DIM))
            elif r.lost:
                runs.append(("LOST: fell off the bus", "bold red"))
            else:
                for i in cols:
                    runs.append((" ", ""))
                    runs += COLUMNS[i][3](dev, r)
                if inline:
                    runs.append(("  " + utils[k], OK))
                if r.clock_events and set(r.clock_events) - {"gpu_idle"}:
                    runs.append((" !", WARN))
            lines.append(texts.text(runs))
        shown = rows_shown(self.size.height or 0, n)
        if shown < n:  # a terminal too short for every GPU's row: say how many are left out, never silently
            more = Text(f"+{n - shown} GPU: a taller terminal shows {'it' if n - shown == 1 else 'them'}", style=WARN)
            lines[1 + shown:] = [fit_words(more, width)]
        elif plan:
            lines += self._spare_graphs(v, width, plan)
        self.set_lines(lines)

    def _block(self, v: ViewState, metric: str, index: int, cols: int, height: int, top: float | None
               ) -> list[str]:
        """A GPU's ``height``-row block graph over the window, redrawn with the other graphs."""
        key = (f"block{height}:" + metric, index)
        drawn = self._block_cache.get(key)
        if v.graphs or drawn is None or len(drawn[3][0]) != cols:
            row = v.history.cells(metric, v.window_s, cols, v.now or None)[index]
            # live, only the columns that changed since the last redraw are drawn (widgets/style.py live_block)
            drawn = self._block_cache[key] = live_block(v.history, v.window_s, v.now or None, row, height, top, drawn)
        return drawn[3]

    def _spare_graphs(self, v: ViewState, width: int, plan: list[tuple[TableMetric, int]]) -> list[Text]:
        """The graphs of :func:`spare_plan` under the table: a header row, then each metric's graphs, one
        GPU per row (``per_row`` 1) or several GPUs side by side when rows are short."""
        out = [Text(f"over {int(v.window_s // 60)} min; graphs scaled to each ceiling (100 %, power limit, "
                    "link capacity)", style=DIM)]
        out[0] = fit_words(out[0], width)
        devs = v.inventory.devices
        heights = plan_heights(plan, self.size.height - (len(devs) + 1), len(devs))
        for ((metric, title, top_of), per_row), h in zip(plan, heights):
            cell_w = (width - 2 * (per_row - 1)) // per_row
            label_w = 13 if per_row == 1 else graph_label_width(len(devs), title)
            gw = max(4, cell_w - label_w)
            if h > 1:  # rows to spare for every metric: block graphs, h rows each
                for dev in devs:
                    r = v.frame.gpus[dev.index] if v.frame and dev.index < len(v.frame.gpus) else None
                    rows = self._block(v, metric, dev.index, gw, h, top_of(dev, r))
                    for j, row in enumerate(rows):
                        out.append(self._texts.text([(pad(f"{dev.index} {title}" if j == 0 else "", label_w), DIM),
                                                     (row, OK)]))
                continue
            readings = [v.frame.gpus[d.index] if v.frame and d.index < len(v.frame.gpus) else None for d in devs]
            sparks = self._graphs(v, metric, gw, [top_of(d, r) for d, r in zip(devs, readings)],
                                  tag=f"spare{per_row}:")
            for k in range(0, len(devs), per_row):
                runs: list[Run] = []
                for j in range(k, min(k + per_row, len(devs))):
                    if runs:
                        runs.append(("  ", ""))
                    runs += [(pad(f"{devs[j].index} {title}", label_w), DIM), (sparks[j], OK)]
                out.append(self._texts.text(runs))
        return out


# a graph under the table: (history key, title, its full-height value for a GPU and its reading)
TableMetric = tuple[str, str, Callable[[DeviceInfo, "GpuReading | None"], "float | None"]]


def scale_top(key: str) -> Callable[[DeviceInfo, GpuReading | None], float | None]:
    """A table graph's full-height value (raw units) for history ``key``: the catalogue's ceiling (100 %,
    the power limit, the PCIe link now or, for a lost GPU, at its best, the NVLinks, the SM clock max, the
    memory size), else the metric's floor (1 GB/s for a link: never the graph's own peak, or 8 MB/s of noise
    would be drawn full height), else None (the graph's peak)."""
    m = catalogue.by_key(key)
    floor = m.floor * m.scale or None

    def top(d: DeviceInfo, r: GpuReading | None) -> float | None:
        return catalogue.raw_ceiling(m, d, r) or floor
    return top


def link_top(dev: DeviceInfo, r: GpuReading | None) -> float:
    """Full height of a PCIe rate graph, bytes/s (:func:`scale_top` of ``pcie_rx``)."""
    return scale_top("pcie_rx")(dev, r) or 1e9


# the graphs the spare rows can show, most useful first: (history key, title); NVLink only where a GPU has it
TABLE_GRAPHS = (("util", "util %"), ("power", "power"), ("pcie_rx", "PCIe↓"), ("pcie_tx", "PCIe↑"),
                ("nvlink_rx", "NV↓"), ("nvlink_tx", "NV↑"), ("sm_clock", "SM MHz"), ("mem_used", "mem"))


_TABLE_METRICS: list[TableMetric] = [(key, title, scale_top(key)) for key, title in TABLE_GRAPHS]


def table_metrics(v: ViewState) -> list[TableMetric]:
    """The graphs the spare rows under the table can show, most useful first."""
    nvlink = any(d.nvlinks_active for d in v.inventory.devices)
    return [t for t in _TABLE_METRICS if nvlink or not t[0].startswith("nvlink")]


def rows_shown(rows: int, n: int) -> int:
    """GPUs that get a row in a table of ``rows`` rows (0: not laid out yet, all of them): every one when
    the header and ``n`` rows fit, else those that fit above a last row saying ``+N GPU``."""
    if rows <= 0 or rows >= n + 1:
        return n
    return max(0, rows - 2)


MIN_CELL_GRAPH = 8  # a packed graph narrower than this says too little to be worth a row
WIDE_GRAPH = 60  # columns that hold a minute of 1 s samples: wider graphs only repeat samples


def spare_plan(spare: int, n: int, width: int, metrics: list[TableMetric]) -> list[tuple[TableMetric, int]]:
    """Which metrics' graphs fill ``spare`` rows under an ``n``-GPU table ``width`` cells wide, and how
    many GPUs share a row for each: (metric, per_row). One header row, then metrics in order. A metric
    gets one GPU a row when the metrics after it still fit; else, on a wide terminal with four or more
    GPUs, several GPUs side by side while each graph keeps ``WIDE_GRAPH`` columns (a 200-column terminal
    shows every metric of 8 GPUs, two a row, rather than four metrics one a row); the rows left after
    that (fewer than the GPUs) show the next metrics packed tighter, so no band of blank rows is left
    when a graph could fill it."""
    rows = spare - 1
    if n <= 0 or rows <= 0:
        return []
    out: list[tuple[TableMetric, int]] = []
    for k, m in enumerate(metrics):
        after = len(metrics) - k - 1
        wide = 1 if n < 4 else max(1, min(n, (width + 2) // (graph_label_width(n, m[1]) + WIDE_GRAPH + 2)))
        if rows >= n and (wide == 1 or rows - n >= after * rows_for(n, wide)):
            out.append((m, 1))
            rows -= n
            continue
        if wide > 1 and rows >= rows_for(n, wide):
            out.append((m, wide))
            rows -= rows_for(n, wide)
            continue
        if rows <= 0:
            break
        per_row = rows_for(n, rows)  # as many a row as it takes to fit the rows left
        cell_w = (width - 2 * (per_row - 1)) // per_row
        if cell_w - graph_label_width(n, m[1]) < MIN_CELL_GRAPH:
            break
        out.append((m, per_row))
        rows -= rows_for(n, per_row)
    return out


def rows_for(n: int, per_row: int) -> int:
    """Rows that ``n`` GPUs take, ``per_row`` to a row."""
    return -(-n // per_row)


def graph_label_width(n: int, title: str) -> int:
    """Columns of a packed graph's label (``7 util % ``) among ``n`` GPUs."""
    return len(f"{n - 1} {title} ")


def plan_heights(plan: list[tuple[TableMetric, int]], spare: int, n: int) -> list[int]:
    """Rows per GPU of each planned graph: 1, and when every metric is shown one GPU a row and rows are
    still left (one or two GPUs on a tall terminal), the graphs grow in turn, a row per GPU at a time,
    so the rows under the table never stay blank while a graph could be taller."""
    heights = [1] * len(plan)
    if not plan or n <= 0 or any(per_row != 1 for _, per_row in plan):
        return heights
    left = spare - 1 - n * len(plan)
    k = 0
    while left >= n:
        heights[k % len(plan)] += 1
        left -= n
        k += 1
    return heights
