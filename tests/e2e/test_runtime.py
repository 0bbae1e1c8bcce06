"""Runtime: tick errors (logged, counted, shown, sampling goes on), the recorder's writer thread, the
one session lock, logging configuration and the one-line internal error. No fixed sleeps: every wait
polls for its condition with a deadline."""

from __future__ import annotations

import errno
import gzip
import json
import logging
import threading
import time

import pytest
from helpers import run_frames, sim_source

from gpuscope.cli import logs
from gpuscope.cli import main as cli_main
from gpuscope.core.errors import SHOWN, GpuscopeError, one_line
from gpuscope.core.session import Session, TickErrors, run_ticks
from gpuscope.outputs.recorder import Recorder
from gpuscope.sources import recording as recording_mod
from gpuscope.sources.recording import open_recording
from gpuscope.tui.app import GpuscopeApp
from gpuscope.tui.feeders import LiveFeeder
from gpuscope.widgets.status_bar import StatusBar
from gpuscope.widgets.textual_private import ACTIVE


def until(cond, timeout: float = 10.0, step: float = 0.01) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(step)
    return bool(cond())


@pytest.fixture
def log_file(tmp_path):
    """The gpuscope logger writing to a file (as ``--log-file`` does), removed after the test."""
    path = tmp_path / "gpuscope.log"
    logs.configure(logs.LogConfig(str(path), logging.INFO), terminal=False)
    yield path
    logs.reset()


class FaultySource:
    """The simulated source, its virtual clock one second further each tick; ``sample`` raises on the
    chosen (0-based) ticks."""

    def __init__(self, scenario: str, fail_on: set[int]):
        self.src = sim_source(scenario)
        self.inventory = self.src.inventory
        self.label = "SIMULATED"
        self.fail_on = fail_on
        self.ticks = 0
        self.closed = False

    def sample(self):
        k = self.ticks
        self.ticks += 1
        self.src.nvml.clock.now = float(k)
        if k in self.fail_on:
            raise RuntimeError(f"injected fault on tick {k}")
        return self.src.sample()

    def close(self) -> None:
        self.closed = True
        self.src.close()


# ------------------------------------------------------------------ tick errors
@pytest.mark.parametrize("errors,text", [
    (TickErrors(), ""),
    (TickErrors().add(ValueError("boom")), "1 sampling error, last: ValueError: boom"),
    (TickErrors().add(ValueError("a")).add(KeyError("gpu 3")), "2 sampling errors, last: KeyError: 'gpu 3'"),
    (TickErrors().add(RuntimeError()), "1 sampling error, last: RuntimeError"),
])
def test_tick_errors_text(errors, text):
    assert errors.text() == text


@pytest.mark.parametrize("exc,line", [
    (ValueError("bad value"), "ValueError: bad value"),
    (ValueError("first line\nsecond line"), "ValueError: first line"),
    (OSError(), "OSError"),
    (ValueError("x" * 300), "ValueError: " + "x" * 147 + "…"),
])
def test_one_line(exc, line):
    assert one_line(exc) == line


@pytest.mark.parametrize("fail_on", [set(), {0}, {1, 3}, {0, 1, 2, 3, 4}])
def test_run_ticks_goes_on_after_a_failing_tick(fail_on, log_file):
    src = FaultySource("mixed-4", fail_on)
    session = Session(src.inventory, interval_s=0.001)
    stop = threading.Event()
    got: list[float] = []

    def on_frame(frame):
        got.append(session.ingest(frame).t)
        if src.ticks >= 8:
            stop.set()

    def on_error(e):
        session.tick_failed(e)
        if src.ticks >= 8:
            stop.set()

    run_ticks(src.sample, on_frame, 0.001, stop, on_error=on_error)
    assert session.tick_errors.count == len(fail_on)
    assert session.frames_seen == len(got) == 8 - len(fail_on)
    text = log_file.read_text()
    assert text.count("sampling tick failed") == len(fail_on)
    if fail_on:
        assert f"injected fault on tick {max(fail_on)}" in session.tick_errors.last
        assert "Traceback" in text and "RuntimeError: injected fault" in text


class _FakeTime(threading.Event):
    """A clock and a stop event whose wait() moves the clock instead of sleeping."""

    def __init__(self, cost: float = 0.0):
        super().__init__()
        self.now, self.cost = 0.0, cost

    def clock(self) -> float:
        return self.now

    def wait(self, timeout=None):
        self.now += timeout or 0.0
        return self.is_set()


