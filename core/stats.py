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

    An entry: ``id``, ``rule``, ``subject``, ``severity`` (the worst it reached), ``message`` (the last),
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
            by_id[fid]["message"] = e.text
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
    t0 = float(rec.times[0]) if rec.n_frames else 0.0
    t1 = float(rec.times[-1]) if rec.n_frames else 0.0
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
        "complete": rec.complete, "problems": list(rec.problems), "gpus": gpus, "endpoints": endpoints,
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
