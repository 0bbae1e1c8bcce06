"""The per-host summary: the few hundred bytes the fleet screen needs about one host (docs/mqtt.md).

An agent publishes it (retained) every few seconds and whenever its key facts change; the fleet
screen reads only summaries, never full frames. A frame from an older agent is summarised the same
way by the viewer (:func:`summarise` without findings, at a bounded rate). Pure functions, no I/O.

Wire form (``schema`` 1), every field but ``schema``, ``host`` and ``t`` optional::

    {"schema": 1, "host": "gpu-07", "t": 1764470000.5, "seq": 42, "interval_s": 1.0, "sim": false,
     "gpus": 8, "lost": [3], "util_pct": 61.5, "power_w": 4210.0,
     "link": {"state": "below_max_busy", "gpu": 5, "label": "Gen4×8"},
     "findings": [{"id": "gpu_lost:GPU3", "sev": "critical", "since": 1764469990.0, "text": "GPU3 fell off the bus",
                   "variant": "", "started": 1764469985.0}],
     "endpoints": [{"name": "vllm :8000", "tok_s": 1234.5}], "groups": ["vLLM TP=2 GPU0+1"],
     "machine": "3f2a9c0d5e6b7a81", "run": "5c1e0b7d"}
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gpuscope.core.groups import group_brief
from gpuscope.core.model import Event, Frame, GpuReading, Inventory
from gpuscope.core.topology import best_link, pcie_capacity_bytes_per_s
from gpuscope.core.vocab import LINK_STATES, SEV_RANK, SEVERITIES, link_label, link_state, reading_busy

SCHEMA = 1
MAX_FINDINGS = 16  # per summary; the worst first
MAX_TEXT = 160  # characters of one finding's text
MAX_ENDPOINTS = 8
MAX_GROUPS = 8  # serving groups per summary (core/groups.py), each in a few words
MAX_GROUP_TEXT = 48
MAX_GPUS = 1024
AGENT_ID_RE = re.compile(r"[0-9a-f]{0,32}\Z")  # ``machine`` and ``run``: lower-case hex ('' from older agents)
# the worst link first: narrow (a fault at any load), a lower generation while busy, at idle (power saving)
LINK_RANK = {"narrow": 0, "below_max_busy": 1, "below_max_idle": 2, "at_max": 3}


class SummaryError(ValueError):
    """A summary payload of the wrong shape (the viewer drops and counts it)."""


@dataclass(frozen=True, slots=True)
class SummaryFinding:
    id: str
    severity: str  # one of SEVERITIES
    since: float  # epoch seconds: when its current severity and wording began
    text: str
    variant: str = ""  # the wording class (core/findings.py): a viewer's engine needs it to keep ``since``
    started: float | None = None  # epoch seconds: when the condition began (None: at ``since``)


@dataclass(frozen=True, slots=True)
class HostSummary:
    """One host at sample time ``t`` (epoch seconds)."""

    host: str
    t: float
    seq: int = 0
    interval_s: float | None = None
    simulated: bool = False
    gpus: int = 0
    lost: tuple[int, ...] = ()
    util_pct: float | None = None  # mean over GPUs that answered
    power_w: float | None = None  # sum over GPUs that answered
    link_state: str | None = None  # the worst GPU's link state (LINK_STATES)
    link_gpu: int | None = None
    link_label: str | None = None
    findings: tuple[SummaryFinding, ...] = ()
    endpoints: tuple[tuple[str, float | None], ...] = ()  # (name, generated tokens/s)
    from_frame: bool = False  # built by the viewer from an older agent's frame (no findings travel then)
    groups: tuple[str, ...] = ()  # serving groups in a few words ("vLLM TP=2 GPU0+1"); () from older agents
    machine: str = ""  # the agent's stable machine id (cli/agent_id.py); '' from older agents
    run: str = ""  # random per agent start: with ``machine``, which publisher's ``seq`` this is

    def stream(self) -> str:
        """The publisher this summary came from (``machine/run``; '/' from older agents): sequence numbers are
        counted per stream, and two streams interleaving under one host name are two agents."""
        return f"{self.machine}/{self.run}"

    def worst(self) -> tuple[int, str]:
        """(severity rank 0 critical … len(SEVERITIES) none, text) of the worst active finding."""
        best = (len(SEVERITIES), "")
        for f in self.findings:
            r = SEV_RANK.get(f.severity, len(SEVERITIES))
            if r < best[0]:
                best = (r, f.text)
        return best

    def key(self) -> tuple[Any, ...]:
        """What makes the agent publish at once rather than at the next period: findings, lost GPUs, link."""
        return (tuple((f.id, f.severity) for f in self.findings), self.lost, self.link_state, self.gpus)

    def tok_s(self) -> float | None:
        vals = [v for _, v in self.endpoints if v is not None]
        return sum(vals) if vals else None


def summarise(inv: Inventory, frame: Frame, findings: Iterable[Any] = (), *, seq: int = 0,
              interval_s: float | None = None, from_frame: bool = False) -> HostSummary:
    """The summary of ``frame`` on the host of ``inv``; ``findings`` are the active
    :class:`gpuscope.core.findings.Finding` (id, severity, since or started_at, message), worst first; each
    finding's ``since`` is when its current severity and wording began."""
    live = [r for r in frame.gpus if not r.lost]
    worst = _worst_link(inv, live)
    link_gpu = worst[0] if worst else None
    lr = next((r for r in live if r.index == link_gpu), None)
    return HostSummary(
        host=inv.host, t=frame.t, seq=seq, interval_s=interval_s, simulated=inv.simulated,
        gpus=len(inv.devices), lost=tuple(r.index for r in frame.gpus if r.lost),
        util_pct=_mean([r.util_gpu_pct for r in live]), power_w=_sum([r.power_w for r in live]),
        link_state=worst[2] if worst else None, link_gpu=link_gpu,
        link_label=link_label(lr.pcie_gen, lr.pcie_width) if lr is not None else None,
        findings=_summary_findings(findings), endpoints=_summary_endpoints(frame), from_frame=from_frame,
        groups=tuple(group_brief(g)[:MAX_GROUP_TEXT] for g in frame.groups[:MAX_GROUPS]))


