"""Serving groups over a recording or a span of it: each group's tok/s, traffic, bytes per generated token and
path, for ``summary`` (and ``--by-marker``) and ``compare``. Pure functions over frames.

Bytes per token is the group's mean interconnect traffic (PCIe + NVLink, both directions, summed over the
GPUs it owns, core/group_traffic.py) divided by its generated tok/s over the same span: the two figures a
report shows divide into the third. The traffic is averaged over the same rate window as the server's tok/s
(:class:`_Windowed`), so a load's first seconds do not count full traffic against a rate still rising. A number to compare across runs and setups (the same model and load
moving fewer bytes per token is a better placement or link).
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpuscope.core.findings import COUNTER_WINDOW_S
from gpuscope.core.group_paths import path_text
from gpuscope.core.group_traffic import (
    endpoint_tokens,
    fmt_bytes,
    group_traffic,
    moved,
    per_token,
    shared_words,
    traffic_owners,
)
from gpuscope.core.groups import gpus_text, group_label, parallel_text
from gpuscope.core.link_cost import (
    LinkCost,
    evidence_text,
    link_cost,
    nvlink_path,
    path_traffic,
    probe_pairs,
)
from gpuscope.core.link_verdict import UNKNOWN, VERDICT_VALUE, LinkVerdict, link_verdicts, verdict_text
from gpuscope.core.model import Frame, Inventory, ServingGroup
from gpuscope.core.rates import RateReading, rate_over, since_before
from gpuscope.core.vocab import PROBE_EVENT
from gpuscope.core.window import RuleWindow

VERDICT_SPAN_S = COUNTER_WINDOW_S  # the frames a link verdict reads: the counters' window, as the findings engine's
VERDICT_EVERY_S = 5.0  # a verdict every 5 s of frame time: a report reads every stretch, the engine less often


def group_key(g: ServingGroup) -> str:
    """What identifies a group across frames and runs: its endpoint URL, else its program and GPUs."""
    return g.endpoint or f"{g.server} on {gpus_text(g.gpus)}"


@dataclass
class _Windowed:
    """Figures averaged over the rate window of the group's tok/s (a server's tok/s is a rate over its last
    seconds while NVML's traffic is the last second's: divided as they come, a load's first seconds would count
    full traffic against a rate still rising). :meth:`mean` takes this frame's figures and gives each key's mean
    over the frames within ``span`` seconds (this frame alone when the window is not known)."""

    items: deque[tuple[float, dict[Any, float]]] = field(default_factory=deque)

    def mean(self, t: float, values: dict[Any, float], span: float | None) -> dict[Any, float]:
        self.items.append((t, values))
        while self.items and (span is None and len(self.items) > 1 or span is not None
                              and self.items[0][0] <= t - span):
            self.items.popleft()
        sums: dict[Any, list[float]] = {}
        for _, vals in self.items:
            for k, v in vals.items():
                sums.setdefault(k, []).append(v)
        return {k: sum(v) / len(v) for k, v in sums.items() if k in values}


@dataclass
class _Acc:
    group: ServingGroup
    frames: int = 0
    pcie: list[float] = field(default_factory=list)
    nvlink: list[float] = field(default_factory=list)
    tok: list[RateReading] = field(default_factory=list)  # (tok/s, s since the frame before, rate window s)
    nvlink_applies: bool = False
    shared: str = ""  # "GPU3 counted with vLLM :8001" (the latest frame's)
    paths: Counter[str] = field(default_factory=Counter)
    busy: list[float] = field(default_factory=list)  # the link's busy share in each frame it is known
    latency: list[float] = field(default_factory=list)  # all-reduce latency's share of a step, where known
    path_bps: dict[tuple[int, str], list[float]] = field(default_factory=dict)  # (GPU, way) → bytes/s on the path
    cost_tok: list[float] = field(default_factory=list)  # tok/s in the same frames
    cost: LinkCost | None = None  # the latest frame's link cost (its path, source and better paths)
    traffic_w: _Windowed = field(default_factory=_Windowed)  # the traffic over the tok/s's rate window
    path_w: _Windowed = field(default_factory=_Windowed)  # the path's traffic over the same window
    verdict: LinkVerdict | None = None  # the worst link verdict seen (the first of the worst)


class GroupStats:
    """Feed frames with :meth:`add`; :meth:`rows` gives one dict per group seen (first seen first)."""

    def __init__(self, inv: Inventory):
        self.inv = inv
        self._acc: dict[str, _Acc] = {}
        self._last_t: float | None = None
        self._probe: dict[tuple[int, int], Any] = {}  # the newest probe's pair figures seen in the frames
        self._recent: deque[Frame] = deque()  # the last VERDICT_SPAN_S of frames (what a link verdict reads)
        self._verdict_t: float | None = None

    def add(self, frame: Frame, before: float | None = None, *, tokens: bool = True) -> None:
        """Count ``frame``: its groups, their traffic and path, and (``tokens``) their tok/s. ``before`` is the
        time of the frame before it in the file (for the first frame of a span, the one before the span; None:
        the last frame added here)."""
        dt = since_before(frame.t, before if before is not None else self._last_t)
        self._last_t = frame.t
        owners = traffic_owners(frame.groups)
        for e in frame.events:
            if e.kind == PROBE_EVENT:
                self._probe = probe_pairs(e.data)
        for g in frame.groups:
            a = self._entry(g)
            a.frames += 1
            if not g.gpus:
                continue
            t = group_traffic(g, frame, self.inv, owners)
            now = {k: v for k, v in (("pcie", t.pcie_bytes_per_s), ("nvlink", t.nvlink_bytes_per_s)) if v is not None}
            w = a.traffic_w.mean(frame.t, now, _window(g, frame))
            if "pcie" in w:
                a.pcie.append(w["pcie"])
            if "nvlink" in w:
                a.nvlink.append(w["nvlink"])
            a.nvlink_applies |= t.nvlink_applies
            a.shared = shared_words(t)
            if t.tokens_per_s is not None and tokens:
                a.tok.append((t.tokens_per_s, dt, _window(g, frame)))
            p = path_text(self.inv, frame, g.gpus)
            if p:
                a.paths[p] += 1
            self._add_cost(a, g, frame, owners)
        self._add_verdicts(frame)

    def _add_verdicts(self, frame: Frame) -> None:
        """Every VERDICT_EVERY_S of frame time, each group's link verdict over the last VERDICT_SPAN_S; the worst
        is kept."""
        self._recent.append(frame)
        while self._recent and self._recent[0].t < frame.t - VERDICT_SPAN_S:
            self._recent.popleft()
        if self._verdict_t is not None and 0 <= frame.t - self._verdict_t < VERDICT_EVERY_S:
            return
        self._verdict_t = frame.t
        for v in link_verdicts(self.inv, RuleWindow(tuple(self._recent), self._recent[0])):
            a = self._acc.get(group_key(v.group))
            if a is not None and v.verdict != UNKNOWN and (
                    a.verdict is None or VERDICT_VALUE[v.verdict] > VERDICT_VALUE.get(a.verdict.verdict, -1)):
                a.verdict = v

    def _add_cost(self, a: _Acc, g: ServingGroup, frame: Frame, owners: dict[int, ServingGroup]) -> None:
        """The group's link cost in this frame; its path's traffic (every frame, idle ones too) averaged over the
        tok/s's rate window, kept for the frames that generate tokens."""
        if len(g.gpus) < 2:
            return
        now = path_traffic(g, frame, self.inv, nvlink_path(self.inv, g.gpus), owners) or []
        w = a.path_w.mean(frame.t, {(i, way): bps for i, way, bps in now}, _window(g, frame))
        c = link_cost(g, self.inv, frame, self._probe, owners)
        if c is None:
            return
        a.cost = c
        a.busy.append(c.busy_share)
        a.cost_tok.append(c.tokens_per_s)
        for key, bps in w.items():
            a.path_bps.setdefault(key, []).append(bps)
        if c.latency_share is not None:
            a.latency.append(c.latency_share)

    def add_tokens(self, frame: Frame, before: float | None, keep: Callable[[float | None], bool]) -> None:
        """Count the tok/s of ``frame``'s groups whose rate window (s, None: not known) ``keep`` takes: a span
        takes the readings whose window middle lies in it (core/rates.py), not always its frames' readings."""
        dt = since_before(frame.t, before)
        for g in frame.groups:
            w = _window(g, frame)
            tok = endpoint_tokens(g, frame.endpoints) if g.gpus else None
            if tok is not None and keep(w):
                self._entry(g).tok.append((tok, dt, w))

    def _entry(self, g: ServingGroup) -> _Acc:
        a = self._acc.get(group_key(g))
        if a is None:
            a = self._acc[group_key(g)] = _Acc(g)
        a.group = g if g.gpus or not a.group.gpus else a.group  # keep the latest placed version
        return a

    def rows(self) -> list[dict[str, Any]]:
        out = []
        for key, a in self._acc.items():
            g = a.group
            tok = rate_over(a.tok)
            pcie, nvl = _mean(a.pcie), _mean(a.nvlink)
            out.append({
                "key": key, "name": group_label(g), "server": g.server, "kind": g.kind, "endpoint": g.endpoint,
                "model": g.model, "port": g.port, "gpus": list(g.gpus), "tp": g.tp, "pp": g.pp,
                "parallel": parallel_text(g), "container": g.container, "local": g.local, "simulated": g.simulated,
                "path": a.paths.most_common(1)[0][0] if a.paths else None, "frames": a.frames,
                "gen_tokens_per_s": tok, "pcie_bytes_per_s": pcie, "nvlink_bytes_per_s": nvl,
                "bytes_per_token": per_token(moved(pcie, nvl, a.nvlink_applies), tok),
                "shared": a.shared or None, "link_cost": _cost_row(a),
                "link_verdict": None if a.verdict is None else {
                    "verdict": a.verdict.verdict, "link": a.verdict.link, "text": verdict_text(a.verdict, advice=False),
                    "evidence": a.verdict.evidence},
            })
        return out


