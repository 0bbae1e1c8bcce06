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
* ``dcgm`` / ``prom``: a family of the Prometheus exporter (:mod:`gpuscope.outputs.prometheus`), as a
  :class:`Series`: ``dcgm`` with dcgm-exporter's name, type, unit and labels (``DCGM_FI_*``), ``prom`` with
  gpuscope's own (``gpuscope_*``, base units).

Each metric also carries what the gate and the views need, so no layer keeps a table of its own:

* ``valid``: the range a reading must lie in (raw units); outside it, or not finite, the validation gate
  (:mod:`gpuscope.core.validate`) makes it unknown and counts it. Every numeric field of a reading has one
  (a test walks the reading types);
* ``ceiling``: the metric's full scale from the device and the reading (raw units: the power limit, the SM
  clock's max, the memory size, the PCIe link's capacity now, the NVLinks' capacity), ``maximum`` where it
  is fixed, else ``floor`` under the window's peak. The GPU panels, the detail view and the compact table
  scale their graphs and shares with :func:`ceiling`/:func:`full_scale`;
* ``panel`` / ``short``: its place among a GPU panel's history graphs and its short title there.

Adding a metric is one entry here (a new field of a reading, or ``read`` to derive one); history,
summary, export, the detail view and the Prometheus exporter pick it up. Consumers call :func:`metrics`/:func:`export_columns`
at use time, so the catalogue is read once per use, never copied at import.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from operator import attrgetter
from typing import Any

from gpuscope.core.model import DeviceInfo, GpuReading
from gpuscope.core.topology import best_link, device_nvlink_capacity_bytes_per_s, pcie_capacity_bytes_per_s

Range = tuple[float, float]  # (lowest, highest) valid raw value, both included
Ceiling = Callable[[DeviceInfo, "GpuReading | None"], "float | None"]  # raw full scale of a GPU, or None


@dataclass(frozen=True, slots=True)
class Renamed:
    """A DCGM family under DCGM's canonical field name (DCGM renamed its fields, some into base units; the legacy
    names stay aliases), written by the experimental ``--dcgm-names dcgm-fields``/``both``
    (:func:`gpuscope.outputs.prometheus.dcgm_families`). Only names a public DCGM header defines (docs/prometheus.md)."""

    name: str
    factor: float = 1.0  # canonical value = legacy value × factor (0.01: % → ratio 0-1)
    integer: bool = False  # round to a whole number
    type: str = "gauge"
    help: str = ""  # its HELP text, unit included


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
    canonical: Renamed | None = None  # DCGM's canonical name for the field (--dcgm-names dcgm-fields; None: unchanged)

    def at(self, **labels: str) -> Series:
        """This family with constant labels added: ``TTFT.at(stat="p50")``."""
        return replace(self, labels=(*self.labels, *labels.items()))


@dataclass(frozen=True, slots=True)
class PhaseKey:
    """How a scenario's ``[[phases]]`` sets a metric for the simulated NVML (docs/scenarios.md): its key there,
    the kind of value (``pct``: a percentage 0-100, ``number``: a finite number ≥ 0, ``integer``: a whole
    number ≥ 0) and its value when a phase leaves it out (None: the simulated NVML works it out)."""

    name: str
    kind: str = "number"
    default: float | None = None


PHASE_KINDS = ("pct", "number", "integer")


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
    valid: Range | None = None  # the gate's range (raw units); None only for a derived (``read``) metric
    ceiling: Ceiling | None = None  # full scale from the device and the reading (raw units)
    floor: float = 0.0  # without a ceiling, the scale's least top (displayed units: 100 °C, 1 GB/s)
    panel: int | None = None  # place among a GPU panel's graphs (lower first); None: not on the panel
    short: str = ""  # title on a GPU panel ("power", "SM clock")
    phase: PhaseKey | None = None  # its key in a scenario's phases (None: the simulated NVML derives it)

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
    """The code of the most recent critical Xid of a reading (dcgm-exporter's ``XID_ERRORS``); 0 while none was seen
    since gpuscope started (dcgm-exporter writes 0 from the first scrape, so panels and ``absent()`` alerts read)."""
    xids = getattr(r, "xids", None)
    return float(max(xids, key=lambda x: x.last_t).xid) if xids else 0.0