def _mean(values: list[float | None]) -> float | None:
    """The mean of the known values; None when none is known."""
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def _sum(values: list[float | None]) -> float | None:
    """The sum of the known values; None when none is known."""
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _worst_link(inv: Inventory, live: list[GpuReading]) -> tuple[int, int, str] | None:
    """(GPU index, :data:`LINK_RANK`, link state) of the answering GPU whose link is worst (the first of equals);
    None when no GPU tells its link."""
    worst: tuple[int, int, str] | None = None
    devs = {d.index: d for d in inv.devices}
    for r in live:
        dev = devs.get(r.index)
        if dev is None or r.pcie_gen is None:
            continue
        bg, bw = best_link(dev)
        state = link_state(r.pcie_gen, r.pcie_width, bg, bw,
                           reading_busy(r, pcie_capacity_bytes_per_s(r.pcie_gen, r.pcie_width)))
        if worst is None or LINK_RANK[state] < LINK_RANK[worst[2]]:
            worst = (r.index, LINK_RANK[state], state)
    return worst


def _summary_findings(findings: Iterable[Any]) -> tuple[SummaryFinding, ...]:
    """The first :data:`MAX_FINDINGS` findings, their text bounded."""
    return tuple(SummaryFinding(f.id, f.severity, float(getattr(f, "since", None) or f.started_at),
                                str(f.message)[:MAX_TEXT], str(getattr(f, "variant", "") or "")[:40],
                                float(f.started_at))
                 for f in list(findings)[:MAX_FINDINGS])


def _summary_endpoints(frame: Frame) -> tuple[tuple[str, float | None], ...]:
    """(name, generated tokens/s) of the frame's first :data:`MAX_ENDPOINTS` endpoints (the probe's left out)."""
    return tuple((_ep_name(e.url, e.kind), e.gen_tokens_per_s) for e in frame.endpoints if not e.probe)[:MAX_ENDPOINTS]


def _ep_name(url: str, kind: str | None) -> str:
    tail = url.split("://", 1)[-1].split("/", 1)[0]
    port = tail.rsplit(":", 1)[-1] if ":" in tail else tail
    return f"{kind or 'endpoint'} :{port}"[:40]


def _r(x: float | None, nd: int = 1) -> float | None:
    return None if x is None else round(x, nd)