def _cost_row(a: _Acc) -> dict[str, Any] | None:
    """The link cost over the span's frames where the group generated tokens (core/link_cost.py; estimates):
    bytes per token as mean traffic ÷ mean tok/s, the mean busy and latency shares; the latest frame's path,
    source and better paths."""
    if a.cost is None:
        return None
    ev = dict(a.cost.evidence)
    tok = sum(a.cost_tok) / len(a.cost_tok)
    ev["generated_tokens_per_s"] = tok
    ev["bytes_per_token"] = [{"gpu": i, "direction": w, "bytes": sum(v) / len(v) / tok} for (i, w), v in a.path_bps.items()]
    ev["link_busy_share"] = _mean(a.busy)
    ev["latency_share_of_step"] = _mean(a.latency)
    ev["frames"] = len(a.busy)
    ev["text"] = evidence_text(ev)
    return ev


def _mean(v: list[float]) -> float | None:
    return sum(v) / len(v) if v else None


def _window(g: ServingGroup, frame: Frame) -> float | None:
    """The rate window (s) of the group's endpoint readings in ``frame`` (the longest of its models')."""
    ws = [e.rate_window_s for e in frame.endpoints if e.url == g.endpoint and e.rate_window_s is not None]
    return max(ws) if ws else None


def group_rows(inv: Inventory, frames: Any) -> list[dict[str, Any]]:
    """:class:`GroupStats` rows of ``frames`` in one call."""
    s = GroupStats(inv)
    for f in frames:
        s.add(f)
    return s.rows()


