"""widgets/style.py spark_window: the panels' fast sparkline draws exactly what
sparkline(resample(...)) draws (the reference), for windows with gaps, NaNs, zeros and any scale."""

from __future__ import annotations

import math
from array import array

import numpy as np
import pytest
from helpers import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscope.core.history import resample, resample_rows
from gpuscope.widgets.style import (
    BAR_FULL,
    SPARK,
    graph_rows,
    spark_cells,
    spark_rows,
    spark_window,
    sparkline,
)

values = st.one_of(st.none(), st.floats(min_value=0, max_value=1e12, allow_nan=False))


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.tuples(st.floats(min_value=0, max_value=120, allow_nan=False), values), max_size=80),
       st.integers(min_value=0, max_value=90), st.sampled_from([None, 0.0, 100.0, 63e9]),
       st.floats(min_value=1, max_value=120), st.floats(min_value=0, max_value=130))
def test_same_as_the_reference(samples, columns, top, seconds, t_end):
    samples.sort(key=lambda s: s[0])
    times = array("d", [t for t, _ in samples])  # as History.window gives them
    vals = array("f", [math.nan if v is None else v for _, v in samples])
    want = sparkline(resample(times, vals, t_end, seconds, columns), top)
    assert spark_window(times, vals, t_end, seconds, columns, top) == want


def test_idle_link_and_empty_window():
    t = array("d", [float(k) for k in range(100)])
    v = array("f", [4e5] * 100)
    assert spark_window(t, v, 99.0, 60.0, 20, 63e9) == "▁" * 20
    assert spark_window(array("d"), array("f"), 10.0, 60.0, 5) == " " * 5


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
    rows_ = block.tolist()  # History.cells gives lists of floats
    assert spark_rows(rows_, tops) == [spark_cells(rows_[k], tops[k]) for k in range(len(rows_))]


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.tuples(st.floats(min_value=0, max_value=120, allow_nan=False), values, values, values),
                max_size=60),
       st.integers(min_value=0, max_value=90), st.floats(min_value=1, max_value=120),
       st.floats(min_value=0, max_value=130), st.booleans())
def test_resample_rows_is_resample_of_each_series(samples, columns, seconds, t_end, pinned):
    samples.sort(key=lambda s: s[0])
    times = array("d", [s[0] for s in samples])
    series = [array("f", [math.nan if s[k] is None else s[k] for s in samples]) for k in (1, 2, 3)]
    got = resample_rows(times, series, t_end, seconds, columns, pinned=pinned)
    assert len(got) == 3
    for k in range(3):
        want = resample(times, series[k], t_end, seconds, columns, pinned=pinned)
        assert [None if np.isnan(x) else x for x in got[k]] == want


@settings(max_examples=examples(100), deadline=None)
@given(st.lists(st.floats(min_value=0, max_value=1e4, allow_nan=False), min_size=1, max_size=40),
       st.integers(min_value=2, max_value=30), st.integers(min_value=1, max_value=40),
       st.sampled_from([5.0, 60.0, 600.0]))
def test_history_cells_is_each_gpus_window_resampled(steps, capacity, columns, seconds):
    """History.cells (every GPU and graphed metric in one pass, once per sample, folded in at the newest
    sample) gives each GPU what its own window, resampled in cells pinned to the clock, gives: in order,
    after the ring wrapped, and with a time that went back."""
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
                times, vals = h.window(metric, g, 2 * seconds + seconds / columns)
                end = float(times[-1]) if len(times) else 0.0
                want = resample(times, vals, end, seconds, columns, pinned=True)
                assert [None if np.isnan(x) else x for x in got[g]] == want


gaps = st.one_of(st.floats(min_value=0.0, max_value=3.0, allow_nan=False), st.sampled_from([0.0, 1.0, 0.5, 40.0]))
reading = st.one_of(st.none(), st.floats(min_value=0, max_value=1e12, allow_nan=False))


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.tuples(gaps, reading, reading, reading, st.booleans()), min_size=1, max_size=120),
       st.integers(min_value=1, max_value=70), st.sampled_from([5.0, 60.0, 7.3]),
       st.floats(min_value=1e3, max_value=2e9), st.integers(min_value=8, max_value=200))
