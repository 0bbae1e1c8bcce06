"""The replay's keys: speed, seek, the edges and the marks (n/N). Live, they do nothing."""

from __future__ import annotations

from gpuscope.tui.main_base import MainBase


class ReplayKeys(MainBase):
    """Seek and speed keys of the main screen; each seek is decoded on the replay thread, never here."""

    _mark_said: str | None = None  # the mark label n/N put on the message line (a seek clears it)

    def action_speed(self, d: int) -> None:
        if (r := self._replayer) is not None:
            r.faster(d > 0)

    def action_seek(self, s: int) -> None:
        if (r := self._replayer) is not None:
            r.request_seek(r.target + s)
            self._forget_mark_label()

    def action_seek_edge(self, end: int) -> None:
        if (r := self._replayer) is not None:
            r.request_seek(r.t1 if end else r.t0)
            self._forget_mark_label()

    def _forget_mark_label(self) -> None:
        """A seek leaves the mark that n/N named: its label ("+4s phase: idle") stayed on screen at 34 s,
        in another phase, until the next n/N."""
        said = self._mark_said
        if said is not None and self.message_line == said:
            self.say("")
        self._mark_said = None

    def action_jump(self, forward: int) -> None:
        if (r := self._replayer) is not None:
            said = r.jump_mark(bool(forward))  # the mark's label on screen: the timeline only shows a tick
            self.message_line = said if said is not None else f"no {'later' if forward else 'earlier'} mark"
            self._mark_said = self.message_line
            self.refresh_view()
