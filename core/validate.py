"""The one validation gate for data from outside (recordings, MQTT payloads, endpoint readings, CLI numbers).

Everything decoded by :mod:`gpuscope.core.codec` passes through here, so every front end sees the same
guarantees:

* numbers are finite; a reading outside its physical range (``util 250 %``, ``-3 W``, ``Gen99``, a
  clock of 10^30) becomes ``None`` ("unknown") and is counted in a :class:`Tally`, never shown;
* a frame's ``t`` is a finite time (a NaN/inf ``t`` rejects the frame: :class:`CodecError`);
* an inventory has at least one GPU and its indices are exactly 0…n−1, each once;
* a frame's GPUs are unique, in range, and no more than the inventory has;
* text is made terminal-safe (:func:`gpuscope.core.text.clean`) and bounded;
* no secret passes (:mod:`gpuscope.core.redact`): an endpoint URL loses its ``user:password@``, a process's
  command line its ``--api-key`` value (a recording or agent from before they were redacted at the source);
* free-form event data is bounded in depth and size and holds no NaN/Infinity.

Structural problems raise :class:`~gpuscope.core.codec.CodecError` (a one-line :class:`GpuscopeError`);
out-of-range values are dropped and counted. Pure functions, no I/O.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gpuscope.core import catalogue
from gpuscope.core.catalogue import BYTES, COUNT, MHZ, PCT, RATE, SECONDS, WATTS
from gpuscope.core.errors import GpuscopeError
from gpuscope.core.model import (
    PROCESS_KINDS,
    DeviceInfo,
    EndpointReading,
    Event,
    Frame,
    GpuReading,
    Inventory,
    PairLink,
    ProcessInfo,
    ServingGroup,
)
from gpuscope.core.redact import public_url, redact_command
from gpuscope.core.text import clean, clean_opt, count


class ValidationError(GpuscopeError, ValueError):
    """Data that fails the gate's structural checks (the message is one line naming the problem)."""


MAX_JSON_BYTES = 16 * 1024 * 1024  # one JSON document (a frame line, a payload, a header)
MAX_DEPTH = 32  # nesting of any JSON document we accept
MAX_DATA_DEPTH = 6  # nesting of an event's free-form data
MAX_DATA_ITEMS = 200  # keys/items in an event's data, all levels together
# ... except a link probe's, whose figures grow with its GPUs and pairs: 8 GPUs and their 28 pairs take ~1,500
# (docs/probe-json.md); 16 GPUs' 120 pairs ~6,000
MAX_DATA_ITEMS_BY_KIND = {"probe": 16_000}
MAX_GPUS = 1024
MAX_PROCESSES = 512
MAX_ENDPOINTS = 256
MAX_EVENTS = 1000
MAX_GROUPS = 64  # serving groups in one frame
MAX_GROUP_PIDS = 256
MAX_PARALLEL = 4096  # a TP or PP size beyond it is not a real one
MAX_PID = 4_194_304  # Linux's pid_max ceiling

# The readings' ranges are the catalogue's (each metric's ``valid``): one table for the gate, the seek index and
# the views. These snapshots are for readers that build per-field tables once; the checks below read the
# catalogue at use time (cached), so a metric added there is range-checked at once.
GPU_RANGES: dict[str, tuple[float, float]] = catalogue.ranges("gpu")
ENDPOINT_RANGES: dict[str, tuple[float, float]] = catalogue.ranges("endpoint")
DEVICE_RANGES: dict[str, tuple[float, float]] = {  # an inventory's static facts (not metrics)
    "memory_total_bytes": BYTES, "sm_clock_max_mhz": MHZ, "mem_clock_max_mhz": MHZ,
    "graphics_clock_max_mhz": MHZ, "power_limit_w": WATTS,
    "pcie_gen_gpu_max": (1.0, 8.0), "pcie_width_gpu_max": (1.0, 32.0),
    "pcie_gen_sys_max": (1.0, 8.0), "pcie_width_sys_max": (1.0, 32.0),
    "numa_node": (-1.0, 4096.0), "nvlink_version": (0.0, 16.0), "nvlink_link_bytes_per_s": RATE,
    "memory_info_version": (1.0, 2.0), "mig_instances": (0.0, 64.0),
}
XID_RANGE = (0.0, float(2**31))  # NVML's Xid is a 32-bit code; the catalogue's go up to the 100s
MAX_XIDS = 64  # distinct Xid codes kept per GPU
# an endpoint reading's numbers that are not metrics: the poller's counts and a quantile's bucket bounds
ENDPOINT_COUNTS: dict[str, tuple[float, float]] = {"resets": COUNT, "models_dropped": COUNT}
ENDPOINT_BOUNDS = ("ttft_p50_bounds_s", "ttft_p95_bounds_s", "itl_p50_bounds_s", "itl_p95_bounds_s")


