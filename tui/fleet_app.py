"""The fleet screen: every host publishing to the broker; enter opens one in the full view."""

from __future__ import annotations

import os
import signal

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.widgets import Footer, Static

from gpuscope.sources.mqtt import BrokerConfig, Subscriber
from gpuscope.tui.hangup import exit_soon, terminal_gone
from gpuscope.widgets.fleet_table import FleetTable


class FleetApp(App[str | None]):
    TITLE = "gpuscope fleet"
    AUTO_FOCUS = None
    BINDINGS = [
        Binding("q", "quit_fleet", "quit", id="quit"),
        Binding("up,k", "move(-1)", "up", id="up"),
        Binding("down,j", "move(1)", "down", id="down"),
        Binding("enter", "open", "open host", id="open"),
    ]

    def __init__(self, sub: Subscriber, cfg: BrokerConfig):
        super().__init__()
        self.sub, self.cfg = sub, cfg
        self.hung_up = False
        self._ppid = os.getppid()

    def compose(self) -> ComposeResult:
        yield Static(id="fleet-status")
        yield FleetTable(id="fleet")
        yield Footer()

    def on_mount(self) -> None:
        self.set_interval(1.0, self.refresh_fleet)
        self.set_interval(2.0, self._watchdog)
        try:
            signal.signal(signal.SIGHUP, lambda *_: self._hang_up())
        except (ValueError, OSError):  # not the main thread (tests)
            pass
        self.refresh_fleet()

    def _watchdog(self) -> None:
        if terminal_gone(self._ppid):
            self._hang_up()

    def _hang_up(self) -> None:
        if not self.hung_up:
            self.hung_up = True
            exit_soon()  # Textual's shutdown can hang without a terminal: the process ends anyway
            self.call_later(self.exit, None)

    def refresh_fleet(self) -> None:
        s = self.sub
        state = "connected" if s.connected else f"connecting… {s.last_error or ''}"
        self.query_one("#fleet-status", Static).update(
            f" gpuscope  FLEET  {'mqtts' if self.cfg.tls else 'mqtt'}://{self.cfg.host}:{self.cfg.port}  {state}  "
            f"{len(s.hosts)} hosts  {s.dropped} bad messages dropped"
            + (f"  {s.tally.readings} impossible readings shown as unknown" if getattr(s, "tally", None)
               and s.tally.readings else ""))
        self.query_one(FleetTable).show(s.snapshot())

    def action_move(self, d: int) -> None:
        t = self.query_one(FleetTable)
        if t.order:
            t.selected = (t.selected + d) % len(t.order)
            self.refresh_fleet()

    def action_open(self) -> None:
        t = self.query_one(FleetTable)
        if t.order:
            self.exit(t.order[t.selected])

    def action_quit_fleet(self) -> None:
        self.exit(None)
