"""The topology panel: the topo -m matrix with bad paths lit, affinity, legend, a selectable pair."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich.cells import cell_len
from rich.text import Text
from textual.binding import Binding
from textual.widgets import Static

from gpuscope.core.group_paths import grouped_pairs, worst_pair
from gpuscope.core.groups import gpus_text, group_label
from gpuscope.core.health import mig_text
from gpuscope.core.topology import (
    PATH_MEANING,
    best_link,
    link_row,
    matrix,
    pair_bandwidth_bytes_per_s,
    pcie_capacity_bytes_per_s,
)
from gpuscope.core.units import NONE
from gpuscope.core.view import ViewState
from gpuscope.core.vocab import LINK_LEVEL, SEV_MARK, link_label, link_state, reading_busy
from gpuscope.widgets.fit import fit_words, short_affinity
from gpuscope.widgets.style import DIM, LEVEL_STYLE, fmt_gb, path_style, set_content

if TYPE_CHECKING:  # probe code is loaded when a probe's lines are drawn
    from gpuscope.core.probe import PairResult, ProbeResult, Verdict


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

    def __init__(self, **kw: Any):
        super().__init__(**kw)
        self.can_focus = True
        self.sel = (0, 1)
        self._last: ViewState | None = None
        self.border_title = "Topology"
        self.form = "matrix"  # or "pairs" when the matrix does not fit (set by the layout)
        self.avail_width = 0  # content width the layout allows (0: the panel's own width)
        self._key: tuple[object, ...] | None = None  # what the lines shown were drawn from
        self.legend = False  # the legend line, shown when there is room or the panel is focused

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
        width = self.avail_width or max(20, self.size.width or 76)
        sel = self.sel if self.has_focus else None
        key = (v.inventory, width, sel, self.legend, self.form, link_key(v), v.probe)
        old = self._key
        if old is not None and old[0] is v.inventory and old[1:] == key[1:]:
            return  # the lines depend on nothing else: not built again every second
        self._key = key
        lines = topology_lines(v, width, sel, legend_on=self.legend, form=self.form)
        set_content(self, Text("\n").join(lines))


def link_key(v: ViewState) -> tuple[object, ...]:
    """What :func:`topology_lines` reads from the readings: each GPU's current PCIe link and whether it
    is busy (the colour of a link below its max)."""
    if not v.frame:
        return ()
    return tuple((r.index, r.pcie_gen, r.pcie_width, reading_busy(r, pcie_capacity_bytes_per_s(r.pcie_gen, r.pcie_width)))
                 for r in v.frame.gpus) + tuple((g.server, g.port, g.gpus) for g in v.frame.groups)


CELL = 5  # matrix cell width: labels are at most 4 characters (NV18, NODE)
AFF_W = 13


def affinity_width(affinities: Sequence[str | None], room: int) -> int:
    """The CPU affinity column's width: the longest list where ``room`` allows (``56-111,168-223`` whole,
    not ``56-111,+1`` beside empty columns), never under :data:`AFF_W` (``matrix_columns`` counts on it)."""
    longest = max((cell_len(a) for a in affinities if a), default=0)
    return max(AFF_W, min(longest, room))


def matrix_columns(n: int, width: int) -> tuple[str, ...] | None:
    """Which side columns fit beside an ``n``-GPU matrix in ``width`` cells: ("affinity", "numa"),
    ("numa",), () — or None when the matrix itself does not fit (then a pair list is drawn)."""
    base = CELL + CELL * n
    if base + 2 + AFF_W + 5 <= width:
        return ("affinity", "numa")
    if base + 5 <= width:
        return ("numa",)
    if base <= width:
        return ()
    return None


def topology_lines(v: ViewState, width: int, sel: tuple[int, int] | None = None, legend_on: bool = False,
                   form: str = "matrix") -> list[Text]:
    """The topology panel's lines for a content ``width``: the matrix when it fits without wrapping
    (dropping the affinity and NUMA columns first), else a pair list grouped by path; then the
    links below their max, the selected pair, and the legend when asked for."""
    n = len(v.inventory.devices)
    cols = matrix_columns(n, width) if form == "matrix" else None
    if n and cols is not None:
        lines = _matrix_lines(v, width, cols, sel)
    elif n >= 2:
        lines = _pair_list_lines(v, width)
    else:
        lines = []
    lines += [fit_words(t, width) for t in _link_notes(v)]
    lines += _group_lines(v, width, underlined=cols is not None)
    if v.probe is not None:
        lines += probe_lines(v.probe, width, sel)
    if n >= 2:
        t = _selected_pair_line(v, width, sel, legend_on)
        if t is not None:
            lines.append(t)
    if legend_on:
        lines += legend_lines(width)
    return lines


def _link_notes(v: ViewState) -> list[Text]:
    """Each GPU whose PCIe link runs below its max (coloured by whether it is busy), then each MIG GPU."""
    inv = v.inventory
    links: list[Text] = []
    for i, d in enumerate(inv.devices):
        r = v.frame.gpus[i] if v.frame and i < len(v.frame.gpus) else None
        row = link_row(d, r.pcie_gen if r else None, r.pcie_width if r else None)
        if row.below_max:
            bg, bw = best_link(d)
            state = link_state(row.gen_current, row.width_current, bg, bw,
                               r is not None and reading_busy(r, row.capacity_current_bytes_per_s))
            t = Text(f"GPU{i} PCIe {link_label(row.gen_current, row.width_current)} < {link_label(bg, bw)}",
                     style=LEVEL_STYLE[LINK_LEVEL[state]])
            if state == "below_max_idle":
                t.append(" (idle)", style=DIM)
            links.append(t)
    links += [Text(f"GPU{d.index} {mig_text(d)}", style="bold") for d in inv.devices if d.mig_instances is not None]
    return links


def _matrix_lines(v: ViewState, width: int, cols: tuple[str, ...], sel: tuple[int, int] | None) -> list[Text]:
    """The matrix: a head row, then per GPU its path to each GPU (pairs inside a serving group underlined,
    the selected pair reversed) and the side ``cols`` (affinity, NUMA)."""
    inv = v.inventory
    n = len(inv.devices)
    grouped = grouped_pairs(v.frame)
    m = matrix(inv)
    head = Text(" " * CELL + "".join(f"{'GPU' + str(j):>{CELL}}" for j in range(n)), style="bold")
    aff_w = affinity_width([d.cpu_affinity for d in inv.devices], width - (CELL + CELL * n) - 2 - 5)
    if "affinity" in cols:
        head.append(f"  {'CPU affinity':<{aff_w}}")
    if "numa" in cols:
        head.append(" NUMA")
    lines = [head]
    for i, d in enumerate(inv.devices):
        t = Text(f"{'GPU' + str(i):<{CELL}}")
        for j in range(n):
            lab = m[i][j]
            style = path_style(lab)
            if (min(i, j), max(i, j)) in grouped:
                style = f"underline {style}"
            if sel is not None and (i, j) == sel:
                style = f"reverse {style}"
            t.append(f"{lab:>{CELL}}", style=style)
        if "affinity" in cols:
            t.append(f"  {short_affinity(d.cpu_affinity, aff_w):<{aff_w}}")
        if "numa" in cols:
            t.append(f" {d.numa_node if d.numa_node is not None else NONE:>4}")
        lines.append(t)
    return lines


def _pair_list_lines(v: ViewState, width: int) -> list[Text]:
    """The pair list drawn when the matrix does not fit: per path label its pairs, wrapped between pairs."""
    n = len(v.inventory.devices)
    m = matrix(v.inventory)
    groups: dict[str, list[str]] = {}
    for i in range(n):
        for j in range(i + 1, n):
            groups.setdefault(m[i][j], []).append(f"{i}↔{j}")
    lines: list[Text] = []
    for lab, pairs in groups.items():
        items = ["all pairs"] if len(pairs) == n * (n - 1) // 2 else pairs
        t = Text(f"{lab:<5}", style=path_style(lab))
        for it in items:
            if t.cell_len + len(it) + 1 > width:
                lines.append(t)
                t = Text(" " * 5)
            t.append(it + " ")
        t.rstrip()
        lines.append(t)
    return lines


def _group_lines(v: ViewState, width: int, underlined: bool) -> list[Text]:
    """Each serving group of two GPUs or more: its worst path (``underlined`` in the matrix when drawn)."""
    lines: list[Text] = []
    for g in v.frame.groups if v.frame else ():
        p = worst_pair(v.inventory, g.gpus)
        if p is not None:
            t = Text(f"{group_label(g)} on {gpus_text(g.gpus)}: ")
            t.append(p.label, style=path_style(p.label))
            if underlined:
                t.append(" (underlined)", style=DIM)
            lines.append(fit_words(t, width))
    return lines


def _selected_pair_line(v: ViewState, width: int, sel: tuple[int, int] | None, legend_on: bool) -> Text | None:
    """The selected pair (GPU0↔GPU1 when none is): its path, the bandwidth it gives each way and what it
    runs through; unfocused, a hint of what focusing adds when it fits."""
    inv = v.inventory
    n = len(inv.devices)
    a, b = sorted(sel or (0, 1))
    p = inv.pair(a, b)
    if p is None:
        return None
    cur = {r.index: (r.pcie_gen, r.pcie_width) for r in (v.frame.gpus if v.frame else ())
           if r.pcie_gen and r.pcie_width}
    pair_bw = pair_bandwidth_bytes_per_s(inv, p, cur)
    what = (f"{p.nvlinks} NVLinks" + (" via NVSwitch" if p.via_nvswitch else " direct")) if p.nvlinks \
        else PATH_MEANING.get(p.pcie_path, p.pcie_path)
    t = Text(f"GPU{a}↔GPU{b} ")
    t.append(p.label, style=path_style(p.label))
    t.append(f": up to {fmt_gb(pair_bw)} GB/s each way, {what}")
    t = fit_words(t, width)
    # what t adds: other pairs only when there are some (2 GPUs have one), the legend when it is off
    offers = (["other pairs"] if n > 2 else []) + ([] if legend_on else ["legend"])
    hint = f"  (t: {', '.join(offers)})" if offers else ""
    if hint and sel is None and t.cell_len + len(hint) <= width:
        t.append(hint, style=DIM)
    return t


PROBE_MARK = {"bad": SEV_MARK["critical"], "warn": SEV_MARK["warning"], "ok": "✓", "dim": ""}
PROBE_ALL_PAIRS = 3  # up to this many pairs each get a line; beyond, the worst pair and the selected one


def _gbs(x: float) -> str:
    return f"{x / 1e9:.0f}" if x >= 100e9 else f"{x / 1e9:.1f}"


def _judged(head: str, figures: Sequence[tuple[str, str, Verdict | None]], link: str, width: int) -> Text | None:
    """``GPU0 host→dev 3.3 dev→host 3.3 GB/s: 13 % of typ 25.2 ✖ (Gen1×16<Gen4×16)``: the figures and the
    worse share of typical, in the worse one's level colour; narrower, without the link, then in short words
    (``GPU0 ↓3.3 ↑3.3 GB/s 13 % ✖``); the numbers are what is kept longest."""
    known = [(w, short, v) for w, short, v in figures if v is not None]
    if not known:
        return None
    worst = min((v for _, _, v in known), key=lambda v: v.share if v.share is not None else float("inf"))
    style = LEVEL_STYLE[worst.level]
    mark = PROBE_MARK[worst.level]
    judged = worst.share is not None and worst.typical is not None
    share = f"{worst.share * 100:.0f} %" if judged else ""  # type: ignore[operator]

    def line(short: bool, with_link: bool) -> Text:
        t = Text(f"{head} ")
        if short:
            t.append(" ".join(f"{s}{_gbs(v.value)}" for _, s, v in known) + " GB/s", style=style)
            t.append(f" {share}{' ' + mark if mark else ''}" if judged else " –", style=style)
            return t
        t.append(" ".join(f"{w} {_gbs(v.value)}" for w, _, v in known) + " GB/s", style=style)
        if judged:
            t.append(f": {share} of typ {_gbs(worst.typical)}{' ' + mark if mark else ''}", style=style)  # type: ignore[arg-type]
        else:
            t.append(": no reference", style=DIM)
        if with_link:
            t.append(f" ({link})", style=DIM)
        return t

    for short, with_link in ((False, True), (False, False), (True, False)):
        t = line(short, with_link)
        if t.cell_len <= width:
            return t
    return fit_words(t, width)


def probe_lines(r: ProbeResult, width: int, sel: tuple[int, int] | None = None) -> list[Text]:
    """The last link probe beside the links: a title (when, SIMULATED), per GPU its host↔device figures, per
    pair its device↔device figures (with more than :data:`PROBE_ALL_PAIRS` pairs: the worst and the selected
    pair), each with the worse share of what its link typically gives, in the level's colour."""
    from gpuscope.core.probe import method_summary, verdicts

    vs = {(v.subject, v.kind): v for v in verdicts(r)}
    head = Text(f"Link probe {time.strftime('%H:%M', time.localtime(r.t))}", style="bold")
    if r.simulated:
        head.append(" SIMULATED", style=f"bold {LEVEL_STYLE['warn']}")
    what = f": GB/s ({method_summary(r)}), % of what the link typically gives"
    if head.cell_len + len(what) > width:
        what = ": GB/s, % of what the link typically gives"
    if head.cell_len + len(what) <= width:
        head.append(what, style=DIM)
    out = [fit_words(head, width)]
    for g in r.gpus:
        s = f"GPU{g.index}"
        link = g.link.label_now + (f"<{link_label(g.link.gen_max, g.link.width_max)}" if g.link.below_max else "")
        t = _judged(s, [("host→dev", "↓", vs.get((s, "h2d"))), ("dev→host", "↑", vs.get((s, "d2h")))], link, width)
        if t is not None:
            out.append(t)

    def pair_line(p: PairResult) -> Text | None:
        s = f"GPU{p.a}-GPU{p.b}"
        link = f"NV{p.nvlinks}" if p.nvlinks else (p.path + (" staged" if p.p2p is False else " P2P" if p.p2p else ""))
        return _judged(f"GPU{p.a}↔GPU{p.b}", [("read", "←", vs.get((s, "read"))), ("write", "→", vs.get((s, "write")))],
                       link, width)

    pairs = list(r.pairs)
    if len(pairs) > PROBE_ALL_PAIRS:
        def share(p: PairResult) -> float:
            known = [v.share for k in ("read", "write") if (v := vs.get((f"GPU{p.a}-GPU{p.b}", k))) and v.share]
            return min(known, default=float("inf"))

        chosen = [min(pairs, key=share)]
        a, b = sorted(sel or (0, 1))
        picked = next((p for p in pairs if (p.a, p.b) == (a, b)), None)
        if picked is not None and picked is not chosen[0]:
            chosen.append(picked)
        pairs = chosen
    out += [t for p in pairs if (t := pair_line(p)) is not None]
    return out


def legend_lines(width: int) -> list[Text]:
    """The path legend, wrapped between entries (never inside one)."""
    out: list[Text] = []
    t = Text("", style=DIM)
    for lab, what in (("NV#", "NVLink"), ("PIX", "1 bridge"), ("PXB", "bridges"), ("PHB", "host bridge"),
                      ("NODE", "in NUMA node"), ("SYS", "across NUMA")):
        item = f"{lab} {what}"
        if t.cell_len and t.cell_len + 2 + len(item) > width:
            out.append(t)
            t = Text("", style=DIM)
        if t.cell_len:
            t.append("  ")
        t.append(lab, style=path_style("NV1" if lab == "NV#" else lab) or DIM)
        t.append(f" {what}", style=DIM)
    out.append(t)
    return out

