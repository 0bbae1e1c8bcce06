"""What the link costs each token: for a serving group with TP or PP above 1, the share of
time its path between GPUs is busy moving the group's bytes, the tok/s a better path would allow when the
link is the limit, and what the path's latency costs a step when it is not. Pure functions; every figure is
an **estimate** and says so (docs/findings.md writes the model out).

The model, per GPU of the group and direction (send, receive), on the path its collectives take (NVLink when
every pair of the group has NVLinks, else PCIe):

* bytes per generated token = the GPU's traffic that way (NVML's counters) ÷ the group's generated tok/s;
* what the path delivers one way = the probe's device↔device figure for the group's worst pair when one was
  measured this session or recording (the slower of read and write), else the rated ceiling × the share a
  healthy link typically gives (core/topology.py) — each result says which;
* link time per token = bytes per token ÷ delivered; the observed time per token = 1 ÷ tok/s, so the share
  of time the link is busy = traffic ÷ delivered (batching changes neither ratio).

When the busiest GPU-direction keeps the link busy half the time or more, the link alone caps tok/s at
delivered ÷ bytes per token: given now and on each better path the hardware offers (the GPUs' own best
PCIe generation and width, an NVLink bridge where the board takes one, two GPUs on one NUMA node). Below
half, bandwidth is not the limit; latency may be: with a probe of the pair, each ring all-reduce takes at
least 2(TP−1) small-copy latencies, and a decode step makes 2 per layer (core/model_shapes.py, when the
model is known): their sum against the step's time (the server's ITL, else running requests ÷ tok/s).
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuscope.core.candidate import Candidate
from gpuscope.core.group_paths import better_placement, slowest_link, worst_pair
from gpuscope.core.group_traffic import endpoint_tokens, traffic_owners
from gpuscope.core.groups import gpus_text, group_label, parallel_text
from gpuscope.core.model import DeviceInfo, EndpointReading, Frame, Inventory, PairLink, ServingGroup
from gpuscope.core.model_shapes import allreduces_per_step, shape_of
from gpuscope.core.text import clean
from gpuscope.core.topology import (
    NVLINK_TYPICAL_SHARE,
    PEER_PATH_FACTOR,
    best_link,
    device_nvlink_capacity_bytes_per_s,
    pcie_typical,
)
from gpuscope.core.units import fmt_gb
from gpuscope.core.vocab import PROBE_EVENT, PROBE_FIGURE_MAX, link_label

LINK_BOUND_SHARE = 0.5  # the link busy at least this share of the time: the link may be the limit
LINK_CRITICAL_SHARE = 0.8
LATENCY_WARN_SHARE = 0.25  # all-reduce latency at least this share of a step: worth a warning
MEASURED = "measured by the probe"
RATED = "rated × typical share, estimate"
# Boards that take an NVLink bridge: name fragment → one direction's rated bytes/s over the bridge.
NVLINK_BRIDGES: tuple[tuple[str, float], ...] = (
    ("RTX A6000", 56.25e9), ("RTX A5000", 56.25e9), ("RTX A4500", 56.25e9), ("A40", 56.25e9),
    ("RTX 3090", 56.25e9), ("A100 PCIE", 300e9), ("A100-PCIE", 300e9), ("A800 PCIE", 200e9),
    ("H100 PCIE", 300e9), ("H100 NVL", 300e9), ("H200 NVL", 450e9),
)


@dataclass(frozen=True, slots=True)
class PairFigures:
    """What the probe measured between two GPUs: bytes/s each way (None: not measured) and the small-copy
    latency in seconds."""

    read: float | None
    write: float | None
    latency_s: float | None

    @property
    def one_way(self) -> float | None:
        known = [x for x in (self.read, self.write) if x]
        return min(known) if known else None


@dataclass(frozen=True, slots=True)
class BetterPath:
    """A better path the hardware offers and the tok/s the link alone would then allow (an upper bound)."""

    what: str
    bytes_per_s: float
    tokens_per_s: float


@dataclass(frozen=True, slots=True)
class LinkCost:
    """One group's link cost (see the module docstring); every figure an estimate."""

    key: str
    label: str
    gpus: tuple[int, ...]
    probe_name: str  # what `gpuscope probe --group` takes for it: ``:8000``, else its server's name, quoted
    parallel: str
    link: str  # "SYS, Gen1×16" / "NV4"
    nvlink: bool  # the collectives take NVLink
    tokens_per_s: float
    per_gpu: tuple[tuple[int, str, float], ...]  # (GPU, "send"/"receive", bytes per generated token)
    delivered_bytes_per_s: float
    delivered_source: str  # MEASURED or RATED
    busy_share: float  # link time per token ÷ time per token, for the busiest GPU-direction
    better: tuple[BetterPath, ...] = ()
    allreduces_per_step: int | None = None
    allreduce_latency_s: float | None = None  # one all-reduce's latency, at least (probe × 2(TP−1))
    step_s: float | None = None
    step_source: str | None = None  # "ITL" or "running ÷ tok/s"
    evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def bytes_per_token(self) -> float:
        return max(b for _, _, b in self.per_gpu)

    @property
    def link_bound(self) -> bool:
        return self.busy_share >= LINK_BOUND_SHARE

    @property
    def latency_per_step_s(self) -> float | None:
        if self.allreduces_per_step is None or self.allreduce_latency_s is None:
            return None
        return self.allreduces_per_step * self.allreduce_latency_s

    @property
    def latency_share(self) -> float | None:
        """The all-reduces' latency as a share of a step; None when not known, or when it would not fit in the
        step (a probe from another setup, or a figure that is wrong: such a bound says nothing)."""
        lat = self.latency_per_step_s
        share = lat / self.step_s if lat is not None and self.step_s else None
        return share if share is not None and share < 1 else None

    @property
    def latency_misfit(self) -> bool:
        """The probe's latency × the all-reduces a step makes exceeds the step's observed time."""
        lat = self.latency_per_step_s
        return lat is not None and bool(self.step_s) and lat >= (self.step_s or 0.0)

    @property
    def ceiling_now(self) -> float:
        return self.delivered_bytes_per_s / self.bytes_per_token if self.bytes_per_token > 0 else math.inf

    @property
    def speedup_at_most(self) -> float | None:
        """How much faster a link that cost nothing would make the server, at most: a step loses the link's busy
        share and the all-reduces' latency share (as if neither overlapped compute); None below half busy while
        the latency is not known (an upper bound needs it)."""
        lat = self.latency_share
        if lat is None and not self.link_bound:
            return None
        return 1 / (1 - min(0.95, self.busy_share + (lat or 0.0)))