def compare_groups(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Groups of two summaries side by side, matched by key (endpoint URL or program and GPUs) serving the same
    model, then the unmatched ones by order (a fix may move a server to other GPUs) where their models agree:
    [{"name", "a": row|None, "b": row|None}]. Two different models on one port are two groups, never compared."""
    def same_model(x: dict[str, Any], y: dict[str, Any]) -> bool:
        return not x.get("model") or not y.get("model") or x["model"] == y["model"]

    kb = {r["key"]: r for r in b}
    out = []
    used: set[str] = set()
    rest_a = []
    for r in a:
        other = kb.get(r["key"])
        if other is not None and same_model(r, other):
            out.append({"name": r["name"], "a": r, "b": other})
            used.add(r["key"])
        else:
            rest_a.append(r)
    rest_b = [r for r in b if r["key"] not in used]
    for ra in rest_a:
        rb = next((r for r in rest_b if same_model(ra, r)), None)
        if rb is not None:
            rest_b.remove(rb)
        out.append({"name": ra["name"], "a": ra, "b": rb})
    out += [{"name": rb.get("name", "?"), "a": None, "b": rb} for rb in rest_b]
    return out


def group_text(r: dict[str, Any]) -> str:
    """One group row as a report line: ``vLLM :8000 gemma-2-27b-it · TP=2 on GPU0+GPU1 · SYS, Gen1×16: 55.0
    tok/s, PCIe 15.2 GB/s, NVLink –, 276 MB/token``."""
    from gpuscope.core.units import NONE, fmt_gb

    def rate(x: float | None) -> str:
        return NONE if x is None else f"{fmt_gb(x)} GB/s"

    where = f" · {r['parallel']} on {gpus_text(r['gpus'])}" if r["parallel"] else f" · on {gpus_text(r['gpus'])}"
    if not r["local"]:
        where = " · not local"
    path = f" · {r['path']}" if r["path"] else ""
    tok = NONE if r["gen_tokens_per_s"] is None else f"{r['gen_tokens_per_s']:,.1f}"
    sim = "SIMULATED " if r["simulated"] else ""
    shared = f" ({r['shared']})" if r.get("shared") else ""
    cost = r.get("link_cost") or {}
    cost_text = f"; {cost['text']}" if cost.get("text") else ""
    verdict = r.get("link_verdict") or {}
    cost_text += f"; worst {verdict['text']}" if verdict.get("text") else ""
    return (f"{sim}{r['name']}{where}{path}: {tok} tok/s, PCIe {rate(r['pcie_bytes_per_s'])}, NVLink "
            f"{rate(r['nvlink_bytes_per_s'])}{shared}, {fmt_bytes(r['bytes_per_token'])}/token{cost_text}")
