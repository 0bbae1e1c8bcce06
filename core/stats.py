"""Statistics of a recording: the numbers behind ``summary``, ``compare`` and ``export``."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Protocol

import numpy as np

from gpuscope.core.findings import is_busy
from gpuscope.core.model import Frame, Inventory
from gpuscope.core.topology import pcie_capacity_bytes_per_s

SUMMARY_SCHEMA = "gpuscope.summary/1"
STAT_METRICS = {
    "util_gpu_pct": "utilization %",
    "power_w": "power W",
    "sm_clock_mhz": "SM clock MHz",
    "pcie_tx_bytes_per_s": "PCIe TX B/s",
    "pcie_rx_bytes_per_s": "PCIe RX B/s",
    "nvlink_tx_bytes_per_s": "NVLink TX B/s",
    "nvlink_rx_bytes_per_s": "NVLink RX B/s",
    "sm_active_pct": "SM active %",
    "tensor_active_pct": "tensor active %",
}
ENDPOINT_METRICS = ("gen_tokens_per_s", "prompt_tokens_per_s", "requests_running", "kv_cache_pct", "ttft_p50_s",
                    "itl_p50_s")


def describe(values: Iterable[float]) -> dict[str, float] | None:
    """mean, p50, p95 and max of the finite values; None when there are none."""
    a = np.asarray([v for v in values if v is not None and math.isfinite(v)], dtype=np.float64)
    if a.size == 0:
        return None
    return {"mean": float(a.mean()), "p50": float(np.percentile(a, 50)), "p95": float(np.percentile(a, 95)),
            "max": float(a.max()), "n": int(a.size)}


def finding_durations(events: Iterable[Any], t_end: float) -> list[dict[str, Any]]:
    """Pair finding_raised / finding_cleared events into spans (still open at the end: until ``t_end``)."""
    open_: dict[str, dict[str, Any]] = {}
    out: list[dict[str, Any]] = []
    for e in events:
        fid = e.data.get("id") if isinstance(e.data, dict) else None
        if not fid:
            continue
        if e.kind == "finding_raised" and fid not in open_:
            open_[fid] = {"id": fid, "rule": e.data.get("rule"), "severity": e.data.get("severity"),
                          "subject": e.data.get("subject"), "message": e.text, "raised_at": e.t}
        elif e.kind == "finding_cleared" and fid in open_:
            f = open_.pop(fid)
            f["cleared_at"] = e.t
            f["duration_s"] = e.t - f["raised_at"]
            out.append(f)
    for f in open_.values():
        f["cleared_at"] = None
        f["duration_s"] = t_end - f["raised_at"]
        out.append(f)
    return sorted(out, key=lambda f: f["raised_at"])


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


def summarize(rec: FrameFile) -> dict[str, Any]:
    """The summary document (schema ``gpuscope.summary/1``)."""
    inv = rec.inventory
    n = len(inv.devices)
    cols: dict[str, list[list[float]]] = {m: [[] for _ in range(n)] for m in STAT_METRICS}
    links_busy: list[dict[str, int]] = [{} for _ in range(n)]
    lost_at: list[float | None] = [None] * n
    ep: dict[str, dict[str, list[float]]] = {}
    events = []
    frames = 0
    for f in rec.frames():
        frames += 1
        events.extend(f.events)
        for r in f.gpus:
            if r.index >= n:
                continue
            if r.lost:
                if lost_at[r.index] is None:
                    lost_at[r.index] = f.t
                continue
            for m in STAT_METRICS:
                v = getattr(r, m)
                if v is not None:
                    cols[m][r.index].append(float(v))
            cap = pcie_capacity_bytes_per_s(r.pcie_gen, r.pcie_width)
            peak = max(r.pcie_tx_bytes_per_s or 0.0, r.pcie_rx_bytes_per_s or 0.0)
            if r.pcie_gen and is_busy(r.util_gpu_pct, peak, cap):
                key = f"Gen{r.pcie_gen} x{r.pcie_width}"
                links_busy[r.index][key] = links_busy[r.index].get(key, 0) + 1
        for e in f.endpoints:
            d = ep.setdefault((e.url, e.model), {m: [] for m in ENDPOINT_METRICS})
            d.setdefault("_kind", []).append(e.kind or "")  # type: ignore[arg-type]
            for m in ENDPOINT_METRICS:
                v = getattr(e, m)
                if v is not None:
                    d[m].append(float(v))
    t0 = float(rec.times[0]) if rec.n_frames else 0.0
    t1 = float(rec.times[-1]) if rec.n_frames else 0.0
    gpus = []
    for d in inv.devices:
        i = d.index
        gpus.append({
            "index": i, "name": d.name, "lost_at": lost_at[i],
            "stats": {m: describe(cols[m][i]) for m in STAT_METRICS},
            "pcie_links_while_busy": links_busy[i],
            "pcie_gen_max": d.pcie_gen_gpu_max or d.pcie_gen_sys_max,
        })
    for (url, model) in list(ep):  # readings from before the model was known join the only model
        named = [k for k in ep if k[0] == url and k[1] is not None]
        if model is None and len(named) == 1:
            for m, vals in ep.pop((url, None)).items():
                ep[named[0]].setdefault(m, []).extend(vals)  # type: ignore[arg-type]
    endpoints = []
    for (url, model), d in ep.items():
        kinds = [k for k in d.pop("_kind", []) if k]  # type: ignore[arg-type]
        endpoints.append({"url": url, "model": model, "kind": kinds[-1] if kinds else None,
                          "stats": {m: describe(d[m]) for m in ENDPOINT_METRICS}})
    return {
        "schema": SUMMARY_SCHEMA, "file": str(rec.path), "host": inv.host, "simulated": rec.simulated,
        "scenario": inv.scenario, "start": t0, "end": t1, "duration_s": t1 - t0, "frames": frames,
        "complete": rec.complete, "problems": list(rec.problems), "gpus": gpus, "endpoints": endpoints,
        "findings": finding_durations(events, t1),
        "markers": [{"t": e.t, "text": e.text} for e in events if e.kind == "marker"],
    }


EXPORT_COLUMNS = ["t", "gpu", "lost", "util_gpu_pct", "util_mem_pct", "mem_used_bytes", "mem_total_bytes",
                  "sm_clock_mhz", "mem_clock_mhz", "graphics_clock_mhz", "power_w", "power_limit_w", "energy_j",
                  "temp_gpu_c", "temp_mem_c", "fan_pct", "pstate", "clock_event_reasons", "pcie_gen", "pcie_width",
                  "pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s", "pcie_replay_count", "pcie_recovery_count",
                  "pcie_error_count", "nvlink_tx_bytes_per_s", "nvlink_rx_bytes_per_s", "sm_active_pct",
                  "sm_occupancy_pct", "tensor_active_pct", "dram_bw_util_pct", "gen_tokens_per_s"]


def export_rows(frames: Iterable[Frame]) -> Iterable[list[Any]]:
    """One row per GPU per frame, in :data:`EXPORT_COLUMNS` order (missing readings are None)."""
    for f in frames:
        tok = [e.gen_tokens_per_s for e in f.endpoints if e.gen_tokens_per_s is not None]
        tok_s = sum(tok) if tok else None
        for r in f.gpus:
            row: list[Any] = [f.t, r.index, r.lost]
            row += [getattr(r, c) for c in EXPORT_COLUMNS[3:-1]]
            row.append(tok_s)
            yield row


# ------------------------------------------------------------------ per-phase (marker span) reports
PHASES_SCHEMA = "gpuscope.phases/1"
SPAN_GPU_METRICS = ("util_gpu_pct", "power_w", "sm_clock_mhz", "mem_clock_mhz", "pcie_rx_bytes_per_s",
                    "pcie_tx_bytes_per_s", "nvlink_rx_bytes_per_s", "nvlink_tx_bytes_per_s")
SERVING_FIELDS = ("gen_tokens_per_s", "prompt_tokens_per_s", "prompt_computed_tokens_per_s",
                  "prompt_cached_tokens_per_s", "requests_running", "requests_waiting", "kv_cache_pct", "ttft_mean_s",
                  "itl_mean_s", "queue_mean_s", "prefill_mean_s", "prefix_cache_hit_pct", "preemptions_per_min",
                  "spec_accept_length", "spec_accept_rate", "rate_window_s")
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
    return span["start"] <= t < span["end"] or (t == span["end"] == t_end)


def _mean(vals: list[float]) -> float | None:
    return sum(vals) / len(vals) if vals else None


def span_stats(frames: Iterable[Frame], spans: list[dict[str, Any]], n_gpus: int, t_end: float,
               findings: Sequence[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    """One row per span: frames, per-GPU means of :data:`SPAN_GPU_METRICS`, per endpoint and model means
    of :data:`SERVING_FIELDS` (None where never known, never 0), and the findings active in the span."""
    acc = [{"frames": 0, "gpus": [{m: [] for m in SPAN_GPU_METRICS} for _ in range(n_gpus)], "eps": {}}
           for _ in spans]
    for f in frames:
        hits = [k for k, s in enumerate(spans) if in_span(f.t, s, t_end)]
        if not hits:
            continue
        for k in hits:
            a = acc[k]
            a["frames"] += 1
            for r in f.gpus:
                if 0 <= r.index < n_gpus and not r.lost:
                    for m in SPAN_GPU_METRICS:
                        v = getattr(r, m)
                        if v is not None and math.isfinite(v):
                            a["gpus"][r.index][m].append(float(v))
            for e in f.endpoints:
                d = a["eps"].setdefault((e.url, e.model), {"kind": e.kind, **{m: [] for m in SERVING_FIELDS}})
                d["kind"] = e.kind or d["kind"]
                if not e.up:
                    continue
                for m in SERVING_FIELDS:
                    v = getattr(e, m)
                    if v is not None and math.isfinite(v):
                        d[m].append(float(v))
    out = []
    for s, a in zip(spans, acc):
        eps = [{"url": url, "model": model, "kind": d["kind"], **{m: _mean(d[m]) for m in SERVING_FIELDS}}
               for (url, model), d in a["eps"].items()]
        # a row with no reading at all (before the first scrape) is dropped where the endpoint has another
        eps = [e for e in eps if any(e[m] is not None for m in SERVING_FIELDS)
               or sum(x["url"] == e["url"] for x in eps) == 1]
        active = [f for f in findings
                  if f["raised_at"] < s["end"] and (f["cleared_at"] is None or f["cleared_at"] > s["start"])]
        out.append({**s, "duration_s": s["end"] - s["start"], "frames": a["frames"],
                    "gpus": [{"index": i, **{m: _mean(g[m]) for m in SPAN_GPU_METRICS}} for i, g in enumerate(a["gpus"])],
                    "endpoints": eps,
                    "findings": [{"id": f["id"], "severity": f["severity"], "message": f["message"]} for f in active]})
    return out


def summarize_by_marker(rec: FrameFile) -> dict[str, Any]:
    """The per-phase document (schema ``gpuscope.phases/1``): one row per marker span and per
    ``record -- CMD`` run. Reads the frames twice (markers first, then the numbers)."""
    events = [e for f in rec.frames() for e in f.events]
    t0 = float(rec.times[0]) if rec.n_frames else 0.0
    t1 = float(rec.times[-1]) if rec.n_frames else 0.0
    spans = marker_spans([(e.t, e.text) for e in events if e.kind == "marker"], t0, t1)
    rows = span_stats(rec.frames(), spans, len(rec.inventory.devices), t1, finding_durations(events, t1))
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
    return {"gen_tokens_per_s": tot("gen_tokens_per_s"), "prompt_tokens_per_s": tot("prompt_tokens_per_s"),
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
