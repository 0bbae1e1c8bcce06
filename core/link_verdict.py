"""One link verdict per serving group: the group's PCIe and NVLink links judged together.

For each serving group of the newest frame (``Frame.groups``), :func:`link_verdicts` joins, over the rule window,
what says whether its links can carry its traffic:

* each GPU's PCIe generation and width **under load** against the best the GPU and the slot allow (never judged
  at idle: many GPUs lower the generation at idle to save power);
* the PCIe replay and recovery counters and the NVLink CRC (flit, data), replay and recovery counters (NVML,
  summed over the links), as rises and rates over the counter window (:func:`gpuscope.core.health.counter_span`:
  the counters are read every 15 s);
* the GPUs' Xid tallies since the source started (:attr:`XidInfo.link <gpuscope.core.health.XidInfo>`): Xid 74
  and 144-150 (NVLink and fabric), Xid 79 (fell off the bus); and a GPU that stopped answering.

into one verdict, by the first check of :data:`CHECKS` that holds (the table is in order of gravity):

* ``at_risk``: errors that precede a hang (an NVLink/fabric Xid or Xid 79 on a group GPU since start, a lost GPU,
  NVLink or PCIe recoveries rising, replays at :data:`REPLAY_AT_RISK_PER_S` or more);
* ``degraded``: slower than it should be (a PCIe link below its best under load, replays at
  :data:`REPLAY_DEGRADED_PER_S` or more, NVLink CRC errors rising);
* ``healthy``: none of these, and at least one input could be read;
* ``unknown``: nothing could be read (no link generation or width, no counter, no Xid watch): a fourth value,
  never shown as healthy; the exporter leaves its series out (absent, never 0).

The findings rule (:func:`rule_link_verdict`, registered in ``core/findings.py``) raises one finding per group that
is degraded (warning) or at risk (critical), naming the link and its evidence. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, NamedTuple

from gpuscope.core.candidate import Candidate
from gpuscope.core.groups import group_label, short_gpus
from gpuscope.core.health import LINK_XIDS, counter_span, xid_info
from gpuscope.core.model import Frame, GpuReading, Inventory, ServingGroup
from gpuscope.core.topology import best_link, pcie_capacity_bytes_per_s
from gpuscope.core.vocab import is_busy, link_label
from gpuscope.core.window import RuleWindow, gpu_windows

HEALTHY, DEGRADED, AT_RISK, UNKNOWN = "healthy", "degraded", "at_risk", "unknown"
VERDICTS = (HEALTHY, DEGRADED, AT_RISK, UNKNOWN)
# the exporter's value (gpuscope_serving_group_link_verdict); unknown has none: its series is absent
VERDICT_VALUE: dict[str, int] = {HEALTHY: 0, DEGRADED: 1, AT_RISK: 2}
VERDICT_WORDS: dict[str, str] = {HEALTHY: "healthy", DEGRADED: "degraded", AT_RISK: "at risk", UNKNOWN: "unknown"}
SEVERITY: dict[str, str] = {DEGRADED: "warning", AT_RISK: "critical"}

# Replays (a frame resent after a bad CRC) per second over the counter window. A sound link replays now and then;
# these are gpuscope's thresholds, not NVIDIA's: 0.1/s (6 a minute, near the shipped GpuscopePcieErrorsRising
# alert's 100 in 10 minutes) costs bandwidth worth a look; 10/s is a link resending all the time, the state that
# comes before recoveries and a hang.
REPLAY_DEGRADED_PER_S = 0.1
REPLAY_AT_RISK_PER_S = 10.0
BUSY_SPAN_S = 5.0  # "under load": utilisation and PCIe traffic averaged over the last 5 s (as the findings rules)
COUNTERS = ("pcie_replay_count", "pcie_recovery_count", "nvlink_crc_flit_count", "nvlink_crc_data_count",
            "nvlink_replay_count", "nvlink_recovery_count")


@dataclass(frozen=True, slots=True)
class GpuLink:
    """One group GPU's link figures over the window (what the checks read)."""

    gpu: int
    lost: bool
    pcie_gen: int | None
    pcie_width: int | None
    gen_max: int | None  # the best generation the GPU and its slot both allow
    width_max: int | None
    busy: bool  # under load over the last BUSY_SPAN_S (utilisation or PCIe traffic: core.vocab.is_busy)
    window_s: float | None  # the counter window's length (None: fewer than two frames)
    rises: dict[str, int] = field(default_factory=dict)  # counter → its rise over the window (known at both ends)
    counters: tuple[str, ...] = ()  # the counters read now
    xids: tuple[int, ...] = ()  # link Xids (LINK_XIDS) in the GPU's tally since the source started

    @property
    def readable(self) -> bool:
        """Whether anything about this GPU's links could be read."""
        return self.lost or bool(self.xids) or bool(self.counters) or (self.pcie_gen is not None
                                                                       and self.pcie_width is not None)

    def rate(self, counter: str) -> float | None:
        """``counter``'s rise per second over the window (None: unknown)."""
        rise = self.rises.get(counter)
        return rise / self.window_s if rise is not None and self.window_s else None


