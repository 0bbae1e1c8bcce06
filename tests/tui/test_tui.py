"""The TUI: Pilot tests for keys, focus, pause, detail and replay; snapshots; a tmux smoke test."""

from __future__ import annotations

import os
import shlex
import signal
import sys

import pytest
from helpers import Tmux, expect_exit, gpuscope_cmd, needs_tmux, run_frames, sim_source
from helpers import pilot_until as until
from textual.widgets import Input

from gpuscope.core.session import Session
from gpuscope.outputs.recorder import Recorder
from gpuscope.sources.recording import open_recording
from gpuscope.tui.app import GpuDetailScreen, GpuscopeApp, HelpScreen
from gpuscope.tui.feeders import ReplayFeeder
from gpuscope.tui.screens import FindingsScreen
from gpuscope.widgets.findings_panel import FindingsPanel
from gpuscope.widgets.topology_panel import TopologyPanel


def make_app(scenario: str, start: float, end: float, compact=None, **kw) -> GpuscopeApp:
    src = sim_source(scenario)
    session = Session(src.inventory, interval_s=1.0)
    for f in run_frames(src, start, end):
        session.ingest(f)
    return GpuscopeApp(session, None, label="SIMULATED", interval_s=1.0, compact=compact, **kw)


SNAP_CASES = [("a6000-tp2-pcie-gen1", 0, 40), ("h200-nvswitch-8", 0, 30), ("mixed-4", 0, 20), ("gpu-lost", 0, 20)]


@pytest.mark.parametrize("scenario,start,end", SNAP_CASES)
@pytest.mark.parametrize("size", [(80, 24), (160, 50)])
def test_snapshot(snap_compare, scenario, start, end, size):
    assert snap_compare(make_app(scenario, start, end), terminal_size=size)


async def test_keys_pause_focus_detail_help(tmp_path):
    app = make_app("mixed-4", 0, 30, record_path=str(tmp_path / "r.jsonl.gz"))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert app.session.recorder is not None  # --record starts recording at once
        await pilot.press("p")
        assert app.paused
        await pilot.press("p")
        assert not app.paused
        await pilot.press("t")
        assert isinstance(app.focused, TopologyPanel)
        before = app.focused.sel
        await pilot.press("down")
        assert app.focused.sel != before
        await pilot.press("f")
        assert isinstance(app.screen, FindingsScreen)  # every finding, full text
        await pilot.press("escape")
        app.query_one(FindingsPanel).focus()
        await pilot.pause()
        assert isinstance(app.focused, FindingsPanel)
        await pilot.press("2")
        assert isinstance(app.screen, GpuDetailScreen) and app.screen.index == 1
        await pilot.press("escape")
        assert not isinstance(app.screen, GpuDetailScreen)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        assert "? h" in str(app.screen.query_one("#help").render())  # readable key names
        await pilot.press("escape")
        await pilot.press("M")
        assert isinstance(app.focused, Input)  # the label prompt takes typing at once
        await pilot.press("x", "enter")
        assert app.session._pending and app.session._pending[-1].text == "x"
        w = app.window_s
        await pilot.press("w")
        assert app.window_s != w
        assert app.query_one("#table").display  # four GPUs at 120x40: a panel each would not fit
        await pilot.press("c")
        assert app.query_one("#table").display and "no room for GPU panels" in app.message_line
        await pilot.press("m")
        assert app.session._pending and app.session._pending[-1].kind == "marker"
        await pilot.press("r")
        assert app.session.recorder is None
    rec = open_recording(tmp_path / "r.jsonl.gz")
    assert rec.complete


async def test_compact_mode_fits_8_gpus_at_80x24():
    app = make_app("h200-nvswitch-8", 0, 12)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert app.query_one("#table").display
        text = str(app.query_one("#table").render())
        for i in range(8):
            assert f"\n{i} " in "\n" + text


