"""Link self-test (``gpuscope probe``): the results, the links they used, what each link should give,
a verdict in words, findings, the JSON form (docs/probe-json.md) and an 80-column table.

Pure: no I/O. The measurements come from ``sources/cudaprobe.py`` (CUDA, on the GPUs) or
``sources/simprobe.py`` (derived from a scenario's links, labelled SIMULATED).

Units: bandwidths in bytes/s (shown as GB/s, 10⁹ bytes), latencies in µs, sizes in bytes.
A "both ways" figure is the sum of the two directions running at once.

What links TYPICALLY achieve (``typical_*``): the share of the theoretical ceiling (after line encoding,
``core.topology``) that a copy-engine copy of pinned memory reaches on a healthy machine:

* PCIe Gen3 ×16 ≈ 12–13 GB/s of 15.8, Gen4 ×16 ≈ 25 of 31.5 (about 80 %: the rest is TLP/DLLP protocol
  overhead; NVIDIA cuda-samples ``bandwidthTest`` and nvbandwidth ``host_to_device_memcpy_ce`` outputs as
  published by users, e.g. NVIDIA/nvbandwidth's README and issues).
* PCIe Gen5 ×16 ≈ 50–55 of 63 (84 %): measured by this project on H200 (docs/real-gpus.md, *Measured NVML
  facts*: 54.8 GB/s pinned host→device) and in nvbandwidth results for H100 PCIe Gen5 hosts.
* NVLink 4 (H100/H200, 18 links) ≈ 370–390 GB/s one way of 450 and ≈ 750 both ways of 900 (83–87 %):
  NVIDIA cuda-samples ``p2pBandwidthLatencyTest`` on H100 SXM, github.com/NVIDIA/nccl/issues/1264 (380 / 749
  GB/s); this project measured 390.9 GB/s one way on 2× H200 (docs/real-gpus.md, *Measured NVML facts*).
* PCIe peer to peer and copies staged through host memory: no published reference; the factors in
  :data:`PEER_PATH_FACTOR` are this project's rough engineering figures (said so in the verdict).
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from gpuscope.core.candidate import Candidate
from gpuscope.core.errors import GpuscopeError
from gpuscope.core.findings import Finding
from gpuscope.core.model import DeviceInfo, Event, Inventory
from gpuscope.core.topology import (  # what healthy links typically give is shared with core/link_cost.py
    NVLINK_TYPICAL_SHARE,
    PATH_RANK,
    PEER_PATH_FACTOR,
    STAGED_FACTOR,
    best_link,
    device_nvlink_capacity_bytes_per_s,
    pcie_capacity_bytes_per_s,
    pcie_typical,
)
from gpuscope.core.vocab import PROBE_EVENT, PROBE_FIGURE_MAX, SEV_MARK, link_label

PROBE_SCHEMA = "gpuscope.probe/1"

# What each figure is. Host figures concern one GPU; peer figures a pair (a → b); allreduce a group.
HOST_KINDS = ("h2d", "d2h", "bidir")
HOST_LATENCY_KINDS = ("h2d_latency", "d2h_latency")
PEER_KINDS = ("read", "write", "bidir_read", "bidir_write")
KIND_WORDS = {
    "h2d": "host→device", "d2h": "device→host", "bidir": "host↔device both ways",
    "h2d_latency": "host→device latency", "d2h_latency": "device→host latency",
    "read": "read", "write": "write", "bidir_read": "read both ways", "bidir_write": "write both ways",
    "latency": "latency", "allreduce": "all-reduce bus bandwidth",
}

# Share of the ceiling a healthy link typically gives (see the module docstring for the sources).
BIDIR_TYPICAL_FACTOR = 1.7  # PCIe both ways together vs one way (full duplex loses some to completions; rough)
NVLINK_BIDIR_FACTOR = 2.0  # NVLink both ways: 749 of 900 GB/s on H100 (NVIDIA/nccl#1264), the one-way share
# PCIE_TYPICAL_SHARE, NVLINK_TYPICAL_SHARE, PEER_PATH_FACTOR (peer copies without NVLink) and STAGED_FACTOR live
# in core/topology.py, with pcie_typical.

# A device↔device figure of an NVLinked pair at or below this many times what the pair's host links give did
# not cross the NVLinks: peer access is off, or the copy was routed through the host (HGX H100: ~37 GB/s
# staged, ~370 over NVLink 4).
HOST_SPEED_MARGIN = 1.25

# How each figure was copied (``Measurement.method``): the engine and the CUDA call that moved the bytes. A copy
# engine (DMA) copy is what nvbandwidth's ``*_ce`` tests time; its ``*_sm`` tests copy with a kernel on the SMs and
# read differently (H100 host→device: ~55 GB/s with copy engines, ~35 with SM copies, NVIDIA/nvbandwidth#24), so
# a figure compared with another tool's must be of the same method.
METHOD_H2D = "copy engine (cuMemcpyHtoDAsync)"
METHOD_D2H = "copy engine (cuMemcpyDtoHAsync)"
METHOD_BIDIR = "copy engine (cuMemcpyHtoDAsync + cuMemcpyDtoHAsync at once)"
METHOD_PEER = "copy engine (cuMemcpyPeerAsync, peer access)"
METHOD_PEER_STAGED = "copy engine (cuMemcpyPeerAsync, staged through host memory by the driver)"
METHOD_SIMULATED = "simulated (derived from the scenario's links, not copied)"
# The table's short tag for a method, and the legend line of each tag.
METHOD_LEGEND = {
    "CE": "copy engine (cuMemcpy*Async), as nvbandwidth's *_ce tests; SM-kernel copies read "
          "differently (H100 host→device ~35 GB/s vs ~55 with copy engines)",
    "SM": "kernel copy on the SMs (nvbandwidth's *_sm tests, NCCL)",
    "sim": "simulated: derived from the scenario's links, not copied",
    "?": "method not recorded (a probe JSON from before it was)",
}


def method_tag(method: str | None) -> str:
    """The table's short tag of a ``Measurement.method``: ``CE`` copy engine, ``SM`` a kernel on the SMs
    (NCCL too), ``sim`` simulated, ``?`` not recorded or not known."""
    m = (method or "").lower()
    if m.startswith("copy engine"):
        return "CE"
    if m.startswith("simulated"):
        return "sim"
    if "kernel" in m or "nccl" in m or m.startswith("sm"):
        return "SM"
    return "?"


_TAG_WORDS = {"CE": "copy-engine copies", "SM": "SM-kernel copies", "sim": "simulated", "?": "method not recorded"}


def method_summary(r: ProbeResult) -> str:
    """How the figures of ``r`` were copied, in a few words for a panel's title: ``copy-engine copies``,
    ``simulated``, or several joined with ``+`` (``copy-engine copies + method not recorded``)."""
    tags = sorted({method_tag(m.method) for m in measurements(r)})
    return " + ".join(_TAG_WORDS[t] for t in tags) or "no figures"


OK_SHARE = 0.80  # at least this share of typical: as expected
CRITICAL_SHARE = 0.50  # below this share of typical: a critical finding


class ProbeError(GpuscopeError, ValueError):
    """A probe JSON that cannot be read, or a probe that cannot run; the message is the user's line."""


