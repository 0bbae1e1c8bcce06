"""The header line: host, source label, sampling errors, interval, recording, window, clock."""

from __future__ import annotations

import time
from typing import Any

from rich.text import Text
from textual.widgets import Static

from gpuscope.core.health import mig_text
from gpuscope.core.text import clean
from gpuscope.core.view import ViewState
from gpuscope.widgets.fit import fit_segments
from gpuscope.widgets.style import ANSI_PALETTE, Palette, fmt_duration, set_content

LABEL_COLOUR = {"LIVE": "ok", "SIMULATED": "warn", "REPLAY": "accent"}  # a Palette field each; REMOTE: magenta


def label_style(label: str, palette: Palette = ANSI_PALETTE) -> str:
    """The source label's badge (LIVE, SIMULATED, REPLAY, REMOTE) in ``palette``'s colours."""
    if label == "REMOTE":
        return "bold black on magenta"
    field = LABEL_COLOUR.get(label)
    return f"bold black on {getattr(palette, field)}" if field else "reverse"


def clock_text(now: float, seconds: bool) -> str:
    """The header's clock for the sample time ``now`` (epoch seconds): ``14:05`` or ``14:05:09``; empty
    before the first sample."""
    if not now:
        return ""
    return time.strftime("%H:%M:%S" if seconds else "%H:%M", time.localtime(now))


def clock_seconds(v: ViewState) -> bool:
    """Whether the clock shows seconds: in a replay (where you are in the recording) and while recording
    (the ``REC`` time ticks anyway); watching live, whole minutes, so an idle screen is not rewritten
    every second for the clock alone (a stalled sampler is flagged by :func:`stale_text` instead)."""
    return v.replay is not None or v.label == "REPLAY" or v.status.recording is not None


def stale_text(age_s: float, interval_s: float) -> str:
    """``no sample for 12s`` when the last sample is overdue (older than 3 intervals and 5 s), else ``""``:
    with the clock in whole minutes, this is what tells a frozen screen from an idle one."""
    if age_s <= max(3 * interval_s, 5.0):
        return ""
    return f"no sample for {fmt_duration(age_s)}"


class StatusBar(Static):
    DEFAULT_CSS = "StatusBar { height: 1; background: $panel; }"
    palette = ANSI_PALETTE  # the App sets the theme's (widgets/style.py Palette)

    def __init__(self, *args: Any, **kw: Any):
        super().__init__(*args, **kw)
        self._now = 0.0  # the sample time last shown
        self._seen_at = time.monotonic()  # when it was first shown (monotonic seconds)
        self.watch_stale = False  # the app sets it while a live sampler feeds the screen
        self._stale = ""
        self._key: tuple[object, ...] | None = None  # the words and width last drawn
        self._inputs: tuple[object, ...] | None = None  # what they were made from (show)

    def sample_age(self) -> float:
        """Seconds since the sample now shown arrived (on this machine's monotonic clock)."""
        return time.monotonic() - self._seen_at

    def stale_changed(self, interval_s: float) -> bool:
        """Whether the overdue-sample note would read differently now (the app asks every few seconds)."""
        note = stale_text(self.sample_age(), interval_s) if self.watch_stale else ""
        return note != self._stale

    def show(self, v: ViewState) -> None:
        st = v.status
        if v.now != self._now:
            self._now, self._seen_at = v.now, time.monotonic()
        stale = stale_text(self.sample_age(), st.interval_s) if self.watch_stale and not st.paused and v.now else ""
        self._stale = stale
        clock = clock_text(v.now, clock_seconds(v))
        rec = st.recording
        width = max(20, self.size.width or 80)
        # everything the words below are made from, as shown (the recording's time in whole seconds): most
        # refreshes change none of it, and then nothing is made again (the inventory: the same object)
        inputs = (v.inventory, v.label, self.palette, st.interval_s, st.paused, st.record_error, st.origin_note,
                  st.origin_name, st.tick_errors, v.window_s, stale, clock, width,
                  None if rec is None else (fmt_duration(rec.elapsed_s), rec.dropped))
        if inputs == self._inputs:
            return
        self._inputs = inputs
        segs = source_segments(v, self.palette) + state_segments(v, self.palette, stale, clock)
        key = (tuple(segs), width)
        if key == self._key:  # other inputs, the same words at the same width: nothing to fit or compare again
            return
        self._key = key
        set_content(self, fit_segments([(Text(t, style=style), prio, short) for t, style, prio, short in segs], key[1]))


# (text, style, priority, short form): priority 0 always shown, higher dropped first (widgets/fit.py)
Word = tuple[str, str, int, str | None]


def source_segments(v: ViewState, p: Palette) -> list[Word]:
    """The header's words on where the readings come from: the source label, a scenario, sampling errors, the
    origin (a recording's file), the host, its GPUs and MIG, the driver."""
    st = v.status
    inv = v.inventory
    segs: list[Word] = [(" gpuscope", "bold", 6, None), (f" {v.label} ", label_style(v.label, p), 0, None)]
    if inv.scenario and v.label == "SIMULATED":
        segs.append((inv.scenario, p.warn, 2, None))
    elif inv.simulated:
        segs.append((f"SIMULATED {inv.scenario or ''}".strip(), f"bold {p.warn}", 0, None))
    if st.tick_errors.count:  # a high priority: a narrow terminal must still show it
        segs.append((st.tick_errors.text(), f"bold {p.bad}", 1, None))
    if st.origin_note:  # narrow: the file's name
        segs.append((clean(st.origin_note, 300), p.accent, 3, clean(st.origin_name, 300)))
    segs += [(clean(inv.host, 60), "", 3, None), (f"{len(inv.devices)} GPU", "", 4, None)]
    mig = [d for d in inv.devices if d.mig_instances is not None]
    if len(mig) == 1:
        segs.append((f"GPU{mig[0].index} {mig_text(mig[0])}", "bold", 2, None))
    elif mig:
        segs.append((f"MIG on {len(mig)} GPUs", "bold", 2, None))
    segs.append((f"driver {clean(inv.driver_version or '?', 20)}", "", 5, None))
    return segs


def state_segments(v: ViewState, p: Palette, stale: str, clock: str) -> list[Word]:
    """The header's words on the sampling: its interval, the graphs' window, paused, recording (and its
    trouble), an overdue sample, the clock."""
    st = v.status
    rec = st.recording
    bad = f"bold {p.bad}"
    segs: list[Word] = [(f"every {st.interval_s:g}s", "", 4, None),
                        (f"window {fmt_duration(v.window_s)}", "", 0, None)]
    if st.paused:
        segs.append(("❚❚ PAUSED", f"bold {p.warn}", 0, None))
    if rec is not None:
        segs.append((f"● REC {fmt_duration(rec.elapsed_s)}", bad, 0, None))
        if rec.dropped:
            segs.append((f"{rec.dropped} frames dropped: disk too slow", bad, 1, None))
    if st.record_error:
        segs.append((clean(st.record_error, 300), bad, 1, None))
    if stale:
        segs.append((stale, bad, 0, None))
    if clock:
        segs.append((clock, "", 0, None))
    return segs