@dataclass(frozen=True, slots=True)
class Check:
    """One row of the verdict table: its name, the verdict when it holds, the kind of link it speaks of (``nvlink``
    or ``pcie``), what it reads (the reason in words, or None when it does not hold) and what to do."""

    name: str
    verdict: str
    kind: str
    test: Callable[[GpuLink], str | None]
    advice: str


@dataclass(frozen=True, slots=True)
class LinkVerdict:
    """A serving group's link verdict. ``key`` identifies the group (its endpoint, else its server, and its GPUs),
    ``label`` names it (``vLLM :8000 qwen3``); ``verdict`` is one of :data:`VERDICTS`; ``link`` the link named
    (``GPU0↔GPU1 NVLink``, ``GPU1 PCIe``; for healthy/unknown the group's links: ``GPU0+1 NVLink``); ``reason`` a
    short plain-language why, ``advice`` what to do ('' for healthy/unknown); ``check`` the table row that decided
    ('' for healthy/unknown); ``evidence`` every input figure (flat: ``gpu1_pcie_gen``,
    ``gpu1_nvlink_replay_count_rise``, ``gpu1_xids``…) with ``verdict``, ``link``, ``check``, ``reason``; ``group``
    the group judged."""

    key: str
    label: str
    gpus: tuple[int, ...]
    verdict: str
    link: str
    reason: str
    check: str = ""
    advice: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)
    group: ServingGroup = field(default_factory=lambda: ServingGroup(server=""))  # the group judged


# ------------------------------------------------------------------ the checks
def _xids(kind: str) -> Callable[[GpuLink], str | None]:
    def test(g: GpuLink) -> str | None:
        codes = [x for x in g.xids if LINK_XIDS.get(x) == kind]
        if not codes:
            return None
        return f"Xid {', '.join(str(x) for x in codes)} on GPU{g.gpu} ({xid_info(codes[-1]).meaning})"
    return test


def _lost(g: GpuLink) -> str | None:
    return f"GPU{g.gpu} stopped answering (fell off the bus)" if g.lost else None


def _rising(counters: tuple[str, ...], what: str) -> Callable[[GpuLink], str | None]:
    def test(g: GpuLink) -> str | None:
        rise = sum(g.rises.get(c) or 0 for c in counters)
        return f"{what} +{rise} in {g.window_s:.0f} s on GPU{g.gpu}" if rise > 0 and g.window_s else None
    return test


def _rate(counter: str, what: str, threshold: float) -> Callable[[GpuLink], str | None]:
    def test(g: GpuLink) -> str | None:
        rate = g.rate(counter)
        if rate is None or rate < threshold:
            return None
        return f"{what} {rate:.1f}/s on GPU{g.gpu} (+{g.rises[counter]} in {g.window_s:.0f} s; {threshold:g}/s or more)"
    return test


def _below_max(g: GpuLink) -> str | None:
    if not g.busy or None in (g.pcie_gen, g.pcie_width, g.gen_max, g.width_max):
        return None
    assert g.pcie_gen is not None and g.pcie_width is not None and g.gen_max is not None and g.width_max is not None
    if g.pcie_gen >= g.gen_max and g.pcie_width >= g.width_max:
        return None
    return (f"GPU{g.gpu} PCIe {link_label(g.pcie_gen, g.pcie_width)} under load, GPU and slot allow "
            f"{link_label(g.gen_max, g.width_max)}")