# ------------------------------------------------------------------ the probe's figures
def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0 else None


PROBE_RANGES = PROBE_FIGURE_MAX  # what a probe figure can be (core/vocab.py)


def _figure(d: Any, key: str, unit: str, scale: float) -> float | None:
    m = d.get(key) if isinstance(d, Mapping) else None
    v = _num(m.get(unit)) if isinstance(m, Mapping) else None
    return v * scale if v is not None and v <= PROBE_RANGES[unit] else None


def probe_pairs(data: Any) -> dict[tuple[int, int], PairFigures]:
    """The device↔device figures of a probe's JSON (docs/probe-json.md), by pair (a < b); anything malformed
    is left out, never raised."""
    pairs = data.get("pairs") if isinstance(data, Mapping) else None
    out: dict[tuple[int, int], PairFigures] = {}
    for p in pairs if isinstance(pairs, list) else ():
        if not isinstance(p, Mapping) or not all(type(p.get(k)) is int for k in ("a", "b")):
            continue
        fig = PairFigures(_figure(p, "read", "gb_per_s", 1e9), _figure(p, "write", "gb_per_s", 1e9),
                          _figure(p, "latency", "us", 1e-6))
        out[(min(p["a"], p["b"]), max(p["a"], p["b"]))] = fig
    return out


def last_probe(frames: Sequence[Frame]) -> Any:
    """The JSON of the newest probe event in ``frames`` (None: none)."""
    for f in reversed(frames):
        for e in reversed(f.events):
            if e.kind == PROBE_EVENT:
                return e.data
    return None


