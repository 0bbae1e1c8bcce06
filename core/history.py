"""Bounded per-metric history in numpy ring buffers (for graphs, windows and statistics)."""

from __future__ import annotations

from collections.abc import Callable

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

    def window_all(self, metric: str, seconds: float, now: float | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(times, values) of the last ``seconds`` for every GPU at once: values is (samples × GPUs).
        Raises KeyError for a metric that is not a GPU metric kept in history."""
        return self._window(self.data[metric], seconds, now)

    def cells(self, metric: str, seconds: float, columns: int, now: float | None = None) -> np.ndarray:
        """Every GPU's last ``seconds`` of ``metric`` as ``columns`` cells (:func:`resample_rows`: GPUs ×
        columns, NaN where blank), ending at ``now`` (else the newest sample).

        Computed once per new sample for every GPU metric asked for so far at this window and width, in one
        pass: the panels of all GPUs draw the same few metrics over the same window every second, and
        numpy's cost is per call, not per value (one pass for 5 metrics × 8 GPUs costs about what one series
        did)."""
        if self._memo_count != self.count:
            self._memo.clear()
            self._memo_count = self.count
        key = (seconds, columns, now)
        got = self._memo.get(key)
        if got is None or metric not in got:
            if metric not in self.data:
                raise KeyError(metric)
            graphed = self._graphed.setdefault((seconds, columns), {})  # what is drawn at this width
            graphed.setdefault(metric, None)
            names = list(graphed)
            times, take = self._window_rows(seconds, now)
            end = now if now is not None else (float(times[-1]) if len(times) else 0.0)
            stacked = np.concatenate([take(self.data[m]) for m in names], axis=1)
            rows = resample_rows(times, stacked, end, seconds, columns)
            g = self.n_gpus
            got = self._memo[key] = {m: rows[i * g:(i + 1) * g] for i, m in enumerate(names)}
        return got[metric]

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

    def latest_time(self) -> float | None:
        if self.count == 0:
            return None
        return float(self.times[(self.count - 1) % self.capacity])


def resample(times: np.ndarray, values: np.ndarray, t_end: float, seconds: float, columns: int) -> list[float | None]:
    """Bucket the window (t_end - seconds, t_end] into ``columns`` cells (the mean of each; None where no
    sample fell); a sample at ``t_end`` lies in the last cell."""
    if columns <= 0:
        return []
    out: list[float | None] = [None] * columns
    if len(times) == 0:
        return out
    t0 = t_end - seconds
    # cells cover (t0, t_end]: the newest sample (at t_end) is drawn in the last cell, not dropped
    cell = (np.ceil((times - t0) / seconds * columns) - 1).astype(np.int64)
    ok = (cell >= 0) & (cell < columns) & ~np.isnan(values)
    if not ok.any():
        return out
    cells = cell[ok]
    vals = values[ok].astype(np.float64)
    sums = np.bincount(cells, weights=vals, minlength=columns)
    counts = np.bincount(cells, minlength=columns)
    filled = np.nonzero(counts)[0]
    for j in filled:
        out[int(j)] = float(sums[j] / counts[j])
    # cells narrower than the sampling interval get no sample: carry the last value across such gaps
    last = None
    for c in range(int(filled[0]), int(filled[-1]) + 1):
        if out[c] is None:
            out[c] = last
        last = out[c]
    return out


def resample_rows(times: np.ndarray, values: np.ndarray, t_end: float, seconds: float, columns: int) -> np.ndarray:
    """:func:`resample` of several series at once: ``values`` is (samples × series); the result is
    (series × columns) float64, NaN where :func:`resample` gives None (the same numbers: the mean of each
    cell, a cell with no sample between a series' first and last carrying the cell before)."""
    vals = np.asarray(values, dtype=np.float64)
    if vals.ndim == 1:
        vals = vals[:, None]
    rows = vals.shape[1]
    out = np.full((rows, max(0, columns)), np.nan)
    if columns <= 0 or len(times) == 0 or rows == 0:
        return out
    # cells cover (t_end - seconds, t_end], as resample's: the newest sample is in the last cell
    cell = np.ceil((np.asarray(times, dtype=np.float64) - (t_end - seconds)) / seconds * columns) - 1
    inside = (cell >= 0) & (cell < columns)
    if not inside.any():
        return out
    vals = vals[inside]
    ok = ~np.isnan(vals)
    flat = (np.arange(rows) * columns)[None, :] + cell[inside].astype(np.int64)[:, None]
    sums = np.bincount(flat[ok], weights=vals[ok], minlength=rows * columns).reshape(rows, columns)
    counts = np.bincount(flat[ok], minlength=rows * columns).reshape(rows, columns)
    has = counts > 0
    col = np.arange(columns)
    src = np.maximum.accumulate(np.where(has, col, -1), axis=1)  # the last cell with a sample, so far
    with np.errstate(invalid="ignore", divide="ignore"):
        means = sums / counts
    out = np.where(src >= 0, means[np.arange(rows)[:, None], np.maximum(src, 0)], np.nan)
    last = columns - 1 - np.argmax(has[:, ::-1], axis=1)  # after a series' last sample: blank
    out[col[None, :] > last[:, None]] = np.nan
    return out
