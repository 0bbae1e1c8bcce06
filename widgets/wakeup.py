"""A thread's wake-up through a pipe: the event the quiet input driver (widgets/textual_private.py) and the hang-up
watchdog (tui/hangup.py) block on beside a descriptor. Pure (threading and os), no Textual."""

from __future__ import annotations

import os
from threading import Event, Lock


class WakingEvent(Event):
    """A ``threading.Event`` whose ``set`` also writes a byte to an attached pipe, waking a ``select`` on it."""

    def __init__(self) -> None:
        super().__init__()
        self._wake_fd = -1
        self._fd_lock = Lock()  # set() never writes to a descriptor being closed (its number may be reused)

    def attach(self, wake_fd: int) -> None:
        with self._fd_lock:
            self._wake_fd = wake_fd

    def detach(self) -> None:
        """Stop writing to the pipe: call before closing it."""
        self.attach(-1)

    def set(self) -> None:
        super().set()
        with self._fd_lock:
            if self._wake_fd >= 0:
                try:
                    os.write(self._wake_fd, b"x")
                except OSError:  # the pipe is full: the thread is already being woken
                    pass


def read_timeout(deadline: float | None, now: float) -> float | None:
    """How long an input thread may block: until ``deadline`` (never below 0), or for input (None) without one."""
    return None if deadline is None else max(0.0, deadline - now)


def drain(fd: int) -> None:
    """Read a non-blocking pipe until it is empty."""
    try:
        while os.read(fd, 512):
            pass
    except BlockingIOError:
        pass