def test_live_cells_fold_equals_resampling(samples, columns, seconds, t0, capacity):
    """The live cells folded in sample by sample (a redraw after some samples, not others) are exactly what
    resampling the whole window gives (a fresh History with the same samples), at every redraw; and
    cells_change says truly which columns changed: the columns before ``first`` are the last redraw's,
    moved left by ``shift``."""
    from gpuscope.core.history import History, carry_span
    from gpuscope.core.model import Frame, GpuReading

    h = History(2, capacity)
    t = t0
    shown: dict[str, list[list[float]]] = {}
    version = -1
    for k, (gap, a, b, c, redraw) in enumerate(samples):
        t += gap
        h.add(Frame(t=t, gpus=(GpuReading(index=0, util_gpu_pct=a, power_w=c), GpuReading(index=1, util_gpu_pct=b))))
        if not redraw and k != len(samples) - 1:
            continue
        got = {m: h.cells(m, seconds, columns) for m in ("util", "power")}
        newest = float(h.times[(h.count - 1) % h.capacity])
        for m in ("util", "power"):  # the reference: the plain-Python resample of each GPU's own window
            for g in (0, 1):
                times, vals = h.window(m, g, carry_span(seconds, columns))
                want = resample(times, vals, newest, seconds, columns, pinned=True)
                assert [None if np.isnan(x) else x for x in got[m][g]] == want, (m, g)
        new_version, change = h.cells_change(seconds, columns)
        if change is not None and change[0] == version:
            _, shift, first = change
            for m in ("util", "power"):
                assert np.array_equal(np.array(got[m])[:, :first], np.array(shown[m])[:, shift:shift + first],
                                      equal_nan=True)
        shown, version = got, new_version


def test_live_cells_versions_are_never_reused_across_histories():
    """A replay's seek makes a new History; a widget may hold sparklines drawn from the old one's cells: a
    version of the new one must never read as the old one's (spark_update would move the wrong strings)."""
    from gpuscope.core.history import History
    from gpuscope.core.model import Frame, GpuReading

    seen: set[int] = set()
    for _ in range(3):
        h = History(1, 100)
        for k in range(5):
            h.add(Frame(t=1000.0 + k, gpus=(GpuReading(index=0, util_gpu_pct=50.0),)))
            h.cells("util", 60.0, 20)
            version, _change = h.cells_change(60.0, 20)
            assert version not in seen
            seen.add(version)


def test_the_hour_window_in_an_hours_ring_resamples_and_keeps_no_live_cells():
    """When the ring cannot hold the window and the window before it (the 1 h window in an hour's ring),
    the cells are resampled from what the ring holds every time (no live cells, no fold, no carry from a
    sample the ring let go), and they equal the reference."""
    from gpuscope.core.history import History, carry_span
    from gpuscope.core.model import Frame, GpuReading

    h = History(1, 3616)
    for k in range(4000):
        h.add(Frame(t=1_800_000_000.0 + k, gpus=(GpuReading(index=0, util_gpu_pct=float(k % 100) if k % 7 else None),)))
    got = h.cells("util", 3600.0, 80)
    assert h.cells_change(3600.0, 80) == (-1, None) and not h._live
    times, vals = h.window("util", 0, carry_span(3600.0, 80))
    want = resample(times, vals, float(times[-1]), 3600.0, 80, pinned=True)
    assert [None if np.isnan(x) else x for x in got[0]] == want


finite_or_inf = st.one_of(st.floats(min_value=-1, max_value=1e12, allow_nan=False), st.just(float("inf")))


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.lists(finite_or_inf, min_size=12, max_size=12), min_size=1, max_size=4),
       st.integers(min_value=0, max_value=6), st.data(),
       st.lists(st.sampled_from([None, 0.0, 100.0, 63e9, float("inf"), 1e-3]), min_size=4, max_size=4))
def test_spark_update_draws_what_spark_rows_draws(rows, shift, data, maxima):
    """Sparklines updated from the ones drawn before (only the columns from ``first`` on redrawn, the rest
    moved left by ``shift``) are exactly what drawing the whole block gives; a scale that
    is not a positive finite number declines (the caller redraws it all). Blank columns (NaN, only before
    a row's first value and after its last, as resampling gives them): test_spark_update_of_a_live_window."""
    from gpuscope.widgets.style import spark_update

    before = np.array(rows, dtype=np.float64)
    columns = before.shape[1]
    first = data.draw(st.integers(min_value=0, max_value=columns - shift))
    fresh = np.array(data.draw(st.lists(finite_or_inf, min_size=before.size, max_size=before.size))).reshape(before.shape)
    after = fresh.copy()
    after[:, :first] = before[:, shift:shift + first]
    tops = maxima[:len(before)]
    got = spark_update(spark_rows(before.tolist(), tops), after.tolist(), tops, (shift, first))
    if all(t is not None and 0 < t < float("inf") for t in tops):
        assert got == spark_rows(after.tolist(), tops)
    else:
        assert got is None