@dataclass
class Tally:
    """What the gate dropped: single readings set to unknown, and whole frames/messages rejected."""

    readings: int = 0
    frames: int = 0

    def describe(self) -> str:
        """``"3 out-of-range readings shown as unknown; 1 frame rejected"`` (``""`` when nothing dropped)."""
        parts = []
        if self.readings:
            parts.append(f"{count(self.readings, 'out-of-range reading')} shown as unknown")
        if self.frames:
            parts.append(f"{count(self.frames, 'invalid frame')} rejected")
        return "; ".join(parts)


def in_range(v: Any, lo: float, hi: float) -> bool:
    """True for a finite real number (not a bool) within ``[lo, hi]``."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and lo <= v <= hi


def _ranged(rec: Any, ranges: dict[str, tuple[float, float]], tally: Tally | None) -> dict[str, Any]:
    """The fields of ``rec`` to replace: out-of-range numbers → None (counted); ints stay ints."""
    changes: dict[str, Any] = {}
    for name, (lo, hi) in ranges.items():
        v = getattr(rec, name)
        if v is None:
            continue
        if not in_range(v, lo, hi):
            changes[name] = None
            if tally is not None:
                tally.readings += 1
    return changes


def _index(v: Any, what: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValidationError(f"{what}: index must be a whole number")
    return v


def check_finite_time(t: Any, what: str) -> float:
    """``t`` as a float if it is a finite plausible Unix-or-relative time, else :class:`ValidationError`."""
    if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or abs(t) > 1e11:
        raise ValidationError(f"{what}: time is not a finite number ({t!r})")
    return float(t)


def bounded_data(d: Any, depth: int = 0, budget: list[int] | None = None, limit: int = MAX_DATA_ITEMS) -> Any:
    """A copy of free-form JSON data with NaN/inf → None, strings cleaned and bounded, depth and item
    count capped at ``limit`` (deeper or extra parts are dropped)."""
    budget = [limit] if budget is None else budget
    if isinstance(d, float):
        return d if math.isfinite(d) else None
    if isinstance(d, str):
        return clean(d, 500)
    if d is None or isinstance(d, (bool, int)):
        return d
    if depth >= MAX_DATA_DEPTH:
        return None
    if isinstance(d, dict):
        out = {}
        for k, v in d.items():
            budget[0] -= 1
            if budget[0] < 0:
                break
            out[clean(k, 80)] = bounded_data(v, depth + 1, budget)
        return out
    if isinstance(d, (list, tuple)):
        items = []
        for v in d:
            budget[0] -= 1
            if budget[0] < 0:
                break
            items.append(bounded_data(v, depth + 1, budget))
        return items
    return None


def check_device(d: DeviceInfo, tally: Tally | None = None) -> DeviceInfo:
    ch = _ranged(d, DEVICE_RANGES, tally)
    if d.nvlinks_active is not None and not in_range(d.nvlinks_active, 0, 64):
        ch["nvlinks_active"] = 0
        if tally is not None:
            tally.readings += 1
    ch["name"] = clean(d.name, 100)
    ch["uuid"] = clean(d.uuid, 100)
    ch["bus_id"] = clean(d.bus_id, 40)
    ch["architecture"] = clean_opt(d.architecture, 40)
    ch["cpu_affinity"] = clean_opt(d.cpu_affinity, 200)
    return dataclasses.replace(d, **ch)


def _unique_indices(indices: Iterable[Any], limit: int, where: str, twice: str) -> None:
    """Each GPU index once, each in 0…limit−1; else a :class:`ValidationError` naming the first offender."""
    seen: set[int] = set()
    for raw in indices:
        i = _index(raw, f"{where}.{'devices' if where == 'inventory' else 'gpus'}")
        if i in seen:
            raise ValidationError(f"{where}: GPU {i} {twice}")
        if not 0 <= i < limit:
            raise ValidationError(f"{where}: GPU index {i} outside 0…{limit - 1}")
        seen.add(i)


def check_inventory(inv: Inventory, tally: Tally | None = None) -> Inventory:
    """The inventory with its strings cleaned and impossible limits unknown. Raises
    :class:`ValidationError` for no GPUs, too many, or indices that are not exactly 0…n−1 once each."""
    n = len(inv.devices)
    if n == 0:
        raise ValidationError("inventory: no GPUs listed")
    if n > MAX_GPUS:
        raise ValidationError(f"inventory: {n} GPUs listed (at most {MAX_GPUS})")
    _unique_indices((d.index for d in inv.devices), n, "inventory", "is listed twice")
    devices = tuple(sorted((check_device(d, tally) for d in inv.devices), key=lambda d: d.index))
    pairs: list[PairLink] = []
    seen_pairs: set[tuple[int, int]] = set()
    for p in inv.pairs:
        a, b = p.a, p.b
        ok = (isinstance(a, int) and isinstance(b, int) and 0 <= a < b < n and (a, b) not in seen_pairs
              and in_range(p.nvlinks, 0, 64))
        if not ok:
            if tally is not None:
                tally.readings += 1
            continue
        seen_pairs.add((a, b))
        pairs.append(dataclasses.replace(p, pcie_path=clean(p.pcie_path, 8)))
    cuda = inv.cuda_driver_version if in_range(inv.cuda_driver_version, 0, 10**6) else None
    return dataclasses.replace(inv, host=clean(inv.host, 253) or "?", devices=devices, pairs=tuple(pairs),
                               driver_version=clean_opt(inv.driver_version, 40),
                               nvml_version=clean_opt(inv.nvml_version, 40), cuda_driver_version=cuda,
                               source=clean(inv.source, 20), scenario=clean_opt(inv.scenario, 100))


def check_gpu(g: GpuReading, tally: Tally | None = None) -> GpuReading:
    ch = _ranged(g, catalogue.ranges("gpu"), tally)
    if g.processes is not None:
        procs = []
        for p in g.processes[:MAX_PROCESSES]:
            if not in_range(p.pid, 0, 2**31):
                if tally is not None:
                    tally.readings += 1
                continue
            mem = p.used_memory_bytes if p.used_memory_bytes is None or in_range(p.used_memory_bytes, *BYTES) else None
            sm, mp = (v if v is None or in_range(v, *PCT) else None for v in (p.sm_pct, p.mem_pct))
            procs.append(ProcessInfo(pid=p.pid, used_memory_bytes=mem, name=clean_opt(p.name, 100),
                                     user=clean_opt(p.user, 32), command=clean_opt(p.command and redact_command(p.command), 120), sm_pct=sm,
                                     mem_pct=mp, kind=p.kind if p.kind in PROCESS_KINDS else "C",
                                     gpu_instance=p.gpu_instance if in_range(p.gpu_instance, 0, 64) else None))
        ch["processes"] = tuple(procs)
    if g.xids is not None:
        xids = tuple(x for x in g.xids[:MAX_XIDS]
                     if in_range(x.xid, *XID_RANGE) and in_range(x.count, 1, COUNT[1]) and in_range(x.last_t, 0, 1e11))
        if len(xids) != len(g.xids) and tally is not None:
            tally.readings += len(g.xids) - len(xids)
        ch["xids"] = xids or None
    return dataclasses.replace(g, **ch) if ch else g


def check_endpoint(e: EndpointReading, tally: Tally | None = None) -> EndpointReading:
    """An endpoint reading with impossible numbers unknown (``kv_cache_pct: Infinity`` → None) and text
    cleaned. Used for readings decoded from files and for the live poller's output alike."""
    ch = _ranged(e, catalogue.ranges("endpoint"), tally)
    ch.update({k: 0 for k in _ranged(e, ENDPOINT_COUNTS, tally)})  # counts are never unknown: 0
    for name in ENDPOINT_BOUNDS:
        b = getattr(e, name)
        if b is not None and not (1 <= len(b) <= 2 and all(in_range(x, *SECONDS) for x in b)):
            ch[name] = None
            if tally is not None:
                tally.readings += 1
    probe = tuple(f for f in e.probe_fields if f in _ENDPOINT_FIELDS)[:16]
    if probe != e.probe_fields:
        ch["probe_fields"] = probe
    ch.update(url=clean(public_url(e.url), 300), kind=clean_opt(e.kind, 40), model=clean_opt(e.model, 200),
              error=clean_opt(e.error, 300), probe_error=clean_opt(e.probe_error, 120))
    return dataclasses.replace(e, **ch)


