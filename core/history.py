"""Bounded per-metric history in ring buffers of the stdlib's typed arrays (for graphs, windows and statistics).

No numpy here: the live screen imports this module, and numpy (its C extension, OpenBLAS and gfortran
pages) cost it about 20 MB of memory at one GPU (docs/performance.md, *Memory at one GPU*).
Values are stored as float32 (``array('f')``, as the numpy rings did: the same numbers reach the graphs)
and folded with plain Python over slices: the live screen folds each new sample in (:class:`LiveCells`)
and resamples a whole window only on a resize, a seek or a redraw away from the newest sample."""

from __future__ import annotations

import itertools
import math
from array import array
from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import reduce
from operator import add

from gpuscope.core import catalogue
from gpuscope.core.model import Frame

NAN = math.nan
Rows = list[list[float]]  # series × columns, NaN where blank


def nans(typecode: str, n: int) -> array[float]:
    """An ``array`` of ``n`` NaNs."""
    return array(typecode, [NAN]) * n


class History:
    """Fixed-capacity ring of samples: ``times`` (``array('d')``), per GPU metric the catalogue keeps in
    history one ``array('f')`` per GPU (``data[metric][gpu][slot]``), and per endpoint metric one
    ``array('f')`` (summed over endpoints; ``endpoint_data[metric][slot]``).

    Missing readings are NaN. Memory is capacity × (8 + 4 × (GPUs × GPU metrics + endpoint metrics)) bytes,
    allocated once.
    """

    def __init__(self, n_gpus: int, capacity: int):
        self.n_gpus = n_gpus
        self.capacity = max(2, capacity)
        self.times = nans("d", self.capacity)
        self._gpu = [(m.key, m.getter()) for m in catalogue.metrics("gpu", history=True) if m.key is not None]
        self._ep = [(m.key, m.getter()) for m in catalogue.metrics("endpoint", history=True) if m.key is not None]
        self.data = {key: [nans("f", self.capacity) for _ in range(n_gpus)] for key, _ in self._gpu}
        self.endpoint_data = {key: nans("f", self.capacity) for key, _ in self._ep}
        # (reader, its rings) per metric, for add(): the rings are filled in place, never replaced
        self._gpu_rings = [(get, self.data[key]) for key, get in self._gpu]
        self._ep_rings = [(get, self.endpoint_data[key]) for key, get in self._ep]
        self.count = 0  # total samples ever added
        # how many samples add() has put in, every one at or after the one before (times in order): while
        # it equals count, window() finds the window's start by binary search instead of scanning the ring
        self._ordered = 0
        self._memo: dict[tuple[float, int, float | None], dict[str, Rows]] = {}  # cells(), this count
        self._memo_count = -1
        self._generation = 0  # bumped by clear(): what was computed before it no longer holds
        self._live: dict[tuple[float, int], LiveCells] = {}  # cells() at the newest sample, kept up by folding
        # the metrics cells() was asked for at each (window, width), in order (ordered sets): drawn together
        self._graphed: dict[tuple[float, int], dict[str, None]] = {}

    @property
    def tok_s(self) -> array[float]:
        """Generated tokens/s summed over the endpoints, one per sample."""
        return self.endpoint_data["tok_s"]

    def clear(self) -> None:
        blank_t, blank = nans("d", self.capacity), nans("f", self.capacity)
        self.times[:] = blank_t
        for a in (*(g for cols in self.data.values() for g in cols), *self.endpoint_data.values()):
            a[:] = blank
        self.count = 0
        self._ordered = 0
        self._generation += 1
        self._live.clear()

    def add(self, frame: Frame) -> None:
        k = self.count % self.capacity
        if self._ordered == self.count and (self.count == 0 or frame.t >= self.times[(k - 1) % self.capacity]):
            self._ordered += 1
        self.times[k] = frame.t
        n = self.n_gpus
        rows = [r for r in frame.gpus if r.index < n and not r.lost]
        if len({r.index for r in rows}) == n:  # every GPU's slot is written (each tick of a live source)
            for get, cols in self._gpu_rings:
                for r in rows:
                    v = get(r)
                    cols[r.index][k] = NAN if v is None else v
        else:  # a GPU lost or missing: its slot is blank
            for get, cols in self._gpu_rings:
                for a in cols:
                    a[k] = NAN
                for r in rows:
                    v = get(r)
                    if v is not None:
                        cols[r.index][k] = v
        for get, ring in self._ep_rings:
            vals = [v for e in frame.endpoints if (v := get(e)) is not None]
            ring[k] = sum(vals) if vals else NAN
        self.count += 1

    def window(self, metric: str, gpu: int | None, seconds: float, now: float | None = None
               ) -> tuple[array[float], array[float]]:
        """(times, values) of the last ``seconds``, oldest first (``array('d')``, ``array('f')``); ``gpu`` None
        for an endpoint metric (``tok_s``). Raises KeyError for a metric the catalogue does not keep in
        history."""
        data = self.endpoint_data[metric] if gpu is None else self.data[metric][gpu]
        times, take = self._window_rows(seconds, now)
        return times, take(data)

    def cells(self, metric: str, seconds: float, columns: int, now: float | None = None) -> Rows:
        """Every GPU's last ``seconds`` of ``metric`` as ``columns`` cells (:func:`resample_rows`: one list of
        floats per GPU, NaN where blank), ending at ``now`` (else the newest sample).

        Cells are pinned to the clock (``pinned``: each covers a fixed stretch of time, the last one the stretch
        that holds ``now``), so a graph moves by whole cells and a cell's value does not change once time has
        passed it (cells measured from ``now`` resample every cell at every sample, and the graph shimmers).

        Computed once per new sample for every GPU metric asked for so far at this window and width, in one
        pass: the panels of all GPUs draw the same few metrics over the same window every second. At the
        newest sample (``now`` None: the live screen) the cells are kept up to date by folding in each new
        sample (:class:`LiveCells`): a few Python operations per GPU and metric instead of resampling the
        window (tests/widgets/test_style.py: equal to resampling)."""
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
                rows = [row[:] for row in live.out]
            else:
                times, series, end = self._stacked(names, carry_span(seconds, columns), now)
                rows = resample_rows(times, series, end, seconds, columns, pinned=True)
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

    def _columns(self, names: list[str]) -> list[array[float]]:
        """The ring's arrays of ``names``, metric by metric, GPU by GPU (the rows of :meth:`cells`)."""
        return [a for m in names for a in self.data[m]]

    def _stacked(self, names: list[str], seconds: float, now: float | None
                 ) -> tuple[array[float], list[array[float]], float]:
        """The last ``seconds`` of ``names`` (one series per metric × GPU), their times, and the window's end
        (``now``, else the newest sample)."""
        times, take = self._window_rows(seconds, now)
        end = now if now is not None else (times[-1] if len(times) else 0.0)
        return times, [take(a) for a in self._columns(names)], end

    def _live_cells(self, names: list[str], seconds: float, columns: int) -> LiveCells | None:
        """The live cells of ``names``, brought up to the newest sample: folded in when only a few samples in
        time order came since the last call, else resampled from the window. None with no sample or width."""
        if self.count == 0 or columns <= 0:
            return None
        key = (seconds, columns)
        cap = self.capacity
        if self.count > cap and (last_cell(self.times[self.count % cap], seconds / columns)
                                 >= last_cell(self.times[(self.count - 1) % cap], seconds / columns)
                                 - 2 * columns + 2):
            # the ring let samples go that the window, or a carry into it, may need (the 1 h window in an
            # hour's ring): resample what the ring holds each time, and keep no live cells
            self._live.pop(key, None)
            return None
        live = self._live.get(key)
        new = self.count - live.upto if live is not None else 0
        if (live is not None and live.generation == self._generation and live.names == names
                and self._ordered == self.count and 0 <= new <= min(64, cap)):
            if new and not live.fold(self.times, self._columns(names), range(live.upto, self.count)):
                live = None
            if live is not None:
                return live
        dt = seconds / columns
        times, series, end = self._stacked(names, carry_span(seconds, columns), None)
        out = resample_rows(times, series, end, seconds, columns, pinned=True)
        self._live.pop(key, None)
        while len(self._live) >= LIVE_KEYS:  # the oldest first (dicts keep their order)
            self._live.pop(next(iter(self._live)))
        live = self._live[key] = LiveCells.start(names, dt, columns, self._generation, self.count, times, series,
                                                 end, out, next(_VERSIONS))
        return live

    def _window_rows(self, seconds: float, now: float | None
                     ) -> tuple[array[float], Callable[[array[float]], array[float]]]:
        """The times of the last ``seconds`` (``t >= last - seconds``, oldest first) and a function that
        takes the same slots, in the same order, from any of the ring's arrays."""
        cap, count = self.capacity, self.count
        n = min(count, cap)
        if n == 0:
            return array("d"), lambda a: array(a.typecode)
        end = count % cap
        times = self.times
        last = times[(count - 1) % cap] if now is None else now
        th = last - seconds
        if self._ordered != count:  # times out of order somewhere: gather the ring, keep by time
            idx = [i % cap for i in range(end - n, end)]
            last = times[idx[-1]] if now is None else now
            keep = [i for i in idx if times[i] >= last - seconds]
            return array("d", [times[i] for i in keep]), lambda a: array(a.typecode, [a[i] for i in keep])
        # in order: the kept samples are the newest ones, found by binary search (no gathering the ring)
        if count <= cap or end == 0:  # one run, oldest first: [0, count) or the full ring from 0
            lo = bisect_left(times, th, 0, n)
            return times[lo:n], lambda a: a[lo:n]
        if times[0] >= th:  # the ring wrapped: [end, cap) holds the older samples, [0, end) the newer
            lo = bisect_left(times, th, end, cap)
            return times[lo:] + times[:end], lambda a: a[lo:] + a[:end]
        lo = bisect_left(times, th, 0, end)
        return times[lo:end], lambda a: a[lo:end]


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
    out: Rows
    last: list[int | None]  # per row: the pinned cell of its newest sample (None: none yet)
    sums: list[float]  # per row: that cell's sum and count of samples
    counts: list[int]
    version: int = 0
    change: tuple[int, int, int] | None = field(default=None)

    @classmethod
    def start(cls, names: list[str], dt: float, columns: int, generation: int, upto: int, times: Sequence[float],
              series: Sequence[Sequence[float]], end: float, out: Rows, version: int) -> LiveCells:
        """From a full resample (``out``) of the window (``times``, ``series``: one per row, reaching a window
        further back) ending at ``end``."""
        rows = len(out)
        last: list[int | None] = [None] * rows
        sums, counts = [0.0] * rows, [0] * rows
        cells = [math.ceil(t / dt) - 1 for t in times]
        at_cell: dict[int, list[int]] = {}  # the samples in a cell, in order
        for r, vals in enumerate(series):
            j = len(vals) - 1
            while j >= 0 and vals[j] != vals[j]:
                j -= 1
            if j < 0:
                continue
            cell = cells[j]
            last[r] = cell
            idx = at_cell.get(cell)
            if idx is None:
                idx = at_cell[cell] = [i for i, c in enumerate(cells) if c == cell]
            s, c = 0.0, 0
            for i in idx:  # in order, as resample_rows adds them
                v = vals[i]
                if v == v:
                    s += v
                    c += 1
            sums[r], counts[r] = s, c
        return cls(names, dt, columns, generation, upto, last_cell(end, dt), out, last, sums, counts, version)

    def fold(self, times: Sequence[float], arrays: list[array[float]], indices: range) -> bool:
        """Fold the samples at ring slots ``indices`` (modulo the ring's length; in time order) of ``times`` and
        of ``arrays`` (the ring's arrays of the rows: metric × GPU) into the cells, and record the change
        (:meth:`History.cells_change`). False, with nothing changed, when the first sample lies before the
        last column (the caller resamples instead)."""
        cap = len(times)
        if len(indices) and last_cell(times[indices.start % cap], self.dt) < self.cell:
            return False
        before, first_cell = self.cell, self.cell + 1  # first_cell: the earliest pinned cell written
        for i in indices:
            k = i % cap
            cell = last_cell(times[k], self.dt)
            if cell > self.cell:
                self._shift(cell - self.cell)
                self.cell = cell
            for r, a in enumerate(arrays):
                v = a[k]
                if v == v:
                    first_cell = min(first_cell, self._add(r, v))
        shift, columns = self.cell - before, self.columns
        # the columns the shift brought in are new (blank, or written above), and those written before them
        first = max(0, min(columns - shift, first_cell - (self.cell - columns + 1)))
        self.change = (self.version, shift, first) if shift < columns else (self.version, 0, 0)
        self.version = next(_VERSIONS)
        self.upto = indices.stop
        return True

    def _shift(self, n: int) -> None:
        """Move every row left by ``n`` cells; the cells that come in are blank."""
        n = min(n, self.columns)
        blank = [NAN] * n
        for row in self.out:
            del row[:n]
            row += blank

    def _add(self, r: int, v: float) -> int:
        """Add the value ``v`` of row ``r`` in the last cell; returns the earliest pinned cell it wrote. The
        row's first sample in that cell carries its sample before over the gap between (when the gap is
        shorter than the window), as resampling does."""
        row, end, cell = self.out[r], self.columns - 1, self.cell
        prev = self.last[r]
        touched = cell
        if prev == cell:
            self.sums[r] += v
            self.counts[r] += 1
        else:
            if prev is not None and 1 < cell - prev < self.columns:
                lo = max(0, end - (cell - prev) + 1)
                row[lo:end] = [self.sums[r] / self.counts[r]] * (end - lo)
                touched = cell - end + lo
            self.last[r] = cell
            self.sums[r], self.counts[r] = 0.0 + v, 1
        row[end] = self.sums[r] / self.counts[r]
        return touched


