"""One error policy: every error a user may see is a :class:`GpuscopeError` whose message is the line shown.

Sources and commands raise subclasses (a damaged recording, a bad scenario, an unreachable broker, NVML
missing); ``gpuscope.cli.main.main`` catches them once and prints ``gpuscope: error: <message>`` on stderr
with exit status 1. Anything else is a bug: it is logged with its traceback to the log file and reported
as one line too.
"""

from __future__ import annotations


class GpuscopeError(Exception):
    """An error whose ``str()`` is the one line the user sees (no traceback)."""
