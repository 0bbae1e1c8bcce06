"""The fleet panel: one row per host, worst first, that follows the user.

The selection is a host (by name), never a row number: re-sorting keeps it on the same host, and the
view scrolls to keep it visible. Only the rows in view are rendered, so 10,000 hosts cost what a
screenful costs. ``filter`` keeps the hosts whose name contains it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from rich.text import Text
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget

from gpuscope.core.summary import HostSummary
from gpuscope.core.text import clean
from gpuscope.core.units import duration
from gpuscope.core.vocab import LINK_LEVEL, SEVERITIES
from gpuscope.sources.mqtt import RemoteHost
from gpuscope.widgets.style import BAD, DIM, LEVEL_STYLE, OK, SEV_STYLE

HEADER = (f"{'host':<23}{'state':<8}{'GPUs':<18}{'util':>6}{'power':>10}{'tok/s':>10}  {'link':<10}{'seen':>9}  "
          "worst finding")


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


def _age(now: float, t: float | None) -> str:
    if t is None:
        return "never"
    return f"{duration(now - t, short=True)} ago" if now - t >= 0 else "0s ago"


def row(h: RemoteHost, now: float) -> Text:
    """One host's line: state, GPUs (lost), mean util, total power, tok/s, worst link, age of the data, worst
    finding and how long it has been active."""
    t = Text()
    s: HostSummary | None = h.summary
    sim_flag = s.simulated if s is not None else bool(h.inventory is not None and h.inventory.simulated)
    sim = " (sim)" if sim_flag else ""
    t.append(f"{(clean(h.host, 60)[:22 - len(sim)] + sim):<23}", style="bold")
    state = ("online", OK) if h.online else ("OFFLINE", BAD)
    t.append(f"{state[0]:<8}", style=state[1])
    if s is None:
        n = len(h.inventory.devices) if h.inventory else 0
        t.append(f"{n:>3} GPUs  {'(no data yet)':<49}", style=DIM)
    else:
        lost = f" ({len(s.lost)} lost)" if s.lost else ""
        t.append(f"{s.gpus:>3} GPU{'' if s.gpus == 1 else 's'}", style="")
        t.append(f"{lost:<10}", style=BAD if s.lost else "")
        t.append(f"{s.util_pct:>4.0f} %" if s.util_pct is not None else f"{'–':>4}  ")
        t.append(f"  {s.power_w:>6.0f} W" if s.power_w is not None else f"  {'–':>6}  ")
        tok = s.tok_s()
        t.append(f"  {tok:>8.0f}  " if tok is not None else f"  {'–':>8}  ", style="" if tok is not None else DIM)
        if s.link_state and s.link_state != "at_max":
            t.append(f"{(s.link_label or '?') + '▼':<10}", style=LEVEL_STYLE[LINK_LEVEL[s.link_state]])
        else:
            t.append(f"{'ok' if s.link_state else '–':<10}", style=DIM)
    t.append(f"{_age(now, h.data_t):>9}  ", style=DIM)
    rank, msg = h.worst()
    if rank < len(SEVERITIES):
        since = next((f.since for f in s.findings if f.text == msg), None) if s is not None else None
        if since is None:
            since = next((t0 for sev, m, t0 in h.findings.values() if m == msg), None)
        t.append(clean(msg, 200)[:80], style=SEV_STYLE[SEVERITIES[rank]])
        if since is not None:
            t.append(f" (for {duration(now - since, short=True)})", style=DIM)
        n = len(s.findings) if s is not None and not s.from_frame else len(h.findings)
        if n > 1:
            t.append(f" +{n - 1}", style=DIM)
    return t


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

    def show(self, hosts: Sequence[RemoteHost] | None, gen: int | None = None) -> None:
        """A refresh: sort and filter ``hosts`` (skipped when ``gen``, the subscriber's order generation, and the
        filter are what the order was last sorted for; ``hosts`` may then be None); keep the selection on its
        host (or the row where it was, if that host went away); re-render the rows in view."""
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
        head = HEADER[:max(0, width - len(pos) - 2)]  # narrow: the position stays, the column names give way
        return Text(head + " " * max(2, width - len(head) - len(pos)) + pos, style="bold")

    def _row(self, name: str) -> Text:
        t = self._row_text.get(name)
        if t is None:
            t = self._row_text[name] = row(self._hosts[name], self._now or time.time())
            t.truncate(max(1, self.size.width or 120))
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
            lines.append(Text(f"no host matches /{self.filter}" if self.filter and self._total else
                              "no host has published yet: start `gpuscope agent --broker URL` on a GPU server",
                              style=DIM))
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
