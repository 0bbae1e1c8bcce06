"""Typed, immutable records shared by every source and sink.

An :class:`Inventory` is read once (host, versions, devices with their static limits, topology);
then a source yields :class:`Frame` objects. A reading that the GPU does not support is ``None``,
never 0. Units are in the field names: ``_bytes``, ``_bytes_per_s``, ``_mhz``, ``_w``, ``_j``,
``_c`` (Celsius), ``_pct`` (0-100).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, NamedTuple

from gpuscope.core.vocab import CLOCK_EVENTS, EndpointState, state_of

# Clock event ("throttle") reason bits, as NVML defines them (named once, in core/vocab.py).
CLOCK_EVENT_REASONS: dict[int, str] = {e.bit: e.name for e in CLOCK_EVENTS}
CLOCK_EVENT_BITS: dict[str, int] = {v: k for k, v in CLOCK_EVENT_REASONS.items()}


def decode_clock_events(mask: int | None) -> tuple[str, ...]:
    """Names of the set bits of an NVML clock-event-reasons mask (``()`` for 0, ``()`` for None)."""
    if not mask:
        return ()
    return _decoded_clock_events(mask)


@lru_cache(maxsize=256)
def _decoded_clock_events(mask: int) -> tuple[str, ...]:
    """:func:`decode_clock_events` of a mask once per mask (a GPU shows a handful; several findings rules and
    panels ask every tick)."""
    return tuple(name for bit, name in CLOCK_EVENT_REASONS.items() if mask & bit)


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    """Static facts of one GPU, read once."""

    index: int
    name: str
    uuid: str
    bus_id: str
    architecture: str | None = None
    memory_total_bytes: int | None = None
    sm_clock_max_mhz: int | None = None
    mem_clock_max_mhz: int | None = None
    graphics_clock_max_mhz: int | None = None
    power_limit_w: float | None = None
    pcie_gen_gpu_max: int | None = None
    pcie_width_gpu_max: int | None = None
    pcie_gen_sys_max: int | None = None
    pcie_width_sys_max: int | None = None
    cpu_affinity: str | None = None
    numa_node: int | None = None
    nvlink_version: int | None = None
    nvlinks_active: int = 0
    gpm_supported: bool = False
    # One NVLink's bandwidth, one direction, bytes/s, as NVML's NVLINK_SPEED_MBPS field answers it
    # (None: not supported, e.g. H200 on driver 580; then core.topology's table of parts decides).
    nvlink_link_bytes_per_s: float | None = None
    # Which NVML memory info the source reads: 2 (``used`` excludes the driver's reserved memory, as
    # nvidia-smi shows it), 1 (the fallback: ``used`` includes it), None (unknown: older recordings).
    memory_info_version: int | None = None
    # MIG (Multi-Instance GPU): None when MIG mode is off or unknown; else the number of MIG devices (GPU
    # instances with their compute instances) the GPU is split into. Read once, at start.
    mig_instances: int | None = None


@dataclass(frozen=True, slots=True)
class PairLink:
    """The path between two GPUs (a < b): the PCIe label of their common ancestor and NVLinks."""

    a: int
    b: int
    pcie_path: str  # PIX, PXB, PHB, NODE, SYS
    nvlinks: int = 0
    via_nvswitch: bool = False

    @property
    def label(self) -> str:
        """The ``nvidia-smi topo -m`` label: NV# when NVLinks join the pair, else the PCIe path."""
        return f"NV{self.nvlinks}" if self.nvlinks else self.pcie_path


@dataclass(frozen=True, slots=True)
class Inventory:
    """Everything static about the machine being watched."""

    host: str
    devices: tuple[DeviceInfo, ...]
    pairs: tuple[PairLink, ...] = ()
    driver_version: str | None = None
    nvml_version: str | None = None
    cuda_driver_version: int | None = None
    source: str = "nvml"  # nvml | simulated | replay | remote
    simulated: bool = False
    scenario: str | None = None

    def pair(self, a: int, b: int) -> PairLink | None:
        """The link between GPUs ``a`` and ``b`` in either order, or None."""
        lo, hi = min(a, b), max(a, b)
        for p in self.pairs:
            if p.a == lo and p.b == hi:
                return p
        return None


PROCESS_KINDS = ("C", "G", "C+G")  # compute, graphics, both (as nvidia-smi's Type column)


