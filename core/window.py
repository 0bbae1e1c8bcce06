"""The per-GPU window the findings rules share: each GPU's figures over the last :data:`AVG_S` seconds.

:class:`RuleWindow` is the frames one evaluation reads (the findings engine builds one per evaluation and hands
it to every rule); :func:`gpu_windows` gives each GPU's :class:`GpuWindow` (means over the span, built once per
evaluation however many rules ask). The engine (``core/findings.py``) and the rules of their own modules
(``core/slow_rank.py``) both import it from here: a rule module cannot import the engine that imports it.
Pure; no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import chain
from operator import attrgetter
from typing import Any, NamedTuple

from gpuscope.core.model import Frame, GpuReading
from gpuscope.core.topology import pcie_capacity_bytes_per_s
from gpuscope.core.vocab import is_busy

AVG_S = 5.0  # readings are averaged over the last AVG_S seconds of the window

# the figures a GpuWindow averages, in its field order
_WINDOW_FIELDS = ("util_gpu_pct", "sm_active_pct", "tensor_active_pct", "power_w", "pcie_tx_bytes_per_s",
                  "pcie_rx_bytes_per_s", "nvlink_tx_bytes_per_s", "nvlink_rx_bytes_per_s")
_WINDOW_FIGURES = attrgetter(*_WINDOW_FIELDS)
_N = len(_WINDOW_FIELDS)


def recent(frames: Sequence[Frame], span_s: float = AVG_S) -> list[Frame]:
    """The frames of the last ``span_s`` seconds of ``frames`` (time order: the last is "now")."""
    if not frames:
        return []
    t_end = frames[-1].t
    return [f for f in frames if f.t >= t_end - span_s - 1e-6]


def mean(values: Sequence[Any]) -> float | None:
    """The mean of ``values``, None values skipped (never read as 0); None when none is known."""
    if None not in values:
        return sum(values) / len(values) if values else None
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def means(readings: Sequence[GpuReading], figures: Callable[[GpuReading], tuple[Any, ...]]) -> list[float | None]:
    """:func:`mean` of each field that ``figures`` (an ``operator.attrgetter`` of two fields or more) reads,
    over ``readings``, in the getter's order."""
    return [mean(col) for col in zip(*map(figures, readings))]


def link_capacity(r: GpuReading) -> float | None:
    """The capacity of reading ``r``'s PCIe link at its generation and width, one direction, bytes/s."""
    return pcie_capacity_bytes_per_s(r.pcie_gen, r.pcie_width)


class GpuWindow(NamedTuple):
    """One GPU's figures over the last :data:`AVG_S` seconds of a window, what the per-GPU rules read.

    Each ``*_pct`` / ``*_bytes_per_s`` / ``*_w`` figure is the mean of the readings present in that span
    (a frame without the reading is skipped), None when no frame had it. Built by
    :func:`build_gpu_windows`; within one evaluation each GPU's is built once (:func:`gpu_windows`).
    Immutable; a named tuple, not a frozen dataclass, because one is built per GPU every tick and a frozen
    dataclass's constructor costs five times as much (benchmarks/bench_findings.py)."""

    gpu: int  # the GPU's position in the frame (and the inventory)
    now: GpuReading  # its reading in the last frame: link generation and width, clock events, temperature
    util_gpu_pct: float | None
    sm_active_pct: float | None  # GPM SM activity
    tensor_active_pct: float | None  # GPM tensor-core activity
    power_w: float | None
    pcie_tx_bytes_per_s: float | None
    pcie_rx_bytes_per_s: float | None
    pcie_peak_bytes_per_s: float  # the busier PCIe direction (0.0 when neither is known)
    pcie_capacity_bytes_per_s: float | None  # the link's capacity at its generation and width now
    nvlink_tx_bytes_per_s: float | None
    nvlink_rx_bytes_per_s: float | None
    nvlink_peak_bytes_per_s: float  # the busier NVLink direction (0.0 when neither is known)
    busy: bool  # computing or moving data (core.vocab.is_busy over the mean utilization and PCIe peak)
    # the readings averaged, oldest first (the last is ``now``; a lost one included, its figures None): what a
    # rule that averages figures of its own reads (core/slow_rank.py), without finding the span again
    readings: tuple[GpuReading, ...] = ()


