"""The slow rank in a serving group: the GPU a tensor-parallel group waits for, and why.

A TP group runs at the pace of its slowest GPU. For every serving group of the newest frame with two or
more GPUs, all of them busy, each GPU's readings averaged over the span of the per-GPU windows every findings
rule shares (``core/window.py``; :data:`SPAN_S` is its ``AVG_S``) are compared with its peers'
(the group's other GPUs; their median, unknown readings left out, never read as 0). A GPU lags when one of
:data:`CAUSES` holds for it and not for its peers:

* ``power_limit``: its enforced power limit ≥ :data:`POWER_LIMIT_GAP` below the peers' and it is held there
  (drawing ≥ :data:`POWER_AT_LIMIT` of it, or the power-cap reason set);
* ``mem_temp``: its memory ≥ :data:`MEM_TEMP_GAP_C` hotter than the peers' while it slows (SM or memory clock
  lower, or a thermal/slowdown reason set on it alone);
* a clock-event reason set on it and not on most peers (power brake, HW slowdown, HW/SW thermal, power cap);
* ``sm_clock``: its SM clock ≥ :data:`SM_CLOCK_LAG` below the peers' median with no reason NVML gives;
* ``pcie_link``: its PCIe link under load ≥ :data:`LINK_GAP` below the peers' (gen × width now).

A cause behind the clocks counts only while it costs clock: the SM clock at least :data:`CAUSE_CLOCK_LAG`
below the peers' (or the clock unknown). Each lagging GPU gets at most one clock cause (the first of
:data:`CLOCK_CAUSES` that holds; the others are listed in ``also``) and one link cause. The engine
(``core/findings.py``) runs :func:`rule_slow_rank`; the exporter and ``summary`` call :func:`slow_ranks`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from operator import attrgetter
from typing import Any

from gpuscope.core.candidate import Candidate
from gpuscope.core.group_paths import worst_pair
from gpuscope.core.groups import group_label, parallel_text
from gpuscope.core.model import Frame, GpuReading, Inventory, ServingGroup, decode_clock_events
from gpuscope.core.vocab import CLOCK_EVENT_BY_NAME, HEAT_EVENTS, is_busy, link_label
from gpuscope.core.window import AVG_S, GpuWindow, gpu_windows, link_capacity, means

SM_CLOCK_LAG = 0.05  # an SM clock this share below the peers' median lags, reason or not
CAUSE_CLOCK_LAG = 0.02  # a cause behind the clocks counts while it costs at least this share of SM clock
POWER_LIMIT_GAP = 0.05  # a power limit this share below the peers' is lower
POWER_AT_LIMIT = 0.95  # drawing this share of its limit: held at it
MEM_TEMP_GAP_C = 10.0  # memory this many °C hotter than the peers' median
LINK_GAP = 0.05  # a PCIe link whose capacity now is this share below the peers' median
REASON_HELD = 0.5  # a clock-event reason set in at least this share of a GPU's readings is held
SPAN_S = AVG_S  # readings are averaged over the span of the engine's per-GPU windows (core/window.py)
RULE = "slow_rank"
ID_PREFIX = "slow-rank:"

# the clock-event reasons that slow one GPU, worst first (the thermal ones and HW slowdown mean heat)
_REASONS = ("hw_power_brake", "hw_slowdown", "hw_thermal", "sw_thermal", "sw_power_cap")
_REASON_SET = frozenset(_REASONS)
# a RankReading's figures, read for the peers' medians
_SM, _MEM, _POWER, _LIMIT, _TEMP_MEM = (attrgetter(f) for f in ("sm_clock_mhz", "mem_clock_mhz", "power_w",
                                                                   "power_limit_w", "temp_mem_c"))
_REASON_PREFIX = {"sw_power_cap": "", "hw_power_brake": "under the "}  # the others: "in hardware slowdown"


@dataclass(frozen=True, slots=True)
class RankReading:
    """One GPU of a group over the span: means of the readings present (None: no reading had it), the
    clock-event reasons held, its PCIe link now and whether it is busy (``core.vocab.is_busy``)."""

    gpu: int
    busy: bool
    sm_clock_mhz: float | None = None
    mem_clock_mhz: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    temp_gpu_c: float | None = None
    temp_mem_c: float | None = None
    reasons: frozenset[str] = frozenset()
    pcie_gen: int | None = None
    pcie_width: int | None = None
    pcie_capacity_bytes_per_s: float | None = None

    def figures(self) -> dict[str, Any]:
        """Every figure, for a finding's evidence."""
        means = {k: _r1(getattr(self, k)) for k in ("sm_clock_mhz", "mem_clock_mhz", "power_w", "power_limit_w",
                                                      "temp_gpu_c", "temp_mem_c")}
        return {"gpu": self.gpu, "busy": self.busy, **means, "reasons": sorted(self.reasons),
                "pcie_gen": self.pcie_gen, "pcie_width": self.pcie_width,
                "pcie_capacity_bytes_per_s": self.pcie_capacity_bytes_per_s}