# ------------------------------------------------------------------ the result model
@dataclass(frozen=True, slots=True)
class Measurement:
    """The median of ``trials`` timed copies of ``size_bytes``; ``low``/``high`` the fastest and slowest
    trial's figure, in the same unit as ``value`` (bytes/s, or µs for a latency). ``method``: how the bytes
    were copied (``METHOD_*``: copy engine and CUDA call, or simulated; None: not recorded)."""

    value: float
    trials: int = 1
    size_bytes: int = 0
    low: float | None = None
    high: float | None = None
    method: str | None = None


@dataclass(frozen=True, slots=True)
class HostLink:
    """One GPU's PCIe link to the host while probed: generation and width now and at most (GPU and slot)."""

    gen_now: int | None
    width_now: int | None
    gen_max: int | None
    width_max: int | None
    gen_gpu: int | None = None  # the GPU's own max (above gen_max: the slot limits it)
    width_gpu: int | None = None

    @property
    def slot_limited(self) -> bool:
        return bool((self.gen_gpu and self.gen_max and self.gen_gpu > self.gen_max)
                    or (self.width_gpu and self.width_max and self.width_gpu > self.width_max))

    @property
    def label_now(self) -> str:
        return link_label(self.gen_now, self.width_now)

    @property
    def label_max(self) -> str:
        return link_label(self.gen_max, self.width_max)

    @property
    def below_max(self) -> bool:
        return bool((self.gen_now and self.gen_max and self.gen_now < self.gen_max)
                    or (self.width_now and self.width_max and self.width_now < self.width_max))

    def ceiling(self, at_max: bool = False) -> float | None:
        """The link's bandwidth one way, bytes/s, now (or at its best)."""
        if at_max:
            return pcie_capacity_bytes_per_s(self.gen_max or self.gen_now, self.width_max or self.width_now)
        return pcie_capacity_bytes_per_s(self.gen_now or self.gen_max, self.width_now or self.width_max)


@dataclass(frozen=True, slots=True)
class GpuResult:
    """One GPU's host figures (None: not measured)."""

    index: int
    name: str
    link: HostLink
    numa_node: int | None = None
    host_memory_local: bool | None = None  # pinned buffers placed on the GPU's NUMA node (None: unknown)
    h2d: Measurement | None = None
    d2h: Measurement | None = None
    bidir: Measurement | None = None
    h2d_latency: Measurement | None = None  # µs
    d2h_latency: Measurement | None = None  # µs


@dataclass(frozen=True, slots=True)
class PairResult:
    """Device↔device figures between GPUs ``a`` and ``b``: ``read`` is ``a`` reading from ``b``
    (``b``→``a``), ``write`` is ``a`` writing to ``b`` (``a``→``b``)."""

    a: int
    b: int
    path: str  # the PCIe topology level: PIX, PXB, PHB, NODE, SYS
    nvlinks: int = 0
    nvlink_version: int | None = None
    p2p: bool | None = None  # peer access possible (cuDeviceCanAccessPeer); False: staged through host
    read: Measurement | None = None
    write: Measurement | None = None
    bidir_read: Measurement | None = None
    bidir_write: Measurement | None = None
    latency: Measurement | None = None  # µs

    @property
    def label(self) -> str:
        return f"NV{self.nvlinks}" if self.nvlinks else self.path


@dataclass(frozen=True, slots=True)
class AllReduceResult:
    """NCCL all-reduce bus bandwidth over ``gpus`` (nccl-tests' busbw: algbw × 2(n−1)/n)."""

    gpus: tuple[int, ...]
    busbw: Measurement


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """One run of the probe."""

    t: float  # Unix time the run started
    host: str
    backend: str  # "cuda-bindings 13.5.0 (driver CUDA 13.0)" or "simulated"
    gpus: tuple[GpuResult, ...]
    pairs: tuple[PairResult, ...] = ()
    allreduce: AllReduceResult | None = None
    simulated: bool = False
    scenario: str | None = None
    notes: tuple[str, ...] = ()
    # One NVLink's rate by part (H200: 25e9), keyed by GPU index, for the pairs' ceilings.
    nvlink_link_bytes_per_s: Mapping[int, float] = field(default_factory=dict)
    group: str | None = None  # the serving group whose links were probed (``--group``: its label), else None

    def gpu(self, index: int) -> GpuResult | None:
        return next((g for g in self.gpus if g.index == index), None)

    def pair(self, a: int, b: int) -> PairResult | None:
        """The pair of GPUs ``a`` and ``b`` (either order), or None when not probed."""
        lo, hi = sorted((a, b))
        return next((p for p in self.pairs if (p.a, p.b) == (lo, hi)), None)


@dataclass(frozen=True, slots=True)
class PairFigures:
    """What a pair's link delivered as measured, seen from ``src`` to ``dst``: bytes/s one way each direction
    (the median of the timed copies; None: not measured), the per-copy time of small (4-byte) copies in µs,
    how they were copied and whether peer access was used."""

    src: int
    dst: int
    src_to_dst_bytes_per_s: float | None
    dst_to_src_bytes_per_s: float | None
    latency_us: float | None
    method: str | None
    p2p: bool | None


def pair_figures(r: ProbeResult, src: int, dst: int) -> PairFigures | None:
    """The measured figures of the link between GPUs ``src`` and ``dst`` (None: the pair was not probed).

    A pair is stored once (``a`` < ``b``): ``write`` is a→b and ``read`` is b→a; this turns them into
    src→dst and dst→src. The latency is the pair's one small-copy figure (a reading from b)."""
    p = r.pair(src, dst)
    if p is None:
        return None
    a_to_b = p.write.value if p.write is not None else None
    b_to_a = p.read.value if p.read is not None else None
    fwd, back = (a_to_b, b_to_a) if src == p.a else (b_to_a, a_to_b)
    one = p.write or p.read
    return PairFigures(src, dst, fwd, back, p.latency.value if p.latency is not None else None,
                       one.method if one is not None else None, p.p2p)


