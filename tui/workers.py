"""The TUI's worker threads: one base class, one owner.

Every thread the Textual front end starts is a :class:`Worker` (the feeders: ``gpuscope-sampler``,
``gpuscope-replay``, ``gpuscope-remote``). The App owns exactly one feeder: it starts it in ``on_mount``
and stops it in ``on_unmount``; stopping a feeder joins its thread and closes what it owns (the source,
whose own threads, the NVML pool and the endpoint poller, stop with it). The recorder's writer thread
is owned by the recorder and joined by ``Session.stop_recording``. See docs/architecture.md.

A worker never lets an exception escape to the terminal: it is logged and kept in :attr:`Worker.error`
(shown on screen).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from gpuscope.core.errors import one_line

log = logging.getLogger(__name__)


class Worker:
    """A named daemon thread with a stop event. Subclasses implement :meth:`run` and poll ``_stop``."""

    label = ""

    def __init__(self, name: str, on_update: Callable[[], None]):
        self.name = name
        self.on_update = on_update
        self.error: str | None = None  # one line for the screen when the worker has a problem
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def stop(self, timeout_s: float = 2.0) -> None:
        """Ask the thread to stop, wait up to ``timeout_s`` for it, then release what it owns."""
        self._stop.set()
        self._wake()
        if self._thread.is_alive():
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                log.warning("%s did not stop within %g s", self.name, timeout_s)
        try:
            self._release()
        except Exception:  # noqa: BLE001 - closing must not fail the exit
            log.exception("%s: releasing its resources failed", self.name)

    def run(self) -> None:
        raise NotImplementedError

    def _wake(self) -> None:
        """Interrupt a wait other than ``_stop`` (subclasses)."""

    def _release(self) -> None:
        """Close what the worker owns, after its thread ended (subclasses)."""

    def _main(self) -> None:
        try:
            self.run()
        except Exception as e:  # noqa: BLE001 - logged and shown, never a traceback on the terminal
            log.exception("%s stopped", self.name)
            self.error = f"{self.name.removeprefix('gpuscope-')} stopped: {one_line(e)}"
            self.on_update()
