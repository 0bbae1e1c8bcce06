"""The hang-up watchdog's wait (tui/hangup.py ``watch``): woken by the parent's end or a descriptor's hang-up,
never by a timer (0.2 ms of CPU a second saved on one H200); stopped at once."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from gpuscope.tui.hangup import SAFETY_S, watch

needs_pidfd = pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="no pidfd on this system")



@needs_pidfd
def test_a_descriptor_that_hangs_up_wakes_the_check_at_once():
    r, w = os.pipe()  # a pipe's read end reports POLLHUP when its writer goes, as a terminal's slave does
    parent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    calls: list[float] = []
    hit = threading.Event()
    try:
        stop = watch(lambda: (calls.append(time.monotonic()), hit.set()), ppid=parent.pid, fds=(r,))
        time.sleep(0.3)
        assert not calls  # nothing happened: no check (the old watchdog checked twice a second)
        t0 = time.monotonic()
        os.close(w)
        assert hit.wait(2.0) and calls[0] - t0 < 1.0
        stop.set()
    finally:
        parent.kill()
        parent.wait()
        os.close(r)


@needs_pidfd
def test_the_parent_ending_wakes_the_check_at_once():
    parent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    hit = threading.Event()
    stop = watch(hit.set, ppid=parent.pid, fds=())
    try:
        time.sleep(0.3)
        assert not hit.is_set()
        parent.kill()
        assert hit.wait(2.0)
    finally:
        stop.set()
        parent.wait()


@needs_pidfd
def test_a_failing_check_never_ends_the_watch_and_stop_ends_it_at_once():
    r, w = os.pipe()
    parent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    calls: list[int] = []

    def check() -> None:
        calls.append(1)
        raise RuntimeError("a bug in the check")

    try:
        before = set(threading.enumerate())
        stop = watch(check, ppid=parent.pid, fds=(r,), name="gpuscope-watchdog-test")
        (t,) = [x for x in threading.enumerate() if x not in before and x.name == "gpuscope-watchdog-test"]
        os.close(w)  # the first event: the check raises
        deadline = time.monotonic() + 2.0
        while len(calls) < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        parent.kill()  # the second: still watching
        while len(calls) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert len(calls) == 2 and t.is_alive()
        t0 = time.monotonic()
        stop.set()
        t.join(2.0)
        assert not t.is_alive() and time.monotonic() - t0 < SAFETY_S
        stop.set()  # twice: harmless
    finally:
        parent.kill()
        parent.wait()
        os.close(r)


def test_without_a_pidfd_it_checks_on_a_timer():
    hit = threading.Event()
    stop = watch(hit.set, every_s=0.05, ppid=None, fds=())  # no parent to wait on: the timer
    try:
        assert hit.wait(2.0)
    finally:
        stop.set()
