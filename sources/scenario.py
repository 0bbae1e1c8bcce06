"""Scenario files for the simulated NVML: loading and validation (format: docs/scenarios.md).

A scenario is TOML. Every field is checked; an error names the file and the field, e.g.
``scenario my.toml: phases[2].util_gpu_pct: expected a number``.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from gpuscope.core import catalogue
from gpuscope.core.errors import GpuscopeError
from gpuscope.core.text import clean, count
from gpuscope.core.vocab import CLOCK_EVENT_NAMES
from gpuscope.sources.files import not_a_regular_file

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


class ScenarioError(GpuscopeError, ValueError):
    """A scenario that cannot be found or read; the message is one line for the user."""


PATHS = ("PIX", "PXB", "PHB", "NODE", "SYS")


# field → (type, default). Types: int, float, str, bool, "gen", "width", "pct", list types.
GPU_FIELDS: dict[str, tuple[Any, Any]] = {
    "count": (int, 1),
    "name": (str, "NVIDIA Simulated GPU"),
    "architecture": (str, "ampere"),
    "memory_gib": (float, 48.0),
    "sm_clock_max_mhz": (int, 1980),
    "mem_clock_max_mhz": (int, 2619),
    "graphics_clock_max_mhz": (int, None),
    "power_limit_w": (float, 300.0),
    "pcie_gen_gpu_max": ("gen", 4),
    "pcie_gen_sys_max": ("gen", None),
    "pcie_width_max": ("width", 16),
    "pcie_gen_idle": ("gen", None),
    "pcie_gen_load": ("gen", None),
    "pcie_width_idle": ("width", None),
    "pcie_width_load": ("width", None),
    "numa_nodes": (list, None),
    "cpu_affinity": (list, None),
    "gpm": (bool, False),
    "nvlink_version": (int, 6),
    "nvlink_speed_mbps": (int, None),
    "fan": (bool, True),
    "memory_temp": (bool, False),
    "pcie_counters": (bool, True),
    "process_list": (bool, True),
    "process_util": (bool, True),
    "memory_info_v2": (bool, True),
    "memory_reserved_mib": (float, None),
    "ecc": (bool, True),
    "row_remapping": (bool, True),
    "xid_events": (bool, True),
    "mig_instances": (int, None),
    "nvlink_counters": (bool, True),
    "nvlink_error_fields": (bool, True),
}
# A phase's own fields, around its readings: the readings are the catalogue's metrics with a phase key
# (core/catalogue.py ``Metric.phase``), read at use time by :func:`phase_fields`.
PHASE_HEAD: dict[str, tuple[Any, Any]] = {
    "name": (str, "phase"),
    "duration_s": (float, None),
    "gpus": (list, None),
}
PHASE_TAIL: dict[str, tuple[Any, Any]] = {
    "clock_events": (list, None),
    "load": (bool, None),
    "processes": (int, None),
    "noise": (float, None),
    "overrides": (list, None),
}
PHASE_KIND = {"pct": "pct", "number": float, "integer": int}  # a catalogue PhaseKey's kind → this module's
PHASE_ONLY = ("name", "duration_s", "gpus", "overrides")  # fields of a phase that are not per-GPU values


def phase_fields() -> dict[str, tuple[Any, Any]]:
    """Every field a ``[[phases]]`` entry may set → (type, default): its name, duration and GPUs, the readings
    the catalogue gives phase keys (in catalogue order), then clock events, load, processes, noise and overrides."""
    readings = {m.phase.name: (PHASE_KIND[m.phase.kind], m.phase.default)
                for m in catalogue.metrics("gpu") if m.phase is not None}
    return {**PHASE_HEAD, **readings, **PHASE_TAIL}
EVENT_KINDS = ("gpu_lost", "pcie_errors", "xid", "ecc", "row_remap", "nvlink_errors")
EVENT_FIELDS: dict[str, tuple[Any, Any]] = {
    "at_s": (float, None),
    "kind": (str, None),
    "gpu": (int, None),
    "duration_s": (float, 1e12),
    "replays_per_s": (float, 0.0),
    "recoveries_per_s": (float, 0.0),
    "errors_per_s": (float, 0.0),
    "crc_flit_per_s": (float, 0.0),
    "crc_data_per_s": (float, 0.0),
    "xid": (int, None),
    "corrected": (int, 0),
    "uncorrected": (int, 0),
    "rows_correctable": (int, 0),
    "rows_uncorrectable": (int, 0),
    "pending": (bool, False),
    "failure": (bool, False),
}
TOP_FIELDS = {"name", "description", "host", "driver_version", "cuda_driver_version", "cpu_count", "loop", "seed",
              "noise", "gpus", "topology", "phases", "events", "processes", "servers"}
PROCESS_FIELDS: dict[str, tuple[Any, Any]] = {
    "gpu": (int, None),
    "gpus": (list, None),
    "pid": (int, None),
    "user": (str, "root"),
    "name": (str, None),
    "command": (str, None),
    "memory_gib": (float, None),
    "sm_pct": ("pct", None),
    "graphics": (bool, False),
}
SERVER_FIELDS: dict[str, tuple[Any, Any]] = {
    "kind": (str, "vllm"),
    "model": (str, None),
    "port": (int, None),
    "gpus": (list, None),
    "tp": (int, None),
    "pp": (int, None),
    "pids": (list, None),
    "tok_s": (list, None),
    "running": (list, None),
    "itl_ms": (list, None),
}
MAX_SIM_SERVERS = 16
MAX_PID = 4_194_304  # Linux's pid_max ceiling
MAX_SIM_PROCESSES = 512
TOPO_FIELDS = {"default_path", "nvswitch_links", "pairs"}
PAIR_FIELDS = {"a", "b", "path", "nvlinks"}


@dataclass(frozen=True)
class GpuSpec:
    index: int
    name: str
    architecture: str
    memory_bytes: int
    sm_clock_max_mhz: int
    mem_clock_max_mhz: int
    graphics_clock_max_mhz: int
    power_limit_w: float
    pcie_gen_gpu_max: int
    pcie_gen_sys_max: int
    pcie_width_max: int
    pcie_gen_idle: int
    pcie_gen_load: int
    pcie_width_idle: int
    pcie_width_load: int
    numa_node: int | None
    cpu_affinity: str | None
    gpm: bool
    nvlink_version: int
    fan: bool
    memory_temp: bool
    pcie_counters: bool
    nvlink_speed_mbps: int | None = None  # what NVML's NVLINK_SPEED_MBPS fields answer (None: by the part)
    process_list: bool = True  # the running-process lists answer (else NotSupported)
    process_util: bool = True  # per-process utilisation answers (else NotSupported)
    memory_info_v2: bool = True  # nvmlDeviceGetMemoryInfo_v2 exists (else FunctionNotFound: an old driver)
    memory_reserved_bytes: int = 0  # what the driver reserves (v2's ``reserved``; v1's ``used`` includes it)
    ecc: bool = True  # ECC on (counts answer); else ECC off
    row_remapping: bool = True  # nvmlDeviceGetRemappedRows answers (else NotSupported)
    xid_events: bool = True  # the GPU can be registered for critical Xid events (else NotSupported)
    mig_instances: int | None = None  # MIG mode on with this many MIG devices (None: MIG off)
    nvlink_counters: bool = True  # NVLink error counters answer (else NotSupported) on a GPU with NVLinks
    nvlink_error_fields: bool = True  # as NVML's all-links fields (else only per link: older GPUs)


@dataclass(frozen=True)
class SimProcess:
    """A simulated process on one GPU (``[[processes]]``): memory and SM % None = the GPU's share."""

    gpu: int
    pid: int
    user: str
    name: str
    command: str
    memory_gib: float | None = None
    sm_pct: float | None = None
    graphics: bool = False


