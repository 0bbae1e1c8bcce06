"""How the main screen's rows are shared out: GPUs first, then findings, topology, legend, graphs.

A pure function of the terminal size and what there is to show, tested with a table of cases.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

PANEL_ROWS = 10  # a full GPU panel with NVLink: 8 lines + its border
FINDINGS_MAX = 8  # findings lines when not focused (the last may be "+k more — f")


@dataclass(frozen=True)
class Plan:
    compact: bool  # one table row per GPU instead of a panel each
    cols: int  # GPU panels per row (full mode)
    findings_lines: int  # lines inside the findings panel; 0 = hidden
    topology: int  # which topology form is shown (an index into ``topo_lines``); -1 = hidden
    legend: bool  # its legend line is shown
    procs_lines: int = 0  # lines inside the processes panel (P); 0 = hidden
    inference_lines: int = 0  # lines inside the inference panel; 0 = no endpoint (hidden)
    gpus_shown: int = 0  # GPU rows the compact table has room for (all of them unless the terminal is too short)
    topology_rows: int = 0  # rows of the topology panel: its form's lines, its legend and border; 0 = hidden
    n_gpus: int = 0  # GPUs in the inventory

    @property
    def gpus_hidden(self) -> int:
        """GPUs without a row (the table's last row then says ``+N GPU``): only when even the table alone does
        not fit."""
        return max(0, self.n_gpus - self.gpus_shown)

    @property
    def procs_rows(self) -> int:
        return self.procs_lines + 2 if self.procs_lines else 0

    @property
    def findings_rows(self) -> int:
        return self.findings_lines + 2 if self.findings_lines else 0


def plan_layout(width: int, height: int, n_gpus: int, n_findings: int, *, topo_lines: tuple[int, ...] = (),
                chrome: int = 2,
                compact: bool | None = None, panel_rows: int = PANEL_ROWS, findings_focused: bool = False,
                topo_focused: bool = False, legend_lines: int = 1, procs_lines: int = 0,
                inference_lines: int = 0) -> Plan:
    """Share ``height`` rows out by priority.

    ``topo_lines``: lines each form of the topology panel needs at this width, best form first
    (matrix, pair list; 0: that form cannot be drawn);
    ``chrome``: rows taken by the header, footer and replay timeline.
    1. every GPU's table row (``n_gpus`` + 1 header) — never pushed off; a terminal too short for the table
       alone shows the GPUs that fit and a last row ``+N GPU`` (``gpus_shown``);
    2. one findings line (``✔ nothing limits…`` or the worst finding, with "+k more — f");
       then the inference panel (``inference_lines``: the lines it wants; 0: no endpoint): at least its
       tok/s line, up to a third of the rows left (a server with many models or groups never pushes the
       GPUs off); rows still left at the end go to it before the graphs;
    3. the topology panel (its first form that fits whole: matrix, else pair list);
    4. more findings lines, up to ``FINDINGS_MAX`` (all spare rows when the panel is focused);
    5. full GPU panels instead of the table when they fit (``compact`` None; True forces the table, False
       the panels where they fit: never at the cost of a GPU's row);
    6. the topology legend (``legend_lines``) when the panel is focused or rows are left;
    whatever is left goes to the GPU area's graphs.
    ``procs_lines``: lines the processes panel wants when the user turned it on (``P``; 0: off). It
    comes after the first findings line and before the topology panel: at least two lines, up to what it
    wants and at most half the rows left; rows still left at the end go to it before the graphs.
    """
    rest = height - chrome - (n_gpus + 1)
    room = max(0, height - chrome)  # the table's rows when nothing else is shown
    shown = n_gpus if rest >= 0 else max(0, min(n_gpus, room - 2))  # its header and the "+N GPU" row
    f_lines = 1 if rest >= 3 else 0
    rest -= f_lines + 2 if f_lines else 0
    i_lines, rest = _inference_first(inference_lines, rest)
    p_lines, rest = _procs_first(procs_lines, rest)
    topo, rest = (-1, rest) if findings_focused else _topology_form(topo_lines, rest)
    f_lines, rest = _more_findings(f_lines, n_findings, findings_focused, rest)
    cols = 2 if width >= 160 and n_gpus > 1 else 1
    compact, rest = _gpu_form(width, n_gpus, cols, panel_rows, compact, rest)
    legend = topo >= 0 and rest >= legend_lines  # never at the cost of a GPU row
    rest -= legend_lines if legend else 0
    p_lines, rest = _top_up(p_lines, procs_lines, rest)
    i_lines, rest = _top_up(i_lines, inference_lines, rest)
    topo_rows = topo_lines[topo] + 2 + (legend_lines if legend else 0) if topo >= 0 else 0
    return Plan(compact=compact, cols=cols, findings_lines=f_lines, topology=topo, legend=legend, procs_lines=p_lines,
                inference_lines=i_lines, gpus_shown=shown, topology_rows=topo_rows, n_gpus=n_gpus)


def _inference_first(wanted: int, rest: int) -> tuple[int, int]:
    """(lines, rows left): the inference panel's first share, its tok/s line up to a third of ``rest``."""
    if wanted <= 0 or rest < 1 + 2:
        return 0, rest
    lines = max(1, min(wanted, (rest - 2) // 3))
    return lines, rest - (lines + 2)


def _procs_first(wanted: int, rest: int) -> tuple[int, int]:
    """(lines, rows left): the processes panel's first share, two lines up to half of ``rest``."""
    if wanted <= 0 or rest < 2 + 2:
        return 0, rest
    lines = max(2, min(wanted, rest // 2 - 2, rest - 2)) if wanted >= 2 else 1
    return lines, rest - (lines + 2)


def _topology_form(topo_lines: tuple[int, ...], rest: int) -> tuple[int, int]:
    """(form, rows left): the first topology form that fits whole in ``rest`` (-1: none)."""
    for k, need in enumerate(topo_lines):
        if need > 0 and rest >= need + 2:
            return k, rest - (need + 2)
    return -1, rest


def _more_findings(f_lines: int, n_findings: int, focused: bool, rest: int) -> tuple[int, int]:
    """(lines, rows left): the findings panel grown from its first line, up to :data:`FINDINGS_MAX` (all of
    ``rest`` when it is focused)."""
    if not f_lines:
        return f_lines, rest
    if focused:
        more = max(0, 10**6 - f_lines)
    else:
        more = min(max(0, max(n_findings, 1) - f_lines), FINDINGS_MAX - f_lines)
    add = max(0, min(more, rest))
    return f_lines + add, rest - add


def _gpu_form(width: int, n_gpus: int, cols: int, panel_rows: int, compact: bool | None,
              rest: int) -> tuple[bool, int]:
    """(compact, rows left): full GPU panels where they fit in ``rest`` beside the table's rows (``compact``
    None: and the terminal is wide enough; False asks for them, never at the cost of a GPU's row)."""
    full_need = math.ceil(n_gpus / cols) * panel_rows - (n_gpus + 1)
    if compact is None:
        compact = width < 100 or full_need > rest
    elif not compact and full_need > rest:
        compact = True  # panels asked for (c) that do not fit would push GPUs off the screen: the table stays
    return compact, rest if compact else rest - full_need


def _top_up(lines: int, wanted: int, rest: int) -> tuple[int, int]:
    """(lines, rows left): a panel already shown (``lines`` > 0) grown towards the lines it ``wanted``."""
    if not lines:
        return lines, rest
    add = max(0, min(wanted - lines, rest))
    return lines + add, rest - add