async def test_lost_gpu_is_shown_lost():
    app = make_app("gpu-lost", 0, 20, compact=False)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        panel = app.query_one("#gpu2")
        assert "lost" in panel.classes
        assert "LOST" in panel._gs_last.plain  # line-drawn: its text, not render()


async def test_replay_play_pause_seek_speed(tmp_path):
    path = tmp_path / "r.jsonl.gz"
    src = sim_source("a6000-tp2-pcie-gen1")
    s = Session(src.inventory)
    s.start_recording(Recorder(str(path), src.inventory))
    for k, f in enumerate(run_frames(src, 0, 60)):
        if k == 30:
            s.add_marker("half", t=f.t)
        s.ingest(f)
    s.stop_recording()
    rec = open_recording(path)
    session = Session(rec.inventory)
    app = GpuscopeApp(session, None, label="REPLAY", interval_s=1.0)
    app.feeder = ReplayFeeder(rec, session, app.notify_update, speed=1.0, window_s=lambda: app.window_s)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        f = app.feeder
        await pilot.press("space")
        assert not f.playing
        pos = f.position
        g0 = app.redraw.seek_gen
        await pilot.press("right")
        await until(pilot, lambda: f.position == pytest.approx(pos + 10, abs=1.01))
        await until(pilot, lambda: app.redraw.seek_gen != g0)  # the graphs were redrawn after the seek, paused
        await pilot.press("end")
        await until(pilot, lambda: f.index == rec.n_frames - 1)
        await pilot.press("home")
        await until(pilot, lambda: f.index == 0)
        await pilot.press("n")
        first = min(t for t, _k in f.marks() if t > rec.times[0] + 0.01)
        await until(pilot, lambda: f._mark_t == pytest.approx(first) and f._seek_to is None)
        assert f.index == rec.index_at(first)
        for _ in range(40):
            if f._mark_t is not None and f._mark_t >= rec.times[30] - 0.01:
                break
            before = f._mark_t
            await pilot.press("n")
            await until(pilot, lambda b=before: f._mark_t != b and f._seek_to is None)  # n always moves on
        assert f.position == pytest.approx(rec.times[30], abs=0.01)  # the marker "half"
        nxt = [t for t, _k in f.marks() if t > rec.times[30] + 1e-6]
        if nxt:
            await pilot.press("n")
            await until(pilot, lambda: f._mark_t == pytest.approx(min(nxt)))
            await pilot.press("N")
            await until(pilot, lambda: f._mark_t == pytest.approx(rec.times[30]))
        await pilot.press("plus", "plus", "plus", "plus")
        assert f.speed == 16.0
        await pilot.press("minus")
        assert f.speed == 8.0
        await pilot.press("space")
        assert f.playing
        await pilot.pause(0.5)
        assert f.index > 30
        assert "REPLAY" in str(app.query_one("#status").render())


async def test_n_walks_every_mark_of_the_demo_in_order():
    """The bundled demo has marks between frames: n must still step through each one, N back."""
    from gpuscope.tui.run import demo_path

    rec = open_recording(demo_path())
    session = Session(rec.inventory, interval_s=1.0)
    app = GpuscopeApp(session, None, label="REPLAY", interval_s=1.0)
    app.feeder = ReplayFeeder(rec, session, app.notify_update, window_s=lambda: app.window_s)
    marks = sorted({t for t, _k in app.feeder.marks() if t > rec.times[0] + 1e-6})
    assert len(marks) >= 2
    async with app.run_test(size=(100, 30)) as pilot:
        f = app.feeder
        await pilot.press("space")
        labels = {e.t: e.text for e in rec.events if e.kind == "marker"}
        for want in marks:
            await pilot.press("n")
            await until(pilot, lambda w=want: f._mark_t == pytest.approx(w) and f._seek_to is None)
            if want in labels:  # the marker's own words are on screen, not only a tick on the timeline
                assert labels[want][:40] in app.message_line
        await pilot.press("n")
        assert app.message_line == "no later mark"
        for want in reversed(marks[:-1]):
            await pilot.press("N")
            await until(pilot, lambda w=want: f._mark_t == pytest.approx(w) and f._seek_to is None)


