"""The link probe's plan from what gpuscope already knows (the inventory, the last frame): which GPUs (all, a
list, or one serving group's), the expected bandwidth of each figure (for the time estimate) and who else uses
the GPUs. Shared by ``gpuscope probe`` (cli/probe.py) and the palette's probe (tui/probe_controller.py)."""

from __future__ import annotations

import os
from collections.abc import Sequence

from gpuscope.core import probe as P
from gpuscope.core.errors import GpuscopeError
from gpuscope.core.groups import endpoint_address, gpus_text, group_label
from gpuscope.core.model import Frame, Inventory, ServingGroup
from gpuscope.core.text import clean
from gpuscope.core.topology import pair_bandwidth_bytes_per_s, pcie_typical


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
        host[d.index] = pcie_typical(link.gen_now or link.gen_max, link.width_now or link.width_max)
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


# ------------------------------------------------------------------ one serving group (`--group NAME`)
def group_names(g: ServingGroup) -> list[str]:
    """The names a serving group answers to, as the user sees it: the inference panel's label
    (``vLLM :8000 qwen3-27b``), its server name (``vLLM``), its endpoint URL and ``:PORT``."""
    names = [group_label(g), g.server]
    if g.endpoint:
        names.append(g.endpoint)
    if g.port is not None:
        names.append(f":{g.port}")
    return names


def _canon(text: str) -> str:
    return " ".join(text.split()).lower().rstrip("/")


def port_of(name: str) -> int | None:
    """The port a NAME gives: ``:8000``, ``8000``, ``localhost:8000``, ``http://host:8000/v1`` (None: no port)."""
    t = name.strip()
    if t.isdigit():
        return int(t) if 0 < int(t) <= 65535 else None
    if t.startswith(":") and t[1:].isdigit():
        return int(t[1:]) if 0 < int(t[1:]) <= 65535 else None
    if ":" not in t or " " in t:
        return None
    _host, port = endpoint_address(t)
    return port if "://" in t or t.rsplit(":", 1)[-1].split("/")[0].isdigit() else None


def group_choices(groups: Sequence[ServingGroup]) -> str:
    """``vLLM :8000 qwen (GPU0+GPU1), python train.py (GPU2–GPU5)``: the groups as an error lists them."""
    return ", ".join(f"{group_label(g)} ({gpus_text(g.gpus)})" for g in groups) or "none found"


def match_group(groups: Sequence[ServingGroup], name: str) -> ServingGroup:
    """The serving group that ``name`` names: its label, server name or endpoint URL (any case), its port
    (``:8000``, ``8000``, a URL with that port), else a unique start of its label.

    Raises :class:`GpuscopeError` (one line listing the groups found) when none or several match, or when the
    group holds no GPU on this machine."""
    want = _canon(name)
    port = port_of(name)
    hits = [g for g in groups if want in {_canon(n) for n in group_names(g)}]
    if not hits and port is not None:
        hits = [g for g in groups if g.port == port]
    if not hits and want:
        hits = [g for g in groups if _canon(group_label(g)).startswith(want)]
    shown = clean(name, 60)
    if not hits:
        raise GpuscopeError(f"--group {shown!r}: no such serving group here (groups: {group_choices(groups)})")
    if len(hits) > 1:
        raise GpuscopeError(f"--group {shown!r} names {len(hits)} groups ({group_choices(hits)}): give its port or "
                            "its whole label")
    g = hits[0]
    if not g.gpus:
        why = "its endpoint is on another host" if not g.local else "it holds no GPU"
        raise GpuscopeError(f"--group {shown!r}: {group_label(g)} has no GPU to probe here ({why})")
    return g


def group_gpus(inv: Inventory, g: ServingGroup) -> list[int]:
    """The GPUs of group ``g`` that this machine has, in order (the probe measures their host links and every
    pair among them). Raises :class:`GpuscopeError` when none is here."""
    have = {d.index for d in inv.devices}
    gpus = sorted(i for i in set(g.gpus) if i in have)
    if not gpus:
        raise GpuscopeError(f"{group_label(g)}: none of its GPUs ({gpus_text(g.gpus)}) is on this machine")
    return gpus
