"""The fleet panel: one row per host, worst first, that follows the user.

The selection is a host (by name), never a row number: re-sorting keeps it on the same host, and the
view scrolls to keep it visible. Only the rows in view are rendered, so 10,000 hosts cost what a
screenful costs. ``filter`` keeps the hosts whose name contains it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from rich.cells import cell_len
from rich.text import Text
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget

from gpuscope.core.slow_rank import slow_rank_brief
from gpuscope.core.summary import HostSummary
from gpuscope.core.text import clean, count
from gpuscope.core.units import NONE, duration
from gpuscope.core.vocab import LINK_LEVEL, SEVERITIES
from gpuscope.sources.mqtt import RemoteHost
from gpuscope.widgets.fit import ELLIPSIS, fit_words
from gpuscope.widgets.style import BAD, DIM, LEVEL_STYLE, OK, SEV_STYLE, WARN

HEADER_GAP = 2  # cells between two columns


@dataclass(frozen=True, slots=True)
class Column:
    """One fleet column: its key, title, width in cells (0: the flexible last column), alignment and when it
    gives way at narrow widths (``drop`` 0: never; a higher one goes first)."""

    key: str
    title: str
    width: int
    right: bool = False
    drop: int = 0


COLUMNS: tuple[Column, ...] = (
    Column("host", "host", 21),
    Column("state", "state", 7),
    Column("gpus", "GPUs", 10, drop=5),
    Column("util", "util", 5, right=True, drop=4),
    Column("power", "power", 7, right=True, drop=6),
    Column("tok", "tok/s", 7, right=True, drop=3),
    Column("groups", "serving", 20, drop=7),  # the first to go when narrow
    Column("link", "link", 8, drop=2),
    Column("seen", "seen", 10, right=True, drop=1),  # holds every age: "59m59s ago", "23h59m ago", "99d23h ago"
    Column("finding", "worst finding", 0),
)
KEEP = 20  # cells a finding's text keeps before its suffixes give way (finding_cell)
HOST_MIN = 10  # the host column shrinks to this before anything else is cut
STALE_S = 60.0  # a skewed host's data older than this (on the viewer's clock) shows its age, not its clock


def finding_min(width: int) -> int:
    """The cells the worst-finding column keeps before other columns are dropped for it."""
    return max(24, int(width * 0.35))


def fit_columns(width: int, columns: Sequence[Column] = COLUMNS) -> list[Column]:
    """The columns shown in ``width`` cells, with their widths: the flexible (width 0) column takes what is
    left; while it would get less than :func:`finding_min`, the column with the highest ``drop`` goes (never
    one with drop 0); then the host column shrinks (to :data:`HOST_MIN`). The widths and the gaps between
    the columns add up to ``width`` at most (pure: tested with a table of widths)."""
    keep = list(columns)

    def fixed(cols: Sequence[Column]) -> int:
        return sum(c.width for c in cols) + HEADER_GAP * max(0, len(cols) - 1)

    want = finding_min(width)
    while fixed(keep) + want > width:
        droppable = [c for c in keep if c.drop > 0]
        if not droppable:
            break
        keep.remove(max(droppable, key=lambda c: c.drop))
    over = fixed(keep) + want - width
    out = []
    for c in keep:
        if c.key == "host" and over > 0:
            c = replace(c, width=max(HOST_MIN, c.width - over))
        out.append(c)
    left = max(0, width - fixed(out))
    return [replace(c, width=left) if c.width == 0 else c for c in out]


def cut(s: str, width: int) -> str:
    """``s`` in at most ``width`` cells, its end replaced by ``…`` when cut (for names, not numbers)."""
    if width <= 0:
        return ""
    if cell_len(s) <= width:
        return s
    out = s
    while out and cell_len(out) > width - 1:
        out = out[:-1]
    return out + ELLIPSIS


def finding_cell(msg: str, since: str, more: int, width: int, keep: int = 20) -> list[tuple[str, str]]:
    """The worst finding in ``width`` cells: its text (whole words, ``…`` where cut), `` (for 5m)`` and `` +N``
    (other findings); the suffixes give way (``for`` first) before the text goes below ``keep`` cells (20; more
    for lead words that must show whole: :func:`lead_words`); a cut text never ends inside a bracket it opened.
    Returns ``(text, part)`` pieces, part ``msg``/``since``/``more``; numbers are never cut."""
    tail = [(f" (for {since})", "since")] if since else []
    if more > 0:
        tail.append((f" +{more}", "more"))
    while True:
        room = width - sum(cell_len(s) for s, _ in tail)
        if room >= min(keep, cell_len(msg)) or not tail:
            break
        tail.pop(0)
    text = fit_words(Text(msg), max(0, room)).plain if room > 0 else ""
    if text.endswith(ELLIPSIS):  # a cut message ends on a whole word, never inside brackets it opened
        while text.count("(") > text.count(")") and " (" in text:
            text = text[:text.rindex(" (")] + ELLIPSIS
        text = text[:-1].rstrip(" ,;:·") + ELLIPSIS
    return [(text, "msg"), *tail]


def order(hosts: Sequence[RemoteHost]) -> list[RemoteHost]:
    """Worst first: offline hosts, then by the worst finding, then by name."""
    return sorted(hosts, key=lambda h: (h.online, h.rank, h.host))  # rank: worst()[0], kept by the subscriber


def visible(hosts: Sequence[RemoteHost], needle: str) -> list[RemoteHost]:
    """The hosts whose name contains ``needle`` (case-insensitive); all of them for ''."""
    if not needle:
        return list(hosts)
    n = needle.lower()
    return [h for h in hosts if n in h.host.lower()]


def scroll_top(top: int, index: int, rows: int, total: int) -> int:
    """The first row in view so that row ``index`` is visible in a view of ``rows`` rows (``total`` rows in all)."""
    rows = max(1, rows)
    if index < top:
        top = index
    elif index >= top + rows:
        top = index - rows + 1
    return max(0, min(top, max(0, total - rows)))


def age_text(seconds: float) -> str:
    """An age in at most 6 cells, two units at most: ``42s``, ``10m03s``, ``23h59m``, ``3d04h``, ``99d23h``;
    ``>99d`` beyond (never negative)."""
    s = max(0, int(seconds + 0.5))
    d, rem = divmod(s, 86400)
    h, rem = divmod(rem, 3600)
    m, sec = divmod(rem, 60)
    if d >= 100:
        return ">99d"
    if d:
        return f"{d}d{h:02d}h"
    if h:
        return f"{h}h{m:02d}m"
    return f"{m}m{sec:02d}s" if m else f"{sec}s"


def _age(now: float, t: float | None) -> str:
    if t is None:
        return "never"
    return f"{age_text(now - t)} ago"


def seen_cell(now: float, t: float | None, clock_offset: float | None) -> tuple[str, str]:
    """The "seen" cell: the age of the host's data, or, while its clock is off (``clock_offset`` s behind the
    viewer's; negative: ahead) and its data fresh, ``clock 1h behind``: a skewed clock is not old data."""
    if t is None or clock_offset is None:
        return (_age(now, t), DIM)
    if now - (t + clock_offset) < STALE_S:
        off = re.sub(r"(?<=\D)00[ms]\Z", "", duration(abs(clock_offset), short=True))  # 1h00m → 1h
        return (f"clock {off} {'behind' if clock_offset > 0 else 'ahead'}", WARN)
    return (_age(now, t + clock_offset), DIM)  # the age on the viewer's clock


