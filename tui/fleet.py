"""``gpuscope --broker URL``: the fleet screen, and a remote host's full view (REMOTE) fed from MQTT."""

from __future__ import annotations

import argparse
import gc
import threading
from collections.abc import Callable

from gpuscope.cli.agent import broker_config
from gpuscope.core.errors import GpuscopeError
from gpuscope.core.session import Session
from gpuscope.sources.mqtt import Subscriber
from gpuscope.tui.app import GpuscopeApp, check_terminal
from gpuscope.tui.fleet_app import FleetApp


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
            h = self.sub.hosts.get(self.host)  # one host: no snapshot of the whole fleet per frame
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
    """The fleet screen; enter opens a host (its frames subscribed while open, released when closed).
    With ``--host`` only that host's topics are subscribed."""
    check_terminal()
    cfg = broker_config(args)
    sub = Subscriber(cfg, only_host=args.host).start()  # --host: that host's topics only
    try:
        host = args.host
        selected, needle = None, ""
        while True:
            if host is None:
                fleet = FleetApp(sub, cfg, selected=selected, needle=needle)
                host = fleet.run()
                needle = fleet.last_filter
                del fleet
                if not host:
                    return 0
                selected = host
            if not args.host:
                sub.watch(host)  # subscribe to this host's frames and inventory while it is open
            try:
                _show_host(sub, host, args.interval)
            finally:
                if not args.host:
                    sub.unwatch(host)
                gc.collect()  # the closed view's session, history and app go now: flat memory across visits
            if args.host:
                return 0
            host = None
    finally:
        sub.stop()


def _show_host(sub: Subscriber, host: str, interval_s: float) -> None:
    inv = sub.wait_inventory(host, 5.0)
    if inv is None:
        raise GpuscopeError(f"no inventory from host {host!r} on the broker (is its agent running?)")
    session = Session(inv, interval_s=interval_s)
    app = GpuscopeApp(session, None, label="REMOTE", interval_s=interval_s)
    feeder = RemoteFeeder(sub, host, session, app.notify_update)
    app.feeder = feeder
    try:
        app.run()
    finally:
        feeder.stop()