_HANG = "drain the group, read `dmesg`, reset the GPU"
# In order of gravity: the first row that holds on any group GPU decides the verdict and names the link.
CHECKS: tuple[Check, ...] = (
    Check("nvlink_xid", AT_RISK, "nvlink", _xids("nvlink"),
          f"NVLink errors like this precede a hang of the group's collectives: {_HANG}"),
    Check("bus_xid", AT_RISK, "pcie", _xids("pcie"), "the GPU is gone: the node needs a reset"),
    Check("gpu_lost", AT_RISK, "pcie", _lost, "the group's collectives wait for it: the node needs a reset"),
    Check("nvlink_recovery", AT_RISK, "nvlink", _rising(("nvlink_recovery_count",), "NVLink recoveries"),
          "the NVLink retrains under load and collectives stall: check the NVLink connection or NVSwitch"),
    Check("pcie_recovery", AT_RISK, "pcie", _rising(("pcie_recovery_count",), "PCIe recoveries"),
          "the PCIe link retrains under load: suspect the riser, cable or slot"),
    Check("nvlink_replay_rate", AT_RISK, "nvlink", _rate("nvlink_replay_count", "NVLink replays", REPLAY_AT_RISK_PER_S),
          "the NVLink resends all the time, which comes before recoveries: check the NVLink connection"),
    Check("pcie_replay_rate", AT_RISK, "pcie", _rate("pcie_replay_count", "PCIe replays", REPLAY_AT_RISK_PER_S),
          "the PCIe link resends all the time, which comes before recoveries: suspect the riser, cable or slot"),
    Check("pcie_below_max", DEGRADED, "pcie", _below_max,
          "host transfers run slower: check the BIOS link speed, the riser and the seating"),
    Check("nvlink_replays", DEGRADED, "nvlink", _rate("nvlink_replay_count", "NVLink replays", REPLAY_DEGRADED_PER_S),
          "resends cost bandwidth: check the NVLink connection if it keeps on"),
    Check("pcie_replays", DEGRADED, "pcie", _rate("pcie_replay_count", "PCIe replays", REPLAY_DEGRADED_PER_S),
          "resends cost bandwidth: suspect the riser, cable or slot if it keeps on"),
    Check("nvlink_crc", DEGRADED, "nvlink", _rising(("nvlink_crc_flit_count", "nvlink_crc_data_count"),
                                                    "NVLink CRC errors"),
          "bad frames are resent: check the NVLink connection if it keeps on"),
)


# ------------------------------------------------------------------ figures
class _Now(NamedTuple):
    """What every GPU's figures read in one evaluation, looked up once (a GPU by index, never by a scan)."""

    frames: RuleWindow  # the window (its per-GPU windows built once: core/window.py)
    now: dict[int, GpuReading]  # GPU index → its (first) reading in the newest frame
    base: dict[int, GpuReading]  # GPU index → its (first) reading not lost in the counter base (empty: no window)
    window_s: float | None  # the counter window's length (None: fewer than two frames)
    best: dict[int, tuple[int | None, int | None]]  # GPU index → the best generation and width it may train at


_COUNTS = attrgetter(*COUNTERS)
# GPU index → best_link of its (first) device, kept per inventory object (hashing an inventory costs more than
# the rule; the inventory is held beside it, so a reused id never answers for another)
_BEST: dict[int, tuple[Inventory, dict[int, tuple[int | None, int | None]]]] = {}


def _best_links(inv: Inventory) -> dict[int, tuple[int | None, int | None]]:
    got = _BEST.get(id(inv))
    if got is None or got[0] is not inv:
        if len(_BEST) >= 64:  # inventories come and go (tests, replays, a fleet's hosts): bounded
            _BEST.clear()
        got = _BEST[id(inv)] = (inv, {d.index: best_link(d) for d in reversed(inv.devices)})
    return got[1]