def clash_text(agents: int, host: str, width: int) -> str:
    """What a row says when ``agents`` agents publish under one name: the longest wording that fits ``width``
    cells (the host column names the host, so the shortest leaves it out)."""
    for text in (f"{agents} agents publish as {host}: give each agent --name",
                 f"{agents} agents share this name: give each --name",
                 f"{agents} agents: give each --name"):
        if cell_len(text) <= width:
            return text
    return text


def cells(h: RemoteHost, now: float, broker_up: bool = True, mono: float | None = None) -> dict[str, Any]:
    """One host's values, before fitting: ``key → (text, style)``; the finding ``(text, style, since, more, keep)``;
    ``clash``: how many agents publish under its name (0: one). ``broker_up`` False: every host is unknown (the
    viewer cannot know), not offline; ``mono``: the monotonic time (clashes are timed on it)."""
    s: HostSummary | None = h.summary
    sim_flag = s.simulated if s is not None else bool(h.inventory is not None and h.inventory.simulated)
    out: dict[str, Any] = {"host": (clean(h.host, 128), "bold"), "sim": (" (sim)" if sim_flag else "", "bold")}
    out["clash"] = h.clash(time.monotonic() if mono is None else mono)
    out["state"] = (("online", OK) if h.online else ("OFFLINE", BAD)) if broker_up else ("unknown", WARN)
    if s is None:
        n = len(h.inventory.devices) if h.inventory else 0
        out["gpus"] = (count(n, "GPU"), DIM)
        for k in ("util", "power", "tok", "link"):
            out[k] = (NONE, DIM)
    else:
        out["gpus"] = ((f"{s.gpus} ({len(s.lost)} lost)", BAD) if s.lost
                       else (count(s.gpus, "GPU"), ""))
        out["util"] = _figure(s.util_pct, " %")
        out["power"] = _figure(s.power_w, " W")
        out["tok"] = _figure(s.tok_s(), "")
        out["link"] = _link_cell(s)
    out["groups"] = groups_cell(s.groups if s is not None else ())
    out["seen"] = seen_cell(now, h.data_t, h.clock_offset())
    out["finding"] = _finding_cell(h, s, now, broker_up)
    return out


