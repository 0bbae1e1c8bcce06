"""The main screen's App: what is on screen, the keys, and the refresh loop.

It delegates the panel sizes to :class:`~gpuscope.tui.layout_controller.LayoutController`, when to redraw to
:class:`~gpuscope.tui.redraw.RedrawScheduler`, and the hang-up and Textual wiring to
:class:`~gpuscope.tui.base.MonitorApp`; the command line's wiring (``run_live``, ``run_replay``) is in
``tui/run.py``. Widgets live in ``gpuscope.widgets``.
"""

from __future__ import annotations

import contextvars
from typing import TYPE_CHECKING, TypeVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.reactive import var
from textual.widget import Widget
from textual.widgets import Static

from gpuscope.core.findings import sort_findings
from gpuscope.core.session import Session
from gpuscope.core.text import clean
from gpuscope.core.view import RecordingStatus, StatusInfo, ViewState
from gpuscope.tui.base import MonitorApp
from gpuscope.tui.commands import GpuscopeCommands
from gpuscope.tui.feeders import ReplayFeeder
from gpuscope.tui.layout_controller import LayoutController
from gpuscope.tui.recording_controller import RecordingController
from gpuscope.tui.redraw import RedrawScheduler
from gpuscope.tui.screens import ConfirmScreen, FindingsScreen, GpuDetailScreen, HelpScreen, MarkerScreen
from gpuscope.tui.workers import Worker
from gpuscope.widgets.findings_panel import FindingsPanel
from gpuscope.widgets.fit import fit_words
from gpuscope.widgets.gpu_panel import GpuPanel
from gpuscope.widgets.gpu_table import GpuTable
from gpuscope.widgets.inference_panel import InferencePanel
from gpuscope.widgets.keybar import KeyBar
from gpuscope.widgets.processes_panel import ProcessesPanel
from gpuscope.widgets.status_bar import StatusBar
from gpuscope.widgets.style import ANSI_PALETTE, DEFAULT_THEME, Palette, set_content, theme_palette
from gpuscope.widgets.textual_private import call_from_thread_soon, painting
from gpuscope.widgets.timeline import Timeline
from gpuscope.widgets.topology_panel import TopologyPanel

if TYPE_CHECKING:
    from gpuscope.tui.probe_controller import LinkProbe, ProbePrep

WINDOWS = {"1m": 60.0, "10m": 600.0, "1h": 3600.0}
DETAIL_KEYS = 8  # the digit keys 1–8 open GPU0–GPU7's detail view

W = TypeVar("W", bound=Widget)