@dataclass(frozen=True, slots=True)
class ProcessInfo:
    """One process on one GPU, from NVML's running-process lists (read on the slow path, every 5 s).

    ``name`` is the short name (``/proc/PID/comm``), ``command`` the command line (cut to 120
    characters), ``user`` the effective user (``"?"`` when /proc shows the pid but not its owner; ``"–"``
    when the pid is not in /proc: another PID namespace, or ended; ``command`` then says which). ``sm_pct`` / ``mem_pct`` are NVML's per-process SM and memory
    controller shares (``nvmlDeviceGetProcessUtilization``), None where the GPU does not report them.
    ``kind``: ``C`` compute, ``G`` graphics, ``C+G`` both. Fields after ``name`` were added later:
    recordings without them decode with the defaults.
    """

    pid: int
    used_memory_bytes: int | None = None
    name: str | None = None
    user: str | None = None
    command: str | None = None
    sm_pct: float | None = None
    mem_pct: float | None = None
    kind: str = "C"
    gpu_instance: int | None = None  # the MIG GPU instance the process runs in (None: the GPU is not in MIG mode)


@dataclass(frozen=True, slots=True)
class XidCount:
    """Critical Xid errors of one code on one GPU since the source started: how many, and when the last
    one came (Unix time, s). Read from NVML's event set (:mod:`gpuscope.core.health` says what each means)."""

    xid: int
    count: int = 1
    last_t: float = 0.0


@dataclass(frozen=True, slots=True)
class GpuReading:
    """One GPU at one instant. ``None`` means not supported (or not yet known), never zero."""

    index: int
    lost: bool = False
    util_gpu_pct: float | None = None
    util_mem_pct: float | None = None
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None
    sm_clock_mhz: int | None = None
    mem_clock_mhz: int | None = None
    graphics_clock_mhz: int | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    energy_j: float | None = None
    temp_gpu_c: float | None = None
    temp_mem_c: float | None = None
    fan_pct: float | None = None
    pstate: int | None = None
    clock_event_reasons: int | None = None
    pcie_gen: int | None = None
    pcie_width: int | None = None
    pcie_tx_bytes_per_s: float | None = None
    pcie_rx_bytes_per_s: float | None = None
    pcie_replay_count: int | None = None
    pcie_recovery_count: int | None = None
    pcie_error_count: int | None = None
    nvlink_tx_bytes_per_s: float | None = None
    nvlink_rx_bytes_per_s: float | None = None
    sm_active_pct: float | None = None
    sm_occupancy_pct: float | None = None
    tensor_active_pct: float | None = None
    dram_bw_util_pct: float | None = None
    processes: tuple[ProcessInfo, ...] | None = None
    # GPU health (added later: recordings without them decode as unknown). Memory the driver reserves
    # (NVML memory info v2; None with v1, whose ``mem_used_bytes`` includes it).
    mem_reserved_bytes: int | None = None
    # ECC error counts where ECC is on (None: off or not supported): since the driver loaded (volatile)
    # and over the GPU's life (aggregate). Read on the slow path.
    ecc_corrected_volatile: int | None = None
    ecc_uncorrected_volatile: int | None = None
    ecc_corrected_aggregate: int | None = None
    ecc_uncorrected_aggregate: int | None = None
    # Row remapping (``nvmlDeviceGetRemappedRows``): rows remapped for correctable / uncorrectable errors,
    # a remap waiting for a GPU reset, a remap that failed (the GPU should be replaced).
    remapped_rows_correctable: int | None = None
    remapped_rows_uncorrectable: int | None = None
    remap_pending: bool | None = None
    remap_failure: bool | None = None
    # Critical Xid errors seen since the source started, one entry per Xid code (None: none seen).
    xids: tuple[XidCount, ...] | None = None
    # Graphics/compute engine activity, % of time any part of it was busy (GPM; added later, like the above)
    gr_engine_active_pct: float | None = None
    # NVLink error counters, summed over the GPU's links since the driver loaded (None: no NVLink, or the GPU does
    # not report them): flow-control (flit) and data CRC errors, replays, recoveries. Read on the slow path
    # with the PCIe counters (every 15 s) and carried between reads (added later, like the above).
    nvlink_crc_flit_count: int | None = None
    nvlink_crc_data_count: int | None = None
    nvlink_replay_count: int | None = None
    nvlink_recovery_count: int | None = None
    # The power management limit (``nvmlDeviceGetPowerManagementLimit``, W): the limit set on the GPU (nvidia-smi
    # -pl, DCGM), which the enforced limit (``power_limit_w``) can sit below when another limiter is lower. Read on
    # the slow path with the enforced limit and carried between reads (added later, like the above).
    power_mgmt_limit_w: float | None = None

    @property
    def clock_events(self) -> tuple[str, ...]:
        return decode_clock_events(self.clock_event_reasons)