@pytest.mark.parametrize("interval,until,cost,times", [
    (1.0, 5.0, 0.0, [0, 1, 2, 3, 4, 5]),  # --duration 5: a frame at each second and one at the end
    (10.0, 2.0, 0.0, [0, 2]),  # an interval longer than the duration: it still ends at 2 s, not 10 s
    (2.0, 5.0, 0.0, [0, 2, 4, 5]),  # the last frame at the deadline itself
    (1.0, 2.5, 0.3, [0, 1, 2, 2.5]),  # slow samples (0.3 s each) keep the fixed schedule
    (1.0, 0.5, 0.0, [0, 0.5]),
])
def test_run_ticks_ends_at_its_deadline(interval, until, cost, times):
    ft = _FakeTime()
    got: list[float] = []

    def sample():
        got.append(ft.now)
        ft.now += cost
        return None

    run_ticks(sample, lambda f: None, interval, ft, clock=ft.clock, until=until)
    assert got == pytest.approx(times)


def test_run_ticks_without_on_error_raises():
    src = FaultySource("mixed-4", {2})
    with pytest.raises(RuntimeError, match="tick 2"):
        run_ticks(src.sample, lambda f: None, 0.001, threading.Event())


def test_a_failing_source_does_not_flood_the_log(log_file):
    session = Session(sim_source("mixed-4").inventory)
    for _ in range(250):
        session.tick_failed(ValueError("every tick"))
    text = log_file.read_text()
    assert session.tick_errors.count == 250
    assert text.count("Traceback") == 0  # tick_failed was not given a live traceback here
    assert text.count("sampling tick failed") == 5 + 2  # 5 first ones, then the 100th and 200th


async def test_live_tick_error_is_counted_shown_and_sampling_goes_on(log_file):
    src = FaultySource("mixed-4", {2, 3, 5})
    session = Session(src.inventory, interval_s=0.05)
    app = GpuscopeApp(session, None, label="SIMULATED", interval_s=0.05)
    app.feeder = LiveFeeder(src, session, 0.05, app.notify_update)
    async with app.run_test(size=(160, 40)) as pilot:
        assert until(lambda: session.frames_seen >= 8, 20)  # frames keep coming after the faults
        assert session.tick_errors.count == 3
        assert app.feeder.alive and app.feeder.error is None
        await pilot.pause()
        app.refresh_view(force=True)
        bar = str(app.query_one(StatusBar).render())
        assert "3 sampling errors, last: RuntimeError: injected fault on tick 5" in bar
    assert src.closed and not app.feeder.alive  # the App stopped its feeder, which closed the source
    text = log_file.read_text()
    assert text.count("sampling tick failed") == 3
    assert "gpuscope-sampler" in text  # the thread is named in each line
    assert "Traceback (most recent call last)" in text and "injected fault on tick 2" in text


# ------------------------------------------------------------------ recorder writer thread
class Disk:
    """``os.fsync`` replaced by a gate: closed, the writer thread blocks in fsync like a stalled disk."""

    def __init__(self, monkeypatch):
        self.open = threading.Event()
        self.open.set()
        self.waiting = threading.Event()
        self.fail: OSError | None = None
        monkeypatch.setattr(recording_mod.os, "fsync", self.fsync)

    def fsync(self, fd: int) -> None:
        if self.fail is not None:
            raise self.fail
        if not self.open.is_set():
            self.waiting.set()
            self.open.wait(30)


def test_stalled_disk_never_blocks_ingest_nor_the_session_lock(tmp_path, monkeypatch):
    disk = Disk(monkeypatch)
    src = sim_source("mixed-4")
    frames = run_frames(src, 0, 9)
    session = Session(src.inventory)
    path = tmp_path / "r.jsonl.gz"
    rec = Recorder(path, src.inventory, flush_s=0.0, queue_frames=3)
    session.start_recording(rec)
    disk.open.clear()
    session.ingest(frames[0])
    assert disk.waiting.wait(10)  # the writer is stuck in fsync with frame 0
    t0 = time.monotonic()
    done = threading.Event()

    def sampler():
        for f in frames[1:]:
            session.ingest(f)
        done.set()

    threading.Thread(target=sampler).start()
    assert done.wait(5)
    got_lock = session.lock.acquire(timeout=1.0)  # what the UI takes to build a view
    assert got_lock
    session.lock.release()
    assert time.monotonic() - t0 < 5
    assert rec.dropped == 9 - 3  # 3 queued, the rest counted, never lost silently
    disk.open.set()
    session.stop_recording()
    r = open_recording(path)
    assert r.n_frames == 4 and rec.frames == 4
    with gzip.open(path, "rt") as f:
        end = [json.loads(x) for x in f][-1]
    assert end == {"type": "end", "t": frames[3].t, "frames": 4, "dropped": 6}


