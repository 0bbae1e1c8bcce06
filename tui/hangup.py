"""Is the terminal still there? Shared by every front end's watchdog (live, replay, demo, fleet, REMOTE)."""

from __future__ import annotations

import os
import select
import termios
import threading
import time
from collections.abc import Callable
from typing import Any

from gpuscope.widgets.wakeup import WakingEvent


def _ttys() -> tuple[int, ...]:
    out = []
    for fd in (0, 1, 2):
        try:
            if os.isatty(fd):
                out.append(fd)
        except OSError:
            pass
    return tuple(out)


STARTUP_TTYS = _ttys()  # the descriptors that were terminals when gpuscope started


def terminal_gone(ppid: int, fds: tuple[int, ...] | None = None) -> bool:
    """True when the terminal went away: the parent changed (we were re-parented: the shell or tmux died)
    or a descriptor that was a terminal at start no longer answers ``tcgetattr`` (a hung-up tty gives
    EIO or ENOTTY). Descriptors that never were terminals (tests, pipes) are not checked."""
    if os.getppid() != ppid:
        return True
    for fd in STARTUP_TTYS if fds is None else fds:
        try:
            termios.tcgetattr(fd)
        except (termios.error, OSError):
            return True
    return False


GRACE_S = 0.5  # the watchdog wakes at the hang-up itself (or every 0.5 s without pidfds): under the tests' 3 s


def exit_soon(grace_s: float = GRACE_S, code: int = 0) -> threading.Thread:
    """After a hangup: give the app ``grace_s`` to shut down, then end the process outright.

    Textual's shutdown can block forever once the terminal is gone (its writer thread dies on EIO and the
    full output queue never drains), so a lost terminal would otherwise leave an orphan. Callers close
    what must be closed (a recording) before asking."""

    def later() -> None:
        time.sleep(grace_s)
        os._exit(code)

    t = threading.Thread(target=later, name="gpuscope-hangup", daemon=True)
    t.start()
    return t


SAFETY_S = 5.0  # with the blocking wait, the check still runs this often (a hang-up no descriptor reports)


def _hang_up_poller(ppid: int | None, fds: tuple[int, ...], wake_r: int) -> tuple[Any, int] | None:
    """A ``select.poll`` that wakes when the parent ``ppid`` ends (its pidfd), a terminal in ``fds`` hangs up
    (POLLHUP, POLLERR: asked for with no events, so input is never taken from it) or ``wake_r`` is written;
    and the pidfd. None where pidfds are missing (not Linux ≥ 5.3): the caller then checks on a timer."""
    pidfd_open = getattr(os, "pidfd_open", None)
    if pidfd_open is None or ppid is None or ppid <= 1:
        return None
    try:
        pidfd = pidfd_open(ppid)
    except OSError:
        return None
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    poller.register(wake_r, select.POLLIN)
    for fd in fds:
        try:
            poller.register(fd, 0)
        except (OSError, ValueError):
            pass
    return poller, pidfd


def watch(check: Callable[[], None], every_s: float = 0.5, name: str = "gpuscope-watchdog",
          ppid: int | None = None, fds: tuple[int, ...] | None = None) -> WakingEvent:
    """Call ``check`` on a daemon thread until the returned event is set: when the parent ``ppid``
    ends or a terminal descriptor (``fds``, else the startup terminals) hangs up, and every :data:`SAFETY_S`
    seconds; where the system cannot wait on the parent (no pidfd, or no ``ppid``), every ``every_s`` seconds
    instead (``every_s`` is that fallback's period only).

    Blocking in ``poll`` costs nothing between events: the timer it replaces woke the process twice a
    second, 0.2–0.3 ms of CPU a second (docs/performance.md, one H200). The watchdog runs off the event
    loop on purpose: after an SSH drop Textual's loop can be stuck writing to the dead terminal, and a
    timer on that loop would never fire."""
    w = WakingEvent()  # set() stops the watchdog and, through the pipe, wakes its poll at once
    wake_r, wake_w = os.pipe()
    got = _hang_up_poller(ppid, STARTUP_TTYS if fds is None else fds, wake_r)
    if got is None:  # the timer's wait wakes on set() itself
        os.close(wake_r)
        os.close(wake_w)
    else:
        w.attach(wake_w)

    def run_check() -> None:
        try:
            check()
        except Exception:  # noqa: BLE001 - a watchdog must never die; the next round tries again
            pass

    def loop() -> None:
        if got is None:
            while not w.wait(every_s):
                run_check()
            return
        poller, pidfd = got
        try:
            while not w.is_set():
                events = poller.poll(SAFETY_S * 1000)
                if w.is_set():
                    return
                run_check()
                for fd, _ev in events:  # still here after a descriptor's event: stop asking it (no spin)
                    if fd != wake_r:
                        poller.unregister(fd)
        finally:
            w.detach()
            for fd in (wake_r, wake_w, pidfd):
                os.close(fd)

    threading.Thread(target=loop, name=name, daemon=True).start()
    return w
