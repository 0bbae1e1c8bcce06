"""One logger for gpuscope: ``logging.getLogger("gpuscope")``, a child per module (``__name__``).

Where it goes is decided once, in :func:`configure`, called by ``gpuscope.cli.main.main``:

* a file, from ``--log-file PATH`` (every command) or the environment: ``GPUSCOPE_LOG=PATH`` or
  ``GPUSCOPE_LOG=PATH:LEVEL``; ``GPUSCOPE_LOG_LEVEL=LEVEL`` sets the level too (default ``INFO``; the
  option wins over the environment for the path, an explicit ``:LEVEL`` over ``GPUSCOPE_LOG_LEVEL``);
* for headless commands only, warnings and errors also go to stderr as one line each
  (``gpuscope: warning: …``, never a traceback). While a TUI runs nothing is written to the terminal.

A record logged with ``extra=SHOWN`` (``gpuscope.core.errors``) is one the front end already shows in
its own words (a stopped recording): it goes to the file, not to stderr again. Exceptions escaping any thread
(``threading.excepthook``) are logged instead of printed.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO

from gpuscope.core.errors import SHOWN, GpuscopeError
from gpuscope.core.redact import redact_text

ROOT = "gpuscope"
LEVELS = {"DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARNING": logging.WARNING, "WARN": logging.WARNING,
          "ERROR": logging.ERROR}
FILE_FORMAT = "%(asctime)s %(levelname)-7s %(threadName)s %(name)s: %(message)s"
_MANAGED = "_gpuscope_managed"  # marks the handlers configure() added, so a second call replaces them


@dataclass(frozen=True)
class LogConfig:
    """Where the log goes: ``path`` (None: no file) at ``level``."""

    path: str | None = None
    level: int = logging.INFO


def parse_level(text: str) -> int:
    """``debug``/``INFO``/… to a logging level; anything else is a GpuscopeError."""
    level = LEVELS.get(text.strip().upper())
    if level is None:
        raise GpuscopeError(f"unknown log level {text!r}: expected one of debug, info, warning, error")
    return level


def log_config(log_file: str | None, env: Mapping[str, str]) -> LogConfig:
    """The file and level from ``--log-file`` and ``GPUSCOPE_LOG`` / ``GPUSCOPE_LOG_LEVEL``.

    ``GPUSCOPE_LOG=PATH:LEVEL`` is split at the last colon only when what follows is a level name,
    so a path holding a colon still works."""
    level_text = env.get("GPUSCOPE_LOG_LEVEL", "").strip()
    path = log_file
    spec = env.get("GPUSCOPE_LOG", "").strip()
    if spec:
        head, sep, tail = spec.rpartition(":")
        if sep and head and tail.strip().upper() in LEVELS:
            spec, level_text = head, tail
        if path is None:
            path = spec
    return LogConfig(path=path or None, level=parse_level(level_text) if level_text else logging.INFO)


class Redacting(logging.Formatter):
    """The file's lines, tracebacks included, with every URL's ``user:password@`` and secret-like query
    value removed (core/redact.py): a message that quotes a URL cannot put a password in the log."""

    def format(self, record: logging.LogRecord) -> str:
        return redact_text(super().format(record))


class OneLine(logging.Formatter):
    """``gpuscope: warning: message`` and nothing else (no traceback) for the terminal, redacted as the file."""

    def format(self, record: logging.LogRecord) -> str:
        return redact_text(f"gpuscope: {record.levelname.lower()}: {record.getMessage()}")


if TYPE_CHECKING:  # typeshed's StreamHandler is generic in its stream; at run time subscriptable only from 3.11
    _StreamHandler = logging.StreamHandler[TextIO]
else:
    _StreamHandler = logging.StreamHandler


class _Stderr(_StreamHandler):
    """Writes to whatever ``sys.stderr`` is when a record comes (it may be replaced after configure)."""

    def __init__(self, stream: TextIO | None = None):
        self._fixed = stream
        super().__init__(stream)

    @property
    def stream(self) -> TextIO:
        return self._fixed if self._fixed is not None else sys.stderr

    @stream.setter
    def stream(self, value: TextIO | None) -> None:
        pass


def _not_shown(record: logging.LogRecord) -> bool:
    return not all(getattr(record, k, None) == v for k, v in SHOWN.items())


def configure(cfg: LogConfig, *, terminal: bool, stderr: TextIO | None = None) -> logging.Logger:
    """Attach the handlers ``cfg`` asks for to the ``gpuscope`` logger (replacing earlier ones).

    ``terminal``: also send warnings to stderr as one line each (headless commands); False while a TUI
    runs. A log file that cannot be opened is a GpuscopeError."""
    logger = logging.getLogger(ROOT)
    for h in list(logger.handlers):
        if getattr(h, _MANAGED, False):
            logger.removeHandler(h)
            h.close()
    levels = [logging.CRITICAL]
    if cfg.path:
        try:
            fh: logging.Handler = logging.FileHandler(cfg.path, encoding="utf-8")
        except OSError as e:
            raise GpuscopeError(f"cannot write the log file {cfg.path}: {e.strerror or e}") from None
        fh.setLevel(cfg.level)
        fh.setFormatter(Redacting(FILE_FORMAT))
        setattr(fh, _MANAGED, True)
        logger.addHandler(fh)
        levels.append(cfg.level)
    if terminal:
        sh = _Stderr(stderr)
        sh.setLevel(logging.WARNING)
        sh.setFormatter(OneLine())
        sh.addFilter(_not_shown)
        setattr(sh, _MANAGED, True)
        logger.addHandler(sh)
        levels.append(logging.WARNING)
    if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
        logger.addHandler(logging.NullHandler())  # never Python's last-resort handler on the terminal
    logger.setLevel(min(levels))
    threading.excepthook = _log_thread_exception
    return logger


def file_of(logger: logging.Logger | None = None) -> str | None:
    """The path of the log file configured, if any."""
    for h in (logger or logging.getLogger(ROOT)).handlers:
        if isinstance(h, logging.FileHandler) and getattr(h, _MANAGED, False):
            return h.baseFilename
    return None


def _log_thread_exception(args: threading.ExceptHookArgs) -> None:
    if args.exc_type is SystemExit:
        return
    name = args.thread.name if args.thread is not None else "?"
    exc = args.exc_value if args.exc_value is not None else args.exc_type()
    logging.getLogger(ROOT).error("thread %s died: %s: %s", name, args.exc_type.__name__, exc,
                                  exc_info=(args.exc_type, exc, args.exc_traceback))


def reset() -> None:
    """Remove the handlers :func:`configure` added and restore ``threading.excepthook`` (tests)."""
    logger = logging.getLogger(ROOT)
    for h in list(logger.handlers):
        if getattr(h, _MANAGED, False):
            logger.removeHandler(h)
            h.close()
    logger.setLevel(logging.NOTSET)
    threading.excepthook = threading.__excepthook__


def env_config(log_file: str | None) -> LogConfig:
    """:func:`log_config` over this process's environment."""
    return log_config(log_file, os.environ)