@dataclass(frozen=True)
class SimServer:
    """A simulated inference server (``[[servers]]``): its endpoint on ``port`` (``http://localhost:PORT``,
    simulated: nothing listens), its GPUs, TP/PP sizes, the pids of its processes (default: the simulated
    processes on its GPUs) and its generated tok/s in each phase (``tok_s``, one number per phase); the requests it
    runs (``running``: default 8 while it generates) and its mean inter-token latency (``itl_ms``: default unknown)
    per phase."""

    kind: str
    model: str | None
    port: int
    gpus: tuple[int, ...]
    tp: int | None
    pp: int | None
    pids: tuple[int, ...]
    tok_s: tuple[float, ...]
    running: tuple[float, ...] | None = None
    itl_ms: tuple[float, ...] | None = None


@dataclass(frozen=True)
class Phase:
    name: str
    duration_s: float
    values: dict[str, Any]  # phase-wide values (defaults filled)
    gpus: tuple[int, ...] | None  # None: all GPUs
    overrides: tuple[tuple[tuple[int, ...], dict[str, Any]], ...] = ()

    def for_gpu(self, i: int, idle: dict[str, Any]) -> dict[str, Any]:
        v = self.values if self.gpus is None or i in self.gpus else idle
        for gpus, over in self.overrides:
            if i in gpus:
                v = {**v, **over}
        return v


