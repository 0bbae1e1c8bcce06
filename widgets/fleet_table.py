"""The fleet panel: one row per host, worst first."""

from __future__ import annotations

import time
from typing import Any

from rich.text import Text
from textual.widgets import Static

from gpuscope.core.text import clean
from gpuscope.core.vocab import SEVERITIES
from gpuscope.sources.mqtt import RemoteHost
from gpuscope.widgets.style import BAD, DIM, OK, SEV_STYLE, set_content


def order(hosts: list[RemoteHost]) -> list[RemoteHost]:
    """Worst first: offline hosts, then by the worst finding, then by name."""
    return sorted(hosts, key=lambda h: (h.online, h.worst()[0], h.host))


def row(h: RemoteHost, now: float) -> Text:
    t = Text()
    state = ("online", OK) if h.online else ("OFFLINE", BAD)
    sim = " (sim)" if h.inventory is not None and h.inventory.simulated else ""
    t.append(f"{(clean(h.host, 60)[:22 - len(sim)] + sim):<23}", style="bold")
    t.append(f"{state[0]:<8}", style=state[1])
    n = len(h.inventory.devices) if h.inventory else 0
    f = h.frame
    if f is not None:
        utils = [r.util_gpu_pct for r in f.gpus if r.util_gpu_pct is not None and not r.lost]
        power = sum(r.power_w or 0 for r in f.gpus if not r.lost)
        tok = [e.gen_tokens_per_s for e in f.endpoints if e.gen_tokens_per_s is not None]
        lost = sum(1 for r in f.gpus if r.lost)
        t.append(f"{n:>3} GPU{'' if n == 1 else 's'}{f' ({lost} lost)' if lost else '':<10}")
        t.append(f"{(sum(utils) / len(utils)) if utils else 0:>5.0f} %  {power:>6.0f} W  ")
        t.append(f"{sum(tok):>7.0f} tok/s  " if tok else f"{'–':>7} tok/s  ", style=DIM if not tok else "")
    else:
        t.append(f"{n:>3} GPUs {'(no frames yet)':<30}", style=DIM)
    ago = f"{now - h.last_seen:.0f}s ago" if h.last_seen else "never"
    t.append(f"{ago:>9}  ", style=DIM)
    rank, msg = h.worst()
    if rank < len(SEVERITIES):
        t.append(msg[:80], style=SEV_STYLE[SEVERITIES[rank]])
    return t


class FleetTable(Static):
    DEFAULT_CSS = "FleetTable { height: auto; border: round $primary-darken-2; padding: 0 1; }"

    def __init__(self, **kw: Any):
        super().__init__(**kw)
        self.border_title = "Fleet"
        self.selected = 0
        self.order: list[str] = []

    def show(self, hosts: list[RemoteHost], note: str = "") -> None:
        now = time.time()
        hs = order(hosts)
        self.order = [h.host for h in hs]
        self.selected = min(self.selected, max(0, len(hs) - 1))
        head = Text(f"{'host':<23}{'state':<8}{'GPUs':<18}{'util':>5}   {'power':>7}  {'tok/s':>13}  {'seen':>9}  "
                    "worst finding", style="bold")
        lines = [head]
        width = max(40, (self.size.width or 120) - 4)
        for k, h in enumerate(hs):
            r = row(h, now)
            r.truncate(width)
            if k == self.selected:
                r.stylize("reverse")
            lines.append(r)
        if not hs:
            lines.append(Text("no host has published yet: start `gpuscope agent --broker URL` on a GPU server",
                              style=DIM))
        if note:
            lines.append(Text(note, style=DIM))
        set_content(self, Text("\n").join(lines))
