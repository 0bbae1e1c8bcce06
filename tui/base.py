"""What every gpuscope App shares (the main screen's and the fleet screen's): Textual's hooks, leaving when
the terminal goes away, the terminal check before starting, and running an App to its end.

* :class:`MonitorApp` is :class:`~gpuscope.widgets.textual_private.HookedApp` (one write a frame, the quiet
  input driver, the crash kept for ``main``) plus the hang-up wiring: SIGHUP and a watchdog thread
  (tui/hangup.py) end the App when the terminal is gone, after :meth:`MonitorApp.before_hang_up` (the main
  screen closes its recording there). Textual can spin or hang without a terminal: the process ends
  anyway (``exit_soon``).
* :func:`check_terminal` refuses to start a screen without a terminal; :func:`run_app` runs an App and
  raises again what ended it.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Any, ClassVar

from gpuscope.core.errors import GpuscopeError
from gpuscope.core.gc_tune import settle_gc, unsettle_gc
from gpuscope.tui.hangup import exit_soon, terminal_gone, watch
from gpuscope.widgets.textual_private import HookedApp, R
from gpuscope.widgets.wakeup import WakingEvent


class MonitorApp(HookedApp[R]):
    """An App that leaves when its terminal goes away (SIGHUP, or the watchdog: the parent died or a
    terminal descriptor stopped answering), with :attr:`HANG_UP_RESULT` as its return value. The subclass
    calls :meth:`watch_hang_up` when mounted and :meth:`stop_hang_up_watch` when unmounted."""

    HANG_UP_RESULT: ClassVar[Any] = None  # what run() returns after a hang-up

    def __init__(self, *args: Any, **kw: Any):
        super().__init__(*args, **kw)
        self.hung_up = False  # the terminal went away: callers must not start another app
        self._ppid = os.getppid()
        self._ui_loop: asyncio.AbstractEventLoop | None = None  # the loop the app runs on (watch_hang_up)
        self._watch: WakingEvent | None = None

    def watch_hang_up(self) -> None:
        """Start watching for the terminal going away (call on mount, on the event loop): the watchdog on its
        own thread, woken by the parent's end or the terminal's hang-up (tui/hangup.py ``watch``; a timer on the
        loop would never fire while the loop is stuck writing to a dead terminal), and SIGHUP where a handler
        can be set (the main thread)."""
        self._ui_loop = asyncio.get_running_loop()
        self._watch = watch(self._watchdog, ppid=self._ppid)
        try:
            signal.signal(signal.SIGHUP, lambda *_: self._hang_up())
        except (ValueError, OSError):  # not the main thread (tests)
            pass

    def stop_hang_up_watch(self) -> None:
        """Stop the watchdog thread (call on unmount)."""
        if self._watch is not None:
            self._watch.set()

    def _watchdog(self) -> None:
        """Exit when the terminal went away (SSH drop): the parent died or stdin is gone."""
        if terminal_gone(self._ppid):
            self._hang_up()

    def before_hang_up(self) -> None:
        """What must be closed cleanly before the App leaves after a hang-up (the process may end half a
        second later). Runs on the watchdog's thread or in the signal handler."""

    def _hang_up(self) -> None:
        """The terminal is gone (SIGHUP on the loop, or the watchdog's thread): close what must be closed,
        then leave. Safe from either thread."""
        if self.hung_up:
            return
        self.hung_up = True
        self.before_hang_up()
        exit_soon()  # Textual's shutdown can hang without a terminal: the process ends anyway
        loop = self._ui_loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self.exit, self.HANG_UP_RESULT)


def check_terminal() -> None:
    """A GpuscopeError when stdout is not a terminal (a screen needs one)."""
    if not sys.stdout.isatty():
        raise GpuscopeError("the live view needs a terminal; for a headless run use `gpuscope record -o FILE`")


def run_app(app: HookedApp[Any]) -> Any:
    """Run the App and return its result; an exception that escaped one of its handlers is raised again
    once it has closed."""
    settle_gc()  # started: the collector set for a long run (core/gc_tune.py)
    try:
        result = app.run()
    finally:  # this App is over: what it held may be collected (the fleet opens one App per visit)
        unsettle_gc()
    if app.crash is not None:
        raise app.crash
    if app.return_code:  # Textual's own handling (no hooks: textual_private.ACTIVE is off) printed the traceback
        raise RuntimeError("the screen stopped on an error (Textual printed it above)")
    return result
