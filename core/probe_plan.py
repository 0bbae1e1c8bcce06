"""The link probe's plan from what gpuscope already knows (the inventory, the last frame): which GPUs, the
expected bandwidth of each figure (for the time estimate) and who else uses the GPUs. Shared by
``gpuscope probe`` (cli/probe.py) and the palette's probe (tui/probe_controller.py)."""

from __future__ import annotations

import os
from collections.abc import Sequence

from gpuscope.core import probe as P
from gpuscope.core.errors import GpuscopeError
from gpuscope.core.model import Frame, Inventory
from gpuscope.core.text import clean
from gpuscope.core.topology import pair_bandwidth_bytes_per_s


def chosen_gpus(inv: Inventory, wanted: Sequence[int] | None) -> list[int]:
    have = [d.index for d in inv.devices]
    if not have:
        raise GpuscopeError("no GPU to probe")
    if wanted is None:
        return have
    missing = [i for i in wanted if i not in have]
    if missing:
        raise GpuscopeError(f"--gpus: no GPU{missing[0]} here (GPUs: {','.join(map(str, have))})")
    return sorted(wanted)


def make_plan(inv: Inventory, frame: Frame | None, gpus: list[int], max_memory: int, trials: int) -> P.Plan:
    """The run's plan with the bandwidth each figure is expected to give (for the time estimate)."""
    host: dict[int, float | None] = {}
    for d in inv.devices:
        r = frame.gpus[d.index] if frame is not None and d.index < len(frame.gpus) else None
        link = P.host_link(d, r.pcie_gen if r else None, r.pcie_width if r else None)
        host[d.index] = P.pcie_typical(link.gen_now or link.gen_max, link.width_now or link.width_max)
    pairs: dict[tuple[int, int], float | None] = {}
    for a, b in P.pairs_of(gpus):
        pl = inv.pair(a, b)
        bw = pair_bandwidth_bytes_per_s(inv, pl) if pl is not None else None
        pairs[(a, b)] = bw * (0.8 if pl and pl.nvlinks else 0.4) if bw else None
    return P.make_plan(gpus, host, pairs, max_memory=max_memory, trials=trials)


def other_processes(frame: Frame | None, gpus: list[int]) -> dict[int, list[str]]:
    """GPU index → "pid name" of each process on it other than this one (from NVML's process lists)."""
    me = os.getpid()
    out: dict[int, list[str]] = {}
    if frame is None:
        return out
    for i in gpus:
        r = frame.gpus[i] if i < len(frame.gpus) else None
        procs = [p for p in (r.processes or ()) if p.pid != me] if r is not None else []
        if procs:
            out[i] = [f"{p.pid} {clean(p.name or '?', 30)}" for p in procs]
    return out


def busy_text(busy: dict[int, list[str]]) -> str:
    """``GPU0: 1234 python, …; GPU1: …``: the other processes on the GPUs (empty: nobody else)."""
    return "; ".join(f"GPU{i}: {', '.join(ps[:3])}{' …' if len(ps) > 3 else ''}" for i, ps in busy.items())