@dataclass(frozen=True)
class SimEvent:
    at_s: float
    kind: str
    gpu: int
    duration_s: float = 1e12
    replays_per_s: float = 0.0
    recoveries_per_s: float = 0.0
    errors_per_s: float = 0.0
    crc_flit_per_s: float = 0.0  # nvlink_errors: NVLink CRC errors (replays_per_s / recoveries_per_s: its others)
    crc_data_per_s: float = 0.0
    xid: int | None = None
    corrected: int = 0
    uncorrected: int = 0
    rows_correctable: int = 0
    rows_uncorrectable: int = 0
    pending: bool = False
    failure: bool = False


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    host: str
    driver_version: str
    cuda_driver_version: int
    cpu_count: int
    loop: bool
    seed: int
    noise: float
    gpus: tuple[GpuSpec, ...]
    pairs: dict[tuple[int, int], tuple[str, int]]  # (a,b) → (pcie path, direct nvlinks)
    nvswitch_links: int
    phases: tuple[Phase, ...]
    events: tuple[SimEvent, ...] = ()
    source: str = ""
    idle: dict[str, Any] = field(default_factory=dict)
    processes: tuple[SimProcess, ...] = ()
    servers: tuple[SimServer, ...] = ()

    def processes_of(self, gpu: int) -> tuple[SimProcess, ...]:
        """The processes listed for GPU ``gpu``, in file order."""
        return tuple(p for p in self.processes if p.gpu == gpu)

    @property
    def duration_s(self) -> float:
        return sum(p.duration_s for p in self.phases)

    def phase_at(self, t: float) -> Phase | None:
        """The phase running ``t`` seconds after the start (the timeline repeats when ``loop``)."""
        total = self.duration_s
        if not self.phases or total <= 0:
            return None
        if self.loop:
            t = t % total
        elif t >= total:
            return self.phases[-1]
        for p in self.phases:
            if t < p.duration_s:
                return p
            t -= p.duration_s
        return self.phases[-1]


MAX_SCENARIO_BYTES = 1024 * 1024


def _err(src: str, path: str, msg: str) -> ScenarioError:
    return ScenarioError(f"scenario {src}: {path}: {msg}")


def _conv(src: str, path: str, kind: Any, v: Any) -> Any:
    if kind in (float, "pct"):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise _err(src, path, "expected a number")
        if not math.isfinite(v) or abs(v) > 1e15:
            raise _err(src, path, "expected a finite number")
        if kind == "pct" and not 0 <= v <= 100:
            raise _err(src, path, "expected a percentage 0-100")
        if v < 0:
            raise _err(src, path, "must not be negative")
        return float(v)
    if kind in (int, "gen", "width"):
        if isinstance(v, bool) or not isinstance(v, int):
            raise _err(src, path, "expected an integer")
        if kind == "gen" and not 1 <= v <= 7:
            raise _err(src, path, "expected a PCIe generation 1-7")
        if kind == "width" and v not in (1, 2, 4, 8, 12, 16, 32):
            raise _err(src, path, "expected a PCIe width 1, 2, 4, 8, 12, 16 or 32")
        if v < 0:
            raise _err(src, path, "must not be negative")
        return v
    if kind is str:
        if not isinstance(v, str):
            raise _err(src, path, "expected a string")
        return clean(v, 300)  # shown on terminals: control characters and escapes removed
    if kind is bool:
        if not isinstance(v, bool):
            raise _err(src, path, "expected true or false")
        return v
    if kind is list:
        if not isinstance(v, list):
            raise _err(src, path, "expected a list")
        return v
    raise AssertionError(kind)  # pragma: no cover


def _table(src: str, path: str, d: Any, spec: dict[str, tuple[Any, Any]]) -> dict[str, Any]:
    if not isinstance(d, dict):
        raise _err(src, path, "expected a table")
    for k in d:
        if k not in spec:
            raise _err(src, f"{path}.{k}", "unknown field")
    out = {}
    for k, (kind, default) in spec.items():
        out[k] = _conv(src, f"{path}.{k}", kind, d[k]) if k in d else default
    return out


