"""The main screen's keys as data: its bindings, the footer's hints and what the help screen lists."""

from __future__ import annotations

from textual.binding import Binding, BindingType

DETAIL_KEYS = 8  # the digit keys 1–8 open GPU0–GPU7's detail view

BINDINGS: list[BindingType] = [
    Binding("q", "quit", "quit", id="quit"),
    Binding("ctrl+z", "suspend_process", "suspend", show=False, id="suspend"),  # as in a shell: fg resumes
    Binding("p", "pause", "pause/play", id="pause"),
    Binding("space", "pause", "pause/play", show=False, id="pause2"),
    Binding("r", "record", "record", id="record"),
    Binding("m", "marker", "marker", id="marker"),
    Binding("M", "marker_label", "marker+label", show=False, id="marker_label"),
    Binding("t", "focus_topology", "topology", id="topology"),
    Binding("f", "focus_findings", "findings", id="findings"),
    Binding("g", "focus_gpu", "next GPU", show=False, id="gpu"),
    Binding("d,enter", "detail", "detail", id="detail"),
    *(Binding(str(k + 1), f"detail_of({k})", f"detail of GPU{k}", show=False, id=f"detail{k + 1}")
      for k in range(DETAIL_KEYS)),
    Binding("w", "cycle_window", "window", id="window"),
    Binding("c", "compact", "compact", id="compact"),
    Binding("question_mark,h", "help", "help", id="help"),
    Binding("a", "toggle_legend", "topology legend on/off", show=False, id="legend"),
    Binding("P", "toggle_processes", "processes panel on/off", show=False, id="processes"),
    Binding("plus,equals_sign", "speed(1)", "faster", show=False, id="faster"),
    Binding("minus", "speed(-1)", "slower", show=False, id="slower"),
    Binding("right", "seek(10)", "+10s", show=False, id="fwd"),
    Binding("left", "seek(-10)", "-10s", show=False, id="back"),
    Binding("shift+right,L", "seek(60)", "+1m", show=False, id="fwd60"),
    Binding("shift+left,H", "seek(-60)", "-1m", show=False, id="back60"),
    Binding("home", "seek_edge(0)", "start", show=False, id="start"),
    Binding("end", "seek_edge(1)", "end", show=False, id="end"),
    Binding("n", "jump(1)", "next mark", show=False, id="next"),
    Binding("N", "jump(0)", "prev mark", show=False, id="prev"),
]
# the help screen shows the digit keys as one line (ids detail1…detail8 are remappable one by one)
DIGITS_HELP = Binding(",".join(str(k + 1) for k in range(DETAIL_KEYS)), "", "detail of GPU0–GPU7", show=False)


REPLAY_ONLY = frozenset({"faster", "slower", "fwd", "back", "fwd60", "back60", "start", "end", "next", "prev"})
LIVE_ONLY = frozenset({"record", "marker", "marker_label"})


def hints(replay: bool) -> list[tuple[str, str]]:
    """Footer hints, most important first (as many as fit are shown)."""
    if replay:
        return [("?", "help"), ("q", "quit"), ("space", "play"), ("←→", "seek"), ("n N", "mark"),
                ("f", "findings"), ("d", "detail"), ("w", "window"), ("t", "topology"), ("c", "compact"),
                ("+-", "speed"), ("P", "procs")]
    return [("?", "help"), ("q", "quit"), ("p", "pause"), ("f", "findings"), ("d", "detail"), ("t", "topology"),
            ("w", "window"), ("r", "record"), ("m", "marker"), ("c", "compact"), ("P", "procs")]


def help_bindings(bindings: list[BindingType], replay: bool) -> list[Binding]:
    """The keys that do something here: replay's seek/speed/marks only in replay, record only live; the digit
    keys as one line."""
    hide = LIVE_ONLY if replay else REPLAY_ONLY
    shown: list[Binding] = []
    for b in bindings:
        if not isinstance(b, Binding) or b.id in hide:
            continue
        if b.id and b.id.startswith("detail") and b.id != "detail":
            if b.id == "detail1":
                shown.append(DIGITS_HELP)
            continue
        shown.append(b)
    return shown
