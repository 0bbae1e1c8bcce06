"""The fleet screen: every host publishing to the broker; enter opens one in the full view.

It reads only the hosts' summaries and status (the subscriber's fleet mode). The selection is a host,
`/` filters by name, and the status line says what was dropped and how old the data is.
"""

from __future__ import annotations

from rich.cells import cell_len
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Footer, Input, Static

from gpuscope.sources.mqtt import BrokerConfig, Subscriber
from gpuscope.tui.base import MonitorApp
from gpuscope.widgets.fit import fit_segments
from gpuscope.widgets.fleet_table import FleetTable, cut


def status_line(sub: Subscriber, cfg: BrokerConfig, hosts: int, width: int | None = None) -> str:
    """The fleet status line: broker, connection, hosts, bad messages and, when any, what was dropped; in
    ``width`` cells when given (long forms shortened, then the least useful parts dropped whole: a number is
    never cut)."""
    state = "connected" if sub.connected else "connecting…"
    behind = sub.health().line()
    parts: list[tuple[str, str, int]] = [  # (long form, short form, priority: 0 never dropped, higher first)
        ("gpuscope  FLEET", "FLEET", 0),
        (f"{'mqtts' if cfg.tls else 'mqtt'}://{cfg.host}:{cfg.port}", f"{cfg.host}:{cfg.port}", 3),
        (state, state, 0),
        (f"{hosts:,} hosts", f"{hosts:,} hosts", 0),
    ]
    if behind:  # what was dropped (bad or missed, one count) and how old the data is; never a count of zero
        parts.append((behind, behind.replace(" messages dropped", " dropped").replace(" message dropped", " dropped"), 1))
    if sub.tally.readings:
        parts.append((f"{sub.tally.readings} impossible readings shown as unknown",
                      f"{sub.tally.readings} unknown readings", 2))
    if sub.removed:
        parts.append((f"{sub.removed} retired", f"{sub.removed} retired", 4))
    if not sub.connected and sub.last_error:  # why it cannot connect: last, kept (cut at the end if need be)
        parts.append((sub.last_error, sub.last_error, 0))
    return fit_status(parts, width)


def fit_status(parts: list[tuple[str, str, int]], width: int | None) -> str:
    """Join ``(long, short, priority)`` parts into one line of ``width`` cells at most (None: no limit): the
    long forms when they fit, else the short forms, dropping the highest priority first (never 0); a part
    left too long (an error message) is cut with ``…`` at the end."""
    line = " " + "  ".join(p[0] for p in parts)
    if width is None or cell_len(line) <= width:
        return line
    segs = [(Text(short), prio) for _, short, prio in parts]
    out = " " + fit_segments(segs, max(1, width - 1)).plain
    return cut(out, width)


class FleetApp(MonitorApp[str | None]):
    TITLE = "gpuscope fleet"
    AUTO_FOCUS = None
    CSS = "#fleet-status { height: 1; text-wrap: nowrap; } #fleet-filter { dock: bottom; display: none; height: 3; } #fleet-filter.shown { display: block; }"
    BINDINGS = [
        Binding("q", "quit_fleet", "quit", id="quit"),
        Binding("ctrl+z", "suspend_process", "suspend", show=False, id="suspend"),  # as in a shell: fg resumes
        Binding("up,k", "move(-1)", "up", id="up"),
        Binding("down,j", "move(1)", "down", id="down"),
        Binding("pageup", "page(-1)", "page up", show=False),
        Binding("pagedown", "page(1)", "page down", show=False),
        Binding("home,g", "jump(0)", "first", show=False),
        Binding("end,G", "jump(1)", "last", show=False),
        Binding("slash", "filter", "filter", id="filter"),
        Binding("escape", "clear_filter", "clear filter", show=False),
        Binding("enter", "open", "open host", id="open"),
    ]

    def __init__(self, sub: Subscriber, cfg: BrokerConfig, selected: str | None = None, needle: str = ""):
        super().__init__()
        self.sub, self.cfg = sub, cfg
        self._start_selected, self._start_filter = selected, needle
        self.last_filter = needle

    def compose(self) -> ComposeResult:
        yield Static(id="fleet-status")
        yield FleetTable(id="fleet")
        yield Input(placeholder="filter hosts by name (enter: keep, escape: clear)", id="fleet-filter")
        yield Footer()

    def on_mount(self) -> None:
        t = self._table = self.query_one(FleetTable)
        self._status = self.query_one("#fleet-status", Static)
        self._status_shown = ""
        t.selected, t.filter = self._start_selected, self._start_filter
        self.set_interval(1.0, self.refresh_fleet)
        self.watch_hang_up()  # tui/base.py: SIGHUP and the watchdog thread end the screen (run() returns None)
        self.refresh_fleet()

    def on_unmount(self) -> None:
        self.stop_hang_up_watch()

    def on_resize(self) -> None:
        if getattr(self, "_status", None) is not None:
            self.refresh_fleet()  # the status line is fitted to the new width

    def refresh_fleet(self) -> None:
        """Once a second: the status line, and the rows in view (re-sorted only when the subscriber says the
        order may have changed)."""
        sub = self.sub
        line = status_line(sub, self.cfg, len(sub.hosts), self.size.width or 80)
        if line != self._status_shown:
            self._status_shown = line
            self._status.update(line)
        gen = sub.order_gen  # read before the snapshot: a change in between re-sorts next time
        table = self._table
        table.show(sub.snapshot() if table.needs_sort(gen) else None, gen, broker_up=not sub.broker_down)

    def action_move(self, d: int) -> None:
        self.query_one(FleetTable).move(d)  # re-renders the rows in view only: no re-sort

    def action_page(self, d: int) -> None:
        t = self.query_one(FleetTable)
        t.move(d * t.rows)

    def action_jump(self, end: int) -> None:
        self.query_one(FleetTable).jump(bool(end))

    def action_filter(self) -> None:
        box = self.query_one("#fleet-filter", Input)
        box.value = self.query_one(FleetTable).filter
        box.add_class("shown")
        box.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        t = self.query_one(FleetTable)
        t.filter = event.value.strip()
        t.show(self.sub.snapshot(), self.sub.order_gen)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self._close_filter()

    def _close_filter(self) -> None:
        box = self.query_one("#fleet-filter", Input)
        box.remove_class("shown")
        self.set_focus(None)

    def action_clear_filter(self) -> None:
        t = self.query_one(FleetTable)
        self.query_one("#fleet-filter", Input).value = ""
        t.filter = ""
        self._close_filter()
        t.show(self.sub.snapshot(), self.sub.order_gen)

    def action_open(self) -> None:
        t = self.query_one(FleetTable)
        if t.selected is not None:
            self.last_filter = t.filter  # the fleet screen comes back with the same filter and selection
            self.exit(t.selected)

    def action_quit_fleet(self) -> None:
        self.exit(None)