class GpuscopeApp(MonitorApp[int]):
    KEEP_CRASH = True  # an exception in a handler: kept in crash for run_app (textual_private.HookedApp)
    HANG_UP_RESULT = 0
    TITLE = "gpuscope"
    CSS_PATH = "gpuscope.tcss"
    ENABLE_COMMAND_PALETTE = True
    COMMANDS = App.COMMANDS | {GpuscopeCommands}
    AUTO_FOCUS = None  # nothing focused at start: panels look the same however fast the terminal is
    BINDINGS = [
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

    # The toggles: setting one redraws what it changes (watch_*); init=False: nothing runs at mount.
    paused: var[bool] = var(False, init=False)  # live: the display stopped (replay: the feeder pauses)
    compact: var[bool | None] = var(None, init=False, always_update=True)  # None: as the size allows
    window_s: var[float] = var(60.0, init=False)  # the graphs' history window, seconds
    show_processes: var[bool] = var(False, init=False)  # the processes panel (P)

    def __init__(self, session: Session, feeder: Worker | None, *, label: str, interval_s: float, window: str = "1m",
                 compact: bool | None = None, record_path: str | None = None, origin_note: str = "",
                 origin_name: str = ""):
        super().__init__()
        self.session = session
        self.feeder = feeder
        self.label = label
        self.interval_s = interval_s
        self.set_reactive(GpuscopeApp.window_s, WINDOWS.get(window, 60.0))
        self.set_reactive(GpuscopeApp.compact, compact)
        self.origin_note = origin_note
        self.origin_name = origin_name
        self.message_line = ""
        self.layout_control = LayoutController(self)
        self.redraw = RedrawScheduler()
        self.recording = RecordingController(session, record_path)  # --force: run_live sets recording.force
        self._mark_said: str | None = None  # the mark label n/N put on the message line (a seek clears it)
        # what shows per-process SM %, as plain values the sampler's thread reads (tui/run.py read_on_demand):
        # the processes panel (set with show_processes), the GPU detail views open (counted by GpuDetailScreen)
        self.processes_shown = False
        self.details_open = 0
        self._parts: dict[tuple[type[Widget], str | None], Widget] = {}  # see _part
        self._panels_found: list[GpuPanel] | None = None  # see _panels
        self.chrome_palette: Palette = ANSI_PALETTE  # the header's, note line's and timeline's colours (theme)
        # the link probe of the palette (tui/probe_controller.py): NVML of the live source, for the links' state
        self._link_probe: LinkProbe | None = None  # made on the first probe: the live screen loads no probe code
        self._wake_context: contextvars.Context | None = None  # the App's handlers' context (notify_update)

    @property
    def replay(self) -> bool:
        """Whether this screen replays a recording (else it watches live or a remote host)."""
        return isinstance(self.feeder, ReplayFeeder)

    @property
    def _replayer(self) -> ReplayFeeder | None:
        return self.feeder if isinstance(self.feeder, ReplayFeeder) else None

    # ----------------------------------------------------------------- screen
    def compose(self) -> ComposeResult:
        yield StatusBar(id="status")
        if self.replay:
            yield Timeline(id="timeline")
        yield FindingsPanel(id="findings")
        yield InferencePanel(id="inference")
        with VerticalScroll(id="gpus"):
            yield GpuTable(id="table")
            with Grid(id="grid"):
                for d in self.session.inventory.devices:
                    yield GpuPanel(d.index, id=f"gpu{d.index}")
        yield ProcessesPanel(id="procs")
        with Horizontal(id="bottom"):
            yield TopologyPanel(id="topology")
            with Vertical(id="side"):
                yield Static(id="message")
        yield Static(id="note")
        yield KeyBar(self._hints(), id="keys")

    def _hints(self) -> list[tuple[str, str]]:
        """Footer hints, most important first (as many as fit are shown)."""
        if self.replay:
            return [("?", "help"), ("q", "quit"), ("space", "play"), ("←→", "seek"), ("n N", "mark"),
                    ("f", "findings"), ("d", "detail"), ("w", "window"), ("t", "topology"), ("c", "compact"),
                    ("+-", "speed"), ("P", "procs")]
        return [("?", "help"), ("q", "quit"), ("p", "pause"), ("f", "findings"), ("d", "detail"), ("t", "topology"),
                ("w", "window"), ("r", "record"), ("m", "marker"), ("c", "compact"), ("P", "procs")]

    def on_mount(self) -> None:
        self.layout_control.apply()
        self.watch_hang_up()
        self._wake_context = contextvars.copy_context()  # a wake-up's redraw runs as this App's handlers do
        self.theme_changed_signal.subscribe(self, self.apply_theme)
        if self.theme != DEFAULT_THEME:
            self.apply_theme()
        path = self.recording.record_path
        if path and not self.replay:
            self.message_line = self.recording.start(path)
        if self.feeder is not None:
            self.feeder.start()
            if not self.replay:  # the clock shows whole minutes: say so when samples stop coming
                self.query_one(StatusBar).watch_stale = True
                self.set_interval(2.0, self._check_stale)
        self.refresh_view(force=True)
        self.call_after_refresh(self.refresh_view, True)

    def on_resize(self) -> None:
        # after the resize has reached every widget (App.size can still be the old one here): share the
        # rows out again (compact or panels, findings, topology), then redraw at the new width
        self.call_after_refresh(self.layout_control.relayout)

    # ----------------------------------------------------------------- refresh
    class DataReady(Message):
        """New data is in the session. At most one is ever pending: frames are never queued."""

    def notify_update(self) -> None:
        """Called from feeder threads (thread-safe): wake the UI unless a wake-up is already pending.

        No polling timer: an idle or paused UI costs nothing between frames. Once mounted, the wake-up is a
        callback on the event loop (widgets/textual_private.py ``call_from_thread_soon``), else a message."""
        if self.redraw.mark_dirty() and not call_from_thread_soon(self, self._ui_loop, self._wake_context,
                                                                  self._data_ready):
            self.post_message(self.DataReady())

    def on_gpuscope_app_data_ready(self, _msg: DataReady) -> None:
        self._data_ready()

    def _data_ready(self) -> None:
        """New data is in the session: redraw now, or once the redraw throttle allows."""
        hold = self.redraw.hold_s(getattr(self.feeder, "seeks", 0))  # a seek's answer is not held back
        if hold > 0:
            self.set_timer(hold, self._redraw_if_dirty)
        else:
            self._redraw_if_dirty()

    def _redraw_if_dirty(self) -> None:
        if self.redraw.dirty and not self.paused:
            self.refresh_view()
        elif self.paused:
            self.redraw.drop()

    def build_view(self, graphs: bool) -> ViewState:
        """The view of this instant, read under the session lock (history, findings and frame agree)."""
        s = self.session
        with s.lock:
            frame = s.last_frame
            rec = s.recorder
            recording = None
            if rec is not None:
                recording = RecordingStatus(path=str(getattr(rec, "path", "")),
                                            elapsed_s=self.recording.elapsed_s(),
                                            frames=rec.frames, dropped=rec.dropped)
            status = StatusInfo(interval_s=self.interval_s, paused=self.paused, recording=recording,
                                record_error=s.record_error, origin_note=self.origin_note,
                                origin_name=self.origin_name,
                                tick_errors=s.tick_errors)
            replay = self.feeder.status() if isinstance(self.feeder, ReplayFeeder) else None
            findings = s.findings.active
            probe = self._link_probe
            if probe is not None and probe.findings:  # the last link probe's findings, until the next probe
                findings = sort_findings(findings + probe.findings)
            return ViewState(inventory=s.inventory, frame=frame, history=s.history, findings=findings,
                             window_s=self.window_s, now=frame.t if frame else 0.0, label=self.label,
                             graphs=graphs, status=status, replay=replay,
                             probe=probe.result if probe is not None else None)

    def refresh_view(self, force: bool = False) -> None:
        """Draw the view of this instant (``force``: the graphs too, whenever they were last drawn); what changed
        is composited at the end, at once (widgets/textual_private.py ``painting``)."""
        if not self.is_running or not self.screen_stack:
            self.redraw.drop()
            return  # a late wake-up from a feeder thread while the app shuts down
        with painting():
            self._draw_view(force)

    def _draw_view(self, force: bool) -> None:
        graphs = self.redraw.start(force, getattr(self.feeder, "seeks", 0))
        with self.session.lock:  # the one lock: the feeder cannot change what the panels are reading
            v = self.build_view(graphs)
            screen = self.screen
            if isinstance(screen, GpuDetailScreen):
                screen.show(v)
                return
            err = self.feeder.error if self.feeder is not None else None
            layout = self.layout_control
            if layout.outdated(v, bool(self.message_line or err)):
                layout.relayout()  # findings, the note line or processes take rows from everything else
            self._part(StatusBar).show(v)
            self._part(FindingsPanel).show(v)
            if self._part(GpuTable).display:
                self._part(GpuTable).show(v)
            else:
                panels = self._panels()
                cap = min((p.size.height for p in panels if p.display and p.size.height), default=None)
                for p in panels:
                    p.rows_cap = cap  # the shortest panel's rows: every GPU draws the same graphs
                    p.show(v)
            inference = self._part(InferencePanel)
            has_eps = bool(v.frame and v.frame.endpoints)
            if inference.display != has_eps:
                inference.display = has_eps
                layout.relayout()
            if has_eps:
                inference.show(v)
                if inference.wanted != layout.inference_want:  # its lines came or went: share the rows again
                    layout.relayout()
            procs = self._part(ProcessesPanel)
            if procs.display:
                procs.show(v)
            if self._part(Horizontal, "#bottom").display:
                self._part(TopologyPanel).show(v)
            hint = "" if has_eps else no_endpoint_hint(self.replay)
            msg = err or self.message_line or hint
            chrome = self.chrome_palette
            set_content(self._part(Static, "#message"), Text(hint, style=chrome.dim))
            note = self._part(Static, "#note")
            if note.display:
                set_content(note, fit_words(Text(f" {clean(msg, 500)}", style=chrome.warn), max(10, self.size.width)))
            if v.replay is not None:
                r = v.replay
                self._part(Timeline).show_position(r.t0, r.t1, r.position, list(r.marks), r.speed, r.playing)

    def _part(self, kind: type[W], selector: str | None = None) -> W:
        """A widget of the main screen (composed once, never replaced), found once: a query walks the DOM
        and matches CSS, and the screen is refreshed every second."""
        key = (kind, selector)
        got = self._parts.get(key)
        if got is None:
            main = self.screen_stack[0]
            got = self._parts[key] = main.query_one(selector, kind) if selector else main.query_one(kind)
        return got  # type: ignore[return-value]

    def _panels(self) -> list[GpuPanel]:
        if self._panels_found is None:
            self._panels_found = list(self.screen_stack[0].query(GpuPanel))
        return self._panels_found

    def apply_theme(self, _theme: object = None) -> None:
        """The chrome (header, note line, hint, timeline) in the theme's colours: ``$success``, ``$warning``,
        ``$error``, ``$accent`` (widgets/style.py ``theme_palette``); under Textual's default theme, the
        terminal's ANSI colours as before. Runs when the theme changes (never per refresh)."""
        self.chrome_palette = ANSI_PALETTE if self.theme == DEFAULT_THEME else theme_palette(self.get_css_variables())
        main = self.screen_stack[0] if self.screen_stack else None
        if main is None:
            return
        for bar in main.query(StatusBar):
            bar.palette = self.chrome_palette
        for line in main.query(Timeline):
            line.palette = self.chrome_palette
        self.refresh_view(force=True)

    def _check_stale(self) -> None:
        if self.paused or not self.screen_stack or self.screen is not self.screen_stack[0]:
            return
        bar = self.query_one(StatusBar)
        if bar.stale_changed(self.interval_s):
            bar.show(self.build_view(False))

    def before_hang_up(self) -> None:
        """The terminal is gone: the recording is closed cleanly before anything else."""
        self.session.stop_recording()

    # ----------------------------------------------------------------- toggles
    def watch_paused(self, paused: bool) -> None:
        if not self.is_running:
            return
        self.refresh_view(force=True)
        if paused:
            self.query_one(StatusBar).show(self.build_view(False))

    def watch_compact(self) -> None:
        if not self.is_running:
            return
        self.layout_control.apply()
        self.call_after_refresh(self.refresh_view, True)
        self.refresh_view(force=True)

    def watch_window_s(self) -> None:
        if not self.is_running:
            return
        if (r := self._replayer) is not None:
            r.request_seek(r.target)  # the replay thread rebuilds the history for the new window
        self.refresh_view(force=True)

    def watch_show_processes(self, on: bool) -> None:
        """The processes panel takes rows after the GPUs and the first findings line."""
        self.processes_shown = on  # a plain flag the sampler's thread reads (tui/run.py read_on_demand)
        if not self.is_running:
            return
        self.layout_control.apply()
        if on and not self._part(ProcessesPanel).display:
            self.message_line = "no room for processes here: enlarge the terminal, or open a GPU's detail (1-8)"
            self.layout_control.apply()
        self.refresh_view(force=True)

    # ----------------------------------------------------------------- actions
    def action_pause(self) -> None:
        if (r := self._replayer) is not None:
            r.toggle()
        else:
            self.paused = not self.paused

    def action_compact(self) -> None:
        cur = self.query_one("#table").display
        self.compact = not cur
        plan = self.layout_control.plan
        if cur and plan is not None and plan.compact:  # panels asked for, and they do not fit
            self.message_line = "no room for GPU panels at this size: enlarge the terminal"
            self.compact = None

    def action_cycle_window(self) -> None:
        vals = list(WINDOWS.values())
        self.window_s = vals[(vals.index(self.window_s) + 1) % len(vals)] if self.window_s in vals else 60.0

    def action_toggle_processes(self) -> None:
        self.show_processes = not self.show_processes

    def action_toggle_legend(self) -> None:
        self.layout_control.legend_off = not self.layout_control.legend_off
        self.layout_control.apply()
        self.refresh_view(force=True)

    def action_record(self) -> None:
        if self.replay:
            self.message_line = "recording is not available during replay"
        elif (said := self.recording.toggle()) is not None:
            self.message_line = said
        self.refresh_view(force=True)

    def action_marker(self) -> None:
        self._marker("")

    def action_marker_label(self) -> None:
        self.push_screen(MarkerScreen(), lambda label: self._marker(label) if label is not None else None)

    def _marker(self, label: str) -> None:
        if self.replay:
            self.message_line = "markers are dropped while watching live or recording"
        else:
            self.message_line = self.recording.marker(label)
        self.refresh_view(force=True)

    # ----------------------------------------------------------------- the link probe (palette)
    class ProbeStep(Message):
        """A step of the link probe ended on its worker thread: ``stage`` prepare or measure."""

        def __init__(self, stage: str, value: object, error: str | None):
            super().__init__()
            self.stage = stage
            self.value = value
            self.error = error

    def _say(self, line: str) -> None:
        self.message_line = line
        self.refresh_view(force=True)

    def action_probe_links(self) -> None:
        """The palette's "Probe links": the plan first (on a worker: CUDA is loaded there), then a modal."""
        probe = self.link_probe
        if (why := probe.refusal(self.replay)) is not None:
            self._say(why)
            return
        probe.start("prepare", lambda _stop: probe.prepare(),
                    lambda value, error: self.post_message(self.ProbeStep("prepare", value, error)))
        self._say("link probe: preparing the plan…")

    @property
    def link_probe(self) -> LinkProbe:
        """The palette's link probe (tui/probe_controller.py), made on first use."""
        if self._link_probe is None:
            from gpuscope.tui.probe_controller import LinkProbe

            self._link_probe = LinkProbe(self.session,
                                         lambda: getattr(getattr(self.feeder, "source", None), "nvml", None))
        return self._link_probe

    @link_probe.setter
    def link_probe(self, probe: LinkProbe) -> None:
        self._link_probe = probe

    def on_gpuscope_app_probe_step(self, msg: ProbeStep) -> None:
        from gpuscope.core.probe import ProbeResult
        from gpuscope.tui.probe_controller import ProbePrep

        if msg.error is not None:
            self._say(f"link probe: {msg.error}")
        elif msg.stage == "prepare" and isinstance(msg.value, ProbePrep):
            prep = msg.value
            self._say("link probe: waiting for confirmation (enter: run, esc: cancel)")
            self.push_screen(ConfirmScreen(prep.lines(), "run the probe"), lambda ok: self._probe_confirmed(prep, ok))
        elif msg.stage == "measure" and isinstance(msg.value, ProbeResult):
            self.message_line = self.link_probe.finished(msg.value)
            self.layout_control.relayout()  # the topology panel gained lines, findings came
            self.refresh_view(force=True)

    def _probe_confirmed(self, prep: ProbePrep, ok: bool | None) -> None:
        if not ok:
            self._say("link probe cancelled")
            return
        if prep.busy:  # others use the GPUs: asked again, in their words
            busy = prep.busy_text()
            self.push_screen(ConfirmScreen([f"Other processes use the GPUs ({busy}).",
                                            "The probe adds load to them while it runs. Probe anyway?"],
                                           "probe anyway", title="Link probe: GPUs in use"),
                             lambda again: self._probe_run(prep) if again else self._say(
                                 f"not probed: other processes use the GPUs ({busy})"))
            return
        self._probe_run(prep)

    def _probe_run(self, prep: ProbePrep) -> None:
        probe = self.link_probe
        if probe.running:
            self._say("a link probe is running already")
            return
        probe.start("measure", lambda stop: probe.measure(prep, stop),
                    lambda value, error: self.post_message(self.ProbeStep("measure", value, error)))
        what = "SIMULATED link probe" if prep.scenario else "link probe (adds load)"
        self._say(f"{what} running: about {max(1, round(prep.plan.seconds))} s")

    def action_focus_topology(self) -> None:
        if self.query_one("#bottom").display:
            self.query_one(TopologyPanel).focus()
        else:
            self.message_line = "no room for topology here: enlarge the terminal, or run gpuscope topo"
        self.layout_control.apply()  # focused: its legend is shown; a message: the note line
        self.refresh_view(force=True)

    def action_focus_findings(self) -> None:
        """Every finding with its full text, on its own screen (the panel shows one line each)."""
        from gpuscope.widgets.findings_panel import findings_text

        self.push_screen(FindingsScreen(findings_text(self.build_view(False))))  # build_view takes the lock

    def action_focus_gpu(self) -> None:
        panels = list(self.query(GpuPanel))
        if not panels or not self.query_one("#grid").display:
            return
        cur = self.focused
        k = panels.index(cur) + 1 if cur in panels else 0
        panels[k % len(panels)].focus()

    def action_detail(self) -> None:
        if isinstance(self.screen, GpuDetailScreen):
            self.pop_screen()
        else:
            self.push_screen(GpuDetailScreen(self.focused.index if isinstance(self.focused, GpuPanel) else 0))
            self.call_after_refresh(self.refresh_view, True)

    def open_detail(self, i: int) -> None:
        """Show GPU ``i``'s detail view (replacing another GPU's)."""
        if isinstance(self.screen, GpuDetailScreen):
            self.pop_screen()
        self.push_screen(GpuDetailScreen(i))
        self.call_after_refresh(self.refresh_view, True)

    def action_detail_of(self, i: int) -> None:
        """A digit key: GPU ``i``'s detail view (from the main screen or another GPU's detail; a modal
        screen such as the help or a marker's label takes the keys itself)."""
        self.open_detail(i)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """A digit key without its GPU does nothing (the key goes on as if unbound)."""
        if action == "detail_of":
            i = parameters[0] if parameters else -1
            return isinstance(i, int) and 0 <= i < len(self.session.inventory.devices)
        return True

    def on_gpu_panel_opened(self, msg: GpuPanel.Opened) -> None:
        """A click on a GPU panel opens its detail view (mouse, where natural)."""
        if not isinstance(self.screen, GpuDetailScreen):
            self.push_screen(GpuDetailScreen(msg.index))
            self.call_after_refresh(self.refresh_view, True)

    REPLAY_ONLY = frozenset({"faster", "slower", "fwd", "back", "fwd60", "back60", "start", "end", "next", "prev"})
    LIVE_ONLY = frozenset({"record", "marker", "marker_label"})

    def action_help(self) -> None:
        """The keys that do something here: replay's seek/speed/marks only in replay, record only live; the
        digit keys as one line."""
        hide = self.LIVE_ONLY if self.replay else self.REPLAY_ONLY
        shown: list[Binding] = []
        for b in self.BINDINGS:
            if not isinstance(b, Binding) or b.id in hide:
                continue
            if b.id and b.id.startswith("detail") and b.id != "detail":
                if b.id == "detail1":
                    shown.append(self.DIGITS_HELP)
                continue
            shown.append(b)
        self.push_screen(HelpScreen(shown))

    def on_descendant_focus(self) -> None:
        self.layout_control.focus_moved()

    def on_descendant_blur(self) -> None:
        self.layout_control.focus_moved()

    def action_speed(self, d: int) -> None:
        if (r := self._replayer) is not None:
            r.faster(d > 0)

    def action_seek(self, s: int) -> None:
        if (r := self._replayer) is not None:
            r.request_seek(r.target + s)  # decoded on the replay thread, never here
            self._forget_mark_label()

    def action_seek_edge(self, end: int) -> None:
        if (r := self._replayer) is not None:
            r.request_seek(r.t1 if end else r.t0)
            self._forget_mark_label()

    def _forget_mark_label(self) -> None:
        """A seek leaves the mark that n/N named: its label ("+4s phase: idle") stayed on screen at 34 s,
        in another phase, until the next n/N."""
        said = self._mark_said
        if said is not None and self.message_line == said:
            self.message_line = ""
            self.refresh_view(force=True)
        self._mark_said = None

    def action_jump(self, forward: int) -> None:
        if (r := self._replayer) is not None:
            said = r.jump_mark(bool(forward))  # the mark's label on screen: the timeline only shows a tick
            self.message_line = said if said is not None else f"no {'later' if forward else 'earlier'} mark"
            self._mark_said = self.message_line
            self.refresh_view()

    def on_unmount(self) -> None:
        """The App owns its feeder thread: stop it (which closes the source and its threads), then end
        every recording (their writers drain and join)."""
        self.stop_hang_up_watch()
        self._wake_context = None  # a late wake-up posts a message, which a closed App drops
        if self._link_probe is not None:
            self._link_probe.stop()  # a probe still running stops between two figures, its buffers freed
        if self.feeder is not None:
            self.feeder.stop()
        self.recording.close()  # waits for a writer still finishing a recording stopped with r



def no_endpoint_hint(replay: bool) -> str:
    """What the inference panel says without an endpoint: a replay cannot add one (it was not recorded)."""
    if replay:
        return "No inference endpoint in this recording (record with --endpoint URL to keep tok/s beside the GPUs)."
    return ("No inference endpoint: add one with --endpoint URL (vLLM, SGLang, TGI, llama.cpp, TRT-LLM, "
            "LMDeploy) to see tok/s on the same time axis.")
