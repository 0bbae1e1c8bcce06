"""A simulated NVML: a fake of the ``pynvml`` module driven by a :class:`Scenario`.

It has the same function names, constants and exception classes as nvidia-ml-py for every call the
NVML source makes (the exception classes and constants *are* nvidia-ml-py's), so the real source
runs unchanged on it. ``nvmlDeviceGetPcieThroughput`` blocks 20 ms like the real call.

Everything it returns is simulated; the inventory built over it says so (``simulated=True``).
"""

from __future__ import annotations

import math
import threading
import time
import zlib
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, NoReturn, cast

import pynvml as _real

from gpuscope.core.model import CLOCK_EVENT_BITS
from gpuscope.core.topology import nvlink_link_bytes_per_s, pcie_capacity_bytes_per_s
from gpuscope.sources.scenario import GpuSpec, Scenario, SimProcess

_PATH_LEVEL = {"PIX": 10, "PXB": 20, "PHB": 30, "NODE": 40, "SYS": 50}
# Parts whose NVLINK_SPEED_MBPS fields answer NOT_SUPPORTED on real hardware (H200, driver 580:
# docs/real-gpus.md, *Measured NVML facts*); every other part answers its per-link rate from core.topology's
# table.
_SPEED_NOT_SUPPORTED = ("H200",)
_FI_NVLINK_SPEED = (84, 85, 86, 87, 88, 89, 90, 132, 133, 134, 135, 136, 137)
# PCIe health counter fields → the scenario's pcie_errors rate (replays, L0→recovery, then the AER counters: receiver
# errors carry its errors_per_s, bad TLP/DLLP, NAKs, non-fatal, fatal and lane errors stay 0)
_FI_PCIE_COUNTERS: dict[int, str | None] = {94: "replays_per_s", 169: "recoveries_per_s", 175: "errors_per_s",
                                            176: None, 177: None, 178: None, 179: None, 180: None, 183: None}
# NVLink error counters of all links (NVML_FI_DEV_NVLINK_*_ERROR_COUNT_TOTAL) → the scenario's nvlink_errors rate
_FI_NVLINK_ERRORS = {38: "crc_flit_per_s", 45: "crc_data_per_s", 52: "replays_per_s", 59: "recoveries_per_s"}
# nvmlDeviceGetNvLinkErrorCounter's counters (NVML_NVLINK_ERROR_DL_*) → the same rates
_NVLINK_COUNTERS = {_real.NVML_NVLINK_ERROR_DL_REPLAY: "replays_per_s", _real.NVML_NVLINK_ERROR_DL_RECOVERY: "recoveries_per_s",
                    _real.NVML_NVLINK_ERROR_DL_CRC_FLIT: "crc_flit_per_s", _real.NVML_NVLINK_ERROR_DL_CRC_DATA: "crc_data_per_s"}


def nvlink_speed_mbps(spec: GpuSpec) -> int | None:
    """What the simulated NVLINK_SPEED_MBPS fields answer for ``spec`` (None: NOT_SUPPORTED)."""
    if spec.nvlink_speed_mbps is not None:
        return spec.nvlink_speed_mbps or None  # 0 in the scenario: not supported
    if any(w in spec.name.upper().split() for w in _SPEED_NOT_SUPPORTED):
        return None
    rate = nvlink_link_bytes_per_s(spec.name, spec.nvlink_version, spec.architecture)
    return int(rate / 1e6) if rate else None  # whole MB/s, as the driver answers (14062 for GA102)


_ARCH_ID = {"kepler": 2, "maxwell": 3, "pascal": 4, "volta": 5, "turing": 6, "ampere": 7, "ada": 8, "hopper": 9,
            "blackwell": 10}


def _raise(code: int) -> NoReturn:
    raise _real.NVMLError(code)


class _Handle:
    __slots__ = ("spec", "energy_mj", "last_t")

    def __init__(self, spec: GpuSpec):
        self.spec = spec
        self.energy_mj = 0.0
        self.last_t: float | None = None


class c_nvmlGpmMetricsGet_t:  # noqa: N801 - the name nvidia-ml-py uses
    def __init__(self) -> None:
        self.version = 0
        self.numMetrics = 0
        self.sample1: Any = None
        self.sample2: Any = None
        self.metrics = [SimpleNamespace(metricId=0, nvmlReturn=0, value=0.0) for _ in range(32)]