def test_spark_update_of_a_live_window_is_spark_rows():
    """On the live path (History cells folded in sample by sample), the table's sparklines drawn column by
    column equal the whole block drawn each time, over 10 minutes of a 1 s sampler at several widths."""
    from gpuscope.core.history import History
    from gpuscope.core.model import Frame, GpuReading
    from gpuscope.widgets.style import spark_update

    rng = np.random.default_rng(7)
    for columns in (7, 52, 60, 90):
        h = History(2, 200)
        drawn, version, updated = None, -1, 0
        for k in range(600):
            t = 1_800_000_000.0 + k + rng.uniform(-0.05, 0.05)
            util = None if k % 97 == 5 else float(rng.uniform(0, 100))
            h.add(Frame(t=t, gpus=(GpuReading(index=0, util_gpu_pct=util), GpuReading(index=1, util_gpu_pct=50.0))))
            block = h.cells("util", 60.0, columns)
            new_version, change = h.cells_change(60.0, columns)
            want = spark_rows(block, [100.0, 100.0])
            if drawn is not None and change is not None and change[0] == version:
                got = spark_update(drawn, block, [100.0, 100.0], change[1:])
                assert got == want, (columns, k)
                updated += 1
            drawn, version = want, new_version
        assert updated > 590  # the update path is the one taken


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.one_of(finite_or_inf, st.just(float("nan"))), min_size=12, max_size=12),
       st.integers(min_value=0, max_value=6), st.integers(min_value=1, max_value=5), st.data(),
       st.sampled_from([None, 0.0, 100.0, 63e9, float("inf"), 1e-3]))
def test_block_update_draws_what_graph_rows_draws(row, shift, height, data, top):
    """Block graphs updated from the rows drawn before (old columns moved left by ``shift``, only the columns
    from ``first`` on drawn) are exactly what drawing the whole row gives, gaps (NaN) included; a scale that is
    not a positive finite number declines (the caller redraws it all)."""
    from gpuscope.widgets.style import block_update, graph_rows

    first = data.draw(st.integers(min_value=0, max_value=len(row) - shift))
    fresh = data.draw(st.lists(st.one_of(finite_or_inf, st.just(float("nan"))), min_size=len(row), max_size=len(row)))
    after = row[shift:shift + first] + fresh[first:]
    got = block_update(graph_rows(row, height, top), after, height, top, (shift, first))
    if top is not None and 0 < top < float("inf"):
        assert got == graph_rows(after, height, top)
    else:
        assert got is None


def test_live_block_of_a_live_window_is_graph_rows(monkeypatch):
    """On the live path, block graphs drawn column by column (live_block) equal the whole row drawn each time,
    over 10 minutes of a 1 s sampler at several widths and heights; a new scale redraws it all."""
    from gpuscope.core.history import History
    from gpuscope.core.model import Frame, GpuReading
    from gpuscope.widgets import style
    from gpuscope.widgets.style import graph_rows, live_block

    updates = []
    real = style.block_update
    monkeypatch.setattr(style, "block_update", lambda *a: updates.append(real(*a)) or updates[-1])
    rng = np.random.default_rng(11)
    for columns, height in ((7, 1), (52, 2), (84, 4)):
        h = History(1, 200)
        drawn = None
        updates.clear()
        for k in range(600):
            t = 1_800_000_000.0 + k + rng.uniform(-0.05, 0.05)
            power = None if k % 89 == 3 else float(rng.uniform(50, 700))
            h.add(Frame(t=t, gpus=(GpuReading(index=0, power_w=power),)))
            row = h.cells("power", 60.0, columns)[0]
            top = 700.0 if k < 400 else 650.0  # the power limit changed: everything is redrawn once
            drawn = live_block(h, 60.0, None, row, height, top, drawn)
            assert drawn[3] == graph_rows(row, height, top), (columns, height, k)
        assert sum(u is not None for u in updates) > 590  # the update path is the one taken


def test_tok_s_graph_shares_the_gpu_graphs_time_axis():
    """The inference panel's tok/s sparkline and the GPU panels' graphs (widgets at one time axis) put
    each sample in the same column: both use cells pinned to the clock (a graph measured back from the
    newest sample would be up to a cell off)."""
    from gpuscope.core.history import History, resample
    from gpuscope.core.model import EndpointReading, Frame, GpuReading

    h = History(1, 400)
    rng = np.random.default_rng(3)
    t = 1_800_000_000.0
    for k in range(200):
        t += float(rng.choice([0.5, 1.0, 1.0, 1.3, 2.0]))
        on = k % 9 != 4  # now and then neither has a value
        h.add(Frame(t=t, gpus=(GpuReading(index=0, util_gpu_pct=50.0 if on else None),),
                    endpoints=(EndpointReading(url="http://x", gen_tokens_per_s=900.0 if on else None),)))
        for cols in (13, 44, 60):
            gpu = h.cells("util", 60.0, cols, now=t)[0]
            times, vals = h.window("tok_s", None, 2 * 60.0 + 60.0 / cols, t)
            tok = np.array([np.nan if x is None else x for x in resample(times, vals, t, 60.0, cols, pinned=True)])
            assert np.array_equal(np.isnan(gpu), np.isnan(tok)), (k, cols)


