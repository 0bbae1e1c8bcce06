"""What a findings rule returns: one :class:`Candidate` per condition it sees in one evaluation.

Its own module so that every module of rules (``core/findings.py``, ``core/health.py``,
``core/group_paths.py``) can build candidates while the engine imports the rules, without a circle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Candidate:
    """What a rule sees in one evaluation."""

    id: str
    rule: str
    severity: str
    subject: str  # "GPU0", "GPU0-GPU1", "server"
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)
    variant: str = ""  # the wording class: a change of it (or of severity) is a finding_changed event
    basis: str = "avg"  # what the numbers are: avg (5 s average), live (this reading), window, static
