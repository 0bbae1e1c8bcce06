"""The slow rank in a serving group (issue 39 point 3): being written."""

from __future__ import annotations

from collections.abc import Sequence

from gpuscope.core.candidate import Candidate
from gpuscope.core.model import Frame, Inventory


def rule_slow_rank(inv: Inventory, frames: Sequence[Frame]) -> list[Candidate]:
    """The findings-engine rule (``slow_rank``)."""
    return []
