"""The processes panel (``P``): every process on the GPUs, largest GPU memory first.

Columns: GPU, PID, USER, TYPE (only when a graphics process is listed), GPU MEM, SM % and the command.
The line fitting is pure (:func:`process_lines`), tested with tables in tests/tui/test_processes.py: numbers
are never cut; the command is shortened first, then dropped, then TYPE, USER and SM %.
Processes are read every 5 s (NVML's slow path) and carried between reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.cells import cell_len
from rich.text import Text
from textual.widgets import Static

from gpuscope.core.model import Frame, ProcessInfo
from gpuscope.core.text import clean
from gpuscope.core.units import NONE
from gpuscope.core.view import ViewState
from gpuscope.widgets.fit import ELLIPSIS, fit_words
from gpuscope.widgets.style import DIM, set_content

NOT_REPORTED = "not reported by this GPU"
COMMAND_MIN = 8  # narrower than this, the command column is dropped rather than shown as a stub


@dataclass(frozen=True)
class Column:
    key: str
    title: str
    width: int
    right: bool  # right-aligned (numbers)


GPU = Column("gpu", "GPU", 3, True)
PID = Column("pid", "PID", 7, True)
USER = Column("user", "USER", 8, False)
KIND = Column("kind", "TYPE", 4, False)
MEM = Column("mem", "GPU MEM", 8, True)
SM = Column("sm", "SM%", 4, True)
COMMAND = Column("command", "COMMAND", 0, False)  # takes what is left
# dropped in this order when the width is short (GPU, PID and GPU MEM stay)
DROP_ORDER = ("command", "kind", "user", "sm")


def fmt_mem(n: int | None) -> str:
    """GPU memory in binary units (GiB, as the GPU panel and the detail view; nvidia-smi's MiB), at most
    8 cells: ``135 GiB``, ``45.2 GiB``, ``512 MiB``, ``4 KiB``, ``–``."""
    if n is None:
        return NONE
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20)):
        if n >= size:
            x = n / size
            return f"{x:.1f} {unit}" if x < 99.95 and unit != "MiB" else f"{x:.0f} {unit}"
    return f"{n / 2**10:.0f} KiB"


def fmt_sm(p: ProcessInfo) -> str:
    return NONE if p.sm_pct is None else f"{p.sm_pct:.0f}%"


def short_command(p: ProcessInfo) -> str:
    """The command line with its program's directory dropped (``/usr/bin/python3 -m x`` → ``python3 -m x``);
    the short name when there is no command line; ``?`` when neither is known."""
    cmd = clean(p.command or p.name or "?", 200)
    first, sep, rest = cmd.partition(" ")
    if "/" in first:
        first = first.rsplit("/", 1)[1] or first
    return first + sep + rest


def fit_text(s: str, width: int) -> str:
    """``s`` in at most ``width`` cells, ``…`` marking a cut (text columns only: user, command)."""
    if cell_len(s) <= width:
        return s
    if width <= 1:
        return ELLIPSIS[:width]
    out = s
    while out and cell_len(out) > width - 1:
        out = out[:-1]
    return out.rstrip() + ELLIPSIS


def columns_for(width: int, *, gpu_column: bool = True, kind_column: bool = False) -> list[Column]:
    """The columns that fit ``width`` cells (one space between columns), in display order. The command
    column takes the width left over, at least :data:`COMMAND_MIN`, else it is dropped; then TYPE, USER
    and SM % go; GPU, PID and GPU MEM always stay."""
    cols = [c for c in (GPU, PID, USER, KIND, MEM, SM, COMMAND)
            if (c is not GPU or gpu_column) and (c is not KIND or kind_column)]

    def fixed(cs: list[Column]) -> int:
        return sum(c.width for c in cs if c is not COMMAND) + max(0, len(cs) - 1)

    for key in DROP_ORDER:
        room = width - fixed(cols)
        if COMMAND in cols and room >= COMMAND_MIN:
            break
        if COMMAND not in cols and room >= 0:
            break
        cols = [c for c in cols if c.key != key]
    return cols


def _cell(col: Column, text: str, width: int) -> str:
    return text.rjust(width) if col.right else text.ljust(width)


def process_row(gpu: int, p: ProcessInfo, cols: list[Column], width: int) -> Text:
    """One process as a line of ``cols`` in ``width`` cells (numbers whole; user and command shortened)."""
    fixed = sum(c.width for c in cols if c is not COMMAND) + max(0, len(cols) - 1)
    values = {"gpu": str(gpu), "pid": str(p.pid), "user": p.user or "?", "kind": p.kind, "mem": fmt_mem(p.used_memory_bytes),
              "sm": fmt_sm(p), "command": short_command(p) if p.gpu_instance is None
              else f"[MIG {p.gpu_instance}] {short_command(p)}"}
    out = Text()
    for k, c in enumerate(cols):
        if k:
            out.append(" ")
        w = max(0, width - fixed) if c is COMMAND else c.width
        v = values[c.key]
        v = fit_text(v, w) if c.key in ("user", "command") else v
        style = "bold" if c.key == "mem" else (DIM if c.key in ("kind", "user") else "")
        out.append(_cell(c, v, w) if c is not COMMAND else v, style=style)
    return out


def header_row(cols: list[Column], width: int) -> Text:
    return Text(" ".join(_cell(c, c.title, c.width) if c is not COMMAND else c.title for c in cols)[:width],
                style="bold " + DIM)


def sorted_processes(frame: Frame, gpu: int | None = None) -> list[tuple[int, ProcessInfo]]:
    """(GPU index, process) of every process in ``frame`` (or on GPU ``gpu``), largest GPU memory first
    (unknown memory last), then by GPU and pid."""
    rows = [(g.index, p) for g in frame.gpus if (gpu is None or g.index == gpu) and not g.lost
            for p in g.processes or ()]
    return sorted(rows, key=lambda r: (-(r[1].used_memory_bytes if r[1].used_memory_bytes is not None else -1),
                                       r[0], r[1].pid))


def process_lines(frame: Frame | None, width: int, budget: int, gpu: int | None = None) -> list[Text]:
    """The panel's lines in ``width`` cells and at most ``budget`` lines (at least 1): a header and one row
    per process, largest GPU memory first, ``+k more`` when they do not fit; or what is known instead:
    waiting, no processes, or which GPUs do not report them. ``gpu``: one GPU only (the detail view)."""
    budget = max(1, budget)
    if frame is None:
        return [Text("waiting for the first reading", style=DIM)]
    gpus = [g for g in frame.gpus if (gpu is None or g.index == gpu) and not g.lost]
    if not gpus:
        return [Text(f"GPU{gpu} lost" if gpu is not None else "no GPU answers", style=DIM)]
    silent = [g.index for g in gpus if g.processes is None]
    if len(silent) == len(gpus):  # nothing to list: say why, once
        what = "processes " + (NOT_REPORTED if len(gpus) == 1 else "not reported by these GPUs")
        return [fit_words(Text(what, style=DIM), width)]
    notes = [_silent_note(silent, width)] if silent else []
    rows = sorted_processes(frame, gpu)
    if not rows:
        return [_no_processes(gpu, len(gpus)), *notes][:budget]
    return _listing(rows, notes, width, budget, gpu_column=gpu is None)


def _silent_note(silent: list[int], width: int) -> Text:
    """Which GPUs do not report their processes (beside those that do)."""
    return fit_words(Text(", ".join(f"GPU{i}" for i in silent) + ": processes " + NOT_REPORTED, style=DIM), width)


def _no_processes(gpu: int | None, n_gpus: int) -> Text:
    """No process on GPU ``gpu`` (None: on any of the ``n_gpus``)."""
    where = f"GPU{gpu}" if gpu is not None else ("any GPU" if n_gpus > 1 else "this GPU")
    return Text(f"no processes on {where}", style=DIM)


def _listing(rows: list[tuple[int, ProcessInfo]], notes: list[Text], width: int, budget: int,
             gpu_column: bool) -> list[Text]:
    """``rows`` listed in ``budget`` lines (at least 1): a header and one row per process, ``+k more`` when
    they do not fit, then the ``notes`` where there is room for them beside two rows."""
    kinds = any(p.kind != "C" for _, p in rows)
    cols = columns_for(width, gpu_column=gpu_column, kind_column=kinds)
    room = budget - 1 - len(notes)  # the header, and the note on silent GPUs
    if room < 1 or (room < len(rows) and room < 2):
        notes = []
        room = budget - 1
    if budget == 1:  # one line: the count only
        return [Text(f"{len(rows)} processes (no room to list them)", style=DIM)]
    header = len(rows) <= room or room >= 2  # two lines for many: the largest, and how many more
    shown = rows if len(rows) <= room else rows[:room - 1 if header else 1]
    out = [header_row(cols, width)] if header else []
    out += [process_row(g, p, cols, width) for g, p in shown]
    if len(shown) < len(rows):
        out.append(Text(f"+{len(rows) - len(shown)} more (smaller)", style=DIM))
    return out + notes


def lines_wanted(frame: Frame | None) -> int:
    """How many lines :func:`process_lines` would draw for every GPU with no limit (cheap: no text built),
    so the layout can give the panel what it needs."""
    if frame is None:
        return 1
    gpus = [g for g in frame.gpus if not g.lost]
    silent = sum(1 for g in gpus if g.processes is None)
    if not gpus or silent == len(gpus):
        return 1
    rows = sum(len(g.processes or ()) for g in gpus)
    return (1 + rows if rows else 1) + (1 if silent else 0)


class ProcessesPanel(Static):
    """Every GPU's processes (toggled with ``P``); the layout gives it :attr:`budget` lines."""

    DEFAULT_CSS = """
    ProcessesPanel { height: auto; border: round $primary-darken-2; padding: 0 1; }
    """

    def __init__(self, **kw: Any):
        super().__init__(**kw)
        self.budget = 6
        self._key: tuple[Any, ...] | None = None  # what the lines were built from (processes change every 5 s)

    def show(self, v: ViewState) -> None:
        title = "Processes" + (" (simulated)" if v.inventory.simulated else "")
        if self.border_title != title:
            self.border_title = title
        n = sum(len(g.processes or ()) for g in v.frame.gpus) if v.frame else 0
        sub = f"{n} · largest first · read every 5 s" if n else ""
        if self.border_subtitle != sub:
            self.border_subtitle = sub
        width = max(20, self.size.width or 76)  # the content area (inside border and padding)
        key = (width, self.budget, v.frame is None,
               tuple((g.index, g.lost, g.processes) for g in v.frame.gpus) if v.frame else ())
        if key == self._key:
            return  # the same processes as at the last redraw: nothing to build
        self._key = key
        set_content(self, Text("\n").join(process_lines(v.frame, width, self.budget)))
