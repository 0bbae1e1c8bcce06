"""widgets/style.py spark_window: the panels' fast sparkline draws exactly what
sparkline(resample(...)) draws (the reference), for windows with gaps, NaNs, zeros and any scale."""

from __future__ import annotations

import numpy as np
from conftest import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscope.core.history import resample, resample_rows
from gpuscope.widgets.style import spark_cells, spark_rows, spark_window, sparkline

values = st.one_of(st.none(), st.floats(min_value=0, max_value=1e12, allow_nan=False))


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.tuples(st.floats(min_value=0, max_value=120, allow_nan=False), values), max_size=80),
       st.integers(min_value=0, max_value=90), st.sampled_from([None, 0.0, 100.0, 63e9]),
       st.floats(min_value=1, max_value=120), st.floats(min_value=0, max_value=130))
def test_same_as_the_reference(samples, columns, top, seconds, t_end):
    samples.sort(key=lambda s: s[0])
    times = np.array([t for t, _ in samples], dtype=np.float64)
    vals = np.array([np.nan if v is None else v for _, v in samples], dtype=np.float32)
    want = sparkline(resample(times, vals, t_end, seconds, columns), top)
    assert spark_window(times, vals, t_end, seconds, columns, top) == want


def test_idle_link_and_empty_window():
    t = np.arange(100.0)
    v = np.full(100, 4e5, dtype=np.float32)
    assert spark_window(t, v, 99.0, 60.0, 20, 63e9) == "▁" * 20
    assert spark_window(np.empty(0), np.empty(0, dtype=np.float32), 10.0, 60.0, 5) == " " * 5


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.lists(st.one_of(st.none(), st.floats(min_value=-1, max_value=1e12, allow_nan=False),
                                   st.just(float("inf"))), min_size=6, max_size=6), min_size=1, max_size=5),
       st.lists(st.sampled_from([None, 0.0, 100.0, 63e9, float("inf")]), min_size=5, max_size=5))
def test_spark_rows_is_spark_cells_of_each_row(rows, maxima):
    """The panels' batched sparklines (one pass for all of a GPU's graphs) draw what each row alone draws;
    rows hold what resample_rows gives: blanks only before the first and after the last value."""
    block = np.array([[np.nan if v is None else v for v in row] for row in rows], dtype=np.float64)
    for k in range(len(block)):  # no blank between two values
        known = np.nonzero(~np.isnan(block[k]))[0]
        if len(known):
            block[k, known[0]:known[-1] + 1] = np.nan_to_num(block[k, known[0]:known[-1] + 1], nan=1.0)
    tops = maxima[:len(block)]
    assert spark_rows(block, tops) == [spark_cells(block[k], tops[k]) for k in range(len(block))]


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.tuples(st.floats(min_value=0, max_value=120, allow_nan=False), values, values, values),
                max_size=60),
       st.integers(min_value=0, max_value=90), st.floats(min_value=1, max_value=120),
       st.floats(min_value=0, max_value=130))
def test_resample_rows_is_resample_of_each_series(samples, columns, seconds, t_end):
    samples.sort(key=lambda s: s[0])
    times = np.array([s[0] for s in samples], dtype=np.float64)
    vals = np.array([[np.nan if v is None else v for v in s[1:]] for s in samples],
                    dtype=np.float32).reshape(len(samples), 3)
    got = resample_rows(times, vals, t_end, seconds, columns)
    for k in range(3):
        want = resample(times, vals[:, k], t_end, seconds, columns)
        assert [None if np.isnan(x) else x for x in got[k].tolist()] == want


@settings(max_examples=examples(100), deadline=None)
@given(st.lists(st.floats(min_value=0, max_value=1e4, allow_nan=False), min_size=1, max_size=40),
       st.integers(min_value=2, max_value=30), st.integers(min_value=1, max_value=40),
       st.sampled_from([5.0, 60.0, 600.0]))
def test_history_cells_is_each_gpus_window_resampled(steps, capacity, columns, seconds):
    """History.cells (every GPU and graphed metric in one pass, once per sample) gives each GPU what its
    own window, resampled, gives: in order, after the ring wrapped, and with a time that went back."""
    from gpuscope.core.history import History
    from gpuscope.core.model import Frame, GpuReading

    h = History(2, capacity)
    t = 1000.0
    for k, step in enumerate(steps):
        t = t + step if k % 7 != 6 else t - 3.0  # now and then a clock that steps back
        gpus = (GpuReading(index=0, util_gpu_pct=float(k % 100), pcie_rx_bytes_per_s=step * 1e6),
                GpuReading(index=1, util_gpu_pct=None if k % 3 == 0 else 50.0, pcie_rx_bytes_per_s=k * 1e3))
        h.add(Frame(t=t, gpus=gpus))
        for metric in ("pcie_rx", "util"):
            got = h.cells(metric, seconds, columns)
            for g in (0, 1):
                times, vals = h.window(metric, g, seconds)
                end = float(times[-1]) if len(times) else 0.0
                want = resample(times, vals, end, seconds, columns)
                assert [None if np.isnan(x) else x for x in got[g].tolist()] == want