def test_write_error_on_the_writer_thread_surfaces_and_the_session_goes_on(tmp_path, monkeypatch):
    disk = Disk(monkeypatch)
    src = sim_source("mixed-4")
    session = Session(src.inventory)
    session.start_recording(Recorder(tmp_path / "r.jsonl.gz", src.inventory, flush_s=0.0))
    disk.fail = OSError(errno.ENOSPC, "No space left on device")
    frames = iter(run_frames(src, 0, 200))
    session.ingest(next(frames))
    assert until(lambda: (session.ingest(next(frames)) and session.recorder is None), 10)
    assert "No space left on device" in (session.record_error or "")
    n = session.frames_seen
    session.ingest(next(frames))
    assert session.frames_seen == n + 1  # sampling goes on without the recording


def test_close_drains_every_queued_frame(tmp_path):
    src = sim_source("a6000-tp2-pcie-gen1")
    frames = run_frames(src, 0, 99)
    path = tmp_path / "r.jsonl.gz"
    rec = Recorder(path, src.inventory, fsync=False)
    for f in frames:
        rec.write(f, wait=True)
    rec.close()
    assert rec.dropped == 0 and rec.frames == 100 and rec.closed
    assert not rec._thread.is_alive()  # close() joined the writer
    assert open_recording(path).n_frames == 100


async def test_threads_stop_at_exit(tmp_path):
    src = FaultySource("mixed-4", set())
    session = Session(src.inventory, interval_s=0.05)
    app = GpuscopeApp(session, None, label="SIMULATED", interval_s=0.05, record_path=str(tmp_path / "r.jsonl.gz"))
    app.feeder = LiveFeeder(src, session, 0.05, app.notify_update)
    async with app.run_test(size=(120, 40)):
        assert until(lambda: session.frames_seen >= 3, 20)
        rec = session.recorder
        assert rec is not None
    assert rec.closed and session.recorder is None
    assert until(lambda: not [t.name for t in threading.enumerate() if t.name in ("gpuscope-sampler",
                                                                              "gpuscope-recorder")], 5)
    assert open_recording(tmp_path / "r.jsonl.gz").complete


# ------------------------------------------------------------------ logging configuration
@pytest.mark.parametrize("log_file_opt,env,expect", [
    (None, {}, (None, logging.INFO)),
    ("/tmp/a.log", {}, ("/tmp/a.log", logging.INFO)),
    (None, {"GPUSCOPE_LOG": "/tmp/b.log"}, ("/tmp/b.log", logging.INFO)),
    (None, {"GPUSCOPE_LOG": "/tmp/b.log:debug"}, ("/tmp/b.log", logging.DEBUG)),
    (None, {"GPUSCOPE_LOG": "/tmp/b.log", "GPUSCOPE_LOG_LEVEL": "warning"}, ("/tmp/b.log", logging.WARNING)),
    (None, {"GPUSCOPE_LOG": "/tmp/b.log:ERROR", "GPUSCOPE_LOG_LEVEL": "debug"}, ("/tmp/b.log", logging.ERROR)),
    (None, {"GPUSCOPE_LOG": "/tmp/odd:name.log"}, ("/tmp/odd:name.log", logging.INFO)),  # not a level: kept
    ("/tmp/a.log", {"GPUSCOPE_LOG": "/tmp/b.log:debug"}, ("/tmp/a.log", logging.DEBUG)),  # the option wins
    (None, {"GPUSCOPE_LOG_LEVEL": "debug"}, (None, logging.DEBUG)),
])
def test_log_config(log_file_opt, env, expect):
    cfg = logs.log_config(log_file_opt, env)
    assert (cfg.path, cfg.level) == expect


def test_bad_log_level_is_a_one_line_error():
    with pytest.raises(GpuscopeError, match="unknown log level 'loud'"):
        logs.log_config(None, {"GPUSCOPE_LOG_LEVEL": "loud"})


@pytest.mark.parametrize("terminal", [True, False])
def test_terminal_gets_one_line_warnings_only_when_headless(terminal, tmp_path, capsys):
    path = tmp_path / "x.log"
    logs.configure(logs.LogConfig(str(path), logging.DEBUG), terminal=terminal)
    try:
        log = logging.getLogger("gpuscope.test")
        log.debug("a detail")
        try:
            raise ValueError("inner")
        except ValueError:
            log.exception("something failed")
        log.error("already shown by the front end", extra=SHOWN)
    finally:
        logs.reset()
    err = capsys.readouterr().err
    if terminal:
        assert err == "gpuscope: error: something failed\n"  # one line: no traceback, no SHOWN record
    else:
        assert err == ""  # a TUI owns the terminal
    text = path.read_text()
    assert "a detail" in text and "Traceback" in text and "already shown" in text