@dataclass(frozen=True, slots=True)
class EndpointReading:
    """One inference server at one instant (rates over the poller's window)."""

    url: str
    kind: str | None = None
    model: str | None = None
    up: bool | None = True  # None: not known yet (no answer so far)
    error: str | None = None
    gen_tokens_per_s: float | None = None
    prompt_tokens_per_s: float | None = None
    requests_running: float | None = None
    requests_waiting: float | None = None
    kv_cache_pct: float | None = None
    ttft_mean_s: float | None = None
    ttft_p50_s: float | None = None
    ttft_p95_s: float | None = None
    itl_mean_s: float | None = None
    itl_p50_s: float | None = None
    itl_p95_s: float | None = None
    spec_accept_length: float | None = None
    spec_accept_rate: float | None = None
    probe: bool = False
    # Rates and means above are over the last ``rate_window_s`` seconds of scrapes (None: fewer than two
    # fresh scrapes since start, an outage or a restart, so no rate is known yet).
    rate_window_s: float | None = None
    # Bucket bounds of a quantile the histogram cannot place precisely: (lo, hi), or (lo,) for "> lo".
    # ``*_p50_s`` / ``*_p95_s`` are set only when the bucket is narrow enough to support a value.
    ttft_p50_bounds_s: tuple[float, ...] | None = None
    ttft_p95_bounds_s: tuple[float, ...] | None = None
    itl_p50_bounds_s: tuple[float, ...] | None = None
    itl_p95_bounds_s: tuple[float, ...] | None = None
    # TTFT split: mean time queued and mean prefill time per request (vLLM request_queue/prefill_time).
    queue_mean_s: float | None = None
    prefill_mean_s: float | None = None
    # Prompt work: tokens computed (prefill) vs served from the prefix cache; hit rate of cache lookups.
    prompt_computed_tokens_per_s: float | None = None
    prompt_cached_tokens_per_s: float | None = None
    prefix_cache_hit_pct: float | None = None
    preemptions_per_min: float | None = None
    # The active probe's own measurement (one streamed request), kept apart from the server's metrics;
    # ``probe_fields`` names the metric fields above that were filled from the probe.
    probe_ttft_s: float | None = None
    probe_decode_tokens_per_s: float | None = None
    probe_fields: tuple[str, ...] = ()
    # Why the last probe failed, a fixed phrase ("probe: HTTP 401 (needs a token?)", "probe: no answer in 2 s");
    # None when it worked or there is no probe (sources/endpoint.py: probe_chat).
    probe_error: str | None = None
    resets: int = 0  # restarts / counter resets / outages after which the rate window started afresh
    # On the reading (``model`` None) of an endpoint's served models beyond the per-endpoint cap (the least
    # busy, their rates summed): how many. Recordings made before that reading existed carry it on every
    # model's reading instead.
    models_dropped: int = 0
    # What the reading says about the server (up, starting, bad_response, unreachable), beside the human
    # text in ``error``; readers decide on this, never on the text. Not given (a recording or an MQTT
    # payload from before this field, a value this version does not know): derived from ``up``, the rates
    # and, for "bad response", the text (see :meth:`__post_init__`). Always agrees with ``up``.
    state: EndpointState | None = None
    # The server's own TTFT and ITL histograms as its last scrape had them, cumulative since it started and summed over
    # label sets: (key, upper bounds, cumulative counts, sum or None, count) with key "ttft" or "itl" and finite bounds
    # only (the +Inf bucket is the count). The exporter writes them for histogram_quantile (:func:`server_histograms`).
    histograms: tuple[Any, ...] = ()

    def __post_init__(self) -> None:
        st = self.state
        if type(st) is not EndpointState:
            try:
                st = EndpointState(st) if st is not None else None
            except (ValueError, TypeError):
                st = None
        if st is None or (st is EndpointState.UNREACHABLE) == (self.up is not False):
            # the writer's "N bad response(s)" text is the only record of bad answers before ``state``
            bad = self.error is not None and "bad response" in self.error
            st = state_of(self.up, bad, self.gen_tokens_per_s, self.rate_window_s)
        if st is not self.state:
            object.__setattr__(self, "state", st)


