"""Shared state handed to every panel: what to draw, never how to fetch it."""

from __future__ import annotations

from dataclasses import dataclass, field

from gpuscope.core.findings import Finding
from gpuscope.core.history import History
from gpuscope.core.model import Frame, Inventory


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
    extra: dict[str, object] = field(default_factory=dict)
