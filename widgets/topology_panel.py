"""The topology panel: the topo -m matrix with bad paths lit, affinity, legend, a selectable pair."""

from __future__ import annotations

from rich.text import Text
from textual.binding import Binding
from textual.widgets import Static

from gpuscope.core.model import Inventory
from gpuscope.core.topology import PATH_MEANING, best_link, link_row, matrix, pair_bandwidth_bytes_per_s
from gpuscope.core.view import ViewState
from gpuscope.core.vocab import LINK_LEVEL, link_label, link_state, reading_busy
from gpuscope.widgets.style import DIM, LEVEL_STYLE, fmt_gb, path_style, set_content


class TopologyPanel(Static):
    """Focus it (t) and move with the arrow keys to read a pair's path and expected bandwidth."""

    DEFAULT_CSS = """
    TopologyPanel { height: auto; border: round $primary-darken-2; padding: 0 1; }
    TopologyPanel:focus { border: round $accent; }
    """
    BINDINGS = [
        Binding("left,h", "move(0,-1)", "pair ←", show=False),
        Binding("right,l", "move(0,1)", "pair →", show=False),
        Binding("up,k", "move(-1,0)", "pair ↑", show=False),
        Binding("down,j", "move(1,0)", "pair ↓", show=False),
    ]

    def __init__(self, **kw: object):
        super().__init__(**kw)
        self.can_focus = True
        self.sel = (0, 1)
        self._last: ViewState | None = None
        self.border_title = "Topology"

    def action_move(self, dr: int, dc: int) -> None:
        if self._last is None:
            return
        n = len(self._last.inventory.devices)
        if n < 2:
            return
        r, c = self.sel
        r, c = (r + dr) % n, (c + dc) % n
        if r == c:
            r, c = (r + dr) % n, (c + dc) % n
        self.sel = (r, c)
        self.show(self._last)

    def show(self, v: ViewState) -> None:
        self._last = v
        inv = v.inventory
        n = len(inv.devices)
        m = matrix(inv)
        lines = []
        head = Text("      " + "".join(f"{'GPU' + str(j):>6}" for j in range(n)) + "  CPU affinity  NUMA", style="bold")
        lines.append(head)
        focused = self.has_focus
        for i, d in enumerate(inv.devices):
            t = Text(f"{'GPU' + str(i):<6}")
            for j in range(n):
                lab = m[i][j]
                style = path_style(lab)
                if focused and (i, j) == self.sel:
                    style = f"reverse {style}"
                t.append(f"{lab:>6}", style=style)
            r = v.frame.gpus[i] if v.frame and i < len(v.frame.gpus) else None
            row = link_row(d, r.pcie_gen if r else None, r.pcie_width if r else None)
            t.append(f"  {(d.cpu_affinity or '–')[:12]:<12}  {d.numa_node if d.numa_node is not None else '–':<4}")
            if row.below_max:
                bg, bw = best_link(d)
                state = link_state(row.gen_current, row.width_current, bg, bw,
                                   r is not None and reading_busy(r, row.capacity_current_bytes_per_s))
                t.append(f" {link_label(row.gen_current, row.width_current)} < {link_label(bg, bw)}",
                         style=LEVEL_STYLE[LINK_LEVEL[state]])
            lines.append(t)
        if n >= 2:
            a, b = sorted(self.sel)
            p = inv.pair(a, b)
            if p is not None:
                cur = {r.index: (r.pcie_gen, r.pcie_width) for r in (v.frame.gpus if v.frame else ())
                       if r.pcie_gen and r.pcie_width}
                bw = pair_bandwidth_bytes_per_s(inv, p, cur)
                what = (f"{p.nvlinks} NVLinks" + (" through NVSwitch" if p.via_nvswitch else " direct")) if p.nvlinks \
                    else PATH_MEANING.get(p.pcie_path, p.pcie_path)
                t = Text(f"GPU{a}↔GPU{b} ")
                t.append(p.label, style=path_style(p.label))
                t.append(f": {what}; up to {fmt_gb(bw)} GB/s per direction")
                if not focused:
                    t.append("  (t, arrows: other pairs)", style=DIM)
                lines.append(t)
        lines.append(legend(inv))
        set_content(self, Text("\n").join(lines))


def legend(inv: Inventory) -> Text:
    t = Text("", style=DIM)
    for lab, what in (("NV#", "NVLink"), ("PIX", "1 bridge"), ("PXB", "bridges"), ("PHB", "host bridge"),
                      ("NODE", "in NUMA node"), ("SYS", "across NUMA")):
        t.append(lab, style=path_style("NV1" if lab == "NV#" else lab) or DIM)
        t.append(f" {what}  ", style=DIM)
    return t
