"""Shared state handed to every panel: what to draw, never how to fetch it.

Everything here is typed and immutable except the ``history`` the panels read (a ring buffer too large
to copy each refresh): the App builds a :class:`ViewState` and draws it while holding the session lock.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gpuscope.core.findings import Finding
from gpuscope.core.history import History
from gpuscope.core.model import Frame, Inventory
from gpuscope.core.session import TickErrors

if TYPE_CHECKING:
    from gpuscope.core.probe import ProbeResult  # the live screen loads no probe code until one runs


@dataclass(frozen=True)
class RecordingStatus:
    """The recording in progress, as the status bar shows it."""

    path: str
    elapsed_s: float = 0.0  # wall-clock seconds since it started
    frames: int = 0  # frames on disk so far
    dropped: int = 0  # frames the writer's queue refused (a stalled disk)


@dataclass(frozen=True)
class StatusInfo:
    """The status bar's facts: sampling, recording, errors, where the data comes from."""

    interval_s: float = 1.0
    paused: bool = False
    recording: RecordingStatus | None = None
    record_error: str | None = None  # why the last recording stopped early
    origin_note: str = ""  # replay: the file and whether it is simulated
    origin_name: str = ""  # replay: the file's name alone (what a narrow header shows of origin_note)
    tick_errors: TickErrors = field(default_factory=TickErrors)


@dataclass(frozen=True)
class ReplayStatus:
    """Where a replay stands, for the timeline (times are the recording's epoch seconds)."""

    t0: float
    t1: float
    position: float
    speed: float
    playing: bool
    marks: tuple[tuple[float, str], ...] = ()  # (t, "marker" | "finding")


@dataclass
class ViewState:
    """A snapshot the App builds once per refresh and gives to each panel."""

    inventory: Inventory
    frame: Frame | None
    history: History
    findings: list[Finding]
    window_s: float = 60.0
    now: float = 0.0
    label: str = "LIVE"  # LIVE | SIMULATED | REPLAY | REMOTE
    graphs: bool = True  # redraw graphs this time (they refresh about once a second)
    status: StatusInfo = field(default_factory=StatusInfo)
    replay: ReplayStatus | None = None
    probe: ProbeResult | None = None  # the last link probe run from the palette (shown in the topology panel)
