"""The GPU panel's history graphs in its spare rows: which metrics, how tall, and the words beside them.

Pure functions (no widget): :class:`gpuscope.widgets.gpu_panel.GpuPanel` measures its spare rows and
calls these. A tall panel shows several metrics over time (utilisation, SM activity where the source
has it, power against its limit, SM clock against its max, memory against its size, temperature), each
a block graph scaled to its ceiling, never to its own peak (an idle GPU's noise stays flat), rather than
one utilisation graph thirty rows tall.
"""

from __future__ import annotations

from gpuscope.core import catalogue
from gpuscope.core.catalogue import Metric
from gpuscope.core.model import DeviceInfo, GpuReading
from gpuscope.core.units import NONE, is_whole_unit

MIN_ROWS = 2  # a graph gets two rows (its value and its scale) before another metric gets any
CAP_ROWS = 8  # every metric is shown before a graph grows past this (64 levels: plenty for a panel)


def metric_top(key: str, dev: DeviceInfo, r: GpuReading | None, peak: float | None) -> float:
    """The full-height value of a panel graph, in displayed units: the catalogue's ceiling (100 %, the power
    limit, the SM clock max, the memory size), else the peak with the metric's floor (temperature: 100 °C)."""
    return catalogue.full_scale(catalogue.by_key(key), dev, r, peak)


def graph_heights(rows: int, n: int, lo: int = MIN_ROWS, metrics_rows: int | None = None) -> list[int]:
    """Heights of the graphs sharing ``rows`` panel rows, for up to ``n`` metrics in priority order.

    Metrics are added (``lo`` rows each) before any graph grows; then the rows are shared evenly, the
    remainder one row each to the first graphs. So no graph is taller than ``2 * lo - 1`` rows while a
    metric is left out, none taller than :data:`CAP_ROWS` while fewer than ``n * CAP_ROWS`` rows are
    spare, and beyond that they grow evenly (spare rows never stay blank). The heights add up to
    ``rows`` (empty for no rows or no metrics). ``metrics_rows`` (at most ``rows``): count the metrics
    as if only that many rows were spare (the shortest of several panels), so panels a row or two apart
    in height show the same metrics, the taller ones a little taller."""
    if rows <= 0 or n <= 0:
        return []
    k = max(1, min(n, min(rows, rows if metrics_rows is None else metrics_rows) // lo))
    base, extra = divmod(rows, k)
    return [base + (1 if i < extra else 0) for i in range(k)]


def fmt_value(value: float | None, m: Metric) -> str:
    """A reading as the panel shows it (``349 W``, ``45.2 GiB``, ``–`` when unknown)."""
    if value is None or value != value:
        return NONE
    return f"{value:.{m.digits}f}{catalogue.suffix(m)}"


def fmt_top(top: float, m: Metric) -> str:
    """A ceiling: whole numbers without decimals (``300 W``, ``48 GiB``, ``141.1 GiB``); a clock always whole
    (``1980 MHz``, never ``1979.5 MHz`` from a window's peak)."""
    text = f"{top:.0f}" if is_whole_unit(m.unit) or abs(top - round(top)) < 0.05 else f"{top:.1f}"
    return text + catalogue.suffix(m)


def graph_labels(m: Metric, now: float | None, peak: float | None, top: float, height: int,
                 over: str = "") -> list[str]:
    """The words left of one graph, one per row (``height`` of them): the title and the current reading
    (with ``over``, e.g. ``over 1 min``, on the first graph), the scale ``0–300 W``, the window's peak.
    In one row: ``power 349/350 W``."""
    head = f"{m.short} {fmt_value(now, m)}" + (f" {over}" if over else "")
    if height <= 1:
        if m.unit == "%":
            return [head]
        return [f"{m.short} {fmt_value(now, m)} of {fmt_top(top, m)}" + (f" {over}" if over else "")]
    out = [head, f"scale 0–{fmt_top(top, m)}"]
    if height >= 3:
        out.append(f"peak {fmt_value(peak, m)}")
    return out + [""] * (height - len(out))


def current(m: Metric, r: GpuReading) -> float | None:
    """The reading's value of a panel metric, in displayed units (memory in GiB)."""
    value = m.value(r)
    return None if value is None else float(value) / m.scale
