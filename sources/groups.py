"""Serving groups from this machine's ``/proc``: who listens on an endpoint's port, its child processes, the
GPUs they hold (NVML's process lists, already in the frame), their container or pod.

Reads only what the monitor may read: another user's ``/proc/PID/fd`` is unreadable unless we are root, and
then the group says so (``note``) instead of guessing; nothing asks for more privilege. The root is a
parameter (``root``) so tests can give a fake ``/proc`` tree as well as the real one. The parsing is in
:mod:`gpuscope.core.groups`; this module only reads files.

Cost: the listener look-up scans ``/proc/net/tcp{,6}`` and the fds of the GPU processes and their
ancestors; a full scan of every process's fds happens only when that fails, at most every
:data:`FULL_SCAN_S`. Groups are rebuilt when the GPU processes or endpoints change, else every
:data:`REFRESH_S` (:data:`REFRESH_NO_ENDPOINT_S` without an endpoint: then a group is the GPU processes, their
ancestors and commands, which rarely change while the processes stay: a parent that exits or a process that renames
itself shows up to that late).
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any

from gpuscope.core.groups import (
    MAX_DEPTH,
    Claim,
    ProcView,
    ancestors,
    build_groups,
    descendants,
    endpoint_address,
    gpu_pids,
    parse_cgroup,
    parse_net_tcp,
    parse_nspid,
    parse_stat_ppid,
    socket_inode,
    split_cmdline,
)
from gpuscope.core.model import EndpointReading, Frame, ServingGroup
from gpuscope.core.text import clean

log = logging.getLogger(__name__)

REFRESH_S = 5.0  # groups are rebuilt at least this often (NVML's process lists are read every 5 s)
# without an endpoint: no listener to find or TP size to learn, only the GPU processes' ancestry and commands (a
# rebuild reads ~10 /proc files: ~0.45 ms of CPU on the H200 host)
REFRESH_NO_ENDPOINT_S = 30.0
FULL_SCAN_S = 30.0  # a scan of every process's fds for an unplaced listener, at most this often
MAX_FDS = 65536  # fds looked at per process at most


def _read(path: str, limit: int = 65536) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read(limit)
    except OSError:
        return None


def _text(path: str, limit: int = 1 << 20) -> str | None:
    raw = _read(path, limit)
    return raw.decode("utf-8", "replace") if raw is not None else None


class ProcReader:
    """File reads under ``root`` (default ``/proc``), each returning None / empty when not readable."""

    def __init__(self, root: str = "/proc"):
        self.root = root

    def listeners(self, pid: int | None = None) -> dict[int, set[int]]:
        """Listening TCP ports → socket inodes, from ``net/tcp`` and ``net/tcp6`` (this network namespace's,
        or ``pid``'s when given)."""
        base = os.path.join(self.root, str(pid)) if pid is not None else self.root
        out: dict[int, set[int]] = {}
        for name in ("tcp", "tcp6"):
            text = _text(os.path.join(base, "net", name), 8 << 20)
            for ln in parse_net_tcp(text or ""):
                if ln.inode:
                    out.setdefault(ln.port, set()).add(ln.inode)
        return out

    def socket_inodes(self, pid: int) -> set[int] | None:
        """The socket inodes ``pid`` holds open; None when its fds may not be read (another user's
        process and we are not root) or it is gone."""
        fd_dir = os.path.join(self.root, str(pid), "fd")
        try:
            names = os.listdir(fd_dir)
        except OSError:
            return None
        out = set()
        for name in names[:MAX_FDS]:
            try:
                target = os.readlink(os.path.join(fd_dir, name))
            except OSError:
                continue
            ino = socket_inode(target)
            if ino is not None:
                out.add(ino)
        return out

    def pids(self) -> list[int]:
        try:
            return [int(n) for n in os.listdir(self.root) if n.isdigit()]
        except OSError:
            return []

    def ppid(self, pid: int) -> int | None:
        text = _text(os.path.join(self.root, str(pid), "stat"), 4096)
        return parse_stat_ppid(text) if text is not None else None

    def ppids(self) -> dict[int, int]:
        out = {}
        for pid in self.pids():
            pp = self.ppid(pid)
            if pp is not None:
                out[pid] = pp
        return out

    def ancestry(self, pids: Iterable[int]) -> dict[int, int]:
        """pid → parent pid for ``pids`` and their ancestors only (what :func:`ancestors` follows): a few
        reads instead of one per process on the machine (3.6 ms of CPU a build on the H200 host)."""
        out: dict[int, int] = {}
        for pid in pids:
            p: int | None = pid
            for _ in range(MAX_DEPTH + 1):  # the chain ancestors() follows, and no further
                if p is None or p <= 1 or p in out:
                    break
                pp = self.ppid(p)
                if pp is None:
                    break
                out[p] = pp
                p = pp
        return out

    def nspid(self, pid: int) -> tuple[int, ...]:
        text = _text(os.path.join(self.root, str(pid), "status"), 16384)
        return parse_nspid(text) if text is not None else ()

    def args(self, pid: int) -> list[str]:
        raw = _read(os.path.join(self.root, str(pid), "cmdline"), 16384)
        return split_cmdline(raw) if raw is not None else []

    def name(self, pid: int) -> str | None:
        raw = _read(os.path.join(self.root, str(pid), "comm"), 256)
        return clean(raw.decode("utf-8", "replace").strip(), 32) or None if raw is not None else None

    def container(self, pid: int) -> str | None:
        text = _text(os.path.join(self.root, str(pid), "cgroup"), 65536)
        return parse_cgroup(text) if text is not None else None


def is_local_host(host: str, resolve: Callable[[str], list[str]] | None = None) -> bool:
    """True when ``host`` names this machine: ``localhost``, this host's name, or an address this
    machine has (an address we can bind a socket to; never a network request). A name is resolved with
    ``resolve`` (default: the system resolver, once per name by the caller's cache)."""
    h = host.strip("[]").lower()
    if not h or h in ("localhost", "localhost.localdomain", "ip6-localhost"):
        return True
    if _is_ip(h):
        return _bindable(h)
    if h == socket.gethostname().lower():  # never getfqdn(): a reverse DNS look-up can block for seconds
        return True
    addrs = (resolve or _resolve)(h)
    return any(_bindable(a) for a in addrs)


def _is_ip(h: str) -> bool:
    for fam in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(fam, h)
            return True
        except OSError:
            continue
    return False


def _resolve(h: str) -> list[str]:
    try:
        return sorted({str(ai[4][0]) for ai in socket.getaddrinfo(h, None)})
    except OSError:
        return []


def _bindable(addr: str) -> bool:
    fam = socket.AF_INET6 if ":" in addr else socket.AF_INET
    try:
        with socket.socket(fam, socket.SOCK_STREAM) as s:
            s.bind((addr, 0))
        return True
    except OSError:
        return False


class GroupFinder:
    """Builds the serving groups of a frame's endpoints and GPU processes from ``/proc`` (see the module
    docstring for what it reads and how often). ``parallel(url)`` gives TP/PP sizes from an endpoint's own
    metrics (the poller's, where it saw them)."""

    def __init__(self, root: str = "/proc", *, parallel: Callable[[str], tuple[int | None, int | None]] | None = None,
                 clock: Callable[[], float] = time.monotonic, resolve: Callable[[str], list[str]] | None = None):
        self.reader = ProcReader(root)
        self.parallel = parallel
        self.clock = clock
        self.resolve = resolve
        self._local: dict[str, bool] = {}
        self._key: Any = None
        self._at = -1e18
        self._groups: tuple[ServingGroup, ...] = ()
        self._full_scan_at = -1e18
        self._inode_owner: dict[int, int] = {}  # socket inode → pid, from the last full scan
        self.scans = 0  # full fd scans made (tests)

    def groups(self, frame: Frame) -> tuple[ServingGroup, ...]:
        """The groups for this frame: cached while its GPU processes and endpoints stay the same (at most
        :data:`REFRESH_S`, or :data:`REFRESH_NO_ENDPOINT_S` without an endpoint)."""
        held = gpu_pids(frame.gpus)
        eps = _unique_endpoints(frame.endpoints)
        key = (tuple(sorted((p, tuple(sorted(g))) for p, g in held.items())),
               tuple((e.url, e.kind, e.model) for e in eps))
        now = self.clock()
        if key != self._key or now - self._at >= (REFRESH_S if eps else REFRESH_NO_ENDPOINT_S) or now < self._at:
            try:
                self._groups = self.build(eps, held)
            except Exception:  # a /proc surprise must never stop sampling
                log.exception("serving groups: /proc read failed")
                self._groups = ()
            self._key, self._at = key, now
        return self._groups

    def is_local(self, host: str) -> bool:
        got = self._local.get(host)
        if got is None:
            got = self._local[host] = is_local_host(host, self.resolve)
        return got

    def build(self, eps: Sequence[EndpointReading], held: dict[int, set[int]]) -> tuple[ServingGroup, ...]:
        r = self.reader
        # the whole tree when an endpoint's listener needs its descendants; else the GPU processes' ancestry
        ppids = r.ppids() if eps else r.ancestry(held)
        listening = r.listeners() if eps else {}
        claims = []
        socks: dict[int, set[int] | None] = {}  # pid → its socket inodes, read once per build for all endpoints
        for e in eps:
            host, port = endpoint_address(e.url)
            tp, pp = self.parallel(e.url) if self.parallel else (None, None)
            if port is None:
                claims.append(Claim(url=e.url, port=None, local=True, why="no port in the URL", kind=e.kind,
                                    model=e.model, tp=tp, pp=pp))
                continue
            if not self.is_local(host):
                claims.append(Claim(url=e.url, port=port, local=False, kind=e.kind, model=e.model, tp=tp, pp=pp))
                continue
            pid, why = self._listener(port, listening, held, ppids, socks)
            claims.append(Claim(url=e.url, port=port, local=True, listener=pid, why=why, kind=e.kind, model=e.model,
                                tp=tp, pp=pp))
        members: set[int] = set(held)
        for c in claims:
            if c.listener is not None:
                members |= {c.listener} | descendants(c.listener, ppids)
        for p in list(held):
            members |= set(ancestors(p, ppids)[:1])
        view = ProcView(ppids=ppids)
        for p in members:
            view.args[p] = r.args(p)
            name = r.name(p)
            if name:
                view.names[p] = name
            ns = r.nspid(p)
            if len(ns) > 1:
                view.nspids[p] = ns
            where = r.container(p)
            if where:
                view.containers[p] = where
        return build_groups(claims, held, view)

    def _listener(self, port: int, listening: dict[int, set[int]], held: dict[int, set[int]],
                  ppids: dict[int, int], socks: dict[int, set[int] | None]) -> tuple[int | None, str | None]:
        """The pid holding the listening socket on ``port`` here, and why not when None (``socks``: the socket
        inodes of the pids read so far in this build, filled as they are read)."""
        inodes = listening.get(port)
        if not inodes:
            return None, f"nothing listens on port {port} in this network namespace (a container's own?)"
        r = self.reader
        candidates = dict.fromkeys(x for p in held for x in (p, *ancestors(p, ppids)))  # ordered, each once
        unreadable = 0
        for p in candidates:
            if p not in socks:
                socks[p] = r.socket_inodes(p)
            got = socks[p]
            if got is None:
                unreadable += 1
            elif got & inodes:
                return p, None
        owner = next((self._inode_owner[i] for i in inodes if i in self._inode_owner), None)
        now = self.clock()
        if owner is None and now - self._full_scan_at >= FULL_SCAN_S:
            self._full_scan_at = now
            self.scans += 1
            self._inode_owner = {}
            unreadable = 0
            for p in r.pids():
                got = r.socket_inodes(p)
                if got is None:
                    unreadable += 1
                    continue
                for i in got:
                    self._inode_owner[i] = p
            owner = next((self._inode_owner[i] for i in inodes if i in self._inode_owner), None)
        if owner is not None and (owner in ppids or r.ppid(owner) is not None):
            return owner, None
        if unreadable:
            return None, (f"the process listening on port {port} is not readable by this user "
                          "(another user's: run gpuscope as that user or root to see it)")
        return None, f"the process listening on port {port} was not found"


def _unique_endpoints(eps: Iterable[EndpointReading]) -> list[EndpointReading]:
    """One reading per URL (a server with several models gives one reading per model: the first names it)."""
    seen: dict[str, EndpointReading] = {}
    for e in eps:
        if e.url not in seen:
            seen[e.url] = e
        elif seen[e.url].model and e.model and seen[e.url].model != e.model:
            seen[e.url] = replace(seen[e.url], model=None)
    return list(seen.values())


class WithGroups:
    """A source whose frames also carry serving groups: found in ``/proc`` for a live machine
    (:class:`GroupFinder`), or declared by a simulated scenario (``servers``, a
    :class:`gpuscope.sources.simservers.SimServers`, which also adds the simulated endpoints' readings)."""

    def __init__(self, source: Any, finder: GroupFinder | None = None, servers: Any = None):
        self.source = source
        self.finder = finder
        self.servers = servers
        self.inventory = source.inventory
        self.label = source.label
        self.nvml = getattr(source, "nvml", None)

    def sample(self) -> Frame:
        frame: Frame = self.source.sample()  # source: any frame source (typed Any: NVML, simulated, replay)
        if self.servers is not None:
            frame = self.servers.add(frame)
        elif self.finder is not None:
            groups = self.finder.groups(frame)
            if groups or frame.groups:  # no groups (no GPU process, no endpoint): the frame as it came, not a copy
                frame = replace(frame, groups=groups)
        return frame

    def close(self) -> None:
        self.source.close()

    def __getattr__(self, name: str) -> Any:  # anything else the wrapped source offers (poller, nvml's clock…)
        if name == "source":
            raise AttributeError(name)
        return getattr(self.source, name)


def with_groups(source: Any, simulate: str | None = None) -> Any:
    """``source`` with serving groups: a simulated scenario's declared servers (unless real endpoints were
    given: then the scenario's servers step aside and no groups are made: its GPU processes are not on
    this machine), else /proc's. The TP/PP
    sizes a live endpoint exports in its metrics come from its poller (``source.poller``) when there is one."""
    if simulate:
        if getattr(source, "poller", None) is not None:  # real endpoints over a simulated machine: theirs alone
            return source
        from gpuscope.sources.simservers import SimServers

        servers = SimServers.for_source(source)
        return WithGroups(source, servers=servers) if servers is not None else source
    poller = getattr(source, "poller", None)
    parallel = getattr(poller, "parallel", None)
    return WithGroups(source, GroupFinder(parallel=parallel))