# ------------------------------------------------------------------ from the inventory
def host_link(dev: DeviceInfo, gen_now: int | None, width_now: int | None) -> HostLink:
    """The link of ``dev`` as probed: now from a reading taken while the link was busy; at most the best
    the GPU and its slot allow (:func:`gpuscope.core.topology.best_link`)."""
    g, w = best_link(dev)
    return HostLink(gen_now, width_now, g, w, dev.pcie_gen_gpu_max, dev.pcie_width_gpu_max)


def nvlink_rates(inv: Inventory) -> dict[int, float]:
    """One NVLink's bandwidth one way, bytes/s, per GPU index (where the GPU has NVLinks)."""
    out = {}
    for d in inv.devices:
        rate = device_nvlink_capacity_bytes_per_s(d, 1)
        if rate:
            out[d.index] = rate
    return out


# ------------------------------------------------------------------ ceilings and typical figures
def host_ceiling(g: GpuResult, kind: str, at_max: bool = False) -> float | None:
    cap = g.link.ceiling(at_max)
    return cap * (2 if kind == "bidir" else 1) if cap else None


def host_typical(g: GpuResult, kind: str, at_max: bool = True) -> float | None:
    """The typical figure of ``kind`` (h2d, d2h, bidir) on this GPU's link at its best (or as it is now)."""
    link = g.link
    gen, width = (link.gen_max or link.gen_now, link.width_max or link.width_now) if at_max else (
        link.gen_now or link.gen_max, link.width_now or link.width_max)
    t = pcie_typical(gen, width)
    return t * (BIDIR_TYPICAL_FACTOR if kind == "bidir" else 1) if t else None


def _pair_nvlink_rate(r: ProbeResult, p: PairResult) -> float | None:
    rates = [r.nvlink_link_bytes_per_s.get(i) for i in (p.a, p.b)]
    known = [x for x in rates if x]
    if known:
        return min(known)
    return 25e9 if p.nvlinks else None  # NVLink 3/4 data-centre rate when the part is not known


def pair_ceiling(r: ProbeResult, p: PairResult, kind: str) -> float | None:
    """The pair's theoretical bandwidth for ``kind``, bytes/s: its NVLinks, else the slower PCIe link now."""
    both = 2 if kind.startswith("bidir") else 1
    if p.nvlinks:
        rate = _pair_nvlink_rate(r, p)
        return rate * p.nvlinks * both if rate else None
    caps = [g.link.ceiling() for g in (r.gpu(p.a), r.gpu(p.b)) if g is not None]
    known = [c for c in caps if c]
    return min(known) * both if known else None


def pair_typical(r: ProbeResult, p: PairResult, kind: str, at_max: bool = True) -> float | None:
    """What the pair typically gives for ``kind``: NVLink at 84 % of its rate; without NVLink the slower PCIe
    link's typical figure times the path's factor (and the staging factor without peer access)."""
    both = BIDIR_TYPICAL_FACTOR if kind.startswith("bidir") else 1.0
    if p.nvlinks:
        cap = pair_ceiling(r, p, "read")
        both = NVLINK_BIDIR_FACTOR if kind.startswith("bidir") else 1.0
        return cap * NVLINK_TYPICAL_SHARE * both if cap else None
    typ = [host_typical(g, "h2d", at_max) for g in (r.gpu(p.a), r.gpu(p.b)) if g is not None]
    known = [t for t in typ if t]
    if not known:
        return None
    factor = STAGED_FACTOR if p.p2p is False else PEER_PATH_FACTOR.get(p.path, 0.6)
    return min(known) * factor * both


# ------------------------------------------------------------------ verdicts
@dataclass(frozen=True, slots=True)
class Verdict:
    """One figure judged against its link: ``level`` ok / warn / bad; ``text`` the sentence shown."""

    subject: str  # GPU0, GPU0-GPU1, GPU0,GPU1
    kind: str
    value: float  # bytes/s
    ceiling: float | None
    typical: float | None
    share: float | None  # value / typical
    level: str
    link: str  # the link in words: "Gen1×16 (max Gen4×16)", "NV18 (NVLink 4.0)", "SYS, staged"
    text: str
    typical_now: float | None = None  # what the link as trained now typically gives (beside ``ceiling``, now)
    best: str | None = None  # the link at its best ("Gen4×16") where it trained below it; ``typical`` is its figure
    method: str | None = None  # how the figure was copied (Measurement.method)
    p2p_off: bool = False  # a device↔device figure that did not go peer to peer: P2P off or routed through the host


def _gbs(x: float | None) -> str:
    if x is None:
        return "?"
    return f"{x / 1e9:.0f}" if x >= 100e9 else f"{x / 1e9:.1f}"


def _level(share: float | None) -> str:
    if share is None:
        return "dim"
    return "ok" if share >= OK_SHARE else ("warn" if share >= CRITICAL_SHARE else "bad")


_NVLINK_NAMES = {1: "1.0", 2: "2.0", 3: "2.2", 4: "3.0", 5: "3.1", 6: "4.0", 7: "5.0"}


def nvlink_words(count: int, version: int | None) -> str:
    v = _NVLINK_NAMES.get(version or 0)
    return f"NV{count}" + (f" (NVLink {v})" if v else "")


def host_verdict(g: GpuResult, kind: str) -> Verdict | None:
    """The verdict on one host figure of ``g`` (None: not measured)."""
    m: Measurement | None = getattr(g, kind)
    if m is None:
        return None
    link = g.link
    typical = host_typical(g, kind)
    share = m.value / typical if typical else None
    level = _level(share)
    subject = f"GPU{g.index}"
    best = link.label_max
    head = f"{subject} {KIND_WORDS[kind]} {_gbs(m.value)} GB/s"
    if typical is None:
        text = f"{head}: link unknown, no reference"
    else:
        text = f"{head}: {share * 100:.0f} % of {best} (typical {_gbs(typical)})"  # type: ignore[operator]
        typ_now = host_typical(g, kind, at_max=False)
        if level == "ok":
            text += ": as expected"
            if link.slot_limited:
                text += (f" for the slot (the GPU does {link_label(link.gen_gpu or link.gen_max, link.width_gpu or link.width_max)}"
                         " in a faster one)")
        elif link.below_max:
            why = f"the link trained at {link.label_now}"
            if typ_now and m.value >= OK_SHARE * typ_now:
                why += f", which gives {_gbs(typ_now)}: reseat, check the slot's BIOS setting or riser"
            text += f": {why}"
        else:
            reasons = "another load on the link, host memory on a far NUMA node, IOMMU, or a switch/riser"
            if g.host_memory_local is False:
                reasons = "host buffers on a far NUMA node, " + reasons.replace("host memory on a far NUMA node, ", "")
            text += f": {link.label_now} is at its best but delivers less: {reasons}"
    return Verdict(subject, kind, m.value, host_ceiling(g, kind), typical, share, level,
                   f"{link.label_now}" + (f" (max {best})" if link.below_max else ""), text,
                   typical_now=host_typical(g, kind, at_max=False), best=best if link.below_max else None,
                   method=m.method)


