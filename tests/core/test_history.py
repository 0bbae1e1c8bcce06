"""core/history.py History.window: the binary-search path (times in order) returns exactly what scanning
the whole ring returns, before and after the ring wraps, with and without ``now``; out-of-order times
fall back to the scan."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscope.core.history import History
from gpuscope.core.model import Frame, GpuReading


def scan(h: History, metric: str, gpu: int | None, seconds: float, now: float | None) -> tuple[np.ndarray, np.ndarray]:
    """The window as the ring scan computes it (History.window before the binary search)."""
    n = min(h.count, h.capacity)
    if n == 0:
        return np.empty(0), np.empty(0, dtype=np.float32)
    idx = np.arange(h.count % h.capacity - n, h.count % h.capacity) % h.capacity
    t = np.asarray(h.times)[idx]  # the rings are stdlib arrays: numpy reads them through the buffer protocol
    v = np.asarray(h.endpoint_data[metric] if gpu is None else h.data[metric][gpu])[idx]
    last = t[-1] if now is None else now
    keep = t >= last - seconds
    return t[keep], v[keep]


def frame(t: float, k: int) -> Frame:
    return Frame(t=t, gpus=(GpuReading(index=0, power_w=float(k)), GpuReading(index=1, power_w=None if k % 3 else 2.0 * k)))


@settings(max_examples=examples(150), deadline=None)
@given(capacity=st.integers(2, 12), steps=st.lists(st.sampled_from([0.0, 0.5, 1.0, 1.0, 2.5]), max_size=40),
       seconds=st.sampled_from([0.0, 1.0, 3.0, 7.5, 100.0]), now_shift=st.sampled_from([None, -2.0, 0.0, 0.7, 50.0]))
def test_window_in_order_matches_scan(capacity: int, steps: list[float], seconds: float, now_shift: float | None) -> None:
    h = History(2, capacity)
    t = 1000.0
    for k, dt in enumerate(steps):
        t += dt
        h.add(frame(t, k))
    assert h._ordered == h.count  # the fast path is the one under test
    now = None if now_shift is None else t + now_shift
    for gpu in (0, 1):
        got, want = h.window("power", gpu, seconds, now), scan(h, "power", gpu, seconds, now)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
        assert np.asarray(got[0]).dtype == want[0].dtype and np.asarray(got[1]).dtype == want[1].dtype


@pytest.mark.parametrize("times", [[5.0, 3.0, 4.0, 6.0], [1.0, 2.0, float("nan"), 4.0], [3.0, 1.0]])
def test_window_out_of_order_uses_the_scan(times: list[float]) -> None:
    h = History(2, 3)
    for k, t in enumerate(times):
        h.add(frame(t, k))
    assert h._ordered != h.count
    for seconds in (0.5, 2.0, 10.0):
        got, want = h.window("power", 0, seconds), scan(h, "power", 0, seconds, None)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


def test_clear_restores_the_fast_path() -> None:
    h = History(2, 4)
    for k, t in enumerate([3.0, 1.0, 2.0]):
        h.add(frame(t, k))
    h.clear()
    for k in range(6):
        h.add(frame(float(k), k))
    assert h._ordered == h.count == 6
    np.testing.assert_array_equal(h.window("power", 0, 2.0)[1], np.array([3.0, 4.0, 5.0], dtype=np.float32))