# ------------------------------------------------------------------ graph rows
# widgets/style.py graph_rows: built column by column (each distinct value once), the same rows as the
# cell-by-cell reference, for gaps, NaNs, any scale and height.


def graph_rows_reference(values: list[float | None], height: int, maximum: float | None = None) -> list[str]:
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


graph_values = st.lists(st.one_of(st.none(), st.just(math.nan), st.sampled_from([0.0, 50.0, 100.0, math.inf]),
                            st.floats(min_value=-10, max_value=1e6, allow_nan=False)), max_size=60)


@settings(max_examples=examples(300), deadline=None)
@given(graph_values, st.integers(min_value=0, max_value=8), st.sampled_from([None, 0.0, 100.0, 63e9, math.inf]))
def test_graph_rows_same_as_the_reference(vals: list[float | None], height: int, top: float | None) -> None:
    assert graph_rows(vals, height, top) == graph_rows_reference(vals, height, top)


def test_a_known_zero_is_not_a_gap() -> None:
    assert graph_rows([0.0, None, 0.0], 2, 100.0) == ["   ", "▁ ▁"]


def test_a_steady_load() -> None:
    assert graph_rows([100.0] * 4 + [None], 2, 100.0) == [BAR_FULL * 4 + " ", BAR_FULL * 4 + " "]


# ------------------------------------------------------------------ sparklines from cells, table cases
# spark_cells / spark_rows (lists of floats from History.cells, NaN = blank) against the plain sparkline.

_N = float("nan")
_I = float("inf")


@pytest.mark.parametrize("row, top", [
    ([_N, 1.0, 2.0, 3.0, _N], None),  # blanks only at the ends
    ([0.0, 50.0, 100.0, 150.0], 100.0),  # clipped at the scale
    ([-5.0, 0.0, 5.0], 10.0),  # below zero: the lowest bar
    ([_N, _N, _N], 100.0),  # nothing known: blank
    ([], None),
    ([0.0, 0.0], None),  # peak 0: the lowest bar
    ([1.0, _I, 2.0], 100.0),  # an infinite value: full height
    ([1.0, 2.0, 3.0], _I),  # an infinite scale: the lowest bar
    ([1e300, 1e308], 1e-3),  # huge over small: full height
    ([0.5 / 7, 1.5 / 7, 2.5 / 7, 3.5 / 7], 1.0),  # halves: rounded as round() does (to even)
])
def test_spark_cells_table(row: list[float], top: float | None) -> None:
    want = sparkline([None if v != v else v for v in row], top)
    assert spark_cells(row, top) == want
    assert spark_rows([row], [top]) == [want]


@pytest.mark.parametrize("label, style, graph, column", [
    ("util 100% over 1 min", "", "▁▂▃█", 36),
    ("scale 0–700 W", "bright_black", "████", 36),
    ("", "bright_black", "▅▅▅", 36),
    ("peak 678 W", "", "", 36),  # no graph yet
    ("a label longer than the column it should end at", "", "▁▁", 36),
    ("GPU 日本", "", "▁", 12),  # double-width characters: padded by cells
    ("bell\x07 in it", "bright_black", "▁\x1b▂", 20),  # control characters dropped, as Text does
    ("a\ttab", "", "▁", 12),  # kept by Text, and measured as it measures them
    ("esc\x1b", "", "▁", 12),
])
def test_label_and_graph_is_the_appended_text(label: str, style: str, graph: str, column: int) -> None:
    from rich.text import Text

    from gpuscope.widgets.style import label_and_graph

    want = Text(label, style=style)
    want.pad_right(column - want.cell_len)
    want.append(graph, style="green")
    got = label_and_graph(label, style, graph, column)
    assert (got.plain, got.spans, got.style) == (want.plain, want.spans, want.style)


async def test_the_compact_table_remembers_one_refresh_of_lines_not_every_line_it_drew() -> None:
    """widgets/gpu_table.py keeps its lines in a RunsMemo: over many refreshes with the graphs moving, it holds the
    lines of the last two refreshes only (not every sparkline ever drawn), and an unchanged line is the same Text."""
    from helpers import make_app, run_frames, sim_source

    from gpuscope.widgets.gpu_table import GpuTable

    app = make_app("h200-nvswitch-8", 0, 20, compact=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        table = app.query_one(GpuTable)
        src_frames = run_frames(sim_source("h200-nvswitch-8"), 21, 80)
        for f in src_frames:
            app.session.ingest(f)
            app.refresh_view(force=True)
        memo = table._texts
        shown = len(table._lines)
        assert 0 < len(memo._now) <= shown and len(memo._last) <= shown
        before = list(table._lines)
        app.refresh_view(force=True)  # nothing new: every line is the one drawn before
        assert all(a is b for a, b in zip(before, table._lines))