# ------------------------------------------------------------------ the path and its traffic
def _dev(inv: Inventory, i: int) -> DeviceInfo | None:
    return next((d for d in inv.devices if d.index == i), None)


def nvlink_path(inv: Inventory, gpus: Sequence[int]) -> bool:
    """Whether the group's collectives take NVLink: every pair of its GPUs joined by NVLinks or an NVSwitch."""
    return _static(inv, tuple(gpus)).nvlink


def path_traffic(g: ServingGroup, frame: Frame, inv: Inventory, nvlink: bool,
                 owners: Mapping[int, ServingGroup]) -> list[tuple[int, str, float]] | None:
    """(GPU, "send"/"receive", bytes/s) on the group's path for each GPU it owns; None when a figure is unknown."""
    out: list[tuple[int, str, float]] = []
    by_index = {r.index: r for r in frame.gpus}
    for i in g.gpus:
        if owners.get(i, g) is not g:
            continue
        r = by_index.get(i)
        if r is None or r.lost:
            return None
        tx, rx = (r.nvlink_tx_bytes_per_s, r.nvlink_rx_bytes_per_s) if nvlink else (
            r.pcie_tx_bytes_per_s, r.pcie_rx_bytes_per_s)
        if tx is None or rx is None or not (0 <= tx < math.inf and 0 <= rx < math.inf):
            return None
        out += ((i, "send", float(tx)), (i, "receive", float(rx)))
    return out or None


def rated_path(inv: Inventory, frame: Frame | None, gpus: Sequence[int], p: PairLink | None,
               slowest: tuple[int | None, int | None, float | None] | None = None) -> float | None:
    """What the group's path typically delivers one way, bytes/s, from the ratings: the pair's NVLinks (or
    the GPUs' NVSwitch links) × NVLink's typical share, else the slowest PCIe link now (``slowest``: its
    :func:`slowest_link` when known) × its typical share × the path's factor for peer copies."""
    if p is not None and (p.nvlinks or p.via_nvswitch):
        caps = [device_nvlink_capacity_bytes_per_s(d, None if p.via_nvswitch else p.nvlinks)
                for d in (_dev(inv, p.a), _dev(inv, p.b)) if d is not None]
        known = [c for c in caps if c]
        return min(known) * NVLINK_TYPICAL_SHARE if known else None
    gen, width, _ = slowest_link(frame, inv, gpus) if slowest is None else slowest
    typ = pcie_typical(gen, width)
    return typ * PEER_PATH_FACTOR.get(p.pcie_path if p else "SYS", 0.6) if typ else None


def better_paths(inv: Inventory, frame: Frame, g: ServingGroup, p: PairLink | None, per_token: float,
                 busy: frozenset[int], slowest: tuple[int | None, int | None, float | None] | None = None
                 ) -> list[BetterPath]:
    """The better paths the hardware offers the group and the tok/s the link alone would allow on each (an
    upper bound; estimates from ratings × typical shares); ``slowest``: the group's :func:`slowest_link` when
    known."""
    if per_token <= 0 or p is None or p.nvlinks or p.via_nvswitch:
        return []
    out = []
    path = p.pcie_path
    devs = [d for d in (_dev(inv, i) for i in g.gpus) if d is not None]
    gen_now, width_now, _ = slowest_link(frame, inv, g.gpus) if slowest is None else slowest
    best = min((best_link(d) for d in devs), key=lambda gw: (gw[0] or 0) * (gw[1] or 0), default=(None, None))
    typ_best = pcie_typical(*best)
    if typ_best and (best[0] or 0) * (best[1] or 0) > (gen_now or 0) * (width_now or 0):
        bps = typ_best * PEER_PATH_FACTOR.get(path, 0.6)
        out.append(BetterPath(f"at {link_label(*best)} (the GPUs' and slots' best)", bps, bps / per_token))
    bridge = _bridge_rate(devs)
    if bridge and len(g.gpus) == 2:
        bps = bridge * NVLINK_TYPICAL_SHARE
        out.append(BetterPath("over an NVLink bridge (the board takes one)", bps, bps / per_token))
    if path in ("SYS", "NODE", "PHB"):
        placed = _placed(inv, g, busy, typ_best or pcie_typical(gen_now, width_now), per_token)
        if placed is not None:
            out.append(placed)
    return out