def resample(times: Sequence[float], values: Sequence[float], t_end: float, seconds: float, columns: int,
             pinned: bool = False) -> list[float | None]:
    """Bucket the window (t_end - seconds, t_end] into ``columns`` cells (the mean of each; None where no
    sample fell); a sample at ``t_end`` lies in the last cell. Cells narrower than the sampling interval get
    no sample: a cell between two samples carries the one before.

    ``pinned``: the cells are fixed stretches of the clock (:func:`last_cell`), the last one the stretch
    holding ``t_end``; a cell carries the sample before when the gap between the two is shorter than the
    window, even when that sample lies before the window (``times`` should reach a window further back), so
    the graph's first cells do not blink as samples leave the window.

    The plain, sample-by-sample form: the reference that :func:`resample_rows` and the live cells are
    tested against, and what draws one graph from a window."""
    if columns <= 0:
        return []
    out: list[float | None] = [None] * columns
    back = columns - 1 if pinned else 0  # cells before the window a carry may come from
    sums: dict[int, float] = {}
    counts: dict[int, int] = {}
    for t, v in zip(times, values):
        c = cell_of(t, t_end, seconds, columns, pinned)
        if -back <= c < columns and v == v:
            sums[c] = sums.get(c, 0.0) + v
            counts[c] = counts.get(c, 0) + 1
    sampled = sorted(sums)  # cells with a sample, in order
    k = 0  # sampled[k] is the first sampled cell after the one before ``c``
    prev = None  # the last sampled cell before ``c``
    for c in range(columns):
        while k < len(sampled) and sampled[k] < c:
            prev = sampled[k]
            k += 1
        if k < len(sampled) and sampled[k] == c:
            out[c] = sums[c] / counts[c]
            continue
        nxt = sampled[k] if k < len(sampled) else None  # the first sampled cell after ``c``
        if prev is not None and nxt is not None and (not pinned or nxt - prev < columns):
            out[c] = sums[prev] / counts[prev]
    return out


