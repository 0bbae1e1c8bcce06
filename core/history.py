"""Bounded per-metric history in numpy ring buffers (for graphs, windows and statistics)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from gpuscope.core import catalogue
from gpuscope.core.model import Frame


class History:
    """Fixed-capacity ring of samples: ``times``, one (capacity × GPUs) float32 array per GPU metric and
    one (capacity,) array per endpoint metric (summed over endpoints) that the catalogue keeps in history.

    Missing readings are NaN. Memory is capacity × (8 + 4 × (GPUs × GPU metrics + endpoint metrics)) bytes,
    allocated once.
    """

    def __init__(self, n_gpus: int, capacity: int):
        self.n_gpus = n_gpus
        self.capacity = max(2, capacity)
        self.times = np.full(self.capacity, np.nan, dtype=np.float64)
        self._gpu = [(m.key, m.getter()) for m in catalogue.metrics("gpu", history=True) if m.key is not None]
        self._ep = [(m.key, m.getter()) for m in catalogue.metrics("endpoint", history=True) if m.key is not None]
        self.data = {key: np.full((self.capacity, n_gpus), np.nan, dtype=np.float32) for key, _ in self._gpu}
        self.endpoint_data = {key: np.full(self.capacity, np.nan, dtype=np.float32) for key, _ in self._ep}
        self.count = 0  # total samples ever added
        self._rows = np.arange(n_gpus)
        # how many samples add() has put in, every one at or after the one before (times in order): while
        # it equals count, window() finds the window's start by binary search instead of scanning the ring
        self._ordered = 0
        self._memo: dict[tuple[float, int, float | None], dict[str, np.ndarray]] = {}  # cells(), this count
        self._memo_count = -1
        self._generation = 0  # bumped by clear(): what was computed before it no longer holds
        self._live: dict[tuple[float, int], LiveCells] = {}  # cells() at the newest sample, kept up by folding
        # the metrics cells() was asked for at each (window, width), in order (ordered sets): drawn together
        self._graphed: dict[tuple[float, int], dict[str, None]] = {}

    @property
    def tok_s(self) -> np.ndarray:
        """Generated tokens/s summed over the endpoints, one per sample."""
        return self.endpoint_data["tok_s"]

    def clear(self) -> None:
        self.times[:] = np.nan
        for a in (*self.data.values(), *self.endpoint_data.values()):
            a[:] = np.nan
        self.count = 0
        self._ordered = 0
        self._generation += 1
        self._live.clear()

    def add(self, frame: Frame) -> None:
        k = self.count % self.capacity
        if self._ordered == self.count and (self.count == 0 or frame.t >= self.times[(k - 1) % self.capacity]):
            self._ordered += 1
        self.times[k] = frame.t
        for key, get in self._gpu:
            row = self.data[key][k]
            row[:] = np.nan
            for r in frame.gpus:
                if r.index < self.n_gpus and not r.lost:
                    v = get(r)
                    if v is not None:
                        row[r.index] = v
        for key, get in self._ep:
            vals = [v for e in frame.endpoints if (v := get(e)) is not None]
            self.endpoint_data[key][k] = sum(vals) if vals else np.nan
        self.count += 1

    def window(self, metric: str, gpu: int | None, seconds: float, now: float | None = None
               ) -> tuple[np.ndarray, np.ndarray]:
        """(times, values) of the last ``seconds``, oldest first; ``gpu`` None for an endpoint metric
        (``tok_s``). Raises KeyError for a metric the catalogue does not keep in history."""
        return self._window(self.endpoint_data[metric] if gpu is None else self.data[metric][:, gpu], seconds, now)

    def cells(self, metric: str, seconds: float, columns: int, now: float | None = None) -> np.ndarray:
        """Every GPU's last ``seconds`` of ``metric`` as ``columns`` cells (:func:`resample_rows`: GPUs ×
        columns, NaN where blank), ending at ``now`` (else the newest sample).

        Cells are pinned to the clock (``pinned``: each covers a fixed stretch of time, the last one the stretch
        that holds ``now``), so a graph moves by whole cells and a cell's value does not change once time has
        passed it (cells measured from ``now`` resample every cell at every sample, and the graph shimmers).

        Computed once per new sample for every GPU metric asked for so far at this window and width, in one
        pass: the panels of all GPUs draw the same few metrics over the same window every second, and
        numpy's cost is per call, not per value. At the newest sample (``now`` None: the live screen) the
        cells are kept up to date by folding in each new sample (:class:`LiveCells`): a few Python
        operations per GPU and metric instead of resampling the window (tests/widgets/test_style.py: equal to
        resampling)."""
        if self._memo_count != self.count:
            self._memo.clear()
            self._memo_count = self.count
        now = self._live_now(now)
        key = (seconds, columns, now)
        got = self._memo.get(key)
        if got is None or metric not in got:
            if metric not in self.data:
                raise KeyError(metric)
            graphed = self._graphed.setdefault((seconds, columns), {})  # what is drawn at this width
            graphed.setdefault(metric, None)
            names = list(graphed)
            live = self._live_cells(names, seconds, columns) if now is None else None
            if live is not None:
                rows = live.out.copy()
            else:
                times, values, end = self._stacked(names, carry_span(seconds, columns), now)
                rows = resample_rows(times, values, end, seconds, columns, pinned=True)
            g = self.n_gpus
            got = self._memo[key] = {m: rows[i * g:(i + 1) * g] for i, m in enumerate(names)}
        return got[metric]

    def cells_change(self, seconds: float, columns: int, now: float | None = None
                     ) -> tuple[int, tuple[int, int, int] | None]:
        """How the cells :meth:`cells` gives now at this window, width and ``now`` changed, when they are the
        live ones (at the newest sample): (version, (version before, shift, first)) when the last update moved
        the version before's cells left by ``shift`` and changed only the columns from ``first`` on; (version, None)
        after a full resample; (-1, None) when they are not live ones. Lets a graph redraw only its new
        columns (widgets/style.py spark_update)."""
        live = self._live.get((seconds, columns))
        if (self._live_now(now) is not None or live is None or live.generation != self._generation
                or live.upto != self.count):
            return -1, None
        return live.version, live.change

    def _live_now(self, now: float | None) -> float | None:
        """``now``, or None when it is the newest sample's time (the live screen passes it): the live cells."""
        if now is not None and self.count and now == self.times[(self.count - 1) % self.capacity]:
            return None
        return now

    def _stacked(self, names: list[str], seconds: float, now: float | None) -> tuple[np.ndarray, np.ndarray, float]:
        """The last ``seconds`` of ``names`` side by side (samples × (metrics × GPUs)), their times, and the
        window's end (``now``, else the newest sample)."""
        times, take = self._window_rows(seconds, now)
        end = now if now is not None else (float(times[-1]) if len(times) else 0.0)
        return times, np.concatenate([take(self.data[m]) for m in names], axis=1), end

    def _live_cells(self, names: list[str], seconds: float, columns: int) -> LiveCells | None:
        """The live cells of ``names``, brought up to the newest sample: folded in when only a few samples in
        time order came since the last call, else resampled from the window. None with no sample or width."""
        if self.count == 0 or columns <= 0:
            return None
        key = (seconds, columns)
        cap = self.capacity
        if self.count > cap and (last_cell(float(self.times[self.count % cap]), seconds / columns)
                                 >= last_cell(float(self.times[(self.count - 1) % cap]), seconds / columns)
                                 - 2 * columns + 2):
            # the ring let samples go that the window, or a carry into it, may need (the 1 h window in an
            # hour's ring): resample what the ring holds each time, and keep no live cells
            self._live.pop(key, None)
            return None
        live = self._live.get(key)
        new = self.count - live.upto if live is not None else 0
        if (live is not None and live.generation == self._generation and live.names == names
                and self._ordered == self.count and 0 <= new <= min(64, cap)):
            if new and not live.fold(self.times, [self.data[m] for m in names], range(live.upto, self.count)):
                live = None
            if live is not None:
                return live
        dt = seconds / columns
        times, values, end = self._stacked(names, carry_span(seconds, columns), None)
        out = resample_rows(times, values, end, seconds, columns, pinned=True)
        self._live.pop(key, None)
        while len(self._live) >= LIVE_KEYS:  # the oldest first (dicts keep their order)
            self._live.pop(next(iter(self._live)))
        live = self._live[key] = LiveCells.start(names, dt, columns, self._generation, self.count, times, values,
                                                 end, out, next(_VERSIONS))
        return live

    def _window(self, data: np.ndarray, seconds: float, now: float | None) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`window` of ``data`` (the ring's rows: one metric, one GPU or all of them)."""
        times, take = self._window_rows(seconds, now)
        return times, take(data)

    def _window_rows(self, seconds: float, now: float | None
                     ) -> tuple[np.ndarray, Callable[[np.ndarray], np.ndarray]]:
        """The times of the last ``seconds`` (``t >= last - seconds``, oldest first) and a function that
        takes the same rows, in the same order, from any of the ring's arrays."""
        cap, count = self.capacity, self.count
        n = min(count, cap)
        if n == 0:
            return np.empty(0), lambda a: np.empty((0, *a.shape[1:]), dtype=a.dtype)
        end = count % cap
        last = self.times[(count - 1) % cap] if now is None else now
        th = last - seconds
        if self._ordered != count:  # times out of order somewhere: gather the ring, keep by time
            idx = (np.arange(end - n, end)) % cap
            t = self.times[idx]
            last = t[-1] if now is None else now
            keep = idx[t >= last - seconds]
            return self.times[keep], lambda a: a[keep]
        # in order: the kept samples are the newest ones, found by binary search (no gathering the ring)
        if count <= cap or end == 0:  # one run, oldest first: [0, count) or the full ring from 0
            lo = int(np.searchsorted(self.times[:n], th, side="left"))
            return self.times[lo:n].copy(), lambda a: a[lo:n].copy()
        newer = self.times[:end]  # the ring wrapped: [end, cap) holds the older samples, [0, end) the newer
        if newer[0] >= th:
            lo = end + int(np.searchsorted(self.times[end:], th, side="left"))
            return np.concatenate((self.times[lo:], newer)), lambda a: np.concatenate((a[lo:], a[:end]))
        lo = int(np.searchsorted(newer, th, side="left"))
        return self.times[lo:end].copy(), lambda a: a[lo:end].copy()


# versions of live cells (History.cells_change), never reused, not even by another History (a replay's seek
# makes a new one, and a widget may hold sparklines drawn from the old one's cells)
_VERSIONS = itertools.count(1)
LIVE_KEYS = 8  # (window, width) pairs whose live cells are kept: a resize leaves the old width's behind


def carry_span(seconds: float, columns: int) -> float:
    """How far back to read to resample a ``seconds`` window in ``columns`` pinned cells: the window, and a
    window before it, where a carry into its first cells may come from."""
    return 2 * seconds + seconds / max(1, columns)


def last_cell(t: float, dt: float) -> int:
    """The index of the pinned cell that holds time ``t``: cell ``b`` covers ``(b·dt, (b+1)·dt]``."""
    return math.ceil(t / dt) - 1


@dataclass
class LiveCells:
    """The live graphs' cells at one window and width, kept at the newest sample by folding new samples in.

    ``out`` is what :func:`resample_rows` (pinned) gives for the window: rows are metric × GPU, NaN where blank.
    Per row it keeps the pinned cell of its newest sample and that cell's sum and count: samples come in time
    order, so only that cell or a later one can take a sample still to come, and the cells before never
    change again. A new sample moves the rows left by whole cells, fills the gap since the row's sample
    before with that sample's cell (as resampling carries it, when the gap is shorter than the window) and
    sets its cell's mean."""

    names: list[str]
    dt: float
    columns: int
    generation: int
    upto: int  # samples folded in: the history's count when last brought up to date
    cell: int  # the pinned index of the last column
    out: np.ndarray
    last: list[int | None]  # per row: the pinned cell of its newest sample (None: none yet)
    sums: list[float]  # per row: that cell's sum and count of samples
    counts: list[int]
    version: int = 0
    change: tuple[int, int, int] | None = field(default=None)

    @classmethod
    def start(cls, names: list[str], dt: float, columns: int, generation: int, upto: int, times: np.ndarray,
              values: np.ndarray, end: float, out: np.ndarray, version: int) -> LiveCells:
        """From a full resample (``out``) of the window (``times``, ``values``: samples × rows, reaching a window
        further back) ending at ``end``."""
        rows = out.shape[0]
        last: list[int | None] = [None] * rows
        sums, counts = [0.0] * rows, [0] * rows
        if len(times):
            cells = (np.ceil(times / dt) - 1).astype(np.int64)
            known = ~np.isnan(values)
            for r in range(rows):
                at = np.nonzero(known[:, r])[0]
                if not len(at):
                    continue
                cell = int(cells[at[-1]])
                last[r] = cell
                for i in at[cells[at] == cell].tolist():  # in order, as resample_rows adds them
                    sums[r] += float(values[i, r])
                    counts[r] += 1
        return cls(names, dt, columns, generation, upto, last_cell(end, dt), out, last, sums, counts, version)

    def fold(self, times: np.ndarray, arrays: list[np.ndarray], indices: range) -> bool:
        """Fold the samples at ring rows ``indices`` (modulo the ring's length; in time order) of ``times`` and
        of ``arrays`` (the ring's arrays of :attr:`names`, samples × GPUs) into the cells, and record the change
        (:meth:`History.cells_change`). False, with nothing changed, when the first sample lies before the
        last column (the caller resamples instead)."""
        cap = len(times)
        if len(indices) and last_cell(float(times[indices.start % cap]), self.dt) < self.cell:
            return False
        before, first_cell = self.cell, self.cell + 1  # first_cell: the earliest pinned cell written
        for i in indices:
            k = i % cap
            cell = last_cell(float(times[k]), self.dt)
            if cell > self.cell:
                self._shift(cell - self.cell)
                self.cell = cell
            r = 0
            for a in arrays:
                for v in a[k].tolist():
                    if v == v:
                        first_cell = min(first_cell, self._add(r, v))
                    r += 1
        shift, columns = self.cell - before, self.columns
        # the columns the shift brought in are new (blank, or written above), and those written before them
        first = max(0, min(columns - shift, first_cell - (self.cell - columns + 1)))
        self.change = (self.version, shift, first) if shift < columns else (self.version, 0, 0)
        self.version = next(_VERSIONS)
        self.upto = indices.stop
        return True

    def _shift(self, n: int) -> None:
        """Move every row left by ``n`` cells; the cells that come in are blank."""
        out, columns = self.out, self.columns
        if n >= columns:
            out[:] = np.nan
            return
        out[:, :columns - n] = out[:, n:]
        out[:, columns - n:] = np.nan

    def _add(self, r: int, v: float) -> int:
        """Add the value ``v`` of row ``r`` in the last cell; returns the earliest pinned cell it wrote. The
        row's first sample in that cell carries its sample before over the gap between (when the gap is
        shorter than the window), as resampling does."""
        out, end, cell = self.out, self.columns - 1, self.cell
        prev = self.last[r]
        touched = cell
        if prev == cell:
            self.sums[r] += v
            self.counts[r] += 1
        else:
            if prev is not None and 1 < cell - prev < self.columns:
                lo = max(0, end - (cell - prev) + 1)
                out[r, lo:end] = self.sums[r] / self.counts[r]
                touched = cell - end + lo
            self.last[r] = cell
            self.sums[r], self.counts[r] = v, 1
        out[r, end] = self.sums[r] / self.counts[r]
        return touched


def resample(times: np.ndarray, values: np.ndarray, t_end: float, seconds: float, columns: int,
             pinned: bool = False) -> list[float | None]:
    """Bucket the window (t_end - seconds, t_end] into ``columns`` cells (the mean of each; None where no
    sample fell); a sample at ``t_end`` lies in the last cell. Cells narrower than the sampling interval get
    no sample: a cell between two samples carries the one before.

    ``pinned``: the cells are fixed stretches of the clock (:func:`last_cell`), the last one the stretch
    holding ``t_end``; a cell carries the sample before when the gap between the two is shorter than the
    window, even when that sample lies before the window (``times`` should reach a window further back), so
    the graph's first cells do not blink as samples leave the window."""
    if columns <= 0:
        return []
    out: list[float | None] = [None] * columns
    if len(times) == 0:
        return out
    back = columns - 1 if pinned else 0  # cells before the window a carry may come from
    cell = cells_of(np.asarray(times, dtype=np.float64), t_end, seconds, columns, pinned).astype(np.int64)
    ok = (cell >= -back) & (cell < columns) & ~np.isnan(values)
    if not ok.any():
        return out
    cells = cell[ok] + back
    vals = values[ok].astype(np.float64)
    sums = np.bincount(cells, weights=vals, minlength=columns + back)
    counts = np.bincount(cells, minlength=columns + back)
    sampled = [int(j) for j in np.nonzero(counts)[0]]  # cells with a sample, in order
    means = {j: float(sums[j] / counts[j]) for j in sampled}
    k = 0  # sampled[k] is the first sampled cell after the one before ``at``
    prev = None  # the last sampled cell before ``at``
    for c in range(columns):
        at = c + back
        while k < len(sampled) and sampled[k] < at:
            prev = sampled[k]
            k += 1
        if k < len(sampled) and sampled[k] == at:
            out[c] = means[at]
            continue
        nxt = sampled[k] if k < len(sampled) else None  # the first sampled cell after ``at``
        if prev is not None and nxt is not None and (not pinned or nxt - prev < columns):
            out[c] = means[prev]
    return out


def cells_of(times: np.ndarray, t_end: float, seconds: float, columns: int, pinned: bool) -> np.ndarray:
    """The column (as floats) of each time in a window of ``columns`` cells ending at ``t_end``; 0 to
    ``columns - 1`` inside it. Cells cover (t_end - seconds, t_end], or with ``pinned`` the fixed stretches
    (b·dt, (b+1)·dt] up to the one holding ``t_end``: either way a sample at ``t_end`` lies in the last cell."""
    if pinned:
        dt = seconds / columns
        return np.ceil(times / dt) - 1 - (last_cell(t_end, dt) - columns + 1)
    return np.ceil((times - (t_end - seconds)) / seconds * columns) - 1


def resample_rows(times: np.ndarray, values: np.ndarray, t_end: float, seconds: float, columns: int,
                  pinned: bool = False) -> np.ndarray:
    """:func:`resample` of several series at once: ``values`` is (samples × series); the result is
    (series × columns) float64, NaN where :func:`resample` gives None (the same numbers: the mean of each
    cell, a cell with no sample between two samples carrying the one before)."""
    vals = np.asarray(values, dtype=np.float64)
    if vals.ndim == 1:
        vals = vals[:, None]
    rows = vals.shape[1]
    out = np.full((rows, max(0, columns)), np.nan)
    if columns <= 0 or len(times) == 0 or rows == 0:
        return out
    back = columns - 1 if pinned else 0  # cells before the window a carry may come from (pinned)
    span = columns + back
    cell = cells_of(np.asarray(times, dtype=np.float64), t_end, seconds, columns, pinned) + back
    inside = (cell >= 0) & (cell < span)
    if not inside.any():
        return out
    vals = vals[inside]
    ok = ~np.isnan(vals)
    flat = (np.arange(rows) * span)[None, :] + cell[inside].astype(np.int64)[:, None]
    sums = np.bincount(flat[ok], weights=vals[ok], minlength=rows * span).reshape(rows, span)
    counts = np.bincount(flat[ok], minlength=rows * span).reshape(rows, span)
    has = counts > 0
    col = np.arange(span)
    src = np.maximum.accumulate(np.where(has, col, -1), axis=1)  # the last cell with a sample, so far
    nxt = np.minimum.accumulate(np.where(has, col, span)[:, ::-1], axis=1)[:, ::-1]  # the next one
    with np.errstate(invalid="ignore", divide="ignore"):
        means = sums / counts
    carried = (src >= 0) & (nxt < span)
    if pinned:  # over a gap shorter than the window only
        carried &= nxt - src < columns
    keep = has | carried
    out = np.where(keep, means[np.arange(rows)[:, None], np.maximum(src, 0)], np.nan)
    return out[:, back:]
