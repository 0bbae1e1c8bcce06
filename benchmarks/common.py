"""Small helpers shared by the benchmark scripts."""

from __future__ import annotations

import json
from typing import Any


def write_json(path: str | None, data: Any) -> None:
    """Write a benchmark's results as JSON when ``--json FILE`` was given."""
    if path:
        with open(path, "w") as f:
            json.dump(data, f, indent=2)
