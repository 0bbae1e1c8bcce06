"""Bounded per-metric history in numpy ring buffers (for graphs, windows and statistics)."""

from __future__ import annotations

import numpy as np

from gpuscope.core.model import Frame

# metric name → GpuReading attribute
GPU_METRICS: dict[str, str] = {
    "util": "util_gpu_pct",
    "mem_util": "util_mem_pct",
    "sm_clock": "sm_clock_mhz",
    "mem_clock": "mem_clock_mhz",
    "power": "power_w",
    "temp": "temp_gpu_c",
    "mem_used": "mem_used_bytes",
    "pcie_tx": "pcie_tx_bytes_per_s",
    "pcie_rx": "pcie_rx_bytes_per_s",
    "nvlink_tx": "nvlink_tx_bytes_per_s",
    "nvlink_rx": "nvlink_rx_bytes_per_s",
    "sm_active": "sm_active_pct",
    "tensor": "tensor_active_pct",
    "dram_bw": "dram_bw_util_pct",
}
ENDPOINT_METRICS = {"tok_s": "gen_tokens_per_s"}


class History:
    """Fixed-capacity ring of samples: ``times`` and one (capacity × GPUs) float32 array per metric.

    Missing readings are NaN. Memory is capacity × (8 + 4 × GPUs × metrics) bytes, allocated once.
    """

    def __init__(self, n_gpus: int, capacity: int):
        self.n_gpus = n_gpus
        self.capacity = max(2, capacity)
        self.times = np.full(self.capacity, np.nan, dtype=np.float64)
        self.data = {m: np.full((self.capacity, n_gpus), np.nan, dtype=np.float32) for m in GPU_METRICS}
        self.tok_s = np.full(self.capacity, np.nan, dtype=np.float32)
        self.count = 0  # total samples ever added
        self._rows = np.arange(n_gpus)

    def clear(self) -> None:
        self.times[:] = np.nan
        for a in self.data.values():
            a[:] = np.nan
        self.tok_s[:] = np.nan
        self.count = 0

    def add(self, frame: Frame) -> None:
        k = self.count % self.capacity
        self.times[k] = frame.t
        for m, attr in GPU_METRICS.items():
            row = self.data[m][k]
            row[:] = np.nan
            for r in frame.gpus:
                if r.index < self.n_gpus and not r.lost:
                    v = getattr(r, attr)
                    if v is not None:
                        row[r.index] = v
        tok = [e.gen_tokens_per_s for e in frame.endpoints if e.gen_tokens_per_s is not None]
        self.tok_s[k] = sum(tok) if tok else np.nan
        self.count += 1

    def window(self, metric: str, gpu: int | None, seconds: float, now: float | None = None
               ) -> tuple[np.ndarray, np.ndarray]:
        """(times, values) of the last ``seconds``, oldest first. ``gpu`` None for endpoint tok/s."""
        n = min(self.count, self.capacity)
        if n == 0:
            return np.empty(0), np.empty(0, dtype=np.float32)
        end = self.count % self.capacity
        idx = (np.arange(end - n, end)) % self.capacity
        t = self.times[idx]
        v = self.tok_s[idx] if gpu is None else self.data[metric][idx, gpu]
        last = t[-1] if now is None else now
        keep = t >= last - seconds
        return t[keep], v[keep]

    def latest_time(self) -> float | None:
        if self.count == 0:
            return None
        return float(self.times[(self.count - 1) % self.capacity])


def resample(times: np.ndarray, values: np.ndarray, t_end: float, seconds: float, columns: int) -> list[float | None]:
    """Bucket a window into ``columns`` cells (the mean of each; None where no sample fell)."""
    if columns <= 0:
        return []
    out: list[float | None] = [None] * columns
    if len(times) == 0:
        return out
    t0 = t_end - seconds
    cell = np.floor((times - t0) / seconds * columns).astype(np.int64)
    ok = (cell >= 0) & (cell < columns) & ~np.isnan(values)
    if not ok.any():
        return out
    cells = cell[ok]
    vals = values[ok].astype(np.float64)
    sums = np.bincount(cells, weights=vals, minlength=columns)
    counts = np.bincount(cells, minlength=columns)
    filled = np.nonzero(counts)[0]
    for c in filled:
        out[int(c)] = float(sums[c] / counts[c])
    # cells narrower than the sampling interval get no sample: carry the last value across such gaps
    last = None
    for c in range(int(filled[0]), int(filled[-1]) + 1):
        if out[c] is None:
            out[c] = last
        last = out[c]
    return out