def summary_to_dict(s: HostSummary) -> dict[str, Any]:
    """The wire form (compact: absent values are left out)."""
    d: dict[str, Any] = {"schema": SCHEMA, "host": s.host, "t": round(s.t, 3), "seq": s.seq}
    if s.interval_s is not None:
        d["interval_s"] = s.interval_s
    if s.simulated:
        d["sim"] = True
    d["gpus"] = s.gpus
    if s.lost:
        d["lost"] = list(s.lost)
    if s.util_pct is not None:
        d["util_pct"] = _r(s.util_pct)
    if s.power_w is not None:
        d["power_w"] = _r(s.power_w)
    if s.link_state is not None:
        d["link"] = {"state": s.link_state, "gpu": s.link_gpu, "label": s.link_label}
    if s.findings:
        d["findings"] = [_finding_dict(f) for f in s.findings]
    if s.endpoints:
        d["endpoints"] = [{"name": n, "tok_s": _r(v)} for n, v in s.endpoints]
    if s.groups:
        d["groups"] = list(s.groups)
    if s.machine:
        d["machine"] = s.machine
    if s.run:
        d["run"] = s.run
    return d


def _finding_dict(f: SummaryFinding) -> dict[str, Any]:
    d: dict[str, Any] = {"id": f.id, "sev": f.severity, "since": round(f.since, 1), "text": f.text}
    if f.variant:
        d["variant"] = f.variant
    if f.started is not None and round(f.started, 1) != round(f.since, 1):
        d["started"] = round(f.started, 1)
    return d


def _num(d: dict[str, Any], k: str, *, lo: float = 0.0, hi: float = math.inf) -> float | None:
    v = d.get(k)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not lo <= v <= hi:
        raise SummaryError(f"summary field {k!r}: {v!r} is not a number in [{lo}, {hi}]")
    return float(v)


def _str(v: Any, what: str, n: int) -> str:
    if not isinstance(v, str):
        raise SummaryError(f"summary field {what!r} is not a string")
    return v[:n]


def summary_from_dict(d: Any) -> HostSummary:
    """Validate and read a wire summary; :class:`SummaryError` (one line) on any wrong shape."""
    if not isinstance(d, dict):
        raise SummaryError("a summary is a JSON object")
    if d.get("schema") != SCHEMA:
        raise SummaryError(f"summary schema {d.get('schema')!r}: this gpuscope reads schema {SCHEMA}")
    host = _str(d.get("host"), "host", 128)
    t = _num(d, "t", lo=0.0, hi=1e11)
    if t is None:
        raise SummaryError("summary without a sample time 't'")
    # each field read in this order, so that of several wrong ones the first is named
    seq = _count(d, "seq", math.inf, "summary field 'seq' is not a count")
    gpus = _count(d, "gpus", MAX_GPUS, "summary field 'gpus' is not a GPU count")
    lost = _read_lost(d)
    ls, lg, ll = _read_link(d)
    fs = _read_findings(d, t)
    eps = _read_endpoints(d)
    groups = tuple(_str(g, "groups", MAX_GROUP_TEXT) for g in _listed(d, "groups")[:MAX_GROUPS])
    machine, run = _read_id(d, "machine"), _read_id(d, "run")
    return HostSummary(host=host, t=t, seq=seq, interval_s=_num(d, "interval_s", hi=86400.0),
                       simulated=d.get("sim") is True, gpus=gpus, lost=lost,
                       util_pct=_num(d, "util_pct", hi=100.0), power_w=_num(d, "power_w", hi=1e7),
                       link_state=ls, link_gpu=lg, link_label=ll, findings=fs, endpoints=eps,
                       groups=groups, machine=machine, run=run)


def _count(d: dict[str, Any], k: str, most: float, error: str) -> int:
    """The whole number 0 … ``most`` at ``d[k]`` (0 when absent); a :class:`SummaryError` saying ``error``."""
    v = d.get(k, 0)
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= most:
        raise SummaryError(error)
    return v


def _listed(d: dict[str, Any], k: str) -> list[Any]:
    """The list at ``d[k]``; [] when absent (``groups``: from agents older than serving groups)."""
    v = d.get(k, [])
    if not isinstance(v, list):
        raise SummaryError(f"summary field {k!r} is not a list")
    return v