def _r1(x: float | None) -> float | None:
    return None if x is None else round(x, 1)


@dataclass(frozen=True, slots=True)
class Lag:
    """Why one GPU lags: the cause, its figure and the peers' median of it (in ``unit``), the words said of
    the GPU (``held at its 550 W power limit``) and of its peers (``draw 690 W (limit 700 W)``, the verb
    for several peers; :func:`_peer_phrase` makes it singular)."""

    cause: str
    value: float | None
    peer_value: float | None
    unit: str
    words: str
    peer_words: str


@dataclass(frozen=True, slots=True)
class SlowRank:
    """A GPU that a serving group waits for.

    ``group``: the group's key (its endpoint URL, else its server's name); ``label``: the group in words
    (``vLLM :8000 TP=4``, cleaned); ``server`` / ``model``: its server's name and model (as given, not
    cleaned); ``gpu``: the GPU's index; ``cause``: a key of :data:`CAUSES`;
    ``words``: the cause in plain words (``held at its 550 W power limit``); ``value`` / ``peer_value``: its
    figure and the peers' median, in ``unit`` (``W``, ``°C``, ``MHz``, ``GB/s``; None when unknown);
    ``peers``: each peer's (GPU, figure); ``sm_clock_mhz`` / ``peer_sm_clock_mhz``: its SM clock and the
    peers' median; ``also``: other causes seen on it; ``message``: the finding's line; ``readings``: every
    GPU's figures (:meth:`RankReading.figures`)."""

    group: str
    label: str
    server: str
    model: str | None
    gpu: int
    cause: str
    words: str
    value: float | None
    peer_value: float | None
    unit: str
    peers: tuple[tuple[int, float | None], ...]
    sm_clock_mhz: float | None
    peer_sm_clock_mhz: float | None
    also: tuple[str, ...]
    message: str
    readings: tuple[RankReading, ...] = ()

    @property
    def id(self) -> str:
        """The finding's id, stable per group, GPU and cause: ``slow-rank:http://localhost:8000:gpu5:power_limit``."""
        return f"{ID_PREFIX}{self.group}:gpu{self.gpu}:{self.cause}"


# ------------------------------------------------------------------ small figures
def median(values: Iterable[float | None]) -> float | None:
    """The median of the known values (None skipped; ``statistics.median``'s answer); None when none is known."""
    known = sorted([v for v in values if v is not None])
    n = len(known)
    if not n:
        return None
    h = n // 2
    return known[h] if n % 2 else (known[h - 1] + known[h]) / 2


def shortfall(mine: float | None, theirs: float | None) -> float | None:
    """How far ``mine`` is below ``theirs``, as a share of ``theirs`` (negative: above); None when unknown."""
    if mine is None or theirs is None or theirs <= 0:
        return None
    return (theirs - mine) / theirs


def _clock_gap(me: RankReading, peers: Sequence[RankReading]) -> float | None:
    return shortfall(me.sm_clock_mhz, median(map(_SM, peers)))


def _costs_clock(me: RankReading, peers: Sequence[RankReading]) -> bool:
    """Whether a cause behind the clocks costs this GPU clock: its SM clock ≥ :data:`CAUSE_CLOCK_LAG` below the
    peers', or unknown (then the cause's own evidence decides)."""
    gap = _clock_gap(me, peers)
    return gap is None or gap >= CAUSE_CLOCK_LAG


def _held_alone(reason: str, me: RankReading, peers: Sequence[RankReading]) -> bool:
    """``reason`` held on this GPU and on fewer than half of its peers."""
    return reason in me.reasons and 2 * sum(reason in p.reasons for p in peers) < len(peers)


def _n(x: float | None, unit: str) -> str:
    """A figure in words: ``550 W``, ``1,610 MHz``, ``? °C`` when unknown."""
    return f"{'?' if x is None else f'{x:,.0f}'} {unit}"


