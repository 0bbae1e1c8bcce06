"""Bounded per-metric history in numpy ring buffers (for graphs, windows and statistics)."""

from __future__ import annotations

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
        n = min(self.count, self.capacity)
        if n == 0:
            return np.empty(0), np.empty(0, dtype=np.float32)
        if self._ordered == self.count:
            return self._window_ordered(metric, gpu, seconds, now)
        end = self.count % self.capacity
        idx = (np.arange(end - n, end)) % self.capacity
        t = self.times[idx]
        if gpu is None:
            v = self.endpoint_data[metric][idx]
        else:
            v = self.data[metric][idx, gpu]
        last = t[-1] if now is None else now
        keep = t >= last - seconds
        return t[keep], v[keep]

    def _window_ordered(self, metric: str, gpu: int | None, seconds: float, now: float | None
                        ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`window` when the times are in order: the kept samples (``t >= last - seconds``) are the
        newest ones, found by binary search; the same arrays, without gathering the whole ring."""
        cap, count = self.capacity, self.count
        end = count % cap
        data = self.endpoint_data[metric] if gpu is None else self.data[metric][:, gpu]
        last = self.times[(count - 1) % cap] if now is None else now
        th = last - seconds
        if count <= cap or end == 0:  # one run, oldest first: [0, count) or the full ring from 0
            n = min(count, cap)
            lo = int(np.searchsorted(self.times[:n], th, side="left"))
            return self.times[lo:n].copy(), data[lo:n].copy()
        newer = self.times[:end]  # the ring wrapped: [end, cap) holds the older samples, [0, end) the newer
        if newer[0] >= th:
            lo = end + int(np.searchsorted(self.times[end:], th, side="left"))
            return (np.concatenate((self.times[lo:], newer)), np.concatenate((data[lo:], data[:end])))
        lo = int(np.searchsorted(newer, th, side="left"))
        return self.times[lo:end].copy(), data[lo:end].copy()

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