_ENDPOINT_FIELDS = frozenset(f.name for f in dataclasses.fields(EndpointReading))


def check_group(g: ServingGroup, gpu_limit: int = MAX_GPUS, tally: Tally | None = None) -> ServingGroup:
    """A serving group with what cannot be true dropped and counted: a port outside 1–65535, a TP/PP size
    outside 1–4096 (None: unknown), pids outside 1–pid_max and GPU indices the inventory does not have
    (left out, the rest kept); text cleaned and bounded. Not metrics, so checked here, not in the catalogue."""
    bad = 0
    port = g.port
    if port is not None and not (isinstance(port, int) and 1 <= port <= 65535):
        port, bad = None, bad + 1
    sizes = {}
    for name in ("tp", "pp"):
        v = getattr(g, name)
        if v is not None and not (isinstance(v, int) and 1 <= v <= MAX_PARALLEL):
            v, bad = None, bad + 1
        sizes[name] = v
    pids = tuple(p for p in g.pids[:MAX_GROUP_PIDS] if isinstance(p, int) and 1 <= p <= MAX_PID)
    gpus = tuple(sorted({i for i in g.gpus if isinstance(i, int) and 0 <= i < gpu_limit}))
    bad += (len(g.pids) - len(pids)) + (len(set(g.gpus)) - len(gpus))
    if tally is not None and bad > 0:
        tally.readings += bad
    return dataclasses.replace(
        g, server=clean(g.server, 80), kind=clean_opt(g.kind, 40), endpoint=clean_opt(g.endpoint and public_url(g.endpoint), 300),
        model=clean_opt(g.model, 200), port=port, pids=pids, gpus=gpus, tp=sizes["tp"], pp=sizes["pp"],
        container=clean_opt(g.container, 120), note=clean_opt(g.note, 300))