def parse(data: dict[str, Any], src: str = "<scenario>") -> Scenario:
    """Validate a scenario's parsed TOML. Raises :class:`ScenarioError` naming the field."""
    for k in data:
        if k not in TOP_FIELDS:
            raise _err(src, k, "unknown field")
    gpus = _gpus(src, data.get("gpus"))
    n = len(gpus)
    nvswitch, pairs = _topology(src, data.get("topology", {}), n)
    noise = data.get("noise", 0.03)
    if isinstance(noise, bool) or not isinstance(noise, (int, float)) or not 0 <= noise <= 1:
        raise _err(src, "noise", "expected a number 0-1")
    phases, idle = _phases(src, data.get("phases", []), n)
    events = _events(src, data.get("events", []), n)
    processes = _processes(src, data.get("processes", []), n)
    servers = _servers(src, data.get("servers", []), n, len(phases), processes)
    _check_top_values(src, data)
    return Scenario(
        # words a scenario file gives reach headers and terminals: one printable line each, no escapes
        name=clean(data.get("name", Path(src).stem), 80), description=clean(data.get("description", ""), 500),
        host=clean(data.get("host", "simulated"), 80), driver_version=clean(data.get("driver_version", "550.54.15"), 40),
        cuda_driver_version=data.get("cuda_driver_version", 12040), cpu_count=data.get("cpu_count", 64),
        loop=data.get("loop", True), seed=data.get("seed", 1), noise=float(noise), gpus=gpus, pairs=pairs,
        nvswitch_links=nvswitch, phases=phases, events=events, source=src, idle=idle,
        processes=processes, servers=servers,
    )


def _check_top_values(src: str, data: dict[str, Any]) -> None:
    """The top-level words, numbers and the loop flag (their defaults are filled by :func:`parse`)."""
    for k, kind in (("name", str), ("description", str), ("host", str), ("driver_version", str)):
        if k in data and not isinstance(data[k], kind):
            raise _err(src, k, "expected a string")
    for k in ("cuda_driver_version", "cpu_count", "seed"):
        if k in data and (isinstance(data[k], bool) or not isinstance(data[k], int) or data[k] < 0):
            raise _err(src, k, "expected a non-negative integer")
    if "loop" in data and not isinstance(data["loop"], bool):
        raise _err(src, "loop", "expected true or false")


def _gpus(src: str, raw: Any) -> tuple[GpuSpec, ...]:
    """``[[gpus]]``: each entry is ``count`` GPUs alike (1-64), numbered in file order."""
    if not isinstance(raw, list) or not raw:
        raise _err(src, "gpus", "expected at least one [[gpus]] entry")
    gpus: list[GpuSpec] = []
    for gi, g in enumerate(raw):
        gd = _gpu_entry(src, f"gpus[{gi}]", g)
        gpus += [_gpu_spec(gd, len(gpus) + j, j) for j in range(gd["count"])]
    return tuple(gpus)


def _gpu_entry(src: str, path: str, g: Any) -> dict[str, Any]:
    """One ``[[gpus]]`` entry's fields, checked, with ``memory_reserved_bytes`` worked out."""
    gd = _table(src, path, g, GPU_FIELDS)
    n = gd["count"]
    if not 1 <= n <= 64:
        raise _err(src, f"{path}.count", "expected 1-64")
    for k in ("numa_nodes", "cpu_affinity"):
        if gd[k] is not None and len(gd[k]) != n:
            raise _err(src, f"{path}.{k}", f"expected {n} entries, one per GPU")
    speed = gd["nvlink_speed_mbps"]
    if speed is not None and not 0 <= speed <= 1_000_000:
        raise _err(src, f"{path}.nvlink_speed_mbps", "expected 0 (not supported) or MB/s per link up to 1000000")
    if gd["mig_instances"] is not None and not 0 <= gd["mig_instances"] <= 7:
        raise _err(src, f"{path}.mig_instances", "expected 0-7 (MIG devices on one GPU)")
    reserved_mib = gd["memory_reserved_mib"]
    if reserved_mib is None:
        # about what drivers reserve: 615 MiB of an H200's 141 GiB (docs/real-gpus.md, *Measured NVML facts*)
        reserved_mib = round(gd["memory_gib"] * 4.3)
    if reserved_mib > gd["memory_gib"] * 1024 / 2:
        raise _err(src, f"{path}.memory_reserved_mib", "expected at most half the memory")
    gd["memory_reserved_bytes"] = int(reserved_mib * 2**20)
    return gd


