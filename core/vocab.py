"""One vocabulary for every front end (TUI, ``topo``, ``summary``, ``export``, the exporter).

Each word gpuscope shows is defined once here: severity marks and order.
"""

from __future__ import annotations

SEVERITIES = ("critical", "warning", "info")
SEV_RANK = {s: k for k, s in enumerate(SEVERITIES)}
SEV_MARK = {"critical": "✖", "warning": "▲", "info": "●"}
