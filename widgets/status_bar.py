"""The header line: host, source label, sampling errors, interval, recording, window, clock."""

from __future__ import annotations

import time

from rich.text import Text
from textual.widgets import Static

from gpuscope.core.view import ViewState
from gpuscope.widgets.style import fmt_duration, set_content

LABEL_STYLE = {"LIVE": "bold black on green", "SIMULATED": "bold black on yellow", "REPLAY": "bold black on cyan",
               "REMOTE": "bold black on magenta"}


class StatusBar(Static):
    DEFAULT_CSS = "StatusBar { height: 1; background: $panel; }"

    def show(self, v: ViewState) -> None:
        st = v.status
        t = Text()
        t.append(" gpuscope ", style="bold")
        t.append(f" {v.label} ", style=LABEL_STYLE.get(v.label, "reverse"))
        if v.inventory.scenario and v.label == "SIMULATED":
            t.append(f" {v.inventory.scenario}", style="yellow")
        elif v.inventory.simulated:
            t.append(f" SIMULATED {v.inventory.scenario or ''}", style="bold yellow")
        if st.tick_errors.count:  # early in the line: a narrow terminal must still show it
            t.append(f"  {st.tick_errors.text()} ", style="bold red")
        if st.origin_note:
            t.append(f" {st.origin_note}", style="cyan")
        t.append(f"  {v.inventory.host}  {len(v.inventory.devices)} GPU  driver {v.inventory.driver_version or '?'}")
        t.append(f"  every {st.interval_s:g}s  window {fmt_duration(v.window_s)}")
        if st.paused:
            t.append("  ❚❚ PAUSED", style="bold yellow")
        if st.recording is not None:
            t.append(f"  ● REC {fmt_duration(st.recording.elapsed_s)}", style="bold red")
            if st.recording.dropped:
                t.append(f" ({st.recording.dropped} frames dropped: disk too slow)", style="bold red")
        if st.record_error:
            t.append(f"  {st.record_error}", style="bold red")
        clock = time.strftime("%H:%M:%S", time.localtime(v.now)) if v.now else ""
        t.append(f"  {clock}")
        set_content(self, t)
