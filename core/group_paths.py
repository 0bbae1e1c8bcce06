"""A serving group's path: the worst link between its GPUs, its PCIe links now, the finding when that path
is slow (with a better placement when one exists). Pure functions (its traffic: core/group_traffic.py).

The findings engine calls :func:`rule_group_path` (registered in ``core/findings.py``); the machine-wide
slow-path rule skips the pairs inside a known group (:func:`grouped_pairs`): the group's own line says it in
the server's words.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from gpuscope.core.candidate import Candidate
from gpuscope.core.groups import gpus_text, group_label, parallel_text
from gpuscope.core.model import Frame, Inventory, PairLink, ServingGroup
from gpuscope.core.text import clean
from gpuscope.core.topology import PATH_RANK, best_link, pcie_capacity_bytes_per_s
from gpuscope.core.vocab import link_label, reading_busy

SLOW_PATHS = ("SYS", "NODE", "PHB")
MAX_COMBINATIONS = 5000  # placements looked at for a better one (C(16, 4) = 1820, C(8, 4) = 70)
PATH_SAYS = {
    "SYS": "crosses NUMA (SYS)",
    "NODE": "crosses PCIe host bridges in one NUMA node (NODE)",
    "PHB": "goes through a CPU's PCIe host bridge (PHB)",
}


def pair_rank(p: PairLink | None) -> int:
    """How bad a pair's path is: NVLink 0, then PIX 1 … SYS 5; unknown (no pair listed) 6."""
    if p is None:
        return 6
    if p.nvlinks:
        return 0
    return 1 + PATH_RANK.get(p.pcie_path, 4)


# worst_pair's answers, kept per inventory object and GPU set (the inventory held beside them, so a reused id never
# answers for another): asked for every group every tick, fixed while the inventory is
_WORST: dict[tuple[int, tuple[int, ...]], tuple[Inventory, PairLink | None]] = {}


def worst_pair(inv: Inventory, gpus: Sequence[int]) -> PairLink | None:
    """The worst-connected pair among ``gpus`` (None for fewer than two GPUs or no pair known)."""
    key = (id(inv), tuple(gpus))
    got = _WORST.get(key)
    if got is None or got[0] is not inv:
        if len(_WORST) >= 256:  # inventories come and go (tests, replays): bounded
            _WORST.clear()
        got = _WORST[key] = (inv, _worst_pair(inv, key[1]))
    return got[1]


def _worst_pair(inv: Inventory, gpus: Sequence[int]) -> PairLink | None:
    worst: PairLink | None = None
    for a, b in itertools.combinations(sorted(set(gpus)), 2):
        p = inv.pair(a, b)
        if p is not None and (worst is None or pair_rank(p) > pair_rank(worst)):
            worst = p
    return worst


def slowest_link(frame: Frame | None, inv: Inventory, gpus: Sequence[int]) -> tuple[int | None, int | None, float | None]:
    """(generation, width, bytes/s one direction) of the slowest PCIe link among ``gpus`` now (from the
    frame; the best they can reach when the frame does not say)."""
    best: tuple[int | None, int | None, float | None] = (None, None, None)
    now = {r.index: r for r in reversed(frame.gpus)} if frame is not None else {}  # the first reading of an index
    for i in gpus:
        r = now.get(i)
        gen, width = (r.pcie_gen, r.pcie_width) if r is not None and not r.lost else (None, None)
        if not gen or not width:
            dev = next((d for d in inv.devices if d.index == i), None)
            if dev is None:
                continue
            gen, width = best_link(dev)
        cap = pcie_capacity_bytes_per_s(gen, width)
        if cap is not None and (best[2] is None or cap < best[2]):
            best = (gen, width, cap)
    return best


def path_text(inv: Inventory, frame: Frame | None, gpus: Sequence[int]) -> str:
    """``SYS, Gen1×16`` (the worst path between the GPUs, then their slowest PCIe link now); ``NV4,
    Gen4×16``; only the link for one GPU; ``""`` when nothing is known."""
    parts = []
    p = worst_pair(inv, gpus)
    if p is not None:
        parts.append(p.label)
    gen, width, _cap = slowest_link(frame, inv, gpus)
    if gen and width:
        parts.append(link_label(gen, width))
    return ", ".join(parts)