class SimNvml:
    """The fake module. ``clock`` gives seconds since the scenario started (virtual in tests)."""

    # constants, from nvidia-ml-py itself
    NVMLError = _real.NVMLError
    NVML_CLOCK_GRAPHICS = _real.NVML_CLOCK_GRAPHICS
    NVML_CLOCK_SM = _real.NVML_CLOCK_SM
    NVML_CLOCK_MEM = _real.NVML_CLOCK_MEM
    NVML_TEMPERATURE_GPU = _real.NVML_TEMPERATURE_GPU
    NVML_PCIE_UTIL_TX_BYTES = _real.NVML_PCIE_UTIL_TX_BYTES
    NVML_PCIE_UTIL_RX_BYTES = _real.NVML_PCIE_UTIL_RX_BYTES
    NVML_NVLINK_MAX_LINKS = _real.NVML_NVLINK_MAX_LINKS
    NVML_GPM_METRICS_GET_VERSION = _real.NVML_GPM_METRICS_GET_VERSION
    nvmlMemory_v2 = _real.nvmlMemory_v2
    nvmlEventTypeXidCriticalError = _real.nvmlEventTypeXidCriticalError
    NVML_MEMORY_ERROR_TYPE_CORRECTED = _real.NVML_MEMORY_ERROR_TYPE_CORRECTED
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = _real.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
    NVML_VOLATILE_ECC = _real.NVML_VOLATILE_ECC
    NVML_AGGREGATE_ECC = _real.NVML_AGGREGATE_ECC
    NVML_NVLINK_ERROR_DL_REPLAY = _real.NVML_NVLINK_ERROR_DL_REPLAY
    NVML_NVLINK_ERROR_DL_RECOVERY = _real.NVML_NVLINK_ERROR_DL_RECOVERY
    NVML_NVLINK_ERROR_DL_CRC_FLIT = _real.NVML_NVLINK_ERROR_DL_CRC_FLIT
    NVML_NVLINK_ERROR_DL_CRC_DATA = _real.NVML_NVLINK_ERROR_DL_CRC_DATA
    c_nvmlGpmMetricsGet_t = c_nvmlGpmMetricsGet_t

    def __init__(self, scenario: Scenario, clock: Callable[[], float] | None = None, pcie_block_s: float = 0.020):
        self.scenario = scenario
        self.pcie_block_s = pcie_block_s
        self.gpm_live: dict[int, Any] = {}  # GPM samples allocated and not freed (id → sample)
        if clock is None:
            start = time.monotonic()

            def clock() -> float:
                return time.monotonic() - start
        self.clock = clock
        self._handles = [_Handle(g) for g in scenario.gpus]
        self._lock = threading.Lock()
        self._wake = threading.Event()  # set by wake_waiters: simulated event waits return at once
        self._initialized = False
        # every NVMLError_* class, by the same names
        for name in dir(_real):
            if name.startswith("NVMLError_"):
                setattr(self, name, getattr(_real, name))

    # ------------------------------------------------------------------ helpers
    def _h(self, h: Any) -> _Handle:
        if not self._initialized:
            _raise(_real.NVML_ERROR_UNINITIALIZED)
        if not isinstance(h, _Handle):
            _raise(_real.NVML_ERROR_INVALID_ARGUMENT)
        for ev in self.scenario.events:
            if ev.kind == "gpu_lost" and ev.gpu == h.spec.index and self.clock() >= ev.at_s:
                _raise(_real.NVML_ERROR_GPU_IS_LOST)
        return h

    def _noise(self, i: int, key: str, t: float) -> float:
        amp = self.scenario.noise
        if amp <= 0:
            return 1.0
        tick = int(t * 10)
        x = zlib.crc32(f"{self.scenario.seed}:{i}:{key}:{tick}".encode()) / 0xFFFFFFFF
        return 1.0 + amp * (2 * x - 1)

    def _values(self, h: _Handle, at: float | None = None) -> dict[str, Any]:
        t = self.clock() if at is None else at
        phase = self.scenario.phase_at(t)
        idle = self.scenario.idle
        v = phase.for_gpu(h.spec.index, idle) if phase else idle
        return v

    def _is_load(self, h: _Handle, v: dict[str, Any]) -> bool:
        if v.get("load") is not None:
            return bool(v["load"])
        # a phase's values are the scenario's numbers (floats): the comparisons are bools
        return cast(bool, v["util_gpu_pct"] >= 10 or v["pcie_tx_gb_per_s"] + v["pcie_rx_gb_per_s"] > 0.1)

    def _num(self, h: _Handle, v: dict[str, Any], key: str, default: float, at: float | None = None) -> float:
        base = v.get(key)
        if base is None:
            base = default
        if v.get("noise") == 0:
            return float(base)
        return float(base) * self._noise(h.spec.index, key, self.clock() if at is None else at)

    def _link(self, h: _Handle) -> tuple[int, int]:
        v = self._values(h)
        s = h.spec
        if self._is_load(h, v):
            return s.pcie_gen_load, s.pcie_width_load
        return s.pcie_gen_idle, s.pcie_width_idle

    def _rate(self, h: _Handle, key: str) -> float:
        """A simulated PCIe rate in bytes/s, never above 97 % of the current link's capacity."""
        v = self._values(h)
        want = self._num(h, v, key, 0.0) * 1e9
        gen, width = self._link(h)
        cap = pcie_capacity_bytes_per_s(gen, width) or 0.0
        return max(0.0, min(want, 0.97 * cap))

    def _counter(self, h: _Handle, attr: str, kind: str = "pcie_errors") -> int:
        """An error counter: ``attr`` (per second) of the scenario's ``kind`` events on this GPU, integrated to now."""
        t = self.clock()
        total = 0.0
        for ev in self.scenario.events:
            if ev.kind == kind and ev.gpu == h.spec.index and t > ev.at_s:
                total += getattr(ev, attr) * min(t - ev.at_s, ev.duration_s)
        return int(total)

    # ------------------------------------------------------------------ system
    def nvmlInit(self) -> None:
        self._initialized = True

    def nvmlShutdown(self) -> None:
        self._initialized = False

    def nvmlSystemGetDriverVersion(self) -> str:
        return self.scenario.driver_version

    def nvmlSystemGetNVMLVersion(self) -> str:
        return "sim-" + self.scenario.driver_version

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return self.scenario.cuda_driver_version

    def nvmlDeviceGetCount(self) -> int:
        if not self._initialized:
            _raise(_real.NVML_ERROR_UNINITIALIZED)
        return len(self._handles)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> _Handle:
        if not 0 <= i < len(self._handles):
            _raise(_real.NVML_ERROR_INVALID_ARGUMENT)
        return self._handles[i]

    # ------------------------------------------------------------------ static
    def nvmlDeviceGetName(self, h: Any) -> str:
        return self._h(h).spec.name

    def nvmlDeviceGetUUID(self, h: Any) -> str:
        if isinstance(h, SimpleNamespace):  # a MIG device (nvmlDeviceGetMigDeviceHandleByIndex): its own UUID
            i, k = self._h(h.parent).spec.index, h.mig_index
            return f"MIG-5100{i:04x}-{k + 1:04x}-4000-8000-{zlib.crc32(self.scenario.name.encode()):08x}{i:04x}"
        i = self._h(h).spec.index
        return f"GPU-5100{i:04x}-0000-4000-8000-{zlib.crc32(self.scenario.name.encode()):08x}{i:04x}"

    def _bus(self, i: int) -> str:
        return f"00000000:{0x18 + 0x10 * i:02X}:00.0"

    def nvmlDeviceGetPciInfo(self, h: Any) -> Any:
        return SimpleNamespace(busId=self._bus(self._h(h).spec.index))

    def nvmlDeviceGetArchitecture(self, h: Any) -> int:
        return _ARCH_ID.get(self._h(h).spec.architecture, 0xFFFFFFFF)

    def _used(self, hh: _Handle) -> int:
        """Memory used by processes (v2's ``used``), bytes: the phase's ``mem_used_gib``."""
        v = self._values(hh)
        room = hh.spec.memory_bytes - hh.spec.memory_reserved_bytes
        return min(room, int(self._num(hh, {**v, "noise": 0}, "mem_used_gib", 0.5) * 2**30))

    def nvmlDeviceGetMemoryInfo(self, handle: Any, version: Any = None) -> Any:
        """As nvidia-ml-py: no ``version``: v1 (``total, free, used``; used includes the driver's reserved
        memory); ``version=nvmlMemory_v2``: v2 (``version, total, reserved, free, used``), or
        FunctionNotFound where the scenario's driver lacks ``nvmlDeviceGetMemoryInfo_v2``."""
        hh = self._h(handle)
        total, reserved, used = hh.spec.memory_bytes, hh.spec.memory_reserved_bytes, self._used(hh)
        if not version:
            return SimpleNamespace(total=total, free=total - used - reserved, used=used + reserved)
        if not hh.spec.memory_info_v2:
            _raise(_real.NVML_ERROR_FUNCTION_NOT_FOUND)
        if version != _real.nvmlMemory_v2:
            _raise(_real.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
        return SimpleNamespace(version=version, total=total, reserved=reserved, free=total - used - reserved, used=used)

    def nvmlDeviceGetEnforcedPowerLimit(self, h: Any) -> int:
        return int(self._h(h).spec.power_limit_w * 1000)

    def nvmlDeviceGetPowerManagementLimit(self, h: Any) -> int:
        """The limit set on the GPU: the scenario's power limit, as the enforced one (no other limiter is lower)."""
        return int(self._h(h).spec.power_limit_w * 1000)

    def nvmlDeviceGetMaxClockInfo(self, h: Any, kind: int) -> int:
        s = self._h(h).spec
        return {_real.NVML_CLOCK_SM: s.sm_clock_max_mhz, _real.NVML_CLOCK_MEM: s.mem_clock_max_mhz,
                _real.NVML_CLOCK_GRAPHICS: s.graphics_clock_max_mhz}[kind]

    def nvmlDeviceGetGpuMaxPcieLinkGeneration(self, h: Any) -> int:
        return self._h(h).spec.pcie_gen_gpu_max

    def nvmlDeviceGetMaxPcieLinkGeneration(self, h: Any) -> int:
        return self._h(h).spec.pcie_gen_sys_max

    def nvmlDeviceGetMaxPcieLinkWidth(self, h: Any) -> int:
        return self._h(h).spec.pcie_width_max

    def nvmlDeviceGetCpuAffinity(self, h: Any, cpu_set_size: int) -> list[int]:
        s = self._h(h).spec
        if s.cpu_affinity is None:
            _raise(_real.NVML_ERROR_NOT_SUPPORTED)
        words = [0] * max(cpu_set_size, 1)
        for part in s.cpu_affinity.split(","):
            lo, _, hi = part.partition("-")
            for c in range(int(lo), int(hi or lo) + 1):
                if c // 64 < len(words):
                    words[c // 64] |= 1 << (c % 64)
        return words

    def nvmlDeviceGetNumaNodeId(self, h: Any) -> int:
        s = self._h(h).spec
        if s.numa_node is None:
            _raise(_real.NVML_ERROR_NOT_SUPPORTED)
        return s.numa_node

    def nvmlDeviceGetMemoryAffinity(self, h: Any, node_set_size: int, scope: int) -> list[int]:
        s = self._h(h).spec
        if s.numa_node is None:
            _raise(_real.NVML_ERROR_NOT_SUPPORTED)
        words = [0] * max(node_set_size, 1)
        if s.numa_node // 64 < len(words):
            words[s.numa_node // 64] |= 1 << (s.numa_node % 64)
        return words

    def nvmlGpmQueryDeviceSupport(self, h: Any) -> Any:
        return SimpleNamespace(version=1, isSupportedDevice=int(self._h(h).spec.gpm))

    def _links(self, i: int) -> list[tuple[str, int]]:
        """This GPU's NVLinks as (remote bus id, remote device type 0=GPU 2=NVSwitch)."""
        out = []
        for (a, b), (_path, n) in sorted(self.scenario.pairs.items()):
            if i in (a, b) and n:
                peer = b if i == a else a
                out += [(self._bus(peer), 0)] * n
        out += [("00000000:FF:00.0", 2)] * self.scenario.nvswitch_links
        return out

    def nvmlDeviceGetNvLinkState(self, h: Any, link: int) -> int:
        links = self._links(self._h(h).spec.index)
        if not links or not 0 <= link < _real.NVML_NVLINK_MAX_LINKS:
            _raise(_real.NVML_ERROR_NOT_SUPPORTED if not links else _real.NVML_ERROR_INVALID_ARGUMENT)
        return int(link < len(links))

    def _link_of(self, h: Any, link: int) -> tuple[str, int]:
        links = self._links(self._h(h).spec.index)
        if not 0 <= link < len(links):
            _raise(_real.NVML_ERROR_INVALID_ARGUMENT)
        return links[link]

    def nvmlDeviceGetNvLinkVersion(self, h: Any, link: int) -> int:
        self._link_of(h, link)
        return cast(int, h.spec.nvlink_version)  # h is a _Handle (checked by _link_of): GpuSpec.nvlink_version

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, h: Any, link: int) -> int:
        return self._link_of(h, link)[1]

    def nvmlDeviceGetNvLinkRemotePciInfo(self, h: Any, link: int) -> Any:
        return SimpleNamespace(busId=self._link_of(h, link)[0])

    def nvmlDeviceGetTopologyCommonAncestor(self, h1: Any, h2: Any) -> int:
        a, b = self._h(h1).spec.index, self._h(h2).spec.index
        if a == b:
            return 0
        path, _n = self.scenario.pairs[(min(a, b), max(a, b))]
        return _PATH_LEVEL[path]

    # ------------------------------------------------------------------ dynamic
    def nvmlDeviceGetUtilizationRates(self, h: Any) -> Any:
        hh = self._h(h)
        if hh.spec.mig_instances is not None:  # in MIG mode the whole GPU's utilisation is not reported (N/A)
            _raise(_real.NVML_ERROR_NOT_SUPPORTED)
        v = self._values(hh)
        return SimpleNamespace(gpu=int(min(100, round(self._num(hh, v, "util_gpu_pct", 0)))),
                               memory=int(min(100, round(self._num(hh, v, "util_mem_pct", 0)))))

    def nvmlDeviceGetClockInfo(self, h: Any, kind: int) -> int:
        hh = self._h(h)
        v = self._values(hh)
        s = hh.spec
        load = self._is_load(hh, v)
        if kind == _real.NVML_CLOCK_MEM:
            base = v.get("mem_clock_mhz") or (s.mem_clock_max_mhz if load else min(405, s.mem_clock_max_mhz))
            return int(base)
        base = v.get("sm_clock_mhz") or (int(s.sm_clock_max_mhz * 0.93) if load else 210)
        return int(min(s.sm_clock_max_mhz, base * (1 + 0.3 * (self._noise(s.index, "clk", self.clock()) - 1))))

    def nvmlDeviceGetPowerUsage(self, h: Any) -> int:
        return self._power_mw(self._h(h))

    def _power_mw(self, hh: _Handle, at: float | None = None) -> int:
        v = self._values(hh, at)
        s = hh.spec
        default = s.power_limit_w * (0.1 + 0.75 * v["util_gpu_pct"] / 100)
        return int(min(s.power_limit_w, self._num(hh, v, "power_w", default, at)) * 1000)

    def nvmlDeviceGetTotalEnergyConsumption(self, h: Any) -> int:
        """The integral of the simulated power since the first call (mJ): the power at 1 s steps over the time
        since the last call (at most 600 steps), as a real GPU's counter integrates its own power."""
        hh = self._h(h)
        t = self.clock()
        with self._lock:
            if hh.last_t is not None and t > hh.last_t:
                n = min(600, max(1, round(t - hh.last_t)))
                dt = (t - hh.last_t) / n
                hh.energy_mj += sum(self._power_mw(hh, hh.last_t + (k + 0.5) * dt) for k in range(n)) * dt
            hh.last_t = t
            return int(hh.energy_mj)

    def nvmlDeviceGetTemperature(self, h: Any, sensor: int) -> int:
        hh = self._h(h)
        return int(round(self._num(hh, self._values(hh), "temp_gpu_c", 35)))

    def nvmlDeviceGetFanSpeed(self, h: Any) -> int:
        hh = self._h(h)
        if not hh.spec.fan:
            _raise(_real.NVML_ERROR_NOT_SUPPORTED)
        return int(round(self._num(hh, self._values(hh), "fan_pct", 30)))

    def nvmlDeviceGetPerformanceState(self, h: Any) -> int:
        hh = self._h(h)
        v = self._values(hh)
        if v.get("pstate") is not None:
            return cast(int, v["pstate"])  # pstate is an "integer" phase key (core/catalogue.py)
        return 0 if self._is_load(hh, v) else 8

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: Any) -> int:
        hh = self._h(h)
        v = self._values(hh)
        names = v.get("clock_events")
        if names is None:
            names = [] if self._is_load(hh, v) else ["gpu_idle"]
        mask = 0
        for n in names:
            mask |= CLOCK_EVENT_BITS[n]
        return mask

    def nvmlDeviceGetCurrPcieLinkGeneration(self, h: Any) -> int:
        return self._link(self._h(h))[0]

    def nvmlDeviceGetCurrPcieLinkWidth(self, h: Any) -> int:
        return self._link(self._h(h))[1]

    def _running(self, hh: _Handle) -> list[tuple[SimProcess, bool]]:
        """The processes running on ``hh`` now, with whether each was listed in the scenario (True) or is
        a generic one padding the phase's ``processes`` count (False)."""
        v = self._values(hh)
        listed = self.scenario.processes_of(hh.spec.index)
        want = v.get("processes")
        n = len(listed) if want is None else want
        out = [(p, True) for p in listed[:n]]
        for k in range(len(out), n):  # more than listed: generic ones, as before lists existed
            out.append((SimProcess(gpu=hh.spec.index, pid=40000 + 100 * hh.spec.index + k, user="root",
                                   name="python3", command="python3 (simulated)"), False))
        return out

    def _process_rows(self, hh: _Handle, graphics: bool) -> list[Any]:
        if not hh.spec.process_list:
            _raise(_real.NVML_ERROR_NOT_SUPPORTED)
        running = self._running(hh)
        used = self._used(hh)
        split = [p for p, _ in running if p.memory_gib is None]
        fixed = sum(int(p.memory_gib * 2**30) for p, _ in running if p.memory_gib is not None)
        share = max(0, used - fixed) // max(len(split), 1)
        return [SimpleNamespace(pid=p.pid, name=p.name, user=p.user, cmdline=p.command,
                                usedGpuMemory=int(p.memory_gib * 2**30) if p.memory_gib is not None else share,
                                gpuInstanceId=self._instance(hh, k), computeInstanceId=0 if hh.spec.mig_instances else 0xFFFFFFFF)
                for k, (p, _) in enumerate(running) if p.graphics == graphics]

    @staticmethod
    def _instance(hh: _Handle, k: int) -> int:
        """The MIG GPU instance of the GPU's ``k``-th process: spread over the instances (0xFFFFFFFF: no MIG)."""
        n = hh.spec.mig_instances
        return k % n + 1 if n else 0xFFFFFFFF

    def nvmlDeviceGetComputeRunningProcesses(self, h: Any) -> list[Any]:
        return self._process_rows(self._h(h), graphics=False)

    def nvmlDeviceGetGraphicsRunningProcesses(self, h: Any) -> list[Any]:
        return self._process_rows(self._h(h), graphics=True)

    def nvmlDeviceGetProcessUtilization(self, h: Any, last_seen_us: int) -> list[Any]:
        """One sample per running process with SM activity, stamped now (µs of the simulated clock);
        NotFound when none is newer than ``last_seen_us``, as the driver answers. SM % is the process's
        own ``sm_pct``, else the GPU's utilisation shared among its processes without one."""
        hh = self._h(h)
        if not hh.spec.process_util:
            _raise(_real.NVML_ERROR_NOT_SUPPORTED)
        now_us = int(self.clock() * 1e6) + 1
        running = [p for p, _ in self._running(hh)]
        v = self._values(hh)
        util = min(100.0, self._num(hh, v, "util_gpu_pct", 0))
        fixed = sum(p.sm_pct for p in running if p.sm_pct is not None)
        free = [p for p in running if p.sm_pct is None]
        share = max(0.0, util - fixed) / max(len(free), 1)
        out = []
        for p in running:
            sm = p.sm_pct if p.sm_pct is not None else share
            if sm >= 0.5 and now_us > last_seen_us:
                out.append(SimpleNamespace(pid=p.pid, timeStamp=now_us, smUtil=int(round(sm)),
                                           memUtil=int(round(sm * v.get("util_mem_pct", 0) / max(util, 1))),
                                           encUtil=0, decUtil=0))
        if not out:
            _raise(_real.NVML_ERROR_NOT_FOUND)
        return out

    def nvmlDeviceGetPcieThroughput(self, h: Any, counter: int) -> int:
        hh = self._h(h)
        if self.pcie_block_s:
            time.sleep(self.pcie_block_s)  # the real call blocks while NVML samples a 20 ms window
        key = "pcie_tx_gb_per_s" if counter == _real.NVML_PCIE_UTIL_TX_BYTES else "pcie_rx_gb_per_s"
        return int(self._rate(hh, key) / 1000)  # KB/s

    def nvmlDeviceGetFieldValues(self, h: Any, field_ids: list[Any]) -> list[Any]:
        hh = self._h(h)
        s = hh.spec
        t = self.clock()
        out = []
        v = self._values(hh)
        for fid in field_ids:
            fid, scope = (fid if isinstance(fid, tuple) else (fid, 0))
            ret, vt, val = 0, 3, 0.0
            if fid == 82:  # memory temperature
                if s.memory_temp:
                    val = self._num(hh, v, "temp_mem_c", (v.get("temp_gpu_c") or 35) + 8)
                    vt = 1
                else:
                    ret = _real.NVML_ERROR_NOT_SUPPORTED
            elif (err := self._error_field(hh, fid)) is not None:  # PCIe and NVLink error counters
                ret, val = err
            elif fid in _FI_NVLINK_SPEED:  # NVLink speed per link, MB/s
                speed = nvlink_speed_mbps(s) if self._links(s.index) else None
                link = _FI_NVLINK_SPEED.index(fid) if fid != 90 else 0
                link = link - 1 if link > 6 else link  # 84-89 → links 0-5, 132-137 → links 6-11
                if speed is None or link >= len(self._links(s.index)):
                    ret = _real.NVML_ERROR_NOT_SUPPORTED
                else:
                    val, vt = speed, 1
            elif fid in (138, 139):  # NVLink data KiB counter, per link (scopeId)
                links = self._links(s.index)
                if scope >= len(links):
                    ret = _real.NVML_ERROR_INVALID_ARGUMENT
                else:
                    key = "nvlink_tx_gb_per_s" if fid == 138 else "nvlink_rx_gb_per_s"
                    val = self._nvlink_kib(hh, key, len(links), t)
            else:
                ret = _real.NVML_ERROR_NOT_SUPPORTED
            value = SimpleNamespace(dVal=float(val), uiVal=int(val), ulVal=int(val), ullVal=int(val), sllVal=int(val),
                                    siVal=int(val))
            out.append(SimpleNamespace(fieldId=fid, scopeId=scope, timestamp=int(t * 1e6), latencyUsec=0,
                                       valueType=vt, nvmlReturn=ret, value=value))
        return out

    def _error_field(self, hh: _Handle, fid: int) -> tuple[int, float] | None:
        """(return code, value) of an error-counter field: the PCIe counters (replays, recoveries, AER errors: the
        receiver errors carry the scenario's errors, the others 0) and the NVLink all-links counters; None for
        another field."""
        s = hh.spec
        if fid in _FI_PCIE_COUNTERS:
            attr = _FI_PCIE_COUNTERS[fid]
            if not s.pcie_counters:
                return _real.NVML_ERROR_NOT_SUPPORTED, 0.0
            return 0, float(self._counter(hh, attr)) if attr else 0.0
        if fid in _FI_NVLINK_ERRORS:
            if s.nvlink_counters and s.nvlink_error_fields and self._links(s.index):
                return 0, float(self._counter(hh, _FI_NVLINK_ERRORS[fid], "nvlink_errors"))
            return _real.NVML_ERROR_NOT_SUPPORTED, 0.0
        return None

    def nvmlDeviceGetNvLinkErrorCounter(self, h: Any, link: int, counter: int) -> int:  # noqa: N802
        """One link's error counter (``NVML_NVLINK_ERROR_DL_*``): the GPU's total split over its links (the remainder
        on link 0, so the links sum to the total the all-links field gives)."""
        hh = self._h(h)
        links = self._links(hh.spec.index)
        if not hh.spec.nvlink_counters or not 0 <= link < len(links):
            _raise(_real.NVML_ERROR_NOT_SUPPORTED)
        attr = _NVLINK_COUNTERS.get(counter)
        if attr is None:
            _raise(_real.NVML_ERROR_INVALID_ARGUMENT)
        total = self._counter(hh, attr, "nvlink_errors")
        share, rest = divmod(total, len(links))
        return share + (rest if link == 0 else 0)

    def _nvlink_kib(self, hh: _Handle, key: str, nlinks: int, t: float) -> float:
        """A per-link KiB counter: the integral of the timeline's NVLink rate, split over the links."""
        total = 0.0
        sc = self.scenario
        start = 0.0
        if sc.phases and sc.duration_s > 0:
            cycle = sc.duration_s
            loops = math.floor(t / cycle) if sc.loop else 0
            per_cycle = sum(p.for_gpu(hh.spec.index, sc.idle).get(key, 0.0) * p.duration_s for p in sc.phases)
            total += loops * per_cycle
            start = loops * cycle
            rem = t - start
            for p in sc.phases:
                d = min(rem, p.duration_s) if (sc.loop or p is not sc.phases[-1]) else rem
                total += p.for_gpu(hh.spec.index, sc.idle).get(key, 0.0) * max(d, 0)
                rem -= p.duration_s
                if rem <= 0:
                    break
        return total * 1e9 / 1024 / nlinks

    # ------------------------------------------------------------------ health: ECC, row remapping, Xid events
    def _passed(self, hh: _Handle, kind: str) -> list[Any]:
        t = self.clock()
        return [ev for ev in self.scenario.events if ev.kind == kind and ev.gpu == hh.spec.index and t >= ev.at_s]

    def nvmlDeviceGetEccMode(self, handle: Any) -> list[int]:
        on = int(self._h(handle).spec.ecc)
        return [on, on]  # [current, pending]

    def nvmlDeviceGetTotalEccErrors(self, handle: Any, errorType: int, counterType: int) -> int:  # noqa: N803
        hh = self._h(handle)
        if not hh.spec.ecc:
            _raise(_real.NVML_ERROR_NOT_SUPPORTED)
        if errorType not in (0, 1) or counterType not in (0, 1):
            _raise(_real.NVML_ERROR_INVALID_ARGUMENT)
        attr = "uncorrected" if errorType == _real.NVML_MEMORY_ERROR_TYPE_UNCORRECTED else "corrected"
        return sum(getattr(ev, attr) for ev in self._passed(hh, "ecc"))  # no errors before the driver loaded

    def nvmlDeviceGetRemappedRows(self, device: Any) -> tuple[int, int, int, int]:
        """(corrRows, uncRows, isPending, failureOccurred), as nvidia-ml-py returns them."""
        hh = self._h(device)
        if not hh.spec.row_remapping:
            _raise(_real.NVML_ERROR_NOT_SUPPORTED)
        evs = self._passed(hh, "row_remap")
        last = evs[-1] if evs else None
        return (sum(ev.rows_correctable for ev in evs), sum(ev.rows_uncorrectable for ev in evs),
                int(bool(last and last.pending)), int(any(ev.failure for ev in evs)))

    def nvmlDeviceGetMigMode(self, device: Any) -> list[int]:
        """[current, pending] MIG mode (1 enabled), as nvidia-ml-py returns it."""
        on = int(self._h(device).spec.mig_instances is not None)
        return [on, on]

    def nvmlDeviceGetMaxMigDeviceCount(self, device: Any) -> int:
        return 7 if self._h(device).spec.mig_instances is not None else 0

    def nvmlDeviceGetMigDeviceHandleByIndex(self, device: Any, index: int) -> Any:
        """A MIG device handle for each of the scenario's ``mig_instances``; NotFound for an empty slot."""
        hh = self._h(device)
        if hh.spec.mig_instances is None:
            _raise(_real.NVML_ERROR_NOT_SUPPORTED)
        if not 0 <= index < 7:
            _raise(_real.NVML_ERROR_INVALID_ARGUMENT)
        if index >= hh.spec.mig_instances:
            _raise(_real.NVML_ERROR_NOT_FOUND)
        return SimpleNamespace(parent=hh, mig_index=index)

    def nvmlDeviceGetIndex(self, handle: Any) -> int:
        return self._h(handle).spec.index

    def nvmlEventSetCreate(self) -> Any:
        if not self._initialized:
            _raise(_real.NVML_ERROR_UNINITIALIZED)
        self._wake.clear()
        return SimpleNamespace(handles=[], delivered=set(), freed=False)

    def nvmlDeviceRegisterEvents(self, handle: Any, eventTypes: int, eventSet: Any) -> None:  # noqa: N803
        hh = self._h(handle)
        if not hh.spec.xid_events:
            _raise(_real.NVML_ERROR_NOT_SUPPORTED)
        eventSet.handles.append(hh)

    def nvmlEventSetWait_v2(self, eventSet: Any, timeoutms: int) -> Any:  # noqa: N802, N803
        """The next scenario Xid (``[[events]] kind = "xid"``) due on a registered GPU, once each, as
        nvidia-ml-py's ``c_nvmlEventData_t`` fields; else Timeout after ``timeoutms``. The wait ends early when
        the next Xid falls due (on a real-time clock) or :meth:`wake_waiters` is called (a source closing)."""
        if eventSet.freed:
            _raise(_real.NVML_ERROR_INVALID_ARGUMENT)
        wait_s = max(timeoutms, 0) / 1000
        for attempt in (0, 1):  # look, wait once (two wake-ups a second at 500 ms), look again
            if attempt:
                if wait_s > 0:
                    self._wake.wait(wait_s)
                if self._wake.is_set():
                    break
            t = self.clock()
            due = []
            with self._lock:
                for k, ev in enumerate(self.scenario.events):
                    if ev.kind != "xid" or k in eventSet.delivered:
                        continue
                    hh = next((x for x in eventSet.handles if x.spec.index == ev.gpu), None)
                    if hh is None:
                        continue
                    if t < ev.at_s:
                        due.append(ev.at_s - t)
                        continue
                    eventSet.delivered.add(k)
                    return SimpleNamespace(device=hh, eventType=_real.nvmlEventTypeXidCriticalError, eventData=ev.xid,
                                           gpuInstanceId=0xFFFFFFFF, computeInstanceId=0xFFFFFFFF)
            if due:
                wait_s = min(wait_s, max(0.01, min(due)))
        _raise(_real.NVML_ERROR_TIMEOUT)

    def wake_waiters(self) -> None:
        """End every simulated event wait now, and the ones after it (a closing source: its Xid thread stops at
        once instead of after its wait). Not an NVML call: the real wait ends on its own within its timeout."""
        self._wake.set()

    def nvmlEventSetFree(self, eventSet: Any) -> None:
        eventSet.freed = True

    # ------------------------------------------------------------------ GPM
    def nvmlGpmSampleAlloc(self) -> Any:
        sample = SimpleNamespace(t=None, h=None)
        self.gpm_live[id(sample)] = sample
        return sample

    def nvmlGpmSampleFree(self, sample: Any) -> None:
        """Real NVML frees the sample's memory: a second free or a use after it corrupts the heap, so the
        simulation refuses both loudly (not an NVMLError: nothing may catch it as a GPU's answer)."""
        if self.gpm_live.pop(id(sample), None) is None:
            raise RuntimeError("simulated NVML: a GPM sample freed twice, or never allocated")

    def nvmlGpmSampleGet(self, h: Any, sample: Any) -> Any:
        hh = self._h(h)
        if not hh.spec.gpm:
            _raise(_real.NVML_ERROR_NOT_SUPPORTED)
        sample.t = self.clock()
        sample.h = hh
        return sample

    def nvmlGpmMetricsGet(self, mg: Any) -> Any:
        if id(mg.sample1) not in self.gpm_live or id(mg.sample2) not in self.gpm_live:
            raise RuntimeError("simulated NVML: a GPM sample used after it was freed")
        hh = mg.sample2.h
        self._h(hh)
        v = self._values(hh)
        util = v["util_gpu_pct"]
        table = {
            1: util,
            2: self._num(hh, v, "sm_active_pct", util * 0.9),
            3: self._num(hh, v, "sm_occupancy_pct", util * 0.3),
            5: self._num(hh, v, "tensor_active_pct", util * 0.5),
            10: self._num(hh, v, "dram_bw_util_pct", util * 0.3),
            20: self._rate(hh, "pcie_tx_gb_per_s") / 2**20,
            21: self._rate(hh, "pcie_rx_gb_per_s") / 2**20,
            60: self._num(hh, v, "nvlink_rx_gb_per_s", 0) * 1e9 / 2**20,
            61: self._num(hh, v, "nvlink_tx_gb_per_s", 0) * 1e9 / 2**20,
        }
        for k in range(mg.numMetrics):
            m = mg.metrics[k]
            if m.metricId in table:
                m.value = float(min(100.0, table[m.metricId]) if m.metricId < 20 else table[m.metricId])
                m.nvmlReturn = 0
            else:
                m.nvmlReturn = _real.NVML_ERROR_NOT_SUPPORTED
        return mg
