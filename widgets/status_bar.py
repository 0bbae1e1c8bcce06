"""The header line: host, source label, interval, recording, window, clock."""

from __future__ import annotations

import time

from rich.text import Text
from textual.widgets import Static

from gpuscope.core.text import clean
from gpuscope.core.view import ViewState
from gpuscope.widgets.style import fmt_duration, set_content

LABEL_STYLE = {"LIVE": "bold black on green", "SIMULATED": "bold black on yellow", "REPLAY": "bold black on cyan",
               "REMOTE": "bold black on magenta"}


class StatusBar(Static):
    DEFAULT_CSS = "StatusBar { height: 1; background: $panel; }"

    def show(self, v: ViewState) -> None:
        e = v.extra
        t = Text()
        t.append(" gpuscope ", style="bold")
        t.append(f" {v.label} ", style=LABEL_STYLE.get(v.label, "reverse"))
        if v.inventory.scenario and v.label == "SIMULATED":
            t.append(f" {v.inventory.scenario}", style="yellow")
        elif v.inventory.simulated:
            t.append(f" SIMULATED {v.inventory.scenario or ''}", style="bold yellow")
        if e.get("replay_note"):
            t.append(f" {clean(e['replay_note'], 300)}", style="cyan")
        t.append(f"  {clean(v.inventory.host, 60)}  {len(v.inventory.devices)} GPU  driver "
                 f"{clean(v.inventory.driver_version or '?', 20)}")
        t.append(f"  every {e.get('interval', 1.0):g}s  window {fmt_duration(v.window_s)}")
        if e.get("paused"):
            t.append("  ❚❚ PAUSED", style="bold yellow")
        if e.get("recording"):
            t.append(f"  ● REC {fmt_duration(float(e.get('rec_elapsed', 0)))}", style="bold red")
        if e.get("record_error"):
            t.append(f"  {clean(e['record_error'], 300)}", style="bold red")
        clock = time.strftime("%H:%M:%S", time.localtime(v.now)) if v.now else ""
        t.append(f"  {clock}")
        set_content(self, t)