START_MARKER = "start:"  # the marker `record -o F -- CMD` writes: "start: " and the command it runs


def event_text(kind: str, text: str) -> str:
    """An event's text as it may be shown: cleaned and bounded; a ``start:`` marker's command redacted
    (:func:`~gpuscope.core.redact.redact_command`: a recording made before it was redacted at the source holds
    its ``--api-key``, ``HF_TOKEN=…``); a marker recorded redacted comes out as it went in."""
    text = clean(text, 500)
    if kind == "marker" and text.startswith(START_MARKER):
        command = text[len(START_MARKER):].lstrip(" ")
        text = clean(text[:len(text) - len(command)] + redact_command(command), 500)
    return text


def check_event(ev: Event) -> Event:
    t = check_finite_time(ev.t, "event")
    kind = clean(ev.kind, 40)
    data = bounded_data(ev.data, limit=MAX_DATA_ITEMS_BY_KIND.get(kind, MAX_DATA_ITEMS)) if ev.data else {}
    return Event(t=t, kind=kind, text=event_text(kind, ev.text), data=data if isinstance(data, dict) else {})


def check_frame(f: Frame, inventory: Inventory | None = None, tally: Tally | None = None) -> Frame:
    """The frame with impossible readings unknown and text cleaned. Raises :class:`ValidationError` for a
    non-finite ``t``, duplicate or out-of-range GPU indices, or more GPUs than ``inventory`` lists."""
    t = check_finite_time(f.t, "frame")
    limit = len(inventory.devices) if inventory is not None else MAX_GPUS
    if len(f.gpus) > limit:
        raise ValidationError(f"frame: {len(f.gpus)} GPUs but the inventory lists {limit}")
    _unique_indices((g.index for g in f.gpus), limit, "frame", "appears twice")
    if len(f.endpoints) > MAX_ENDPOINTS or len(f.events) > MAX_EVENTS or len(f.groups) > MAX_GROUPS:
        raise ValidationError("frame: too many endpoints, events or serving groups")
    return Frame(t=t, gpus=tuple(check_gpu(g, tally) for g in f.gpus),
                 endpoints=tuple(check_endpoint(e, tally) for e in f.endpoints),
                 events=tuple(check_event(e) for e in f.events),
                 groups=tuple(check_group(g, limit, tally) for g in f.groups))