MIB = 2**20  # dcgm-exporter's framebuffer unit
GIB = 2**30  # memory sizes on screen: binary, like nvidia-smi's MiB (rates stay decimal GB/s)

# Valid ranges (raw units): physical limits with slack, so a reading outside is a fault, never a GPU.
PCT: Range = (0.0, 101.0)  # 100 plus rounding slack
BYTES: Range = (0.0, float(2**50))  # 1 PiB
RATE: Range = (0.0, 1e13)  # bytes/s: 10 TB/s, well above any link
MHZ: Range = (0.0, 20000.0)
WATTS: Range = (0.0, 10000.0)
CELSIUS: Range = (-60.0, 200.0)
COUNT: Range = (0.0, float(2**63))
SECONDS: Range = (0.0, 1e6)
PER_S: Range = (0.0, 1e9)
PER_MIN: Range = (0.0, 6e10)
REMAPPED_ROWS: Range = (0.0, float(2**32))


# Ceilings: a GPU's full scale of a metric (raw units) from its static facts and, where it changes, its reading
def _power_limit(d: DeviceInfo, r: GpuReading | None) -> float | None:
    return (r.power_limit_w if r is not None else None) or d.power_limit_w or None


def _device_max(attr: str) -> Ceiling:
    """The ceiling an inventory fact gives (``sm_clock_max_mhz``…), None where unknown."""
    def top(d: DeviceInfo, r: GpuReading | None) -> float | None:
        v = getattr(d, attr)
        return float(v) if v else None
    return top


_sm_clock_max, _mem_clock_max = _device_max("sm_clock_max_mhz"), _device_max("mem_clock_max_mhz")
_graphics_clock_max = _device_max("graphics_clock_max_mhz")


def _memory_size(d: DeviceInfo, r: GpuReading | None) -> float | None:
    """The reading's own size (it can differ from the inventory's), else the inventory's (a lost GPU)."""
    return float((r.mem_total_bytes if r is not None else None) or d.memory_total_bytes or 0) or None


def _pcie_link(d: DeviceInfo, r: GpuReading | None) -> float | None:
    """The link as it is trained now; without a link reading (a lost GPU) the best it can train to."""
    cap = pcie_capacity_bytes_per_s(r.pcie_gen, r.pcie_width) if r is not None else None
    return cap or pcie_capacity_bytes_per_s(*best_link(d))


def _nvlinks(d: DeviceInfo, r: GpuReading | None) -> float | None:
    """All active NVLinks, one direction (the part's own link rate: an A6000 bridge link is 14.06 GB/s)."""
    return device_nvlink_capacity_bytes_per_s(d)


# gpuscope's families shared by several metrics, told apart by a constant label
_TTFT = Series("gpuscope_endpoint_time_to_first_token_seconds", "Time to first token over the poll window "
               "(stat: mean, p50, p95 from the server's histogram).")
_ITL = Series("gpuscope_endpoint_inter_token_latency_seconds", "Inter-token latency over the poll window "
              "(stat: mean, p50, p95 from the server's histogram).")
_PCIE_RATE = "(GPM where the GPU has it, else NVML's PCIe throughput counter)."

