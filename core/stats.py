"""Statistics of a recording: the numbers behind ``summary``, ``compare`` and ``export``."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
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
    t0 = float(rec.times.min()) if rec.n_frames else 0.0  # frames keep file order; a clock step back is allowed
    t1 = float(rec.times.max()) if rec.n_frames else 0.0
    tally = getattr(rec, "tally", None)
    dropped = tally.describe() if tally is not None else ""
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
        "complete": rec.complete, "problems": list(rec.problems) + ([dropped] if dropped else []), "gpus": gpus, "endpoints": endpoints,
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
