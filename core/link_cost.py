"""What the link costs each token (issue 39 point 2): being written."""

from __future__ import annotations

from collections.abc import Sequence

from gpuscope.core.candidate import Candidate
from gpuscope.core.model import Frame, Inventory


def rule_link_cost(inv: Inventory, frames: Sequence[Frame]) -> list[Candidate]:
    """The findings-engine rule (``link_cost``)."""
    return []