def _read_lost(d: dict[str, Any]) -> tuple[int, ...]:
    lost = d.get("lost", [])
    if not isinstance(lost, list) or len(lost) > MAX_GPUS or not all(
            isinstance(i, int) and not isinstance(i, bool) and 0 <= i < MAX_GPUS for i in lost):
        raise SummaryError("summary field 'lost' is not a list of GPU indices")
    return tuple(lost)


def _read_link(d: dict[str, Any]) -> tuple[str | None, int | None, str | None]:
    """(state, GPU, label) of the worst link; all None when the summary has none."""
    link = d.get("link")
    if link is None:
        return None, None, None
    if not isinstance(link, dict) or link.get("state") not in LINK_STATES:
        raise SummaryError("summary field 'link' has no known state")
    gpu = link.get("gpu") if isinstance(link.get("gpu"), int) else None
    label = _str(link["label"], "link.label", 20) if link.get("label") is not None else None
    return link["state"], gpu, label


def _read_findings(d: dict[str, Any], t: float) -> tuple[SummaryFinding, ...]:
    """The first :data:`MAX_FINDINGS` findings; one without ``since`` began at the sample time ``t``."""
    fs = []
    for f in _listed(d, "findings")[:MAX_FINDINGS]:
        if not isinstance(f, dict) or f.get("sev") not in SEVERITIES:
            raise SummaryError("a summary finding without a known severity")
        since = _num(f, "since", hi=1e11)
        since = since if since is not None else t
        started = _num(f, "started", hi=1e11)
        fs.append(SummaryFinding(_str(f.get("id"), "findings.id", 120), f["sev"], since,
                                 _str(f.get("text", ""), "findings.text", MAX_TEXT),
                                 _str(f.get("variant", ""), "findings.variant", 40),
                                 min(started, since) if started is not None else since))
    return tuple(fs)


def _read_endpoints(d: dict[str, Any]) -> tuple[tuple[str, float | None], ...]:
    eps = []
    for e in _listed(d, "endpoints")[:MAX_ENDPOINTS]:
        if not isinstance(e, dict):
            raise SummaryError("a summary endpoint is not an object")
        eps.append((_str(e.get("name", "?"), "endpoints.name", 40), _num(e, "tok_s", hi=1e9)))
    return tuple(eps)


def _read_id(d: dict[str, Any], k: str) -> str:
    """The agent's ``machine`` or ``run`` id: lower-case hex; '' when absent (agents older than these ids)."""
    v = d.get(k, "")
    if not isinstance(v, str) or not AGENT_ID_RE.match(v):
        raise SummaryError(f"summary field {k!r} is not a hex id")
    return v


class SummaryPacer:
    """When the agent publishes its summary: every ``every_s`` seconds of sample time, and at once when
    :meth:`HostSummary.key` changes (a finding raised or cleared, a GPU lost, the worst link)."""

    def __init__(self, every_s: float = 5.0):
        self.every_s = every_s
        self.seq = 0  # sequence number of the last summary published (viewers count the gaps)
        self._last_t: float | None = None
        self._last_key: tuple[Any, ...] | None = None

    def due(self, key: tuple[Any, ...], t: float) -> bool:
        """True (and counts the next sequence number) when a summary with ``key`` at sample time ``t`` (s)
        should be published now."""
        if self._last_t is not None and key == self._last_key and 0 <= t - self._last_t < self.every_s:
            return False
        self._last_t, self._last_key = t, key
        self.seq += 1
        return True


def finding_hints(s: HostSummary) -> list[Event]:
    """The summary's active findings as ``finding_raised`` events at its sample time: primed into a viewer's
    :class:`gpuscope.core.findings.FindingsEngine` (``prime``), a finding its rules see again is raised at once
    with the agent's start and "since" (the condition held on the agent already), not after the viewer's own
    hold."""
    return [Event(t=s.t, kind="finding_raised", text=f.text,
                  data={"id": f.id, "severity": f.severity, "variant": f.variant,
                        "started_s": max(0.0, s.t - (f.started if f.started is not None else f.since)),
                        "since_s": max(0.0, s.t - f.since)})
            for f in s.findings if not s.from_frame]