def host_speed(r: ProbeResult, p: PairResult, kind: str) -> float | None:
    """What the pair's host links give for ``kind`` (one way, or both ways for ``bidir_*``), bytes/s: the slower
    GPU's measured host figure (its typical figure on the link now where not measured). A copy staged through
    host memory cannot beat it."""
    both = kind.startswith("bidir")
    out = []
    for g in (r.gpu(p.a), r.gpu(p.b)):
        if g is None:
            continue
        got = [m.value for m in ((g.bidir,) if both else (g.h2d, g.d2h)) if m is not None]
        x = min(got) if got else host_typical(g, "bidir" if both else "h2d", at_max=False)
        if x:
            out.append(x)
    return min(out) if out else None


def p2p_off(r: ProbeResult, p: PairResult, kind: str, value: float, share: float | None) -> bool:
    """True when a device↔device figure did not go peer to peer: peer access was unavailable (``p2p`` false),
    or the pair has NVLinks but the figure is low and sits near host-staged speed (at most
    :data:`HOST_SPEED_MARGIN` × what its host links give)."""
    if p.p2p is False:
        return True
    if not p.nvlinks or (share is not None and share >= OK_SHARE):
        return False
    ref = host_speed(r, p, kind)
    return ref is not None and value <= HOST_SPEED_MARGIN * ref


def _pair_best(r: ProbeResult, p: PairResult) -> str | None:
    """The slower best link of a PCIe pair whose GPUs trained below their best (None: NVLink, or at the best)."""
    if p.nvlinks:
        return None
    slow = [g for g in (r.gpu(p.a), r.gpu(p.b)) if g is not None and g.link.below_max]
    if not slow:
        return None
    g = min(slow, key=lambda x: host_typical(x, "h2d") or 0.0)
    return g.link.label_max


def _pair_low_reason(r: ProbeResult, p: PairResult) -> str:
    """Why a pair's figure is low, in words (after the share of typical)."""
    if p.nvlinks:
        return ": NVLink below its rate: check `nvidia-smi nvlink -s` for links down, and other traffic"
    slow = [g for g in (r.gpu(p.a), r.gpu(p.b)) if g is not None and g.link.below_max]
    if slow:
        return "; " + ", ".join(f"GPU{g.index} trained at {g.link.label_now}" for g in slow)
    if PATH_RANK.get(p.path, 4) >= PATH_RANK["NODE"]:
        return f": the {p.path} path crosses the CPU; peer traffic there is slow"
    return ": below its PCIe links: another load or the switch"


def _p2p_off_words(r: ProbeResult, p: PairResult, kind: str) -> str:
    """The figure that shows an NVLinked pair's copy did not go peer to peer, and what to check."""
    ref = host_speed(r, p, kind)
    near = f"near what the host links give ({_gbs(ref)} GB/s)" if ref else "at host-staged speed"
    if p.p2p is False:
        why = "peer access unavailable (cuDeviceCanAccessPeer: no; a VM, the IOMMU/ACS or the driver's P2P setting)"
    else:
        why = "the copy did not take the NVLinks (check `nvidia-smi topo -p2p r` and `nvidia-smi nvlink -s`)"
    return f"{near}: {why}"


def pair_verdict(r: ProbeResult, p: PairResult, kind: str) -> Verdict | None:
    """The verdict on one device↔device figure (None: not measured). A figure that did not go peer to peer
    (:func:`p2p_off`) says "P2P off or routed through the host" with the figures."""
    m: Measurement | None = getattr(p, kind)
    if m is None:
        return None
    typical = pair_typical(r, p, kind)
    share = m.value / typical if typical else None
    level = _level(share)
    arrow = "←" if kind in ("read",) else ("→" if kind == "write" else "↔")
    subject = f"GPU{p.a}-GPU{p.b}"
    if p.nvlinks:
        link = nvlink_words(p.nvlinks, p.nvlink_version)
    else:
        link = p.path + (", staged through host" if p.p2p is False else ", peer access")
    off = p2p_off(r, p, kind, m.value, share)
    head = f"GPU{p.a}{arrow}GPU{p.b} {KIND_WORDS[kind]} {_gbs(m.value)} GB/s" + (
        ": P2P off or routed through the host" if off else "")
    if typical is None:
        text = f"{head} over {link}: no reference"
    else:
        text = f"{head}: {share * 100:.0f} % of {link} (typical {_gbs(typical)})"  # type: ignore[operator]
        text += _pair_judgement(r, p, kind, level, off)
    return Verdict(subject, kind, m.value, pair_ceiling(r, p, kind), typical, share, level, link, text,
                   typical_now=pair_typical(r, p, kind, at_max=False), best=_pair_best(r, p), method=m.method,
                   p2p_off=off)


def _pair_judgement(r: ProbeResult, p: PairResult, kind: str, level: str, off: bool) -> str:
    """What follows a pair's share of typical in its verdict: P2P off with the figures, as expected, or why low."""
    text = ""
    if off and p.nvlinks:
        text += ", " + _p2p_off_words(r, p, kind)
    if level == "ok":
        text += ": as expected" + (" for a copy staged through host memory" if off else "")
    elif not (off and p.nvlinks):
        text += _pair_low_reason(r, p)
    if not p.nvlinks and (p.p2p is False or p.path == "SYS"):
        text += " (no peer reference published: a rough figure)"
    return text


def verdicts(r: ProbeResult) -> list[Verdict]:
    """Every bandwidth figure of ``r`` judged, GPUs first, then pairs (latencies are reported, not judged:
    they depend on the method more than on the link)."""
    out: list[Verdict] = []
    for g in r.gpus:
        out += [v for k in HOST_KINDS if (v := host_verdict(g, k)) is not None]
    for p in r.pairs:
        out += [v for k in PEER_KINDS if (v := pair_verdict(r, p, k)) is not None]
    return out