def _gpu_window(i: int, rs: tuple[GpuReading, ...], figs: Sequence[float | None]) -> GpuWindow:
    """The :class:`GpuWindow` of the GPU at position ``i``: its readings over the span (the last is now) and
    the means of :data:`_WINDOW_FIELDS` over them."""
    now = rs[-1]
    util, sm, tensor, power, tx, rx, nvtx, nvrx = figs
    cap = link_capacity(now)
    peak = max(tx or 0.0, rx or 0.0)
    return GpuWindow(i, now, util, sm, tensor, power, tx, rx, peak, cap, nvtx, nvrx, max(nvtx or 0.0, nvrx or 0.0),
                     is_busy(util, peak, cap), rs)


# each frame's _WINDOW_FIELDS, GPU by GPU, kept by the frame's identity (the frame held beside them, so a reused id
# never answers for another): a frame is in the window for AVG_S of ticks and its readings never change
_FRAME_FIGURES: dict[int, tuple[Frame, tuple[Any, ...]]] = {}


def _frame_figures(f: Frame) -> tuple[Any, ...]:
    """:data:`_WINDOW_FIELDS` of every GPU of frame ``f``, GPU by GPU, read once per frame."""
    got = _FRAME_FIGURES.get(id(f))
    if got is None or got[0] is not f:
        if len(_FRAME_FIGURES) >= 128:  # engines come and go (tests, replays, a fleet's hosts): bounded
            _FRAME_FIGURES.clear()
        got = _FRAME_FIGURES[id(f)] = (f, tuple(chain.from_iterable(map(_WINDOW_FIGURES, f.gpus))))
    return got[1]


def _column_means(win: Sequence[Frame]) -> list[float | None]:
    """The means of :data:`_WINDOW_FIELDS` of every GPU over the frames ``win`` (each with as many GPUs), GPU by
    GPU: one column per GPU and figure, summed in C when every reading has every figure."""
    cols = list(zip(*map(_frame_figures, win)))
    try:
        sums = list(map(sum, cols))
    except TypeError:  # a figure missing (None) somewhere: column by column, the known values only
        return [mean(c) for c in cols]
    n = len(win)
    return [s / n for s in sums]


def build_gpu_windows(frames: Sequence[Frame]) -> dict[int, GpuWindow]:
    """GPU position → :class:`GpuWindow` for every GPU in the last frame (time order: the last is "now")
    that is not lost, in position order; the figures are means over the frames of the last :data:`AVG_S`
    s that have a reading at that position. Pure; no frames: empty."""
    if not frames:
        return {}
    win = recent(frames)
    n = len(win[-1].gpus)
    if any(len(f.gpus) != n for f in win):  # a GPU came or went: each position over the frames that have it
        ragged = (tuple(f.gpus[i] for f in win if i < len(f.gpus)) for i in range(n))
        return {i: _gpu_window(i, rs, means(rs, _WINDOW_FIGURES)) for i, rs in enumerate(ragged) if not rs[-1].lost}
    figs = _column_means(win)
    return {i: _gpu_window(i, rs, figs[i * _N:(i + 1) * _N])
            for i, rs in enumerate(zip(*(f.gpus for f in win))) if not rs[-1].lost}


class RuleWindow(tuple[Frame, ...]):
    """The frames one evaluation reads, with the per-GPU figures the rules share.

    :class:`~gpuscope.core.findings.FindingsEngine` builds one per evaluation and hands it to every rule, so each
    GPU's window is averaged once however many rules ask; the cache lives and dies with this object (no hidden
    per-thread state). Rules see a plain sequence of frames (the last one is "now"): a tuple, so that
    ``len``, indexing and iteration, which every rule does, cost no Python call."""

    gpus: dict[int, GpuWindow] | None  # gpu_windows' answer, once asked
    counter_base: Frame | None  # the oldest frame within COUNTER_WINDOW_S: what the slowly read error counters rise from
    probe: Any  # the JSON of the newest link probe the engine has seen (core/link_cost.py reads it), or None

    def __new__(cls, frames: Sequence[Frame], counter_base: Frame | None = None, probe: Any = None) -> RuleWindow:
        self = super().__new__(cls, frames)
        self.gpus = None
        self.counter_base = counter_base
        self.probe = probe
        return self


def gpu_windows(frames: Sequence[Frame]) -> Mapping[int, GpuWindow]:
    """GPU position → :class:`GpuWindow` for every GPU in the last frame that is not lost, in order.

    Within one evaluation (a :class:`RuleWindow`) this is built once and shared by every rule: read it,
    never change it."""
    if isinstance(frames, RuleWindow):
        if frames.gpus is None:
            frames.gpus = build_gpu_windows(frames)
        return frames.gpus
    return build_gpu_windows(frames)
