"""The metric catalogue: every metric gpuscope keeps, summarises, exports or graphs, declared once.

One :class:`Metric` per reading says what it is called in frames (``name``: the
:class:`~gpuscope.core.model.GpuReading` / :class:`~gpuscope.core.model.EndpointReading` field, the
export column and the summary's stats key) and in history (``key``), how it reads (``label``,
``unit``, ``scale``, ``digits``), its fixed graph ceiling if any (``maximum``: 100 for a percentage;
None scales the graph to the data), and where it appears:

* ``history``: kept in :class:`~gpuscope.core.history.History` (graphs, windows);
* ``summary``: described (mean/p50/p95/max) by ``summary``/``compare``;
* ``export``: a column of ``export`` (CSV/Parquet), in catalogue order;
* ``detail``: graphed in the GPU detail view (needs ``history``);
* ``dcgm`` / ``prom``: a family of the Prometheus exporter (:mod:`gpuscope.sources.prometheus`), as a
  :class:`Series`: ``dcgm`` with dcgm-exporter's name, type, unit and labels (``DCGM_FI_*``), ``prom`` with
  gpuscope's own (``gpuscope_*``, base units).

Adding a metric is one entry here (a new field of a reading, or ``read`` to derive one); history,
summary, export, the detail view and the Prometheus exporter pick it up. Consumers call :func:`metrics`/:func:`export_columns`
at use time, so the catalogue is read once per use, never copied at import.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from operator import attrgetter
from typing import Any


@dataclass(frozen=True, slots=True)
class Series:
    """How a metric is exported to Prometheus: one sample per GPU (or per endpoint and model) in family ``name``.

    Metrics whose series share a ``name`` form one family (their ``type`` and ``help`` must agree), told
    apart by constant ``labels`` (``stat="p50"``); a sample is absent, never 0, when the value is None.
    """

    name: str
    help: str  # HELP text (dcgm-exporter's words, unit included, for DCGM_FI_* families)
    type: str = "gauge"  # "gauge" or "counter"
    scale: float = 1.0  # exported value = raw / scale (1e-3: J → mJ, 2**20: bytes → MiB, 100: % → ratio 0-1)
    integer: bool = False  # round to a whole number (dcgm-exporter's MiB and mJ)
    gpm: bool = False  # a profiling field (DCGM_FI_PROF_*): only on GPUs with GPM
    labels: tuple[tuple[str, str], ...] = ()  # constant labels after the family's own

    def at(self, **labels: str) -> Series:
        """This family with constant labels added: ``TTFT.at(stat="p50")``."""
        return replace(self, labels=(*self.labels, *labels.items()))


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
    dcgm: Series | None = None  # DCGM-compatible Prometheus family (dcgm-exporter's labels); gpu scope only
    prom: Series | None = None  # gpuscope's own Prometheus family (label gpu, or endpoint/model/kind)

    @property
    def history(self) -> bool:
        return self.key is not None

    def value(self, reading: Any) -> Any:
        """The raw value of this metric in ``reading`` (None when the reading lacks it)."""
        return self.read(reading) if self.read is not None else getattr(reading, self.name, None)

    def getter(self) -> Callable[[Any], Any]:
        """A fast reader of this metric for hot loops (the field's attrgetter, or ``read``)."""
        return self.read if self.read is not None else attrgetter(self.name)


def _flag(v: bool | None) -> float | None:
    """A yes/no reading as Prometheus and CSV take it: 1.0 / 0.0, None when unknown."""
    return None if v is None else float(v)


def _last_xid(r: Any) -> float | None:
    """The code of the most recent critical Xid of a reading (dcgm-exporter's ``XID_ERRORS``), None when none."""
    xids = getattr(r, "xids", None)
    return float(max(xids, key=lambda x: x.last_t).xid) if xids else None


MIB = 2**20  # dcgm-exporter's framebuffer unit
GIB = 2**30  # memory sizes on screen: binary, like nvidia-smi's MiB (rates stay decimal GB/s)

# gpuscope's families shared by several metrics, told apart by a constant label
_TTFT = Series("gpuscope_endpoint_time_to_first_token_seconds", "Time to first token over the poll window "
               "(stat: mean, p50, p95 from the server's histogram).")
_ITL = Series("gpuscope_endpoint_inter_token_latency_seconds", "Inter-token latency over the poll window "
              "(stat: mean, p50, p95 from the server's histogram).")
_PCIE_RATE = "(GPM where the GPU has it, else NVML's PCIe throughput counter)."

# In export column order (the order of GpuReading's fields, endpoint metrics last); views keep this order.
# The DCGM help texts are dcgm-exporter's (etc/default-counters.csv, etc/dcp-metrics-included.csv), verbatim.
METRICS: tuple[Metric, ...] = (
    Metric("util_gpu_pct", "utilization %", key="util", summary=True, detail=True, unit="%", maximum=100.0,
           dcgm=Series("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).")),
    Metric("util_mem_pct", "memory controller %", key="mem_util", unit="%", maximum=100.0,
           dcgm=Series("DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).")),
    Metric("mem_used_bytes", "memory used GiB", key="mem_used", unit="GiB", scale=GIB, digits=1, detail=True,
           dcgm=Series("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", scale=MIB, integer=True),
           prom=Series("gpuscope_memory_used_bytes", "Framebuffer used.")),
    Metric("mem_total_bytes", "memory total GiB", unit="GiB", scale=GIB, digits=1,
           prom=Series("gpuscope_memory_total_bytes", "Framebuffer size.")),
    Metric("sm_clock_mhz", "SM clock MHz", key="sm_clock", unit="MHz", summary=True, detail=True,
           dcgm=Series("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).")),
    Metric("mem_clock_mhz", "memory clock MHz", key="mem_clock", unit="MHz",
           dcgm=Series("DCGM_FI_DEV_MEM_CLOCK", "Memory clock frequency (in MHz).")),
    Metric("graphics_clock_mhz", "graphics clock MHz", unit="MHz"),
    Metric("power_w", "power W", key="power", unit="W", summary=True, detail=True,
           dcgm=Series("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).")),
    Metric("power_limit_w", "power limit W", unit="W",
           prom=Series("gpuscope_power_limit_watts", "Enforced power limit.")),
    Metric("energy_j", "energy J", unit="J",
           dcgm=Series("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "Total energy consumption since boot (in mJ).",
                       type="counter", scale=1e-3, integer=True)),
    Metric("temp_gpu_c", "temperature °C", key="temp", unit="°C", detail=True,
           dcgm=Series("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).")),
    Metric("temp_mem_c", "memory temperature °C", unit="°C",
           dcgm=Series("DCGM_FI_DEV_MEMORY_TEMP", "Memory temperature (in C).")),
    Metric("fan_pct", "fan %", unit="%", maximum=100.0),
    Metric("pstate", "P-state"),
    Metric("clock_event_reasons", "clock event reasons (NVML bits)",
           dcgm=Series("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "Current clock throttle reasons (bitmask of "
                       "DCGM_CLOCKS_THROTTLE_REASON_*).")),
    Metric("pcie_gen", "PCIe generation",
           prom=Series("gpuscope_pcie_link_generation", "PCIe link generation now.")),
    Metric("pcie_width", "PCIe width",
           prom=Series("gpuscope_pcie_link_width_lanes", "PCIe link width now, in lanes.")),
    Metric("pcie_tx_bytes_per_s", "PCIe TX GB/s", key="pcie_tx", digits=2, summary=True, detail=True,
           unit="GB/s", scale=1e9,
           dcgm=Series("DCGM_FI_PROF_PCIE_TX_BYTES", "The rate of data transmitted over the PCIe bus - including "
                       "both protocol headers and data payloads - in bytes per second.", gpm=True),
           prom=Series("gpuscope_pcie_tx_bytes_per_second", "PCIe transmit rate " + _PCIE_RATE)),
    Metric("pcie_rx_bytes_per_s", "PCIe RX GB/s", key="pcie_rx", digits=2, summary=True, detail=True,
           unit="GB/s", scale=1e9,
           dcgm=Series("DCGM_FI_PROF_PCIE_RX_BYTES", "The rate of data received over the PCIe bus - including "
                       "both protocol headers and data payloads - in bytes per second.", gpm=True),
           prom=Series("gpuscope_pcie_rx_bytes_per_second", "PCIe receive rate " + _PCIE_RATE)),
    Metric("pcie_replay_count", "PCIe replays",
           dcgm=Series("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "Total number of PCIe retries.", type="counter"),
           prom=Series("gpuscope_pcie_replays_total", "PCIe replays since the driver loaded.", type="counter")),
    Metric("pcie_recovery_count", "PCIe recoveries",
           prom=Series("gpuscope_pcie_recoveries_total", "PCIe link recoveries since the driver loaded.",
                       type="counter")),
    Metric("pcie_error_count", "PCIe errors",
           prom=Series("gpuscope_pcie_errors_total", "PCIe correctable errors since the driver loaded.",
                       type="counter")),
    Metric("nvlink_tx_bytes_per_s", "NVLink TX GB/s", key="nvlink_tx", digits=1, summary=True, detail=True,
           unit="GB/s", scale=1e9,
           dcgm=Series("DCGM_FI_PROF_NVLINK_TX_BYTES", "The rate of data transmitted over NVLink, not including "
                       "protocol headers, in bytes per second.", gpm=True),
           prom=Series("gpuscope_nvlink_tx_bytes_per_second", "NVLink transmit rate, all links.")),
    Metric("nvlink_rx_bytes_per_s", "NVLink RX GB/s", key="nvlink_rx", digits=1, summary=True, detail=True,
           unit="GB/s", scale=1e9,
           dcgm=Series("DCGM_FI_PROF_NVLINK_RX_BYTES", "The rate of data received over NVLink, not including "
                       "protocol headers, in bytes per second.", gpm=True),
           prom=Series("gpuscope_nvlink_rx_bytes_per_second", "NVLink receive rate, all links.")),
    Metric("sm_active_pct", "SM active %", key="sm_active", summary=True, detail=True, unit="%", maximum=100.0,
           dcgm=Series("DCGM_FI_PROF_SM_ACTIVE", "The ratio of cycles an SM has at least 1 warp assigned.",
                       scale=100.0, gpm=True)),
    Metric("sm_occupancy_pct", "SM occupancy %", unit="%", maximum=100.0,
           dcgm=Series("DCGM_FI_PROF_SM_OCCUPANCY", "The ratio of number of warps resident on an SM.",
                       scale=100.0, gpm=True)),
    Metric("tensor_active_pct", "tensor active %", key="tensor", summary=True, detail=True, unit="%",
           maximum=100.0,
           dcgm=Series("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "Ratio of cycles the tensor (HMMA) pipe is active.",
                       scale=100.0, gpm=True)),
    Metric("dram_bw_util_pct", "DRAM bandwidth %", key="dram_bw", detail=True, unit="%", maximum=100.0,
           dcgm=Series("DCGM_FI_PROF_DRAM_ACTIVE", "Ratio of cycles the device memory interface is active sending "
                       "or receiving data.", scale=100.0, gpm=True)),
    # GPU health (issue 26). Memory the driver reserves (NVML memory info v2): DCGM_FI_DEV_FB_USED excludes it.
    Metric("mem_reserved_bytes", "memory reserved GiB", unit="GiB", scale=GIB, digits=2,
           dcgm=Series("DCGM_FI_DEV_FB_RESERVED", "Framebuffer memory reserved (in MiB).", scale=MIB, integer=True),
           prom=Series("gpuscope_memory_reserved_bytes", "Framebuffer reserved by the driver (NVML memory info "
                       "v2; absent where only v1 answers, whose used includes it).")),
    Metric("ecc_corrected_volatile", "ECC corrected (volatile)",
           dcgm=Series("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "Total number of single-bit volatile ECC errors.",
                       type="counter")),
    Metric("ecc_uncorrected_volatile", "ECC uncorrected (volatile)",
           dcgm=Series("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "Total number of double-bit volatile ECC errors.",
                       type="counter")),
    Metric("ecc_corrected_aggregate", "ECC corrected (aggregate)",
           dcgm=Series("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "Total number of single-bit persistent ECC errors.",
                       type="counter")),
    Metric("ecc_uncorrected_aggregate", "ECC uncorrected (aggregate)",
           dcgm=Series("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "Total number of double-bit persistent ECC errors.",
                       type="counter")),
    Metric("remapped_rows_correctable", "remapped rows (correctable)",
           dcgm=Series("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "Number of remapped rows for correctable errors",
                       type="counter")),
    Metric("remapped_rows_uncorrectable", "remapped rows (uncorrectable)",
           dcgm=Series("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "Number of remapped rows for uncorrectable "
                       "errors", type="counter")),
    Metric("remap_pending", "row remap pending", read=lambda r: _flag(r.remap_pending),
           prom=Series("gpuscope_row_remap_pending", "1 while a row remap waits for a GPU reset.")),
    Metric("remap_failure", "row remap failed", read=lambda r: _flag(r.remap_failure),
           dcgm=Series("DCGM_FI_DEV_ROW_REMAP_FAILURE", "Whether remapping of rows has failed")),
    # the export has no Xid column (a table of codes per GPU); the recording keeps them, with counts and times
    Metric("xids", "last Xid", read=lambda r: _last_xid(r), export=False,
           dcgm=Series("DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered.")),
    # endpoints (Prometheus: one sample per endpoint and model, only while the server answers)
    Metric("gen_tokens_per_s", "gen tok/s", key="tok_s", unit="tok/s", digits=1, scope="endpoint", summary=True,
           prom=Series("gpuscope_endpoint_generation_tokens_per_second", "Generated tokens per second over the "
                       "poll window (a rate: the poller keeps no cumulative total).")),
    Metric("prompt_tokens_per_s", "prompt tok/s", unit="tok/s", digits=1, scope="endpoint", summary=True,
           export=False,
           prom=Series("gpuscope_endpoint_prompt_tokens_per_second", "Prompt tokens per second over the poll "
                       "window.")),
    Metric("requests_running", "requests running", scope="endpoint", summary=True, export=False,
           prom=Series("gpuscope_endpoint_requests_running", "Requests being served.")),
    Metric("requests_waiting", "requests waiting", scope="endpoint", summary=True, export=False,
           prom=Series("gpuscope_endpoint_requests_waiting", "Requests queued.")),
    Metric("kv_cache_pct", "KV cache %", scope="endpoint", summary=True, export=False, unit="%", maximum=100.0,
           prom=Series("gpuscope_endpoint_kv_cache_usage_ratio", "KV-cache use, 0-1.", scale=100.0)),
    # exact means from the histograms' _sum/_count (bucket p50s are too coarse: docs/serving.md)
    Metric("ttft_mean_s", "TTFT mean ms", unit="ms", scale=1e-3, scope="endpoint", summary=True, export=False,
           prom=_TTFT.at(stat="mean")),
    Metric("ttft_p50_s", "TTFT p50 ms", unit="ms", scale=1e-3, scope="endpoint", export=False,
           prom=_TTFT.at(stat="p50")),
    Metric("ttft_p95_s", "TTFT p95 ms", unit="ms", scale=1e-3, scope="endpoint", export=False,
           prom=_TTFT.at(stat="p95")),
    Metric("itl_mean_s", "ITL mean ms", unit="ms", scale=1e-3, digits=1, scope="endpoint", summary=True,
           export=False,
           prom=_ITL.at(stat="mean")),
    Metric("itl_p50_s", "ITL p50 ms", unit="ms", scale=1e-3, digits=1, scope="endpoint", export=False,
           prom=_ITL.at(stat="p50")),
    Metric("itl_p95_s", "ITL p95 ms", unit="ms", scale=1e-3, digits=1, scope="endpoint", export=False,
           prom=_ITL.at(stat="p95")),
    Metric("spec_accept_length", "spec-decode accepted tokens/step", digits=2, scope="endpoint", export=False,
           prom=Series("gpuscope_endpoint_spec_decode_accept_length", "Speculative decoding: mean tokens "
                       "accepted per step.")),
    Metric("spec_accept_rate", "spec-decode accept ratio", digits=2, scope="endpoint", export=False,
           prom=Series("gpuscope_endpoint_spec_decode_accept_ratio", "Speculative decoding: accepted share of "
                       "drafted tokens.")),
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