def cell_of(t: float, t_end: float, seconds: float, columns: int, pinned: bool) -> int:
    """The column of time ``t`` in a window of ``columns`` cells ending at ``t_end``; 0 to ``columns - 1``
    inside it. Cells cover (t_end - seconds, t_end], or with ``pinned`` the fixed stretches (b·dt, (b+1)·dt]
    up to the one holding ``t_end``: either way a sample at ``t_end`` lies in the last cell."""
    if pinned:
        dt = seconds / columns
        return math.ceil(t / dt) - 1 - (last_cell(t_end, dt) - columns + 1)
    return math.ceil((t - (t_end - seconds)) / seconds * columns) - 1


def cell_runs(times: Sequence[float], t_end: float, seconds: float, columns: int, pinned: bool
              ) -> list[tuple[int, int, int]]:
    """The samples of ``times`` that fall in the window's cells (with ``pinned``, also the ``columns - 1``
    cells before it, where a carry may come from), as runs of consecutive samples in one cell:
    (cell + the cells before, first sample, sample after the last). Samples in time order make one run
    per cell; out of order, a cell may have several."""
    back = columns - 1 if pinned else 0
    span = columns + back
    if pinned:
        dt = seconds / columns
        base = last_cell(t_end, dt) - columns + 1 - back
        cells = [math.ceil(t / dt) - 1 - base for t in times]
    else:
        start = t_end - seconds
        cells = [math.ceil((t - start) / seconds * columns) - 1 for t in times]
    runs = []
    i, n = 0, len(cells)
    while i < n:
        c = cells[i]
        j = i + 1
        while j < n and cells[j] == c:
            j += 1
        if 0 <= c < span:
            runs.append((c, i, j))
        i = j
    return runs


