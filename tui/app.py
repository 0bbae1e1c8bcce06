"""The Textual App: screens, key bindings and the refresh loop. Widgets live in ``gpuscope.widgets``."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Static

from gpuscope.cli.report import open_or_fail
from gpuscope.core.errors import GpuscopeError
from gpuscope.core.session import FrameSink, Session
from gpuscope.core.text import clean
from gpuscope.core.view import RecordingStatus, StatusInfo, ViewState
from gpuscope.sources.recording import Recorder, RecordingError
from gpuscope.tui.commands import GpuscopeCommands
from gpuscope.tui.feeders import LiveFeeder, ReplayFeeder
from gpuscope.tui.hangup import exit_soon, terminal_gone, watch
from gpuscope.tui.layout import Plan, plan_layout
from gpuscope.tui.screens import FindingsScreen, GpuDetailScreen, HelpScreen, MarkerScreen
from gpuscope.tui.workers import Worker
from gpuscope.widgets.findings_panel import FindingsPanel
from gpuscope.widgets.fit import fit_words
from gpuscope.widgets.gpu_panel import GpuPanel
from gpuscope.widgets.gpu_table import GpuTable
from gpuscope.widgets.inference_panel import InferencePanel
from gpuscope.widgets.keybar import KeyBar
from gpuscope.widgets.processes_panel import ProcessesPanel, lines_wanted
from gpuscope.widgets.status_bar import StatusBar
from gpuscope.widgets.style import DIM, set_content
from gpuscope.widgets.textual_private import HookedApp
from gpuscope.widgets.timeline import Timeline
from gpuscope.widgets.topology_panel import TopologyPanel, legend_lines, matrix_columns, topology_lines

WINDOWS = {"1m": 60.0, "10m": 600.0, "1h": 3600.0}
MIN_REDRAW_S = 0.25  # at most 4 redraws a second, whatever the sampling rate
GRAPH_S = 1.0  # graphs are redrawn about once a second

W = TypeVar("W", bound=Widget)

class GpuscopeApp(HookedApp[int]):
    KEEP_CRASH = True  # an exception in a handler: kept in crash for run_app (textual_private.HookedApp)
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
        Binding("1,2,3,4,5,6,7,8", "", "detail of GPU0–GPU7", show=False),
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

    def __init__(self, session: Session, feeder: Worker | None, *, label: str, interval_s: float, window: str = "1m",
                 compact: bool | None = None, record_path: str | None = None, origin_note: str = ""):
        super().__init__()
        self.session = session
        self.feeder = feeder
        self.label = label
        self.interval_s = interval_s
        self.window_s = WINDOWS.get(window, 60.0)
        self.compact = compact
        self.record_path = record_path
        self.origin_note = origin_note
        self.paused = False
        self._legend_off = False  # the topology legend hidden with `a` (else shown where rows are left)
        self._procs_on = False  # the processes panel, toggled with `P` (hidden by default)
        self._procs_want = 0  # lines the processes panel wanted at the last layout
        self._plan: Plan | None = None
        self._n_findings = -1
        self._important = False
        self._seek_gen = 0  # the feeder's seek count at the last redraw: a new seek redraws the graphs
        self._dirty = False
        self._last_graph = 0.0
        self._last_redraw = 0.0
        self._rec_started = 0.0
        self._ppid = os.getppid()
        self.message_line = ""
        self._mark_said: str | None = None  # the mark label n/N put on the message line (a seek clears it)
        self._redraw_after_layout = False  # a redraw at the panels' new sizes is queued (_relayout)
        self.record_force = False  # --force: the first recording may replace an existing --record FILE
        self.hung_up = False  # the terminal went away (SIGHUP or the watchdog): callers must not start another app
        self._ui_loop: asyncio.AbstractEventLoop | None = None  # the loop the app runs on (on_mount)
        self._parts: dict[tuple[type[Widget], str | None], Widget] = {}  # see _part
        self._panels_found: list[GpuPanel] | None = None  # see _panels
        self._finishing: list[FrameSink] = []  # recordings stopped with r whose writer may still be busy

    @property
    def _replay(self) -> bool:
        return isinstance(self.feeder, ReplayFeeder)

    @property
    def _replayer(self) -> ReplayFeeder | None:
        return self.feeder if isinstance(self.feeder, ReplayFeeder) else None

    # ----------------------------------------------------------------- layout
    def compose(self) -> ComposeResult:
        yield StatusBar(id="status")
        if self._replay:
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
        if self._replay:
            return [("?", "help"), ("q", "quit"), ("space", "play"), ("←→", "seek"), ("n N", "mark"),
                    ("f", "findings"), ("d", "detail"), ("w", "window"), ("t", "topology"), ("c", "compact"),
                    ("+-", "speed"), ("P", "procs")]
        return [("?", "help"), ("q", "quit"), ("p", "pause"), ("f", "findings"), ("d", "detail"), ("t", "topology"),
                ("w", "window"), ("r", "record"), ("m", "marker"), ("c", "compact"), ("P", "procs")]

    def on_mount(self) -> None:
        self._ui_loop = asyncio.get_running_loop()
        self._apply_layout()
        self._watch_stop = watch(self._watchdog)  # its own thread, twice a second: two tcgetattr calls
        try:
            signal.signal(signal.SIGHUP, lambda *_: self._hang_up())
        except (ValueError, OSError):  # not the main thread (tests)
            pass
        if self.record_path and not self._replay:
            self._start_recording(self.record_path)
        if self.feeder is not None:
            self.feeder.start()
            if not self._replay:  # the clock shows whole minutes: say so when samples stop coming
                self.query_one(StatusBar).watch_stale = True
                self.set_interval(2.0, self._check_stale)
        self.refresh_view(force=True)
        self.call_after_refresh(self.refresh_view, True)

    def on_resize(self) -> None:
        # after the resize has reached every widget (App.size can still be the old one here): share the
        # rows out again (compact or panels, findings, topology), then redraw at the new width
        self.call_after_refresh(self._relayout)

    def _relayout(self) -> None:
        """Share the rows out again (a resize; inside a redraw: findings, a note line or processes came or
        went) and draw again once the panels have their new sizes, in the next layout pass: a redraw now
        draws at the old ones, and while paused no other redraw would come (a seek while paused left a
        blank row in every GPU panel)."""
        self._apply_layout()
        if not self._redraw_after_layout:  # one redraw for any number of layout changes in this one
            self._redraw_after_layout = True
            self.call_after_refresh(self.call_after_refresh, self._redraw_at_new_sizes)

    def _redraw_at_new_sizes(self) -> None:
        self._redraw_after_layout = False
        self.refresh_view(True)

    def _apply_layout(self) -> None:
        """Share the rows out (tui/layout.py: GPUs first, then findings, topology, graphs)."""
        w, h = self.size.width, self.size.height
        if not w or not h:
            return
        v = self.build_view(False)
        n = len(self.session.inventory.devices)
        topo = self.query_one(TopologyPanel)
        cw = w - 4
        forms = ("matrix", "pairs")
        need = tuple(len(topology_lines(v, cw, form=f)) if (f == "pairs" or matrix_columns(n, cw) is not None)
                     and n >= 2 else 0 for f in forms) if n else (0, 0)
        has_eps = bool(v.frame and v.frame.endpoints)
        chrome = 2 + (1 if self._replay else 0) + ((len(v.frame.endpoints) + 3) if has_eps and v.frame else 0)
        important = bool(self.message_line or getattr(self.feeder, "error", None))
        chrome += 1 if important else 0  # the note line
        self._important = important
        findings = self.query_one(FindingsPanel)
        any_nvlink = any(d.nvlinks_active for d in self.session.inventory.devices)
        self._procs_want = lines_wanted(v.frame) if self._procs_on else 0
        plan = plan_layout(w, h, n, len(v.findings), topo_lines=need, chrome=chrome, compact=self.compact,
                           panel_rows=11 if any_nvlink else 9, findings_focused=findings.has_focus,
                           topo_focused=topo.has_focus, legend_lines=len(legend_lines(cw)),
                           procs_lines=self._procs_want)
        procs = self.query_one(ProcessesPanel)
        procs.display = plan.procs_lines > 0
        procs.budget = plan.procs_lines
        self._plan = plan
        self._n_findings = len(v.findings)
        self.query_one("#table").display = plan.compact
        grid = self.query_one("#grid", Grid)
        grid.display = not plan.compact
        grid.styles.grid_size_columns = plan.cols
        fits = plan.compact is False and self.compact is None
        grid.set_class(fits, "fill")
        findings.display = plan.findings_lines > 0
        findings.budget = plan.findings_lines
        findings.styles.max_height = plan.findings_rows if findings.has_focus else None
        self.query_one("#bottom").display = plan.topology >= 0
        if plan.topology >= 0:
            topo.form = forms[plan.topology]
            topo.legend = plan.legend and not self._legend_off
        content_w = max((ln.cell_len for ln in topology_lines(v, cw, legend_on=topo.legend, form=topo.form)), default=0)
        topo.avail_width = cw
        topo.styles.width = content_w + 4
        side_w = w - (content_w + 4)
        self.query_one("#side").display = side_w >= 24
        self.query_one("#note").display = important  # a message or error gets a whole line: never cut narrow

    # ----------------------------------------------------------------- refresh
    class DataReady(Message):
        """New data is in the session. At most one is ever pending: frames are never queued."""

    def notify_update(self) -> None:
        """Called from feeder threads (thread-safe): wake the UI unless a wake-up is already pending.

        No polling timer: an idle or paused UI costs nothing between frames."""
        if not self._dirty:
            self._dirty = True
            self.post_message(self.DataReady())

    def on_gpuscope_app_data_ready(self, _msg: DataReady) -> None:
        wait = MIN_REDRAW_S - (time.monotonic() - self._last_redraw)
        if wait > 0 and getattr(self.feeder, "seeks", 0) == self._seek_gen:  # a seek's answer is not held back
            self.set_timer(wait, self._redraw_if_dirty)
        else:
            self._redraw_if_dirty()

    def _redraw_if_dirty(self) -> None:
        if self._dirty and not self.paused:
            self.refresh_view()
        elif self.paused:
            self._dirty = False

    def build_view(self, graphs: bool) -> ViewState:
        """The view of this instant, read under the session lock (history, findings and frame agree)."""
        s = self.session
        with s.lock:
            frame = s.last_frame
            rec = s.recorder
            recording = None
            if rec is not None:
                recording = RecordingStatus(path=str(getattr(rec, "path", "")),
                                            elapsed_s=time.monotonic() - self._rec_started,
                                            frames=rec.frames, dropped=rec.dropped)
            status = StatusInfo(interval_s=self.interval_s, paused=self.paused, recording=recording,
                                record_error=s.record_error, origin_note=self.origin_note,
                                tick_errors=s.tick_errors)
            replay = self.feeder.status() if isinstance(self.feeder, ReplayFeeder) else None
            return ViewState(inventory=s.inventory, frame=frame, history=s.history, findings=s.findings.active,
                             window_s=self.window_s, now=frame.t if frame else 0.0, label=self.label,
                             graphs=graphs, status=status, replay=replay)

    def refresh_view(self, force: bool = False) -> None:
        self._dirty = False
        if not self.is_running or not self.screen_stack:
            return  # a late wake-up from a feeder thread while the app shuts down
        now = time.monotonic()
        self._last_redraw = now
        seek_gen = getattr(self.feeder, "seeks", 0)
        graphs = force or now - self._last_graph >= GRAPH_S or seek_gen != self._seek_gen
        self._seek_gen = seek_gen
        if graphs:
            self._last_graph = now
        with self.session.lock:  # the one lock: the feeder cannot change what the panels are reading
            v = self.build_view(graphs)
            screen = self.screen
            if isinstance(screen, GpuDetailScreen):
                screen.show(v)
                return
            if len(v.findings) != self._n_findings:
                self._relayout()  # findings lines come out of the same rows as everything else
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
                self._relayout()
            if has_eps:
                inference.show(v)
            if self._procs_on and lines_wanted(v.frame) != self._procs_want:
                self._relayout()  # processes came or went: the panel's rows are shared out again
            procs = self._part(ProcessesPanel)
            if procs.display:
                procs.show(v)
            if self._part(Horizontal, "#bottom").display:
                self._part(TopologyPanel).show(v)
            msg = self.message_line or ("" if has_eps else self._no_endpoint_hint())
            err = self.feeder.error if self.feeder is not None else None
            if err:
                msg = err
            hint = "" if has_eps else self._no_endpoint_hint()
            set_content(self._part(Static, "#message"), Text(hint, style=DIM))
            note = self._part(Static, "#note")
            if bool(self.message_line or err) != self._important:
                self._relayout()
            if note.display:
                set_content(note, fit_words(Text(f" {clean(msg, 500)}", style="yellow"), max(10, self.size.width)))
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

    def _check_stale(self) -> None:
        if self.paused or not self.screen_stack or self.screen is not self.screen_stack[0]:
            return
        bar = self.query_one(StatusBar)
        if bar.stale_changed(self.interval_s):
            bar.show(self.build_view(False))

    def _watchdog(self) -> None:
        """Exit when the terminal went away (SSH drop): the parent died or stdin is gone."""
        if terminal_gone(self._ppid):
            self._hang_up()

    def _hang_up(self) -> None:
        """The terminal is gone (SIGHUP on the loop, or the watchdog's thread): close the recording, then
        leave. Safe from either thread."""
        if self.hung_up:
            return
        self.hung_up = True
        self.session.stop_recording()  # the recording is closed cleanly before anything else
        exit_soon()  # Textual's shutdown can hang without a terminal: the process ends anyway
        loop = self._ui_loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self.exit, 0)

    # ----------------------------------------------------------------- actions
    def action_pause(self) -> None:
        if (r := self._replayer) is not None:
            r.toggle()
        else:
            self.paused = not self.paused
            self.refresh_view(force=True)
            if self.paused:
                self.query_one(StatusBar).show(self.build_view(False))

    def _start_recording(self, path: str) -> None:
        try:
            inv = self.session.inventory
            force = self.record_force and path == self.record_path and self.session.recorder is None
            self.record_force = False
            self.session.start_recording(Recorder(path, inv, command=sys.argv[:], interval_s=self.session.interval_s,
                                                  force=force,
                                                  origin={"host": inv.host, "simulated": inv.simulated}))
            self._rec_started = time.monotonic()
            self.message_line = f"recording to {os.path.abspath(path)}"
        except RecordingError as e:
            self.message_line = str(e)

    def action_record(self) -> None:
        if self._replay:
            self.message_line = "recording is not available during replay"
        elif self.session.recorder is not None:
            rec = self.session.stop_recording(wait=False)  # the writer finishes the file; the UI goes on
            if rec is not None:
                self._finishing.append(rec)
                n = getattr(rec, "accepted", rec.frames)
                self.message_line = f"recording stopped: {n} frames in {os.path.abspath(str(getattr(rec, 'path', '?')))}"
        else:
            path = self.record_path if self.record_path and not os.path.lexists(self.record_path) else fresh_name()
            self._start_recording(path)
        self.refresh_view(force=True)

    def action_marker(self) -> None:
        self._marker("")

    def action_marker_label(self) -> None:
        self.push_screen(MarkerScreen(), lambda label: self._marker(label) if label is not None else None)

    def _marker(self, label: str) -> None:
        if self._replay:
            self.message_line = "markers are dropped while watching live or recording"
        else:
            ev = self.session.add_marker(label)
            self.message_line = f"marker dropped at {time.strftime('%H:%M:%S', time.localtime(ev.t))}" + (
                f": {ev.text}" if label else "") + ("" if self.session.recorder else " (not recording: press r)")
        self.refresh_view(force=True)

    def action_focus_topology(self) -> None:
        if self.query_one("#bottom").display:
            self.query_one(TopologyPanel).focus()
            self._apply_layout()  # focused: its legend is shown
            self.refresh_view(force=True)
        else:
            self.message_line = "no room for topology here: enlarge the terminal, or run gpuscope topo"
            self._apply_layout()
            self.refresh_view(force=True)

    def action_toggle_processes(self) -> None:
        """Show or hide the processes panel; it takes rows after the GPUs and the first findings line."""
        self._procs_on = not self._procs_on
        self._apply_layout()
        if self._procs_on and not self.query_one(ProcessesPanel).display:
            self.message_line = "no room for processes here: enlarge the terminal, or open a GPU's detail (1-8)"
            self._apply_layout()
        self.refresh_view(force=True)

    def action_toggle_legend(self) -> None:
        self._legend_off = not self._legend_off
        self._apply_layout()
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

    def _detail_index(self) -> int:
        return self.focused.index if isinstance(self.focused, GpuPanel) else 0

    def action_detail(self) -> None:
        if isinstance(self.screen, GpuDetailScreen):
            self.pop_screen()
        else:
            self.push_screen(GpuDetailScreen(self._detail_index()))
            self.call_after_refresh(self.refresh_view, True)

    def open_detail(self, i: int) -> None:
        """Show GPU ``i``'s detail view (replacing another GPU's)."""
        if isinstance(self.screen, GpuDetailScreen):
            self.pop_screen()
        self.push_screen(GpuDetailScreen(i))
        self.call_after_refresh(self.refresh_view, True)

    def on_key(self, event: Any) -> None:
        if event.key in "12345678" and len(event.key) == 1 and not isinstance(self.screen, ModalScreen):
            i = int(event.key) - 1
            if i < len(self.session.inventory.devices):
                self.open_detail(i)
                event.stop()

    def on_gpu_panel_opened(self, msg: GpuPanel.Opened) -> None:
        """A click on a GPU panel opens its detail view (mouse, where natural)."""
        if not isinstance(self.screen, GpuDetailScreen):
            self.push_screen(GpuDetailScreen(msg.index))
            self.call_after_refresh(self.refresh_view, True)

    def action_cycle_window(self) -> None:
        vals = list(WINDOWS.values())
        self.window_s = vals[(vals.index(self.window_s) + 1) % len(vals)] if self.window_s in vals else 60.0
        if (r := self._replayer) is not None:
            r.request_seek(r.target)
        self.refresh_view(force=True)

    def action_compact(self) -> None:
        cur = self.query_one("#table").display
        self.compact = not cur
        self._apply_layout()
        if cur and self._plan is not None and self._plan.compact:  # panels asked for, and they do not fit
            self.compact = None
            self.message_line = "no room for GPU panels at this size: enlarge the terminal"
        self.call_after_refresh(self.refresh_view, True)
        self.refresh_view(force=True)

    def _no_endpoint_hint(self) -> str:
        """What the inference panel says without an endpoint: a replay cannot add one (it was not recorded)."""
        if self._replay:
            return "No inference endpoint in this recording (record with --endpoint URL to keep tok/s beside the GPUs)."
        return ("No inference endpoint: add one with --endpoint URL (vLLM, SGLang, TGI, llama.cpp, TRT-LLM, "
                "LMDeploy) to see tok/s on the same time axis.")

    REPLAY_ONLY = frozenset({"faster", "slower", "fwd", "back", "fwd60", "back60", "start", "end", "next", "prev"})
    LIVE_ONLY = frozenset({"record", "marker", "marker_label"})

    def action_help(self) -> None:
        """The keys that do something here: replay's seek/speed/marks only in replay, record only live."""
        hide = self.LIVE_ONLY if self._replay else self.REPLAY_ONLY
        self.push_screen(HelpScreen([b for b in self.BINDINGS if isinstance(b, Binding) and b.id not in hide]))

    def on_descendant_focus(self) -> None:
        self._relayout_on_focus()

    def on_descendant_blur(self) -> None:
        self._relayout_on_focus()

    def _relayout_on_focus(self) -> None:
        """Focusing the findings panel gives it spare rows (full text); the topology panel, its legend."""
        if self.screen_stack and self.screen is self.screen_stack[0]:
            self.call_after_refresh(self._apply_layout)
            self.call_after_refresh(self.refresh_view, True)

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
        stop = getattr(self, "_watch_stop", None)
        if stop is not None:
            stop.set()
        if self.feeder is not None:
            self.feeder.stop()
        self.session.stop_recording()
        for rec in self._finishing:
            rec.close()  # waits for a writer still finishing a recording stopped with r


