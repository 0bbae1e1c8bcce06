"""One error policy: every error a user may see is a :class:`GpuscopeError` whose message is the line shown.

Sources and commands raise subclasses (a damaged recording, a bad scenario, an unreachable broker, NVML
missing); ``gpuscope.cli.main.main`` catches them once and prints ``gpuscope: error: <message>`` on stderr
with exit status 1. Anything else is a bug: it is logged with its traceback to the log file (if any) and
reported as one line (``gpuscope: internal error: …``), exit status 1.

Logging: every module logs to ``logging.getLogger(__name__)`` (children of ``gpuscope``); where the log
goes is decided once by ``gpuscope.cli.logs.configure``. A record logged with ``extra=SHOWN`` is one the
front end already shows the user in its own words: it goes to the log file but not again to stderr.
"""

from __future__ import annotations

from typing import Any

SHOWN: dict[str, Any] = {"shown": True}


class GpuscopeError(Exception):
    """An error whose ``str()`` is the one line the user sees (no traceback). ``exit_status`` is the
    process's exit status (1; a command that cannot be run gives the shell's 127 / 126)."""

    exit_status = 1

    def __init__(self, *args: object, exit_status: int | None = None):
        super().__init__(*args)
        if exit_status is not None:
            self.exit_status = exit_status


def one_line(exc: BaseException, limit: int = 160) -> str:
    """``Type: first line of the message``, cut to ``limit`` characters (for a status bar or stderr)."""
    text = str(exc).strip()
    msg = text.splitlines()[0] if text else ""
    out = f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__
    return out if len(out) <= limit else out[: limit - 1] + "…"
