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


# ------------------------------------------------------------------ the pure folds (no numpy on the live path)
# core/history.py resample_rows folds each series run by run over slices (cell_runs); these tables pin it to
# the plain sample-by-sample reference (resample) on the cases that matter: runs of several samples in a
# cell, gaps (NaN) inside a run, a carry over a gap, gaps as long as the window (no carry when pinned), times
# out of order (a cell visited twice), samples outside the window, infinities.

NAN = float("nan")
INF = float("inf")

FOLDS = [
    # (times, values, t_end, seconds, columns, pinned)
    ([1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0], 4.0, 4.0, 4, False),
    ([0.25, 0.5, 0.75, 1.0, 1.5, 2.0], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], 2.0, 2.0, 2, False),  # runs of 4 and 2
    ([0.25, 0.5, 0.75, 1.0], [1.0, NAN, 3.0, NAN], 1.0, 1.0, 1, False),  # NaN inside a run: the known ones
    ([0.25, 0.5], [NAN, NAN], 1.0, 1.0, 2, False),  # only NaN: blank
    ([1.0, 5.0], [10.0, 20.0], 5.0, 5.0, 5, False),  # a carry over the gap
    ([1.0, 5.0], [10.0, 20.0], 5.0, 5.0, 5, True),  # pinned: gap of 4 cells < 5 columns, carried
    ([0.0, 10.0], [10.0, 20.0], 10.0, 5.0, 5, True),  # pinned: a gap as long as the window, no carry
    ([3.0, 1.0, 3.5, 2.0], [1.0, 2.0, 3.0, 4.0], 4.0, 4.0, 4, False),  # out of order: cell 2 twice
    ([3.0, 1.0, 3.5, 2.0], [1.0, 2.0, 3.0, 4.0], 4.0, 4.0, 4, True),
    ([-50.0, 100.0], [1.0, 2.0], 4.0, 4.0, 4, False),  # both outside the window
    ([1.0, 2.0, 2.5, 3.0], [INF, 1.0, -INF, 2.0], 3.0, 3.0, 3, False),  # inf - inf in a run: NaN as the reference
    ([1_800_000_000.0 + k * 0.3 for k in range(40)], [float(k % 7) for k in range(40)], 1_800_000_011.7, 6.0, 9,
     True),  # cells three samples wide, in a window before the last
    ([], [], 10.0, 10.0, 3, True),
]


def _same(a: list[float | None], b: list[float | None]) -> bool:
    """Equal, NaN equal to NaN."""
    return len(a) == len(b) and all(x == y or (x != x and y != y) for x, y in zip(a, b))


@pytest.mark.parametrize("times, values, t_end, seconds, columns, pinned", FOLDS)
def test_resample_rows_table(times, values, t_end, seconds, columns, pinned) -> None:
    from array import array

    from gpuscope.core.history import resample, resample_rows

    vals = array("f", values)  # float32, as stored
    got = resample_rows(array("d", times), [vals, vals[::-1] if len(vals) else vals], t_end, seconds, columns, pinned)
    for row, series in zip(got, [vals, vals[::-1]]):
        want = resample(times, series, t_end, seconds, columns, pinned=pinned)
        assert _same([None if x != x else x for x in row], want)


@pytest.mark.parametrize("times, values, t_end, seconds, columns, pinned", FOLDS)
def test_cell_runs_table(times, values, t_end, seconds, columns, pinned) -> None:
    """cell_runs: each sample in the window's cells (and, pinned, those a carry may come from) in exactly
    one run, runs of consecutive samples of one cell, as cell_of places them."""
    from gpuscope.core.history import cell_of, cell_runs

    back = columns - 1 if pinned else 0
    want = [(cell_of(t, t_end, seconds, columns, pinned) + back, i) for i, t in enumerate(times)]
    want = [(c, i) for c, i in want if 0 <= c < columns + back]
    got = [(c, i) for c, lo, hi in cell_runs(times, t_end, seconds, columns, pinned) for i in range(lo, hi)]
    assert got == want
    runs = cell_runs(times, t_end, seconds, columns, pinned)
    assert all(a[2] <= b[1] and (a[2] < b[1] or a[0] != b[0]) for a, b in zip(runs, runs[1:]))  # maximal runs


@pytest.mark.parametrize("values", [[1.0, 2.0], [3.4e38, 1e39, -1e39], [0.1, 1 / 3, 123456789.0]])
def test_rings_keep_float32(values: list[float]) -> None:
    """The rings round as numpy's float32 rings did (the graphs draw the same cells): out of range is
    infinite, the rest rounded to the nearest float32."""
    h = History(1, 8)
    for k, v in enumerate(values):
        h.add(Frame(t=float(k), gpus=(GpuReading(index=0, power_w=v),)))
    with np.errstate(over="ignore"):
        want = np.array(values, dtype=np.float64).astype(np.float32).tolist()
    assert list(h.window("power", 0, 100.0)[1]) == want