SERVER_NAMES = {"vllm": "vLLM", "sglang": "SGLang", "tgi": "TGI", "llamacpp": "llama.cpp", "trtllm": "TRT-LLM",
                "triton": "Triton", "lmdeploy": "LMDeploy", "ollama": "Ollama"}


@dataclass(frozen=True, slots=True)
class ServingGroup:
    """The processes and GPUs that serve one inference endpoint (or, without an endpoint, one program's
    processes on GPUs no endpoint claims: ``python train.py`` on GPU2–GPU5).

    ``server`` is what the user calls it (``vLLM``, ``python train.py``); ``kind`` the endpoint's kind
    (``vllm``…; None for a group by process); ``endpoint`` its URL and ``port`` the port its listener was
    found on; ``pids`` host process ids (the listener first, then its descendants that hold GPUs); ``gpus``
    GPU indices; ``tp``/``pp`` tensor/pipeline-parallel sizes (None: not known); ``container`` the Docker
    container or Kubernetes pod from the cgroup path; ``local`` False when the endpoint is on another host;
    ``note`` what could not be known and why (another user's process, another network namespace);
    ``simulated`` True for a scenario's declared server. Recordings without groups decode with none.
    """

    server: str
    kind: str | None = None
    endpoint: str | None = None
    model: str | None = None
    port: int | None = None
    pids: tuple[int, ...] = ()
    gpus: tuple[int, ...] = ()
    tp: int | None = None
    pp: int | None = None
    container: str | None = None
    local: bool = True
    note: str | None = None
    simulated: bool = False


@dataclass(frozen=True, slots=True)
class Event:
    """Something that happened at ``t``: a marker, a finding raised/cleared, a GPU lost, a note."""

    t: float
    kind: str
    text: str = ""
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Frame:
    """One timestamped sample of every GPU (``t`` is Unix time in seconds)."""

    t: float
    gpus: tuple[GpuReading, ...]
    endpoints: tuple[EndpointReading, ...] = ()
    events: tuple[Event, ...] = ()
    groups: tuple[ServingGroup, ...] = ()  # serving groups (core/groups.py), every frame while known


class ServerHistogram(NamedTuple):
    """One of an endpoint's histograms (:attr:`EndpointReading.histograms`), checked: ``le`` strictly increasing
    finite bounds (seconds), ``cumulative`` non-decreasing counts of the same length, ``observations`` (the +Inf
    bucket) ≥ the last; ``sum_s`` None where the server exports no ``_sum``."""

    key: str
    le: tuple[float, ...]
    cumulative: tuple[float, ...]
    sum_s: float | None
    observations: float


HISTOGRAM_KEYS = ("ttft", "itl")


def server_histograms(e: EndpointReading) -> list[ServerHistogram]:
    """``e``'s histograms that are well formed (a recording or an MQTT payload can carry anything): each key once, bounds
    finite and increasing, counts finite, non-negative and non-decreasing up to ``count``; the rest left out."""
    out: list[ServerHistogram] = []
    seen: set[str] = set()
    for h in e.histograms:
        checked = _checked_histogram(h)
        if checked is not None and checked.key not in seen:
            seen.add(checked.key)
            out.append(checked)
    return out


def _checked_histogram(h: Any) -> ServerHistogram | None:
    if not isinstance(h, (tuple, list)) or len(h) != 5 or h[0] not in HISTOGRAM_KEYS:
        return None
    key, le, cum, total, count = h
    if not isinstance(le, (tuple, list)) or not isinstance(cum, (tuple, list)) or len(le) != len(cum) or len(le) > 64:
        return None
    nums = [*le, *cum, count, *(() if total is None else (total,))]
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in nums):
        return None
    counts = [*cum, count]
    if any(b <= a for a, b in zip(le, le[1:])) or any(b < a for a, b in zip(counts, counts[1:])) or counts[0] < 0:
        return None
    return ServerHistogram(key, tuple(float(x) for x in le), tuple(float(x) for x in cum),
                           None if total is None else float(total), float(count))