def probe_findings(r: ProbeResult) -> list[Candidate]:
    """Findings from a probe: a figure below half of what its link typically gives is critical; between half
    and 80 % a warning. ``basis`` is ``static`` (a one-off measurement, not an average)."""
    out = []
    for v in verdicts(r):
        if v.level not in ("bad", "warn"):
            continue
        sev = "critical" if v.level == "bad" else "warning"
        sim = "SIMULATED: " if r.simulated else ""
        out.append(Candidate(
            id=f"probe_link:{v.subject}:{v.kind}", rule="probe_link", severity=sev, subject=v.subject,
            message=sim + v.text,
            evidence={"kind": v.kind, "measured_gb_per_s": _round(v.value / 1e9),
                      "typical_gb_per_s": _round(v.typical / 1e9 if v.typical else None),
                      "ceiling_gb_per_s": _round(v.ceiling / 1e9 if v.ceiling else None),
                      "share_of_typical": _round(v.share, 3), "link": v.link, "probed_at": r.t},
            variant=v.level, basis="static"))
    return out


def probe_finding_list(r: ProbeResult) -> list[Finding]:
    """:func:`probe_findings` as raised findings (raised, and true since, when the probe ran), the worst figure
    of each GPU and pair only (critical first, then the lowest share of typical: a Gen1 pair of GPUs gives 3
    findings, not 10): what the live screen's findings panel shows beside the engine's own until the next
    probe. The others stay in the topology panel, the recording's probe event and ``gpuscope probe``."""
    worst: dict[str, Candidate] = {}
    for c in probe_findings(r):
        old = worst.get(c.subject)
        if old is None or (c.severity != old.severity and c.severity == "critical") or (
                c.severity == old.severity
                and (c.evidence.get("share_of_typical") or 1.0) < (old.evidence.get("share_of_typical") or 1.0)):
            worst[c.subject] = c
    return [Finding(c.id, c.rule, c.severity, c.subject, c.message, c.evidence, started_at=r.t, raised_at=r.t,
                    variant=c.variant, basis=c.basis, since=r.t, worst=c.severity) for c in worst.values()]


def probe_event(r: ProbeResult) -> Event:
    """The event that carries a probe in a recording: kind ``probe``, the JSON in ``data``, the summary line in
    ``text`` (``record --probe-links`` and the TUI's palette command write the same). The data holds the figures
    without the judged fields and findings, which a reader recomputes: an event's data is bounded in items
    (core/validate.py ``MAX_DATA_ITEMS``), and the figures must come first."""
    return Event(t=r.t, kind=PROBE_EVENT, text=summary_line(r), data=to_json(r, judged=False))


# ------------------------------------------------------------------ JSON
def _round(x: float | None, digits: int = 2) -> float | None:
    return None if x is None else round(x, digits)


def _m_json(m: Measurement | None, latency: bool = False) -> dict[str, Any] | None:
    if m is None:
        return None
    scale = 1.0 if latency else 1e9
    key = "us" if latency else "gb_per_s"
    return {key: _round(m.value / scale, 3), "trials": m.trials, "size_bytes": m.size_bytes,
            f"low_{key}": _round(m.low / scale, 3) if m.low is not None else None,
            f"high_{key}": _round(m.high / scale, 3) if m.high is not None else None, "method": m.method}


def to_json(r: ProbeResult, judged: bool = True) -> dict[str, Any]:
    """The JSON object of a probe (schema ``gpuscope.probe/1``, docs/probe-json.md); with ``judged`` each figure's
    ceiling, typical figures, share, level and verdict, and the findings (a reader recomputes them)."""
    vs = {(v.subject, v.kind): v for v in verdicts(r)} if judged else {}

    def judgement(subject: str, kind: str) -> dict[str, Any] | None:
        v = vs.get((subject, kind))
        if v is None:
            return None
        out = {"ceiling_gb_per_s": _round(v.ceiling / 1e9 if v.ceiling else None),
               "typical_now_gb_per_s": _round(v.typical_now / 1e9 if v.typical_now else None),
               "typical_gb_per_s": _round(v.typical / 1e9 if v.typical else None), "best_link": v.best,
               "share_of_typical": _round(v.share, 3), "level": v.level, "verdict": v.text}
        if kind in PEER_KINDS:
            out["p2p_off"] = v.p2p_off
        return out

    gpus = []
    for g in r.gpus:
        d: dict[str, Any] = {
            "index": g.index, "name": g.name, "numa_node": g.numa_node, "host_memory_local": g.host_memory_local,
            "link": {"gen_now": g.link.gen_now, "width_now": g.link.width_now, "gen_max": g.link.gen_max,
                     "width_max": g.link.width_max, "gen_gpu": g.link.gen_gpu, "width_gpu": g.link.width_gpu},
        }
        for k in HOST_KINDS:
            m = _m_json(getattr(g, k))
            d[k] = None if m is None else {**m, **(judgement(f"GPU{g.index}", k) or {})}
        for k in HOST_LATENCY_KINDS:
            d[k] = _m_json(getattr(g, k), latency=True)
        gpus.append(d)
    pairs = []
    for p in r.pairs:
        e: dict[str, Any] = {"a": p.a, "b": p.b, "path": p.path, "nvlinks": p.nvlinks,
                             "nvlink_version": p.nvlink_version, "p2p": p.p2p}
        for k in PEER_KINDS:
            m = _m_json(getattr(p, k))
            e[k] = None if m is None else {**m, **(judgement(f"GPU{p.a}-GPU{p.b}", k) or {})}
        e["latency"] = _m_json(p.latency, latency=True)
        pairs.append(e)
    return {
        "schema": PROBE_SCHEMA, "t": r.t, "host": r.host, "backend": r.backend, "simulated": r.simulated,
        "scenario": r.scenario, "group": r.group, "notes": list(r.notes),
        "nvlink_link_gb_per_s": {str(k): v / 1e9 for k, v in sorted(r.nvlink_link_bytes_per_s.items())},
        "gpus": gpus, "pairs": pairs,
        "allreduce": None if r.allreduce is None else {"gpus": list(r.allreduce.gpus),
                                                       "busbw": _m_json(r.allreduce.busbw)},
        "findings": [{"severity": c.severity, "subject": c.subject, "message": c.message}
                     for c in probe_findings(r)] if judged else [],
    }


def _num(d: Mapping[str, Any], key: str, where: str, *, optional: bool = True, integer: bool = False,
         lo: float = 0.0, hi: float = 1e15) -> Any:
    v = d.get(key)
    if v is None:
        if optional:
            return None
        raise ProbeError(f"probe JSON: {where}.{key} is missing")
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (integer and not isinstance(v, int)):
        raise ProbeError(f"probe JSON: {where}.{key} is not a {'whole ' if integer else ''}number")
    if not math.isfinite(v) or not lo <= v <= hi:
        raise ProbeError(f"probe JSON: {where}.{key} is out of range")
    return v