def _placed(inv: Inventory, g: ServingGroup, busy: frozenset[int], typ: float | None,
            per_token: float) -> BetterPath | None:
    """The group on GPUs of one NUMA node (:func:`better_placement`, none of them in ``busy``) over PCIe links
    that typically deliver ``typ``; None when there is no such placement."""
    placed = better_placement(inv, tuple(sorted(g.gpus)), busy)
    if placed is None or placed[1] is None or placed[1].nvlinks or not typ:
        return None
    bps = typ * PEER_PATH_FACTOR.get(placed[1].pcie_path, 0.6)
    return BetterPath(f"on {gpus_text(placed[0])} ({placed[1].pcie_path}, one NUMA node)", bps, bps / per_token)


def _bridge_rate(devs: Sequence[DeviceInfo]) -> float | None:
    rates = [next((r for key, r in NVLINK_BRIDGES if key in d.name.upper()), None) for d in devs]
    known = [r for r in rates if r]
    return min(known) if devs and len(known) == len(rates) else None


# ------------------------------------------------------------------ one group's cost
@dataclass(frozen=True, slots=True)
class _Static:
    """What does not change while the inventory does not: the group's worst pair, whether it runs over NVLink and
    then what the NVLinks are rated to deliver (:func:`rated_path`; None over PCIe: that depends on the link now)."""

    inv: Inventory
    pair: PairLink | None
    nvlink: bool
    nvlink_rated: float | None = None


_STATIC: dict[tuple[int, tuple[int, ...]], _Static] = {}


def _static(inv: Inventory, gpus: tuple[int, ...]) -> _Static:
    """:class:`_Static` of ``gpus``, kept per inventory object (hashing an inventory each tick costs more than
    the rule)."""
    key = (id(inv), gpus)
    st = _STATIC.get(key)
    if st is None or st.inv is not inv:
        if len(_STATIC) > 256:
            _STATIC.clear()
        p = worst_pair(inv, gpus)
        over_nvlink = p is not None and bool(p.nvlinks or p.via_nvswitch)
        st = _STATIC[key] = _Static(inv, p, over_nvlink,
                                    rated_path(inv, None, gpus, p) if over_nvlink else None)
    return st


def step_time(eps: Sequence[EndpointReading], url: str | None, tok: float) -> tuple[float | None, str | None]:
    """The time of one decode step: the server's mean ITL (× the tokens a step accepts under speculative
    decoding, where the server says), else running requests ÷ tok/s (an estimate)."""
    mine = [e for e in eps if e.url == url and e.up]
    itl = [(e.itl_mean_s, e.spec_accept_length) for e in mine if e.itl_mean_s]
    if itl:
        s, accept = max(itl, key=lambda x: x[0])
        if accept is not None and 1 < accept < 64:
            return s * accept, "ITL × accepted tokens a step"
        return s, "ITL"
    run = sum(e.requests_running or 0.0 for e in mine)
    return (run / tok, "running ÷ tok/s") if run >= 1 and tok > 0 else (None, None)


def group_tokens(g: ServingGroup, frame: Frame) -> float:
    """The group's generated tok/s in ``frame`` (0 without an endpoint or an answer)."""
    return endpoint_tokens(g, frame.endpoints) or 0.0


def delivered_one_way(inv: Inventory, frame: Frame, g: ServingGroup, p: PairLink, measured: PairFigures | None,
                      most: float, rated: float | None = None) -> tuple[float | None, str]:
    """What the path delivers one way and where that figure comes from: the probe's, else the rating's (``rated``:
    :func:`rated_path`'s answer when known), raised to ``most`` (what the path was seen to carry) when it carried
    more."""
    delivered, source = (measured.one_way, MEASURED) if measured and measured.one_way else (
        rated_path(inv, frame, g.gpus, p) if rated is None else rated, RATED)
    if delivered and most > delivered:  # it carried more than the estimate: the path delivers at least that
        return most, f"{source}; raised to what it carried"
    return delivered, source


