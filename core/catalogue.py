"""The metric catalogue: every metric gpuscope keeps, summarises, exports or graphs, declared once.

One :class:`Metric` per reading says what it is called in frames (``name``: the
:class:`~gpuscope.core.model.GpuReading` / :class:`~gpuscope.core.model.EndpointReading` field, the
export column and the summary's stats key) and in history (``key``), how it reads (``label``,
``unit``, ``scale``, ``digits``), its fixed graph ceiling if any (``maximum``: 100 for a percentage;
None scales the graph to the data), and where it appears:

* ``history``: kept in :class:`~gpuscope.core.history.History` (graphs, windows);
* ``summary``: described (mean/p50/p95/max) by ``summary``/``compare``;
* ``export``: a column of ``export`` (CSV/Parquet), in catalogue order;
* ``detail``: graphed in the GPU detail view (needs ``history``).

Adding a metric is one entry here (a new field of a reading, or ``read`` to derive one); history,
summary, export and the detail view pick it up. Consumers call :func:`metrics`/:func:`export_columns`
at use time, so the catalogue is read once per use, never copied at import.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from operator import attrgetter
from typing import Any


@dataclass(frozen=True, slots=True)
class Metric:
    """One metric. ``scope`` is ``gpu`` (one value per GPU) or ``endpoint`` (summed over endpoints in
    history and export; one value per endpoint and model in the summary)."""

    name: str  # field of the reading = export column = summary stats key
    label: str  # words shown beside the value, unit included ("PCIe RX GB/s")
    key: str | None = None  # name in History (short); None: not kept in history
    unit: str = ""  # display unit after scaling ("%", "W", "MHz", "GB/s")
    scale: float = 1.0  # displayed value = raw / scale
    digits: int = 0  # decimals in summary/compare
    maximum: float | None = None  # fixed graph ceiling (displayed units); None: the data's max
    scope: str = "gpu"
    summary: bool = False
    export: bool = True
    detail: bool = False
    read: Callable[[Any], float | None] | None = None  # derive the value from a reading (default: the field)

    @property
    def history(self) -> bool:
        return self.key is not None

    def value(self, reading: Any) -> Any:
        """The raw value of this metric in ``reading`` (None when the reading lacks it)."""
        return self.read(reading) if self.read is not None else getattr(reading, self.name, None)

    def getter(self) -> Callable[[Any], Any]:
        """A fast reader of this metric for hot loops (the field's attrgetter, or ``read``)."""
        return self.read if self.read is not None else attrgetter(self.name)


# In export column order (the order of GpuReading's fields, endpoint metrics last); views keep this order.
METRICS: tuple[Metric, ...] = (
    Metric("util_gpu_pct", "utilization %", key="util", summary=True, detail=True, unit="%", maximum=100.0),
    Metric("util_mem_pct", "memory controller %", key="mem_util", unit="%", maximum=100.0),
    Metric("mem_used_bytes", "memory used GB", key="mem_used", unit="GB", scale=1e9, digits=1, detail=True),
    Metric("mem_total_bytes", "memory total GB", unit="GB", scale=1e9, digits=1),
    Metric("sm_clock_mhz", "SM clock MHz", key="sm_clock", unit="MHz", summary=True, detail=True),
    Metric("mem_clock_mhz", "memory clock MHz", key="mem_clock", unit="MHz"),
    Metric("graphics_clock_mhz", "graphics clock MHz", unit="MHz"),
    Metric("power_w", "power W", key="power", unit="W", summary=True, detail=True),
    Metric("power_limit_w", "power limit W", unit="W"),
    Metric("energy_j", "energy J", unit="J"),
    Metric("temp_gpu_c", "temperature °C", key="temp", unit="°C", detail=True),
    Metric("temp_mem_c", "memory temperature °C", unit="°C"),
    Metric("fan_pct", "fan %", unit="%", maximum=100.0),
    Metric("pstate", "P-state"),
    Metric("clock_event_reasons", "clock event reasons (NVML bits)"),
    Metric("pcie_gen", "PCIe generation"),
    Metric("pcie_width", "PCIe width"),
    Metric("pcie_tx_bytes_per_s", "PCIe TX GB/s", key="pcie_tx", digits=2, summary=True, detail=True,
           unit="GB/s", scale=1e9),
    Metric("pcie_rx_bytes_per_s", "PCIe RX GB/s", key="pcie_rx", digits=2, summary=True, detail=True,
           unit="GB/s", scale=1e9),
    Metric("pcie_replay_count", "PCIe replays"),
    Metric("pcie_recovery_count", "PCIe recoveries"),
    Metric("pcie_error_count", "PCIe errors"),
    Metric("nvlink_tx_bytes_per_s", "NVLink TX GB/s", key="nvlink_tx", digits=1, summary=True, detail=True,
           unit="GB/s", scale=1e9),
    Metric("nvlink_rx_bytes_per_s", "NVLink RX GB/s", key="nvlink_rx", digits=1, summary=True, detail=True,
           unit="GB/s", scale=1e9),
    Metric("sm_active_pct", "SM active %", key="sm_active", summary=True, detail=True, unit="%", maximum=100.0),
    Metric("sm_occupancy_pct", "SM occupancy %", unit="%", maximum=100.0),
    Metric("tensor_active_pct", "tensor active %", key="tensor", summary=True, detail=True, unit="%",
           maximum=100.0),
    Metric("dram_bw_util_pct", "DRAM bandwidth %", key="dram_bw", detail=True, unit="%", maximum=100.0),
    # endpoints
    Metric("gen_tokens_per_s", "gen tok/s", key="tok_s", unit="tok/s", digits=1, scope="endpoint", summary=True),
    Metric("prompt_tokens_per_s", "prompt tok/s", unit="tok/s", digits=1, scope="endpoint", summary=True,
           export=False),
    Metric("requests_running", "requests running", scope="endpoint", summary=True, export=False),
    Metric("kv_cache_pct", "KV cache %", scope="endpoint", summary=True, export=False, unit="%", maximum=100.0),
    Metric("ttft_p50_s", "TTFT p50 ms", unit="ms", scale=1e-3, scope="endpoint", summary=True, export=False),
    Metric("itl_p50_s", "ITL p50 ms", unit="ms", scale=1e-3, digits=1, scope="endpoint", summary=True,
           export=False),
)

EXPORT_LEAD = ("t", "gpu", "lost")  # the columns of every export row before the metrics


def metrics(scope: str = "gpu", *, history: bool | None = None, summary: bool | None = None,
            export: bool | None = None, detail: bool | None = None) -> list[Metric]:
    """The catalogue's metrics of ``scope`` (``gpu`` or ``endpoint``) whose flags match those given, in order."""
    want = {"history": history, "summary": summary, "export": export, "detail": detail}
    return [m for m in METRICS if m.scope == scope
            and all(v is None or getattr(m, k) == v for k, v in want.items())]


def by_key(key: str) -> Metric:
    """The metric kept in history as ``key``. Raises KeyError for an unknown key."""
    for m in METRICS:
        if m.key == key:
            return m
    raise KeyError(key)


def export_columns() -> list[str]:
    """The export's header: ``t, gpu, lost``, the GPU metrics, then the endpoint metrics (summed)."""
    return [*EXPORT_LEAD, *(m.name for m in metrics("gpu", export=True)),
            *(m.name for m in metrics("endpoint", export=True))]