def group_line(g: ServingGroup, inv: Inventory, frame: Frame | None, model: bool = True) -> str:
    """The group in one line: ``vLLM :8000 qwen3-27b · TP=2 on GPU0+GPU1 · SYS, Gen1×16`` (without the model
    when ``model`` is False: a panel that shows it on the line above); a group not placed says why (``· not
    local``, ``· GPUs unknown: …``). Every word from outside is cleaned."""
    head = group_label(g if model else replace(g, model=None))
    if not g.local:
        return f"{head} · not local (on another host: no processes or GPUs to show)"
    if not g.gpus:
        return f"{head} · GPUs unknown: {clean(g.note or 'no GPU process found', 120)}"
    par = parallel_text(g)
    if g.endpoint:
        out = f"{head} · {par} on {gpus_text(g.gpus)}" if par else f"{head} · on {gpus_text(g.gpus)}"
    else:  # a group by process: "python train.py: GPU2–GPU5"
        out = f"{head}: {gpus_text(g.gpus)}" + (f" · {par}" if par else "")
    path = path_text(inv, frame, g.gpus)
    if path:
        out += f" · {path}"
    if g.container:
        out += f" · {clean(g.container, 60)}"
    return out


# ------------------------------------------------------------------ placement
Placement = tuple[tuple[int, ...], PairLink | None]
# better_placement's answers, kept per inventory object (held beside them, as _WORST), GPU set and busy GPUs: an
# lru_cache would hash the whole inventory on every call
_PLACEMENTS: dict[tuple[int, tuple[int, ...], frozenset[int]], tuple[Inventory, Placement | None]] = {}


def better_placement(inv: Inventory, gpus: tuple[int, ...], busy: frozenset[int]) -> Placement | None:
    """A set of as many GPUs as ``gpus`` (none of them in ``busy``: held by another group) whose worst path
    is better than theirs: the best one, lowest indices first. None when none is better or too many sets."""
    key = (id(inv), gpus, busy)
    got = _PLACEMENTS.get(key)
    if got is None or got[0] is not inv:
        if len(_PLACEMENTS) >= 256:  # bounded, as _WORST
            _PLACEMENTS.clear()
        got = _PLACEMENTS[key] = (inv, _better_placement(inv, gpus, busy))
    return got[1]


def _better_placement(inv: Inventory, gpus: tuple[int, ...], busy: frozenset[int]) -> Placement | None:
    n = len(gpus)
    have = pair_rank(worst_pair(inv, gpus))
    free = [d.index for d in inv.devices if d.index not in busy or d.index in gpus]
    if n < 2 or len(free) < n:
        return None
    count = math.comb(len(free), n)  # the placements to weigh, without building them
    if count > MAX_COMBINATIONS:
        return None
    best: tuple[int, tuple[int, ...], PairLink | None] | None = None
    for combo in itertools.combinations(free, n):
        p = _worst_pair(inv, combo)  # not kept: up to MAX_COMBINATIONS sets
        if p is None:
            continue
        r = pair_rank(p)
        if r < have and (best is None or r < best[0]):
            best = (r, combo, p)
    return (best[1], best[2]) if best else None


def placement_text(inv: Inventory, combo: Sequence[int], p: PairLink | None) -> str:
    """``GPU0+GPU2 share NUMA 0 and a PCIe switch`` (what the better set has in common)."""
    devs = [d for d in inv.devices if d.index in combo]
    numas = {d.numa_node for d in devs}
    numa = f"NUMA {devs[0].numa_node}" if len(numas) == 1 and devs and devs[0].numa_node is not None else ""
    link = ""
    if p is not None:
        if p.nvlinks:
            link = f"NVLink ({p.label})"
        else:
            link = {"PIX": "a PCIe switch", "PXB": "a tree of PCIe switches", "PHB": "a PCIe host bridge",
                    "NODE": ""}.get(p.pcie_path, "")
            numa = numa or ("a NUMA node" if p.pcie_path in ("PIX", "PXB", "PHB", "NODE") else "")
    shared = " and ".join(x for x in (numa, link) if x)
    return f"{gpus_text(combo)} share {shared}" if shared else f"{gpus_text(combo)} are better connected"


# ------------------------------------------------------------------ the finding
@dataclass(frozen=True, slots=True)
class GroupPath:
    """What the group-path rule found for one group (the engine turns it into a Candidate)."""

    id: str
    severity: str
    subject: str
    message: str
    evidence: dict[str, Any]