def latency_parts(g: ServingGroup, measured: PairFigures | None) -> tuple[int | None, float | None]:
    """(all-reduces a decode step makes, one all-reduce's latency at least, s) where known."""
    tp = g.tp or 1
    if tp < 2:
        return None, None
    shape = shape_of(g.model)
    lat = measured.latency_s if measured else None
    return (allreduces_per_step(shape, g.pp) if shape is not None else None,
            lat * 2 * (tp - 1) if lat is not None else None)


def link_cost(g: ServingGroup, inv: Inventory, frame: Frame, probe: Mapping[tuple[int, int], PairFigures],
              owners: Mapping[int, ServingGroup] | None = None) -> LinkCost | None:
    """The link cost of ``g`` in ``frame`` (None: not a TP/PP group, nothing generated, or traffic unknown)."""
    if len(g.gpus) < 2 or max(g.tp or 1, g.pp or 1) < 2 or not g.local:
        return None
    tok = group_tokens(g, frame)
    st = _static(inv, tuple(g.gpus))
    p = st.pair
    traffic = path_traffic(g, frame, inv, st.nvlink, traffic_owners(frame.groups) if owners is None else owners)
    if not 0 < tok < math.inf or traffic is None or p is None:
        return None
    measured = probe.get((p.a, p.b))
    most = max(bps for _, _, bps in traffic)
    slowest = slowest_link(frame, inv, g.gpus)
    rated = st.nvlink_rated if st.nvlink else rated_path(inv, frame, g.gpus, p, slowest)
    delivered, source = delivered_one_way(inv, frame, g, p, measured, most, rated)
    if not delivered:
        return None
    busy = most / delivered
    step, step_src = step_time(frame.endpoints, g.endpoint, tok)
    gen, width, _ = slowest
    count, lat = latency_parts(g, measured)
    better = better_paths(inv, frame, g, p, most / tok, frozenset(
        i for h in frame.groups if h is not g for i in h.gpus), slowest) if busy >= LINK_BOUND_SHARE else []
    cost = LinkCost(
        key=g.endpoint or g.server, label=group_label(g), gpus=tuple(g.gpus), parallel=parallel_text(g),
        probe_name=f":{g.port}" if g.port else shlex.quote(clean(g.server, 60)),
        link=f"{p.label}, {link_label(gen, width)}" if gen and width else p.label, nvlink=st.nvlink,
        tokens_per_s=tok, per_gpu=tuple((i, way, bps / tok) for i, way, bps in traffic),
        delivered_bytes_per_s=delivered, delivered_source=source, busy_share=busy, better=tuple(better),
        allreduces_per_step=count, allreduce_latency_s=lat, step_s=step, step_source=step_src)
    cost.evidence.update(_evidence(cost, g))
    return cost


def _evidence(c: LinkCost, g: ServingGroup) -> dict[str, Any]:
    """Every input and derived figure of ``c`` (``d`` detail, ``summary --json``)."""
    return {
        "estimate": True, "server": g.server, "endpoint": g.endpoint, "gpus": list(c.gpus), "tp": g.tp, "pp": g.pp,
        "model": g.model, "link": c.link, "over": "NVLink" if c.nvlink else "PCIe",
        "generated_tokens_per_s": c.tokens_per_s,
        "bytes_per_token": [{"gpu": i, "direction": w, "bytes": b} for i, w, b in c.per_gpu],
        "delivered_bytes_per_s": c.delivered_bytes_per_s, "delivered_from": c.delivered_source,
        "link_s_per_token": c.bytes_per_token / c.delivered_bytes_per_s, "s_per_token": 1 / c.tokens_per_s,
        "link_busy_share": c.busy_share,
        "better_paths": [{"path": b.what, "bytes_per_s": b.bytes_per_s, "tokens_per_s_at_most": b.tokens_per_s}
                         for b in c.better],
        "allreduces_per_step": c.allreduces_per_step, "allreduce_latency_s_at_least": c.allreduce_latency_s,
        "step_s": c.step_s, "step_from": c.step_source, "latency_share_of_step": c.latency_share,
        "speedup_at_most": c.speedup_at_most,
    }


