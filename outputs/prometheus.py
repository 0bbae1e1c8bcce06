"""The Prometheus exporter: a sink that serves the session's last frame and findings at ``/metrics``.

Two groups of series (docs/prometheus.md lists them all):

* **DCGM-compatible** series with dcgm-exporter's names, types, units and labels (``gpu``, ``UUID``,
  ``pci_bus_id``, ``device``, ``modelName``, ``Hostname``, ``DCGM_FI_DRIVER_VERSION``), so dashboards built on
  dcgm-exporter (Grafana 12239) work unchanged on hosts without DCGM. A series is absent, never 0, where the GPU
  cannot read it. ``--dcgm-names`` writes them under the names before dcgm-exporter 4.9, its 4.9 names (in base
  units: :func:`dcgm_49`, from the catalogue) or both.
* **gpuscope's own** series (``gpuscope_`` prefix, base units in the names): PCIe link against its
  maxima, NVLink capacity, pair paths, clock-event reasons, active findings, endpoint serving metrics and
  the sampler's health.

The exposition is written here, not with prometheus_client (which renames series: ``_total``, unit
suffixes). The tick thread only hands over references (:meth:`PrometheusExporter.update`, O(1)); the
text is rendered at most once per frame, by the first scrape after it, and later scrapes of the same
frame are served the cached bytes. The exporter never calls NVML.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from gpuscope import __version__
from gpuscope.core import catalogue
from gpuscope.core.catalogue import MIB
from gpuscope.core.errors import GpuscopeError
from gpuscope.core.exposition import escape_help, escape_label, labels
from gpuscope.core.group_paths import worst_pair
from gpuscope.core.group_traffic import group_traffic, traffic_owners
from gpuscope.core.link_cost import evidence_figures
from gpuscope.core.link_verdict import UNKNOWN, VERDICT_VALUE, group_link, link_verdicts, verdict_id_of
from gpuscope.core.model import (
    CLOCK_EVENT_REASONS,
    DeviceInfo,
    EndpointReading,
    Frame,
    GpuReading,
    Inventory,
    server_histograms,
)
from gpuscope.core.topology import best_link, device_nvlink_capacity_bytes_per_s, pcie_capacity_bytes_per_s
from gpuscope.core.vocab import SEVERITIES
from gpuscope.outputs.exporter_http import Server, make_server
from gpuscope.outputs.webconfig import WebConfig

if TYPE_CHECKING:
    from gpuscope.sources.kubelet import PodLabels

# The Prometheus wiki's default-port list has 9100-9999 fully allocated (9400 is dcgm-exporter's), so
# gpuscope takes a port outside it: dcgm-exporter's 9400 plus 10000, below Linux's ephemeral range.
DEFAULT_PORT = 19400


class PrometheusError(GpuscopeError):
    """A bad ``--prometheus`` value or a port that cannot be bound."""


def parse_listen(spec: str) -> tuple[str, int]:
    """``[HOST:]PORT`` → (host, port); the host defaults to 127.0.0.1 (loopback only).

    ``PORT``, ``HOST:PORT``, ``[IPv6]:PORT`` and ``:PORT`` (all interfaces, like dcgm-exporter's ``:9400``)
    are accepted; port 0 takes any free port (the agent prints the URL). Raises :class:`PrometheusError` with a one-line message otherwise.
    """
    s = spec.strip()
    host, port_s = "127.0.0.1", s
    if s.startswith("["):
        end = s.find("]")
        if end < 0 or s[end + 1:end + 2] != ":":
            raise PrometheusError(f"--prometheus {spec!r}: expected [HOST:]PORT, e.g. 19400 or 0.0.0.0:19400")
        host, port_s = s[1:end], s[end + 2:]
    elif ":" in s:
        host, _, port_s = s.rpartition(":")
        if ":" in host:
            raise PrometheusError(f"--prometheus {spec!r}: write an IPv6 host in brackets, e.g. [::1]:19400")
        host = host or "0.0.0.0"
    if not port_s.isdigit() or not 0 <= int(port_s) < 65536:
        raise PrometheusError(f"--prometheus {spec!r}: the port must be a number from 0 (any free port) to 65535")
    if not host:
        raise PrometheusError(f"--prometheus {spec!r}: empty host")
    return host, int(port_s)


def fmt(v: float) -> str:
    """A sample value: integers without a fraction, NaN and ±Inf as the format spells them."""
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, int):
        return str(v)
    if v != v:
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    if v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    return repr(v)


@dataclass(frozen=True, slots=True)
class SamplerHealth:
    """How the sampling loop is doing (filled by the agent, one per tick)."""

    ticks: int = 0  # frames sampled since start
    skipped: int = 0  # ticks missed because a tick overran its interval
    last_tick_s: float | None = None  # sample + findings + hand-over of the last tick, seconds
    interval_s: float = 1.0
    mqtt_dropped: int | None = None  # frames the MQTT publisher dropped (None: no broker)


def skipped_ticks(prev_start: float | None, start: float, interval_s: float) -> int:
    """Ticks missed between two tick starts (monotonic seconds): 0 on schedule, n when n were skipped."""
    if prev_start is None or interval_s <= 0:
        return 0
    return max(0, round((start - prev_start) / interval_s) - 1)


# ---- families: the catalogue's (core/catalogue.py: Metric.dcgm / Metric.prom) and the exporter's own ----

Getter = Callable[[Any], "float | int | None"]
Member = tuple[Getter, float, bool, str]  # value of a reading, scale (exported = raw / scale), integer, labels


@dataclass(frozen=True, slots=True)
class Family:
    """One exported family of per-GPU or per-endpoint samples; each member is one value of the reading
    (several members: one family told apart by constant labels, e.g. ``stat``)."""

    name: str
    type: str
    help: str
    members: tuple[Member, ...]
    gpm: bool = False  # only GPUs with GPM (DCGM_FI_PROF_*)


def families(scope: str, kind: str) -> list[Family]:
    """The Prometheus families the catalogue declares for ``scope`` (``gpu``/``endpoint``) and ``kind``
    (``dcgm``: dcgm-exporter's names and labels; ``prom``: gpuscope's own), in catalogue order; metrics that
    share a family name are grouped at the first. Read at use time (a metric added to the catalogue is
    exported by the next :class:`Renderer`). Raises ValueError when members of one family disagree on
    type, help or GPM (a mistake in the catalogue)."""
    order: dict[str, Family] = {}
    for m in catalogue.metrics(scope):
        ser = getattr(m, kind)
        if ser is None:
            continue
        member = (m.getter(), ser.scale, ser.integer, "".join(f',{k}="{escape_label(v)}"' for k, v in ser.labels))
        fam = order.get(ser.name)
        if fam is None:
            order[ser.name] = Family(ser.name, ser.type, ser.help, (member,), ser.gpm)
        elif (fam.type, fam.help, fam.gpm) != (ser.type, ser.help, ser.gpm):
            raise ValueError(f"catalogue: the metrics of Prometheus family {ser.name} disagree on type, help or GPM")
        else:
            order[ser.name] = Family(fam.name, fam.type, fam.help, (*fam.members, member), fam.gpm)
    return list(order.values())


def _fb_free(r: GpuReading) -> float | None:
    """Free framebuffer as dcgm-exporter reports it: total − used − reserved (NVML memory info v2's ``free``);
    with v1 (no reserved figure) its ``used`` already includes the reserved memory."""
    if r.mem_total_bytes is None or r.mem_used_bytes is None:
        return None
    return max(0, r.mem_total_bytes - r.mem_used_bytes - (r.mem_reserved_bytes or 0))


def _nvlink_total(r: GpuReading) -> float | None:
    """NVLink traffic of all links, both directions (bytes/s), as DCGM's NVLink bandwidth total sums them."""
    if r.nvlink_tx_bytes_per_s is None and r.nvlink_rx_bytes_per_s is None:
        return None
    return (r.nvlink_tx_bytes_per_s or 0.0) + (r.nvlink_rx_bytes_per_s or 0.0)


# Derived from two fields of a reading, so not catalogue metrics (the catalogue has one metric per field).
DCGM_DERIVED = (Family("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", ((_fb_free, MIB, True, ""),)),
                # a gauge since dcgm-exporter 4.6.0-4.8.3 (its etc/default-counters.csv; a counter before): a MB/s rate
                Family("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "gauge", "Total number of NVLink bandwidth counters "
                       "for all lanes", ((_nvlink_total, 1e6, True, ""),)))

GPU_DERIVED = (Family("gpuscope_pcie_link_capacity_bytes_per_second", "gauge", "Usable bandwidth of the PCIe link "
                      "as it runs now, one direction, after line encoding.",
                      ((lambda r: pcie_capacity_bytes_per_s(r.pcie_gen, r.pcie_width), 1.0, False, ""),)),
               Family("gpuscope_xid_errors_total", "counter", "Critical Xid errors seen since gpuscope started "
                      "(absent until the first).",
                      ((lambda r: sum(x.count for x in r.xids) if r.xids else None, 1.0, False, ""),)))


# The Xid series stay for a GPU that fell off the bus: its Xid 79 is what an alert wants to see.
LOST_TOO = frozenset({"DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_XID_ERROR", "gpuscope_xid_errors_total"})


# ---- the DCGM name sets (docs/prometheus.md: which dcgm-exporter release each matches) ----
# One row per family written under DCGM's canonical field name: legacy family → (canonical name, factor: canonical value
# = legacy value × factor, integer, type, help). A catalogue metric's row is its ``Series.canonical``
# (core/catalogue.py); the derived family's row is here. Only names DCGM's public dcgm_fields.h defines.
Row = tuple[str, float, bool, str, str]
CANONICAL_DERIVED: dict[str, Row] = {
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": ("DCGM_FI_DEV_NVLINK_THROUGHPUT_BYTES_PER_SECOND", 1e6, True, "gauge",
                                           "NVLink throughput of all links, both directions (in bytes per second)."),
}


def dcgm_canonical() -> dict[str, Row]:
    """The rename table, read from the catalogue at use time (a metric added there with a ``canonical`` is renamed by
    the next :class:`Renderer`): legacy family → its canonical row."""
    out: dict[str, Row] = {}
    for m in catalogue.metrics("gpu"):
        v = m.dcgm.canonical if m.dcgm is not None else None
        if v is not None and m.dcgm is not None:
            out[m.dcgm.name] = (v.name, v.factor, v.integer, v.type, v.help)
    return {**out, **CANONICAL_DERIVED}


DRIVER_LABEL = "DCGM_FI_DRIVER_VERSION"  # every released dcgm-exporter's (its default counters file's label row)
# dcgm-exporter 4.0 renamed the clock-event family; the legacy sets write both names, dcgm-fields the new one
LEGACY_ALIASES = {"DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"}
# name set → (field names, the hostname label's key by default)
DCGM_NAME_SETS: dict[str, tuple[str, str]] = {
    "legacy": ("legacy", "hostname"),  # dcgm-exporter 4.6.0-4.8.3 and later (PR #655 renamed Hostname)
    "before-4.8.3": ("legacy", "Hostname"),  # dcgm-exporter releases before 4.6.0-4.8.3
    "dcgm-fields": ("canonical", "hostname"),  # experimental: DCGM's canonical field names
    "both": ("both", "hostname"),  # legacy, then each canonical family the legacy set does not already write
}
OLD_NAME_SETS = {"4.9": "dcgm-fields"}  # no dcgm-exporter 4.9 exists: the old value, accepted with a note


def name_set(names: str) -> tuple[str, str | None]:
    """(the name set ``names`` means, a one-line note when it is an old spelling). Raises :class:`PrometheusError`
    for an unknown one."""
    if names in DCGM_NAME_SETS:
        return names, None
    if names in OLD_NAME_SETS:
        new = OLD_NAME_SETS[names]
        return new, (f"--dcgm-names {names} is now --dcgm-names {new} (DCGM's canonical field names; no dcgm-exporter "
                     f"{names} was released): written as {new}")
    raise PrometheusError(f"--dcgm-names {names!r}: expected one of {', '.join(DCGM_NAME_SETS)}")


def renamed(fam: Family, name: str, factor: float = 1.0, integer: bool | None = None,
            typ: str | None = None, help_: str | None = None) -> Family:
    """``fam`` under another name, each value × ``factor``, rounded when ``integer`` (None: as ``fam``)."""
    members = tuple((get, scale / factor, was if integer is None else integer, extra)
                    for get, scale, was, extra in fam.members)
    return Family(name, typ or fam.type, help_ or fam.help, members, fam.gpm)


def dcgm_families(names: str = "legacy") -> list[Family]:
    """The DCGM-compatible families in name set ``names`` (:data:`DCGM_NAME_SETS`): the legacy field names (the
    clock-event family under both of its names), DCGM's canonical names (the fields of :func:`dcgm_canonical`
    renamed, in their units; the others under their own names) or both (the legacy set, then each canonical family
    whose name the legacy set does not already write). Raises :class:`PrometheusError` for another ``names``."""
    fields = DCGM_NAME_SETS[name_set(names)[0]][0]
    legacy = [*families("gpu", "dcgm"), *DCGM_DERIVED]
    table = dcgm_canonical()
    out: list[Family] = []
    if fields != "canonical":
        for fam in legacy:
            out.append(fam)
            if fam.name in LEGACY_ALIASES:
                out.append(renamed(fam, LEGACY_ALIASES[fam.name]))
    if fields != "legacy":
        written = {f.name for f in out}
        for fam in legacy:
            row = table.get(fam.name)
            new = renamed(fam, row[0], *row[1:]) if row else fam
            if new.name not in written:
                out.append(new)
    return out


# ---- opt-in series, as dcgm-exporter offers them (rows commented out in its counters file) ----
OPT_IN = {
    "DCGM_EXP_XID_ERRORS_TOTAL": "critical Xid errors per GPU and xid since gpuscope started",
    "DCGM_EXP_CLOCK_EVENTS_TOTAL": "clock events per GPU and reason, counted when a reason turns on",
    "DCGM_FI_DEV_ENFORCED_POWER_LIMIT": "the power limit the driver enforces, W",
    "DCGM_FI_DEV_POWER_MGMT_LIMIT": "the power management limit set on the GPU, W",
}
# the opt-in power-limit gauges: (name, help, the reading's field in W), written from the DCGM rows (live GPUs).
# The help texts are DCGM's own field descriptions (NVIDIA/DCGM dcgmlib/dcgm_fields.h: fields 164 and 160) with the
# unit added; dcgm-exporter 4.8.4's counters rows for them were not at hand to compare (docs/prometheus.md).
POWER_LIMIT_GAUGES: tuple[tuple[str, str, Callable[[GpuReading], float | None]], ...] = (
    ("DCGM_FI_DEV_ENFORCED_POWER_LIMIT", "Effective power limit that the driver enforces after taking into account "
     "all limiters (in W).", attrgetter("power_limit_w")),
    ("DCGM_FI_DEV_POWER_MGMT_LIMIT", "Current Power limit for the device (in W).", attrgetter("power_mgmt_limit_w")),
)


def parse_dcgm_counters(spec: str) -> tuple[str, ...]:
    """``--dcgm-counters NAME[,NAME…]`` → the opt-in series asked for (:data:`OPT_IN`, dcgm-exporter's names), each
    once, in the order given. Raises :class:`PrometheusError` with one line for an empty or unknown name."""
    out: list[str] = []
    for raw in spec.split(","):
        name = raw.strip()
        if name not in OPT_IN:
            shown = repr(name[:60]) if name else "an empty name"
            raise PrometheusError(f"--dcgm-counters: {shown} is not one of {', '.join(OPT_IN)}")
        if name not in out:
            out.append(name)
    return tuple(out)


class ClockEventCounts:
    """``DCGM_EXP_CLOCK_EVENTS_TOTAL``'s state: per GPU and reason, how often the reason turned on (edge-counted, as
    dcgm-exporter counts it: a reason already on in the first frame seen starts the state without a count). Fed every
    frame on the tick side (:meth:`observe`, ~9 bit tests per GPU), so reasons that come and go between scrapes count."""

    def __init__(self) -> None:
        self.last: dict[int, int] = {}
        self.counts: dict[int, dict[str, int]] = {}

    def observe(self, frame: Frame) -> None:
        for r in frame.gpus:
            mask = r.clock_event_reasons
            if mask is None or r.lost:
                continue
            per = self.counts.setdefault(r.index, dict.fromkeys(CLOCK_EVENT_REASONS.values(), 0))
            prev = self.last.get(r.index)
            if prev is not None and (rose := mask & ~prev):
                for bit, reason in CLOCK_EVENT_REASONS.items():
                    if rose & bit:
                        per[reason] += 1
            self.last[r.index] = mask

    def snapshot(self) -> dict[int, dict[str, int]]:
        return {gpu: dict(per) for gpu, per in self.counts.items()}


def _samples(fam: Family, rows: Sequence[tuple[str, Any]]) -> list[str]:
    """``fam``'s sample lines for (label set, reading) rows; None values are left out (absent, not 0)."""
    name = fam.name
    if len(fam.members) == 1 and fam.members[0][1:] == (1.0, False, ""):  # most families: the value as it is
        get = fam.members[0][0]
        return [f"{name}{lab} {fmt(v)}\n" for lab, obj in rows if (v := get(obj)) is not None]
    out = []
    for lab, obj in rows:
        for get, scale, integer, extra in fam.members:
            v = get(obj)
            if v is None:
                continue
            if scale != 1.0:
                v = v / scale
            if integer:
                v = round(v)
            out.append(f"{name}{lab[:-1] + extra + '}' if extra else lab} {fmt(v)}\n")
    return out


HISTOGRAM_FAMILIES = {
    "ttft": ("gpuscope_endpoint_server_time_to_first_token_seconds", "The inference server's own time-to-first-token "
             "histogram, cumulative since it started (for histogram_quantile; its bucket bounds)."),
    "itl": ("gpuscope_endpoint_server_inter_token_latency_seconds", "The inference server's own inter-token latency "
            "histogram, cumulative since it started (for histogram_quantile; its bucket bounds)."),
}


def _histograms(o: _Out, eps: Sequence[EndpointReading]) -> None:
    """The servers' TTFT and ITL histograms as Prometheus histograms (``_bucket`` with ``le``, ``_sum``, ``_count``),
    labelled like the other endpoint series, from each answering reading's last scrape (checked:
    :func:`~gpuscope.core.model.server_histograms`)."""
    rows: dict[str, list[str]] = {key: [] for key in HISTOGRAM_FAMILIES}
    for e in eps:
        if not e.up or not e.histograms:
            continue
        head = [("endpoint", e.url), ("model", e.model or ""), ("kind", e.kind or "")]
        lab = labels(head)
        for h in server_histograms(e):
            name = HISTOGRAM_FAMILIES[h.key][0]
            out = rows[h.key]
            out.extend(f"{name}_bucket{labels([*head, ('le', fmt(le))])} {fmt(n)}\n" for le, n in zip(h.le, h.cumulative))
            out.append(f"{name}_bucket{labels([*head, ('le', '+Inf')])} {fmt(h.observations)}\n")
            if h.sum_s is not None:
                out.append(f"{name}_sum{lab} {fmt(h.sum_s)}\n")
            out.append(f"{name}_count{lab} {fmt(h.observations)}\n")
    for key, (name, help_) in HISTOGRAM_FAMILIES.items():
        o.family(name, "histogram", help_, rows[key])


def _gpu_of(subject: str) -> tuple[str, str]:
    """A finding's subject → (gpu, pair) label values: ``GPU3`` → ("3", ""), ``GPU0-GPU1`` → ("", "0-1")."""
    parts = subject.split("-")
    if len(parts) == 2 and all(p.startswith("GPU") and p[3:].isdigit() for p in parts):
        return "", f"{parts[0][3:]}-{parts[1][3:]}"
    if subject.startswith("GPU") and subject[3:].isdigit():
        return subject[3:], ""
    return "", ""


class _Out:
    """Collects families; HELP/TYPE are written only for families that have samples."""

    def __init__(self) -> None:
        self.parts: list[str] = []

    def family(self, name: str, typ: str, help_: str, samples: list[str]) -> None:
        if samples:
            self.parts.append(f"# HELP {name} {escape_help(help_)}\n# TYPE {name} {typ}\n")
            self.parts.extend(samples)


LINK_COST_FAMILIES = (
    ("gpuscope_serving_group_link_busy_ratio", "Estimate: the share of time the serving group's path between its "
     "GPUs is busy moving its traffic (the busiest GPU and direction ÷ what the path delivers: the probe's figure, "
     "else the rated ceiling × a typical share; docs/findings.md § 2b)."),
    ("gpuscope_serving_group_link_bytes_per_token", "The busiest GPU's bytes per generated token on the group's "
     "path, one direction."),
    ("gpuscope_serving_group_link_tokens_per_second_ceiling", "Estimate: the tok/s the link alone would allow "
     "(path=now), and on the best of the better paths the hardware offers (path=better), while the link is busy "
     "half the time or more."),
    ("gpuscope_serving_group_allreduce_latency_ratio", "Estimate: the share of a decode step the all-reduces' "
     "latency takes (a probe's small-copy latency × 2(TP−1) × 2 per layer), where measured and the model known."),
)


def link_cost_values(ev: dict[str, Any]) -> list[tuple[str, list[tuple[str, Any]], float]]:
    """(family, extra labels, value) of a ``link_cost`` finding's evidence (the group's labels come first)."""
    f = evidence_figures(ev)  # the panel's figures (core/link_cost.py), so both say the same
    ceiling = "gpuscope_serving_group_link_tokens_per_second_ceiling"
    rows: list[tuple[str, list[tuple[str, Any]], float | None]] = [
        ("gpuscope_serving_group_link_busy_ratio", [], f.busy),
        ("gpuscope_serving_group_link_bytes_per_token", [], f.most),
        (ceiling, [("path", "now")], f.ceiling_now), (ceiling, [("path", "better")], f.ceiling_better),
        ("gpuscope_serving_group_allreduce_latency_ratio", [], f.latency_share)]
    return [(name, extra, v) for name, extra, v in rows if v is not None]


def _group_gpus(ev: dict[str, Any]) -> list[int]:
    """The GPUs of a slow-rank finding's group: its readings' GPUs."""
    readings = ev.get("readings")
    if isinstance(readings, list):
        return sorted({r["gpu"] for r in readings if isinstance(r, dict) and isinstance(r.get("gpu"), int)})
    return []


class Renderer:
    """Renders frames of one inventory; the per-GPU label sets are built once."""

    def __init__(self, inv: Inventory, *, hostname_label: str | Sequence[str] | None = None,
                 hostname: str | None = None, dcgm_names: str = "legacy", pods: PodLabels | None = None,
                 counters: Sequence[str] = ()):
        names = name_set(dcgm_names)[0]
        keys = hostname_keys(hostname_label, names)
        self.inv = inv
        host = hostname if hostname is not None else inv.host
        self.devs: dict[int, DeviceInfo] = {d.index: d for d in inv.devices}
        # dcgm-exporter's label set, in its order (the driver label absent when the driver version is unknown: an
        # empty label is no label to Prometheus)
        drv = inv.driver_version or ""
        self.dcgm_labels = {d.index: labels([
            ("gpu", d.index), ("UUID", d.uuid), ("pci_bus_id", d.bus_id), ("device", f"nvidia{d.index}"),
            ("modelName", d.name), *((k, host) for k in keys), *([(DRIVER_LABEL, drv)] if drv else [])])
            for d in inv.devices}
        self.gpu_labels = {d.index: labels([("gpu", d.index)]) for d in inv.devices}
        self.dcgm_families = dcgm_families(names)
        self.counters = frozenset(counters)
        self.gpu_families = [*families("gpu", "prom"), *GPU_DERIVED]
        self.endpoint_families = families("endpoint", "prom")
        self.static = self._static()
        self.pods = pods  # Kubernetes pod labels on the DCGM series (sources/kubelet.py), or None

    def _static(self) -> str:
        """Series that never change for this inventory (info, maxima, topology)."""
        inv = self.inv
        o = _Out()
        o.family("gpuscope_info", "gauge", "gpuscope build and source; simulated=\"true\" for a simulated machine.",
                 [f"gpuscope_info{labels([('version', __version__), ('host', inv.host), ('source', inv.source), ('simulated', str(inv.simulated).lower()), ('scenario', inv.scenario or ''), ('driver_version', inv.driver_version or '')])} 1\n"])  # noqa: E501
        o.family("gpuscope_gpu_info", "gauge", "Static facts of each GPU.",
                 [f"gpuscope_gpu_info{labels([('gpu', d.index), ('uuid', d.uuid), ('pci_bus_id', d.bus_id), ('name', d.name), ('architecture', d.architecture or ''), ('numa_node', '' if d.numa_node is None else d.numa_node), ('cpu_affinity', d.cpu_affinity or '')])} 1\n"  # noqa: E501
                  for d in inv.devices])

        def per_dev(name: str, typ: str, help_: str, get: Callable[[DeviceInfo], float | int | None]) -> None:
            o.family(name, typ, help_, [f"{name}{self.gpu_labels[d.index]} {fmt(v)}\n" for d in inv.devices
                                        if (v := get(d)) is not None])

        per_dev("gpuscope_pcie_link_generation_gpu_max", "gauge", "Highest PCIe generation the GPU supports.",
                lambda d: d.pcie_gen_gpu_max)
        per_dev("gpuscope_pcie_link_generation_slot_max", "gauge", "Highest PCIe generation the slot (system side) "
                "supports.", lambda d: d.pcie_gen_sys_max)
        per_dev("gpuscope_pcie_link_width_gpu_max_lanes", "gauge", "Widest PCIe link the GPU supports, in lanes.",
                lambda d: d.pcie_width_gpu_max)
        per_dev("gpuscope_pcie_link_width_slot_max_lanes", "gauge", "Widest PCIe link the slot supports, in lanes.",
                lambda d: d.pcie_width_sys_max)
        per_dev("gpuscope_pcie_link_max_capacity_bytes_per_second", "gauge", "Usable bandwidth at the best link "
                "both GPU and slot support (one direction, after line encoding).",
                lambda d: pcie_capacity_bytes_per_s(*best_link(d)))
        per_dev("gpuscope_nvlink_links_active", "gauge", "Active NVLinks of the GPU.",
                lambda d: d.nvlinks_active if d.nvlink_version else None)
        per_dev("gpuscope_nvlink_capacity_bytes_per_second", "gauge", "Bandwidth of the GPU's active NVLinks, one "
                "direction.", lambda d: device_nvlink_capacity_bytes_per_s(d))
        o.family("gpuscope_topology_path", "gauge", "The path between two GPUs as nvidia-smi topo -m labels it "
                 "(NV# when NVLinks join them, else PIX/PXB/PHB/NODE/SYS); pcie_path is the PCIe part.",
                 [f"gpuscope_topology_path{labels([('gpu_a', p.a), ('gpu_b', p.b), ('path', p.label), ('pcie_path', p.pcie_path)])} 1\n"  # noqa: E501
                  for p in inv.pairs])
        return "".join(o.parts)

    def render(self, frame: Frame | None, findings: Sequence[Any] = (), health: SamplerHealth | None = None,
               clock_events: dict[int, dict[str, int]] | None = None) -> str:
        """The whole exposition for one frame (``findings``: :class:`~gpuscope.core.findings.Finding`-like
        objects with id, rule, severity, subject; ``clock_events``: :class:`ClockEventCounts` as of that frame)."""
        o = _Out()
        o.parts.append(self.static)
        gpus = [r for r in (frame.gpus if frame else ()) if r.index in self.devs]
        live = [r for r in gpus if not r.lost]
        self._dcgm(o, gpus, live, clock_events)
        self._gpus(o, gpus, live)
        if self.pods is not None:
            o.parts.append(self.pods.info(self.devs))
        self._findings(o, findings)
        if frame is not None:
            self._endpoints(o, frame.endpoints, self.endpoint_families)
            _histograms(o, frame.endpoints)
            self._groups(o, frame)
            self._link_verdicts(o, frame, findings)
            self._group_findings(o, findings)
        self._health(o, frame, health)
        return "".join(o.parts)

    def _dcgm(self, o: _Out, gpus: list[GpuReading], live: list[GpuReading],
              clock_events: dict[int, dict[str, int]] | None = None) -> None:
        """The DCGM-compatible families of the name set (a lost GPU's only in :data:`LOST_TOO`'s), then the opt-in ones."""
        labs = self.dcgm_labels if self.pods is None else self.pods.dcgm_labels(self.dcgm_labels, self.devs)
        dcgm_rows = [(labs[r.index], r) for r in live]
        gpm_rows = [(lab, r) for lab, r in dcgm_rows if self.devs[r.index].gpm_supported]
        lost_dcgm = [(labs[r.index], r) for r in gpus if r.lost and r.xids]
        for fam in self.dcgm_families:
            rows = gpm_rows if fam.gpm else dcgm_rows + lost_dcgm if fam.name in LOST_TOO else dcgm_rows
            o.family(fam.name, fam.type, fam.help, _samples(fam, rows))
        if not self.counters:
            return
        for name, help_, get in POWER_LIMIT_GAUGES:
            if name in self.counters:
                o.family(name, "gauge", help_, [f"{name}{lab} {fmt(v)}\n" for lab, r in dcgm_rows
                                                if (v := get(r)) is not None])
        if "DCGM_EXP_XID_ERRORS_TOTAL" in self.counters:
            o.family("DCGM_EXP_XID_ERRORS_TOTAL", "counter", "Total XID errors observed since exporter start.",
                     [f'DCGM_EXP_XID_ERRORS_TOTAL{lab[:-1]},xid="{x.xid}"}} {x.count}\n'
                      for lab, r in dcgm_rows + lost_dcgm for x in sorted(r.xids or (), key=lambda x: x.xid)])
        if "DCGM_EXP_CLOCK_EVENTS_TOTAL" in self.counters and clock_events:
            o.family("DCGM_EXP_CLOCK_EVENTS_TOTAL", "counter", "Total clock events observed since exporter start "
                     "(edge-counted).",
                     [f'DCGM_EXP_CLOCK_EVENTS_TOTAL{lab[:-1]},clock_event="{reason}"}} {n}\n'
                      for lab, r in dcgm_rows for reason, n in clock_events.get(r.index, {}).items()])

    def _gpus(self, o: _Out, gpus: list[GpuReading], live: list[GpuReading]) -> None:
        """gpuscope's own per-GPU families: lost, the catalogue's and derived ones, the clock-event reasons."""
        o.family("gpuscope_gpu_lost", "gauge", "1 when the GPU stopped answering (fell off the bus).",
                 [f"gpuscope_gpu_lost{self.gpu_labels[r.index]} {fmt(r.lost)}\n" for r in gpus])
        gpu_rows = [(self.gpu_labels[r.index], r) for r in live]
        lost_gpu = [(self.gpu_labels[r.index], r) for r in gpus if r.lost and r.xids]
        for fam in self.gpu_families:
            o.family(fam.name, fam.type, fam.help, _samples(fam, gpu_rows + lost_gpu if fam.name in LOST_TOO else gpu_rows))
        ce: list[str] = []
        for r in live:
            mask = r.clock_event_reasons
            if mask is None:
                continue
            for bit, reason in CLOCK_EVENT_REASONS.items():
                ce.append(f'gpuscope_clock_event_active{{gpu="{r.index}",reason="{reason}"}} {1 if mask & bit else 0}\n')
        o.family("gpuscope_clock_event_active", "gauge", "1 while the clock-event (throttle) reason holds the "
                 "clocks down.", ce)

    @staticmethod
    def _findings(o: _Out, findings: Sequence[Any]) -> None:
        rows = []
        count = dict.fromkeys(SEVERITIES, 0)
        seen: set[str] = set()
        for f in findings:
            if f.id in seen:
                continue
            seen.add(f.id)
            count[f.severity] = count.get(f.severity, 0) + 1
            gpu, pair = _gpu_of(f.subject)
            rows.append(f"gpuscope_finding{labels([('id', f.id), ('rule', f.rule), ('severity', f.severity), ('gpu', gpu), ('pair', pair), ('subject', f.subject)])} 1\n")  # noqa: E501
        o.family("gpuscope_finding", "gauge", "An active (raised) finding; the rules are in docs/findings.md.", rows)
        o.family("gpuscope_findings_active", "gauge", "Active findings by severity.",
                 [f'gpuscope_findings_active{{severity="{escape_label(s)}"}} {n}\n' for s, n in count.items()])

    @staticmethod
    def _endpoints(o: _Out, eps: Sequence[EndpointReading], fams: Sequence[Family]) -> None:
        if not eps:
            return
        lab = [labels([("endpoint", e.url), ("model", e.model or ""), ("kind", e.kind or "")]) for e in eps]
        o.family("gpuscope_endpoint_up", "gauge", "1 when the last poll of the inference server succeeded "
                 "(no sample before its first answer).",
                 [f"gpuscope_endpoint_up{lab[k]} {fmt(e.up)}\n" for k, e in enumerate(eps) if e.up is not None])
        rows = [(lab[k], e) for k, e in enumerate(eps) if e.up]
        for fam in fams:
            o.family(fam.name, fam.type, fam.help, _samples(fam, rows))

    def _groups(self, o: _Out, frame: Frame) -> None:
        """Serving groups (docs/groups.md), labelled by the server (its name and endpoint) and its GPUs, never
        by PID: pids change on every restart, the server does not."""
        if not frame.groups:
            return
        info, rates = [], []
        seen: set[str] = set()
        owners = traffic_owners(frame.groups)
        for g in frame.groups:
            gpus = ",".join(str(i) for i in g.gpus)
            key = labels([("server", g.server), ("endpoint", g.endpoint or ""), ("gpus", gpus)])
            if key in seen:
                continue
            seen.add(key)
            p = worst_pair(self.inv, g.gpus)
            info.append(f"gpuscope_serving_group_info{labels([('server', g.server), ('endpoint', g.endpoint or ''), ('model', g.model or ''), ('gpus', gpus), ('tp', g.tp or ''), ('pp', g.pp or ''), ('path', p.label if p else ''), ('container', g.container or ''), ('local', str(g.local).lower()), ('simulated', str(g.simulated).lower())])} 1\n")  # noqa: E501
            if g.gpus:
                rates.append((key, group_traffic(g, frame, self.inv, owners)))
        o.family("gpuscope_serving_group_info", "gauge", "A serving group: the server (its name and endpoint), "
                 "its GPUs, TP/PP sizes and the worst path between its GPUs (docs/groups.md).", info)
        for name, attr, help_ in (
                ("gpuscope_serving_group_pcie_bytes_per_second", "pcie_bytes_per_s", "PCIe traffic of the group's "
                 "GPUs, both directions, summed over them; a GPU another group also holds is counted once, with the "
                 "group that has an endpoint (else the larger); absent while a GPU's counters are unknown."),
                ("gpuscope_serving_group_nvlink_bytes_per_second", "nvlink_bytes_per_s", "NVLink traffic of the "
                 "group's GPUs, both directions, summed over them (counted once, as the PCIe figure)."),
                ("gpuscope_serving_group_generated_tokens_per_second", "tokens_per_s", "Generated tokens/s of the "
                 "group's endpoint."),
                ("gpuscope_serving_group_bytes_per_token", "bytes_per_token", "Interconnect bytes (PCIe + NVLink) "
                 "per generated token.")):
            o.family(name, "gauge", help_, [f"{name}{key} {fmt(v)}\n" for key, t in rates
                                            if (v := getattr(t, attr)) is not None])

    @staticmethod
    def _group_findings(o: _Out, findings: Sequence[Any]) -> None:
        """What the link costs each raised group (``link_cost``; estimates) and the slow rank of a group
        (``slow_rank``), from the raised findings' evidence: the figures the panel and the findings show."""
        cost: dict[str, list[str]] = {}
        slow: list[str] = []
        for f in findings:
            ev = getattr(f, "evidence", None)
            if not isinstance(ev, dict):
                continue
            gpus = ",".join(str(i) for i in ev.get("gpus") or ())
            if getattr(f, "rule", None) == "link_cost":
                head = [("server", ev.get("server") or ""), ("endpoint", ev.get("endpoint") or ""), ("gpus", gpus)]
                for name, extra, v in link_cost_values(ev):
                    cost.setdefault(name, []).append(f"{name}{labels(head + extra)} {fmt(v)}\n")
            elif getattr(f, "rule", None) == "slow_rank" and isinstance(ev.get("gpu"), int):
                group = str(ev.get("group") or "")
                endpoint = group if "://" in group else ""
                slow.append(f"gpuscope_serving_group_slow_rank{labels([('server', ev.get('server') or ''), ('endpoint', endpoint), ('gpus', ','.join(str(p) for p in _group_gpus(ev))), ('gpu', ev['gpu']), ('cause', ev.get('cause') or '')])} 1\n")  # noqa: E501
        for name, help_ in LINK_COST_FAMILIES:
            o.family(name, "gauge", help_, cost.get(name, []))
        o.family("gpuscope_serving_group_slow_rank", "gauge", "A GPU the serving group waits for (the slow rank) "
                 "and why (cause: power_limit, sw_power_cap, hw_thermal, mem_temp, sm_clock, pcie_link…), while "
                 "its finding is raised (docs/findings.md § 14).", slow)

    def _link_verdicts(self, o: _Out, frame: Frame, findings: Sequence[Any]) -> None:
        """One series per serving group: its link verdict (core/link_verdict.py), 0 healthy, 1 degraded, 2 at risk.
        The value is the raised ``link_verdict`` finding's (held 5 s like every finding, so it says what the panel
        says), 0 while none is raised; absent while nothing about the group's links can be read (unknown)."""
        if not frame.groups:
            return
        raised = {f.id: f for f in findings if getattr(f, "rule", None) == "link_verdict"}
        rows = []
        for v in link_verdicts(self.inv, (frame,)):
            f = raised.get(verdict_id_of(v))
            ev = getattr(f, "evidence", None) if f is not None else None
            if isinstance(ev, dict) and ev.get("verdict") in VERDICT_VALUE:
                value, link = VERDICT_VALUE[ev["verdict"]], str(ev.get("link") or v.link)
            elif v.verdict == UNKNOWN:
                continue
            else:  # no finding raised: healthy, named by the group's links
                value, link = 0, group_link(self.inv, v.group)
            key = labels([("server", v.group.server), ("endpoint", v.group.endpoint or ""),
                          ("gpus", ",".join(str(i) for i in v.group.gpus)), ("link", link)])
            rows.append(f"gpuscope_serving_group_link_verdict{key} {value}\n")
        o.family("gpuscope_serving_group_link_verdict", "gauge", "The serving group's link verdict: 0 healthy, "
                 "1 degraded (slower than it should be), 2 at risk (errors that precede a hang); link names the link "
                 "(docs/findings.md). Absent while nothing about the group's links can be read.", rows)

    @staticmethod
    def _health(o: _Out, frame: Frame | None, h: SamplerHealth | None) -> None:
        if frame is not None:
            o.family("gpuscope_last_frame_timestamp_seconds", "gauge", "Unix time of the frame these series come "
                     "from.", [f"gpuscope_last_frame_timestamp_seconds {fmt(frame.t)}\n"])
        if h is None:
            return
        o.family("gpuscope_sampler_ticks_total", "counter", "Frames sampled since the agent started.",
                 [f"gpuscope_sampler_ticks_total {h.ticks}\n"])
        o.family("gpuscope_sampler_ticks_skipped_total", "counter", "Ticks skipped because a tick overran its "
                 "interval.", [f"gpuscope_sampler_ticks_skipped_total {h.skipped}\n"])
        o.family("gpuscope_sampler_interval_seconds", "gauge", "Configured sampling interval.",
                 [f"gpuscope_sampler_interval_seconds {fmt(h.interval_s)}\n"])
        if h.last_tick_s is not None:
            o.family("gpuscope_sampler_last_tick_duration_seconds", "gauge", "Time the last tick took (sample, "
                     "findings, hand-over).", [f"gpuscope_sampler_last_tick_duration_seconds {fmt(h.last_tick_s)}\n"])
        if h.mqtt_dropped is not None:
            o.family("gpuscope_mqtt_frames_dropped_total", "counter", "Frames the MQTT publisher dropped (broker "
                     "unreachable or slow).", [f"gpuscope_mqtt_frames_dropped_total {h.mqtt_dropped}\n"])


TARGET_LABELS = ("job", "instance")  # Prometheus sets these on every series it scrapes


def hostname_label_problem(key: str) -> str | None:
    """Why ``key`` cannot be the hostname label's key, in one line; None when it can."""
    if key.startswith("__"):
        return "names starting with '__' are reserved for Prometheus's own use"
    if not _valid_label_name(key):
        return "not a valid Prometheus label name (ASCII letters, digits and '_', not starting with a digit)"
    if key in TARGET_LABELS:
        return (f"Prometheus sets '{key}' itself on every series it scrapes (the exporter's would be renamed "
                f"exported_{key}); use another key, such as hostname")
    if key in ("gpu", "UUID", "pci_bus_id", "device", "modelName", DRIVER_LABEL):
        return "that is another DCGM label's key"
    return None


def hostname_keys(spec: str | Sequence[str] | None, names: str = "legacy") -> tuple[str, ...]:
    """The hostname label's keys: ``spec`` (``NAME`` or ``NAME,NAME``: both spellings while dashboards move, e.g.
    ``hostname,Hostname``), else the name set's own (``hostname``; ``Hostname`` for ``before-4.8.3``). Raises
    :class:`PrometheusError` with one line for a key that cannot be one."""
    if spec is None:
        return (DCGM_NAME_SETS[name_set(names)[0]][1],)
    keys = tuple(k.strip() for k in spec.split(",")) if isinstance(spec, str) else tuple(spec)
    for k in keys:
        if (why := hostname_label_problem(k)) is not None:
            raise PrometheusError(f"--prometheus-hostname-label {k[:60]!r}: {why}")
    if len(set(keys)) != len(keys) or not 1 <= len(keys) <= 2:
        raise PrometheusError(f"--prometheus-hostname-label {','.join(keys)[:60]!r}: one key, or two different ones "
                              "(hostname,Hostname)")
    return keys


def _valid_label_name(s: str) -> bool:
    return bool(s) and not s.startswith("__") and (s[0].isascii() and (s[0].isalpha() or s[0] == "_")) and all(
        c.isascii() and (c.isalnum() or c == "_") for c in s)


class PrometheusExporter:
    """Serves ``/metrics`` from the last state handed to :meth:`update` (HTTP, or HTTPS and auth per ``web``:
    outputs/exporter_http.py): one thread reads request heads, at most 64 workers answer them."""

    def __init__(self, listen: tuple[str, int], inv: Inventory, *, hostname_label: str | Sequence[str] | None = None,
                 hostname: str | None = None, dcgm_names: str = "legacy", pods: PodLabels | None = None,
                 web: WebConfig | None = None, counters: Sequence[str] = ()):
        self.listen = listen
        self.web = web
        self.renderer = Renderer(inv, hostname_label=hostname_label, hostname=hostname, dcgm_names=dcgm_names,
                                 pods=pods, counters=counters)
        self.clock_events = ClockEventCounts() if "DCGM_EXP_CLOCK_EVENTS_TOTAL" in counters else None
        self._state: tuple[int, Frame | None, tuple[Any, ...], SamplerHealth | None,
                           dict[int, dict[str, int]] | None] = (0, None, (), None, None)
        self._cache: tuple[int, bytes] = (-1, b"")
        self._render_lock = threading.Lock()
        self.renders = 0
        self.scrapes = 0
        self._server: Server | None = None
        self._thread: threading.Thread | None = None

    # -- the tick side: O(1), never blocks on a scrape
    def update(self, frame: Frame, findings: Sequence[Any] = (), health: SamplerHealth | None = None) -> None:
        """Hand over the latest frame, the active findings and the sampler's health (a reference swap; with
        ``DCGM_EXP_CLOCK_EVENTS_TOTAL`` on, the frame's clock-event reasons are counted first)."""
        counts = None
        if self.clock_events is not None:
            self.clock_events.observe(frame)
            counts = self.clock_events.snapshot()
        self._state = (self._state[0] + 1, frame, tuple(findings), health, counts)

    # -- the scrape side
    def body(self) -> bytes:
        """The exposition of the latest state, rendered once per update and cached."""
        state = self._state
        cache = self._cache
        if cache[0] == state[0]:
            return cache[1]
        with self._render_lock:
            cache = self._cache
            if cache[0] == state[0]:
                return cache[1]
            data = self.renderer.render(state[1], state[2], state[3], state[4]).encode()
            self._cache = (state[0], data)
            self.renders += 1
            return data

    @property
    def url(self) -> str:
        host, port = self.address
        scheme = "https" if self.web is not None and self.web.tls is not None else "http"
        return f"{scheme}://{'[' + host + ']' if ':' in host else host}:{port}/metrics"

    @property
    def address(self) -> tuple[str, int]:
        if self._server is None:
            return self.listen
        addr = self._server.server_address
        return str(addr[0]), int(addr[1])

    def start(self) -> PrometheusExporter:
        """Bind and serve in a daemon thread. Raises :class:`PrometheusError` when the address can't be bound."""
        host, port = self.listen
        try:
            self._server = make_server((host, port), self, self.web)
        except OSError as e:
            raise PrometheusError(f"--prometheus {host}:{port}: cannot listen ({e.strerror or e})") from None
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.25},
                                        name="gpuscope-prometheus", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

