"""What the main screen's parts share: its state and toggles, declared once, so the key handlers
(tui/probe_keys.py, tui/replay_keys.py) and the layout controller read the App without importing it.

:class:`MainBase` holds no behaviour of its own beyond the replay properties and ``say``; ``build_view`` and
``refresh_view`` are the App's (tui/app.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from textual.reactive import var

from gpuscope.tui.base import MonitorApp
from gpuscope.tui.feeders import ReplayFeeder

if TYPE_CHECKING:
    from gpuscope.core.session import Session
    from gpuscope.core.view import ViewState
    from gpuscope.tui.workers import Worker


class Relayout(Protocol):
    """The part of the layout controller the key handlers use."""

    def relayout(self) -> None: ...


class MainBase(MonitorApp[int]):
    """The main screen's state: the session, its feeder, the message line and the toggles."""

    # The toggles: setting one redraws what it changes (the App's watch_*); init=False: nothing runs at mount.
    paused: var[bool] = var(False, init=False)  # live: the display stopped (replay: the feeder pauses)
    compact: var[bool | None] = var(None, init=False, always_update=True)  # None: as the size allows
    window_s: var[float] = var(60.0, init=False)  # the graphs' history window, seconds
    show_processes: var[bool] = var(False, init=False)  # the processes panel (P)

    session: Session
    feeder: Worker | None
    message_line: str
    layout_control: Relayout

    @property
    def replay(self) -> bool:
        """Whether this screen replays a recording (else it watches live or a remote host)."""
        return self._replayer is not None

    @property
    def _replayer(self) -> ReplayFeeder | None:
        return self.feeder if isinstance(self.feeder, ReplayFeeder) else None

    def say(self, line: str) -> None:
        """Put ``line`` on the message line and redraw."""
        self.message_line = line
        self.refresh_view(force=True)

    def build_view(self, graphs: bool) -> ViewState:
        """The view of this instant (the App's)."""
        raise NotImplementedError

    def refresh_view(self, force: bool = False) -> None:
        """Draw the view of this instant (the App's)."""
        raise NotImplementedError

    def _hints(self) -> list[tuple[str, str]]:
        """Footer hints, most important first (the App's)."""
        raise NotImplementedError