def _obj(v: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(v, Mapping):
        raise ProbeError(f"probe JSON: {where} is not an object")
    return v


def _str(d: Mapping[str, Any], key: str, where: str, default: str | None = None) -> Any:
    v = d.get(key, default)
    if v is None:
        return None
    if not isinstance(v, str):
        raise ProbeError(f"probe JSON: {where}.{key} is not text")
    return v[:200]


def _list(v: Any, where: str, limit: int = 4096) -> list[Any]:
    if v is None:
        return []
    if not isinstance(v, list):
        raise ProbeError(f"probe JSON: {where} is not a list")
    if len(v) > limit:
        raise ProbeError(f"probe JSON: {where} has more than {limit} entries")
    return v


def _bool(d: Mapping[str, Any], key: str, where: str) -> bool | None:
    v = d.get(key)
    if v is not None and not isinstance(v, bool):
        raise ProbeError(f"probe JSON: {where}.{key} is not true/false")
    return v


FIGURE_MAX = PROBE_FIGURE_MAX  # the largest figure a probe can give (core/vocab.py)


def _m_read(v: Any, where: str, latency: bool = False) -> Measurement | None:
    if v is None:
        return None
    d = _obj(v, where)
    key = "us" if latency else "gb_per_s"
    scale = 1.0 if latency else 1e9
    value = _num(d, key, where, optional=False, lo=1e-9, hi=FIGURE_MAX[key])  # 0 GB/s is no measurement
    low, high = _num(d, f"low_{key}", where, hi=1e9), _num(d, f"high_{key}", where, hi=1e9)
    return Measurement(value * scale, int(_num(d, "trials", where, integer=True, hi=1e9) or 1),
                       int(_num(d, "size_bytes", where, integer=True, hi=2**50) or 0),
                       None if low is None else low * scale, None if high is None else high * scale,
                       _str(d, "method", where))  # absent in probes written before it was recorded: None


def from_json(data: Any) -> ProbeResult:
    """Read a probe JSON object back (from ``--json`` or a recording's ``probe`` event).

    Raises :class:`ProbeError` (one line) on anything that is not a probe of a known schema; verdicts and
    findings in the object are ignored (they are recomputed from the figures)."""
    d = _obj(data, "the probe")
    schema = d.get("schema")
    if schema != PROBE_SCHEMA:
        raise ProbeError(f"probe JSON: schema {str(schema)[:40]!r} is not {PROBE_SCHEMA}")
    gpus = []
    for k, gv in enumerate(_list(d.get("gpus"), "gpus")):
        w = f"gpus[{k}]"
        g = _obj(gv, w)
        ln = _obj(g.get("link") or {}, f"{w}.link")
        link = HostLink(*(_num(ln, f, f"{w}.link", integer=True, hi=64) for f in
                          ("gen_now", "width_now", "gen_max", "width_max", "gen_gpu", "width_gpu")))
        gpus.append(GpuResult(
            index=_num(g, "index", w, optional=False, integer=True, hi=4096), name=_str(g, "name", w, "") or "",
            link=link, numa_node=_num(g, "numa_node", w, integer=True, hi=4096),
            host_memory_local=_bool(g, "host_memory_local", w),
            **{kd: _m_read(g.get(kd), f"{w}.{kd}") for kd in HOST_KINDS},
            **{kd: _m_read(g.get(kd), f"{w}.{kd}", latency=True) for kd in HOST_LATENCY_KINDS}))
    pairs = []
    for k, pv in enumerate(_list(d.get("pairs"), "pairs", limit=65536)):
        w = f"pairs[{k}]"
        p = _obj(pv, w)
        path = _str(p, "path", w, "SYS")
        if path not in PATH_RANK:
            raise ProbeError(f"probe JSON: {w}.path {path[:20]!r} is not one of {', '.join(PATH_RANK)}")
        pairs.append(PairResult(
            a=_num(p, "a", w, optional=False, integer=True, hi=4096),
            b=_num(p, "b", w, optional=False, integer=True, hi=4096), path=path,
            nvlinks=_num(p, "nvlinks", w, integer=True, hi=1024) or 0,
            nvlink_version=_num(p, "nvlink_version", w, integer=True, hi=64), p2p=_bool(p, "p2p", w),
            **{kd: _m_read(p.get(kd), f"{w}.{kd}") for kd in PEER_KINDS},
            latency=_m_read(p.get("latency"), f"{w}.latency", latency=True)))
    ar = None
    if d.get("allreduce") is not None:
        a = _obj(d["allreduce"], "allreduce")
        busbw = _m_read(a.get("busbw"), "allreduce.busbw")
        members = tuple(_num({"i": i}, "i", "allreduce.gpus", optional=False, integer=True, hi=4096)
                        for i in _list(a.get("gpus"), "allreduce.gpus"))
        if busbw is not None:
            ar = AllReduceResult(members, busbw)
    rates = {}
    for key, v in _obj(d.get("nvlink_link_gb_per_s") or {}, "nvlink_link_gb_per_s").items():
        if not str(key).isdigit() or len(str(key)) > 4:
            raise ProbeError("probe JSON: nvlink_link_gb_per_s has a key that is not a GPU index")
        rates[int(key)] = _num({"v": v}, "v", "nvlink_link_gb_per_s", optional=False, hi=1e6) * 1e9
    notes = tuple(str(n)[:200] for n in _list(d.get("notes"), "notes", limit=64) if isinstance(n, str))
    return ProbeResult(
        t=_num(d, "t", "the probe", optional=False, hi=1e11), host=_str(d, "host", "the probe", "") or "",
        backend=_str(d, "backend", "the probe", "") or "", gpus=tuple(gpus), pairs=tuple(pairs), allreduce=ar,
        simulated=bool(_bool(d, "simulated", "the probe")), scenario=_str(d, "scenario", "the probe"),
        notes=notes, nvlink_link_bytes_per_s=rates, group=_str(d, "group", "the probe"))


# ------------------------------------------------------------------ the table (80 columns)
WIDTH = 80
_MARK = {"bad": SEV_MARK["critical"], "warn": SEV_MARK["warning"], "ok": "✓", "dim": " "}


def _row(what: str, value: str, link: str, ceiling: str = "", typical: str = "", best: str = "", share: str = "",
         mark: str = "", how: str = "") -> str:
    return (f"{what:<20.20} {value:>9} {link:<13.13} {ceiling:>5} {typical:>5} {best:<10.10} {share:>5} {mark:1} "
            f"{how}").rstrip()


def _fmt(m: Measurement | None, latency: bool = False) -> str:
    if m is None:
        return "–"
    return f"{m.value:.1f} µs" if latency else f"{_gbs(m.value)} GB/s"


def _short_nvlink(count: int, version: int | None) -> str:
    v = _NVLINK_NAMES.get(version or 0)
    return f"NV{count}" + (f" NVLink{v.removesuffix('.0')}" if v else "")


def _pair_link_short(p: PairResult) -> str:
    if p.nvlinks:
        return _short_nvlink(p.nvlinks, p.nvlink_version)
    return p.path + (" P2P off" if p.p2p is False else " P2P" if p.p2p else "")


_ROW_WORDS = {"h2d": "host→device", "d2h": "device→host", "bidir": "host↔device",
              "h2d_latency": "h→d latency", "d2h_latency": "d→h latency",
              "read": "read", "write": "write", "bidir_read": "read both", "bidir_write": "write both"}
_PAIR_ARROWS = {"read": "←", "write": "→", "bidir_read": "↔", "bidir_write": "↔"}


def _judged_row(what: str, m: Measurement, link: str, v: Verdict | None) -> str:
    """One bandwidth row: measured, the link now with its ceiling and typical figure, the typical figure of the
    link at its best where it trained below it, the share of that, the mark and how it was copied."""
    how = method_tag(m.method)
    if v is None:
        return _row(what, _fmt(m), link, how=how)
    best = ""
    if v.best and v.typical is not None:
        best = f"{link_label_short(v.best)} {_gbs(v.typical)}"
    share = f"{v.share * 100:.0f} %" if v.share is not None else "–"
    return _row(what, _fmt(m), link, _gbs(v.ceiling) if v.ceiling else "", _gbs(v.typical_now) if v.typical_now
                else "", best, share, _MARK[v.level], how)


def link_label_short(label: str) -> str:
    """``Gen4×16`` → ``G4×16`` (the table's narrow column)."""
    return "G" + label[3:] if label.startswith("Gen") else label


def _figure_rows(r: ProbeResult, vs: Mapping[tuple[str, str], Verdict]) -> list[str]:
    lines = []
    for g in r.gpus:
        s = f"GPU{g.index}"
        for k in HOST_KINDS:
            m = getattr(g, k)
            if m is not None:
                lines.append(_judged_row(f"{s} {_ROW_WORDS[k]}", m, g.link.label_now, vs.get((s, k))))
        for k in HOST_LATENCY_KINDS:
            m = getattr(g, k)
            if m is not None:
                lines.append(_row(f"{s} {_ROW_WORDS[k]}", _fmt(m, True), g.link.label_now, how=method_tag(m.method)))
    for p in r.pairs:
        link = _pair_link_short(p)
        for k in PEER_KINDS:
            m = getattr(p, k)
            if m is not None:
                lines.append(_judged_row(f"GPU{p.a}{_PAIR_ARROWS[k]}GPU{p.b} {_ROW_WORDS[k]}", m, link,
                                         vs.get((f"GPU{p.a}-GPU{p.b}", k))))
        if p.latency is not None:
            lines.append(_row(f"GPU{p.a}↔GPU{p.b} latency", _fmt(p.latency, True), link,
                              how=method_tag(p.latency.method)))
    if r.allreduce is not None:
        lines.append(_row(f"all-reduce GPU{','.join(map(str, r.allreduce.gpus))}", _fmt(r.allreduce.busbw),
                          "busbw (NCCL)", how=method_tag(r.allreduce.busbw.method or "nccl")))
    return lines


def measurements(r: ProbeResult) -> list[Measurement]:
    """Every figure of ``r`` (bandwidths and latencies, GPUs, pairs, then the all-reduce)."""
    out = [m for g in r.gpus for k in (*HOST_KINDS, *HOST_LATENCY_KINDS) if (m := getattr(g, k)) is not None]
    out += [m for p in r.pairs for k in (*PEER_KINDS, "latency") if (m := getattr(p, k)) is not None]
    if r.allreduce is not None:
        out.append(r.allreduce.busbw)
    return out


def table_lines(r: ProbeResult, width: int = WIDTH) -> list[str]:
    """The probe as text lines at most ``width`` (80) columns: a header, one row per figure (measured; the link
    as trained now with its ceiling and typical figure; the typical figure of the link at its best where it
    trained below it; the share of that; mark; how it was copied), a legend, then the verdicts in words."""
    when = datetime.fromtimestamp(r.t, tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    head = "gpuscope probe  " + ("SIMULATED " + (r.scenario or "") + "  " if r.simulated else "")
    lines = [f"{head}{r.host}"[:width], f"{when}  {r.backend}"[:width]]
    if r.group:  # one line where it fits, else the group's name and the note apart (never cut in a parenthesis)
        one = f"serving group {r.group} (its GPUs and the pairs among them)"
        lines += [one] if len(one) <= width else [f"serving group {r.group}"[:width], "(its GPUs and the pairs among them)"]
    lines.append("")
    lines.append(_row("figure", "measured", "link now", "ceil", "typ", "at best", "%best", "", "how"))
    vs = {(v.subject, v.kind): v for v in verdicts(r)}
    lines += _figure_rows(r, vs)
    lines.append("")
    lines += textwrap.wrap("ceil, typ: the link as trained now (its ceiling, what such a link typically gives); "
                           "at best: typical when the link trains at its best (GPU and slot); %best: measured ÷ "
                           "that; ↔: both ways at once (sum)", width, subsequent_indent="  ")
    tags = sorted({method_tag(m.method) for m in measurements(r)})
    for t in tags:
        lines += textwrap.wrap(f"how {t}: {METHOD_LEGEND[t]}", width, subsequent_indent="  ")
    judged_vs = list(vs.values())
    lines.append("")
    bad = [v for v in judged_vs if v.level in ("bad", "warn")]
    for v in bad:
        lines += textwrap.wrap(f"{_MARK[v.level]} {v.text}", width, subsequent_indent="  ")
    if not bad and judged_vs:
        lines.append(f"✓ all {len(judged_vs)} figures within {OK_SHARE * 100:.0f} % of what their links "
                     "typically give"[:width])
    for n in r.notes:
        lines += textwrap.wrap(f"note: {n}", width, subsequent_indent="  ")
    if r.simulated:
        lines.append("SIMULATED: figures derived from the scenario's links, not measured"[:width])
    return lines


def summary_line(r: ProbeResult, when: str = "") -> str:
    """One line for a recording's summary: the worst verdict, or that every figure was as expected (``when``:
    `` at +12 s``, after "probe" and the group it measured)."""
    vs = verdicts(r)
    bad = sorted((v for v in vs if v.level in ("bad", "warn")), key=lambda v: v.share or 0.0)
    sim = "SIMULATED " if r.simulated else ""
    what = f"{sim}probe" + (f" of {r.group}" if r.group else "") + when
    if not vs:
        return f"{what}: no figures"
    if not bad:
        return f"{what}: all {len(vs)} figures as expected"
    return f"{what}: {len(bad)} of {len(vs)} figures low; worst: {bad[0].text}"


def pairs_of(indices: Sequence[int]) -> list[tuple[int, int]]:
    """Every unordered pair of the GPUs probed, a < b, in order."""
    s = sorted(set(indices))
    return [(a, b) for k, a in enumerate(s) for b in s[k + 1:]]


# ------------------------------------------------------------------ what a run costs
MiB = 1 << 20
GiB = 1 << 30
DEFAULT_MAX_MEMORY = GiB  # device memory a GPU lends the probe, at most
MAX_COPY_BYTES = 256 * MiB  # nvbandwidth's default buffer size is 512 MiB; 256 MiB is past the knee
MIN_COPY_BYTES = 4 * MiB
LATENCY_BYTES = 4  # latency: the smallest copy (nvbandwidth's latency tests read 4-byte words)
LATENCY_TRIALS = 50
DEFAULT_TRIALS = 5


@dataclass(frozen=True, slots=True)
class Plan:
    """What a run will do: the copy size, the memory it takes and about how long it lasts."""

    gpus: tuple[int, ...]
    pairs: tuple[tuple[int, int], ...]
    copy_bytes: int
    trials: int
    device_bytes_per_gpu: int  # two buffers of copy_bytes (one each way)
    host_bytes_per_gpu: int  # two pinned buffers of copy_bytes
    seconds: float

    def announce(self) -> str:
        """The line said before a run: how long, how much memory."""
        n = len(self.gpus)
        return (f"probe: {n} GPU{'s' if n != 1 else ''}, {len(self.pairs)} pair{'s' if len(self.pairs) != 1 else ''}, "
                f"{self.trials} × {self.copy_bytes // MiB} MiB: about {max(1, round(self.seconds))} s; per GPU "
                f"{self.device_bytes_per_gpu // MiB} MiB device + {self.host_bytes_per_gpu // MiB} MiB pinned host memory")


def copy_bytes_for(max_memory: int) -> int:
    """The copy size for a device-memory budget: two buffers must fit, at most 256 MiB, whole MiB.

    Raises :class:`ProbeError` when the budget is below two buffers of 4 MiB."""
    size = min(MAX_COPY_BYTES, max_memory // 2) // MiB * MiB
    if size < MIN_COPY_BYTES:
        raise ProbeError(f"--max-memory {max_memory} bytes is too small: the probe needs at least "
                         f"{2 * MIN_COPY_BYTES // MiB} MiB per GPU")
    return size


def make_plan(gpus: Sequence[int], expected_host_bytes_per_s: Mapping[int, float | None],
              expected_pair_bytes_per_s: Mapping[tuple[int, int], float | None], *, max_memory: int = DEFAULT_MAX_MEMORY,
              trials: int = DEFAULT_TRIALS) -> Plan:
    """The plan of a run over ``gpus`` (every pair of them), with the bandwidths each is expected to give
    (unknown: 1 GB/s, so the estimate errs long). Per GPU: host→device, device→host, both ways; per pair:
    read, write and both ways each; one warm-up copy before each set of trials, plus the latencies."""
    size = copy_bytes_for(max_memory)
    pairs = tuple(pairs_of(gpus))
    copies = trials + 1
    secs = 0.0
    for g in gpus:
        bw = expected_host_bytes_per_s.get(g) or 1e9
        secs += copies * size * 4 / bw  # one way twice, both ways counts twice
    for p in pairs:
        bw = expected_pair_bytes_per_s.get(p) or 1e9
        secs += copies * size * 6 / bw
    secs += (len(gpus) * 2 + len(pairs)) * LATENCY_TRIALS * 50e-6 + 0.5 * len(gpus)  # latencies, set-up
    return Plan(tuple(gpus), pairs, size, trials, 2 * size, 2 * size, secs)


def median_measurement(values: Sequence[float], size_bytes: int, method: str | None = None) -> Measurement:
    """The median of several trials' figures with the lowest and highest, copied by ``method`` (raises
    ValueError when empty)."""
    if not values:
        raise ValueError("no trials")
    s = sorted(values)
    n = len(s)
    med = s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2
    return Measurement(med, n, size_bytes, s[0], s[-1], method)


# ------------------------------------------------------------------ in a recording: summary and compare
def _figure_words(v: Verdict) -> str:
    if "-" in v.subject:
        a, b = v.subject.split("-", 1)
        arrow = {"read": "←", "write": "→"}.get(v.kind, "↔")
        return f"{a}{arrow}{b} {KIND_WORDS[v.kind]}"
    return f"{v.subject} {KIND_WORDS[v.kind]}"


def report_lines(data: Any, t0: float | None = None) -> list[str]:
    """A recorded probe (an event's ``data``) for ``gpuscope summary``: its summary line, then one line per
    judged figure. An unreadable probe is one line saying why (never an exception)."""
    try:
        r = from_json(data)
    except ProbeError as e:
        return [f"probe: unreadable ({e})"]
    when = ""
    if t0 is not None and math.isfinite(r.t - t0):
        when = " at the start" if r.t - t0 < 1 else f" at +{r.t - t0:.0f} s"
    out = [summary_line(r, when)]
    for v in verdicts(r):
        share = f"{v.share * 100:.0f} % of typical {_gbs(v.typical)}" if v.share is not None else "no reference"
        out.append(f"  {_MARK[v.level]} {_figure_words(v):<28} {_gbs(v.value):>6} GB/s  {share}  ({v.link})")
    return out


def compare_probes(a: Sequence[Any] | None, b: Sequence[Any] | None) -> list[dict[str, Any]]:
    """The last readable probe of each recording, figure by figure: GB/s in A and B and the change in %.
    Empty when either side has no readable probe."""

    def last(datas: Sequence[Any] | None) -> ProbeResult | None:
        for d in reversed(list(datas or [])):
            try:
                return from_json(d)
            except ProbeError:
                continue
        return None

    ra, rb = last(a), last(b)
    if ra is None or rb is None:
        return []
    vb = {(v.subject, v.kind): v for v in verdicts(rb)}
    rows = []
    for v in verdicts(ra):
        w = vb.get((v.subject, v.kind))
        if w is None:
            continue
        change = f"{(w.value - v.value) / v.value * 100:+.0f} %" if v.value else ""
        rows.append({"figure": _figure_words(v), "subject": v.subject, "kind": v.kind, "a_gb_per_s": _round(v.value / 1e9),
                     "b_gb_per_s": _round(w.value / 1e9), "change": change, "a_level": v.level, "b_level": w.level,
                     "a_link": v.link, "b_link": w.link})
    return rows
