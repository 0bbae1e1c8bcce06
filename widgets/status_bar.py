"""The header line: host, source label, sampling errors, interval, recording, window, clock."""

from __future__ import annotations

import time

from rich.text import Text
from textual.widgets import Static

from gpuscope.core.text import clean
from gpuscope.core.view import ViewState
from gpuscope.widgets.fit import fit_segments
from gpuscope.widgets.style import fmt_duration, set_content

LABEL_STYLE = {"LIVE": "bold black on green", "SIMULATED": "bold black on yellow", "REPLAY": "bold black on cyan",
               "REMOTE": "bold black on magenta"}


class StatusBar(Static):
    DEFAULT_CSS = "StatusBar { height: 1; background: $panel; }"

    def show(self, v: ViewState) -> None:
        st = v.status
        segs: list[tuple[Text, int]] = []  # (text, priority): 0 always shown, higher dropped first to fit

        def seg(text: str, style: str = "", prio: int = 0) -> None:
            segs.append((Text(text, style=style), prio))

        seg(" gpuscope", "bold", 6)
        seg(f" {v.label} ", LABEL_STYLE.get(v.label, "reverse"), 0)
        if v.inventory.scenario and v.label == "SIMULATED":
            seg(v.inventory.scenario, "yellow", 2)
        elif v.inventory.simulated:
            seg(f"SIMULATED {v.inventory.scenario or ''}".strip(), "bold yellow", 0)
        if st.tick_errors.count:  # a high priority: a narrow terminal must still show it
            seg(st.tick_errors.text(), "bold red", 1)
        if st.origin_note:
            seg(clean(st.origin_note, 300), "cyan", 3)
        seg(clean(v.inventory.host, 60), "", 3)
        seg(f"{len(v.inventory.devices)} GPU", "", 4)
        seg(f"driver {clean(v.inventory.driver_version or '?', 20)}", "", 5)
        seg(f"every {st.interval_s:g}s", "", 4)
        seg(f"window {fmt_duration(v.window_s)}", "", 0)
        if st.paused:
            seg("❚❚ PAUSED", "bold yellow", 0)
        if st.recording is not None:
            seg(f"● REC {fmt_duration(st.recording.elapsed_s)}", "bold red", 0)
            if st.recording.dropped:
                seg(f"{st.recording.dropped} frames dropped: disk too slow", "bold red", 1)
        if st.record_error:
            seg(clean(st.record_error, 300), "bold red", 1)
        clock = time.strftime("%H:%M:%S", time.localtime(v.now)) if v.now else ""
        if clock:
            seg(clock, "", 0)
        set_content(self, fit_segments(segs, max(20, self.size.width or 80)))
