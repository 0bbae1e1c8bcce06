"""Checks on paths the user names before gpuscope reads them whole."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from gpuscope.core.text import clean


def not_a_regular_file(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` cannot be read as a file (a FIFO, a device, a socket: reading ``/dev/zero`` whole never
    ends and takes all memory; a FIFO blocks until someone writes), or None when it is a regular file,
    a directory or missing (the caller says those in its own words). Symbolic links are followed."""
    try:
        mode = os.stat(Path(path)).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    if stat.S_ISDIR(mode):  # before "exists (use --force)": --force cannot help there
        return "is a directory, not a file"
    if stat.S_ISFIFO(mode):
        return "is a named pipe (FIFO), not a file"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "is a device, not a file"
    if stat.S_ISSOCK(mode):
        return "is a socket, not a file"
    return "is not a regular file"


def not_writable_as_file(path: str | os.PathLike[str]) -> str | None:
    """Why gpuscope must not write its output to ``path`` even with ``--force``: a named pipe (opening it
    blocks until a reader comes, forever when none does), a socket or a directory; None otherwise (a regular file, a
    device such as ``/dev/null``, or nothing there yet). Symbolic links are followed."""
    try:
        mode = os.stat(Path(path)).st_mode
    except OSError:
        return None
    if stat.S_ISDIR(mode):  # before "exists (use --force)": --force cannot help there
        return "is a directory, not a file"
    if stat.S_ISFIFO(mode):
        return "is a named pipe (FIFO), not a file"
    if stat.S_ISSOCK(mode):
        return "is a socket, not a file"
    return None


def read_error(e: OSError, folder: str = "is a folder") -> str:
    """Why reading a file the user named failed, in a few words: "no such file", ``folder`` for a directory,
    else "cannot read (the system's reason)"."""
    if isinstance(e, FileNotFoundError):
        return "no such file"
    if isinstance(e, IsADirectoryError):
        return folder
    return f"cannot read ({clean(e.strerror or str(e), 60)})"