def json_depth_ok(text: str | bytes | bytearray, max_depth: int = MAX_DEPTH) -> bool:
    """A fast pre-check: True when brackets nest no deeper than ``max_depth`` (strings are skipped)."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", "replace")
    if text.count("[") + text.count("{") <= max_depth:
        return True
    depth = 0
    in_str = esc = False
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            if depth > max_depth:
                return False
        elif ch in "]}":
            depth -= 1
    return True


def loads(text: str | bytes | bytearray, what: str = "document", *, max_bytes: int = MAX_JSON_BYTES,
          max_depth: int = MAX_DEPTH) -> Any:
    """``json.loads`` for data from outside: size and nesting bounded, a clean :class:`ValidationError`
    (one line) instead of ``ValueError``/``RecursionError``. NaN/Infinity literals decode to floats that
    the record checks above then refuse or drop."""
    if len(text) > max_bytes:
        raise ValidationError(f"{what}: larger than {max_bytes // (1024 * 1024)} MB")
    try:
        doc = json.loads(text)
    except RecursionError:
        raise ValidationError(f"{what}: nested too deeply") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise ValidationError(f"{what}: not valid JSON ({clean(str(e), 80)})") from None
    if isinstance(doc, (dict, list)) and not json_depth_ok(text, max_depth):
        raise ValidationError(f"{what}: nested deeper than {max_depth} levels")
    return doc


def json_safe(obj: Any, depth: int = 0) -> Any:
    """``obj`` with every non-finite float replaced by None (for output JSON with ``allow_nan=False``)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if depth > 64:
        return None
    if isinstance(obj, dict):
        return {k: json_safe(v, depth + 1) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v, depth + 1) for v in obj]
    return obj


def dumps_out(obj: Any, **kw: Any) -> str:
    """JSON for output: strict (``allow_nan=False``) after :func:`json_safe`, so never ``NaN``/``Infinity``."""
    kw.setdefault("ensure_ascii", False)
    return json.dumps(json_safe(obj), allow_nan=False, **kw)


def finite_float(lo: float | None = None, hi: float | None = None) -> Any:
    """An argparse ``type=`` for a finite number within ``[lo, hi]`` (``--at nan`` is a usage error)."""

    def parse(s: str) -> float:
        try:
            v = float(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {s!r}") from None
        if not math.isfinite(v):
            raise argparse.ArgumentTypeError(f"not a finite number: {s!r}")
        if lo is not None and v < lo:
            raise argparse.ArgumentTypeError(f"must be at least {lo:g}")
        if hi is not None and v > hi:
            raise argparse.ArgumentTypeError(f"must be at most {hi:g}")
        return v

    parse.__name__ = "number"
    return parse