def resample_rows(times: Sequence[float], series: Sequence[Sequence[float]], t_end: float, seconds: float,
                  columns: int, pinned: bool = False) -> Rows:
    """:func:`resample` of several series over the same ``times`` at once: one list of ``columns`` floats
    per series, NaN where :func:`resample` gives None (the same numbers: the mean of each cell, summed in
    sample order; a cell with no sample between two samples carrying the one before).

    The cells of the times are found once for all series (:func:`cell_runs`); each series is then folded
    run by run over slices."""
    columns = max(0, columns)
    out = [[NAN] * columns for _ in series]
    if columns == 0 or not len(times) or not series:
        return out
    runs = cell_runs(times, t_end, seconds, columns, pinned)
    if not runs:
        return out
    back = columns - 1 if pinned else 0
    span = columns + back
    gap = columns if pinned else span + 1  # a carry spans a gap shorter than this
    if _one_sample_a_cell(runs):
        # the usual case: samples in time order, at most one a cell (cells no wider than the sampling
        # interval): each known sample is its cell's mean, carried over the gap to the next one
        cells = [c for c, _i, _j in runs]
        i0, i1 = runs[0][1], runs[-1][2]
        for r, vals in enumerate(series):
            row = _carried_samples(cells, vals[i0:i1], span, gap)
            if row is not None:
                out[r] = row[back:]
        return out
    for r, vals in enumerate(series):
        sums, counts = _cell_sums(runs, vals)
        if sums:
            out[r] = _carried_means(sums, counts, span, gap)[back:]
    return out