async def test_palette_lists_gpuscope_commands():
    from gpuscope.tui.commands import palette_commands

    app = make_app("mixed-4", 0, 10)
    async with app.run_test(size=(100, 30)) as pilot:
        names = [n for n, _h, _cb in palette_commands(app)]
        assert {"Record start / stop", "Marker", "Cycle window 1m / 10m / 1h", "Compact table / GPU panels",
                "Topology panel", "GPU3 detail"} <= set(names)
        dict((n, cb) for n, _h, cb in palette_commands(app))["GPU3 detail"]()
        await pilot.pause()
        assert isinstance(app.screen, GpuDetailScreen) and app.screen.index == 3


@pytest.mark.slow
@needs_tmux
def test_tmux_smoke_installed_command():
    with Tmux(f"{gpuscope_cmd()} --simulate a6000-tp2-pcie-gen1") as t:
        t.wait_screen("SIMULATED", "RTX A6000", "Gen1×16", "Findings", "Inference")  # a GPU's panel or table row
        t.keys("q")
        t.wait_screen("EXITED 0", timeout=30)


@pytest.mark.slow
@needs_tmux
def test_exits_when_its_terminal_disappears():
    """An SSH drop: the terminal goes away (SIGHUP); gpuscope must exit, not spin."""
    with Tmux(f"{shlex.quote(sys.executable)} -m gpuscope --simulate mixed-4", size=(100, 30), keep=False) as t:
        t.wait_screen("SIMULATED", "GPU3")
        pid = t.pane_pid()
        t.kill()
        expect_exit(pid, 10, "gpuscope to exit after its terminal went away")


async def test_click_on_a_gpu_panel_opens_its_detail():
    app = make_app("a6000-tp2-pcie-gen1", 0, 20, compact=False)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        await pilot.click("#gpu1")
        await pilot.pause()
        assert isinstance(app.screen, GpuDetailScreen) and app.screen.index == 1


async def test_fleet_screen_lists_hosts_worst_first_and_opens_one():
    import json as _json

    from gpuscope.core.codec import frame_to_dict, inventory_to_dict
    from gpuscope.sources.mqtt import Subscriber, parse_broker
    from gpuscope.tui.fleet_app import FleetApp

    sub = Subscriber(parse_broker("mqtt://127.0.0.1:1", env={}))  # fed by hand: no broker needed
    for scenario, host, at in (("healthy-gen4", "sim-healthy", 30), ("gpu-lost", "sim-a100-4", 20)):
        src = sim_source(scenario)
        s = Session(src.inventory)
        for f in run_frames(src, 0, at):
            f = s.ingest(f)
            sub.handle(f"gpuscope/v1/{host}/frame", _json.dumps(frame_to_dict(f)).encode())
        sub.handle(f"gpuscope/v1/{host}/inventory", _json.dumps(inventory_to_dict(src.inventory)).encode())
    app = FleetApp(sub, sub.cfg)
    async with app.run_test(size=(140, 20)) as pilot:
        await pilot.pause()
        table = app.query_one("#fleet")
        assert table.order == ["sim-a100-4", "sim-healthy"]  # the host with a lost GPU first
        text = table.plain()  # the lines it shows (drawn line by line)
        assert "(1 lost)" in text and "GPU2 NVIDIA A100" in text  # the worst finding, cut to the width
        await pilot.press("down", "enter")
    assert app.return_value == "sim-healthy"


# SIGHUP blocked (the mask survives exec), so only the watchdog can notice the terminal is gone
_NO_SIGHUP = ("import os, signal, sys; signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGHUP}); "
              "os.execv(sys.executable, [sys.executable, '-m', 'gpuscope', '--simulate', 'mixed-4'])")