def group_path_findings(inv: Inventory, frames: Sequence[Frame]) -> list[GroupPath]:
    """One finding per serving group of the newest frame whose worst path between its GPUs is slow (SYS,
    NODE or PHB, no NVLink): ``vLLM's TP=2 all-reduce crosses NUMA (SYS), no NVLink: at most 4.0 GB/s per
    direction now``, with a better placement where one exists. SYS is critical while the group's GPUs are
    busy (a warning at idle), NODE/PHB a warning (info at idle)."""
    if not frames:
        return []
    frame = frames[-1]
    out = []
    held_by: dict[int, str] = {}
    for g in frame.groups:
        for i in g.gpus:
            held_by.setdefault(i, g.server)
    for g in frame.groups:
        if len(g.gpus) < 2:
            continue
        p = worst_pair(inv, g.gpus)
        if p is None or p.nvlinks or p.pcie_path not in SLOW_PATHS:
            continue
        gen, width, cap = slowest_link(frame, inv, g.gpus)
        rate = f"at most {cap / 1e9:.1f} GB/s per direction now" if cap else "bandwidth unknown"
        if gen and width:
            rate += f" ({link_label(gen, width)})"
        msg = f"{_group_traffic_words(g)} {PATH_SAYS[p.pcie_path]}, no NVLink: {rate}"
        others = frozenset(i for i, s in held_by.items() if i not in g.gpus)
        better = better_placement(inv, tuple(sorted(g.gpus)), others)
        ev: dict[str, Any] = {"server": g.server, "endpoint": g.endpoint, "gpus": list(g.gpus), "tp": g.tp,
                              "pp": g.pp, "path": p.pcie_path, "pair": f"{p.a}-{p.b}", "expected_bytes_per_s": cap}
        if better is not None:
            combo, bp = better
            msg += f"; {placement_text(inv, combo, bp)}"
            ev["better_gpus"] = list(combo)
            ev["better_path"] = bp.label if bp is not None else None
        key = g.endpoint or g.server
        busy = _group_busy(frame, g)
        ev["busy"] = busy
        # SYS is critical while the group works (warning while it idles); NODE/PHB a warning (info at idle)
        sev = ("critical" if busy else "warning") if p.pcie_path == "SYS" else ("warning" if busy else "info")
        out.append(GroupPath(id=f"group-path:{key}:{'+'.join(str(i) for i in g.gpus)}", severity=sev,
                             subject=f"GPU{p.a}-GPU{p.b}", message=msg, evidence=ev))
    return out


def _group_traffic_words(g: ServingGroup) -> str:
    """What crosses a group's path: ``vLLM's TP=2 all-reduce``, ``…'s PP=2 pipeline traffic``, or its traffic
    between its GPUs."""
    name = clean(g.server, 40)
    if g.tp and g.tp > 1:
        return f"{name}'s TP={g.tp} all-reduce"
    if g.pp and g.pp > 1:
        return f"{name}'s PP={g.pp} pipeline traffic"
    return f"{name}'s traffic between {gpus_text(g.gpus)}"


def _group_busy(frame: Frame, g: ServingGroup) -> bool:
    """Whether any of the group's GPUs (not lost) is busy now."""
    return any(reading_busy(r, pcie_capacity_bytes_per_s(r.pcie_gen, r.pcie_width))
               for r in frame.gpus if r.index in g.gpus and not r.lost)


def rule_group_path(inv: Inventory, frames: Sequence[Frame]) -> list[Candidate]:
    """The findings-engine rule (``group_path``): :func:`group_path_findings` as candidates."""
    return [Candidate(f.id, "group_path", f.severity, f.subject, f.message, f.evidence,
                      variant=f.evidence["path"] + (" busy" if f.evidence["busy"] else " idle"), basis="live") for f in group_path_findings(inv, frames)]


def grouped_pairs(frame: Frame | None) -> set[tuple[int, int]]:
    """Every pair (a < b) of GPUs inside one known group of ``frame``."""
    out: set[tuple[int, int]] = set()
    for g in frame.groups if frame is not None else ():
        out |= {(a, b) for a, b in itertools.combinations(sorted(set(g.gpus)), 2)}
    return out
