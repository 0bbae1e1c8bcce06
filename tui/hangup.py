"""Is the terminal still there? Shared by every front end's watchdog (live, replay, demo, fleet, REMOTE)."""

from __future__ import annotations

import errno
import os
import sys
import termios


def terminal_gone(ppid: int) -> bool:
    """True when the terminal went away: the parent changed (we were re-parented: the shell or tmux died)
    or the controlling terminal hung up (``tcgetattr`` gives EIO). Not a terminal at all (tests) is fine."""
    if os.getppid() != ppid:
        return True
    for stream in (sys.__stdin__, sys.__stderr__):
        try:
            if stream is not None:
                termios.tcgetattr(stream.fileno())
        except termios.error as e:
            if e.args[0] == errno.EIO:
                return True
        except (OSError, ValueError):
            pass
    return False