@pytest.mark.slow
@needs_tmux
def test_watchdog_exits_when_the_terminal_hangs_up_without_sighup():
    """The terminal-hang-up watchdog (tui/base.py ``MonitorApp._watchdog``): with SIGHUP never delivered, killing
    the tmux session running the live TUI still ends gpuscope within 3 s (the watchdog wakes at the terminal's
    hang-up or its parent's end: tui/hangup.py ``watch``)."""
    with Tmux(f"{shlex.quote(sys.executable)} -c {shlex.quote(_NO_SIGHUP)}", size=(100, 30), keep=False) as t:
        t.wait_screen("SIMULATED", "GPU3")
        pid = t.pane_pid()
        with open(f"/proc/{pid}/status") as f:  # the live TUI really runs with SIGHUP blocked
            blocked = int(next(line for line in f if line.startswith("SigBlk:")).split()[1], 16)
        assert blocked & (1 << (signal.SIGHUP - 1))
        t.kill()
        expect_exit(pid, 3.0, "the watchdog to end gpuscope after the hang-up")


async def test_watchdog_exits_when_the_parent_is_gone(monkeypatch):
    """The other half of the watchdog: the parent (the SSH session's shell) died and we were re-parented."""
    import gpuscope.tui.base as base_mod

    ended: list[bool] = []
    monkeypatch.setattr(base_mod, "exit_soon", lambda *a, **k: ended.append(True))  # not the test process
    app = make_app("mixed-4", 0, 5)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        app._watchdog()
        assert not app._exit and not ended  # same parent, no terminal to lose under Pilot: keep running
        app._ppid = os.getppid() + 1
        app._watchdog()
        await until(pilot, lambda: app._exit)
        assert app._exit and app.return_code == 0 and ended == [True] and app.hung_up


def test_the_timeline_track_stays_put_while_the_position_and_speed_change():
    """Marks shifted sideways as the position label grew (7s → 1m38s): the head has a fixed width."""
    from gpuscope.widgets.timeline import timeline_text

    marks = [(30.0, "marker"), (70.0, "finding")]
    texts = [timeline_text(100, 0.0, 98.0, pos, marks, speed, playing).plain
             for pos in (0.0, 7.0, 65.0, 98.0) for speed in (0.25, 1.0, 16.0) for playing in (True, False)]
    assert len({len(t) for t in texts}) == 1
    assert len({t.index("|") for t in texts}) == 1 and len({t.index("!") for t in texts}) == 1


async def test_digit_keys_are_bindings_that_open_a_gpu_and_the_help_shows_them_as_one_line():
    """1–8 are BINDINGS (ids detail1…detail8, remappable), not an on_key handler: a digit without its GPU does
    nothing, a modal screen (the marker label) takes the digit as text, and ? lists them once."""
    app = make_app("mixed-4", 0, 10)
    assert [b.id for b in GpuscopeApp.BINDINGS if b.id and b.id.startswith("detail") and b.id != "detail"] == [
        f"detail{k}" for k in range(1, 9)]
    assert not hasattr(GpuscopeApp, "on_key")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("5")  # mixed-4 has GPU0–GPU3
        assert not isinstance(app.screen, GpuDetailScreen)
        await pilot.press("3")
        assert isinstance(app.screen, GpuDetailScreen) and app.screen.index == 2
        await pilot.press("1")  # from one GPU's detail to another's
        assert isinstance(app.screen, GpuDetailScreen) and app.screen.index == 0
        await pilot.press("escape", "M", "2", "enter")
        assert not isinstance(app.screen, GpuDetailScreen)
        assert app.session._pending[-1].text == "2"  # typed into the label, not a GPU's detail
        await pilot.press("question_mark")
        help_text = str(app.screen.query_one("#help").render())
        assert help_text.count("detail of GPU") == 1 and "detail of GPU0–GPU7" in help_text