def run_app(app: GpuscopeApp) -> None:
    """Run the App; an exception that escaped one of its handlers is raised again once it has closed."""
    app.run()
    if app.crash is not None:
        raise app.crash
    if app.return_code:  # Textual's own handling (no hooks: textual_private.ACTIVE is off) printed the traceback
        raise RuntimeError("the screen stopped on an error (Textual printed it above)")


def fresh_name(directory: str = ".", now: float | None = None) -> str:
    """A recording name that does not exist yet: ``gpuscope-YYYYmmdd-HHMMSS.jsonl.gz``, with ``-2``, ``-3``…
    appended when that second's name is taken (``r`` never overwrites)."""
    stamp = time.strftime("gpuscope-%Y%m%d-%H%M%S", time.localtime(now))
    for k in range(1, 10000):
        name = os.path.join(directory, f"{stamp}{'' if k == 1 else f'-{k}'}.jsonl.gz")
        if not os.path.lexists(name):
            return name if directory != "." else os.path.basename(name)
    raise GpuscopeError("cannot find a free name for the recording")  # pragma: no cover


def check_terminal() -> None:
    if not sys.stdout.isatty():
        raise GpuscopeError("the live view needs a terminal; for a headless run use `gpuscope record -o FILE`")


def run_live(args: argparse.Namespace, open_source: Callable[..., Any]) -> int:
    check_terminal()
    if args.record and not getattr(args, "force", False) and os.path.lexists(args.record):
        raise GpuscopeError(f"{args.record} exists; refusing to overwrite it (use --force)")
    src = open_source(args.simulate, pcie_mode=args.pcie_source, args=args)
    session = Session(src.inventory, interval_s=args.interval)
    app = GpuscopeApp(session, None, label=src.label, interval_s=args.interval, window=args.history,
                      compact=True if args.compact else None, record_path=args.record)
    app.record_force = bool(getattr(args, "force", False))
    app.feeder = LiveFeeder(src, session, args.interval, app.notify_update)
    run_app(app)
    rec_err = session.record_error
    if rec_err:
        sys.stderr.write(f"gpuscope: {rec_err}\n")
    return 0


