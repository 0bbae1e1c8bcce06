"""The Textual App: screens, key bindings and the refresh loop. Widgets live in ``gpuscope.widgets``."""

from __future__ import annotations

import argparse
import errno
import os
import signal
import sys
import termios
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import Footer, Static

from gpuscope.core.errors import GpuscopeError
from gpuscope.core.session import Session
from gpuscope.core.view import ViewState
from gpuscope.sources.recording import Recorder, RecordingError
from gpuscope.tui.feeders import LiveFeeder, ReplayFeeder
from gpuscope.tui.screens import GpuDetailScreen, HelpScreen, MarkerScreen
from gpuscope.widgets.findings_panel import FindingsPanel
from gpuscope.widgets.gpu_panel import GpuPanel
from gpuscope.widgets.gpu_table import GpuTable
from gpuscope.widgets.inference_panel import InferencePanel
from gpuscope.widgets.status_bar import StatusBar
from gpuscope.widgets.style import DIM, set_content
from gpuscope.widgets.timeline import Timeline
from gpuscope.widgets.topology_panel import TopologyPanel

WINDOWS = {"1m": 60.0, "10m": 600.0, "1h": 3600.0}
MIN_REDRAW_S = 0.25  # at most 4 redraws a second, whatever the sampling rate
GRAPH_S = 1.0  # graphs are redrawn about once a second