def _figure(x: float | None, unit: str) -> tuple[str, str]:
    """A summed or mean figure, whole, with its ``unit``; ``–`` dim when the host has none."""
    return (f"{x:.0f}{unit}", "") if x is not None else (NONE, DIM)


def _link_cell(s: HostSummary) -> tuple[str, str]:
    """The worst link: its label and ``▼`` in its level's colour when below its max; ``ok`` or ``–`` dim."""
    if s.link_state and s.link_state != "at_max":
        return ((s.link_label or "?") + "▼", LEVEL_STYLE[LINK_LEVEL[s.link_state]])
    return ("ok" if s.link_state else NONE, DIM)


def _finding_cell(h: RemoteHost, s: HostSummary | None, now: float, broker_up: bool
                  ) -> tuple[str, str, str, int, int]:
    """The worst finding ``(text, style, since, more, keep)``: how long it has been active, how many others there
    are and the cells its text keeps before those give way (:func:`finding_cell`); with the broker down, the last
    known one (the viewer cannot know it is still active)."""
    rank, msg = h.worst()
    if not broker_up:
        last = clean(msg, 300) if rank < len(SEVERITIES) else ""
        return (f"broker down; last known: {last}" if last else "(broker down)", WARN, "", 0, KEEP)
    if rank < len(SEVERITIES):
        since = next((f.since for f in s.findings if f.text == msg), None) if s is not None else None
        if since is None:
            since = next((t0 for sev, m, t0 in h.findings.values() if m == msg), None)
        n = len(s.findings) if s is not None and not s.from_frame else len(h.findings)
        brief = host_slow_rank(h, s)
        return (lead_words(brief, clean(msg, 300)), SEV_STYLE[SEVERITIES[rank]],
                duration(now - since, short=True) if since is not None else "", n - 1,
                max(KEEP, cell_len(brief or "") + 1))
    if s is None:
        return ("(no data yet)", DIM, "", 0, KEEP)
    return ("", "", "", 0, KEEP)


def host_slow_rank(h: RemoteHost, s: HostSummary | None) -> str | None:
    """``GPU5 lags: power limit`` for the host's first slow-rank finding (core/slow_rank.py), from its summary
    (else, for an older agent, its frames' findings); None when it has none. The slow rank rarely is the worst
    finding (its GPU's own power-cap, thermal or link finding comes with it, often worse), so the row says it
    beside whichever is."""
    ids = [f.id for f in s.findings] if s is not None and not s.from_frame else list(h.findings)
    return next((b for b in map(slow_rank_brief, ids) if b), None)


def lead_words(brief: str | None, text: str) -> str:
    """The worst finding's text for a fleet row, led by the host's slow rank in a few words when it has one
    (``GPU5 lags: power limit · GPU5 power capped: 548 of 550 W…``; :func:`host_slow_rank`), which the cell keeps
    whole (at 80 columns the "for" suffix gives way to it); else the text as it is."""
    return f"{brief} · {text}" if brief else text


def groups_cell(groups: Sequence[str]) -> tuple[str, str, str]:
    """The serving-groups cell ``(text, style, more)``: the first group in a few words and `` +N`` for the
    others (``vLLM TP=2 GPU0+1 +1``: the row cuts the name, never ``more``); ``–`` when the host has none or
    its agent does not publish them."""
    if not groups:
        return (NONE, DIM, "")
    return (clean(groups[0], 48), "", f" +{len(groups) - 1}" if len(groups) > 1 else "")


NUMERIC = frozenset({"gpus", "util", "power", "tok", "seen"})  # never cut: a wider value borrows from the finding


