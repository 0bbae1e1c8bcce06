"""gpuscope's own commands in the command palette (ctrl+p): every key's action, found by name."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from textual.command import DiscoveryHit, Hit, Hits, Provider


def palette_commands(app: Any) -> list[tuple[str, str, Callable[[], Any]]]:
    """(name, help, callback) for the app's state: record, marker, window, compact, topology, the link probe
    (refused in replay, saying so), each GPU's detail, and in replay speed and seek."""
    run = app.run_action
    out: list[tuple[str, str, Callable[[], Any]]] = [
        ("Pause / play", "stop or resume the display (p, space)", partial(run, "pause")),
        ("Cycle window 1m / 10m / 1h", "history shown in the graphs (w)", partial(run, "cycle_window")),
        ("Compact table / GPU panels", "one row per GPU or a panel each (c)", partial(run, "compact")),
        ("Topology panel", "focus it; arrows pick a GPU pair (t)", partial(run, "focus_topology")),
        ("Topology legend", "show or hide the path legend (a)", partial(run, "toggle_legend")),
        ("Processes panel", "show or hide every GPU's processes: PID, user, memory, SM % (P)",
         partial(run, "toggle_processes")),
        ("Findings", "every finding with its full text (f)", partial(run, "focus_findings")),
        ("Help", "every key (?)", partial(run, "help")),
        ("Probe links (adds load)",
         "not available in replay" if app.replay else
         "measure host↔device and GPU↔GPU bandwidth, beside each link's typical figure (asks first)",
         partial(run, "probe_links")),
    ]
    if not app.replay:
        out += [("Record start / stop", "write frames to a recording file (r)", partial(run, "record")),
                ("Marker", "drop a marker now (m)", partial(run, "marker")),
                ("Marker with a label", "drop a labelled marker (M)", partial(run, "marker_label"))]
    else:
        out += [("Replay faster", "double the speed (+)", partial(run, "speed(1)")),
                ("Replay slower", "halve the speed (-)", partial(run, "speed(-1)")),
                ("Seek +10 s", "(→)", partial(run, "seek(10)")), ("Seek −10 s", "(←)", partial(run, "seek(-10)")),
                ("Seek +1 min", "(shift+→, L)", partial(run, "seek(60)")),
                ("Seek −1 min", "(shift+←, H)", partial(run, "seek(-60)")),
                ("Seek to start", "(home)", partial(run, "seek_edge(0)")),
                ("Seek to end", "(end)", partial(run, "seek_edge(1)")),
                ("Next marker or finding", "(n)", partial(run, "jump(1)")),
                ("Previous marker or finding", "(N)", partial(run, "jump(0)"))]
    if not app.replay:
        out += group_probe_commands(app)
    for d in app.session.inventory.devices:
        out.append((f"GPU{d.index} detail", f"{d.name}: every metric over the window ({d.index + 1})",
                    partial(app.open_detail, d.index)))
    return out


def group_probe_commands(app: Any) -> list[tuple[str, str, Callable[[], Any]]]:
    """"Probe the links of <group>" for each serving group of the last frame that holds GPUs here: its GPUs' host
    links and the pairs among them (``gpuscope probe --group``'s plan)."""
    from gpuscope.core.groups import gpus_text, group_label

    session = app.session
    with session.lock:
        frame = session.last_frame
    have = {d.index for d in session.inventory.devices}
    out: list[tuple[str, str, Callable[[], Any]]] = []
    for g in frame.groups if frame is not None else ():
        gpus = sorted(set(g.gpus) & have)
        if not g.local or not gpus:
            continue
        label = group_label(g)
        pairs = len(gpus) * (len(gpus) - 1) // 2
        out.append((f"Probe the links of {label}",
                    f"host↔device of {gpus_text(gpus)}" + (f" and the {pairs} pair{'s' if pairs > 1 else ''} among "
                                                          "them" if pairs else "") + " (adds load; asks first)",
                    partial(app.probe_group_links, label)))
    return out


class GpuscopeCommands(Provider):
    async def discover(self) -> Hits:
        for name, help_, cb in palette_commands(self.app):
            yield DiscoveryHit(name, cb, help=help_)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, help_, cb in palette_commands(self.app):
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), cb, help=help_)