def _context(inv: Inventory, frames: Sequence[Frame]) -> _Now:
    """The lookups of one evaluation over ``frames`` (at least one; time order, the last is now)."""
    win = frames if isinstance(frames, RuleWindow) else RuleWindow(frames)
    span = counter_span(win)
    base = {r.index: r for r in reversed(span[0].gpus) if not r.lost} if span is not None else {}
    return _Now(win, {r.index: r for r in reversed(win[-1].gpus)}, base, span[2] if span is not None else None,
                _best_links(inv))


def _busy(frames: Sequence[Frame], gpu: int, now: GpuReading) -> bool:
    """Whether ``gpu`` is under load: mean utilisation and PCIe peak over the last BUSY_SPAN_S of ``frames``
    (frames whose GPUs are not at the positions of their indices: the shared windows cannot say)."""
    t_end = frames[-1].t
    utils: list[float] = []
    peaks: list[float] = []
    for f in frames:
        if f.t < t_end - BUSY_SPAN_S - 1e-6:
            continue
        r = next((x for x in f.gpus if x.index == gpu and not x.lost), None)
        if r is None:
            continue
        if r.util_gpu_pct is not None:
            utils.append(r.util_gpu_pct)
        if r.pcie_tx_bytes_per_s is not None or r.pcie_rx_bytes_per_s is not None:
            peaks.append(max(r.pcie_tx_bytes_per_s or 0.0, r.pcie_rx_bytes_per_s or 0.0))
    util = sum(utils) / len(utils) if utils else None
    peak = sum(peaks) / len(peaks) if peaks else None
    return is_busy(util, peak, pcie_capacity_bytes_per_s(now.pcie_gen, now.pcie_width))


def _busy_of(ctx: _Now, gpu: int, now: GpuReading) -> bool:
    """Whether ``gpu`` (reading ``now``, not lost) is under load: the flag of its shared window
    (:class:`~gpuscope.core.window.GpuWindow`, the one ``pcie_below_max`` reads, so the two never disagree on
    "under load"), when that window is this GPU's over its whole span; else :func:`_busy`."""
    w = gpu_windows(ctx.frames).get(gpu)
    if w is not None and w.now is now and all(r.index == gpu for r in w.readings):
        return w.busy
    return _busy(ctx.frames, gpu, now)


def _quiet(ctx: _Now, gpu: int) -> bool:
    """Whether no row of :data:`CHECKS` can hold on GPU ``gpu`` (no link Xid, not lost, no counter moved, PCIe
    at its best or idle): the usual case, told without building its figures. False when unsure: the full
    verdict then decides."""
    now = ctx.now.get(gpu)
    if now is None:
        return True
    if now.lost or (now.xids and any(x.xid in LINK_XIDS for x in now.xids)):
        return False
    r0 = ctx.base.get(gpu)
    if ctx.window_s and r0 is not None and _COUNTS(r0) != _COUNTS(now):
        return False
    gen, width = now.pcie_gen, now.pcie_width
    gen_max, width_max = ctx.best.get(gpu, (None, None))
    if gen is None or width is None or gen_max is None or width_max is None or (gen >= gen_max and width >= width_max):
        return True
    return not _busy_of(ctx, gpu, now)


def _rises(r0: GpuReading | None, now: GpuReading) -> dict[str, int]:
    """Counter → its rise from ``r0`` to ``now`` (known at both ends, not gone back)."""
    if r0 is None:
        return {}
    return {c: b - a for c, a, b in zip(COUNTERS, _COUNTS(r0), _COUNTS(now)) if a is not None and b is not None
            and b >= a}


def _gpu_link(ctx: _Now, gpu: int) -> GpuLink | None:
    now = ctx.now.get(gpu)
    if now is None:
        return None
    gen_max, width_max = ctx.best.get(gpu, (None, None))
    xids = tuple(x.xid for x in sorted(now.xids or (), key=lambda x: x.last_t) if x.xid in LINK_XIDS)
    if now.lost:
        return GpuLink(gpu, True, None, None, gen_max, width_max, False, None, xids=xids)
    rises = _rises(ctx.base.get(gpu), now) if ctx.window_s else {}
    counters = tuple(c for c, v in zip(COUNTERS, _COUNTS(now)) if v is not None)
    return GpuLink(gpu, False, now.pcie_gen, now.pcie_width, gen_max, width_max, _busy_of(ctx, gpu, now),
                   ctx.window_s, rises, counters, xids)


