"""Serving groups: which processes and GPUs serve which inference endpoint (pure functions, no I/O).

``sources/groups.py`` reads ``/proc`` and hands the text here: the listening sockets of
``/proc/net/tcp{,6}``, a process's ``stat`` (its parent), ``status`` (``NSpid``: its pid in each PID
namespace), ``cgroup`` (the container or pod) and command line (TP/PP sizes). :func:`build_groups` joins
them with NVML's compute processes into :class:`~gpuscope.core.model.ServingGroup` records.

Every parser takes untrusted text and returns None / empty for anything it does not understand: never
an exception (tests/sources/test_groups.py fuzzes them).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from gpuscope.core.model import SERVER_NAMES, GpuReading, ServingGroup
from gpuscope.core.text import clean

TCP_LISTEN = "0A"  # the st column of a listening socket in /proc/net/tcp{,6}
MAX_DEPTH = 64  # parent links followed at most (a cycle in hostile input ends there)


@dataclass(frozen=True, slots=True)
class Listener:
    """One listening TCP socket: its local port and socket inode (0: the kernel hides it)."""

    port: int
    inode: int
    address: str  # hex, as /proc/net/tcp writes it (00000000: any, 0100007F: 127.0.0.1)


def parse_net_tcp(text: str) -> list[Listener]:
    """The listening sockets of a ``/proc/net/tcp`` or ``/proc/net/tcp6`` table (header line skipped).

    Columns: ``sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode``;
    ``local_address`` is ``HEXADDR:HEXPORT``. Lines that do not parse are skipped."""
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 10 or parts[3].upper() != TCP_LISTEN:
            continue
        addr, sep, port_hex = parts[1].rpartition(":")
        if not sep:
            continue
        try:
            port = int(port_hex, 16)
            inode = int(parts[9])
        except ValueError:
            continue
        if 0 < port <= 65535 and inode >= 0:
            out.append(Listener(port=port, inode=inode, address=addr))
    return out


_SOCKET = re.compile(r"socket:\[(\d+)\]\Z")


def socket_inode(link: str) -> int | None:
    """The inode of a ``/proc/PID/fd/N`` link target ``socket:[12345]``; None for anything else."""
    m = _SOCKET.match(link)
    return int(m.group(1)) if m else None


def parse_stat_ppid(text: str) -> int | None:
    """The parent pid from ``/proc/PID/stat`` (``pid (comm) state ppid …``; comm may hold spaces and
    parentheses, so the fields are read after the last ``)``). None when it does not parse."""
    end = text.rfind(")")
    if end < 0:
        return None
    rest = text[end + 1:].split()
    if len(rest) < 2:
        return None
    try:
        ppid = int(rest[1])
    except ValueError:
        return None
    return ppid if ppid >= 0 else None


def parse_nspid(status: str) -> tuple[int, ...]:
    """The ``NSpid:`` line of ``/proc/PID/status``: the pid in each PID namespace, outermost (this
    ``/proc``'s) first; ``()`` when missing (kernels before 4.1) or malformed."""
    for line in status.splitlines():
        if line.startswith("NSpid:"):
            try:
                pids = tuple(int(x) for x in line[6:].split())
            except ValueError:
                return ()
            return pids if all(p > 0 for p in pids) else ()
    return ()


_HEX_ID = r"[0-9a-f]{12,64}"
_POD = re.compile(r"pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})")
_CONTAINER_PATTERNS = (
    ("docker", re.compile(rf"(?:^|/)docker[-/]({_HEX_ID})(?:\.scope)?(?:/|$)")),
    ("containerd", re.compile(rf"(?:^|/)cri-containerd-({_HEX_ID})\.scope")),
    ("cri-o", re.compile(rf"(?:^|/)crio-(?:conmon-)?({_HEX_ID})\.scope")),
    ("podman", re.compile(rf"(?:^|/)libpod-(?:conmon-)?({_HEX_ID})\.scope")),
)
_KUBE_CONTAINER = re.compile(rf"/(?:[a-z-]+-)?({_HEX_ID})(?:\.scope)?/?$")


def parse_cgroup(text: str) -> str | None:
    """The container or pod a process runs in, from ``/proc/PID/cgroup`` (cgroup v1 or v2 lines
    ``ID:CONTROLLERS:PATH``): ``pod 1a2b3c4d-… / 0123456789ab`` for Kubernetes (``kubepods…/pod<uid>/
    <container>``), ``docker 0123456789ab``, ``containerd …``, ``cri-o …``, ``podman …`` (ids cut to 12);
    None on the host or when nothing is recognised."""
    for line in text.splitlines():
        path = line.split(":", 2)[-1].strip()
        if not path or path == "/":
            continue
        if "kubepods" in path:
            pod = _POD.search(path)
            if pod:
                uid = pod.group(1).replace("_", "-")
                c = _KUBE_CONTAINER.search(path[pod.end():])
                return f"pod {uid}" + (f" / {c.group(1)[:12]}" if c else "")
        for name, pat in _CONTAINER_PATTERNS:
            m = pat.search(path)
            if m:
                return f"{name} {m.group(1)[:12]}"
    return None


_TP_FLAGS = ("--tensor-parallel-size", "--tensor_parallel_size", "-tp", "--tp-size", "--tp_size", "--tp")
_PP_FLAGS = ("--pipeline-parallel-size", "--pipeline_parallel_size", "-pp", "--pp-size", "--pp_size", "--pp")


def _flag_value(args: Sequence[str], flags: Sequence[str]) -> int | None:
    for k, a in enumerate(args):
        name, eq, val = a.partition("=")
        if name not in flags:
            continue
        if not eq:
            if k + 1 >= len(args):
                return None
            val = args[k + 1]
        return _size(val)
    return None


def parallel_from_args(args: Sequence[str]) -> tuple[int | None, int | None]:
    """(TP, PP) sizes from a command line's arguments: ``--tensor-parallel-size N`` (vLLM), ``-tp N``,
    ``--tp-size N`` / ``--tp N`` (SGLang), ``--tp_size N`` (TRT-LLM), also written ``--flag=N``; the same
    for pipeline parallelism. None for a size not given (or not a number 1–4096)."""
    return _flag_value(args, _TP_FLAGS), _flag_value(args, _PP_FLAGS)


def split_cmdline(raw: bytes) -> list[str]:
    """``/proc/PID/cmdline`` (NUL-separated) as a list of arguments (undecodable bytes replaced)."""
    return [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a]


_PARALLEL_LABELS = (("tensor_parallel_size", "pipeline_parallel_size"), ("tp_size", "pp_size"))


def parallel_from_metrics(samples: Mapping[str, Iterable[tuple[Mapping[str, str], float]]]
                          ) -> tuple[int | None, int | None]:
    """(TP, PP) sizes from a server's own metrics: the labels ``tensor_parallel_size`` /
    ``pipeline_parallel_size`` (or ``tp_size`` / ``pp_size``) of an ``…_info`` series (vLLM's config info
    gauges, where a build exports its parallel config), else the number of distinct ``tp_rank`` /
    ``pp_rank`` labels (SGLang's scheduler metrics: one series per rank). ``samples`` maps a sample name to
    its (labels, value) rows, as the endpoint parser makes them."""
    tp = pp = None
    tp_ranks: set[str] = set()
    pp_ranks: set[str] = set()
    for name, rows in samples.items():
        info = name.endswith("_info")
        for labels, _v in rows:
            if info:
                for tk, pk in _PARALLEL_LABELS:
                    tp = tp or _size(labels.get(tk))
                    pp = pp or _size(labels.get(pk))
            if "tp_rank" in labels:
                tp_ranks.add(labels["tp_rank"])
            if "pp_rank" in labels:
                pp_ranks.add(labels["pp_rank"])
    if tp is None and tp_ranks:
        tp = len(tp_ranks)
    if pp is None and pp_ranks:
        pp = len(pp_ranks)
    return tp, pp


def _size(v: str | None) -> int | None:
    if v is None:
        return None
    try:
        n = int(v)
    except ValueError:
        return None
    return n if 1 <= n <= 4096 else None


def descendants(root: int, ppids: Mapping[int, int]) -> set[int]:
    """Every process below ``root`` in the tree given by ``ppids`` (pid → parent pid), ``root`` excluded."""
    children: dict[int, list[int]] = {}
    for pid, pp in ppids.items():
        if pid != pp:
            children.setdefault(pp, []).append(pid)
    out: set[int] = set()
    todo = list(children.get(root, ()))
    while todo:
        p = todo.pop()
        if p in out or p == root:
            continue
        out.add(p)
        todo.extend(children.get(p, ()))
    return out


def ancestors(pid: int, ppids: Mapping[int, int]) -> list[int]:
    """The parents of ``pid`` up the tree, nearest first (init and the kernel's 0 left out)."""
    out: list[int] = []
    p = ppids.get(pid)
    while p is not None and p > 1 and p not in out and len(out) < MAX_DEPTH:
        out.append(p)
        p = ppids.get(p)
    return out


def program_label(args: Sequence[str], name: str | None = None) -> str:
    """What a user calls a process: ``python train.py``, ``python3 -m vllm.entrypoints.openai.api_server``,
    ``torchrun`` (the program's base name, then ``-m MODULE`` or the first argument that is not an
    option); ``name`` (comm) when the command line is unknown."""
    if not args:
        return clean(name or "?", 40)
    prog = args[0].rsplit("/", 1)[-1]
    rest = list(args[1:])
    if prog.startswith("python"):
        for k, a in enumerate(rest):
            if a == "-m" and k + 1 < len(rest):
                return clean(f"{prog} -m {rest[k + 1]}", 60)
            if a == "-c":
                return clean(f"{prog} -c", 60)
            if not a.startswith("-"):
                return clean(f"{prog} {a.rsplit('/', 1)[-1]}", 60)
    return clean(prog, 60)


@dataclass(frozen=True, slots=True)
class Claim:
    """An endpoint to place: its URL and kind/model (from the poller), the port its URL names, whether
    its host is this machine, and the pid listening on that port here (None: not found, ``why`` says
    why); TP/PP sizes from its own metrics where it exports them."""

    url: str
    port: int | None
    local: bool
    listener: int | None = None
    why: str | None = None
    kind: str | None = None
    model: str | None = None
    tp: int | None = None
    pp: int | None = None


@dataclass
class ProcView:
    """What ``/proc`` told about the processes that matter (any of it may be missing: unknown)."""

    ppids: dict[int, int] = field(default_factory=dict)
    nspids: dict[int, tuple[int, ...]] = field(default_factory=dict)
    args: dict[int, list[str]] = field(default_factory=dict)
    names: dict[int, str] = field(default_factory=dict)
    containers: dict[int, str] = field(default_factory=dict)


def gpu_pids(gpus: Sequence[GpuReading]) -> dict[int, set[int]]:
    """pid → the GPUs it holds, from the frame's NVML process lists (compute and graphics)."""
    out: dict[int, set[int]] = {}
    for g in gpus:
        for p in g.processes or ():
            out.setdefault(p.pid, set()).add(g.index)
    return out


def build_groups(claims: Sequence[Claim], gpu_pids: Mapping[int, Iterable[int]], procs: ProcView
                 ) -> tuple[ServingGroup, ...]:
    """Serving groups from the endpoints (``claims``), NVML's compute processes (``gpu_pids``: pid → the
    GPU indices it holds) and ``/proc``.

    An endpoint's group is its listener and the listener's descendants; a GPU process belongs to it when
    its pid is one of them, or (a server in a container, NVML answering with the container's pids) when
    it is one of their ``NSpid`` values. TP/PP come from the endpoint's metrics, else from any member's
    command line. GPU processes that no endpoint claims form groups by program (one per parent and
    program label: a launcher's workers are one group). A non-local endpoint or one whose listener is
    unknown still gets a group (no pids, no GPUs) carrying why."""
    held: dict[int, set[int]] = {pid: set(g) for pid, g in gpu_pids.items()}
    claimed: set[int] = set()
    out: list[ServingGroup] = []
    by_listener: dict[int, ServingGroup] = {}
    for c in claims:
        server = SERVER_NAMES.get(c.kind or "", c.kind or "server")
        if not c.local or c.listener is None:
            out.append(ServingGroup(server=server, kind=c.kind, endpoint=c.url, model=c.model, port=c.port,
                                    local=c.local, tp=c.tp, pp=c.pp,
                                    note="not local" if not c.local else c.why or "listener not found"))
            continue
        same = by_listener.get(c.listener)
        if same is not None:  # two URLs of one server (localhost and 127.0.0.1): the same processes and GPUs
            out.append(replace(same, endpoint=c.url, port=c.port, model=c.model or same.model))
            continue
        out.append(_endpoint_group(c, server, held, claimed, procs))
        by_listener[c.listener] = out[-1]
    out += _program_groups(held, claimed, procs)
    return tuple(out)


def _endpoint_group(c: Claim, server: str, held: dict[int, set[int]], claimed: set[int], procs: ProcView
                    ) -> ServingGroup:
    """The group of a local endpoint whose listener is known: the listener and its descendants (by host pid
    or, in a container, by ``NSpid``) among the GPU processes not yet ``claimed`` (claimed now)."""
    assert c.listener is not None  # the caller's check
    members = {c.listener} | descendants(c.listener, procs.ppids)
    inner: dict[int, int] = {}  # a member's pid in its own namespace(s) → its host pid
    for m in members:
        for ns in procs.nspids.get(m, ())[1:]:
            inner.setdefault(ns, m)
    pids: list[int] = [c.listener]
    gpus: set[int] = set()
    for pid, gs in sorted(held.items()):
        if pid in claimed:
            continue
        host = pid if pid in members else inner.get(pid)
        if host is None:
            continue
        claimed.add(pid)
        gpus |= gs
        if host not in pids:
            pids.append(host)
    tp, pp = c.tp, c.pp
    for m in pids:
        if tp is not None and pp is not None:
            break
        a_tp, a_pp = parallel_from_args(procs.args.get(m, ()))
        tp, pp = tp or a_tp, pp or a_pp
    container = next((procs.containers[m] for m in pids if m in procs.containers), None)
    note = None if gpus else "holds no GPU (yet)"
    return ServingGroup(server=server, kind=c.kind, endpoint=c.url, model=c.model, port=c.port,
                        pids=tuple(pids), gpus=tuple(sorted(gpus)), tp=tp, pp=pp, container=container, note=note)


def _program_groups(held: dict[int, set[int]], claimed: set[int], procs: ProcView) -> list[ServingGroup]:
    """GPU processes no endpoint claimed, grouped by program under their top GPU-holding ancestor (a
    launcher's workers are one group), in the order of their lowest GPU."""
    rest: dict[tuple[int, str], list[int]] = {}
    for pid in sorted(held):
        if pid in claimed or not held[pid]:
            continue
        label = program_label(procs.args.get(pid, ()), procs.names.get(pid))
        anc = ancestors(pid, procs.ppids)
        # a launcher's workers share a parent: group under the highest ancestor that holds a GPU or the parent
        top = next((a for a in reversed(anc) if a in held and a not in claimed), anc[0] if anc else pid)
        rest.setdefault((top, label), []).append(pid)
    out = []
    for (_top, label), pids in sorted(rest.items(), key=lambda kv: min(min(held[p]) for p in kv[1])):
        held_gpus = sorted({g for p in pids for g in held[p]})
        tp, pp = parallel_from_args(procs.args.get(pids[0], ()))
        container = next((procs.containers[m] for m in pids if m in procs.containers), None)
        out.append(ServingGroup(server=label, pids=tuple(pids), gpus=tuple(held_gpus), tp=tp, pp=pp,
                                container=container))
    return out


def gpus_text(gpus: Sequence[int]) -> str:
    """``GPU0+GPU1`` for two, ``GPU2–GPU5`` for a longer run, ``GPU0+GPU2+GPU5`` otherwise; ``no GPU``."""
    g = sorted(gpus)
    if not g:
        return "no GPU"
    if len(g) > 2 and g == list(range(g[0], g[-1] + 1)):
        return f"GPU{g[0]}–GPU{g[-1]}"
    return "+".join(f"GPU{i}" for i in g)


def group_label(g: ServingGroup) -> str:
    """The group's one-line name: ``vLLM :8000 qwen3-27b``, ``python train.py`` (text cleaned)."""
    parts = [clean(g.server, 40)]
    if g.port is not None:
        parts.append(f":{g.port}")
    if g.model:
        parts.append(clean(g.model.rsplit("/", 1)[-1], 40))
    return " ".join(parts)


def short_gpus(gpus: Sequence[int]) -> str:
    """``GPU0+1``, ``GPU2–5`` (a run of three or more), ``GPU0+2+5``; ``no GPU`` (the brief form of
    :func:`gpus_text`, for a fleet row)."""
    g = sorted(gpus)
    if not g:
        return "no GPU"
    if len(g) > 2 and g == list(range(g[0], g[-1] + 1)):
        return f"GPU{g[0]}–{g[-1]}"
    return "GPU" + "+".join(str(i) for i in g)


def group_brief(g: ServingGroup) -> str:
    """The group in a few words for a fleet row: ``vLLM TP=2 GPU0+1``, ``python train.py GPU2–5``."""
    return " ".join(p for p in (clean(g.server, 24), parallel_text(g), short_gpus(g.gpus)) if p)


def parallel_text(g: ServingGroup) -> str:
    """``TP=2``, ``TP=4 PP=2``, ``""`` when neither is known."""
    return " ".join(f"{k}={v}" for k, v in (("TP", g.tp), ("PP", g.pp)) if v)


def endpoint_address(url: str) -> tuple[str, int | None]:
    """(host, port) of an endpoint URL: ``http://localhost:8000/metrics`` → (``localhost``, 8000); the
    scheme's default port when none is written (80, 443); host ``""`` and port None when it does not parse."""
    from urllib.parse import urlsplit

    try:
        u = urlsplit(url if "//" in url else "http://" + url)
        port = u.port
        host = u.hostname or ""
    except ValueError:
        return "", None
    if port is None:
        port = {"http": 80, "https": 443}.get(u.scheme.lower())
    return host, port