def _gpu_spec(gd: dict[str, Any], index: int, j: int) -> GpuSpec:
    """GPU ``index`` of the scenario, the ``j``-th of its ``[[gpus]]`` entry ``gd`` (checked)."""
    numa, aff = gd["numa_nodes"], gd["cpu_affinity"]
    gen_max = gd["pcie_gen_gpu_max"]
    sys_max = gd["pcie_gen_sys_max"] or gen_max
    best = min(gen_max, sys_max)
    return GpuSpec(
        index=index, name=gd["name"], architecture=gd["architecture"],
        memory_bytes=int(gd["memory_gib"] * 2**30), sm_clock_max_mhz=gd["sm_clock_max_mhz"],
        mem_clock_max_mhz=gd["mem_clock_max_mhz"],
        graphics_clock_max_mhz=gd["graphics_clock_max_mhz"] or gd["sm_clock_max_mhz"],
        power_limit_w=gd["power_limit_w"], pcie_gen_gpu_max=gen_max, pcie_gen_sys_max=sys_max,
        pcie_width_max=gd["pcie_width_max"],
        pcie_gen_idle=gd["pcie_gen_idle"] or best, pcie_gen_load=gd["pcie_gen_load"] or best,
        pcie_width_idle=gd["pcie_width_idle"] or gd["pcie_width_max"],
        pcie_width_load=gd["pcie_width_load"] or gd["pcie_width_max"],
        numa_node=int(numa[j]) if numa is not None else None,
        cpu_affinity=str(aff[j]) if aff is not None else None,
        gpm=gd["gpm"], nvlink_version=gd["nvlink_version"], fan=gd["fan"], memory_temp=gd["memory_temp"],
        pcie_counters=gd["pcie_counters"], nvlink_speed_mbps=gd["nvlink_speed_mbps"],
        process_list=gd["process_list"], process_util=gd["process_util"],
        memory_info_v2=gd["memory_info_v2"], memory_reserved_bytes=gd["memory_reserved_bytes"], ecc=gd["ecc"],
        row_remapping=gd["row_remapping"], xid_events=gd["xid_events"], mig_instances=gd["mig_instances"],
        nvlink_counters=gd["nvlink_counters"], nvlink_error_fields=gd["nvlink_error_fields"],
    )


def _links(src: str, path: str, v: Any) -> int:
    """An NVLink count 0-36 (NVML's most per GPU)."""
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 36:
        raise _err(src, path, "expected an integer 0-36")
    return v


def _pcie_path(src: str, path: str, v: Any) -> str:
    if v not in PATHS:
        raise _err(src, path, f"expected one of {', '.join(PATHS)}")
    return str(v)


def _topology(src: str, topo: Any, n: int) -> tuple[int, dict[tuple[int, int], tuple[str, int]]]:
    """``[topology]``: (NVSwitch links per GPU, {(a, b): (PCIe path, direct NVLinks)} for every pair a < b)."""
    if not isinstance(topo, dict):
        raise _err(src, "topology", "expected a table")
    for k in topo:
        if k not in TOPO_FIELDS:
            raise _err(src, f"topology.{k}", "unknown field")
    default_path = _pcie_path(src, "topology.default_path", topo.get("default_path", "PHB"))
    nvswitch = _links(src, "topology.nvswitch_links", topo.get("nvswitch_links", 0))
    pairs = {(a, b): (default_path, 0) for a in range(n) for b in range(a + 1, n)}
    raw_pairs = topo.get("pairs", [])
    if not isinstance(raw_pairs, list):
        raise _err(src, "topology.pairs", "expected a list")
    for pi, p in enumerate(raw_pairs):
        a, b, pair = _pair(src, f"topology.pairs[{pi}]", p, n, default_path)
        pairs[(min(a, b), max(a, b))] = pair
    for g in range(n):
        used = sum(nl for (a, b), (_p, nl) in pairs.items() if g in (a, b)) + nvswitch
        if used > 36:
            raise _err(src, "topology", f"GPU{g} would have {used} NVLinks (NVML allows 36)")
    return nvswitch, pairs


def _pair(src: str, path: str, p: Any, n: int, default_path: str) -> tuple[int, int, tuple[str, int]]:
    """One ``topology.pairs`` entry: (a, b, (PCIe path, direct NVLinks))."""
    if not isinstance(p, dict):
        raise _err(src, path, "expected a table")
    for k in p:
        if k not in PAIR_FIELDS:
            raise _err(src, f"{path}.{k}", "unknown field")
    a, b = p.get("a"), p.get("b")
    for name, v in (("a", a), ("b", b)):
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < n:
            raise _err(src, f"{path}.{name}", f"expected a GPU index 0-{n - 1}")
    assert isinstance(a, int) and isinstance(b, int)  # checked just above
    if a == b:
        raise _err(src, f"{path}.b", "must differ from a")
    pp = _pcie_path(src, f"{path}.path", p.get("path", default_path))
    return a, b, (pp, _links(src, f"{path}.nvlinks", p.get("nvlinks", 0)))


