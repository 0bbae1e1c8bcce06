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
    1. every GPU's table row (``n_gpus`` + 1 header) — never pushed off;
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
    f_lines = 1 if rest >= 3 else 0
    rest -= f_lines + 2 if f_lines else 0
    i_lines = 0
    if inference_lines > 0 and rest >= 1 + 2:
        i_lines = max(1, min(inference_lines, (rest - 2) // 3))
        rest -= i_lines + 2
    p_lines = 0
    if procs_lines > 0 and rest >= 2 + 2:
        p_lines = max(2, min(procs_lines, rest // 2 - 2, rest - 2)) if procs_lines >= 2 else 1
        rest -= p_lines + 2
    topo = -1
    if not findings_focused:
        for k, need in enumerate(topo_lines):
            if need > 0 and rest >= need + 2:
                topo = k
                rest -= need + 2
                break
    if f_lines:
        more = max(0, (max(n_findings, 1) if not findings_focused else 10**6) - f_lines)
        more = min(more, FINDINGS_MAX - f_lines) if not findings_focused else more
        add = max(0, min(more, rest))
        f_lines += add
        rest -= add
    cols = 2 if width >= 160 and n_gpus > 1 else 1
    full_need = math.ceil(n_gpus / cols) * panel_rows - (n_gpus + 1)
    if compact is None:
        compact = width < 100 or full_need > rest
    elif not compact and full_need > rest:
        compact = True  # panels asked for (c) that do not fit would push GPUs off the screen: the table stays
        rest -= full_need
    legend = topo >= 0 and rest >= legend_lines  # never at the cost of a GPU row
    rest -= legend_lines if legend else 0
    if p_lines:
        add = max(0, min(procs_lines - p_lines, rest))
        p_lines += add
        rest -= add
    if i_lines:
        i_lines += max(0, min(inference_lines - i_lines, rest - (0 if compact else full_need)))
    return Plan(compact=compact, cols=cols, findings_lines=f_lines, topology=topo, legend=legend, procs_lines=p_lines,
                inference_lines=i_lines)
