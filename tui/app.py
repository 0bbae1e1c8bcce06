"""The main screen's App: what is on screen, the keys, and the refresh loop.

It delegates the panel sizes to :class:`~gpuscope.tui.layout_controller.LayoutController`, when to redraw to
:class:`~gpuscope.tui.redraw.RedrawScheduler`, and the hang-up and Textual wiring to
:class:`~gpuscope.tui.base.MonitorApp`; the command line's wiring (``run_live``, ``run_replay``) is in
``tui/run.py``. Widgets live in ``gpuscope.widgets``.
"""

from __future__ import annotations

from typing import TypeVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.containers import Grid, Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Static

from gpuscope.core.findings import sort_findings
from gpuscope.core.session import Session
from gpuscope.core.text import clean
from gpuscope.core.view import RecordingStatus, StatusInfo, ViewState
from gpuscope.tui.commands import GpuscopeCommands
from gpuscope.tui.detail_keys import DetailKeys
from gpuscope.tui.feeders import ReplayFeeder
from gpuscope.tui.keys import BINDINGS, help_bindings, hints
from gpuscope.tui.layout_controller import LayoutController
from gpuscope.tui.probe_keys import ProbeKeys
from gpuscope.tui.recording_controller import RecordingController
from gpuscope.tui.redraw import RedrawScheduler
from gpuscope.tui.replay_keys import ReplayKeys
from gpuscope.tui.screens import FindingsScreen, GpuDetailScreen, HelpScreen, MarkerScreen
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
from gpuscope.widgets.timeline import Timeline
from gpuscope.widgets.topology_panel import TopologyPanel

WINDOWS = {"1m": 60.0, "10m": 600.0, "1h": 3600.0}

W = TypeVar("W", bound=Widget)


class GpuscopeApp(ProbeKeys, ReplayKeys, DetailKeys):
    KEEP_CRASH = True  # an exception in a handler: kept in crash for run_app (textual_private.HookedApp)
    HANG_UP_RESULT = 0
    layout_control: LayoutController
    TITLE = "gpuscope"
    CSS_PATH = "gpuscope.tcss"
    ENABLE_COMMAND_PALETTE = True
    COMMANDS = App.COMMANDS | {GpuscopeCommands}
    AUTO_FOCUS = None  # nothing focused at start: panels look the same however fast the terminal is
    BINDINGS = BINDINGS

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
        # what shows per-process SM %, as plain values the sampler's thread reads (tui/run.py read_on_demand):
        # the processes panel (set with show_processes), the GPU detail views open (counted by GpuDetailScreen)
        self.processes_shown = False
        self.details_open = 0
        self._parts: dict[tuple[type[Widget], str | None], Widget] = {}  # see _part
        self._panels_found: list[GpuPanel] | None = None  # see _panels
        self.chrome_palette: Palette = ANSI_PALETTE  # the header's, note line's and timeline's colours (theme)

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
        return hints(self.replay)

    def on_mount(self) -> None:
        self.layout_control.apply()
        self.watch_hang_up()
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

        No polling timer: an idle or paused UI costs nothing between frames."""
        if self.redraw.mark_dirty():
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
                             probe=(probe.result if probe is not None else None) or getattr(self.feeder, "probe", None))

    def refresh_view(self, force: bool = False) -> None:
        """Draw the view of this instant (``force``: the graphs too, whenever they were last drawn)."""
        if not self.is_running or not self.screen_stack:
            self.redraw.drop()
            return  # a late wake-up from a feeder thread while the app shuts down
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
                cap = min((h for p in panels if p.display and (h := p.size.height)), default=None)
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

    def action_help(self) -> None:
        """The keys that do something here (tui/keys.py ``help_bindings``)."""
        self.push_screen(HelpScreen(help_bindings(self.BINDINGS, self.replay)))

    def on_descendant_focus(self) -> None:
        self.layout_control.focus_moved()

    def on_descendant_blur(self) -> None:
        self.layout_control.focus_moved()

    def on_unmount(self) -> None:
        """The App owns its feeder thread: stop it (which closes the source and its threads), then end
        every recording (their writers drain and join)."""
        self.stop_hang_up_watch()
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
