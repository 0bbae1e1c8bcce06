"""``gpuscope --broker URL``: the fleet screen, and a remote host's full view (REMOTE) fed from MQTT."""

from __future__ import annotations

import argparse
import os
import threading
from collections.abc import Callable

from gpuscope.cli.agent import broker_config
from gpuscope.core.errors import GpuscopeError
from gpuscope.core.session import Session
from gpuscope.sources.mqtt import Subscriber
from gpuscope.tui.app import GpuscopeApp, check_terminal
from gpuscope.tui.fleet_app import FleetApp
from gpuscope.tui.hangup import terminal_gone


class RemoteFeeder:
    """Feeds one remote host's frames (from the subscriber) into a Session, like live sampling."""

    label = "REMOTE"

    def __init__(self, sub: Subscriber, host: str, session: Session, on_update: Callable[[], None]):
        self.sub, self.host, self.session, self.on_update = sub, host, session, on_update
        self.error: str | None = None
        self.session_lock = threading.RLock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="gpuscope-remote")

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        seen = 0
        while not self._stop.is_set():
            f = self.sub.wait_frame(self.host, seen, 1.0)
            h = next((x for x in self.sub.snapshot() if x.host == self.host), None)
            if f is not None and h is not None:
                seen = h.frames
                with self.session_lock:
                    self.session.ingest(f)
                self.error = None
            elif h is not None and not h.online:
                self.error = f"{self.host} is offline" + (f" (broker: {self.sub.last_error})" if self.sub.last_error
                                                          else "")
            self.on_update()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)




def run_fleet(args: argparse.Namespace) -> int:

    check_terminal()
    cfg = broker_config(args)
    sub = Subscriber(cfg).start()
    try:
        host = args.host
        ppid = os.getppid()
        while True:
            if terminal_gone(ppid):  # the terminal went away while a screen was closing: start no other
                return 0
            if host is None:
                fleet = FleetApp(sub, cfg)
                host = fleet.run()
                if not host or fleet.hung_up:
                    return 0
            inv = sub.wait_inventory(host, 5.0)
            if inv is None:
                raise GpuscopeError(f"no inventory from host {host!r} on the broker (is its agent running?)")
            session = Session(inv, interval_s=args.interval)
            app = GpuscopeApp(session, None, label="REMOTE", interval_s=args.interval)
            app.feeder = RemoteFeeder(sub, host, session, app.notify_update)
            app.run()
            if args.host or app.hung_up:  # the terminal went away: never start another app without one
                return 0
            host = None
    finally:
        sub.stop()