# ------------------------------------------------------------------ the causes
def _power_limit(me: RankReading, peers: Sequence[RankReading]) -> Lag | None:
    """Its enforced power limit below its peers' and held there."""
    mine = me.power_limit_w
    if mine is None:
        return None
    held = "sw_power_cap" in me.reasons or (me.power_w is not None and me.power_w >= POWER_AT_LIMIT * mine)
    if not held:  # asked first: it needs no peer (most GPUs draw below their limit)
        return None
    theirs = median(map(_LIMIT, peers))
    gap = shortfall(mine, theirs)
    if gap is None or gap < POWER_LIMIT_GAP or not _costs_clock(me, peers):
        return None
    draw = median(map(_POWER, peers))
    return Lag("power_limit", mine, theirs, "W", f"held at its {_n(mine, 'W')} power limit",
               f"draw {_n(draw, 'W')} (limit {_n(theirs, 'W')})")


def _mem_temp(me: RankReading, peers: Sequence[RankReading]) -> Lag | None:
    """Its memory much hotter than its peers' while it slows down."""
    mine = me.temp_mem_c
    if mine is None:
        return None
    theirs = median(map(_TEMP_MEM, peers))
    if theirs is None or mine < theirs + MEM_TEMP_GAP_C:
        return None
    sm, mem = _clock_gap(me, peers), shortfall(me.mem_clock_mhz, median(map(_MEM, peers)))
    slows = any(g is not None and g >= CAUSE_CLOCK_LAG for g in (sm, mem)) or any(
        _held_alone(r, me, peers) for r in HEAT_EVENTS)
    if not slows:
        return None
    return Lag("mem_temp", mine, theirs, "°C", f"memory at {_n(mine, '°C')}", f"run at {_n(theirs, '°C')}")


def _reason(reason: str) -> Callable[[RankReading, Sequence[RankReading]], Lag | None]:
    """The cause of one clock-event reason set on this GPU and not on most peers; its figure is the
    temperature for heat, the power draw for power."""
    hot = reason in HEAT_EVENTS
    field, unit = ("temp_gpu_c", "°C") if hot else ("power_w", "W")
    meaning = _REASON_PREFIX.get(reason, "in ") + (CLOCK_EVENT_BY_NAME[reason].meaning or reason)

    def cause(me: RankReading, peers: Sequence[RankReading]) -> Lag | None:
        if not _held_alone(reason, me, peers) or not _costs_clock(me, peers):
            return None
        mine, theirs = getattr(me, field), median(getattr(p, field) for p in peers)
        verb = "run at" if hot else "draw"
        return Lag(reason, mine, theirs, unit, f"{meaning} at {_n(mine, unit)}", f"{verb} {_n(theirs, unit)}")

    return cause


def _sm_clock(me: RankReading, peers: Sequence[RankReading]) -> Lag | None:
    """Its SM clock well below its peers' with no reason NVML gives."""
    gap = _clock_gap(me, peers)
    if gap is None or gap < SM_CLOCK_LAG:
        return None
    theirs = median(map(_SM, peers))
    return Lag("sm_clock", me.sm_clock_mhz, theirs, "MHz",
               f"SM clock at {_n(me.sm_clock_mhz, 'MHz')} (no reason given by NVML)", f"run at {_n(theirs, 'MHz')}")


def _pcie_link(me: RankReading, peers: Sequence[RankReading]) -> Lag | None:
    """Its PCIe link under load below its peers' (every GPU compared is busy: never an idle downshift)."""
    caps = [p.pcie_capacity_bytes_per_s for p in peers]
    theirs = median(caps)
    gap = shortfall(me.pcie_capacity_bytes_per_s, theirs)
    if gap is None or gap < LINK_GAP or not me.busy:
        return None
    assert theirs is not None  # shortfall is None when it is not
    like = min((p for p in peers if p.pcie_capacity_bytes_per_s is not None),
               key=lambda p: abs((p.pcie_capacity_bytes_per_s or 0.0) - theirs))
    mine = me.pcie_capacity_bytes_per_s
    return Lag("pcie_link", None if mine is None else mine / 1e9, theirs / 1e9, "GB/s",
               f"PCIe {link_label(me.pcie_gen, me.pcie_width)} under load ({_gb(mine)} GB/s)",
               f"run at {link_label(like.pcie_gen, like.pcie_width)} ({_gb(theirs)} GB/s)")


