"""``gpuscope --broker URL``: the fleet screen, and a remote host's full view (REMOTE) fed from MQTT."""

from __future__ import annotations

import gc
import os
from collections.abc import Callable

from textual.binding import Binding

from gpuscope.core.errors import GpuscopeError
from gpuscope.core.session import Session
from gpuscope.core.summary import finding_hints
from gpuscope.sources.mqtt import BrokerConfig, Subscriber
from gpuscope.tui.app import GpuscopeApp
from gpuscope.tui.base import check_terminal, run_app
from gpuscope.tui.fleet_app import FleetApp
from gpuscope.tui.hangup import terminal_gone
from gpuscope.tui.workers import Worker
from gpuscope.widgets.textual_private import release_style_caches


class RemoteFeeder(Worker):
    """Feeds one remote host's frames (from the subscriber) into a Session, like live sampling
    (thread ``gpuscope-remote``, owned by the App like every feeder)."""

    label = "REMOTE"

    def __init__(self, sub: Subscriber, host: str, session: Session, on_update: Callable[[], None]):
        super().__init__("gpuscope-remote", on_update)
        self.sub, self.host, self.session = sub, host, session

    def run(self) -> None:
        seen = 0
        while not self._stop.is_set():
            f = self.sub.wait_frame(self.host, seen, 1.0)
            h = self.sub.hosts.get(self.host)  # one host: no snapshot of the whole fleet per frame
            if f is not None and h is not None:
                seen = h.frames
                try:
                    self.session.ingest(f)
                except Exception as e:  # noqa: BLE001 - counted and shown; the next frame may be fine
                    self.session.tick_failed(e)
                self.error = None
            elif h is not None and self.sub.broker_down:  # nobody can say whether the host is up
                self.error = f"{self.host}: unknown (broker down" + (f": {self.sub.last_error})" if self.sub.last_error
                                                                     else ")")
            elif h is not None and not h.online:
                self.error = f"{self.host} is offline"
            self.on_update()


class FleetHostApp(GpuscopeApp):
    """A host's REMOTE view opened from the fleet screen: ``q`` and ``esc`` go back to the fleet (the keybar and
    the help say so)."""

    BINDINGS = [Binding("q,escape", "quit", "back to fleet", id="quit") if isinstance(b, Binding) and b.id == "quit"
                else b for b in GpuscopeApp.BINDINGS]

    def _hints(self) -> list[tuple[str, str]]:
        return [("q", "back to fleet") if k == "q" else (k, what) for k, what in super()._hints()]


def release_closed_app() -> None:
    """Let a closed app's widgets and their rendered lines go (call between apps: flat memory across visits).

    Textual's ``StylesCache.get_inner_outer`` is an ``lru_cache`` (1,024 entries) on a method: its key holds the
    widget's StylesCache, and with it every line the widget last rendered, after the widget and its app are
    gone. Measured (benchmarks/bench_fleet_visits.py, fleet screen → host → back): ~1 MB per visit until the
    cap, reached after ~50 visits, 55 MB above what the viewer needs (docs/mqtt.md). Clearing it costs the
    next app a few recomputed colour pairs.
    """
    release_style_caches()  # widgets/textual_private.py: only on the Textual it was written for
    gc.collect()


def run_fleet(config: Callable[[], BrokerConfig], only: str | None = None, interval_s: float = 1.0) -> int:
    """The fleet screen of the broker ``config()`` names (called once a terminal is known to be there); enter opens
    a host (its frames subscribed while open, released when closed). With ``only`` (``--host``) only that host's
    topics are subscribed and its view opens at once."""
    check_terminal()
    cfg = config()
    sub = Subscriber(cfg, only_host=only).start()  # --host: that host's topics only
    try:
        host = only
        selected, needle = None, ""
        ppid = os.getppid()
        while True:
            if terminal_gone(ppid):  # the terminal went away while a screen was closing: start no other
                return 0
            if host is None:
                fleet = FleetApp(sub, cfg, selected=selected, needle=needle)
                host = fleet.run()
                needle = fleet.last_filter
                hung_up = fleet.hung_up
                del fleet
                release_closed_app()
                if not host or hung_up:
                    return 0
                selected = host
            if not only:
                sub.watch(host)  # subscribe to this host's frames and inventory while it is open
            try:
                hung_up = _show_host(sub, host, interval_s, from_fleet=not only)
            finally:
                if not only:
                    sub.unwatch(host)
                release_closed_app()  # the closed view's session, history and app go now: flat memory across visits
            if only or hung_up:  # the terminal went away: never start another app without one
                return 0
            host = None
    finally:
        sub.stop()


def prime_from_agent(sub: Subscriber, host: str, session: Session) -> int:
    """Give the view's findings engine the agent's active findings (its retained summary): a finding the view's
    rules see in the first frame is shown at once with the agent's since-time, as the fleet row says, not
    after the view's own 5 s hold. Returns how many findings were primed."""
    h = sub.hosts.get(host)
    s = h.summary if h is not None else None
    if s is None:
        return 0
    hints = finding_hints(s)
    with session.lock:
        session.findings.prime(hints)
    return len(hints)


def _show_host(sub: Subscriber, host: str, interval_s: float, from_fleet: bool = False) -> bool:
    """Run the REMOTE view of ``host`` until it closes (``from_fleet``: q and esc go back to the fleet); True
    when its terminal went away."""
    inv = sub.wait_inventory(host, 5.0)
    if inv is None:
        if sub.broker_down:
            raise GpuscopeError(f"cannot read host {host!r}: the broker is down ({sub.last_error})")
        raise GpuscopeError(f"no inventory from host {host!r} on the broker (is its agent running?)")
    session = Session(inv, interval_s=interval_s)
    prime_from_agent(sub, host, session)
    app = (FleetHostApp if from_fleet else GpuscopeApp)(session, None, label="REMOTE", interval_s=interval_s)
    feeder = RemoteFeeder(sub, host, session, app.notify_update)
    app.feeder = feeder
    try:
        run_app(app)
    finally:
        feeder.stop()
    return bool(app.hung_up)