def test_thread_exceptions_are_logged_not_printed(log_file, capsys):
    t = threading.Thread(target=lambda: 1 / 0, name="gpuscope-test-thread")
    t.start()
    t.join()
    assert capsys.readouterr().err == ""
    text = log_file.read_text()
    assert "thread gpuscope-test-thread died: ZeroDivisionError" in text and "Traceback" in text


# ------------------------------------------------------------------ main: one error policy
def _boom(cmd, args):
    raise ValueError("boom\nwith a second line")


@pytest.mark.parametrize("where", ["option", "before-command", "env"])
def test_internal_error_is_one_line_and_logged(where, tmp_path, monkeypatch, capsys):
    path = tmp_path / "g.log"
    monkeypatch.setattr(cli_main, "_dispatch", _boom)
    argv = {"option": ["scenarios", "--log-file", str(path)], "before-command": ["--log-file", str(path), "scenarios"],
            "env": ["scenarios"]}[where]
    if where == "env":
        monkeypatch.setenv("GPUSCOPE_LOG", f"{path}:debug")
    try:
        rc = cli_main.main(argv)
    finally:
        logs.reset()
    err = capsys.readouterr().err
    assert rc == 1
    assert err == f"gpuscope: internal error: ValueError: boom (details in {path})\n"
    text = path.read_text()
    assert "internal error: ValueError: boom" in text and "Traceback (most recent call last)" in text
    assert "with a second line" in text


def test_internal_error_without_log_file_says_how_to_get_details(monkeypatch, capsys):
    monkeypatch.delenv("GPUSCOPE_LOG", raising=False)
    monkeypatch.setattr(cli_main, "_dispatch", _boom)
    try:
        rc = cli_main.main(["scenarios"])
    finally:
        logs.reset()
    assert rc == 1
    assert capsys.readouterr().err == ("gpuscope: internal error: ValueError: boom (rerun with --log-file PATH for "
                                       "details)\n")


def test_unwritable_log_file_is_a_one_line_error(tmp_path, capsys):
    try:
        rc = cli_main.main(["scenarios", "--log-file", str(tmp_path / "no" / "such" / "dir.log")])
    finally:
        logs.reset()
    assert rc == 1
    assert capsys.readouterr().err.startswith("gpuscope: error: cannot write the log file ")


def test_record_logs_and_counts_tick_errors(tmp_path, monkeypatch, capsys):
    """``gpuscope record``: a failing tick is one warning line on stderr, the recording goes on."""
    real = cli_main._open
    calls = {"n": 0}

    def flaky_open(*a, **kw):
        src = real(*a, **kw)
        sample = src.sample

        def sometimes():
            calls["n"] += 1
            if calls["n"] == 2:
                raise RuntimeError("injected record fault")
            return sample()

        src.sample = sometimes
        return src

    monkeypatch.setattr(cli_main, "_open", flaky_open)
    out = tmp_path / "r.jsonl.gz"
    log = tmp_path / "r.log"
    try:
        rc = cli_main.main(["record", "-o", str(out), "--simulate", "mixed-4", "--interval", "0.1",
                            "--duration", "1.2", "--log-file", str(log)])
    finally:
        logs.reset()
    err = capsys.readouterr().err
    assert rc == 0
    assert "gpuscope: error: sampling tick failed (1 so far): RuntimeError: injected record fault\n" in err
    assert "Traceback" not in err
    assert "1 sampling error, last: RuntimeError: injected record fault" in err.splitlines()[-1]
    assert open_recording(out).n_frames >= 3
    assert "Traceback" in log.read_text()


async def test_an_exception_in_the_ui_is_kept_for_main_not_printed(capsys):
    src = sim_source("mixed-4")
    session = Session(src.inventory)
    for f in run_frames(src, 0, 3):
        session.ingest(f)
    app = GpuscopeApp(session, None, label="SIMULATED", interval_s=1.0)

    def broken() -> None:
        raise ValueError("ui boom")

    app.action_compact = broken  # type: ignore[method-assign]
    with pytest.raises(ValueError, match="ui boom"):
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.press("c")
            await pilot.pause()
    assert app.return_code == 1
    if not ACTIVE:  # Textual's own handling (widgets/textual_private.py switched off): run_app raises on the code
        assert app.crash is None
        return
    assert isinstance(app.crash, ValueError)  # run_app raises it again; main logs it and prints one line
    err = capsys.readouterr().err
    assert "Traceback" not in err and "ui boom" not in err  # Textual printed no traceback on the terminal