def _gb(x: float | None) -> str:
    return "?" if x is None else f"{x / 1e9:.1f}"


# The causes behind the clocks, the most specific first: a GPU gets the first that holds.
CLOCK_CAUSES: tuple[tuple[str, Callable[[RankReading, Sequence[RankReading]], Lag | None]], ...] = (
    ("power_limit", _power_limit),
    ("mem_temp", _mem_temp),
    *((r, _reason(r)) for r in _REASONS),
    ("sm_clock", _sm_clock),
)
LINK_CAUSES: tuple[tuple[str, Callable[[RankReading, Sequence[RankReading]], Lag | None]], ...] = (
    ("pcie_link", _pcie_link),
)
# every cause → a few words for a narrow place (a fleet row)
CAUSES: dict[str, str] = {
    "power_limit": "power limit", "mem_temp": "memory hot", "hw_power_brake": "power brake",
    "hw_slowdown": "HW slowdown", "hw_thermal": "HW thermal", "sw_thermal": "thermal",
    "sw_power_cap": "power cap", "sm_clock": "SM clock", "pcie_link": "PCIe link",
}


def lags(me: RankReading, peers: Sequence[RankReading]) -> list[tuple[Lag, tuple[str, ...]]]:
    """Why ``me`` lags its ``peers``: at most one clock cause and one link cause, each with the other causes
    of its kind that also hold (``also``). Empty when it keeps pace, has no peers, or any of them is idle."""
    if not peers or not me.busy or not all(p.busy for p in peers):
        return []
    out = []
    for table in (CLOCK_CAUSES, LINK_CAUSES):
        # a reason's cause holds only where the reason is held: the others are not asked
        found = [lag for key, test in table
                 if (key in me.reasons or key not in _REASON_SET) and (lag := test(me, peers)) is not None]
        if found:  # the clock itself is the symptom of the others, never one "also"
            out.append((found[0], tuple(x.cause for x in found[1:] if x.cause != "sm_clock")))
    return out


# ------------------------------------------------------------------ readings of a group
_FIGURES_AT = ("sm_clock_mhz", "mem_clock_mhz", "power_limit_w", "temp_gpu_c", "temp_mem_c")  # beyond GpuWindow's
_FIGURES = attrgetter(*_FIGURES_AT)
_ALL_FIGURES = attrgetter("util_gpu_pct", "pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s", "power_w", "sm_clock_mhz",
                          "mem_clock_mhz", "power_limit_w", "temp_gpu_c", "temp_mem_c")
_MASK = attrgetter("clock_event_reasons")
_LOST = attrgetter("lost")


def _held_reasons(readings: Sequence[GpuReading]) -> frozenset[str]:
    """The clock-event reasons set in at least :data:`REASON_HELD` of ``readings``."""
    return _held_masks(tuple(map(_MASK, readings)))


@lru_cache(maxsize=1024)
def _held_masks(masks: tuple[int | None, ...]) -> frozenset[str]:
    """:func:`_held_reasons` of readings with these clock-event masks (a GPU shows a handful of patterns)."""
    counts: dict[str, int] = {}
    for mask in masks:
        for name in decode_clock_events(mask):
            counts[name] = counts.get(name, 0) + 1
    return frozenset(n for n, c in counts.items() if c >= REASON_HELD * len(masks))


def rank_reading(now: GpuReading, readings: Sequence[GpuReading], limit_w: float | None = None) -> RankReading:
    """One GPU's :class:`RankReading` from its reading ``now`` (link, index) and its ``readings`` over the span
    (means; busy as ``core.vocab.is_busy`` over the mean utilization and the busier PCIe direction); the power
    limit falls back to ``limit_w`` (the inventory's)."""
    if not readings:  # nothing to average: idle, its figures unknown
        return _reading(now, False, None, [None] * 5, frozenset(), limit_w)
    util, tx, rx, power, *figs = means(readings, _ALL_FIGURES)
    cap = link_capacity(now)
    busy = is_busy(util, max(tx or 0.0, rx or 0.0), cap)
    return _reading(now, busy, power, figs, _held_reasons(readings), limit_w)


