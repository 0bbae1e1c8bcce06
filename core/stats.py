"""Statistics of a recording: the numbers behind ``summary``, ``compare`` and ``export``."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from typing import Any, Protocol

import numpy as np

from gpuscope.core import catalogue
from gpuscope.core.model import Frame, Inventory
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
    gpu_metrics = catalogue.metrics("gpu", summary=True)
    ep_metrics = catalogue.metrics("endpoint", summary=True)
    cols: dict[str, list[list[float]]] = {m.name: [[] for _ in range(n)] for m in gpu_metrics}
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
            for m in gpu_metrics:
                v = m.value(r)
                if v is not None:
                    cols[m.name][r.index].append(float(v))
            cap = pcie_capacity_bytes_per_s(r.pcie_gen, r.pcie_width)
            if r.pcie_gen and reading_busy(r, cap):
                key = link_label(r.pcie_gen, r.pcie_width)
                links_busy[r.index][key] = links_busy[r.index].get(key, 0) + 1
        for e in f.endpoints:
            d = ep.setdefault((e.url, e.model), {m.name: [] for m in ep_metrics})
            d.setdefault("_kind", []).append(e.kind or "")  # type: ignore[arg-type]
            for m in ep_metrics:
                v = m.value(e)
                if v is not None:
                    d[m.name].append(float(v))
    t0 = float(rec.times.min()) if rec.n_frames else 0.0  # frames keep file order; a clock step back is allowed
    t1 = float(rec.times.max()) if rec.n_frames else 0.0
    tally = getattr(rec, "tally", None)
    dropped = tally.describe() if tally is not None else ""
    gpus = []
    for d in inv.devices:
        i = d.index
        gpus.append({
            "index": i, "name": d.name, "lost_at": lost_at[i],
            "stats": {m.name: describe(cols[m.name][i]) for m in gpu_metrics},
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
                          "stats": {m.name: describe(d.get(m.name, [])) for m in ep_metrics}})
    return {
        "schema": SUMMARY_SCHEMA, "file": str(rec.path), "host": inv.host, "simulated": rec.simulated,
        "scenario": inv.scenario, "start": t0, "end": t1, "duration_s": t1 - t0, "frames": frames,
        "complete": rec.complete, "problems": list(rec.problems) + ([dropped] if dropped else []), "gpus": gpus, "endpoints": endpoints,
        "findings": finding_durations(events, t1),
        "markers": [{"t": e.t, "text": e.text} for e in events if e.kind == "marker"],
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
