"""The NVML source: static facts once, then one :class:`Frame` per :meth:`NvmlSource.sample`.

Runs unchanged over the real ``pynvml`` (nvidia-ml-py) and over :mod:`gpuscope.sources.simnvml`.

* Every per-tick call is probed on its first use; a call that answers NotSupported (or
  FunctionNotFound / NoPermission) is never made again for that GPU.
* PCIe throughput comes from GPM on Hopper and newer (no blocking); otherwise from
  ``nvmlDeviceGetPcieThroughput``, which blocks ~20 ms a call, so those calls run on worker threads
  in parallel, overlapping the rest of the sample. The wrapping PCIe byte counters are never used.
* NVLink throughput comes from GPM, else from per-link ``NVLINK_THROUGHPUT_DATA`` counters summed.
* A GPU that answers GpuIsLost is marked lost; the others go on.

Units are converted here, once: mW → W, mJ → J, KB/s → bytes/s, MiB/s → bytes/s, KiB → bytes.
"""

from __future__ import annotations

import ctypes
import logging
import math
import os
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Literal, NamedTuple, TypedDict, cast

from gpuscope.core.energy import EnergyMeter
from gpuscope.core.errors import GpuscopeError
from gpuscope.core.health import tally_xid, xid_text
from gpuscope.core.model import (
    DeviceInfo,
    Event,
    Frame,
    GpuReading,
    Inventory,
    PairLink,
    ProcessInfo,
    XidCount,
)
from gpuscope.core.redact import redact_command
from gpuscope.core.text import clean_opt
from gpuscope.core.topology import cpu_list, normalize_bus_id, nvlink_count, topology_label
from gpuscope.sources.procinfo import COMMAND_MAX, UNKNOWN_USER, ProcTable


class NvmlUnavailable(GpuscopeError, RuntimeError):
    """NVML (the NVIDIA driver's library) cannot be used on this machine."""


ARCHITECTURES = {2: "kepler", 3: "maxwell", 4: "pascal", 5: "volta", 6: "turing", 7: "ampere", 8: "ada",
                 9: "hopper", 10: "blackwell", 11: "orin"}

# GPM metric ids (nvmlGpmMetricId_t).
GPM_GR_ENGINE, GPM_SM_UTIL, GPM_SM_OCC, GPM_TENSOR, GPM_DRAM_BW = 1, 2, 3, 5, 10
GPM_PCIE_TX, GPM_PCIE_RX = 20, 21
GPM_NVLINK_RX, GPM_NVLINK_TX = 60, 61
_GPM_METRICS = (GPM_SM_UTIL, GPM_SM_OCC, GPM_TENSOR, GPM_DRAM_BW, GPM_PCIE_TX, GPM_PCIE_RX, GPM_NVLINK_RX,
                GPM_NVLINK_TX)  # every tick
# on the health ticks only (every 15 s), over the time since the last one: the graphics engine's activity costs
# 1.4-1.9 ms of CPU a read on H200 (driver 580), the eight above 0.01 ms together (tools/nvml_call_costs.py)
GPM_SLOW = (GPM_GR_ENGINE,)
_MIB = 1024 * 1024
GpmKey = Literal["gr_engine_active_pct", "sm_active_pct", "sm_occupancy_pct", "tensor_active_pct",
                 "dram_bw_util_pct", "pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s", "nvlink_tx_bytes_per_s", "nvlink_rx_bytes_per_s"]
_GPM_FIELDS: tuple[tuple[GpmKey, int, float], ...] = (  # (reading, GPM metric id, scale to its unit)
    ("gr_engine_active_pct", GPM_GR_ENGINE, 1.0), ("sm_active_pct", GPM_SM_UTIL, 1.0),
    ("sm_occupancy_pct", GPM_SM_OCC, 1.0), ("tensor_active_pct", GPM_TENSOR, 1.0),
    ("dram_bw_util_pct", GPM_DRAM_BW, 1.0),
    ("pcie_tx_bytes_per_s", GPM_PCIE_TX, _MIB), ("pcie_rx_bytes_per_s", GPM_PCIE_RX, _MIB),
    ("nvlink_tx_bytes_per_s", GPM_NVLINK_TX, _MIB), ("nvlink_rx_bytes_per_s", GPM_NVLINK_RX, _MIB))
_GPM_SLOW_KEYS = tuple(key for key, mid, _scale in _GPM_FIELDS if mid in GPM_SLOW)
ENERGY_INTERVAL_S = 30.0
# PCIe health counters (replays, recoveries, AER errors): ~1.6 ms of CPU a GPU per read on H200 (measured,
# docs/measurements/nvml_call_costs.txt), most of a tick's cost when read every 5 s; they move rarely and the
# finding compares them over its window, so they are read every 15 s and carried between reads
HEALTH_INTERVAL_S = 15.0
HEALTH_EARLY_S = 0.5  # a slow tick this close to the 15 s reads them: slow ticks jitter around their 5 s
HealthKey = Literal["pcie_replay_count", "pcie_recovery_count", "pcie_error_count"]
HEALTH_KEYS: tuple[HealthKey, ...] = ("pcie_replay_count", "pcie_recovery_count", "pcie_error_count")
# ECC counts and the row remapper, read on slow ticks (every 5 s) and carried between reads
EccKey = Literal["ecc_corrected_volatile", "ecc_uncorrected_volatile", "ecc_corrected_aggregate",
                 "ecc_uncorrected_aggregate", "remapped_rows_correctable", "remapped_rows_uncorrectable",
                 "remap_pending", "remap_failure"]
ECC_KEYS: tuple[EccKey, ...] = ("ecc_corrected_volatile", "ecc_uncorrected_volatile", "ecc_corrected_aggregate",
                                "ecc_uncorrected_aggregate", "remapped_rows_correctable",
                                "remapped_rows_uncorrectable", "remap_pending", "remap_failure")
# NVLink error counters of all the GPU's links, read with the PCIe health counters (every 15 s) in a call of their
# own, carried between reads: (reading, NVML's all-links field id, the per-link counter's name for
# nvmlDeviceGetNvLinkErrorCounter, the fallback where the field does not answer). The field ids are nvml.h's
# NVML_FI_DEV_NVLINK_{CRC_FLIT,CRC_DATA,REPLAY,RECOVERY}_ERROR_COUNT_TOTAL.
NvlinkErrKey = Literal["nvlink_crc_flit_count", "nvlink_crc_data_count", "nvlink_replay_count", "nvlink_recovery_count"]
NVLINK_ERRORS: tuple[tuple[NvlinkErrKey, int, str], ...] = (
    ("nvlink_crc_flit_count", 38, "NVML_NVLINK_ERROR_DL_CRC_FLIT"),
    ("nvlink_crc_data_count", 45, "NVML_NVLINK_ERROR_DL_CRC_DATA"),
    ("nvlink_replay_count", 52, "NVML_NVLINK_ERROR_DL_REPLAY"),
    ("nvlink_recovery_count", 59, "NVML_NVLINK_ERROR_DL_RECOVERY"))
NVLINK_ERR_KEYS: tuple[NvlinkErrKey, ...] = tuple(k for k, _fid, _counter in NVLINK_ERRORS)
# the readings carried between slow reads (the last ones read, repeated in the ticks between)
SlowKey = Literal["temp_mem_c", "nvlink_tx_bytes_per_s", "nvlink_rx_bytes_per_s", HealthKey, EccKey, NvlinkErrKey]
_SLOW_EVERY: tuple[SlowKey, ...] = ("temp_mem_c", "nvlink_tx_bytes_per_s", "nvlink_rx_bytes_per_s")


class BasicFields(TypedDict):
    """What :meth:`NvmlSource._basic` reads for one GPU every tick (and carries from the slow path), as
    :class:`GpuReading`'s fields: the reading is built once from these and :class:`ReadingFields`. A second list
    of GpuReading's fields, kept in step by mypy: it checks every name and type of both TypedDicts against
    GpuReading where they are unpacked into it (a missing, extra or mistyped key is a type error)."""

    index: int
    util_gpu_pct: float | None
    util_mem_pct: float | None
    mem_used_bytes: int | None
    mem_total_bytes: int | None
    mem_reserved_bytes: int | None
    sm_clock_mhz: int | None
    mem_clock_mhz: int | None
    graphics_clock_mhz: int | None
    power_w: float | None
    power_limit_w: float | None
    power_mgmt_limit_w: float | None
    energy_j: float | None
    temp_gpu_c: float | None
    fan_pct: float | None
    pstate: int | None
    clock_event_reasons: int | None
    pcie_gen: int | None
    pcie_width: int | None
    processes: tuple[ProcessInfo, ...] | None