def row(h: RemoteHost, now: float, columns: Sequence[Column] | None = None, broker_up: bool = True) -> Text:
    """One host's line in ``columns`` (default: :func:`fit_columns` at 120 cells): state, GPUs (lost), mean
    util, total power, tok/s, serving groups (wide screens only), worst link, age of the data, worst finding and how long it has been active.
    Names are cut with ``…``; numbers are never cut."""
    cols = list(columns) if columns is not None else fit_columns(120)
    v = cells(h, now, broker_up)
    t = Text()
    debt = 0  # cells a numeric value took beyond its column, taken from the finding
    for k, c in enumerate(cols):
        if k:
            t.append(" " * HEADER_GAP)
        if c.key == "finding":
            msg, style, since, more, keep = v["finding"]
            w = max(0, c.width - debt)
            if v["clash"] and broker_up:  # the row mixes two machines: say so first, and how to fix it
                msg, style, since, more = clash_text(v["clash"], v["host"][0], w), SEV_STYLE["warning"], "", 0
                keep = KEEP
            used = 0
            for text, part in finding_cell(msg, since, more, w, keep):
                t.append(text, style=style if part == "msg" else DIM)
                used += cell_len(text)
            t.append(" " * max(0, w - used))
            continue
        text, style = v[c.key][:2]
        if c.key == "host":
            sim = v["sim"][0]
            text = cut(text, max(1, c.width - len(sim))) + sim if len(sim) < c.width else cut(text, c.width)
        elif c.key == "groups":
            more = v["groups"][2]
            text = cut(text, max(1, c.width - len(more))) + more
        elif c.key not in NUMERIC:
            text = cut(text, c.width)
        pad = c.width - cell_len(text)
        debt += max(0, -pad)
        t.append((" " * max(0, pad) + text) if c.right else (text + " " * max(0, pad)), style=style)
    t.rstrip()
    return t


def header_line(cols: Sequence[Column], pos: str, width: int) -> Text:
    """The column titles over ``cols`` and the position ``pos`` at the right, one line of ``width`` cells at
    most: the titles give way to the position."""
    out = ""
    for k, c in enumerate(cols):
        gap = " " * HEADER_GAP if k else ""
        title = c.title if cell_len(c.title) <= c.width else ""
        out += gap + (title.rjust(c.width) if c.right else title.ljust(c.width))
    room = max(0, width - cell_len(pos) - 2)
    head = out.rstrip()
    if cell_len(head) > room:
        head = head[:room].rstrip()
    return Text(head + " " * max(0, width - cell_len(head) - cell_len(pos)) + pos[:width], style="bold")


