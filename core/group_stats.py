"""Serving groups over a recording or a span of it: each group's tok/s, traffic, bytes per generated token and
path, for ``summary`` (and ``--by-marker``) and ``compare``. Pure functions over frames.

Bytes per token is the group's mean interconnect traffic (PCIe + NVLink, both directions, summed over its
GPUs) divided by its mean generated tok/s over the frames where both are known: a number to compare across
runs and setups (the same model and load moving fewer bytes per token is a better placement or link).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gpuscope.core.group_paths import endpoint_tokens, group_traffic, path_text
from gpuscope.core.groups import gpus_text, group_label, parallel_text
from gpuscope.core.model import Frame, Inventory, ServingGroup
from gpuscope.core.rates import RateReading, rate_over, since_before


def group_key(g: ServingGroup) -> str:
    """What identifies a group across frames and runs: its endpoint URL, else its program and GPUs."""
    return g.endpoint or f"{g.server} on {gpus_text(g.gpus)}"


@dataclass
class _Acc:
    group: ServingGroup
    frames: int = 0
    pcie: list[float] = field(default_factory=list)
    nvlink: list[float] = field(default_factory=list)
    tok: list[RateReading] = field(default_factory=list)  # (tok/s, s since the frame before, rate window s)
    moved_with_tok: list[float] = field(default_factory=list)  # traffic in the frames where tok/s is known too
    tok_with_moved: list[float] = field(default_factory=list)
    paths: Counter[str] = field(default_factory=Counter)


class GroupStats:
    """Feed frames with :meth:`add`; :meth:`rows` gives one dict per group seen (first seen first)."""

    def __init__(self, inv: Inventory):
        self.inv = inv
        self._acc: dict[str, _Acc] = {}
        self._last_t: float | None = None

    def add(self, frame: Frame, before: float | None = None, *, tokens: bool = True) -> None:
        """Count ``frame``: its groups, their traffic and path, and (``tokens``) their tok/s. ``before`` is the
        time of the frame before it in the file (for the first frame of a span, the one before the span; None:
        the last frame added here)."""
        dt = since_before(frame.t, before if before is not None else self._last_t)
        self._last_t = frame.t
        for g in frame.groups:
            a = self._entry(g)
            a.frames += 1
            if not g.gpus:
                continue
            t = group_traffic(g, frame)
            if t.pcie_bytes_per_s is not None:
                a.pcie.append(t.pcie_bytes_per_s)
            if t.nvlink_bytes_per_s is not None:
                a.nvlink.append(t.nvlink_bytes_per_s)
            if t.tokens_per_s is not None and tokens:
                a.tok.append((t.tokens_per_s, dt, _window(g, frame)))
            moved = None if t.pcie_bytes_per_s is None and t.nvlink_bytes_per_s is None else (
                (t.pcie_bytes_per_s or 0.0) + (t.nvlink_bytes_per_s or 0.0))
            if moved is not None and t.tokens_per_s is not None:
                a.moved_with_tok.append(moved)
                a.tok_with_moved.append(t.tokens_per_s)
            p = path_text(self.inv, frame, g.gpus)
            if p:
                a.paths[p] += 1

    def add_tokens(self, frame: Frame, before: float | None, keep: Callable[[float | None], bool]) -> None:
        """Count the tok/s of ``frame``'s groups whose rate window (s, None: not known) ``keep`` takes: a span
        takes the readings whose window middle lies in it (core/rates.py), not always its frames' readings."""
        dt = since_before(frame.t, before)
        for g in frame.groups:
            w = _window(g, frame)
            tok = endpoint_tokens(g, frame.endpoints) if g.gpus else None
            if tok is not None and keep(w):
                self._entry(g).tok.append((tok, dt, w))

    def _entry(self, g: ServingGroup) -> _Acc:
        a = self._acc.get(group_key(g))
        if a is None:
            a = self._acc[group_key(g)] = _Acc(g)
        a.group = g if g.gpus or not a.group.gpus else a.group  # keep the latest placed version
        return a

    def rows(self) -> list[dict[str, Any]]:
        out = []
        for key, a in self._acc.items():
            g = a.group
            tok_sum = sum(a.tok_with_moved)
            out.append({
                "key": key, "name": group_label(g), "server": g.server, "kind": g.kind, "endpoint": g.endpoint,
                "model": g.model, "port": g.port, "gpus": list(g.gpus), "tp": g.tp, "pp": g.pp,
                "parallel": parallel_text(g), "container": g.container, "local": g.local, "simulated": g.simulated,
                "path": a.paths.most_common(1)[0][0] if a.paths else None, "frames": a.frames,
                "gen_tokens_per_s": rate_over(a.tok), "pcie_bytes_per_s": _mean(a.pcie),
                "nvlink_bytes_per_s": _mean(a.nvlink),
                "bytes_per_token": sum(a.moved_with_tok) / tok_sum if tok_sum > 0 else None,
            })
        return out


def _mean(v: list[float]) -> float | None:
    return sum(v) / len(v) if v else None


def _window(g: ServingGroup, frame: Frame) -> float | None:
    """The rate window (s) of the group's endpoint readings in ``frame`` (the longest of its models')."""
    ws = [e.rate_window_s for e in frame.endpoints if e.url == g.endpoint and e.rate_window_s is not None]
    return max(ws) if ws else None


def group_rows(inv: Inventory, frames: Any) -> list[dict[str, Any]]:
    """:class:`GroupStats` rows of ``frames`` in one call."""
    s = GroupStats(inv)
    for f in frames:
        s.add(f)
    return s.rows()


def compare_groups(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Groups of two summaries side by side, matched by key (endpoint URL or program and GPUs), then the
    unmatched ones by order (a fix may move a server to other GPUs): [{"name", "a": row|None, "b": row|None}]."""
    kb = {r["key"]: r for r in b}
    out = []
    used: set[str] = set()
    rest_a = []
    for r in a:
        if r["key"] in kb:
            out.append({"name": r["name"], "a": r, "b": kb[r["key"]]})
            used.add(r["key"])
        else:
            rest_a.append(r)
    rest_b = [r for r in b if r["key"] not in used]
    for k in range(max(len(rest_a), len(rest_b))):
        ra = rest_a[k] if k < len(rest_a) else None
        rb = rest_b[k] if k < len(rest_b) else None
        out.append({"name": (ra or rb or {}).get("name", "?"), "a": ra, "b": rb})
    return out


def group_text(r: dict[str, Any]) -> str:
    """One group row as a report line: ``vLLM :8000 gemma-2-27b-it · TP=2 on GPU0+GPU1 · SYS, Gen1×16: 55.0
    tok/s, PCIe 15.2 GB/s, NVLink –, 276 MB/token``."""
    from gpuscope.core.group_paths import fmt_bytes
    from gpuscope.core.units import NONE, fmt_gb

    def rate(x: float | None) -> str:
        return NONE if x is None else f"{fmt_gb(x)} GB/s"

    where = f" · {r['parallel']} on {gpus_text(r['gpus'])}" if r["parallel"] else f" · on {gpus_text(r['gpus'])}"
    if not r["local"]:
        where = " · not local"
    path = f" · {r['path']}" if r["path"] else ""
    tok = NONE if r["gen_tokens_per_s"] is None else f"{r['gen_tokens_per_s']:,.1f}"
    sim = "SIMULATED " if r["simulated"] else ""
    return (f"{sim}{r['name']}{where}{path}: {tok} tok/s, PCIe {rate(r['pcie_bytes_per_s'])}, NVLink "
            f"{rate(r['nvlink_bytes_per_s'])}, {fmt_bytes(r['bytes_per_token'])}/token")