class ReadingFields(TypedDict, total=False):
    """What a tick reads for one GPU beside :meth:`NvmlSource._basic` (the PCIe throughput calls, field
    values, GPM, ECC and the row remapper), given to :class:`GpuReading` with :class:`BasicFields`:
    each key is a GpuReading field, so mypy checks the names and their types (a typo is a type error, not a
    TypeError on a real GPU). A key absent: not read this tick."""

    pcie_tx_bytes_per_s: float
    pcie_rx_bytes_per_s: float
    nvlink_tx_bytes_per_s: float
    nvlink_rx_bytes_per_s: float
    temp_mem_c: float
    pcie_replay_count: int
    pcie_recovery_count: int
    pcie_error_count: int
    gr_engine_active_pct: float
    sm_active_pct: float
    sm_occupancy_pct: float
    tensor_active_pct: float
    dram_bw_util_pct: float
    ecc_corrected_volatile: int | None
    ecc_uncorrected_volatile: int | None
    ecc_corrected_aggregate: int | None
    ecc_uncorrected_aggregate: int | None
    remapped_rows_correctable: int
    remapped_rows_uncorrectable: int
    remap_pending: bool
    remap_failure: bool
    nvlink_crc_flit_count: int
    nvlink_crc_data_count: int
    nvlink_replay_count: int
    nvlink_recovery_count: int


@dataclass
class _SlowState:
    """A GPU's readings from the slow path, kept for the ticks between slow reads."""

    fields: ReadingFields = field(default_factory=lambda: ReadingFields())
    energy: float | None = None  # mJ, NVML's total energy counter
    energy_t: float = -1e18  # when it was read (the source's clock)
    meter: EnergyMeter = field(default_factory=EnergyMeter)  # the counter advanced every tick between reads
    procs: tuple[ProcessInfo, ...] | None = None
    power_limit: float | None = None  # mW: changes when an administrator sets it (slow path)
    power_mgmt_limit: float | None = None  # mW: the limit set on the GPU (the enforced one can be lower), likewise
    pcie_width: int | None = None  # lanes: changes with link training, not with load as the generation does
# (history key of the throughput call, the reading it fills): the fallback where GPM is not there
_PCIE_THROUGHPUT: tuple[tuple[str, Literal["pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s"]], ...] = (
    ("pcie_tx", "pcie_tx_bytes_per_s"), ("pcie_rx", "pcie_rx_bytes_per_s"))
# the Xid thread's wait: how long a close() may wait for it (it blocks in NVML, GIL released); on H200 a 500 ms
# wait that times out costs 0.17 ms of CPU (docs/real-gpus.md), ~0.34 ms a second
XID_WAIT_MS = 500
XID_EVENT = 0x8  # nvmlEventTypeXidCriticalError
LOG = logging.getLogger(__name__)
_GPM_SLOTS = 1024  # room for every metric id a newer NVML might write (nvidia-ml-py's own size varies)

# Field ids (nvmlFieldValue ids).
FI_MEMORY_TEMP = 82
FI_PCIE_REPLAY = 94
FI_PCIE_RECOVERY = 169
FI_PCIE_ERRORS = (175, 176, 177, 178, 179, 180, 183)  # receiver, bad TLP, NAKs sent, bad DLLP, non-fatal, fatal, lane
FI_NVLINK_DATA_TX, FI_NVLINK_DATA_RX = 138, 139
# NVLink speed per link, MB/s (10^6 bytes) one direction (``nvidia-smi nvlink -s`` shows it /1000 as GB/s):
# COMMON (all links), then links 0-5 and 6-11. NOT_SUPPORTED on H200 / driver 580 (docs/real-gpus.md,
# *Measured NVML facts*).
FI_NVLINK_SPEED_COMMON = 90
FI_NVLINK_SPEED_LINKS = (84, 85, 86, 87, 88, 89, 132, 133, 134, 135, 136, 137)

_NOT_SUPPORTED_NAMES = ("NVMLError_NotSupported", "NVMLError_FunctionNotFound", "NVMLError_NoPermission",
                        "NVMLError_InvalidArgument")


class _Lost(Exception):
    pass


