"""widgets/style.py graph_rows: built column by column (each distinct value once), the same rows as the
cell-by-cell reference, for gaps, NaNs, any scale and height."""

from __future__ import annotations

import math

from helpers import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscope.widgets.style import BAR_FULL, SPARK, graph_rows


def reference(values: list[float | None], height: int, maximum: float | None = None) -> list[str]:
    """graph_rows as first written: every cell computed on its own."""
    known = [v for v in values if v is not None and not math.isnan(v)]
    top = maximum if maximum else (max(known) if known else 1.0)
    top = top or 1.0
    rows = []
    for r in range(height - 1, -1, -1):
        line = []
        for v in values:
            if v is None or math.isnan(v):
                line.append(" ")
                continue
            level = max(0.5, max(0.0, min(1.0, v / top)) * height * 8) - r * 8  # known: at least ▁ at the bottom
            line.append(" " if level <= 0 else (BAR_FULL if level >= 8 else SPARK[max(0, int(level) - 1)]))
        rows.append("".join(line))
    return rows


values = st.lists(st.one_of(st.none(), st.just(math.nan), st.sampled_from([0.0, 50.0, 100.0, math.inf]),
                            st.floats(min_value=-10, max_value=1e6, allow_nan=False)), max_size=60)


@settings(max_examples=examples(300), deadline=None)
@given(values, st.integers(min_value=0, max_value=8), st.sampled_from([None, 0.0, 100.0, 63e9, math.inf]))
def test_same_as_the_reference(vals: list[float | None], height: int, top: float | None) -> None:
    assert graph_rows(vals, height, top) == reference(vals, height, top)


def test_a_known_zero_is_not_a_gap() -> None:
    assert graph_rows([0.0, None, 0.0], 2, 100.0) == ["   ", "▁ ▁"]


def test_a_steady_load() -> None:
    assert graph_rows([100.0] * 4 + [None], 2, 100.0) == [BAR_FULL * 4 + " ", BAR_FULL * 4 + " "]
