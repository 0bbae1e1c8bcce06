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
from textual.widgets import Static

from gpuscope.core.summary import HostSummary
from gpuscope.core.text import clean
from gpuscope.core.units import duration
from gpuscope.core.vocab import LINK_LEVEL, SEVERITIES
from gpuscope.sources.mqtt import RemoteHost
from gpuscope.widgets.style import BAD, DIM, LEVEL_STYLE, OK, SEV_STYLE, set_content

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


class FleetTable(Static):
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
        self._note = ""

    @property
    def rows(self) -> int:
        """Rows of hosts that fit (the border and the header line take 3)."""
        h = self.size.height or 24
        return max(1, h - 3 - (1 if self._note else 0))

    def show(self, hosts: Sequence[RemoteHost], note: str = "") -> None:
        """Sort and filter ``hosts``; keep the selection on its host (or the row where it was, if that host went
        away); render the rows in view."""
        self._note = note
        self._total = len(hosts)
        hs = order(visible(hosts, self.filter))
        old_index = self._pos.get(self.selected, 0) if self.selected is not None else 0
        self.order = [h.host for h in hs]
        self._hosts = {h.host: h for h in hs}
        self._pos = {name: k for k, name in enumerate(self.order)}
        if self.selected not in self._pos:
            self.selected = self.order[min(old_index, len(self.order) - 1)] if self.order else None
        self.draw()

    @property
    def index(self) -> int:
        return self._pos.get(self.selected, 0) if self.selected is not None else 0

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

    def draw(self) -> None:
        """Render the header and only the rows in view (virtualised)."""
        now = time.time()
        n = self.rows
        self.top = scroll_top(self.top, self.index, n, len(self.order))
        width = max(40, (self.size.width or 120) - 4)
        lines = [Text(HEADER, style="bold")]
        for k in range(self.top, min(len(self.order), self.top + n)):
            name = self.order[k]
            r = row(self._hosts[name], now)
            r.truncate(width)
            if name == self.selected:
                r.stylize("reverse")
            lines.append(r)
        if not self.order:
            lines.append(Text(f"no host matches /{self.filter}" if self.filter and self._total else
                              "no host has published yet: start `gpuscope agent --broker URL` on a GPU server",
                              style=DIM))
        if self._note:
            lines.append(Text(self._note, style=DIM))
        shown = len(self.order)
        self.border_subtitle = (f"{self.index + 1 if shown else 0}/{shown}"
                                + (f" of {self._total} matching /{self.filter}" if self.filter else ""))
        set_content(self, Text("\n").join(lines))
