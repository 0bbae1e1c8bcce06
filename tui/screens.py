"""The App's screens besides the main one: help, marker label prompt, one GPU's detail graphs."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Footer, Input, Static

from gpuscope.core import catalogue
from gpuscope.core.catalogue import Metric
from gpuscope.core.history import resample
from gpuscope.core.view import ViewState
from gpuscope.widgets.status_bar import StatusBar
from gpuscope.widgets.style import DIM, fmt_duration, graph_rows, short_name


def detail_metrics() -> list[Metric]:
    """The metrics graphed in the detail view, from the catalogue (those kept in history and marked detail)."""
    return catalogue.metrics("gpu", history=True, detail=True)


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark,h", "dismiss", "close")]
    DEFAULT_CSS = "HelpScreen { align: center middle; } #help { width: 80; height: auto; border: round $accent; " \
                  "padding: 1 2; background: $surface; }"

    def __init__(self, bindings: list[Binding]):
        super().__init__()
        self._b = bindings

    def compose(self) -> ComposeResult:
        t = Text("gpuscope keys\n\n", style="bold")
        for b in self._b:
            if b.description:
                t.append(f"{b.key:<22}", style="bold cyan")
                t.append(f"{b.description}\n")
        t.append("\nctrl+p                command palette\n", style="")
        t.append("Colours: red = over the limit / below max under load, yellow = near it, green = fine.\n"
                 "Topology: SYS red (across NUMA nodes), PHB/NODE amber, NV# green.", style=DIM)
        yield Static(t, id="help")


class MarkerScreen(ModalScreen[str | None]):
    BINDINGS = [Binding("escape", "dismiss(None)", "cancel")]
    DEFAULT_CSS = "MarkerScreen { align: center middle; } MarkerScreen Input { width: 60; }"

    def compose(self) -> ComposeResult:
        yield Input(placeholder="marker label (enter to drop, esc to cancel)", id="marker")

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
        yield Footer()

    def show(self, v: ViewState) -> None:
        self.query_one(StatusBar).show(v)
        dev = v.inventory.devices[self.index]
        width = max(30, (self.size.width or 100) - 24)
        out = [Text(f"GPU{self.index} {short_name(dev.name)}  {dev.bus_id}  NUMA {dev.numa_node}  "
                    f"affinity {dev.cpu_affinity or '–'}  window {fmt_duration(v.window_s)}", style="bold")]
        r = v.frame.gpus[self.index] if v.frame else None
        if r is not None and r.processes:
            out.append(Text("processes: " + ", ".join(f"{p.pid} {p.name or ''} {(p.used_memory_bytes or 0) / 1e9:.1f} GB"
                                                      for p in r.processes[:6]), style=DIM))
        for m in detail_metrics():
            title = m.label
            times, vals = v.history.window(m.key or m.name, self.index, v.window_s, v.now or None)
            cells = resample(times, vals / m.scale if len(vals) else vals, v.now or 0, v.window_s, width)
            known = [c for c in cells if c is not None]
            if not known:
                continue
            top = m.maximum or max(known) or 1.0
            rows = graph_rows(cells, 3, top)
            now = known[-1]
            for k, row in enumerate(rows):
                label = f"{title:<17}" if k == 0 else (f"now {now:>9.1f}   " if k == 1 else f"max {max(known):>9.1f}   ")
                t = Text(f"{label:<20}", style="bold" if k == 0 else DIM)
                t.append(row, style="green")
                out.append(t)
        self.query_one("#detail", Static).update(Text("\n").join(out))