def _phases(src: str, raw: Any, n: int) -> tuple[tuple[Phase, ...], dict[str, Any]]:
    """``[[phases]]`` and the idle values (every field's default: what a GPU outside a phase's ``gpus`` reads)."""
    if not isinstance(raw, list):
        raise _err(src, "phases", "expected a list of [[phases]]")
    fields = phase_fields()
    idle = _table(src, "idle", {}, fields)
    phases = tuple(_phase(src, f"phases[{pi}]", p, n, fields) for pi, p in enumerate(raw))
    return phases, {k: v for k, v in idle.items() if k not in PHASE_ONLY}


def _phase(src: str, path: str, p: Any, n: int, fields: dict[str, tuple[Any, Any]]) -> Phase:
    pd = _table(src, path, p, fields)
    if pd["duration_s"] is None or pd["duration_s"] <= 0:
        raise _err(src, f"{path}.duration_s", "expected a positive number of seconds")
    gsel = _gpu_list(src, f"{path}.gpus", pd["gpus"], n)
    _check_events(src, f"{path}.clock_events", pd["clock_events"])
    overrides = tuple(_override(src, f"{path}.overrides[{oi}]", o, n, fields)
                      for oi, o in enumerate(pd["overrides"] or []))
    values = {k: v for k, v in pd.items() if k not in PHASE_ONLY}
    return Phase(name=pd["name"], duration_s=pd["duration_s"], values=values, gpus=gsel, overrides=overrides)


def _override(src: str, path: str, o: Any, n: int, fields: dict[str, tuple[Any, Any]]
              ) -> tuple[tuple[int, ...], dict[str, Any]]:
    """One entry of a phase's ``overrides``: (its GPUs, the values it sets)."""
    if not isinstance(o, dict) or "gpus" not in o:
        raise _err(src, path, "expected a table with gpus = [...]")
    od = {k: v for k, v in _table(src, path, o, fields).items() if k in o and k != "gpus"}
    for bad in ("duration_s", "overrides", "name"):
        if bad in od:
            raise _err(src, f"{path}.{bad}", "not allowed in an override")
    _check_events(src, f"{path}.clock_events", od.get("clock_events"))
    ogpus = _gpu_list(src, f"{path}.gpus", o["gpus"], n)
    assert ogpus is not None  # "gpus" is in o, and parsed TOML has no null
    return ogpus, od


def _events(src: str, raw: Any, n: int) -> tuple[SimEvent, ...]:
    """``[[events]]``: faults at a time on one GPU (``kind``: one of :data:`EVENT_KINDS`)."""
    if not isinstance(raw, list):
        raise _err(src, "events", "expected a list of [[events]]")
    events = []
    for ei, e in enumerate(raw):
        path = f"events[{ei}]"
        ed = _table(src, path, e, EVENT_FIELDS)
        if ed["at_s"] is None:
            raise _err(src, f"{path}.at_s", "required")
        if ed["kind"] not in EVENT_KINDS:
            raise _err(src, f"{path}.kind", f"expected one of {', '.join(EVENT_KINDS)}")
        if ed["gpu"] is None or not 0 <= ed["gpu"] < n:
            raise _err(src, f"{path}.gpu", f"expected a GPU index 0-{n - 1}")
        if ed["kind"] == "xid" and (ed["xid"] is None or not 1 <= ed["xid"] < 2**31):
            raise _err(src, f"{path}.xid", "expected an Xid code 1-2147483647")
        for k in ("corrected", "uncorrected", "rows_correctable", "rows_uncorrectable"):
            if ed[k] >= 2**31:
                raise _err(src, f"{path}.{k}", "expected at most 2147483647")
        events.append(SimEvent(**ed))
    return tuple(events)