# ------------------------------------------------------------------ the verdict
def group_key(g: ServingGroup) -> str:
    """The group's identity in finding ids and exporter labels: its endpoint (else its server) and GPUs."""
    return f"{g.endpoint or g.server}:{'+'.join(str(i) for i in g.gpus)}"


def verdict_id(g: ServingGroup) -> str:
    """The id of the group's link-verdict finding (``link-verdict:http://localhost:8000:0+1``)."""
    return f"link-verdict:{group_key(g)}"


def _nvlinked(inv: Inventory, gpus: Sequence[int]) -> bool:
    return any((p := inv.pair(a, b)) is not None and p.nvlinks for a in gpus for b in gpus if a < b)


def link_name(inv: Inventory, g: ServingGroup, gpu: int, kind: str) -> str:
    """The link a check speaks of: ``GPU0↔GPU1 NVLink`` (the GPU's one NVLink peer in the group, directly or through
    NVSwitches), ``GPU1 NVLink`` (several peers in the group, or none), ``GPU1 PCIe``."""
    if kind != "nvlink":
        return f"GPU{gpu} PCIe"
    peers = [j for j in g.gpus if j != gpu and (p := inv.pair(gpu, j)) is not None and p.nvlinks]
    if len(peers) == 1:
        a, b = sorted((gpu, peers[0]))
        return f"GPU{a}↔GPU{b} NVLink"
    return f"GPU{gpu} NVLink"


def group_link(inv: Inventory, g: ServingGroup) -> str:
    """The group's links in a few words (a healthy or unknown verdict's): ``GPU0↔GPU1 NVLink``, ``GPU0–3 NVLink``,
    ``GPU0+1 PCIe``."""
    gpus = sorted(g.gpus)
    if _nvlinked(inv, gpus):
        return f"GPU{gpus[0]}↔GPU{gpus[1]} NVLink" if len(gpus) == 2 else f"{short_gpus(gpus)} NVLink"
    return f"{short_gpus(gpus)} PCIe"


def _evidence(g: ServingGroup, links: Sequence[GpuLink]) -> dict[str, Any]:
    """Every input figure, flat (one key per GPU and figure), for the finding and its events."""
    ev: dict[str, Any] = {"server": g.server, "endpoint": g.endpoint, "gpus": list(g.gpus), "tp": g.tp,
                          "window_s": next((x.window_s for x in links if x.window_s), None),
                          "replay_degraded_per_s": REPLAY_DEGRADED_PER_S, "replay_at_risk_per_s": REPLAY_AT_RISK_PER_S}
    for x in links:
        p = f"gpu{x.gpu}_"
        ev.update({p + "lost": x.lost, p + "busy": x.busy, p + "pcie_gen": x.pcie_gen, p + "pcie_width": x.pcie_width,
                   p + "pcie_gen_max": x.gen_max, p + "pcie_width_max": x.width_max, p + "xids": list(x.xids)})
        for c, rise in x.rises.items():
            ev[p + c + "_rise"] = rise
    return ev


def verdict_of(inv: Inventory, g: ServingGroup, links: Sequence[GpuLink]) -> LinkVerdict:
    """The verdict of group ``g`` from its GPUs' figures: the first row of :data:`CHECKS` that holds on any of
    them (rows in order, then GPUs in order), else healthy (or unknown when nothing was readable)."""
    ev = _evidence(g, links)
    label, key = group_label(g), group_key(g)
    hits = [(c, x, why) for c in CHECKS for x in links if (why := c.test(x)) is not None]
    ev["issues"] = [f"{c.name}: {why}" for c, _x, why in hits]
    if hits:
        c, x, why = hits[0]
        link = link_name(inv, g, x.gpu, c.kind)
        ev.update(verdict=c.verdict, link=link, check=c.name, reason=why)
        return LinkVerdict(key, label, tuple(g.gpus), c.verdict, link, why, c.name, c.advice, ev, g)
    link = group_link(inv, g)
    if not any(x.readable for x in links):
        ev.update(verdict=UNKNOWN, link=link, check="", reason="no link readings")
        return LinkVerdict(key, label, tuple(g.gpus), UNKNOWN, link, "no link readings", evidence=ev, group=g)
    judged = [x for x in links if x.busy and x.pcie_gen is not None]
    speed = ("PCIe at its best under load" if judged else "idle: PCIe speed not judged")
    window = ev["window_s"]
    errors = f"no link errors in {window:.0f} s" if window else "no link errors seen"
    ev.update(verdict=HEALTHY, link=link, check="", reason=f"{errors}; {speed}")
    return LinkVerdict(key, label, tuple(g.gpus), HEALTHY, link, f"{errors}; {speed}", evidence=ev, group=g)