class GpuscopeApp(App[int]):
    TITLE = "gpuscope"
    CSS_PATH = "gpuscope.tcss"
    ENABLE_COMMAND_PALETTE = True
    AUTO_FOCUS = None  # nothing focused at start: panels look the same however fast the terminal is
    BINDINGS = [
        Binding("q", "quit", "quit", id="quit"),
        Binding("p", "pause", "pause/play", id="pause"),
        Binding("space", "pause", "pause/play", show=False, id="pause2"),
        Binding("r", "record", "record", id="record"),
        Binding("m", "marker", "marker", id="marker"),
        Binding("M", "marker_label", "marker+label", show=False, id="marker_label"),
        Binding("t", "focus_topology", "topology", id="topology"),
        Binding("f", "focus_findings", "findings", id="findings"),
        Binding("g", "focus_gpu", "next GPU", show=False, id="gpu"),
        Binding("d,enter", "detail", "detail", id="detail"),
        Binding("1,2,3,4,5,6,7,8", "", "", show=False),
        Binding("w", "cycle_window", "window", id="window"),
        Binding("c", "compact", "compact", id="compact"),
        Binding("question_mark,h", "help", "help", id="help"),
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

    def __init__(self, session: Session, feeder: Any, *, label: str, interval_s: float, window: str = "1m",
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
        self._dirty = False
        self._last_graph = 0.0
        self._last_redraw = 0.0
        self._rec_started = 0.0
        self._ppid = os.getppid()
        self.message_line = ""

    @property
    def _replay(self) -> bool:
        return isinstance(self.feeder, ReplayFeeder)

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
        with Horizontal(id="bottom"):
            yield TopologyPanel(id="topology")
            with Vertical(id="side"):
                yield Static(id="message")
        yield Footer()

    def on_mount(self) -> None:
        self._apply_layout()
        self.set_interval(1.0, self._watchdog)  # cheap: two tcgetattr calls
        try:
            signal.signal(signal.SIGHUP, lambda *_: self._on_sighup())
        except (ValueError, OSError):  # not the main thread (tests)
            pass
        if self.record_path and not self._replay:
            self._start_recording(self.record_path)
        if self.feeder is not None:
            self.feeder.start()
        self.refresh_view(force=True)
        self.call_after_refresh(self.refresh_view, True)

    def on_resize(self) -> None:
        self._apply_layout()
        self.call_after_refresh(self.refresh_view, True)  # panels size their bars and graphs to the new width

    def _apply_layout(self) -> None:
        w, h = self.size.width, self.size.height
        n = len(self.session.inventory.devices)
        compact = self.compact if self.compact is not None else (w < 100 or h < 8 * min(n, 4) + 14)
        self.query_one("#table").display = compact
        self.query_one("#grid").display = not compact
        grid = self.query_one("#grid", Grid)
        cols = 2 if (w >= 160 and n > 1) else 1
        grid.styles.grid_size_columns = cols
        self.query_one("#bottom").display = h >= 24 and not (compact and h < 30 and n > 4)

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
        if wait > 0:
            self.set_timer(wait, self._redraw_if_dirty)
        else:
            self._redraw_if_dirty()

    def _redraw_if_dirty(self) -> None:
        if self._dirty and not self.paused:
            self.refresh_view()
        elif self.paused:
            self._dirty = False

    def build_view(self, graphs: bool) -> ViewState:
        s = self.session
        frame = s.last_frame
        extra: dict[str, object] = {"interval": self.interval_s, "paused": self.paused}
        rec = s.recorder
        if rec is not None:
            extra["recording"] = True
            extra["rec_elapsed"] = time.monotonic() - self._rec_started
        if s.record_error:
            extra["record_error"] = s.record_error
        if self.origin_note:
            extra["replay_note"] = self.origin_note
        return ViewState(inventory=s.inventory, frame=frame, history=s.history, findings=s.findings.active,
                         window_s=self.window_s, now=frame.t if frame else 0.0, label=self.label, graphs=graphs,
                         extra=extra)

    def refresh_view(self, force: bool = False) -> None:
        self._dirty = False
        if not self.is_running or not self.screen_stack:
            return  # a late wake-up from a feeder thread while the app shuts down
        now = time.monotonic()
        self._last_redraw = now
        graphs = force or now - self._last_graph >= GRAPH_S
        if graphs:
            self._last_graph = now
        lock = getattr(self.feeder, "session_lock", None)
        if lock is not None:
            lock.acquire()
        try:
            v = self.build_view(graphs)
            screen = self.screen
            if isinstance(screen, GpuDetailScreen):
                screen.show(v)
                return
            self.query_one(StatusBar).show(v)
            self.query_one(FindingsPanel).show(v)
            if self.query_one("#table").display:
                self.query_one(GpuTable).show(v)
            else:
                for p in self.query(GpuPanel):
                    p.show(v)
            inference = self.query_one(InferencePanel)
            has_eps = bool(v.frame and v.frame.endpoints)
            if inference.display != has_eps:
                inference.display = has_eps
            if has_eps:
                inference.show(v)
            if self.query_one("#bottom").display:
                self.query_one(TopologyPanel).show(v)
            msg = self.message_line or ("" if has_eps else
                                        "No inference endpoint: add one with --endpoint URL (vLLM, SGLang, TGI, "
                                        "llama.cpp, TRT-LLM, LMDeploy) to see tok/s on the same time axis.")
            err = getattr(self.feeder, "error", None)
            if err:
                msg = err
            set_content(self.query_one("#message", Static),
                        Text(msg, style="yellow" if (self.message_line or err) else DIM))
            if self._replay:
                f = self.feeder
                self.query_one(Timeline).show_position(f.t0, f.t1, f.position, f.marks(), f.speed, f.playing)
        finally:
            if lock is not None:
                lock.release()

    @staticmethod
    def _terminal_hung_up() -> bool:
        """True when stdin or stderr is a terminal that hung up (EIO; ENOTTY: not a terminal, fine)."""
        for stream in (sys.__stdin__, sys.__stderr__):
            try:
                if stream is not None:
                    termios.tcgetattr(stream.fileno())
            except termios.error as e:
                if e.args[0] == errno.EIO:
                    return True
            except (OSError, ValueError):
                pass
        return False

    def _terminal_gone(self) -> None:
        """The terminal hung up. Textual's orderly exit writes to it and blocks for good once its writer
        thread has died on the dead terminal, so end the feeder and the recording (closed, complete) and
        leave now."""
        self.on_unmount()
        os._exit(0)

    def _on_sighup(self) -> None:
        if self._terminal_hung_up():
            self._terminal_gone()  # runs even while the loop is stuck writing to the dead terminal
        else:
            self.call_later(self.exit, 0)  # `kill -HUP` with the terminal still there: a normal exit

    def _watchdog(self) -> None:
        """Exit when the terminal went away (SSH drop): the terminal hung up, or the parent died."""
        if self._terminal_hung_up():
            self._terminal_gone()
        if os.getppid() != self._ppid:
            self.exit(0)

    # ----------------------------------------------------------------- actions
    def action_pause(self) -> None:
        if self._replay:
            self.feeder.toggle()
        else:
            self.paused = not self.paused
            self.refresh_view(force=True)
            if self.paused:
                self.query_one(StatusBar).show(self.build_view(False))

    def _start_recording(self, path: str) -> None:
        try:
            inv = self.session.inventory
            self.session.start_recording(Recorder(path, inv, command=sys.argv[:], interval_s=self.session.interval_s,
                                                  origin={"host": inv.host, "simulated": inv.simulated}))
            self._rec_started = time.monotonic()
            self.message_line = f"recording to {path}"
        except RecordingError as e:
            self.message_line = str(e)

    def action_record(self) -> None:
        if self._replay:
            self.message_line = "recording is not available during replay"
        elif self.session.recorder is not None:
            rec = self.session.stop_recording()
            self.message_line = f"recording stopped: {rec.frames} frames in {rec.path}" if rec else ""
        else:
            path = self.record_path or time.strftime("gpuscope-%Y%m%d-%H%M%S.jsonl.gz")
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
                f": {label}" if label else "") + ("" if self.session.recorder else " (not recording: press r)")
        self.refresh_view(force=True)

    def action_focus_topology(self) -> None:
        if self.query_one("#bottom").display:
            self.query_one(TopologyPanel).focus()
            self.refresh_view(force=True)

    def action_focus_findings(self) -> None:
        self.query_one(FindingsPanel).focus()
        self.refresh_view(force=True)

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

    def on_key(self, event: Any) -> None:
        if event.key in "12345678" and len(event.key) == 1:
            i = int(event.key) - 1
            if i < len(self.session.inventory.devices):
                if isinstance(self.screen, GpuDetailScreen):
                    self.pop_screen()
                self.push_screen(GpuDetailScreen(i))
                self.call_after_refresh(self.refresh_view, True)
                event.stop()

    def on_gpu_panel_opened(self, msg: GpuPanel.Opened) -> None:
        """A click on a GPU panel opens its detail view (mouse, where natural)."""
        if not isinstance(self.screen, GpuDetailScreen):
            self.push_screen(GpuDetailScreen(msg.index))
            self.call_after_refresh(self.refresh_view, True)

    def action_cycle_window(self) -> None:
        vals = list(WINDOWS.values())
        self.window_s = vals[(vals.index(self.window_s) + 1) % len(vals)] if self.window_s in vals else 60.0
        if self._replay:
            self.feeder.seek(self.feeder.position)
        self.refresh_view(force=True)

    def action_compact(self) -> None:
        cur = self.query_one("#table").display
        self.compact = not cur
        self._apply_layout()
        self.refresh_view(force=True)

    def action_help(self) -> None:
        self.push_screen(HelpScreen([b for b in self.BINDINGS if isinstance(b, Binding)]))

    def action_speed(self, d: int) -> None:
        if self._replay:
            self.feeder.faster(d > 0)

    def action_seek(self, s: int) -> None:
        if self._replay:
            self.feeder.step(s)

    def action_seek_edge(self, end: int) -> None:
        if self._replay:
            self.feeder.seek(self.feeder.t1 if end else self.feeder.t0)

    def action_jump(self, forward: int) -> None:
        if self._replay:
            self.feeder.jump_mark(bool(forward))

    def on_unmount(self) -> None:
        if self.feeder is not None:
            self.feeder.stop()
        self.session.stop_recording()


def check_terminal() -> None:

    if not sys.stdout.isatty():
        raise GpuscopeError("the live view needs a terminal; for a headless run use `gpuscope record -o FILE`")


def run_live(args: argparse.Namespace, open_source: Callable[..., Any]) -> int:
    check_terminal()
    src = open_source(args.simulate, pcie_mode=args.pcie_source, args=args)
    session = Session(src.inventory, interval_s=args.interval)
    app = GpuscopeApp(session, None, label=src.label, interval_s=args.interval, window=args.history,
                      compact=True if args.compact else None, record_path=args.record)
    app.feeder = LiveFeeder(src, session, args.interval, app.notify_update)
    app.run()
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


def run_replay(args: argparse.Namespace) -> int:

    from gpuscope.cli.report import open_or_fail

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
    app.run()
    return 0