async def test_a_feeder_wakes_the_screen_and_its_crash_is_kept(capsys):
    """A feeder thread's wake-up redraws through the DataReady message: at once, or held back by the redraw throttle
    (a Textual timer, which needs the App's context), the redraw running as the App's handlers do; a redraw that
    raises there ends the app as a handler's exception does (kept for main, no traceback on the terminal)."""
    from helpers import pilot_until
    from textual._context import active_app

    src = sim_source("mixed-4")
    session = Session(src.inventory)
    for f in run_frames(src, 0, 3):
        session.ingest(f)
    app = GpuscopeApp(session, None, label="SIMULATED", interval_s=1.0)
    posted: list[object] = []
    post = app.post_message

    def counted(message: object) -> bool:
        posted.append(message)
        return post(message)  # type: ignore[arg-type]

    app.post_message = counted  # type: ignore[method-assign]
    redraws: list[tuple[float, object]] = []
    draw = app.refresh_view

    def refresh_view(force: bool = False) -> None:
        redraws.append((session.last_frame.t, active_app.get(None)))
        draw(force)

    def wake() -> None:  # as a feeder thread does
        thread = threading.Thread(target=app.notify_update)
        thread.start()
        thread.join()

    with pytest.raises(ValueError, match="redraw boom"):
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            app.refresh_view = refresh_view  # type: ignore[method-assign]
            for t in (4, 5):  # at once, then held back (a redraw just happened): each arrives, in the App's context
                app.redraw.last_redraw = 0.0 if t == 4 else time.monotonic()
                session.ingest(run_frames(src, t, t)[0])
                now = session.last_frame.t
                wake()
                await pilot_until(pilot, lambda now=now: any(at == now for at, _ in redraws) and not app.redraw.dirty)
            assert {who for _, who in redraws} == {app}
            data_ready = [m for m in posted if isinstance(m, GpuscopeApp.DataReady)]
            assert len(data_ready) == 2

            def broken(force: bool = False) -> None:
                raise ValueError("redraw boom")

            app.refresh_view = broken  # type: ignore[method-assign]
            app.redraw.last_redraw = 0.0
            wake()
            await pilot_until(pilot, lambda: app.return_code is not None)
    assert app.return_code == 1
    if ACTIVE:
        assert isinstance(app.crash, ValueError)
        err = capsys.readouterr().err
        assert "Traceback" not in err and "redraw boom" not in err


def test_replay_skips_a_damaged_frame_and_counts_it(tmp_path, monkeypatch):
    from gpuscope.sources.recording import RecordingError
    from gpuscope.tui.feeders import ReplayFeeder

    src = sim_source("mixed-4")
    path = tmp_path / "r.jsonl.gz"
    rec = Recorder(path, src.inventory, fsync=False)
    for f in run_frames(src, 0, 9):
        rec.write(f, wait=True)
    rec.close()
    r = open_recording(path)
    real = r.frames

    def frames(a=0, b=None):
        if a == 4:
            raise RecordingError(f"{path}: frame 4 is damaged (test)")
        return real(a, b)

    monkeypatch.setattr(r, "frames", frames)
    session = Session(r.inventory)
    feeder = ReplayFeeder(r, session, lambda: None)
    for i in range(r.n_frames):
        feeder._ingest(i)
    assert feeder.index == r.n_frames - 1 and session.frames_seen == r.n_frames - 1
    assert session.tick_errors.count == 1 and "frame 4 is damaged" in session.tick_errors.last


def test_stopping_without_waiting_returns_at_once_and_the_writer_finishes(tmp_path, monkeypatch):
    disk = Disk(monkeypatch)
    src = sim_source("mixed-4")
    frames = run_frames(src, 0, 5)
    session = Session(src.inventory)
    path = tmp_path / "r.jsonl.gz"
    rec = Recorder(path, src.inventory, flush_s=0.0)
    session.start_recording(rec)
    disk.open.clear()
    for f in frames:
        session.ingest(f)
    assert disk.waiting.wait(10)
    t0 = time.monotonic()
    assert session.stop_recording(wait=False) is rec  # what the UI does on r: no wait for the stalled disk
    assert time.monotonic() - t0 < 1.0 and rec._thread.is_alive() and rec.accepted == 6
    disk.open.set()
    rec.close()  # what the App does at exit: wait for the writer to finish
    assert not rec._thread.is_alive() and rec.frames == 6
    r = open_recording(path)
    assert r.complete and r.n_frames == 6