def _local_groups(frames: Sequence[Frame]) -> list[ServingGroup]:
    """The serving groups of the newest frame with GPUs on this host, in order; a group seen twice once."""
    out: list[ServingGroup] = []
    seen: set[str] = set()
    for g in frames[-1].groups:
        if not g.gpus or not g.local:
            continue
        key = group_key(g)
        if key not in seen:
            seen.add(key)
            out.append(g)
    return out


def _verdict(ctx: _Now, inv: Inventory, g: ServingGroup) -> LinkVerdict:
    return verdict_of(inv, g, [x for i in sorted(set(g.gpus)) if (x := _gpu_link(ctx, i)) is not None])


def link_verdicts(inv: Inventory, frames: Sequence[Frame]) -> list[LinkVerdict]:
    """One :class:`LinkVerdict` per serving group with GPUs in the newest frame (time order; the last is now), in
    the frame's group order; a group seen twice (same key) once. Pure; never raises on odd readings."""
    if not frames:
        return []
    ctx = _context(inv, frames)
    return [_verdict(ctx, inv, g) for g in _local_groups(frames)]


def verdict_text(v: LinkVerdict, advice: bool = True) -> str:
    """The verdict in one line, for the inference panel and ``summary``: ``link at risk: GPU0↔GPU1 NVLink — Xid 145
    on GPU1 (…): NVLink errors like this precede a hang …``; ``link healthy: GPU0↔GPU1 NVLink (no link errors in
    30 s; PCIe at its best under load)``; ``link unknown: GPU0 PCIe (no link readings)``. Without ``advice``, the
    reason alone (for a narrow panel)."""
    words = VERDICT_WORDS.get(v.verdict, v.verdict)
    if v.verdict in (HEALTHY, UNKNOWN):
        return f"link {words}: {v.link} ({v.reason})"
    return f"link {words}: {v.link} — {v.reason}" + (f"; {v.advice}" if advice and v.advice else "")


def _subject(link: str) -> str:
    """A finding's subject from the link named: ``GPU0-GPU1`` for a pair (the exporter's ``pair`` label), ``GPU1``."""
    head = link.split(" ", 1)[0]
    return head.replace("↔", "-") if "↔" in head else head


def rule_link_verdict(inv: Inventory, frames: Sequence[Frame]) -> list[Candidate]:
    """The findings-engine rule (``link_verdict``): one finding per serving group whose links are degraded
    (warning) or at risk (critical): ``vLLM :8000 qwen3: link at risk: GPU0↔GPU1 NVLink — Xid 145 on GPU1 (…)``.
    A group whose GPUs are all quiet (:func:`_quiet`: healthy or unknown) is not judged in full."""
    if not frames:
        return []
    ctx = _context(inv, frames)
    judged = [_verdict(ctx, inv, g) for g in _local_groups(frames) if not all(_quiet(ctx, i) for i in g.gpus)]
    return [Candidate(verdict_id_of(v), "link_verdict", SEVERITY[v.verdict], _subject(v.link),
                      f"{v.label}: {verdict_text(v)}", v.evidence, variant=f"{v.verdict}:{v.check}", basis="window")
            for v in judged if v.verdict in SEVERITY]


def verdict_id_of(v: LinkVerdict) -> str:
    """The finding id of verdict ``v``: its group's :func:`verdict_id`."""
    return verdict_id(v.group)
