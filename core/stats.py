"""Statistics of a recording: the numbers behind ``summary``, ``compare`` and ``export``."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Protocol, cast

import numpy as np

from gpuscope.core import catalogue
from gpuscope.core.group_stats import GroupStats
from gpuscope.core.health import gpu_health
from gpuscope.core.model import EndpointReading, Event, Frame, GpuReading, Inventory, XidCount
from gpuscope.core.rates import RATE_FIELDS, RateReading, rate_over, reading_time, since_before
from gpuscope.core.topology import pcie_capacity_bytes_per_s
from gpuscope.core.vocab import link_label, reading_busy

SUMMARY_SCHEMA = "gpuscope.summary/1"



def describe(values: Iterable[float]) -> dict[str, float] | None:
    """mean, p50, p95 and max of the finite values; None when there are none."""
    a = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=np.float64)
    if a.size == 0:
        return None
    return {"mean": float(a.mean()), "p50": float(np.percentile(a, 50)), "p95": float(np.percentile(a, 95)),
            "max": float(a.max()), "n": int(a.size)}


_SEV_ORDER = ("critical", "warning", "info")


def _worse(a: Any, b: Any) -> Any:
    if a not in _SEV_ORDER:
        return b
    if b not in _SEV_ORDER:
        return a
    return a if _SEV_ORDER.index(a) <= _SEV_ORDER.index(b) else b


def _t(v: Any, default: float) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else default


def finding_durations(events: Iterable[Any], t_end: float) -> list[dict[str, Any]]:
    """Each finding's history from its raised / changed / cleared events, one entry per finding id.

    An entry: ``id``, ``rule``, ``subject``, ``severity`` (the worst it reached), ``message`` (as raised, or as last changed: never the
    clear's, which describes the condition's fading last moment),
    ``started_at`` (its first condition start), ``raised_at`` (first raise), ``cleared_at`` (last clear,
    None while open at the end), ``duration_s`` (total over its episodes, seconds), ``episodes``: each
    ``started_at`` (the condition's start, hold_s before the raise), ``raised_at``, ``ended_at`` (the
    condition's end, hold_s before the clear; ``t_end`` when still open), ``cleared_at``, ``duration_s``
    (= the cleared event's ``held_s``), ``severity`` (worst), ``changes`` (``t``, ``severity``,
    ``variant``, ``old_severity``, ``old_variant``). Recordings from before ``started_at`` was carried
    fall back to the raise time (and to the clear time less ``held_s``). Event times are offsets from
    each event's ``t`` (``started_s``, ``ended_s``: see :class:`~gpuscope.core.findings.FindingsEngine`).
    """
    open_: dict[str, dict[str, Any]] = {}
    by_id: dict[str, dict[str, Any]] = {}

    def entry(fid: str, e: Any) -> dict[str, Any]:
        if fid not in by_id:
            by_id[fid] = {"id": fid, "rule": e.data.get("rule"), "subject": e.data.get("subject"), "severity": None,
                          "message": e.text, "started_at": None, "raised_at": None, "cleared_at": None,
                          "duration_s": 0.0, "episodes": []}
        return by_id[fid]

    for e in events:
        fid = e.data.get("id") if isinstance(e.data, dict) else None
        if not fid or e.kind not in ("finding_raised", "finding_changed", "finding_cleared"):
            continue
        sev = e.data.get("severity")
        if e.kind == "finding_raised" and fid not in open_:
            ent = entry(fid, e)
            known = isinstance(e.data.get("started_s"), (int, float))
            ep = {"started_at": e.t - _t(e.data.get("started_s"), 0.0), "raised_at": e.t, "ended_at": None,
                  "cleared_at": None, "duration_s": None, "severity": sev, "changes": [], "_known": known}
            open_[fid] = ep
            ent["episodes"].append(ep)
            ent["message"] = e.text
        elif e.kind == "finding_changed" and fid in open_:
            ep = open_[fid]
            ep["severity"] = _worse(ep["severity"], sev)
            ep["changes"].append({"t": e.t, "severity": sev, "variant": e.data.get("variant"),
                                  "old_severity": e.data.get("old_severity"), "old_variant": e.data.get("old_variant")})
            by_id[fid]["message"] = e.text
        elif e.kind == "finding_cleared" and fid in open_:
            ep = open_.pop(fid)
            if not ep["_known"] and isinstance(e.data.get("held_s"), (int, float)):
                ep["started_at"] = e.t - float(e.data["held_s"])  # older engines: held_s ran to the clear
            ep["ended_at"] = e.t - _t(e.data.get("ended_s"), 0.0)
            ep["cleared_at"] = e.t
            ep["severity"] = _worse(_worse(ep["severity"], sev), e.data.get("worst"))
            # the message stays the raise's (or the last change's): the clear's is the condition's last
            # moment, when load was already leaving (a power cap quoted at "458 of 700 W, −0 MHz")
    out = []
    for ent in by_id.values():
        for ep in ent["episodes"]:
            ep.pop("_known", None)
            end = ep["ended_at"] if ep["ended_at"] is not None else t_end
            ep["duration_s"] = round(max(0.0, end - ep["started_at"]), 3)
            ent["severity"] = _worse(ent["severity"], ep["severity"])
        eps = ent["episodes"]
        ent["started_at"] = eps[0]["started_at"]
        ent["raised_at"] = eps[0]["raised_at"]
        ent["cleared_at"] = eps[-1]["cleared_at"]
        ent["duration_s"] = round(sum(ep["duration_s"] for ep in eps), 3)
        out.append(ent)
    return sorted(out, key=lambda f: (f["started_at"], f["id"]))


class FrameFile(Protocol):
    """What a summary reads: an inventory, the frames in file order, and what the reader noticed."""

    inventory: Inventory
    path: Any
    times: Any  # numpy array of frame times, file order
    n_frames: int
    simulated: bool
    complete: bool
    problems: list[str]

    def frames(self, start: int = 0, stop: int | None = None) -> Iterator[Frame]: ...


class _FileStats:
    """What :func:`summarize` gathers frame by frame: each GPU's readings, busy links, loss and health, each
    endpoint and model's readings, the events and the serving groups."""

    def __init__(self, inv: Inventory):
        n = self.n = len(inv.devices)
        self.gpu_metrics = catalogue.metrics("gpu", summary=True)
        self.ep_fields = tuple(m.name for m in catalogue.metrics("endpoint", summary=True))
        self.cols: dict[str, list[list[float]]] = {m.name: [[] for _ in range(n)] for m in self.gpu_metrics}
        self.links_busy: list[dict[str, int]] = [{} for _ in range(n)]
        self.lost_at: list[float | None] = [None] * n
        self.last_seen: list[GpuReading | None] = [None] * n  # each GPU's last reading (health: ECC, row remapping)
        self.last_xids: list[tuple[XidCount, ...] | None] = [None] * n
        self.eps: dict[tuple[str, str | None], _EndpointAcc] = {}  # per (url, model)
        self.events: list[Event] = []
        self.frames = 0
        self.groups = GroupStats(inv)  # serving groups (core/group_stats.py)
        self.before: float | None = None  # the time of the frame before

    def add(self, f: Frame) -> None:
        self.frames += 1
        self.events.extend(f.events)
        self.groups.add(f, self.before)
        dt = since_before(f.t, self.before)
        self.before = f.t
        for r in f.gpus:
            if r.index < self.n:
                self._add_gpu(f.t, r)
        for e in f.endpoints:
            ep = self.eps.setdefault((e.url, e.model), _EndpointAcc(e.kind, self.ep_fields))
            ep.add(e, dt)
            ep.count_probe(e)

    def _add_gpu(self, t: float, r: GpuReading) -> None:
        i = r.index
        if r.xids:
            self.last_xids[i] = r.xids
        if r.lost:
            if self.lost_at[i] is None:
                self.lost_at[i] = t
            return
        self.last_seen[i] = r
        for m in self.gpu_metrics:
            v = m.value(r)
            if v is not None:
                self.cols[m.name][i].append(float(v))
        cap = pcie_capacity_bytes_per_s(r.pcie_gen, r.pcie_width)
        if r.pcie_gen and reading_busy(r, cap):
            key = link_label(r.pcie_gen, r.pcie_width)
            self.links_busy[i][key] = self.links_busy[i].get(key, 0) + 1

    def gpu_rows(self, inv: Inventory) -> list[dict[str, Any]]:
        return [{"index": dev.index, "name": dev.name, "lost_at": self.lost_at[dev.index],
                 "stats": {m.name: describe(self.cols[m.name][dev.index]) for m in self.gpu_metrics},
                 "pcie_links_while_busy": self.links_busy[dev.index],
                 "pcie_gen_max": dev.pcie_gen_gpu_max or dev.pcie_gen_sys_max,
                 "memory_info_version": dev.memory_info_version,
                 "health": gpu_health(self.last_seen[dev.index], self.last_xids[dev.index])}
                for dev in inv.devices]

    def endpoint_rows(self) -> list[dict[str, Any]]:
        return [{"url": url, "model": model, "kind": d.kind(), "stats": d.stats(), **d.probe_row()}
                for (url, model), d in merge_unnamed(self.eps).items()]


MAX_PROBE_ERRORS = 8  # distinct reasons a summary lists for an endpoint's failed probes (fixed phrases: a few)


class _EndpointAcc:
    """One endpoint and model's readings over a stretch (the file, a span): each field's known values, and for
    the per-second rates (:data:`~gpuscope.core.rates.RATE_FIELDS`) the seconds each reading stands for too."""

    def __init__(self, kind: str | None, fields: Sequence[str]):
        self.kinds: list[str] = [kind or ""]
        self.fields = fields
        self.vals: dict[str, list[float]] = {m: [] for m in fields}
        self.rates: dict[str, list[RateReading]] = {m: [] for m in fields if m in RATE_FIELDS}
        self.readings = 0  # readings counted by count_probe (the file's: one per frame)
        self.probe_errors: dict[str, int] = {}  # why the load probe failed (a fixed phrase) → readings that say so

    def count_probe(self, e: EndpointReading) -> None:
        """Count ``e`` as one reading, and its ``probe_error`` (the load probe failed) when it has one."""
        self.readings += 1
        if e.probe_error:
            self.probe_errors[e.probe_error] = self.probe_errors.get(e.probe_error, 0) + 1

    def probe_row(self) -> dict[str, Any]:
        """``readings`` (counted by :meth:`count_probe`), ``probe_failed`` (how many of them say the load probe
        failed) and ``probe_errors`` (why: the most common phrases, at most :data:`MAX_PROBE_ERRORS`, → count)."""
        worst = sorted(self.probe_errors.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_PROBE_ERRORS]
        return {"readings": self.readings, "probe_failed": sum(self.probe_errors.values()), "probe_errors": dict(worst)}

    def add(self, e: EndpointReading, dt: float | None, fields: Sequence[str] | None = None) -> None:
        """Count ``e``'s known values (of ``fields``; None: all), ``dt`` seconds after the frame before (None:
        not known)."""
        self.kinds.append(e.kind or "")
        for m in self.fields if fields is None else fields:
            v = getattr(e, m)
            if v is None or not math.isfinite(v):
                continue
            self.vals[m].append(float(v))
            if m in self.rates:
                self.rates[m].append((float(v), dt, e.rate_window_s))

    def merged(self, other: _EndpointAcc) -> _EndpointAcc:
        """These readings and ``other``'s together (the same server's readings from before its model was known)."""
        out = _EndpointAcc(None, self.fields)
        out.kinds = self.kinds + other.kinds
        for m in self.fields:
            out.vals[m] = self.vals[m] + other.vals[m]
        for m in self.rates:
            out.rates[m] = self.rates[m] + other.rates[m]
        out.readings = self.readings + other.readings
        out.probe_errors = dict(self.probe_errors)
        for why, n in other.probe_errors.items():
            out.probe_errors[why] = out.probe_errors.get(why, 0) + n
        return out

    def kind(self) -> str | None:
        kinds = [k for k in self.kinds if k]
        return kinds[-1] if kinds else None

    def mean(self, m: str) -> float | None:
        """A rate's is the stretch's rate (:func:`~gpuscope.core.rates.rate_over`); any other field's, the plain
        mean of its readings; None when none is known."""
        if m in self.rates:
            return rate_over(self.rates[m])
        v = self.vals[m]
        return sum(v) / len(v) if v else None

    def stats(self) -> dict[str, dict[str, float] | None]:
        """:func:`describe` of each field, its ``mean`` by :meth:`mean`."""
        out = {m: describe(self.vals[m]) for m in self.fields}
        for m, d in out.items():
            rate = self.mean(m) if m in self.rates and d is not None else None
            if d is not None and rate is not None:  # a known value is a known rate: never None here
                d["mean"] = rate
        return out


def merge_unnamed(eps: dict[tuple[str, str | None], _EndpointAcc]) -> dict[tuple[str, str | None], _EndpointAcc]:
    """Readings of a server from before its model was known (model None) joined to its only named model."""
    out = dict(eps)
    for (url, model) in list(out):
        named = [k for k in out if k[0] == url and k[1] is not None]
        if model is None and len(named) == 1:
            out[named[0]] = out[named[0]].merged(out.pop((url, None)))
    return out


def summarize(rec: FrameFile) -> dict[str, Any]:
    """The summary document (schema ``gpuscope.summary/1``). A per-second rate's ``mean`` (generated tok/s…) is
    the recording's rate by :func:`gpuscope.core.rates.rate_over`, as a span's and a group's are."""
    inv = rec.inventory
    acc = _FileStats(inv)
    for f in rec.frames():
        acc.add(f)
    t0 = float(rec.times.min()) if rec.n_frames else 0.0  # frames keep file order; a clock step back is allowed
    t1 = float(rec.times.max()) if rec.n_frames else 0.0
    tally = getattr(rec, "tally", None)
    dropped = tally.describe() if tally is not None else ""
    events = acc.events
    return {
        "schema": SUMMARY_SCHEMA, "file": str(rec.path), "host": inv.host, "simulated": rec.simulated,
        "scenario": inv.scenario, "start": t0, "end": t1, "duration_s": t1 - t0, "frames": acc.frames,
        "complete": rec.complete, "problems": list(rec.problems) + ([dropped] if dropped else []),
        "notes": list(getattr(rec, "notes", [])), "gpus": acc.gpu_rows(inv), "endpoints": acc.endpoint_rows(),
        "groups": acc.groups.rows(),
        "findings": finding_durations(events, t1),
        "markers": [{"t": e.t, "text": e.text} for e in events if e.kind == "marker"],
        "probes": [e.data for e in events if e.kind == "probe"],  # `record --probe-links` (core/probe.py)
    }


def export_rows(frames: Iterable[Frame]) -> Iterable[list[Any]]:
    """One row per GPU per frame, in :func:`gpuscope.core.catalogue.export_columns` order (missing: None).

    Endpoint metrics are summed over the frame's endpoints (None when no endpoint reports one).
    """
    gpu_metrics = catalogue.metrics("gpu", export=True)
    ep_metrics = catalogue.metrics("endpoint", export=True)
    for f in frames:
        tail = []
        for m in ep_metrics:
            vals = [v for v in (m.value(e) for e in f.endpoints) if v is not None]
            tail.append(sum(vals) if vals else None)
        for r in f.gpus:
            yield [f.t, r.index, r.lost, *(m.value(r) for m in gpu_metrics), *tail]


# ------------------------------------------------------------------ per-phase (marker span) reports
PHASES_SCHEMA = "gpuscope.phases/1"
SPAN_GPU_METRICS = ("util_gpu_pct", "power_w", "sm_clock_mhz", "mem_clock_mhz", "pcie_rx_bytes_per_s",
                    "pcie_tx_bytes_per_s", "nvlink_rx_bytes_per_s", "nvlink_tx_bytes_per_s")
SERVING_FIELDS = ("gen_tokens_per_s", "prompt_tokens_per_s", "prompt_computed_tokens_per_s",
                  "prompt_cached_tokens_per_s", "requests_running", "requests_waiting", "kv_cache_pct", "ttft_mean_s",
                  "itl_mean_s", "queue_mean_s", "prefill_mean_s", "prefix_cache_hit_pct", "preemptions_per_min",
                  "spec_accept_length", "spec_accept_rate", "rate_window_s")
GAUGE_FIELDS = ("requests_running", "requests_waiting", "kv_cache_pct", "rate_window_s")  # as read at the frame
WINDOWED_FIELDS = tuple(m for m in SERVING_FIELDS if m not in GAUGE_FIELDS)  # over the server's rate window
RUN_START, RUN_END = "start: ", "end: "  # the markers `record -- CMD` writes around the command


def marker_spans(markers: Sequence[tuple[float, str]], t_start: float, t_end: float) -> list[dict[str, Any]]:
    """The phases of a recording from its markers, in time order.

    Each marker opens a span that lasts until the next marker (the last until ``t_end``); an
    ``end: …`` marker (written by ``record -- CMD`` when the command exits) only closes one. Frames
    before the first marker form a ``(before the first marker)`` span. A ``record -- CMD`` run
    (``start: CMD`` … ``end: …``) also gets a row of its own when markers inside split it.
    Returns ``[{"label", "kind": "phase" | "run" | "lead-in", "start", "end"}]``.
    """
    ms = sorted(((t, text) for t, text in markers if math.isfinite(t)), key=lambda m: m[0])
    out: list[dict[str, Any]] = []
    first = ms[0][0] if ms else t_end
    if not ms or first > t_start:
        out.append({"label": "(before the first marker)" if ms else "(whole recording)", "kind": "lead-in",
                    "start": t_start, "end": first})
    for k, (t, text) in enumerate(ms):
        if text.startswith(RUN_END):
            continue
        end = ms[k + 1][0] if k + 1 < len(ms) else t_end
        out.append({"label": text, "kind": "phase", "start": t, "end": end})
    for k, (t, text) in enumerate(ms):
        if not text.startswith(RUN_START):
            continue
        end = next((t2 for t2, x in ms[k + 1:] if x.startswith(RUN_END)), t_end)
        if any(s["start"] == t and s["end"] == end for s in out):
            continue  # no markers inside: the phase row is the run row
        out.append({"label": "run: " + text[len(RUN_START):], "kind": "run", "start": t, "end": end})
    return [s for s in out if s["kind"] != "lead-in" or s["end"] > s["start"] or not ms]


def in_span(t: float, span: dict[str, Any], t_end: float) -> bool:
    """Whether a frame at ``t`` belongs to ``span`` (start inclusive; end exclusive except at the recording's end)."""
    # a span's start and end are floats (marker_spans), so the comparisons are bools
    return cast(bool, span["start"] <= t < span["end"] or (t == span["end"] == t_end))


def _mean(vals: list[float]) -> float | None:
    return sum(vals) / len(vals) if vals else None


class _SpanStats:
    """What :func:`span_stats` gathers for one span: its frames, each GPU's readings, each endpoint and model's
    (an :class:`_EndpointAcc`: the same rules as the whole file's) and its serving groups."""

    def __init__(self, span: dict[str, Any], n_gpus: int, inv: Inventory | None, t_end: float):
        self.span = span
        self.t_end = t_end
        self.frames = 0
        self.gpus: list[dict[str, list[float]]] = [{m: [] for m in SPAN_GPU_METRICS} for _ in range(n_gpus)]
        self.eps: dict[tuple[str, str | None], _EndpointAcc] = {}
        self.groups = GroupStats(inv) if inv is not None else None

    def holds(self, t: float) -> bool:
        return in_span(t, self.span, self.t_end)

    def add_frame(self, f: Frame, before: float | None) -> None:
        """Count ``f`` (in the span): its GPUs, its groups' traffic, and its endpoints' gauges."""
        self.frames += 1
        if self.groups is not None:
            self.groups.add(f, before, tokens=False)
        for r in f.gpus:
            if 0 <= r.index < len(self.gpus) and not r.lost:
                g = self.gpus[r.index]
                for m in SPAN_GPU_METRICS:
                    v = getattr(r, m)
                    if v is not None and math.isfinite(v):
                        g[m].append(float(v))
        for e in f.endpoints:
            self._endpoint(e).add(e, None, GAUGE_FIELDS)

    def add_windowed(self, f: Frame, before: float | None, t_first: float) -> None:
        """Count the readings of ``f`` over a rate window whose middle lies in the span (core/rates.py)."""
        dt = since_before(f.t, before)
        for e in f.endpoints:
            if self._holds_reading(f.t, e.rate_window_s, t_first):
                self._endpoint(e).add(e, dt, WINDOWED_FIELDS)
        if self.groups is not None:
            self.groups.add_tokens(f, before, lambda w: self._holds_reading(f.t, w, t_first))

    def _holds_reading(self, t: float, window_s: float | None, t_first: float) -> bool:
        return self.holds(min(max(reading_time(t, window_s), t_first), self.t_end))

    def _endpoint(self, e: EndpointReading) -> _EndpointAcc:
        acc = self.eps.setdefault((e.url, e.model), _EndpointAcc(None, SERVING_FIELDS))
        acc.kinds.append(e.kind or "")
        return acc

    def endpoint_rows(self) -> list[dict[str, Any]]:
        eps = [{"url": url, "model": model, "kind": d.kind(), **{m: d.mean(m) for m in SERVING_FIELDS}}
               for (url, model), d in self.eps.items()]
        # a row with no reading at all (before the first scrape) is dropped where the endpoint has another
        return [e for e in eps if any(e[m] is not None for m in SERVING_FIELDS)
                or sum(x["url"] == e["url"] for x in eps) == 1]

    def row(self, findings: Sequence[dict[str, Any]]) -> dict[str, Any]:
        s = self.span
        active = [f for f in findings
                  if f["raised_at"] < s["end"] and (f["cleared_at"] is None or f["cleared_at"] > s["start"])]
        return {**s, "duration_s": s["end"] - s["start"], "frames": self.frames,
                "gpus": [{"index": i, **{m: _mean(g[m]) for m in SPAN_GPU_METRICS}} for i, g in enumerate(self.gpus)],
                "endpoints": self.endpoint_rows(),
                "findings": [{"id": f["id"], "severity": f["severity"], "message": f["message"]} for f in active],
                "groups": self.groups.rows() if self.groups is not None else []}


def span_stats(frames: Iterable[Frame], spans: list[dict[str, Any]], n_gpus: int, t_end: float,
               findings: Sequence[dict[str, Any]] = (), inv: Inventory | None = None) -> list[dict[str, Any]]:
    """One row per span: frames, per-GPU means of :data:`SPAN_GPU_METRICS`, per endpoint and model means
    of :data:`SERVING_FIELDS` (None where never known, never 0), the serving groups (with ``inv``) and the
    findings active in the span.

    A per-second rate (generated tok/s…) is the span's rate by :func:`gpuscope.core.rates.rate_over`, the rule
    of the whole-file summary and of the group lines: a span equal to the whole file gives the file's figure.
    A reading over a rate window (rates, latency means) counts in the span holding its window's middle
    (:func:`~gpuscope.core.rates.reading_time`), not its frame's time, so a phase is not averaged with the one
    before; gauges (requests waiting, KV %) count in their frame's span."""
    acc = [_SpanStats(s, n_gpus, inv, t_end) for s in spans]
    before: float | None = None
    t_first: float | None = None
    for f in frames:
        t_first = f.t if t_first is None else t_first
        earliest = min((reading_time(f.t, e.rate_window_s) for e in f.endpoints), default=f.t)
        for a in acc:
            if a.holds(f.t):
                a.add_frame(f, before)
            if a.span["start"] <= f.t and a.span["end"] >= earliest:  # its readings' windows can lie in it
                a.add_windowed(f, before, t_first)
        before = f.t
    return [a.row(findings) for a in acc]


def summarize_by_marker(rec: FrameFile) -> dict[str, Any]:
    """The per-phase document (schema ``gpuscope.phases/1``): one row per marker span and per
    ``record -- CMD`` run. Reads the frames twice (markers first, then the numbers)."""
    events = [e for f in rec.frames() for e in f.events]
    t0 = float(rec.times[0]) if rec.n_frames else 0.0
    t1 = float(rec.times[-1]) if rec.n_frames else 0.0
    spans = marker_spans([(e.t, e.text) for e in events if e.kind == "marker"], t0, t1)
    rows = span_stats(rec.frames(), spans, len(rec.inventory.devices), t1, finding_durations(events, t1),
                      rec.inventory)
    return {"schema": PHASES_SCHEMA, "file": str(rec.path), "host": rec.inventory.host, "simulated": rec.simulated,
            "start": t0, "end": t1, "spans": rows}


def phase_key(label: str, seen: dict[str, int]) -> str:
    """A span's label, numbered from its second occurrence (``warmup #2``), so phases line up by label."""
    seen[label] = seen.get(label, 0) + 1
    return label if seen[label] == 1 else f"{label} #{seen[label]}"


def phase_totals(span: dict[str, Any]) -> dict[str, float | None]:
    """A span's headline numbers for comparing phases: tok/s summed over endpoints and models, latency
    means averaged over them, GPU utilization averaged and power summed over GPUs."""
    eps = span["endpoints"]

    def tot(m: str) -> float | None:
        v = [e[m] for e in eps if e[m] is not None]
        return sum(v) if v else None

    def avg(rows: list[dict[str, Any]], m: str) -> float | None:
        v = [r[m] for r in rows if r[m] is not None]
        return sum(v) / len(v) if v else None

    power = [g["power_w"] for g in span["gpus"] if g["power_w"] is not None]
    # every group's bytes over every group's tokens (the groups where both are known): never a mean of ratios
    known = [(g["bytes_per_token"] * g["gen_tokens_per_s"], g["gen_tokens_per_s"]) for g in span.get("groups", [])
             if g["bytes_per_token"] is not None and g["gen_tokens_per_s"]]
    tokens = sum(t for _, t in known)
    return {"bytes_per_token": sum(b for b, _ in known) / tokens if tokens > 0 else None,
            "gen_tokens_per_s": tot("gen_tokens_per_s"), "prompt_tokens_per_s": tot("prompt_tokens_per_s"),
            "requests_waiting": tot("requests_waiting"), "ttft_mean_s": avg(eps, "ttft_mean_s"),
            "itl_mean_s": avg(eps, "itl_mean_s"), "util_gpu_pct": avg(span["gpus"], "util_gpu_pct"),
            "power_w": sum(power) if power else None}


def compare_phases(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    """Phases of two per-phase documents lined up by marker label: [{"label", "a": totals|None, "b": …}]."""
    sa: dict[str, int] = {}
    sb: dict[str, int] = {}
    ka = {phase_key(s["label"], sa): s for s in a["spans"]}
    kb = {phase_key(s["label"], sb): s for s in b["spans"]}
    labels = list(ka) + [k for k in kb if k not in ka]
    return [{"label": k, "a": phase_totals(ka[k]) if k in ka else None, "b": phase_totals(kb[k]) if k in kb else None}
            for k in labels]


SERVING_EXPORT_COLUMNS = ["t", "url", "kind", "model", "up", *SERVING_FIELDS, "ttft_p50_s", "ttft_p95_s", "itl_p50_s",
                          "itl_p95_s", "resets", "probe"]


def export_serving_rows(frames: Iterable[Frame]) -> Iterable[list[Any]]:
    """One row per endpoint and model per frame (long format: never repeated per GPU), in
    :data:`SERVING_EXPORT_COLUMNS` order; unknown readings are None."""
    for f in frames:
        for e in f.endpoints:
            yield [f.t, e.url, e.kind, e.model, e.up] + [getattr(e, c) for c in SERVING_EXPORT_COLUMNS[5:]]