async def test_the_toggles_are_reactives_that_redraw_what_they_change():
    """paused, compact, window_s and show_processes: set by the keys or directly, the watcher lays out and
    redraws; set before the app runs, nothing runs."""
    app = make_app("mixed-4", 0, 20)
    app.show_processes = True  # before mount: only the value (the first layout reads it)
    app.paused = True
    app.paused = False
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert app.query_one("#procs").display
        await pilot.press("P")
        assert not app.show_processes and not app.query_one("#procs").display
        app.show_processes = True
        assert app.query_one("#procs").display  # laid out by the watcher at once
        gen = app.redraw.last_redraw
        app.window_s = 600.0
        assert app.redraw.last_redraw > gen and app.build_view(False).window_s == 600.0
        await pilot.press("w")
        assert app.window_s == 3600.0
        app.compact = True
        assert app.query_one("#table").display
        await pilot.press("p")
        assert app.paused and app.build_view(False).status.paused


async def test_the_fleet_screen_leaves_when_its_terminal_goes_away(monkeypatch):
    """The fleet screen shares the main screen's hang-up wiring (tui/base.py MonitorApp): the watchdog
    thread's check ends it with None and marks it hung up, so run_fleet starts no other screen."""
    import gpuscope.tui.base as base_mod
    from gpuscope.sources.mqtt import Subscriber, parse_broker
    from gpuscope.tui.fleet_app import FleetApp

    ended: list[bool] = []
    monkeypatch.setattr(base_mod, "exit_soon", lambda *a, **k: ended.append(True))  # not the test process
    sub = Subscriber(parse_broker("mqtt://127.0.0.1:1", env={}))
    app = FleetApp(sub, sub.cfg)
    async with app.run_test(size=(100, 20)) as pilot:
        await pilot.pause()
        app._watchdog()
        assert not app.hung_up and not ended
        app._ppid = os.getppid() + 1
        app._watchdog()
        await until(pilot, lambda: app._exit)
    assert app.hung_up and ended == [True] and app.return_value is None


async def test_a_textual_theme_recolours_the_chrome_and_the_default_keeps_the_terminal_colours():
    """The header, note line and timeline take the theme's $success/$warning/$error/$accent (ctrl+p, "Change
    theme"); under Textual's default theme they keep the terminal's ANSI colours (the snapshots' look)."""
    from textual.app import App

    from gpuscope.widgets.status_bar import StatusBar
    from gpuscope.widgets.style import ANSI_PALETTE, DEFAULT_THEME, theme_palette

    assert App().theme == DEFAULT_THEME
    app = make_app("mixed-4", 0, 10)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        bar = app.query_one(StatusBar)

        def header_styles() -> set[str]:
            return {style for _text, style, _prio, _short in bar._key[0]} if bar._key else set()  # the words it drew

        assert app.chrome_palette == ANSI_PALETTE and "bold black on yellow" in header_styles()
        app.theme = "nord"
        await until(pilot, lambda: app.chrome_palette != ANSI_PALETTE)
        nord = theme_palette(app.get_css_variables())
        assert app.chrome_palette == nord and nord.warn == "#EACB8B"
        await until(pilot, lambda: f"bold black on {nord.warn}" in header_styles())
        app.theme = DEFAULT_THEME
        await until(pilot, lambda: app.chrome_palette == ANSI_PALETTE)


def test_theme_palette_reads_the_themes_variables_and_keeps_ansi_for_what_is_missing():
    from gpuscope.widgets.style import ANSI_PALETTE, theme_palette
    from gpuscope.widgets.timeline import timeline_text

    p = theme_palette({"success": "#112233", "warning": "not a colour", "background": "#000000",
                       "foreground": "#FFFFFF"})
    assert (p.ok, p.warn, p.bad, p.accent) == ("#112233", ANSI_PALETTE.warn, ANSI_PALETTE.bad, ANSI_PALETTE.accent)
    assert p.dim.upper() in ("#7F7F7F", "#808080")  # the foreground halfway into the background
    assert theme_palette({}) == ANSI_PALETTE
    drawn = timeline_text(60, 0.0, 100.0, 50.0, [(10.0, "marker")], 1.0, True, p)
    assert {str(s.style) for s in drawn.spans} >= {"#112233", ANSI_PALETTE.accent}
