"""A terminal driver whose input thread sleeps until there is input.

Textual's ``LinuxDriver`` (8.2.8) reads keys on a thread that wakes every 0.1 s (``select(0.1)``) to see
whether the app is closing and whether a lone Escape has waited long enough to be a key. Ten wake-ups a
second are small, but they were ~20 % of the TUI's whole CPU on a 2-GPU screen (per-thread CPU in
``benchmarks/bench_tui_cost.py``: the input thread used 1.7 ms a second, the screen's main thread 5).

:class:`QuietLinuxDriver` keeps everything else of ``LinuxDriver`` and replaces only that loop: it blocks
until the terminal has input, or until the parser has a deadline (a lone Escape becomes a key after its
timeout, as before), or until the driver is told to stop input (a self-pipe, written when
``exit_event`` is set). Suspend/resume (Ctrl+Z) and closing go through ``LinuxDriver``'s own
``disable_input``, which sets ``exit_event`` and joins the thread: that set now also wakes it.
"""

from __future__ import annotations

import os
import selectors
import time
from codecs import getincrementaldecoder
from threading import Event, Lock
from typing import Any

from textual._parser import ParseError
from textual._xterm_parser import XTermParser
from textual.driver import Driver
from textual.drivers.linux_driver import LinuxDriver

EOF_PAUSE_S = 0.1  # a closed terminal reads as endless end-of-file: look again this often, not in a spin


class WakingEvent(Event):
    """A ``threading.Event`` whose ``set`` also writes a byte to a pipe (when one is attached), so a
    thread blocked in ``select`` on that pipe wakes and sees it."""

    def __init__(self) -> None:
        super().__init__()
        self._wake_fd = -1
        self._fd_lock = Lock()  # set() never writes to a descriptor being closed (its number may be reused)

    def attach(self, wake_fd: int) -> None:
        with self._fd_lock:
            self._wake_fd = wake_fd

    def detach(self) -> None:
        """Stop writing to the pipe: call before closing it."""
        with self._fd_lock:
            self._wake_fd = -1

    def set(self) -> None:
        super().set()
        with self._fd_lock:
            if self._wake_fd >= 0:
                try:
                    os.write(self._wake_fd, b"x")
                except OSError:  # the pipe is full: the thread is already being woken
                    pass


def read_timeout(deadline: float | None, now: float) -> float | None:
    """How long the input thread may block: until the parser's ``deadline`` (``get_time()`` seconds, a
    pending lone Escape) when it has one, never less than 0; ``None`` (until input) when it has none."""
    if deadline is None:
        return None
    return max(0.0, deadline - now)


class QuietLinuxDriver(LinuxDriver):
    """``LinuxDriver`` with an input thread that wakes only when it has something to do."""

    def __init__(self, *args: Any, **kw: Any):
        super().__init__(*args, **kw)
        self.exit_event: WakingEvent = WakingEvent()

    def run_input_thread(self) -> None:
        """Read the terminal and post its events, blocking while there is nothing to read. Each run
        (start, and again after a suspend) has its own wake-up pipe, closed when it ends."""
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        self.exit_event.attach(wake_w)
        try:
            self._read_input(wake_r)
        finally:
            self.exit_event.detach()
            os.close(wake_r)
            os.close(wake_w)

    def _read_input(self, wake: int) -> None:
        from textual._time import get_time

        fileno = self.fileno
        selector = selectors.DefaultSelector()
        selector.register(fileno, selectors.EVENT_READ, "tty")
        selector.register(wake, selectors.EVENT_READ, "wake")
        parser = XTermParser(self._debug)
        decode = getincrementaldecoder("utf-8")().decode

        def feed(data: str) -> None:
            for event in parser.feed(data):
                self.process_message(event)

        def tick() -> None:
            for event in parser.tick():
                self.process_message(event)

        def read_tty(final: bool) -> bool:
            """Feed what the terminal has; False at end of file or a read error (a closed terminal)."""
            try:
                data = os.read(fileno, 4096)
            except OSError:
                return False
            if not data:
                return False
            feed(decode(data, final=final))
            return True

        try:
            while not self.exit_event.is_set():
                timeout = read_timeout(parser._timeout_time, get_time())
                ready = selector.select(timeout)
                for key, _mask in ready:
                    if key.data == "wake":
                        _drain(wake)
                    elif not read_tty(final=False) and not self.exit_event.is_set():
                        time.sleep(EOF_PAUSE_S)  # the hang-up watchdog closes the app
                tick()
            selector.unregister(fileno)  # what arrived while closing, as LinuxDriver does
            if _readable(fileno):
                read_tty(final=True)
            tick()
        finally:
            selector.close()
            try:
                for _ in parser.feed(""):
                    pass
            except (EOFError, ParseError):
                pass


def _drain(fd: int) -> None:
    """Read a non-blocking pipe until it is empty."""
    try:
        while os.read(fd, 512):
            pass
    except BlockingIOError:
        pass


def _readable(fd: int) -> bool:
    """Whether ``fd`` has input now (a zero-timeout select)."""
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        return bool(sel.select(0))


def driver_for(default: type[Driver]) -> type[Driver]:
    """The driver an app should use: :class:`QuietLinuxDriver` where Textual would use ``LinuxDriver``
    itself, else Textual's choice (headless tests, Windows, a driver named in ``TEXTUAL_DRIVER``)."""
    return QuietLinuxDriver if default is LinuxDriver else default