def link_costs(inv: Inventory, frame: Frame | None, probe: Any = None) -> list[LinkCost]:
    """:func:`link_cost` of every group of ``frame``; ``probe``: a probe's JSON (or None)."""
    if frame is None:
        return []
    pairs = probe_pairs(probe) if probe is not None else {}
    owners = traffic_owners(frame.groups)
    return [c for g in frame.groups if (c := link_cost(g, inv, frame, pairs, owners)) is not None]


# ------------------------------------------------------------------ words
def _ms(s: float) -> str:
    return f"{s * 1e3:.2f} ms" if s < 0.01 else f"{s * 1e3:.1f} ms" if s < 0.1 else f"{s * 1e3:.0f} ms"


def _pct(x: float) -> str:
    return f"{x * 100:.1f} %" if x < 0.1 else f"{x * 100:.0f} %"


def _tok(x: float) -> str:
    return f"{x:,.0f}" if math.isfinite(x) else "∞"


def short_text(c: LinkCost) -> str:
    """The inference panel's line (:func:`evidence_text` of its evidence)."""
    return evidence_text(c.evidence)


def _f(ev: Mapping[str, Any], key: str) -> float | None:
    v = ev.get(key)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else None


@dataclass(frozen=True, slots=True)
class EvidenceFigures:
    """The figures a link-cost finding's evidence gives (what the panel shows and the exporter writes): the busy
    share, the busiest GPU-direction's bytes per token, the tok/s ceilings now and on the best better path (while
    the link is busy half the time or more), the latency share and the speed-up bound; None where not known."""

    busy: float | None
    most: float | None
    ceiling_now: float | None
    ceiling_better: float | None
    latency_share: float | None
    speedup: float | None
    measured: bool
    latency_measured: bool


def evidence_figures(ev: Mapping[str, Any]) -> EvidenceFigures:
    """:class:`EvidenceFigures` of a ``link_cost`` finding's evidence (anything malformed is unknown)."""
    busy = _f(ev, "link_busy_share")
    per = [_f(b, "bytes") for b in ev.get("bytes_per_token") or () if isinstance(b, Mapping)]
    most = max((x for x in per if x is not None), default=None)
    delivered = _f(ev, "delivered_bytes_per_s")
    bound = busy is not None and busy >= LINK_BOUND_SHARE
    better = [x for b in ev.get("better_paths") or () if isinstance(b, Mapping)
              and (x := _f(b, "tokens_per_s_at_most")) is not None]
    return EvidenceFigures(
        busy, most, delivered / most if bound and delivered and most else None,
        max(better) if bound and better else None, _f(ev, "latency_share_of_step"), _f(ev, "speedup_at_most"),
        str(ev.get("delivered_from", "")).startswith(MEASURED), ev.get("allreduce_latency_s_at_least") is not None)


def evidence_text(ev: Mapping[str, Any]) -> str:
    """A link-cost finding's evidence in one line for the inference panel, the answer first: ``a better link: ≤1.16×
    tok/s (link 6.4 % busy, all-reduce latency ≥ 9.1 % of a step; est., probe)``, ``link 94 % busy: caps 59
    tok/s now, ≤1,444 on a better path (est.)``, ``link 4.8 % busy, 1.68 MB/token per GPU each way: not the
    limit; latency not measured (est.)``; ``""`` when the evidence lacks its figures."""
    f = evidence_figures(ev)
    busy, most = f.busy, f.most
    if busy is None or most is None:
        return ""
    est = "(est., probe)" if f.measured else "(est.)"
    if busy >= LINK_BOUND_SHARE:
        out = f"link {_pct(busy)} busy" + (f": caps {_tok(f.ceiling_now)} tok/s now" if f.ceiling_now else "")
        return out + (f", ≤{_tok(f.ceiling_better)} on a better path " if f.ceiling_better else " ") + est
    if f.latency_share is not None and f.speedup is not None:
        return (f"a better link: ≤{f.speedup:.2f}× tok/s (link {_pct(busy)} busy, all-reduce latency ≥ "
                f"{_pct(f.latency_share)} of a step; {est[1:]}")
    unmeasured = "" if f.latency_measured else "; latency not measured"
    return f"link {_pct(busy)} busy, {most / 1e6:.2f} MB/token per GPU each way: not the limit{unmeasured} {est}"


