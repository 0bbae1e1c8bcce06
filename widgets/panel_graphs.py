"""The GPU panel's history graphs in its spare rows: which metrics, how tall, and the words beside them.

Pure functions (no widget): :class:`gpuscope.widgets.gpu_panel.GpuPanel` measures its spare rows and
calls these. A tall panel shows several metrics over time (utilisation, SM activity where the source
has it, power against its limit, SM clock against its max, memory against its size, temperature), each
a block graph scaled to its ceiling, never to its own peak (an idle GPU's noise stays flat), rather than
one utilisation graph thirty rows tall.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpuscope.core.model import DeviceInfo, GpuReading
from gpuscope.core.units import is_whole_unit

MIN_ROWS = 2  # a graph gets two rows (its value and its scale) before another metric gets any
CAP_ROWS = 8  # every metric is shown before a graph grows past this (64 levels: plenty for a panel)
GIB = 2**30


@dataclass(frozen=True)
class PanelMetric:
    """One metric a panel can graph: ``key`` in the history, its title, unit and display scale."""

    key: str
    title: str
    unit: str  # as shown after a number: "%", " W", " MHz", " GiB", "°C"
    scale: float = 1.0  # history value / scale = displayed value
    digits: int = 0


PANEL_METRICS = (
    PanelMetric("util", "util", "%"),
    PanelMetric("sm_active", "SM active", "%"),
    PanelMetric("power", "power", " W"),
    PanelMetric("sm_clock", "SM clock", " MHz"),
    PanelMetric("mem_used", "memory", " GiB", GIB, 1),
    PanelMetric("temp", "temp", "°C"),
)


def metric_top(key: str, dev: DeviceInfo, r: GpuReading | None, peak: float | None) -> float:
    """The full-height value of a panel graph, in displayed units: the metric's ceiling (100 %, the power
    limit, the SM clock max, the memory size), else the peak with a floor (temperature: 100 °C)."""
    if key in ("util", "sm_active"):
        return 100.0
    if key == "power":
        lim = (r.power_limit_w if r is not None else None) or dev.power_limit_w
        if lim:
            return float(lim)
    if key == "sm_clock" and dev.sm_clock_max_mhz:
        return float(dev.sm_clock_max_mhz)
    if key == "mem_used":
        total = (r.mem_total_bytes if r is not None else None) or dev.memory_total_bytes
        if total:
            return total / GIB
    floor = 100.0 if key == "temp" else 1.0
    return max(peak or 0.0, floor)


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


def fmt_value(value: float | None, m: PanelMetric) -> str:
    """A reading as the panel shows it (``349 W``, ``45.2 GiB``, ``–`` when unknown)."""
    if value is None or value != value:
        return "–"
    return f"{value:.{m.digits}f}{m.unit}"


def fmt_top(top: float, m: PanelMetric) -> str:
    """A ceiling: whole numbers without decimals (``300 W``, ``48 GiB``, ``141.1 GiB``); a clock always whole
    (``1980 MHz``, never ``1979.5 MHz`` from a window's peak)."""
    text = f"{top:.0f}" if is_whole_unit(m.unit) or abs(top - round(top)) < 0.05 else f"{top:.1f}"
    return text + m.unit


def graph_labels(m: PanelMetric, now: float | None, peak: float | None, top: float, height: int,
                 over: str = "") -> list[str]:
    """The words left of one graph, one per row (``height`` of them): the title and the current reading
    (with ``over``, e.g. ``over 1 min``, on the first graph), the scale ``0–300 W``, the window's peak.
    In one row: ``power 349/350 W``."""
    head = f"{m.title} {fmt_value(now, m)}" + (f" {over}" if over else "")
    if height <= 1:
        if m.unit.strip() == "%":
            return [head]
        return [f"{m.title} {fmt_value(now, m)} of {fmt_top(top, m)}" + (f" {over}" if over else "")]
    out = [head, f"scale 0–{fmt_top(top, m)}"]
    if height >= 3:
        out.append(f"peak {fmt_value(peak, m)}")
    return out + [""] * (height - len(out))


def shown_metrics(available: Sequence[str]) -> list[PanelMetric]:
    """The panel metrics whose history holds a value in the window, in priority order (``available``: the
    keys with data)."""
    keys = set(available)
    return [m for m in PANEL_METRICS if m.key in keys]


_READ = {"util": "util_gpu_pct", "sm_active": "sm_active_pct", "power": "power_w", "sm_clock": "sm_clock_mhz",
         "temp": "temp_gpu_c"}


def current(key: str, r: GpuReading) -> float | None:
    """The reading's value of a panel metric, in displayed units (memory in GiB)."""
    if key == "mem_used":
        return None if r.mem_used_bytes is None else r.mem_used_bytes / GIB
    value = getattr(r, _READ[key], None)
    return None if value is None else float(value)