def _servers(src: str, raw: Any, n: int, n_phases: int, processes: tuple[SimProcess, ...]) -> tuple[SimServer, ...]:
    """``[[servers]]``: kind (one of the endpoint kinds), model, port (1-65535, one server each), GPUs,
    TP/PP sizes, pids (default: the listed processes on its GPUs) and tok/s, one number per phase."""
    from gpuscope.core.vocab import SERVER_KINDS

    if not isinstance(raw, list):
        raise _err(src, "servers", "expected a list of [[servers]]")
    if len(raw) > MAX_SIM_SERVERS:
        raise _err(src, "servers", f"more than {MAX_SIM_SERVERS} servers")
    out: list[SimServer] = []
    ports: set[int] = set()
    for k, r in enumerate(raw):
        path = f"servers[{k}]"
        d = _table(src, path, r, SERVER_FIELDS)
        if d["kind"] not in (*SERVER_KINDS, "ollama"):
            raise _err(src, f"{path}.kind", f"expected one of {', '.join((*SERVER_KINDS, 'ollama'))}")
        port = d["port"]
        if port is None or not 1 <= port <= 65535:
            raise _err(src, f"{path}.port", "expected a port 1-65535")
        if port in ports:
            raise _err(src, f"{path}.port", f"port {port} is already another server's")
        ports.add(port)
        gpus = _gpu_list(src, f"{path}.gpus", d["gpus"], n)
        if not gpus:
            raise _err(src, f"{path}.gpus", "expected at least one GPU index")
        for name in ("tp", "pp"):
            if d[name] is not None and not 1 <= d[name] <= 4096:
                raise _err(src, f"{path}.{name}", "expected a size 1-4096")
        if (d["tp"] or 1) * (d["pp"] or 1) > len(gpus):
            raise _err(src, f"{path}.tp", f"tp × pp = {(d['tp'] or 1) * (d['pp'] or 1)} is more than its "
                       f"{count(len(gpus), 'GPU')}")
        pids = _server_pids(src, f"{path}.pids", d["pids"], gpus, processes)
        tok = _tok_s(src, f"{path}.tok_s", d["tok_s"], n_phases)
        running = _per_phase(src, f"{path}.running", d["running"], n_phases, 1e6)
        itl = _per_phase(src, f"{path}.itl_ms", d["itl_ms"], n_phases, 1e6)
        out.append(SimServer(kind=d["kind"], model=d["model"], port=port, gpus=gpus, tp=d["tp"], pp=d["pp"],
                             pids=pids, tok_s=tok, running=running, itl_ms=itl))
    return tuple(out)


def _server_pids(src: str, path: str, pids: Any, gpus: tuple[int, ...], processes: tuple[SimProcess, ...]
                 ) -> tuple[int, ...]:
    """A server's ``pids``; without them, the listed processes on its GPUs."""
    if pids is None:
        pids = sorted({p.pid for p in processes if p.gpu in gpus})
        if not pids:
            raise _err(src, path, "no simulated process on its GPUs: list them in [[processes]] "
                       "or give pids = [...]")
    elif not pids:
        raise _err(src, path, "expected at least one process id")
    elif not all(isinstance(x, int) and not isinstance(x, bool) and 1 <= x < MAX_PID for x in pids):
        raise _err(src, path, f"expected a list of process ids 1-{MAX_PID - 1}")
    return tuple(pids)


def _tok_s(src: str, path: str, tok: Any, n_phases: int) -> tuple[float, ...]:
    """A server's generated tok/s, one number per phase (default: 0 in each)."""
    return _per_phase(src, path, tok, n_phases, 1e7) or (0.0,) * n_phases


def _per_phase(src: str, path: str, v: Any, n_phases: int, most: float) -> tuple[float, ...] | None:
    """One number 0-``most`` per phase (None when not given)."""
    if v is None:
        return None
    if len(v) != n_phases or not all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                     and math.isfinite(x) and 0 <= x <= most for x in v):
        raise _err(src, path, f"expected {n_phases} numbers 0-{most:g}, one per phase")
    return tuple(float(x) for x in v)