def _reading(now: GpuReading, busy: bool, power: float | None, figs: Sequence[float | None],
             reasons: frozenset[str], limit_w: float | None) -> RankReading:
    """A :class:`RankReading` from its figures: ``figs`` the means of :data:`_FIGURES`."""
    sm, mem, limit, temp, temp_mem = figs
    return RankReading(gpu=now.index, busy=busy, sm_clock_mhz=sm, mem_clock_mhz=mem, power_w=power,
                       power_limit_w=limit if limit is not None else limit_w, temp_gpu_c=temp, temp_mem_c=temp_mem,
                       reasons=reasons, pcie_gen=now.pcie_gen, pcie_width=now.pcie_width,
                       pcie_capacity_bytes_per_s=link_capacity(now))


def window_reading(w: GpuWindow, limit_w: float | None = None,
                   figs: Sequence[float | None] | None = None) -> RankReading:
    """:func:`rank_reading` of a GPU from its shared :class:`GpuWindow` (the span's readings, its busy flag and
    power already averaged there; ``figs``: the means of :data:`_FIGURES` over them, when known); a lost reading
    in the span is left out, as :func:`rank_reading` is given."""
    rs = w.readings
    if any(map(_LOST, rs)):
        return rank_reading(w.now, [r for r in rs if not r.lost], limit_w)
    return _reading(w.now, w.busy, w.power_w, means(rs, _FIGURES) if figs is None else figs, _held_reasons(rs),
                    limit_w)


def _window_figures(ws: Sequence[GpuWindow]) -> list[list[float | None]]:
    """The means of :data:`_FIGURES` over each window's readings: summed in C, all windows at once, when every
    reading has every figure."""
    cols = [col for w in ws for col in zip(*map(_FIGURES, w.readings))]
    try:
        sums = list(map(sum, cols))
    except TypeError:  # a figure missing (None) somewhere: window by window, the known values only
        return [means(w.readings, _FIGURES) for w in ws]
    n = len(_FIGURES_AT)
    return [[s / len(w.readings) for s in sums[k * n:(k + 1) * n]] for k, w in enumerate(ws)]


def rank_readings(inv: Inventory, frames: Sequence[Frame], gpus: Iterable[int] | None = None) -> dict[int, RankReading]:
    """GPU index → :class:`RankReading` of every GPU of the newest frame that is not lost (only those in
    ``gpus`` when given), averaged over the last :data:`SPAN_S` s of ``frames`` (the engine's per-GPU windows,
    :func:`gpu_windows`: within one evaluation they are built once for every rule)."""
    if not frames:
        return {}
    want = None if gpus is None else set(gpus)
    limits = {d.index: d.power_limit_w for d in inv.devices}
    ws = [w for w in gpu_windows(frames).values() if want is None or w.now.index in want]
    return {w.now.index: window_reading(w, limits.get(w.now.index), figs) for w, figs in zip(ws, _window_figures(ws))}


def group_slow_ranks(inv: Inventory, g: ServingGroup, readings: Mapping[int, RankReading]) -> list[SlowRank]:
    """The GPUs that group ``g`` waits for, from its GPUs' ``readings`` (a GPU without one, lost or gone, is
    left out); none for fewer than two GPUs or while any of them is idle."""
    mine = [readings[i] for i in dict.fromkeys(g.gpus) if i in readings]
    if len(mine) < 2 or not all(r.busy for r in mine):
        return []
    found = [(me, peers, lag, also) for me in mine for peers in ([r for r in mine if r is not me],)
             for lag, also in lags(me, peers)]
    if not found:  # the usual case: every GPU keeps pace (the words below are made only for a finding)
        return []
    label = " ".join(p for p in (group_label(replace(g, model=None)), parallel_text(g)) if p)
    return [_slow_rank(inv, g, label, me, peers, lag, also, tuple(mine)) for me, peers, lag, also in found]


def _slow_rank(inv: Inventory, g: ServingGroup, label: str, me: RankReading, peers: Sequence[RankReading],
               lag: Lag, also: tuple[str, ...], readings: tuple[RankReading, ...]) -> SlowRank:
    peer_sm = median(map(_SM, peers))
    clock = ""
    if lag.cause not in ("sm_clock", "pcie_link") and me.sm_clock_mhz is not None and peer_sm is not None:
        clock = f"; SM clock {me.sm_clock_mhz:,.0f} vs {peer_sm:,.0f} MHz"
    msg = (f"{label}: GPU{me.gpu} {lag.words} while {_peer_phrase(peers, lag.peer_words)}{clock}; "
           f"{_pace(inv, g, me.gpu, lag.cause)}")
    figure = {"W": "power_limit_w" if lag.cause == "power_limit" else "power_w", "°C": "temp_gpu_c"}
    field = "temp_mem_c" if lag.cause == "mem_temp" else figure.get(lag.unit)
    peers_fig = tuple((p.gpu, _peer_figure(p, lag, field)) for p in peers)
    return SlowRank(group=g.endpoint or g.server, label=label, server=g.server, model=g.model, gpu=me.gpu,
                    cause=lag.cause, words=lag.words, value=lag.value, peer_value=lag.peer_value, unit=lag.unit,
                    peers=peers_fig,
                    sm_clock_mhz=me.sm_clock_mhz, peer_sm_clock_mhz=peer_sm, also=also, message=msg,
                    readings=readings)


