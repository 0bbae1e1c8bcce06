"""The terminal driver whose input thread sleeps until there is input (widgets/textual_private.py
QuietLinuxDriver)."""

from __future__ import annotations

import os
import selectors
import shlex
import signal
import sys
import threading

import pytest
from helpers import Tmux, needs_tmux, wait_for
from textual.drivers.headless_driver import HeadlessDriver
from textual.drivers.linux_driver import LinuxDriver

from gpuscope.widgets.textual_private import ACTIVE, QuietLinuxDriver, driver_for, read_timeout
from gpuscope.widgets.wakeup import WakingEvent


@pytest.mark.parametrize("deadline, now, expected", [
    (None, 5.0, None),   # nothing pending: block until input
    (5.1, 5.0, 0.1),     # a lone Escape becomes a key at its deadline
    (5.0, 5.0, 0.0),
    (4.0, 5.0, 0.0),     # overdue: do not block at all
])
def test_read_timeout(deadline, now, expected):
    got = read_timeout(deadline, now)
    assert got == pytest.approx(expected) if expected is not None else got is None


@pytest.mark.parametrize("default, expected", [
    (LinuxDriver, QuietLinuxDriver if ACTIVE else LinuxDriver),  # switched off / another Textual: Textual's
    (HeadlessDriver, HeadlessDriver),  # tests (run_test) keep Textual's headless driver
    (QuietLinuxDriver, QuietLinuxDriver),
])
def test_driver_for(default, expected):
    assert driver_for(default) is expected


def test_setting_the_event_wakes_a_thread_blocked_on_its_pipe():
    r, w = os.pipe()
    os.set_blocking(w, False)
    ev = WakingEvent()
    ev.attach(w)
    woke = threading.Event()

    def blocked() -> None:
        with selectors.DefaultSelector() as sel:
            sel.register(r, selectors.EVENT_READ)
            sel.select(None)  # no timeout: only the pipe can end this
        woke.set()

    t = threading.Thread(target=blocked, daemon=True)
    t.start()
    assert not woke.wait(0.3)
    ev.set()
    wait_for(woke.is_set, 10, "the blocked thread to wake")
    assert ev.is_set()
    os.close(r)
    os.close(w)


def test_a_detached_event_writes_nothing():
    r, w = os.pipe()
    os.set_blocking(r, False)
    ev = WakingEvent()
    ev.set()  # never attached
    ev.attach(w)
    ev.detach()
    ev.set()
    with pytest.raises(BlockingIOError):
        os.read(r, 10)
    os.close(r)
    os.close(w)


@pytest.mark.slow
@needs_tmux
def test_keys_escape_and_suspend_in_a_real_terminal():
    """In tmux: a key opens help, a lone Escape (delivered by the parser's deadline, with no input after
    it) closes it, Ctrl+Z stops the process and SIGCONT (fg) brings it back with the keys working, and q
    quits at once."""
    with Tmux(f"{shlex.quote(sys.executable)} -m gpuscope --simulate a6000-tp2-pcie-gen1", size=(100, 30)) as t:
        t.wait_screen("SIMULATED", "GPU1")
        t.keys("?")
        t.wait_screen("gpuscope keys")
        t.keys("Escape")
        wait_for(lambda: "gpuscope keys" not in t.screen(), 10, "a lone Escape to close the help")
        pid = int(t.run("list-panes", "-t", t.name, "-F", "#{pane_pid}").stdout.strip())
        child = _child_of(pid)
        t.keys("C-z")  # the key (the terminal is raw: the app itself suspends, as a shell job would)
        wait_for(lambda: _state(child) == "T", 10, "gpuscope to stop on Ctrl+Z")
        os.kill(child, signal.SIGCONT)
        wait_for(lambda: _state(child) in "SR", 10, "gpuscope to run again on SIGCONT")
        t.keys("?")
        t.wait_screen("gpuscope keys", timeout=20)
        t.keys("Escape")
        wait_for(lambda: "gpuscope keys" not in t.screen(), 10, "Escape to close the help after a resume")
        t.keys("q")
        t.wait_screen("EXITED 0", timeout=10)


def _child_of(pid: int) -> int:
    """The shell's child (the gpuscope process) of a tmux pane's shell."""
    def child() -> int | None:
        for task in os.listdir(f"/proc/{pid}/task"):
            kids = open(f"/proc/{pid}/task/{task}/children").read().split()
            if kids:
                return int(kids[0])
        return None
    return wait_for(child, 10, "the gpuscope process")


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]