def _processes(src: str, raw: Any, n: int) -> tuple[SimProcess, ...]:
    """``[[processes]]``: one entry per process, or one per GPU with ``gpus = [...]`` (then the pid is
    ``pid + k`` and ``{rank}`` in the name and command is ``k``, the GPU's position in the list)."""
    if not isinstance(raw, list):
        raise _err(src, "processes", "expected a list of [[processes]]")
    out: list[SimProcess] = []
    seen: dict[tuple[int, int], str] = {}
    for k, p in enumerate(raw):
        path = f"processes[{k}]"
        d = _table(src, path, p, PROCESS_FIELDS)
        if (d["gpu"] is None) == (d["gpus"] is None):
            raise _err(src, path, "expected one of gpu = N or gpus = [...]")
        if d["gpu"] is not None and not 0 <= d["gpu"] < n:
            raise _err(src, f"{path}.gpu", f"expected a GPU index 0-{n - 1}")
        gpus = (d["gpu"],) if d["gpu"] is not None else _gpu_list(src, f"{path}.gpus", d["gpus"], n)
        assert gpus is not None  # one of the two is set (checked above)
        if not gpus:
            raise _err(src, f"{path}.gpus", "expected at least one GPU index")
        pid = d["pid"]
        if pid is None:
            raise _err(src, f"{path}.pid", "required")
        if not 1 <= pid <= MAX_PID - len(gpus):
            raise _err(src, f"{path}.pid", f"expected a process id 1-{MAX_PID - len(gpus)}")
        if not (d["command"] or d["name"] or "").strip():
            raise _err(src, path, "expected a non-empty name or command (or both)")
        for rank, g in enumerate(gpus):
            command = (d["command"] or d["name"]).replace("{rank}", str(rank))
            name = (d["name"] or Path(command.split()[0]).name).replace("{rank}", str(rank))
            key = (g, pid + rank)
            if key in seen:
                raise _err(src, f"{path}.pid", f"pid {pid + rank} on GPU{g} is already listed by {seen[key]}")
            seen[key] = path
            out.append(SimProcess(gpu=g, pid=pid + rank, user=d["user"], name=name[:32], command=command,
                                  memory_gib=d["memory_gib"], sm_pct=d["sm_pct"], graphics=d["graphics"]))
    if len(out) > MAX_SIM_PROCESSES:
        raise _err(src, "processes", f"more than {MAX_SIM_PROCESSES} processes")
    return tuple(out)


def _gpu_list(src: str, path: str, v: Any, n: int) -> tuple[int, ...] | None:
    if v is None:
        return None
    if not isinstance(v, list) or not all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < n for x in v):
        raise _err(src, path, f"expected a list of GPU indices 0-{n - 1}")
    return tuple(v)


def _check_events(src: str, path: str, v: Any) -> None:
    if v is None:
        return
    for x in v:
        if x not in CLOCK_EVENT_NAMES:
            raise _err(src, path, f"unknown clock event {x!r} (expected one of {', '.join(CLOCK_EVENT_NAMES)})")


def shipped() -> dict[str, Path]:
    """The scenarios that ship with gpuscope, by name."""
    base = resources.files("gpuscope.sources") / "scenarios"
    return {Path(str(p)).stem: Path(str(p)) for p in base.iterdir() if str(p).endswith(".toml")}


def looks_like_recording(head: bytes) -> str | None:
    """What a file whose first bytes are a recording's is ("gzip-compressed", "a gpuscope recording"), or
    None: users pass a recording to ``--simulate`` for ``replay`` and got "cannot read ('utf-8' codec…)"."""
    if head[:2] == b"\x1f\x8b":
        return "gzip-compressed"
    if head.lstrip()[:1] == b"{" and b'"gpuscope-recording"' in head[:4096]:
        return "a gpuscope recording"
    return None


def load(name_or_path: str) -> Scenario:
    """Load a shipped scenario by name or a scenario file by path."""
    p = Path(name_or_path)
    builtin = shipped()
    if name_or_path in builtin:
        p = builtin[name_or_path]
    elif not p.exists():
        raise ScenarioError(f"unknown scenario {name_or_path!r}: not a file, and not one of "
                            f"{', '.join(sorted(builtin))} (see `gpuscope scenarios`)", exit_status=2)
    if (why := not_a_regular_file(p)) is not None:
        raise ScenarioError(f"scenario {p}: {why}")
    if p.is_dir():
        raise ScenarioError(f"scenario {p}: is a directory, not a file")
    try:
        if p.stat().st_size > MAX_SCENARIO_BYTES:
            raise ScenarioError(f"scenario {p}: larger than {MAX_SCENARIO_BYTES // 1024} KB")
        raw = p.read_bytes()
    except OSError as e:
        raise ScenarioError(f"scenario {p}: cannot read ({clean(str(e), 200)})") from None
    if (what := looks_like_recording(raw)) is not None:
        raise ScenarioError(f"scenario {p}: {what}, not a TOML scenario (a recording replays with "
                            f"`gpuscope replay {clean(str(p), 200)}`)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ScenarioError(f"scenario {p}: not a TOML text file ({clean(str(e), 200)})") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(f"scenario {p}: not valid TOML ({clean(str(e), 200)})") from None
    except RecursionError:
        raise ScenarioError(f"scenario {p}: nested too deeply") from None
    return parse(data, str(p) if name_or_path not in builtin else name_or_path)
