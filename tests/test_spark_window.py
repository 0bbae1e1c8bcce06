"""widgets/style.py spark_window: the panels' fast sparkline draws exactly what
sparkline(resample(...)) draws (the reference), for windows with gaps, NaNs, zeros and any scale."""

from __future__ import annotations

import numpy as np
from conftest import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscope.core.history import resample
from gpuscope.widgets.style import spark_window, sparkline

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