class FleetTable(Widget):
    """The fleet table, drawn line by line (Textual's line API).

    Each line on screen is a cached :class:`Strip`; a key press that moves the highlight within the view
    re-renders two rows and the header (the position), not the table: the compositor repaints those lines
    only. A scroll re-uses the rows' strips (built once per refresh). :meth:`show` re-sorts only when told
    the order may have changed (the subscriber's ``order_gen``).
    """

    DEFAULT_CSS = "FleetTable { height: 1fr; border: round $primary-darken-2; padding: 0 1; }"

    def __init__(self, **kw: Any):
        super().__init__(**kw)
        self.border_title = "Fleet"
        self.selected: str | None = None  # a host name, never a row number
        self.filter = ""
        self.top = 0
        self.order: list[str] = []  # the hosts shown (filtered), worst first
        self._hosts: dict[str, RemoteHost] = {}
        self._pos: dict[str, int] = {}
        self._total = 0
        self._sorted_for: tuple[int, str] | None = None  # (order_gen, filter) the order was sorted for
        self._now = 0.0
        self._row_text: dict[str, Text] = {}  # host → its line (no highlight), built once per refresh
        self._strips: dict[tuple[str, bool], Strip] = {}  # (host, highlighted) → its strip, same lifetime
        self._lines: list[Text] = []  # what each line shows now (header, rows in view, messages)
        self._keys: list[tuple[Any, ...]] = []  # a key per line: which lines changed since the last draw
        self._gen = 0  # bumped when the rows' texts are rebuilt (a refresh, a resize)
        self._width = 0
        self._cols: list[Column] = []
        self._cols_for = -1  # the width self._cols were fitted for
        self.broker_up = True  # False: the viewer's broker is down, every host is unknown

    @property
    def rows(self) -> int:
        """Rows of hosts that fit (the header line takes 1)."""
        h = self.size.height or 24
        return max(1, h - 1)

    @property
    def index(self) -> int:
        return self._pos.get(self.selected, 0) if self.selected is not None else 0

    def needs_sort(self, gen: int) -> bool:
        """Whether :meth:`show` would sort for order generation ``gen`` (the hosts must then be given)."""
        return (gen, self.filter) != self._sorted_for

    def show(self, hosts: Sequence[RemoteHost] | None, gen: int | None = None, broker_up: bool | None = None) -> None:
        """A refresh: sort and filter ``hosts`` (skipped when ``gen``, the subscriber's order generation, and the
        filter are what the order was last sorted for; ``hosts`` may then be None); keep the selection on its
        host (or the row where it was, if that host went away); re-render the rows in view (``broker_up``
        False: every host unknown, the broker is down; None: as it was)."""
        if broker_up is not None:
            self.broker_up = broker_up
        key = (gen, self.filter) if gen is not None else None
        if hosts is not None and (key is None or key != self._sorted_for):
            self._total = len(hosts)
            hs = order(visible(hosts, self.filter))
            old_index = self.index
            self.order = [h.host for h in hs]
            self._hosts = {h.host: h for h in hs}
            self._pos = {name: k for k, name in enumerate(self.order)}
            if self.selected not in self._pos:
                self.selected = self.order[min(old_index, len(self.order) - 1)] if self.order else None
            self._sorted_for = key
        self._now = time.time()
        self._forget_rows()  # the rows' data and ages are new
        self.draw()

    def _forget_rows(self) -> None:
        self._row_text.clear()
        self._strips.clear()
        self._gen += 1

    def move(self, d: int) -> None:
        """Move the selection ``d`` rows (clamped: no wrap-around to the other end of a long list)."""
        if not self.order:
            return
        k = max(0, min(len(self.order) - 1, self.index + d))
        self.selected = self.order[k]
        self.draw()

    def jump(self, end: bool) -> None:
        if self.order:
            self.selected = self.order[-1 if end else 0]
            self.draw()

    def header(self) -> Text:
        """The column names, and the position of the selection (and the filter) at the right."""
        shown = len(self.order)
        pos = (f"{self.index + 1 if shown else 0:,}/{shown:,}"
               + (f" of {self._total:,} matching /{self.filter}" if self.filter else ""))
        width = self.size.width or 120
        return header_line(self.columns(), pos, width)

    def columns(self) -> list[Column]:
        """The columns that fit the table's width now (recomputed on a resize)."""
        width = self.size.width or 120
        if self._cols_for != width:
            self._cols, self._cols_for = fit_columns(width), width
        return self._cols

    def _row(self, name: str) -> Text:
        t = self._row_text.get(name)
        if t is None:
            t = self._row_text[name] = row(self._hosts[name], self._now or time.time(), self.columns(), self.broker_up)
            t.truncate(max(1, self.size.width or 120))  # a safety net: the columns fit the width
        return t

    def lines(self) -> list[Text]:
        """What the table shows now, line by line (the selected row in reverse video)."""
        return list(self._lines)

    def plain(self) -> str:
        """The table's text as shown (for tests and benchmarks)."""
        return "\n".join(t.plain for t in self._lines)

    def draw(self) -> None:
        """Lay out the header and only the rows in view (virtualised); repaint the lines that changed."""
        n = self.rows
        self.top = scroll_top(self.top, self.index, n, len(self.order))
        lines: list[Text] = [self.header()]
        keys: list[tuple[Any, ...]] = []
        keys.append(("header", lines[0].plain))
        for k in range(self.top, min(len(self.order), self.top + n)):
            name = self.order[k]
            sel = name == self.selected
            t = self._row(name)
            if sel:
                t = t.copy()
                t.stylize("reverse")
            lines.append(t)
            keys.append((name, sel, self._gen))
        if not self.order:
            msg = Text(f"no host matches /{self.filter}" if self.filter and self._total else
                       "no host has published yet: start `gpuscope agent --broker URL` on a GPU server", style=DIM)
            lines.append(fit_words(msg, self.size.width or 120))
            keys.append(("empty", lines[-1].plain))
        width = self.size.width
        if width != self._width or len(keys) != len(self._keys):
            self._lines, self._keys, self._width = lines, keys, width
            self.refresh()
            return
        for y, (new, old) in enumerate(zip(keys, self._keys)):
            if new != old:
                self.refresh(Region(0, y, max(1, width), 1))
        self._lines, self._keys = lines, keys

    def on_resize(self) -> None:
        self._forget_rows()
        self.draw()

    def render_line(self, y: int) -> Strip:
        """Line ``y`` of the table, cropped or padded to the width (Textual asks for the lines that changed only;
        a row's strip is kept until the next refresh, for scrolling)."""
        width = self.size.width
        style = self.rich_style
        if y >= len(self._lines):
            return Strip.blank(width, style)
        key = self._keys[y]
        cached = self._strips.get(key[:2]) if isinstance(key[1], bool) else None
        if cached is None:
            text = self._lines[y]
            cached = Strip(list(text.render(self.app.console)), text.cell_len)
            if isinstance(key[1], bool):
                self._strips[key[:2]] = cached
        return cached.crop_extend(0, width, None).apply_style(style)