def _s(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _field_value(fv: Any) -> float | None:
    """The number in an nvmlFieldValue_t, by its valueType; None when the field failed."""
    if getattr(fv, "nvmlReturn", 0) != 0:
        return None
    vt = fv.valueType
    v = fv.value
    # every member of the value union is a C double or integer, which ctypes hands over as a Python number
    return cast(float, {0: lambda: v.dVal, 1: lambda: v.uiVal, 2: lambda: v.ulVal, 3: lambda: v.ullVal,
                        4: lambda: v.sllVal, 5: lambda: v.siVal}.get(vt, lambda: v.ullVal)())


def slow_tick_due(now: float, last: float | None, interval: float, util_wanted: bool, util_was_wanted: bool) -> bool:
    """Whether the tick at ``now`` is a slow one (process list, ECC, memory temperature, the health counters when
    due): the first, one ``interval`` after the ``last`` slow tick, one after the clock went back, and the tick at
    which per-process utilisation becomes wanted (the processes panel opened: its figures at once, not up to
    ``interval`` later)."""
    return (last is None or now - last >= interval or now < last) or (util_wanted and not util_was_wanted)


class Tick(NamedTuple):
    """What one tick reads, decided once for every GPU (:meth:`NvmlSource.sample`)."""

    slow: bool  # the process list, ECC, memory temperature (slow_tick_due)
    health: bool  # the PCIe health counters, GPM's graphics-engine activity, per-process utilisation when wanted
    util_wanted: bool  # per-process utilisation (read_on_demand)
    energy_wanted: bool  # the energy counter (read_on_demand)
    energy_was_wanted: bool  # at the tick before: a read at once when it becomes wanted


def energy_read_due(now: float, last_read: float, slow: bool, wanted: bool, was_wanted: bool) -> bool:
    """Whether to read the energy counter (~4 ms of CPU a GPU on H200) at this tick: while ``wanted``, on a slow
    tick :data:`ENERGY_INTERVAL_S` after the ``last_read``, and at once at the tick it becomes wanted (a recording
    starts)."""
    return wanted and ((slow and now - last_read >= ENERGY_INTERVAL_S) or not was_wanted)


class NvmlSource:
    """Samples every GPU that NVML sees.

    ``nvml`` is the ``pynvml`` module or the simulated one; ``pcie_mode`` is ``auto`` (GPM where it
    exists), ``gpm`` or ``throughput`` (force the blocking fallback, used by the benchmarks).
    """

    def __init__(self, nvml: Any = None, *, label: str = "LIVE", simulated: bool = False, scenario: str | None = None,
                 pcie_mode: str = "auto", read_sysfs: bool | None = None, clock: Callable[[], float] = time.time,
                 host: str | None = None, slow_interval_s: float = 5.0, xid_thread: bool = False):
        if nvml is None:
            try:
                import pynvml  # noqa: PLC0415
            except ImportError as e:  # pragma: no cover - packaging guarantees it
                raise NvmlUnavailable(f"nvidia-ml-py is not installed ({e})") from None
            nvml = pynvml
        self.nvml = nvml
        self.label = label
        self.host = host
        self.slow_interval_s = slow_interval_s  # health counters, memory temperature, processes
        self._slow_last: float | None = None
        self._health_last: float | None = None  # when the PCIe health counters were last read
        self._slow: dict[int, _SlowState] = {}
        self.simulated = simulated
        self.scenario = scenario
        self.pcie_mode = pcie_mode
        self.read_sysfs = (not simulated) if read_sysfs is None else read_sysfs
        self.clock = clock
        self.inventory: Inventory | None = None
        self._handles: list[Any] = []
        self._unsupported: set[tuple[int, str]] = set()
        self._lost: set[int] = set()
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._gpm_prev: dict[int, Any] = {}
        self._util_kept: dict[int, dict[int, tuple[float, float]] | None] = {}  # per-process utilisation read last
        self._gpm_mg: Any = None  # the metrics-get struct every GPM read fills (the sampler's thread only)
        self._gr_kept: dict[int, ReadingFields] = {}  # graphics-engine activity last read (GPM_SLOW), carried
        self._gpm_slow: dict[int, Any] = {}  # the GPM sample of the last health tick (GPM_SLOW's metrics start there)
        # samples no read needs any more (at most two a GPU: a health tick lets go of two at once), filled again at
        # the next ticks (NVML's own pattern: allocate, then reuse), not allocated and freed every tick
        self._gpm_spare: dict[int, list[Any]] = {}
        self._gpm_ok: dict[int, bool] = {}
        self._nvlink_links: dict[int, list[int]] = {}
        self._nvlink_prev: dict[int, tuple[float, float, float]] = {}
        self._procs = ProcTable()  # user, name, command per pid, from /proc (real NVML only)
        self._util_seen: dict[int, int] = {}  # per GPU: the newest process-utilisation sample's timestamp (µs)
        self._pending_events: list[Event] = []
        self._nvlink_remote: dict[int, tuple[list[tuple[str, int]], int]] = {}
        # whether the two costliest reads are wanted now (read_on_demand; None: always, as record and the agent do)
        self._energy_wanted_fn: Callable[[], bool] | None = None
        self._util_wanted_fn: Callable[[], bool] | None = None
        self._util_was_wanted = True  # at the last tick
        self._energy_was_wanted = False  # at the last tick: the first tick that wants it reads it
        self._errors = tuple(getattr(nvml, n) for n in _NOT_SUPPORTED_NAMES if hasattr(nvml, n))
        self._lost_error = getattr(nvml, "NVMLError_GpuIsLost", None)
        self._base_error = getattr(nvml, "NVMLError", Exception)
        self._ecc_on: set[int] = set()  # GPUs whose ECC mode answered "on"
        self._mem_v2: dict[int, bool] = {}  # per GPU: memory info v2 answers (else v1, used incl. reserved)
        self._xids: dict[int, dict[int, XidCount]] = {}  # per GPU: Xid code → count and last time
        self._xid_tallies: dict[int, tuple[XidCount, ...]] = {}  # per GPU: the same, by code, as readings carry it
        self._xid_queue: list[tuple[float, int, int]] = []  # (t, gpu, xid) from the Xid thread, under _lock
        self._xid_thread: threading.Thread | None = None
        # Xid events: taken in sample() with zero-timeout waits (default), or waited for on their own thread
        # (``xid_thread``). On H200 a zero wait costs 0.003 ms of CPU; the thread's 500 ms waits cost 0.14 ms
        # each, 0.29 ms of CPU a second (docs/real-gpus.md), a third of a tick. NVML keeps the events queued in
        # the set until they are read, so a tick's poll loses none; an Xid is dated by the tick that reads it
        # (at most one interval late: NVML's event carries no time).
        self.xid_thread = xid_thread
        self._xid_etype = XID_EVENT
        self._xid_stop = threading.Event()
        self._event_set: Any = None

    # ----------------------------------------------------------------- static
    def open(self) -> Inventory:
        """Initialise NVML and read the inventory. Raises :class:`NvmlUnavailable`."""
        nv = self.nvml
        try:
            nv.nvmlInit()
        except self._base_error as e:
            raise NvmlUnavailable(f"NVML could not start ({e})") from None
        except OSError as e:  # pragma: no cover - a broken library
            raise NvmlUnavailable(f"NVML could not load ({e})") from None
        try:
            n = nv.nvmlDeviceGetCount()
            self._handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(n)]
        except self._base_error as e:
            raise NvmlUnavailable(f"NVML could not list the GPUs ({e})") from None
        devices = [self._device_info(i, h) for i, h in enumerate(self._handles)]
        pairs = self._pairs(devices)
        self.inventory = Inventory(
            host=self.host or socket.gethostname(),
            devices=tuple(devices),
            pairs=tuple(pairs),
            driver_version=self._static(lambda: _s(nv.nvmlSystemGetDriverVersion())),
            nvml_version=self._static(lambda: _s(nv.nvmlSystemGetNVMLVersion())),
            cuda_driver_version=self._static(nv.nvmlSystemGetCudaDriverVersion),
            source="simulated" if self.simulated else "nvml",
            simulated=self.simulated,
            scenario=self.scenario,
        )
        workers = max(2, min(64, 3 * n))
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="gpuscope-nvml")
        self._start_xid_events()
        return self.inventory

    # ----------------------------------------------------------------- Xid events
    def _note(self, text: str) -> None:
        """Say something once: in the log and as a ``note`` event in the next frame (so in recordings)."""
        LOG.info("%s", text)
        self._pending_events.append(Event(t=self.clock(), kind="note", text=text))

    def _start_xid_events(self) -> None:
        """Register every GPU for critical Xid events on one NVML event set, waited on by the
        ``gpuscope-xid`` daemon thread; GPUs (or a driver) without them are said once in a note."""
        nv = self.nvml
        etype = getattr(nv, "nvmlEventTypeXidCriticalError", XID_EVENT)
        if not hasattr(nv, "nvmlEventSetCreate") or not hasattr(nv, "nvmlEventSetWait_v2"):
            self._note("Xid errors are not watched: this nvidia-ml-py has no event sets")
            return
        try:
            es = nv.nvmlEventSetCreate()
        except self._base_error as e:
            self._note(f"Xid errors are not watched: NVML's event set is not available ({clean_opt(str(e), 80)})")
            return
        missing = []
        for i, h in enumerate(self._handles):
            try:
                nv.nvmlDeviceRegisterEvents(h, etype, es)
            except self._base_error as e:
                missing.append((i, clean_opt(str(e), 60)))
        if len(missing) == len(self._handles):
            self._free_event_set(es)
            self._note(f"Xid errors are not watched: NVML does not report them on these GPUs ({missing[0][1]})"
                       if missing else "Xid errors are not watched: no GPUs")
            return
        if missing:
            self._note("Xid errors are not watched on " + ", ".join(f"GPU{i}" for i, _ in missing)
                       + f" ({missing[0][1]})")
        self._event_set = es
        self._xid_etype = etype
        if not self.xid_thread:
            return
        self._xid_stop.clear()
        self._xid_thread = threading.Thread(target=self._xid_loop, args=(es, etype), name="gpuscope-xid", daemon=True)
        self._xid_thread.start()

    def _free_event_set(self, es: Any) -> None:
        try:
            self.nvml.nvmlEventSetFree(es)
        except (self._base_error, AttributeError):
            pass

    def _xid_loop(self, es: Any, etype: int) -> None:
        """Wait for Xid events (``XID_WAIT_MS`` at a time, so close() is never held long) and queue them for
        the next sample; sampling never waits on this thread."""
        nv = self.nvml
        timeout_err = getattr(nv, "NVMLError_Timeout", None)
        failures = 0
        while not self._xid_stop.is_set():
            try:
                data = nv.nvmlEventSetWait_v2(es, XID_WAIT_MS)
            except self._base_error as e:
                if (timeout_err is not None and isinstance(e, timeout_err)) or getattr(e, "value", None) == 10:
                    continue  # NVML_ERROR_TIMEOUT: nothing happened
                failures += 1
                if failures == 1:
                    LOG.warning("waiting for Xid events failed (%s); retrying every second", clean_opt(str(e), 120))
                self._xid_stop.wait(1.0)
                continue
            except Exception:  # noqa: BLE001 - a bug must not end the watch silently
                LOG.exception("Xid event thread")
                self._xid_stop.wait(1.0)
                continue
            self._queue_xid(data, etype)

    def _queue_xid(self, data: Any, etype: int) -> None:
        """Queue one event of the set for the next sample when it is a critical Xid on a GPU we know."""
        if not int(getattr(data, "eventType", 0)) & etype:
            return
        gpu = self._gpu_of(data.device)
        xid = int(data.eventData)
        if gpu is None:
            LOG.warning("Xid %d on a GPU NVML did not name", xid)
            return
        with self._lock:
            self._xid_queue.append((self.clock(), gpu, xid))

    def _poll_xids(self) -> None:
        """Without the thread (a virtual clock): take every event due now, with zero waits."""
        es = self._event_set
        for _ in range(256):
            try:
                data = self.nvml.nvmlEventSetWait_v2(es, 0)
            except self._base_error:
                return  # Timeout: none left (any other error: try again next sample)
            self._queue_xid(data, self._xid_etype)

    def _gpu_of(self, device: Any) -> int | None:
        """The index of the GPU an event names (its handle), or None."""
        for i, h in enumerate(self._handles):
            if h is device or ((a := _address(h)) is not None and a == _address(device)):
                return i
        try:
            i = int(self.nvml.nvmlDeviceGetIndex(device))
        except (self._base_error, AttributeError, TypeError, ValueError):
            return None
        return i if 0 <= i < len(self._handles) else None

    def _take_xids(self) -> None:
        """Fold the Xids the thread queued into the per-GPU tallies; each one is an ``xid`` event."""
        with self._lock:
            got, self._xid_queue = self._xid_queue, []
        for t, gpu, xid in got:
            tally = self._xids.setdefault(gpu, {})
            tally_xid(tally, xid, t)
            self._xid_tallies[gpu] = tuple(sorted(tally.values(), key=lambda x: x.xid))  # changes only here
            self._pending_events.append(Event(t=t, kind="xid", text=xid_text(gpu, xid), data={"gpu": gpu, "xid": xid}))

    def _static(self, fn: Callable[..., Any]) -> Any:  # called with no arguments (lambdas may bind defaults)
        try:
            return fn()
        except (self._base_error, AttributeError):
            return None

    def _device_info(self, i: int, h: Any) -> DeviceInfo:
        nv = self.nvml
        st = self._static
        bus_id = st(lambda: _s(nv.nvmlDeviceGetPciInfo(h).busId)) or f"unknown:{i}"
        mem = self._probe_memory(i, h)
        plimit = st(lambda: nv.nvmlDeviceGetEnforcedPowerLimit(h))
        arch = st(lambda: nv.nvmlDeviceGetArchitecture(h))
        ncpu = os.cpu_count() or 64
        masks = st(lambda: nv.nvmlDeviceGetCpuAffinity(h, max(16, math.ceil(ncpu / 64))))  # ≥ 1024 CPUs
        numa = self._numa_node(h, bus_id)
        gpm = bool(st(lambda: nv.nvmlGpmQueryDeviceSupport(h).isSupportedDevice))
        self._gpm_ok[i] = gpm and self.pcie_mode != "throughput"
        links, version = self._probe_nvlinks(i, h)
        link_rate = self._nvlink_speed(h, links) if links else None
        return DeviceInfo(
            index=i,
            name=st(lambda: _s(nv.nvmlDeviceGetName(h))) or "unknown GPU",
            uuid=st(lambda: _s(nv.nvmlDeviceGetUUID(h))) or "",
            bus_id=normalize_bus_id(bus_id),
            architecture=ARCHITECTURES.get(arch) if arch is not None else None,
            memory_total_bytes=int(mem.total) if mem is not None else None,
            sm_clock_max_mhz=st(lambda: nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_SM)),
            mem_clock_max_mhz=st(lambda: nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_MEM)),
            graphics_clock_max_mhz=st(lambda: nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_GRAPHICS)),
            power_limit_w=plimit / 1000.0 if plimit is not None else None,
            pcie_gen_gpu_max=st(lambda: nv.nvmlDeviceGetGpuMaxPcieLinkGeneration(h)),
            pcie_width_gpu_max=None,  # NVML reports one max width, limited by GPU and slot together
            pcie_gen_sys_max=st(lambda: nv.nvmlDeviceGetMaxPcieLinkGeneration(h)),
            pcie_width_sys_max=st(lambda: nv.nvmlDeviceGetMaxPcieLinkWidth(h)),
            cpu_affinity=cpu_list([int(m) for m in masks]) if masks is not None else None,
            numa_node=numa if numa is not None and numa >= 0 else None,
            nvlink_version=version,
            nvlinks_active=len(links),
            gpm_supported=gpm,
            nvlink_link_bytes_per_s=link_rate,
            memory_info_version=None if mem is None else (2 if self._mem_v2.get(i) else 1),
            mig_instances=self._mig_instances(h),
        )

    def _numa_node(self, h: Any, bus_id: str) -> int | None:
        """The GPU's NUMA node: NVML's, else sysfs's (a live machine), else the lowest node of NVML's memory
        affinity (nvidia-smi's "NUMA Affinity"); None or negative when none answers."""
        nv = self.nvml
        numa: int | None = self._static(lambda: nv.nvmlDeviceGetNumaNodeId(h))  # an int, or None where NVML fails
        if (numa is None or numa < 0) and self.read_sysfs:
            numa = _sysfs_numa(bus_id)
        if numa is None or numa < 0:  # nvidia-smi's "NUMA Affinity": the memory affinity node set
            nodes = self._static(lambda: nv.nvmlDeviceGetMemoryAffinity(h, 1, 0))  # 0 = NVML_AFFINITY_SCOPE_NODE
            if nodes is not None and int(nodes[0]):
                m = int(nodes[0])
                numa = (m & -m).bit_length() - 1
        return numa

    def _probe_nvlinks(self, i: int, h: Any) -> tuple[list[int], int | None]:
        """GPU ``i``'s active NVLinks and their version; remembers the links and what is at their far ends
        (the peers' bus ids and kinds, and how many links go to an NVSwitch) for the topology."""
        nv = self.nvml
        st = self._static
        links: list[int] = []
        version = None
        remotes: list[tuple[str, int]] = []
        switch_links = 0
        for link in range(getattr(nv, "NVML_NVLINK_MAX_LINKS", 18)):
            try:
                state = nv.nvmlDeviceGetNvLinkState(h, link)
            except self._base_error:
                break
            if not state:
                continue
            links.append(link)
            if version is None:
                version = st(lambda link=link: nv.nvmlDeviceGetNvLinkVersion(h, link))
            kind = st(lambda link=link: nv.nvmlDeviceGetNvLinkRemoteDeviceType(h, link))
            if kind == 2:
                switch_links += 1
            else:
                rb = st(lambda link=link: _s(nv.nvmlDeviceGetNvLinkRemotePciInfo(h, link).busId))
                if rb:
                    remotes.append((rb, kind or 0))
        self._nvlink_links[i] = links
        self._nvlink_remote[i] = (remotes, switch_links)
        return links, version

    def _mig_instances(self, h: Any) -> int | None:
        """How many MIG devices GPU ``h`` is split into, or None when MIG mode is off (or not supported).
        Read only: gpuscope never changes the MIG mode."""
        nv = self.nvml
        mode = self._static(lambda: nv.nvmlDeviceGetMigMode(h))  # [current, pending]
        if mode is None or not int(mode[0]):
            return None
        most = self._static(lambda: nv.nvmlDeviceGetMaxMigDeviceCount(h)) or 0
        n = 0
        for k in range(min(int(most), 64)):
            if self._static(lambda k=k: nv.nvmlDeviceGetMigDeviceHandleByIndex(h, k)) is not None:
                n += 1  # NotFound for a slot without an instance
        return n

    def _probe_memory(self, i: int, h: Any) -> Any:
        """Memory info v2 where the driver has it (``used`` without the driver's reserved memory, as
        nvidia-smi shows it; ``reserved`` apart), else v1 (``used`` includes it). Remembered per GPU."""
        nv = self.nvml
        version = getattr(nv, "nvmlMemory_v2", None)
        if version is not None:
            try:
                mem = nv.nvmlDeviceGetMemoryInfo(h, version=version)
                self._mem_v2[i] = True
                return mem
            except (self._base_error, TypeError, AttributeError):  # no _v2 entry point, NotSupported, an old binding
                pass
        self._mem_v2[i] = False
        return self._static(lambda: nv.nvmlDeviceGetMemoryInfo(h))

    def _memory(self, i: int, h: Any) -> Any:
        nv = self.nvml
        if self._mem_v2.get(i):
            return nv.nvmlDeviceGetMemoryInfo(h, version=nv.nvmlMemory_v2)
        return nv.nvmlDeviceGetMemoryInfo(h)

    def _nvlink_speed(self, h: Any, links: list[int]) -> float | None:
        """One NVLink's speed from NVML's field values, bytes/s one direction; None where not answered.

        Read once, in calls of its own (field groups are never mixed in one call: see
        :meth:`sample`): the common speed first, else the slowest of the active links' own speeds.
        """
        nv = self.nvml
        for ids in ([FI_NVLINK_SPEED_COMMON], [FI_NVLINK_SPEED_LINKS[k] for k in links if k < len(FI_NVLINK_SPEED_LINKS)]):
            if not ids:
                continue
            got = self._static(lambda ids=ids: nv.nvmlDeviceGetFieldValues(h, ids))
            vals = [v for v in (_field_value(fv) for fv in got or []) if v is not None and v > 0]
            if vals:
                return min(vals) * 1e6  # MB/s
        return None

    def _pairs(self, devices: list[DeviceInfo]) -> list[PairLink]:
        nv = self.nvml
        pairs = []
        for a in range(len(devices)):
            for b in range(a + 1, len(devices)):
                level = self._static(lambda a=a, b=b: nv.nvmlDeviceGetTopologyCommonAncestor(self._handles[a],
                                                                                           self._handles[b]))
                remotes_a, sw_a = self._nvlink_remote.get(a, ([], 0))
                _remotes_b, sw_b = self._nvlink_remote.get(b, ([], 0))
                count, via = nvlink_count(remotes_a, devices[b].bus_id, sw_a, sw_b)
                pairs.append(PairLink(a=a, b=b, pcie_path=topology_label(level) if level is not None else "SYS",
                                      nvlinks=count, via_nvswitch=via))
        return pairs

    # ----------------------------------------------------------------- dynamic
    def _call(self, i: int, key: str, fn: Callable[..., Any], *args: Any) -> Any:
        if (i, key) in self._unsupported:
            return None
        try:
            return fn(*args)
        except self._errors:
            with self._lock:
                self._unsupported.add((i, key))
            return None
        except self._base_error as e:
            if self._lost_error is not None and isinstance(e, self._lost_error):
                raise _Lost() from None
            return None  # a transient failure: not supported *now*

    def _read_kept(self, i: int, key: str, last: Any, fn: Callable[..., Any], *args: Any) -> Any:
        """Call ``key`` (:meth:`_call`); a read that failed this once keeps ``last``, a NotSupported one gives None."""
        got = self._call(i, key, fn, *args)
        return got if got is not None or not self.supported(i, key) else last

    def supported(self, i: int, key: str) -> bool:
        """False once call ``key`` answered NotSupported on GPU ``i``."""
        return (i, key) not in self._unsupported

    def read_on_demand(self, energy_wanted: Callable[[], bool] | None,
                       process_util_wanted: Callable[[], bool] | None) -> None:
        """Read the energy counter and the per-process utilisation only while ``energy_wanted()`` /
        ``process_util_wanted()`` say something shows or stores them (None: always). They are the costliest calls
        the source makes (on H200, 4.1-4.5 ms and 2.0-2.4 ms of CPU a GPU a read, docs/real-gpus.md), and the live
        screen shows neither unless it records (both) or shows its processes panel or a detail view (the
        utilisation). Each is asked once a tick on the sampler's thread: plain reads, no locks.

        A reading not wanted is left out of the frame (None): the energy counter is read again at the first tick it
        is wanted (then every :data:`ENERGY_INTERVAL_S`), its estimate started afresh; the tick at which the
        utilisation becomes wanted is a slow one (the process list and its figures at once, then every 5 s). The
        figures of the last process list stay until the next slow tick after they stop being wanted."""
        self._energy_wanted_fn = energy_wanted
        self._util_wanted_fn = process_util_wanted

    def sample(self) -> Frame:
        """Read every GPU once. Never raises for one GPU's failure."""
        assert self.inventory is not None and self._pool is not None, "open() first"
        t0 = self.clock()
        tick = self._plan_tick(t0)
        futures = self._submit_concurrent(tick)  # the slow calls run on the pool while the basics are read here
        readings = self._read_basics(tick)
        t = self.clock()
        out = [self._reading(i, basic, futures, tick, t) for i, basic in readings]
        if tick.slow and self.read_sysfs:
            self._procs.keep(p.pid for g in out for p in g.processes or ())
        if self._event_set is not None and self._xid_thread is None:
            self._poll_xids()
        self._take_xids()
        if self._xid_tallies:  # every reading carries its GPU's tally (a lost GPU too: Xid 79 comes with it)
            out = [replace(r, xids=self._xid_tallies[r.index]) if r.index in self._xid_tallies else r for r in out]
        events = tuple(self._pending_events)
        self._pending_events.clear()
        return Frame(t=(t0 + t) / 2, gpus=tuple(out), events=events)

    def _plan_tick(self, t0: float) -> Tick:
        """What this tick reads (the slow path, the health counters, per-process utilisation, energy), decided
        once for every GPU; the last-read times and wants are updated."""
        util_wanted = self._util_wanted_fn is None or self._util_wanted_fn()
        energy_wanted = self._energy_wanted_fn is None or self._energy_wanted_fn()  # once a tick: every GPU alike
        energy_was_wanted, self._energy_was_wanted = self._energy_was_wanted, energy_wanted
        if energy_was_wanted and not energy_wanted:  # a spell without reads: nothing read before is carried into it
            for state in self._slow.values():
                state.energy, state.energy_t, state.meter = None, -1e18, EnergyMeter()
        slow = slow_tick_due(t0, self._slow_last, self.slow_interval_s, util_wanted, self._util_was_wanted)
        self._util_was_wanted = util_wanted
        if slow:
            self._slow_last = t0
        health = slow and (self._health_last is None or t0 - self._health_last >= HEALTH_INTERVAL_S - HEALTH_EARLY_S
                           or t0 < self._health_last)
        if health:
            self._health_last = t0
        return Tick(slow, health, util_wanted, energy_wanted, energy_was_wanted)

    def _submit_concurrent(self, tick: Tick) -> dict[tuple[int, str], Future[Any]]:
        """Start the slow calls of every GPU still there on the pool: PCIe throughput (where GPM is not), the
        field values, ECC and the row remapper on a slow tick. Keyed (GPU, what)."""
        assert self._pool is not None
        nv = self.nvml
        futures: dict[tuple[int, str], Future[Any]] = {}
        for i, h in enumerate(self._handles):
            if i in self._lost:
                continue
            if not self._gpm_ok.get(i):
                for key, counter in (("pcie_tx", nv.NVML_PCIE_UTIL_TX_BYTES), ("pcie_rx", nv.NVML_PCIE_UTIL_RX_BYTES)):
                    if self.supported(i, key):
                        futures[(i, key)] = self._pool.submit(self._call_safe, i, key, nv.nvmlDeviceGetPcieThroughput,
                                                              h, counter)
            # health counters and per-link NVLink counters go in separate calls: mixed in one call they
            # corrupted the heap on H200 / driver 580 (tools/crash_probe.py)
            for key, ids in (("fields", self._field_ids(i, tick.slow, tick.health)),
                             ("nvlink_fields", self._nvlink_field_ids(i) if tick.slow else [])):
                if ids:
                    futures[(i, key)] = self._pool.submit(self._call_safe, i, key, nv.nvmlDeviceGetFieldValues, h, ids)
            if tick.slow:  # ECC and row remapper: five calls a GPU every slow tick (5 s), ~0.003 ms CPU each on H200
                futures[(i, "ecc")] = self._pool.submit(self._ecc_safe, i, h)
            if tick.health and self._nvlink_links.get(i):  # NVLink error counters: with the PCIe ones, every 15 s
                futures[(i, "nvlink_errors")] = self._pool.submit(self._nvlink_errors_safe, i, h)
        return futures

    def _read_basics(self, tick: Tick) -> list[tuple[int, BasicFields | None]]:
        """Each GPU's basic fields, on this thread (None: lost, now or before)."""
        readings: list[tuple[int, BasicFields | None]] = []
        for i, h in enumerate(self._handles):
            if i in self._lost:
                readings.append((i, None))
                continue
            try:
                readings.append((i, self._basic(i, h, tick)))
            except _Lost:
                self._mark_lost(i)
                readings.append((i, None))
        return readings

    def _reading(self, i: int, basic: BasicFields | None, futures: dict[tuple[int, str], Future[Any]], tick: Tick,
                 t: float) -> GpuReading:
        """GPU ``i``'s reading: its basic fields and what the pool's calls and GPM gave (lost if any call found
        the GPU gone)."""
        if basic is None:
            return GpuReading(index=i, lost=True)
        extra: ReadingFields = {}
        kept = self._slow_state(i).fields
        fv: list[Any] = []
        lost = False
        if futures:  # most ticks with GPM start none
            lost = self._take_throughput(i, futures, extra)
            fv, fields_lost = self._field_results(i, futures)
            ecc_lost = self._take_ecc(futures.get((i, "ecc")), kept, extra)
            nvl_lost = self._take_ecc(futures.get((i, "nvlink_errors")), kept, extra, NVLINK_ERR_KEYS)
            lost = lost or fields_lost or ecc_lost or nvl_lost
        if fv:
            fields = self._fields(i, fv, t)
            if tick.slow:
                for sk in (*_SLOW_EVERY, *(HEALTH_KEYS if tick.health else ())):
                    if (sv := fields.get(sk)) is not None:
                        kept[sk] = sv
                    else:
                        kept.pop(sk, None)
            extra.update(fields)
        if not tick.slow:
            extra.update(kept)
        else:  # the health counters not read this tick (not due, or the read failed): the last ones read
            for hk in (*HEALTH_KEYS, *ECC_KEYS, *NVLINK_ERR_KEYS):
                if hk not in extra and (hv := kept.get(hk)) is not None:
                    extra[hk] = hv
        if self._gpm_ok.get(i):
            try:
                extra.update(self._gpm(i, self._handles[i], tick.health))
            except _Lost:
                lost = True
        if lost:
            self._mark_lost(i)
            return GpuReading(index=i, lost=True)
        return GpuReading(**basic, **extra)  # one reading, built once from both

    @staticmethod
    def _take_throughput(i: int, futures: dict[tuple[int, str], Future[Any]], extra: ReadingFields) -> bool:
        """PCIe throughput (NVML's KB/s → bytes/s) into ``extra``; True when a call found the GPU gone."""
        lost = False
        for key, name in _PCIE_THROUGHPUT:
            f = futures.get((i, key))
            if f is not None:
                v = f.result()
                if v is _LOST:
                    lost = True
                elif v is not None:
                    extra[name] = float(v) * 1000.0  # KB/s
        return lost

    @staticmethod
    def _field_results(i: int, futures: dict[tuple[int, str], Future[Any]]) -> tuple[list[Any], bool]:
        """The field values both field calls answered, and whether one found the GPU gone."""
        fv: list[Any] = []
        lost = False
        for key in ("fields", "nvlink_fields"):
            fut = futures.get((i, key))
            got = fut.result() if fut is not None else None
            if got is _LOST:
                lost = True
            elif got is not None:
                fv.extend(got)
        return fv, lost

    @staticmethod
    def _take_ecc(fut: Future[Any] | None, kept: ReadingFields, extra: ReadingFields,
                  keys: tuple[Literal[EccKey, NvlinkErrKey], ...] = ECC_KEYS) -> bool:
        """ECC and row-remapper counts (or the NVLink error counters: ``keys``) into ``extra`` and the kept slow
        readings (a count not answered is forgotten); True when the call found the GPU gone."""
        got_ecc = fut.result() if fut is not None else None
        if got_ecc is _LOST:
            return True
        if got_ecc is not None:
            for ek in keys:
                if (ev := got_ecc.get(ek)) is not None:
                    kept[ek] = extra[ek] = ev
                else:
                    kept.pop(ek, None)
        return False

    def _ecc_safe(self, i: int, h: Any) -> Any:
        try:
            return self._ecc(i, h)
        except _Lost:
            return _LOST

    def _ecc(self, i: int, h: Any) -> ReadingFields:
        """ECC error counts (where ECC is on) and the row remapper, as reading fields (None: not read).
        Each call that answers NotSupported is never made again on this GPU."""
        nv = self.nvml
        c = self._call
        out: ReadingFields = {}
        if self.supported(i, "ecc_mode") and i not in self._ecc_on:
            mode = c(i, "ecc_mode", nv.nvmlDeviceGetEccMode, h)  # [current, pending]
            if mode is not None:  # ECC mode changes only with a GPU reset: asked until it answers, then never
                with self._lock:
                    if int(mode[0]):
                        self._ecc_on.add(i)
                    else:  # ECC off: no counts to read
                        self._unsupported.add((i, "ecc_mode"))
                        self._unsupported.add((i, "ecc"))
        if self.supported(i, "ecc"):
            corrected, uncorrected = nv.NVML_MEMORY_ERROR_TYPE_CORRECTED, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
            counts: tuple[tuple[EccKey, Any, Any], ...] = (
                ("ecc_corrected_volatile", corrected, nv.NVML_VOLATILE_ECC),
                ("ecc_uncorrected_volatile", uncorrected, nv.NVML_VOLATILE_ECC),
                ("ecc_corrected_aggregate", corrected, nv.NVML_AGGREGATE_ECC),
                ("ecc_uncorrected_aggregate", uncorrected, nv.NVML_AGGREGATE_ECC))
            for key, err, counter in counts:
                v = c(i, "ecc", nv.nvmlDeviceGetTotalEccErrors, h, err, counter)
                out[key] = int(v) if v is not None else None
        rows = c(i, "remap", nv.nvmlDeviceGetRemappedRows, h) if hasattr(nv, "nvmlDeviceGetRemappedRows") else None
        if rows is not None:
            corr, unc, pending, failure = rows
            out["remapped_rows_correctable"], out["remapped_rows_uncorrectable"] = int(corr), int(unc)
            out["remap_pending"], out["remap_failure"] = bool(pending), bool(failure)
        return out

    def _nvlink_errors_safe(self, i: int, h: Any) -> Any:
        try:
            return self._nvlink_errors(i, h)
        except _Lost:
            return _LOST

    def _nvlink_errors(self, i: int, h: Any) -> ReadingFields:
        """GPU ``i``'s NVLink error counters, each summed over its active links: NVML's all-links fields in one call
        of their own (never mixed with per-link fields: that corrupted the heap on H200, driver 580), else, for a
        counter whose field does not answer, ``nvmlDeviceGetNvLinkErrorCounter`` on every active link. A counter
        neither answers is left out (unknown, never 0); a call that answers NotSupported is not made again."""
        nv = self.nvml
        links = self._nvlink_links.get(i, [])
        out: ReadingFields = {}
        got = self._call(i, "nvlink_errors", nv.nvmlDeviceGetFieldValues, h, [fid for _k, fid, _c in NVLINK_ERRORS])
        answered = {fv.fieldId: v for fv in got or () if (v := _field_value(fv)) is not None}
        for key, fid, counter in NVLINK_ERRORS:
            total = int(answered[fid]) if fid in answered else self._nvlink_error_sum(i, h, key, counter, links)
            if total is not None:
                out[key] = total
        return out

    def _nvlink_error_sum(self, i: int, h: Any, key: str, counter: str, links: list[int]) -> int | None:
        """NVML's per-link error counter ``counter`` (``NVML_NVLINK_ERROR_DL_REPLAY``…) summed over ``links``; None
        when NVML lacks the call or a link does not answer."""
        nv = self.nvml
        fn, kind = getattr(nv, "nvmlDeviceGetNvLinkErrorCounter", None), getattr(nv, counter, None)
        if fn is None or kind is None or not links:
            return None
        total = 0
        for link in links:
            v = self._call(i, f"nvlink_error:{key}", fn, h, link, kind)
            if v is None:
                return None
            total += int(v)
        return total

    def _call_safe(self, i: int, key: str, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return self._call(i, key, fn, *args)
        except _Lost:
            return _LOST

    def _slow_state(self, i: int) -> _SlowState:
        """GPU ``i``'s kept slow-path readings, made at its first tick (not built anew at every tick to be
        thrown away, as ``setdefault(i, _SlowState())`` would)."""
        state = self._slow.get(i)
        if state is None:
            state = self._slow[i] = _SlowState()
        return state

    def _mark_lost(self, i: int) -> None:
        if i not in self._lost:
            self._lost.add(i)
            name = self.inventory.devices[i].name if self.inventory else ""
            self._pending_events.append(Event(t=self.clock(), kind="gpu_lost", text=f"GPU{i} {name} fell off the bus",
                                              data={"gpu": i}))

    def _basic(self, i: int, h: Any, tick: Tick) -> BasicFields:
        """GPU ``i``'s basic readings, as :class:`GpuReading`'s fields."""
        nv = self.nvml
        c = self._call
        util = c(i, "util", nv.nvmlDeviceGetUtilizationRates, h)
        mem = c(i, "mem", self._memory, i, h)
        power = c(i, "power", nv.nvmlDeviceGetPowerUsage, h)
        kept = self._slow_state(i)
        if tick.slow:  # the power limits and the link width on the slow path (5 s), carried: 0.03 and 0.1 ms of CPU
            # a read on H200 (docs/performance.md); the generation drops at idle and is read every tick
            kept.power_limit = self._read_kept(i, "power_limit", kept.power_limit, nv.nvmlDeviceGetEnforcedPowerLimit, h)
            kept.power_mgmt_limit = self._read_kept(i, "power_mgmt_limit", kept.power_mgmt_limit,
                                                    nv.nvmlDeviceGetPowerManagementLimit, h)
            kept.pcie_width = self._read_kept(i, "pcie_width", kept.pcie_width, nv.nvmlDeviceGetCurrPcieLinkWidth, h)
        limit = kept.power_limit
        now = self.clock()
        if energy_read_due(now, kept.energy_t, tick.slow, tick.energy_wanted, tick.energy_was_wanted):
            # ~4 ms of CPU per call on H200 (measured)
            kept.energy, kept.energy_t = c(i, "energy", nv.nvmlDeviceGetTotalEnergyConsumption, h), now
        energy = kept.energy
        reasons = c(i, "clock_events", nv.nvmlDeviceGetCurrentClocksEventReasons, h)
        if tick.slow:
            procs = self._processes(i, h, util_due=tick.health, util_wanted=tick.util_wanted)
            kept.procs = procs
        else:
            procs = kept.procs
        return BasicFields(
            index=i,
            util_gpu_pct=float(util.gpu) if util is not None else None,
            util_mem_pct=float(util.memory) if util is not None else None,
            mem_used_bytes=int(mem.used) if mem is not None else None,
            mem_total_bytes=int(mem.total) if mem is not None else None,
            mem_reserved_bytes=int(mem.reserved) if mem is not None and self._mem_v2.get(i) else None,
            sm_clock_mhz=c(i, "clk_sm", nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM),
            mem_clock_mhz=c(i, "clk_mem", nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_MEM),
            graphics_clock_mhz=c(i, "clk_gfx", nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_GRAPHICS),
            power_w=power / 1000.0 if power is not None else None,
            power_limit_w=limit / 1000.0 if limit is not None else None,
            power_mgmt_limit_w=_watts(kept.power_mgmt_limit),
            energy_j=kept.meter.step(now, power / 1000.0 if power is not None else None,
                                     energy / 1000.0 if energy is not None else None) if tick.energy_wanted else None,
            temp_gpu_c=_num(c(i, "temp", nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU)),
            fan_pct=_num(c(i, "fan", nv.nvmlDeviceGetFanSpeed, h)),
            pstate=c(i, "pstate", nv.nvmlDeviceGetPerformanceState, h),
            clock_event_reasons=int(reasons) if reasons is not None else None,
            pcie_gen=c(i, "pcie_gen", nv.nvmlDeviceGetCurrPcieLinkGeneration, h),
            pcie_width=kept.pcie_width,
            processes=procs,
        )

    def _processes(self, i: int, h: Any, util_due: bool, util_wanted: bool) -> tuple[ProcessInfo, ...] | None:
        """GPU ``i``'s processes (slow path only): compute and graphics lists merged by pid (kind C, G or
        C+G), each with its user and command, and its SM % where NVML reports per-process utilisation.
        None when neither list is reported (NotSupported: never asked again).

        The per-process utilisation is read when ``util_due`` (the health ticks, every 15 s: 1.5 ms of CPU a
        read on H200 with one process, docs/performance.md) and carried between reads; a process that
        appeared since has no figure until the next read. Not ``util_wanted`` (:meth:`read_on_demand`): not
        read, no figure, nothing carried (read at the first slow tick it is wanted again)."""
        nv = self.nvml
        compute = self._call(i, "procs", nv.nvmlDeviceGetComputeRunningProcesses, h)
        graphics = None
        if hasattr(nv, "nvmlDeviceGetGraphicsRunningProcesses"):
            graphics = self._call(i, "gprocs", nv.nvmlDeviceGetGraphicsRunningProcesses, h)
        if compute is None and graphics is None:
            return None
        merged = _merge_process_lists(compute, graphics)
        util = self._util_of(i, h, merged, util_due, util_wanted)
        out = []
        for pid, (kind, used, p) in merged.items():
            user, name, command = self._process_facts(pid, p)
            sm: float | None = None
            mem: float | None = None
            if util is not None and pid in util:  # else new since the read: no figure yet
                sm, mem = util[pid]
            gi = getattr(p, "gpuInstanceId", None)  # 0xFFFFFFFF (or absent): not in MIG mode
            out.append(ProcessInfo(pid=pid, used_memory_bytes=used, name=name, user=user, command=command,
                                   sm_pct=sm, mem_pct=mem, kind=kind,
                                   gpu_instance=int(gi) if gi is not None and 0 <= int(gi) < 0xFFFFFFFF else None))
        return tuple(out)

    def _util_of(self, i: int, h: Any, merged: dict[int, Any], util_due: bool, util_wanted: bool
                 ) -> dict[int, tuple[float, float]] | None:
        """Per-process (SM %, memory %) of GPU ``i``'s processes: read when due, else the last read's."""
        if not util_wanted:  # nothing carried into the next wanted spell, nor NVML's samples from before it
            self._util_kept.pop(i, None)
            self._util_seen.pop(i, None)
            return None
        if util_due or i not in self._util_kept:  # a process without a sample since the last read used 0 %
            got = self._process_util(i, h) if merged else None
            util = self._util_kept[i] = None if got is None else {pid: got.get(pid, (0.0, 0.0)) for pid in merged}
            return util
        return self._util_kept[i]

    def _process_facts(self, pid: int, p: Any) -> tuple[str, str | None, str | None]:
        """(user, name, command) of a process: /proc's on a live machine, the simulated NVML's own otherwise."""
        if self.read_sysfs:
            facts = self._procs.facts(pid)
            return facts.user, facts.name, facts.command
        # the simulated NVML carries its own (simulated) facts
        user = getattr(p, "user", None) or UNKNOWN_USER
        name = clean_opt(getattr(p, "name", None), 32)
        cmd = getattr(p, "cmdline", None)
        command = clean_opt(cmd and redact_command(cmd), COMMAND_MAX)  # as /proc's: secrets redacted
        return user, name, command

    def _process_util(self, i: int, h: Any) -> dict[int, tuple[float, float]] | None:
        """Per-pid (SM %, memory %) from ``nvmlDeviceGetProcessUtilization`` since the previous read: the
        newest sample of each pid. NVML returns samples only for processes that used the GPU, and
        NotFound when there are none (every process 0 %). None when not reported: NotSupported (then never
        asked again on this GPU) or a transient error."""
        nv = self.nvml
        fn = getattr(nv, "nvmlDeviceGetProcessUtilization", None)
        if fn is None or not self.supported(i, "proc_util"):
            return None
        not_found = getattr(nv, "NVMLError_NotFound", None)
        try:
            samples = fn(h, self._util_seen.get(i, 0))
        except self._errors:
            with self._lock:
                self._unsupported.add((i, "proc_util"))
            return None
        except self._base_error as e:
            if self._lost_error is not None and isinstance(e, self._lost_error):
                raise _Lost() from None
            if (not_found is not None and isinstance(e, not_found)) or getattr(e, "value", None) == 0:
                return {}  # no sample since the last read (nvidia-ml-py raises NVMLError(SUCCESS) for "none")
            return None
        newest: dict[int, Any] = {}
        for sm in samples or ():
            pid = int(sm.pid)
            if pid not in newest or sm.timeStamp > newest[pid].timeStamp:
                newest[pid] = sm
        if newest:
            self._util_seen[i] = max(int(sm.timeStamp) for sm in newest.values())
        return {pid: (float(min(100, sm.smUtil)), float(min(100, sm.memUtil))) for pid, sm in newest.items()}

    def _field_ids(self, i: int, slow: bool = True, health: bool = True) -> list[Any]:
        """Memory temperature on slow ticks (``slow_interval_s``), with the PCIe health counters on the slow
        ticks :data:`HEALTH_INTERVAL_S` apart."""
        if not slow:
            return []
        return [FI_MEMORY_TEMP, *((FI_PCIE_REPLAY, FI_PCIE_RECOVERY, *FI_PCIE_ERRORS) if health else ())]

    def _nvlink_field_ids(self, i: int) -> list[Any]:
        """Per-link NVLink data counters (KiB) where GPM does not give NVLink rates. Read on slow ticks
        only: 36 per-link fields cost ~50 ms of CPU a GPU on H200 (measured), so the NVLink rate on
        GPUs without GPM is an average over the slow interval (5 s), carried between reads."""
        if self._gpm_ok.get(i):
            return []
        return [(fid, link) for link in self._nvlink_links.get(i, []) for fid in (FI_NVLINK_DATA_TX, FI_NVLINK_DATA_RX)]

    def _fields(self, i: int, values: Any, t: float) -> ReadingFields:
        out: ReadingFields = {}
        errs: list[float] = []
        tx = rx = 0.0
        have_nvlink = False
        for fv in values:
            v = _field_value(fv)
            fid = fv.fieldId
            if v is None:
                continue
            if fid == FI_MEMORY_TEMP:
                out["temp_mem_c"] = float(v)
            elif fid == FI_PCIE_REPLAY:
                out["pcie_replay_count"] = int(v)
            elif fid == FI_PCIE_RECOVERY:
                out["pcie_recovery_count"] = int(v)
            elif fid in FI_PCIE_ERRORS:
                errs.append(v)
            elif fid == FI_NVLINK_DATA_TX:
                tx += v
                have_nvlink = True
                ts = getattr(fv, "timestamp", 0)
                if ts and ts > 0:
                    t = ts / 1e6  # the counter's own timestamp (µs) makes short intervals exact
            elif fid == FI_NVLINK_DATA_RX:
                rx += v
                have_nvlink = True
        if errs:
            out["pcie_error_count"] = int(sum(errs))
        if have_nvlink:
            prev = self._nvlink_prev.get(i)
            self._nvlink_prev[i] = (t, tx, rx)
            if prev is not None and t > prev[0] and tx >= prev[1] and rx >= prev[2]:
                dt = t - prev[0]
                out["nvlink_tx_bytes_per_s"] = (tx - prev[1]) * 1024 / dt  # KiB counters
                out["nvlink_rx_bytes_per_s"] = (rx - prev[2]) * 1024 / dt
        return out

    def _gpm(self, i: int, h: Any, health: bool) -> ReadingFields:
        """GPU ``i``'s GPM metrics since the last tick; on a ``health`` tick (every 15 s) also the graphics
        engine's activity since the last of those (:data:`GPM_SLOW`: that one metric costs 1.4–1.9 ms of CPU a
        read on H200, the other eight 0.01 ms together, tools/nvml_call_costs.py), and once at the start over
        the first tick (so that it shows from the second sample), carried between reads (a failed read on a
        health tick leaves it out until the next)."""
        nv = self.nvml
        if (i, "gpm") in self._unsupported:
            return {}
        spare = self._gpm_spare.get(i)
        sample = spare.pop() if spare else None
        try:
            if sample is None:
                sample = nv.nvmlGpmSampleAlloc()
            nv.nvmlGpmSampleGet(h, sample)
        except self._base_error as e:
            if sample is not None:
                self._gpm_free(sample)
            if self._lost_error is not None and isinstance(e, self._lost_error):
                raise _Lost() from None
            self._unsupported.add((i, "gpm"))
            self._gpm_off(i)
            return {}
        prev = self._gpm_prev.get(i)
        self._gpm_prev[i] = sample
        old_slow = self._gpm_slow.get(i) if health else None
        if health:
            self._gpm_slow[i] = sample
        try:
            got: ReadingFields | None = None  # the graphics engine's activity, when read this tick
            if prev is None:
                out: ReadingFields = {}
            elif (old_slow is not None and old_slow is prev) or i not in self._gr_kept:
                # one call for all nine: every tick is a health tick (--interval ≥ 15 s), or the first read
                out = got = self._gpm_metrics(i, prev, sample, _GPM_METRICS + GPM_SLOW)
            else:
                out = self._gpm_metrics(i, prev, sample, _GPM_METRICS)
            if got is None and old_slow is not None:
                got = self._gpm_metrics(i, old_slow, sample, GPM_SLOW)
            if got is not None:
                gr: ReadingFields = {}
                for key in _GPM_SLOW_KEYS:
                    if key in got:
                        gr[key] = got[key]
                self._gr_kept[i] = gr
            out.update(self._gr_kept.get(i, {}))
        finally:
            self._gpm_release(i, prev)
            if old_slow is not prev:
                self._gpm_release(i, old_slow)
        return out

    def _gpm_off(self, i: int) -> None:
        """GPM stopped answering on GPU ``i``: no reading of it is carried any more, its samples are freed."""
        self._gpm_ok[i] = False
        self._gr_kept.pop(i, None)
        for x in self._gpm_take(i):
            self._gpm_free(x)

    def _gpm_take(self, i: int) -> list[Any]:
        """GPU ``i``'s GPM samples (the last tick's, the last health tick's, often one, and the spares), no longer
        held."""
        held = {id(x): x for x in (self._gpm_prev.pop(i, None), self._gpm_slow.pop(i, None),
                                   *self._gpm_spare.pop(i, ())) if x is not None}
        return list(held.values())

    def _gpm_free(self, sample: Any) -> None:
        try:
            self.nvml.nvmlGpmSampleFree(sample)
        except self._base_error:
            pass

    def _gpm_metrics(self, i: int, sample1: Any, sample2: Any, metrics: tuple[int, ...]) -> ReadingFields:
        """``metrics`` between two GPM samples of GPU ``i`` ({} when NVML refuses)."""
        nv = self.nvml
        try:
            mg = self._gpm_mg
            if mg is None:  # one struct, filled again at every read (1024 slots: allocated once, not per tick)
                mg = self._gpm_mg = self._gpm_struct()
            got = mg.metrics  # the struct's own slots (a view, not a copy): taken once, not once a slot
            if isinstance(mg, ctypes.Structure):  # the slots this read uses zeroed as in a new one: nothing of the
                # last read is left where it reads (not all 40 KB: the struct is read again every second)
                ctypes.memset(ctypes.addressof(got), 0, len(metrics) * ctypes.sizeof(got._type_))
            mg.version = nv.NVML_GPM_METRICS_GET_VERSION
            mg.numMetrics = len(metrics)
            mg.sample1 = sample1
            mg.sample2 = sample2
            for k, m in enumerate(metrics):
                got[k].metricId = m
            nv.nvmlGpmMetricsGet(mg)
        except self._base_error:
            return {}
        vals = {}
        for k in range(len(metrics)):
            slot = got[k]
            if slot.nvmlReturn == 0:
                vals[slot.metricId] = slot.value
        out: ReadingFields = {}
        for key, mid, scale in _GPM_FIELDS:
            v = vals.get(mid)
            if v is not None and math.isfinite(v) and v >= 0:
                out[key] = float(v) * scale
        if not self._nvlink_links.get(i):
            out.pop("nvlink_tx_bytes_per_s", None)
            out.pop("nvlink_rx_bytes_per_s", None)
        return out

    def _gpm_release(self, i: int, sample: Any) -> None:
        """A GPM sample that neither the next tick nor the next health tick will use: kept among GPU ``i``'s spares
        (the next ticks' samples), or freed when it has two."""
        if sample is None or sample is self._gpm_prev.get(i) or sample is self._gpm_slow.get(i):
            return
        spare = self._gpm_spare.setdefault(i, [])
        if len(spare) < 2:
            spare.append(sample)
            return
        self._gpm_free(sample)

    def _gpm_struct(self) -> Any:
        """A metrics-get struct with room for :data:`_GPM_SLOTS` metrics.

        nvidia-ml-py sizes ``c_nvmlGpmMetricsGet_t.metrics`` with its own ``NVML_GPM_METRIC_MAX``
        (333 in 13.610, 477 in 13.615); a driver built with a larger maximum writes past a smaller
        array. On real H200s with nvidia-ml-py 13.610 that corrupted the heap ("free(): invalid next
        size"), so the struct is rebuilt here with the binding's own field types and a larger array.
        """
        cls = getattr(self, "_gpm_cls", None)
        if cls is None:
            nv = self.nvml
            # the binding's ctypes types (untyped), or None in the simulated NVML
            metric_t: Any = getattr(nv, "c_nvmlGpmMetric_t", None)
            sample_t: Any = getattr(nv, "c_nvmlGpmSample_t", None)
            if metric_t is None or sample_t is None:  # the simulated NVML: its own plain object
                cls = nv.c_nvmlGpmMetricsGet_t
            else:
                class MetricsGet(ctypes.Structure):
                    _fields_ = [("version", ctypes.c_uint), ("numMetrics", ctypes.c_uint), ("sample1", sample_t),
                                ("sample2", sample_t), ("metrics", metric_t * _GPM_SLOTS)]

                cls = MetricsGet
            self._gpm_cls = cls
        return cls()

    def close(self) -> None:
        if self._xid_thread is not None:
            self._xid_stop.set()
            wake = getattr(self.nvml, "wake_waiters", None)  # the simulated NVML: end its wait now
            if callable(wake):
                wake()
            self._xid_thread.join(timeout=XID_WAIT_MS / 1000 + 1.0)
            if not self._xid_thread.is_alive() and self._event_set is not None:
                self._free_event_set(self._event_set)  # never while the thread may still wait on it
            self._xid_thread = None
            self._event_set = None
        elif self._event_set is not None:  # polled in sample(): no thread to stop
            self._free_event_set(self._event_set)
            self._event_set = None
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        for i in {*self._gpm_prev, *self._gpm_slow, *self._gpm_spare}:
            for sample in self._gpm_take(i):
                try:
                    self.nvml.nvmlGpmSampleFree(sample)
                except Exception:  # noqa: BLE001 - best effort at shutdown
                    pass
        try:
            self.nvml.nvmlShutdown()
        except Exception:  # noqa: BLE001
            pass


_LOST = object()


def _merge_process_lists(compute: Any, graphics: Any) -> dict[int, tuple[str, int | None, Any]]:
    """NVML's compute and graphics process lists by pid → (kind C, G or C+G, memory bytes, the first entry)."""
    merged: dict[int, tuple[str, int | None, Any]] = {}
    for kind, plist in (("C", compute or ()), ("G", graphics or ())):
        for p in plist:
            pid = int(p.pid)
            used = getattr(p, "usedGpuMemory", None)
            used = int(used) if used is not None else None
            if pid in merged:  # in both lists: one row, C+G, the larger memory figure
                k0, u0, p0 = merged[pid]
                merged[pid] = ("C+G" if k0 != kind else k0, u0 if used is None else max(u0 or 0, used), p0)
            else:
                merged[pid] = (kind, used, p)
    return merged


def _num(v: Any) -> float | None:
    return float(v) if v is not None else None


def _watts(mw: float | None) -> float | None:
    """NVML's milliwatts → W; None (not supported, not read yet) stays None, never 0."""
    return mw / 1000.0 if mw is not None else None


def _address(h: Any) -> int | None:
    """The address a ctypes device handle points at (two handles of one GPU compare equal), else None."""
    try:
        import ctypes  # noqa: PLC0415

        return ctypes.cast(h, ctypes.c_void_p).value
    except Exception:  # noqa: BLE001 - not a ctypes pointer (the simulated NVML's handles)
        return None


def _sysfs_numa(bus_id: str) -> int | None:
    b = bus_id.lower()
    if b.count(":") == 2:
        dom, rest = b.split(":", 1)
        b = f"{int(dom, 16):04x}:{rest}"
    try:
        with open(f"/sys/bus/pci/devices/{b}/numa_node") as f:
            n = int(f.read().strip())
        return n if n >= 0 else None
    except (OSError, ValueError):
        return None