def _peer_figure(p: RankReading, lag: Lag, field: str | None) -> float | None:
    """A peer's own figure of the cause, in the cause's unit."""
    if lag.unit == "MHz":
        return p.sm_clock_mhz
    if lag.unit == "GB/s":
        return None if p.pcie_capacity_bytes_per_s is None else p.pcie_capacity_bytes_per_s / 1e9
    return getattr(p, field) if field else None


def _peer_phrase(peers: Sequence[RankReading], words: str) -> str:
    """``GPU4, GPU6, GPU7 draw 690 W`` / ``GPU0 draws 690 W``: the peers, then ``words`` with its verb agreeing."""
    names = ", ".join(f"GPU{p.gpu}" for p in peers)
    if len(peers) == 1:
        verb, _, rest = words.partition(" ")
        words = f"{verb}s {rest}" if rest else f"{verb}s"
    return f"{names} {words}"


def _pace(inv: Inventory, g: ServingGroup, gpu: int, cause: str) -> str:
    """What the group waits for: its pace, or, for a PCIe link of a group joined by NVLink, its host transfers."""
    if cause == "pcie_link":
        p = worst_pair(inv, g.gpus)
        if p is not None and p.nvlinks:
            return f"the group's host transfers run at GPU{gpu}'s pace (its GPUs talk over NVLink)"
    return f"the group runs at GPU{gpu}'s pace"


def slow_ranks(inv: Inventory, frames: Sequence[Frame]) -> list[SlowRank]:
    """Every GPU a serving group of the newest frame waits for, group by group, in the group's GPU order.

    Readings are means over the engine's span (the last :data:`SPAN_S` s of ``frames``); a lost GPU is left out;
    nothing for a group of one GPU or any of whose GPUs is idle. Pure; no frames: empty."""
    if not frames or not frames[-1].groups:
        return []
    readings = rank_readings(inv, frames, (i for g in frames[-1].groups if len(g.gpus) > 1 for i in g.gpus))
    return [s for g in frames[-1].groups for s in group_slow_ranks(inv, g, readings)]


def evidence(s: SlowRank) -> dict[str, Any]:
    """The finding's evidence: the cause's figures and every GPU's readings (``summary --json``, ``d`` detail)."""
    return {"group": s.group, "label": s.label, "server": s.server, "model": s.model, "gpu": s.gpu,
            "cause": s.cause, "value": s.value, "peer_value": s.peer_value, "unit": s.unit,
            "peers": [{"gpu": i, "value": v} for i, v in s.peers],
            "sm_clock_mhz": s.sm_clock_mhz, "peer_sm_clock_mhz": s.peer_sm_clock_mhz, "also": list(s.also),
            "readings": [r.figures() for r in s.readings]}


def rule_slow_rank(inv: Inventory, frames: Sequence[Frame]) -> list[Candidate]:
    """The findings-engine rule (``slow_rank``): each :func:`slow_ranks` a warning, its cause the wording class."""
    return [Candidate(s.id, RULE, "warning", f"GPU{s.gpu}", s.message, evidence(s), variant=s.cause)
            for s in slow_ranks(inv, frames)]


def slow_rank_brief(finding_id: str) -> str | None:
    """``GPU5 lags: power limit`` from a slow-rank finding's id (None for any other id): the few words a
    narrow place (a fleet row) shows."""
    if not finding_id.startswith(ID_PREFIX):
        return None
    head, _, cause = finding_id.rpartition(":")
    gpu = head.rpartition(":")[2]
    if not gpu.startswith("gpu") or not gpu[3:].isdigit():
        return None
    return f"GPU{gpu[3:]} lags: {CAUSES.get(cause, cause)}"