def demo_path() -> Path:
    base = resources.files("gpuscope.recordings")
    names = sorted(str(p) for p in base.iterdir() if str(p).endswith(".jsonl.gz"))
    if not names:

        raise GpuscopeError("the bundled demo recording is missing from this installation")
    return Path(names[0])


def damage_line(problems: list[str]) -> str:
    """The message line a replay opens with when its file was damaged or cut off ("" when whole)."""
    if not problems:
        return ""
    more = f" (+{len(problems) - 1} more: gpuscope summary)" if len(problems) > 1 else ""
    return clean(f"damaged or incomplete recording: {problems[0]}{more}", 300)


def run_replay(args: argparse.Namespace) -> int:
    path = getattr(args, "file", None) or demo_path()
    rec = open_or_fail(path)
    check_terminal()
    interval = float(rec.header.get("interval_s") or 1.0)
    session = Session(rec.inventory, interval_s=interval, history_s=3600.0)
    note = "SIMULATED recording" if rec.simulated else "real recording"
    if rec.problems:
        note += " — " + "; ".join(rec.problems)
    app = GpuscopeApp(session, None, label="REPLAY", interval_s=interval, compact=True if args.compact else None,
                      origin_note=f"{Path(path).name} ({note})")
    app.feeder = ReplayFeeder(rec, session, app.notify_update, speed=args.speed, window_s=lambda: app.window_s)
    app.message_line = damage_line(rec.problems)  # on screen, not only in the header's note (cut when narrow)
    run_app(app)
    return 0

