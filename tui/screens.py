"""The App's screens besides the main one: help, marker label prompt, one GPU's detail graphs."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Input, Static

from gpuscope.core import catalogue
from gpuscope.core.catalogue import Metric
from gpuscope.core.history import resample
from gpuscope.core.model import DeviceInfo, GpuReading
from gpuscope.core.text import clean
from gpuscope.core.topology import nvlink_capacity_bytes_per_s, pcie_capacity_bytes_per_s
from gpuscope.core.view import ViewState
from gpuscope.widgets.fit import fit_words, key_names
from gpuscope.widgets.keybar import KeyBar
from gpuscope.widgets.processes_panel import process_lines
from gpuscope.widgets.status_bar import StatusBar
from gpuscope.widgets.style import DIM, fmt_duration, graph_rows, short_name

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


class GpuDetailScreen(Screen[None]):
    """Larger graphs of every metric of one GPU over the current window."""

    BINDINGS = [Binding("escape,q,d", "app.pop_screen", "back"), Binding("w", "app.cycle_window", "window")]
    DEFAULT_CSS = "GpuDetailScreen #detail { padding: 0 1; }"

    def __init__(self, index: int):
        super().__init__()
        self.index = index

    def compose(self) -> ComposeResult:
        yield StatusBar(id="status")
        yield VerticalScroll(Static(id="detail"))
        yield KeyBar([("esc", "back"), ("w", "window"), ("1-8", "GPU")], id="keys")

    def show(self, v: ViewState) -> None:
        self.query_one(StatusBar).show(v)
        dev = v.inventory.devices[self.index]
        width = max(30, (self.size.width or 100) - 24)  # graph columns
        out = [fit_words(Text(f"GPU{self.index} {short_name(dev.name)}  window {fmt_duration(v.window_s)}  "
                              f"{clean(dev.bus_id, 20)}  NUMA {dev.numa_node}  affinity {dev.cpu_affinity or '–'}", style="bold"),
                         width + 22)]
        r = v.frame.gpus[self.index] if v.frame else None
        out.append(Text("Processes" + (" (simulated)" if v.inventory.simulated else ""), style="bold"))
        out += process_lines(v.frame, width + 22, DETAIL_PROCESS_LINES, gpu=self.index)
        label_w = 22
        for m in detail_metrics():
            title, scale, key = m.label, m.scale, m.key or m.name
            times, vals = v.history.window(key, self.index, v.window_s, v.now or None)
            cells = resample(times, vals / scale if len(vals) else vals, v.now or 0, v.window_s, width)
            known = [c for c in cells if c is not None]
            if not known:
                continue
            cur = m.value(r) if r is not None else None
            top = m.maximum or detail_top(key, dev, r, max(known))
            rows = graph_rows(cells, 3, top)
            # the peak of the readings themselves (the cells are means): never below "now"
            raw = [float(x) / scale for x in vals.tolist() if x == x]
            peak = max(raw + ([cur / scale] if cur is not None else []), default=max(known))
            labels = [title, "now " + ("–" if cur is None else f"{cur / scale:.1f}") + f"  peak {peak:.1f}",
                      f"scale 0–{top:g}"]
            for k, row in enumerate(rows):
                t = Text(f"{labels[k]:<{label_w}}", style="bold" if k == 0 else DIM)
                t.append(row, style="green")
                out.append(t)
        self.query_one("#detail", Static).update(Text("\n").join(out))


def detail_top(metric: str, dev: DeviceInfo, r: GpuReading | None, peak: float) -> float:
    """The full-height value of a detail graph: the metric's ceiling (link capacity, power limit, clock
    max, memory size) where known, so noise on an idle link draws flat; else the peak with a floor."""
    if metric in ("pcie_rx", "pcie_tx") and r is not None:
        cap = pcie_capacity_bytes_per_s(r.pcie_gen, r.pcie_width)
        if cap:
            return round(cap / 1e9, 1)
    if metric in ("nvlink_rx", "nvlink_tx") and dev.nvlinks_active:
        cap = nvlink_capacity_bytes_per_s(dev.nvlink_version, dev.nvlinks_active)
        if cap:
            return round(cap / 1e9, 1)
    if metric == "power":
        lim = (r.power_limit_w if r is not None else None) or dev.power_limit_w
        if lim:
            return float(lim)
    if metric == "sm_clock" and dev.sm_clock_max_mhz:
        return float(dev.sm_clock_max_mhz)
    if metric == "mem_used" and r is not None and r.mem_total_bytes:
        return round(r.mem_total_bytes / 1e9, 1)
    floors = {"pcie_rx": 1.0, "pcie_tx": 1.0, "nvlink_rx": 1.0, "nvlink_tx": 1.0, "temp": 100.0}
    return max(peak, floors.get(metric, 0.0)) or 1.0