def message(c: LinkCost) -> str:
    """The finding's sentence (estimates labelled)."""
    head = f"{c.label} {c.parallel}".strip()
    worst = max(c.per_gpu, key=lambda x: x[2])
    moved = (f"GPU{worst[0]} {'sends' if worst[1] == 'send' else 'receives'} {worst[2] / 1e6:.2f} MB per token "
             f"over {c.link}, which delivers ~{fmt_gb(c.delivered_bytes_per_s)} GB/s ({c.delivered_source})")
    if c.link_bound:
        better = "; ".join(f"{_tok(b.tokens_per_s)} tok/s {b.what}" for b in c.better)
        return (f"{head}: the link is busy {_pct(c.busy_share)} of the time ({moved}): it caps the server at "
                f"~{_tok(c.ceiling_now)} tok/s now" + (f"; the link alone would allow at most {better}" if better else "")
                + " (estimates)")
    busy = f"the link is busy {_pct(c.busy_share)} of the time ({moved})"
    if c.speedup_at_most is not None:  # the answer first: how much faster a better link would make it
        return (f"{head}: a better link would make it at most {c.speedup_at_most:.2f}× faster: {busy}; "
                + _latency_words(c))
    return f"{head}: bandwidth is not the limit, {busy}; " + _latency_words(c)


def _latency_words(c: LinkCost) -> str:
    if c.allreduce_latency_s is None:
        return (f"its latency may be, and was not measured: `gpuscope probe --group {c.probe_name}` measures it "
                "(estimates)")
    each = f"each all-reduce ≥ {c.allreduce_latency_s * 1e6:.0f} µs (probe)"
    if c.allreduces_per_step is None:
        return f"its latency may be: {each}; the all-reduces per step are unknown for this model (estimates)"
    lat = c.latency_per_step_s or 0.0
    out = f"its latency: {c.allreduces_per_step} all-reduces a step × {each} ≈ {_ms(lat)} a step"
    if c.latency_misfit:
        return out + (f", more than the whole step ({_ms(c.step_s or 0.0)}, {c.step_source}): the probe does not fit "
                      "this server, not used (estimates)")
    if c.step_s:
        out += f" of {_ms(c.step_s)} ({c.step_source}), {_pct(lat / c.step_s)}"
    return out + " (estimates)"


def severity(c: LinkCost) -> str:
    """critical when the link is busy most of the time, warning from half of it or when all-reduce latency takes
    a quarter of a step, else info."""
    if c.busy_share >= LINK_CRITICAL_SHARE:
        return "critical"
    if c.link_bound or (c.latency_share or 0.0) >= LATENCY_WARN_SHARE:
        return "warning"
    return "info"


def rule_link_cost(inv: Inventory, frames: Sequence[Frame]) -> list[Candidate]:
    """The findings-engine rule (``link_cost``): one finding per TP/PP group that generates tokens; the probe is
    the newest in the window or the one the engine kept (``frames.probe``)."""
    if not frames:
        return []
    probe = getattr(frames, "probe", None) or last_probe(frames)
    out = []
    for c in link_costs(inv, frames[-1], probe):
        variant = "bound" if c.link_bound else ("latency" if c.latency_share is not None else "unmeasured")
        out.append(Candidate(f"link-cost:{c.key}", "link_cost", severity(c), f"GPU{c.gpus[0]}-GPU{c.gpus[-1]}",
                             message(c), c.evidence, variant=variant, basis="live"))
    return out