# In export column order (the order of GpuReading's fields, endpoint metrics last); views keep this order.
# The DCGM help texts are dcgm-exporter's (etc/default-counters.csv, etc/dcp-metrics-included.csv), verbatim.
# A DCGM family's ``canonical`` is DCGM's canonical name for its field (experimental: --dcgm-names dcgm-fields). Only
# names found in DCGM's public dcgmlib/dcgm_fields.h are given (docs/prometheus.md cites the header for each); the
# legacy-named families without one keep their names in every set. dcgm-exporter's own counters file (4.8.4, the
# newest release found) still uses the legacy names, which stay the default.
METRICS: tuple[Metric, ...] = (
    Metric("util_gpu_pct", "utilization %", valid=PCT, phase=PhaseKey("util_gpu_pct", "pct", 0.0), panel=0, short="util", key="util", summary=True, detail=True, unit="%", maximum=100.0,
           dcgm=Series("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).",
                       canonical=Renamed("DCGM_FI_DEV_GPU_UTIL_RATIO", 0.01, False, "gauge", "GPU utilization (ratio 0-1)."))),
    Metric("util_mem_pct", "memory controller %", valid=PCT, phase=PhaseKey("util_mem_pct", "pct", 0.0), key="mem_util", unit="%", maximum=100.0,
           dcgm=Series("DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).")),
    Metric("mem_used_bytes", "memory used GiB", valid=BYTES, phase=PhaseKey("mem_used_gib", "number", 0.5), ceiling=_memory_size, panel=4, short="memory", key="mem_used", unit="GiB", scale=GIB, digits=1, detail=True,
           dcgm=Series("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", scale=MIB, integer=True),
           prom=Series("gpuscope_memory_used_bytes", "Framebuffer used.")),
    Metric("mem_total_bytes", "memory total GiB", valid=BYTES, ceiling=_memory_size, unit="GiB", scale=GIB, digits=1,
           prom=Series("gpuscope_memory_total_bytes", "Framebuffer size.")),
    Metric("sm_clock_mhz", "SM clock MHz", valid=MHZ, phase=PhaseKey("sm_clock_mhz", "integer"), ceiling=_sm_clock_max, panel=3, short="SM clock", key="sm_clock", unit="MHz", summary=True, detail=True,
           dcgm=Series("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).")),
    Metric("mem_clock_mhz", "memory clock MHz", valid=MHZ, phase=PhaseKey("mem_clock_mhz", "integer"), ceiling=_mem_clock_max, key="mem_clock", unit="MHz",
           dcgm=Series("DCGM_FI_DEV_MEM_CLOCK", "Memory clock frequency (in MHz).")),
    Metric("graphics_clock_mhz", "graphics clock MHz", valid=MHZ, ceiling=_graphics_clock_max, unit="MHz"),
    Metric("power_w", "power W", valid=WATTS, phase=PhaseKey("power_w"), ceiling=_power_limit, panel=2, short="power", key="power", unit="W", summary=True, detail=True,
           dcgm=Series("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).",
                       canonical=Renamed("DCGM_FI_DEV_BOARD_POWER_WATTS", 1.0, False, "gauge", "Power draw (in W)."))),
    Metric("power_limit_w", "power limit W", valid=WATTS, unit="W",
           prom=Series("gpuscope_power_limit_watts", "Enforced power limit.")),
    Metric("energy_j", "energy J", valid=(0.0, 1e15), unit="J",
           dcgm=Series("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "Total energy consumption since boot (in mJ).",
                       type="counter", scale=1e-3, integer=True)),
    Metric("temp_gpu_c", "temperature °C", valid=CELSIUS, phase=PhaseKey("temp_gpu_c", "number", 35.0), floor=100.0, panel=5, short="temp", key="temp", unit="°C", detail=True,
           dcgm=Series("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).",
                       canonical=Renamed("DCGM_FI_DEV_GPU_TEMP_CELSIUS", 1.0, False, "gauge", "GPU temperature (in C)."))),
    Metric("temp_mem_c", "memory temperature °C", valid=CELSIUS, phase=PhaseKey("temp_mem_c"), floor=100.0, unit="°C",
           dcgm=Series("DCGM_FI_DEV_MEMORY_TEMP", "Memory temperature (in C).",
                       canonical=Renamed("DCGM_FI_DEV_MEMORY_TEMP_CELSIUS", 1.0, False, "gauge", "Memory temperature (in C)."))),
    Metric("fan_pct", "fan %", valid=PCT, phase=PhaseKey("fan_pct", "pct", 30.0), unit="%", maximum=100.0),
    Metric("pstate", "P-state", valid=(0.0, 32.0), phase=PhaseKey("pstate", "integer")),
    Metric("clock_event_reasons", "clock event reasons (NVML bits)", valid=(0.0, float(2**32 - 1)),
           dcgm=Series("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "Current clock throttle reasons (bitmask of "
                       "DCGM_CLOCKS_THROTTLE_REASON_*).",
                       canonical=Renamed("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", 1.0, True, "gauge", "Current clock event reasons (bitmask of DCGM_CLOCKS_EVENT_REASON_*)."))),
    Metric("pcie_gen", "PCIe generation", valid=(1.0, 8.0),
           prom=Series("gpuscope_pcie_link_generation", "PCIe link generation now.")),
    Metric("pcie_width", "PCIe width", valid=(1.0, 32.0),
           prom=Series("gpuscope_pcie_link_width_lanes", "PCIe link width now, in lanes.")),
    Metric("pcie_tx_bytes_per_s", "PCIe TX GB/s", valid=RATE, phase=PhaseKey("pcie_tx_gb_per_s", "number", 0.0), ceiling=_pcie_link, floor=1.0, key="pcie_tx", digits=2, summary=True, detail=True,
           unit="GB/s", scale=1e9,
           dcgm=Series("DCGM_FI_PROF_PCIE_TX_BYTES", "The rate of data transmitted over the PCIe bus - including "
                       "both protocol headers and data payloads - in bytes per second.", gpm=True),
           prom=Series("gpuscope_pcie_tx_bytes_per_second", "PCIe transmit rate " + _PCIE_RATE)),
    Metric("pcie_rx_bytes_per_s", "PCIe RX GB/s", valid=RATE, phase=PhaseKey("pcie_rx_gb_per_s", "number", 0.0), ceiling=_pcie_link, floor=1.0, key="pcie_rx", digits=2, summary=True, detail=True,
           unit="GB/s", scale=1e9,
           dcgm=Series("DCGM_FI_PROF_PCIE_RX_BYTES", "The rate of data received over the PCIe bus - including "
                       "both protocol headers and data payloads - in bytes per second.", gpm=True),
           prom=Series("gpuscope_pcie_rx_bytes_per_second", "PCIe receive rate " + _PCIE_RATE)),
    Metric("pcie_replay_count", "PCIe replays", valid=COUNT,
           dcgm=Series("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "Total number of PCIe retries.", type="counter",
                       canonical=Renamed("DCGM_FI_DEV_PCIE_REPLAY_TOTAL", 1.0, True, "counter", "Total number of PCIe retries.")),
           prom=Series("gpuscope_pcie_replays_total", "PCIe replays since the driver loaded.", type="counter")),
    Metric("pcie_recovery_count", "PCIe recoveries", valid=COUNT,
           prom=Series("gpuscope_pcie_recoveries_total", "PCIe link recoveries since the driver loaded.",
                       type="counter")),
    Metric("pcie_error_count", "PCIe errors", valid=COUNT,
           prom=Series("gpuscope_pcie_errors_total", "PCIe correctable errors since the driver loaded.",
                       type="counter")),
    Metric("nvlink_tx_bytes_per_s", "NVLink TX GB/s", valid=RATE, phase=PhaseKey("nvlink_tx_gb_per_s", "number", 0.0), ceiling=_nvlinks, floor=1.0, key="nvlink_tx", digits=1, summary=True, detail=True,
           unit="GB/s", scale=1e9,
           dcgm=Series("DCGM_FI_PROF_NVLINK_TX_BYTES", "The rate of data transmitted over NVLink, not including "
                       "protocol headers, in bytes per second.", gpm=True),
           prom=Series("gpuscope_nvlink_tx_bytes_per_second", "NVLink transmit rate, all links.")),
    Metric("nvlink_rx_bytes_per_s", "NVLink RX GB/s", valid=RATE, phase=PhaseKey("nvlink_rx_gb_per_s", "number", 0.0), ceiling=_nvlinks, floor=1.0, key="nvlink_rx", digits=1, summary=True, detail=True,
           unit="GB/s", scale=1e9,
           dcgm=Series("DCGM_FI_PROF_NVLINK_RX_BYTES", "The rate of data received over NVLink, not including "
                       "protocol headers, in bytes per second.", gpm=True),
           prom=Series("gpuscope_nvlink_rx_bytes_per_second", "NVLink receive rate, all links.")),
    Metric("sm_active_pct", "SM active %", valid=PCT, phase=PhaseKey("sm_active_pct", "pct"), panel=1, short="SM active", key="sm_active", summary=True, detail=True, unit="%", maximum=100.0,
           dcgm=Series("DCGM_FI_PROF_SM_ACTIVE", "The ratio of cycles an SM has at least 1 warp assigned.",
                       scale=100.0, gpm=True,
                       canonical=Renamed("DCGM_FI_PROF_SM_UTIL_RATIO", 1.0, False, "gauge", "The ratio of cycles an SM has at least 1 warp assigned."))),
    Metric("sm_occupancy_pct", "SM occupancy %", valid=PCT, phase=PhaseKey("sm_occupancy_pct", "pct"), unit="%", maximum=100.0,
           dcgm=Series("DCGM_FI_PROF_SM_OCCUPANCY", "The ratio of number of warps resident on an SM.",
                       scale=100.0, gpm=True,
                       canonical=Renamed("DCGM_FI_PROF_SM_OCCUPANCY_RATIO", 1.0, False, "gauge", "The ratio of number of warps resident on an SM."))),
    Metric("tensor_active_pct", "tensor active %", valid=PCT, phase=PhaseKey("tensor_active_pct", "pct"), key="tensor", summary=True, detail=True, unit="%",
           maximum=100.0,
           dcgm=Series("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "Ratio of cycles the tensor (HMMA) pipe is active.",
                       scale=100.0, gpm=True,
                       canonical=Renamed("DCGM_FI_PROF_TENSOR_UTIL_RATIO", 1.0, False, "gauge", "Ratio of cycles the tensor (HMMA) pipe is active."))),
    Metric("dram_bw_util_pct", "DRAM bandwidth %", valid=PCT, phase=PhaseKey("dram_bw_util_pct", "pct"), key="dram_bw", detail=True, unit="%", maximum=100.0,
           dcgm=Series("DCGM_FI_PROF_DRAM_ACTIVE", "Ratio of cycles the device memory interface is active sending "
                       "or receiving data.", scale=100.0, gpm=True,
                       canonical=Renamed("DCGM_FI_PROF_DRAM_UTIL_RATIO", 1.0, False, "gauge", "Ratio of cycles the device memory interface is active sending or receiving data."))),
    # GPU health. Memory the driver reserves (NVML memory info v2): DCGM_FI_DEV_FB_USED excludes it.
    Metric("mem_reserved_bytes", "memory reserved GiB", valid=BYTES, ceiling=_memory_size, unit="GiB", scale=GIB, digits=2,
           dcgm=Series("DCGM_FI_DEV_FB_RESERVED", "Framebuffer memory reserved (in MiB).", scale=MIB, integer=True),
           prom=Series("gpuscope_memory_reserved_bytes", "Framebuffer reserved by the driver (NVML memory info "
                       "v2; absent where only v1 answers, whose used includes it).")),
    Metric("ecc_corrected_volatile", "ECC corrected (volatile)", valid=COUNT,
           dcgm=Series("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "Total number of single-bit volatile ECC errors.",
                       type="counter")),
    Metric("ecc_uncorrected_volatile", "ECC uncorrected (volatile)", valid=COUNT,
           dcgm=Series("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "Total number of double-bit volatile ECC errors.",
                       type="counter")),
    Metric("ecc_corrected_aggregate", "ECC corrected (aggregate)", valid=COUNT,
           dcgm=Series("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "Total number of single-bit persistent ECC errors.",
                       type="counter")),
    Metric("ecc_uncorrected_aggregate", "ECC uncorrected (aggregate)", valid=COUNT,
           dcgm=Series("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "Total number of double-bit persistent ECC errors.",
                       type="counter")),
    Metric("remapped_rows_correctable", "remapped rows (correctable)", valid=REMAPPED_ROWS,
           dcgm=Series("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "Number of remapped rows for correctable errors",
                       type="counter",
                       canonical=Renamed("DCGM_FI_DEV_ROW_REMAP_CORRECTABLE_TOTAL", 1.0, True, "counter", "Number of remapped rows for correctable errors."))),
    Metric("remapped_rows_uncorrectable", "remapped rows (uncorrectable)", valid=REMAPPED_ROWS,
           dcgm=Series("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "Number of remapped rows for uncorrectable "
                       "errors", type="counter",
                       canonical=Renamed("DCGM_FI_DEV_ROW_REMAP_UNCORRECTABLE_TOTAL", 1.0, True, "counter", "Number of remapped rows for uncorrectable errors."))),
    Metric("remap_pending", "row remap pending", read=lambda r: _flag(r.remap_pending),
           prom=Series("gpuscope_row_remap_pending", "1 while a row remap waits for a GPU reset.")),
    Metric("remap_failure", "row remap failed", read=lambda r: _flag(r.remap_failure),
           dcgm=Series("DCGM_FI_DEV_ROW_REMAP_FAILURE", "Whether remapping of rows has failed",
                       canonical=Renamed("DCGM_FI_DEV_ROW_REMAP_FAILED", 1.0, True, "gauge", "Whether remapping of rows has failed."))),
    # the export has no Xid column (a table of codes per GPU); the recording keeps them, with counts and times
    Metric("xids", "last Xid", read=_last_xid, export=False,
           dcgm=Series("DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered.",
                       canonical=Renamed("DCGM_FI_DEV_XID_ERROR", 1.0, True, "gauge", "Value of the last XID error encountered."))),
    # GPM's graphics-engine activity (dcgm-exporter's default profiling field)
    Metric("gr_engine_active_pct", "graphics engine active %", valid=PCT, unit="%", maximum=100.0,
           dcgm=Series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Ratio of time the graphics engine is active.",
                       scale=100.0, gpm=True,
                       canonical=Renamed("DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO", 1.0, False, "gauge", "Ratio of time the graphics engine is active."))),
    # NVLink error counters, summed over the GPU's links (NVML's *_ERROR_COUNT_TOTAL fields, else the per-link error
    # counter). dcgm-exporter ships these four rows commented out in etc/default-counters.csv; the names, types and
    # help texts are those rows'. Absent, never 0, on a GPU without NVLink or without the counters. No canonical
    # name is given for them, so every name set writes them as they are.
    Metric("nvlink_crc_flit_count", "NVLink CRC flit errors", valid=COUNT,
           dcgm=Series("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "Total number of NVLink flow-control CRC errors.",
                       type="counter")),
    Metric("nvlink_crc_data_count", "NVLink CRC data errors", valid=COUNT,
           dcgm=Series("DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", "Total number of NVLink data CRC errors.",
                       type="counter")),
    Metric("nvlink_replay_count", "NVLink replays", valid=COUNT,
           dcgm=Series("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", "Total number of NVLink retries.", type="counter")),
    Metric("nvlink_recovery_count", "NVLink recoveries", valid=COUNT,
           dcgm=Series("DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", "Total number of NVLink recovery errors.",
                       type="counter")),
    # the power management limit (the limit set on the GPU; the enforced limit above can be lower). dcgm-exporter
    # offers DCGM_FI_DEV_POWER_MGMT_LIMIT only as an opt-in (--dcgm-counters, outputs/prometheus.py OPT_IN).
    Metric("power_mgmt_limit_w", "power management limit W", valid=WATTS, unit="W",
           prom=Series("gpuscope_power_management_limit_watts", "Power management limit (the limit set on the GPU; "
                       "the enforced limit can be lower).")),
    # endpoints (Prometheus: one sample per endpoint and model, only while the server answers)
    Metric("gen_tokens_per_s", "gen tok/s", valid=PER_S, key="tok_s", unit="tok/s", digits=1, scope="endpoint", summary=True,
           prom=Series("gpuscope_endpoint_generation_tokens_per_second", "Generated tokens per second over the "
                       "poll window (a rate: the poller keeps no cumulative total).")),
    Metric("prompt_tokens_per_s", "prompt tok/s", valid=PER_S, unit="tok/s", digits=1, scope="endpoint", summary=True,
           export=False,
           prom=Series("gpuscope_endpoint_prompt_tokens_per_second", "Prompt tokens per second over the poll "
                       "window.")),
    Metric("requests_running", "requests running", valid=PER_S, scope="endpoint", summary=True, export=False,
           prom=Series("gpuscope_endpoint_requests_running", "Requests being served.")),
    Metric("requests_waiting", "requests waiting", valid=PER_S, scope="endpoint", summary=True, export=False,
           prom=Series("gpuscope_endpoint_requests_waiting", "Requests queued.")),
    Metric("kv_cache_pct", "KV cache %", valid=PCT, scope="endpoint", summary=True, export=False, unit="%", maximum=100.0,
           prom=Series("gpuscope_endpoint_kv_cache_usage_ratio", "KV-cache use, 0-1.", scale=100.0)),
    # exact means from the histograms' _sum/_count (bucket p50s are too coarse: docs/serving.md)
    Metric("ttft_mean_s", "TTFT mean ms", valid=SECONDS, unit="ms", scale=1e-3, scope="endpoint", summary=True, export=False,
           prom=_TTFT.at(stat="mean")),
    Metric("ttft_p50_s", "TTFT p50 ms", valid=SECONDS, unit="ms", scale=1e-3, scope="endpoint", export=False,
           prom=_TTFT.at(stat="p50")),
    Metric("ttft_p95_s", "TTFT p95 ms", valid=SECONDS, unit="ms", scale=1e-3, scope="endpoint", export=False,
           prom=_TTFT.at(stat="p95")),
    Metric("itl_mean_s", "ITL mean ms", valid=SECONDS, unit="ms", scale=1e-3, digits=1, scope="endpoint", summary=True,
           export=False,
           prom=_ITL.at(stat="mean")),
    Metric("itl_p50_s", "ITL p50 ms", valid=SECONDS, unit="ms", scale=1e-3, digits=1, scope="endpoint", export=False,
           prom=_ITL.at(stat="p50")),
    Metric("itl_p95_s", "ITL p95 ms", valid=SECONDS, unit="ms", scale=1e-3, digits=1, scope="endpoint", export=False,
           prom=_ITL.at(stat="p95")),
    Metric("spec_accept_length", "spec-decode accepted tokens/step", valid=(0.0, 1000.0), digits=2, scope="endpoint", export=False,
           prom=Series("gpuscope_endpoint_spec_decode_accept_length", "Speculative decoding: mean tokens "
                       "accepted per step.")),
    Metric("spec_accept_rate", "spec-decode accept ratio", valid=PCT, digits=2, scope="endpoint", export=False,
           prom=Series("gpuscope_endpoint_spec_decode_accept_ratio", "Speculative decoding: accepted share of "
                       "drafted tokens.")),
    # the rest of an endpoint's reading: shown by the inference panel, kept in recordings, range-checked
    Metric("queue_mean_s", "queued mean ms", valid=SECONDS, unit="ms", scale=1e-3, scope="endpoint", export=False),
    Metric("prefill_mean_s", "prefill mean ms", valid=SECONDS, unit="ms", scale=1e-3, scope="endpoint",
           export=False),
    Metric("prompt_computed_tokens_per_s", "prompt computed tok/s", valid=PER_S, unit="tok/s", digits=1,
           scope="endpoint", export=False),
    Metric("prompt_cached_tokens_per_s", "prompt cached tok/s", valid=PER_S, unit="tok/s", digits=1,
           scope="endpoint", export=False),
    Metric("prefix_cache_hit_pct", "prefix cache hit %", valid=PCT, unit="%", maximum=100.0, scope="endpoint",
           export=False),
    Metric("preemptions_per_min", "preemptions/min", valid=PER_MIN, digits=1, scope="endpoint", export=False),
    Metric("probe_ttft_s", "probe TTFT ms", valid=SECONDS, unit="ms", scale=1e-3, scope="endpoint", export=False),
    Metric("probe_decode_tokens_per_s", "probe decode tok/s", valid=PER_S, unit="tok/s", digits=1,
           scope="endpoint", export=False),
    Metric("rate_window_s", "rate window s", valid=SECONDS, unit="s", scope="endpoint", export=False),
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


def ranges(scope: str) -> dict[str, Range]:
    """The validation gate's ranges of ``scope``'s metrics: {reading field: (low, high)} in raw units, read at
    use time (a metric added to the catalogue is range-checked at once). Raises ValueError for a metric that
    reads a field without a range (a catalogue mistake: every field read from outside is checked)."""
    hit = _RANGES.get(scope)
    if hit is not None and hit[0] is METRICS:
        return hit[1]
    out: dict[str, Range] = {}
    for m in METRICS:
        if m.scope != scope:
            continue
        if m.valid is None:
            if m.read is None:
                raise ValueError(f"catalogue: metric {m.name} has no valid range")
            continue
        out[m.name] = m.valid
    _RANGES[scope] = (METRICS, out)
    return out


_RANGES: dict[str, tuple[tuple[Metric, ...], dict[str, Range]]] = {}  # per scope, for the METRICS it was made of


def raw_ceiling(m: Metric, dev: DeviceInfo, r: GpuReading | None) -> float | None:
    """``m``'s full scale for this GPU in raw units (100 %, the power limit in W, the link's capacity in
    bytes/s), or None when it has none or the facts it needs are unknown."""
    if m.maximum is not None:
        return m.maximum * m.scale
    return (m.ceiling(dev, r) or None) if m.ceiling is not None else None


def ceiling(m: Metric, dev: DeviceInfo, r: GpuReading | None) -> float | None:
    """:func:`raw_ceiling` in displayed units (GB/s, GiB)."""
    if m.maximum is not None:
        return m.maximum
    raw = raw_ceiling(m, dev, r)
    return raw / m.scale if raw else None


def full_scale(m: Metric, dev: DeviceInfo, r: GpuReading | None, peak: float | None) -> float:
    """The top of ``m``'s graph in displayed units: its :func:`ceiling`, else the window's ``peak`` with the
    metric's floor (100 °C, 1 GB/s), never 0."""
    return ceiling(m, dev, r) or max(peak or 0.0, m.floor) or 1.0


def panel_metrics() -> list[Metric]:
    """The GPU panel's history graphs in priority order."""
    return sorted((m for m in METRICS if m.panel is not None and m.history), key=lambda m: m.panel or 0)


def suffix(m: Metric) -> str:
    """``m``'s unit as written after a number: ``%`` and ``°C`` close up (``75%``), others spaced (``349 W``)."""
    return m.unit if m.unit in ("%", "°C", "") else " " + m.unit


def export_columns() -> list[str]:
    """The export's header: ``t, gpu, lost``, the GPU metrics, then the endpoint metrics (summed)."""
    return [*EXPORT_LEAD, *(m.name for m in metrics("gpu", export=True)),
            *(m.name for m in metrics("endpoint", export=True))]
