"""Is the terminal still there? Shared by every front end's watchdog (live, replay, demo, fleet, REMOTE)."""

from __future__ import annotations

import os
import termios
import threading
import time
from collections.abc import Callable


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


GRACE_S = 0.5  # the watchdog runs every second: detection plus grace stays under the 3 s the tests demand


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


def watch(check: Callable[[], None], every_s: float = 0.5, name: str = "gpuscope-watchdog") -> threading.Event:
    """Call ``check`` every ``every_s`` seconds on a daemon thread until the returned event is set.

    The watchdog runs off the event loop on purpose: after an SSH drop Textual's loop can be stuck
    writing to the dead terminal, and a timer on that loop would never fire."""
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(every_s):
            try:
                check()
            except Exception:  # noqa: BLE001 - a watchdog must never die; the next round tries again
                pass

    threading.Thread(target=loop, name=name, daemon=True).start()
    return stop
