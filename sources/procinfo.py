"""Who runs a GPU process: user, short name and command line from ``/proc``, cached per pid.

NVML gives only pids (and memory); the rest comes from ``/proc/PID/status`` (``Uid:`` → the user name),
``/proc/PID/comm`` and ``/proc/PID/cmdline``. Every string is passed through :func:`clean` (a command
line is anything its owner wrote). The root is a parameter so tests use a fake ``/proc``.

NVML gives the host's pids. When gpuscope runs in a container (a PID namespace of its own) every GPU
process outside it has a pid this ``/proc`` does not hold: its user is shown as ``–`` and its command as
``(other PID namespace)``, not as an unknown ``?``. Whether this ``/proc`` is a container's is told by
pid 2: in the host's PID namespace it is the kernel's ``kthreadd``, in a container it is not there (or
is one of the container's own processes). On the host a missing pid is a process that ended between
NVML's list and the look-up, or one that ``/proc`` hides (mounted with ``hidepid``).
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from gpuscope.core.redact import redact_argv
from gpuscope.core.text import clean
from gpuscope.core.units import NONE

COMMAND_MAX = 120  # characters of a command line kept (recordings carry it every frame)
UNKNOWN_USER = "?"  # /proc shows the pid but not its owner (or a simulated process without one)
NOT_HERE_USER = NONE  # the pid is not in this /proc at all: there is no user to show
OTHER_NAMESPACE = "(other PID namespace)"  # the command of a pid missing from a container's /proc
NOT_IN_PROC = "(gone from /proc: ended, or hidden)"  # the command of a pid missing from the host's /proc


@dataclass(frozen=True, slots=True)
class ProcFacts:
    """What ``/proc`` says about one pid: ``user`` is ``"?"`` when its status could not be read, ``"–"``
    when the pid is not in ``/proc`` (then ``command`` says why, in parentheses)."""

    user: str
    name: str | None
    command: str | None


def _read(path: str, limit: int = 8192) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read(limit)
    except OSError:
        return None


def parse_uid(status: str) -> int | None:
    """The effective uid from the text of ``/proc/PID/status`` (``Uid:\\treal\\teffective\\t…``), or None."""
    for line in status.splitlines():
        if line.startswith("Uid:"):
            parts = line.split()
            try:
                return int(parts[2] if len(parts) > 2 else parts[1])
            except (IndexError, ValueError):
                return None
    return None


def user_name(uid: int, getpwuid: Callable[[int], pwd.struct_passwd] = pwd.getpwuid) -> str:
    """The login name of ``uid``; the number itself when the password database does not know it
    (a container's uid, as ``ps`` shows it)."""
    try:
        return clean(getpwuid(uid).pw_name, 32) or str(uid)
    except (KeyError, OverflowError):
        return str(uid)


def parse_cmdline(raw: bytes) -> str | None:
    """``/proc/PID/cmdline`` (NUL-separated arguments) as one cleaned line, cut to :data:`COMMAND_MAX`
    characters, its secrets redacted (``vllm serve --api-key <redacted>``: recordings and MQTT carry it);
    None when empty (a kernel thread, a zombie)."""
    args = [a for a in raw.split(b"\0") if a]
    if not args:
        return None
    return clean(" ".join(redact_argv([a.decode("utf-8", "replace") for a in args])), COMMAND_MAX) or None


def in_container(root: str = "/proc") -> bool:
    """True when ``root`` is a child PID namespace's ``/proc`` (a container): pid 2 is not ``kthreadd``."""
    comm = _read(os.path.join(root, "2", "comm"), 64)
    return comm is None or comm.strip() != b"kthreadd"


def read_facts(pid: int, root: str = "/proc", getpwuid: Callable[[int], pwd.struct_passwd] = pwd.getpwuid,
               container: bool | None = None) -> ProcFacts:
    """User, short name and command of ``pid`` under ``root``. A pid not there at all: user ``"–"``, command
    :data:`OTHER_NAMESPACE` when ``root`` is a container's (``container``; None: :func:`in_container`),
    else :data:`NOT_IN_PROC`. A pid whose status cannot be read: user ``"?"``."""
    base = os.path.join(root, str(pid))
    if not os.path.isdir(base):
        if container is None:
            container = in_container(root)
        return ProcFacts(user=NOT_HERE_USER, name=None, command=OTHER_NAMESPACE if container else NOT_IN_PROC)
    status = _read(os.path.join(base, "status"))
    uid = parse_uid(status.decode("utf-8", "replace")) if status is not None else None
    comm = _read(os.path.join(base, "comm"), 256)
    cmd = _read(os.path.join(base, "cmdline"), 4096)
    return ProcFacts(user=user_name(uid, getpwuid) if uid is not None else UNKNOWN_USER,
                     name=clean(comm.decode("utf-8", "replace").strip(), 32) or None if comm is not None else None,
                     command=parse_cmdline(cmd) if cmd is not None else None)


class ProcTable:
    """:func:`read_facts` cached per pid. A pid is read once while it stays on a GPU; :meth:`keep` forgets
    the pids that left, so a reused pid is read afresh. A pid that vanished before its first read stays
    ``"–"`` until it leaves the GPU's list. Whether ``root`` is a container's is asked once."""

    def __init__(self, root: str = "/proc", getpwuid: Callable[[int], pwd.struct_passwd] = pwd.getpwuid):
        self.root = root
        self.getpwuid = getpwuid
        self._facts: dict[int, ProcFacts] = {}
        self.reads = 0  # /proc look-ups made (for tests and benchmarks)
        self._container: bool | None = None

    def facts(self, pid: int) -> ProcFacts:
        got = self._facts.get(pid)
        if got is None:
            if self._container is None and not os.path.isdir(os.path.join(self.root, str(pid))):
                self._container = in_container(self.root)
            got = read_facts(pid, self.root, self.getpwuid, self._container)
            self.reads += 1
            self._facts[pid] = got
        return got

    def keep(self, pids: Iterable[int]) -> None:
        """Forget every pid not in ``pids`` (called after each read of the process lists)."""
        live = set(pids)
        for pid in [p for p in self._facts if p not in live]:
            del self._facts[pid]