def _one_sample_a_cell(runs: list[tuple[int, int, int]]) -> bool:
    """Whether the runs of :func:`cell_runs` are one sample each, in cells that only go forward."""
    return runs[-1][2] - runs[0][1] == len(runs) and all(a[0] < b[0] for a, b in zip(runs, runs[1:]))


def _carried_samples(cells: list[int], vals: Sequence[float], span: int, gap: int) -> list[float] | None:
    """One series' row of ``span`` cells where sample k is cell ``cells[k]``'s only one: each known sample is its
    cell's value, carried over a gap shorter than ``gap`` to the next; None when no sample is known."""
    row = [NAN] * span
    prev, mean = -1, NAN
    for c, v in zip(cells, vals):
        if v == v:
            if prev >= 0 and 1 < c - prev < gap:
                row[prev + 1:c] = [mean] * (c - prev - 1)
            mean = row[c] = 0.0 + v  # (0 + v) / 1, as the sums of _cell_sums
            prev = c
    return row if prev >= 0 else None


def _cell_sums(runs: list[tuple[int, int, int]], vals: Sequence[float]) -> tuple[dict[int, float], dict[int, int]]:
    """({cell: sum}, {cell: count}) of the known (not NaN) values of one series, summed in sample order."""
    sums: dict[int, float] = {}
    counts: dict[int, int] = {}
    for c, i, j in runs:
        if j - i > 1:
            _add_run(sums, counts, c, vals[i:j], j - i)
            continue
        v = vals[i]  # one sample (a cell as wide as the sampling interval or wider)
        if v != v:
            continue
        if c in sums:
            sums[c] += v
            counts[c] += 1
        else:
            sums[c], counts[c] = 0.0 + v, 1
    return sums, counts


def _add_run(sums: dict[int, float], counts: dict[int, int], c: int, chunk: Sequence[float], n: int) -> None:
    """Add the ``n`` samples ``chunk`` of cell ``c`` to its sum and count (the known ones only)."""
    s0 = sums.get(c, 0.0)
    s = reduce(add, chunk, s0)  # in sample order, as adding one by one (sum() may compensate)
    if s == s:
        sums[c], counts[c] = s, counts.get(c, 0) + n
        return
    s, k = s0, counts.get(c, 0)  # a NaN (a gap) among them: the known ones only
    for v in chunk:
        if v == v:
            s += v
            k += 1
    if k:
        sums[c], counts[c] = s, k


def _carried_means(sums: dict[int, float], counts: dict[int, int], span: int, gap: int) -> list[float]:
    """A row of ``span`` cells: each sampled cell its mean, carried over a gap shorter than ``gap`` to the next."""
    row = [NAN] * span
    prev = -1
    for c in sorted(sums):
        m = sums[c] / counts[c]
        if prev >= 0 and 1 < c - prev < gap:  # carry the cell before over the gap
            row[prev + 1:c] = [row[prev]] * (c - prev - 1)
        row[c] = m
        prev = c
    return row
