"""Findings: plain-language diagnoses over the inventory and recent frames (rules: docs/findings.md).

Each rule is a pure function ``rule(inv, frames) -> list[Candidate]`` over a short window of frames
(the last one is "now"). :class:`FindingsEngine` turns candidates into findings that must hold for
``hold_s`` before they are raised and stay absent for ``hold_s`` before they clear, so blips do
not flap; it emits ``finding_raised`` / ``finding_changed`` / ``finding_cleared`` events for recordings.
Each event carries the condition's start (``started_at``, before the hold) and the start of its current
severity and wording (``since``), so ``summary`` and a rebuilt engine (after a replay seek) agree with
what the live engine showed.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from gpuscope.core.candidate import Candidate
from gpuscope.core.group_paths import grouped_pairs, rule_group_path  # serving groups
from gpuscope.core.health import HEALTH_RULES, counter_span
from gpuscope.core.link_cost import rule_link_cost
from gpuscope.core.link_verdict import rule_link_verdict
from gpuscope.core.model import DeviceInfo, Event, Frame, GpuReading, Inventory
from gpuscope.core.slow_rank import rule_slow_rank
from gpuscope.core.topology import (
    PATH_MEANING,
    best_link,
    device_nvlink_capacity_bytes_per_s,
    pcie_capacity_bytes_per_s,
)
from gpuscope.core.units import fmt_num
from gpuscope.core.vocab import (  # noqa: F401 - severities and busy are defined once, in vocab
    BUSY_LINK_SHARE,
    BUSY_UTIL_PCT,
    CLOCK_EVENTS,
    HEAT_EVENTS,
    PROBE_EVENT,
    SEVERITIES,
    is_busy,
    link_label,
)
from gpuscope.core.vocab import SEV_RANK as SEVERITY_RANK
from gpuscope.core.window import AVG_S, GpuWindow, RuleWindow, gpu_windows, recent

SATURATED_SHARE = 0.80
PEER_TRAFFIC_SHARE = 0.25
NOT_COMPUTING_UTIL = 70.0
NOT_COMPUTING_SM = 30.0


@dataclass(frozen=True, slots=True)
class Finding:
    id: str
    rule: str
    severity: str
    subject: str
    message: str
    evidence: dict[str, Any]
    started_at: float  # when the condition was first seen (the raise comes hold_s later)
    raised_at: float | None = None  # when it had held for hold_s (None: pending)
    cleared_at: float | None = None
    variant: str = ""
    basis: str = "avg"
    since: float | None = None  # when the current severity and wording began (None: at started_at)
    ended_at: float | None = None  # the condition is gone since then; the finding clears hold_s later
    worst: str = ""  # the worst severity this episode reached

    def held_s(self, now: float) -> float:
        """How long the condition has held, s: from its start to its end (or ``now``)."""
        return max(0.0, (self.ended_at or self.cleared_at or now) - self.started_at)


def gb(x: float | None) -> str:
    """Bytes/s as GB/s with one decimal (``3.9``)."""
    return "?" if x is None else f"{x / 1e9:.1f}"


def link_str(gen: int | None, width: int | None) -> str:
    return link_label(gen, width)


# ------------------------------------------------------------------ window helpers
# a device's NVLink capacity, asked by two rules every tick and fixed for the inventory's life: kept by the
# DeviceInfo's identity (the object itself held beside its figure, so a reused id never answers for another)
_NVLINK_CAPACITY: dict[int, tuple[DeviceInfo, float | None]] = {}


def nvlink_capacity(dev: DeviceInfo) -> float | None:
    """:func:`device_nvlink_capacity_bytes_per_s` of ``dev`` (all its active links), bytes/s, worked out once
    per device."""
    got = _NVLINK_CAPACITY.get(id(dev))
    if got is None or got[0] is not dev:
        if len(_NVLINK_CAPACITY) >= 256:  # inventories come and go (tests, replays): bounded
            _NVLINK_CAPACITY.clear()
        got = _NVLINK_CAPACITY[id(dev)] = (dev, device_nvlink_capacity_bytes_per_s(dev))
    return got[1]


def _dev(inv: Inventory, i: int) -> DeviceInfo | None:
    return inv.devices[i] if 0 <= i < len(inv.devices) else None


def _windows_with_devices(inv: Inventory, frames: Sequence[Frame]) -> Iterator[tuple[GpuWindow, DeviceInfo]]:
    """(window, device) of every GPU in the last frame that is not lost and is in the inventory."""
    for w in gpu_windows(frames).values():
        dev = _dev(inv, w.gpu)
        if dev is not None:
            yield w, dev


# ------------------------------------------------------------------ rules
def rule_pcie_below_max(inv: Inventory, frames: Sequence[Frame]) -> list[Candidate]:
    """1. PCIe link below its generation or width while busy; a narrow link at any load; at idle, a lower
    generation is the power-saving downshift (GPUs lower the generation at idle, never the width)."""
    out: list[Candidate] = []
    for w, dev in _windows_with_devices(inv, frames):
        i, now = w.gpu, w.now
        gen, width = now.pcie_gen, now.pcie_width
        best_gen, best_width = best_link(dev)
        gpu_gen = dev.pcie_gen_gpu_max or best_gen
        gpu_width = dev.pcie_width_gpu_max or best_width
        if gen is None or width is None or best_gen is None:
            continue
        cap_now = pcie_capacity_bytes_per_s(gen, width)
        cap_gpu = pcie_capacity_bytes_per_s(gpu_gen, gpu_width)
        cap_best = pcie_capacity_bytes_per_s(best_gen, best_width)
        narrow = best_width is not None and width < best_width
        trained_low = gen < best_gen or narrow
        slot_limited = bool(dev.pcie_gen_sys_max and dev.pcie_gen_gpu_max and dev.pcie_gen_sys_max < dev.pcie_gen_gpu_max)
        ev = {"gpu": i, "pcie_gen": gen, "pcie_width": width, "gen_gpu_max": dev.pcie_gen_gpu_max,
              "gen_sys_max": dev.pcie_gen_sys_max, "width_max": best_width,
              "capacity_bytes_per_s": cap_now, "capacity_gpu_max_bytes_per_s": cap_gpu,
              "capacity_can_bytes_per_s": cap_best,
              "util_gpu_pct": w.util_gpu_pct, "pcie_tx_bytes_per_s": w.pcie_tx_bytes_per_s,
              "pcie_rx_bytes_per_s": w.pcie_rx_bytes_per_s}
        if trained_low and w.busy:
            sev = "critical" if cap_now and cap_best and cap_now <= 0.5 * cap_best else "warning"
            msg = (f"GPU{i} PCIe {link_str(gen, width)} under load, GPU supports {link_str(gpu_gen, gpu_width)}: "
                   f"{gb(cap_now)} of {gb(cap_gpu)} GB/s available")
            if slot_limited:
                msg += f"; the slot allows only Gen{dev.pcie_gen_sys_max} and the link trained lower still"
            elif narrow:
                msg += " (a narrow link: seating, riser or slot wiring; reseat the card or use a full ×16 slot)"
            else:
                msg += " (trained low: GPU and slot both allow more; check BIOS link speed, riser, seating)"
            out.append(Candidate(f"pcie-below-max:gpu{i}", "pcie_below_max", sev, f"GPU{i}", msg, ev,
                                 variant="load", basis="live"))
        elif narrow:
            can = pcie_capacity_bytes_per_s(best_gen, width)
            msg = (f"GPU{i} PCIe ×{width} of ×{best_width} (now {link_str(gen, width)}, idle): a narrow link is a "
                   f"seating, riser or slot problem at any load, not power saving; under load it can carry at most "
                   f"{gb(can)} of {gb(cap_best)} GB/s")
            out.append(Candidate(f"pcie-below-max:gpu{i}", "pcie_below_max", "warning", f"GPU{i}", msg, ev,
                                 variant="narrow", basis="live"))
        elif slot_limited and w.busy:
            msg = (f"GPU{i} slot limits the link: {link_str(dev.pcie_gen_sys_max, width)} (GPU supports Gen{gpu_gen}): "
                   f"{gb(cap_now)} of {gb(cap_gpu)} GB/s available; move the GPU to a Gen{gpu_gen} slot")
            out.append(Candidate(f"pcie-slot-limited:gpu{i}", "pcie_below_max", "warning", f"GPU{i}", msg, ev,
                                 basis="live"))
        elif trained_low:
            msg = (f"GPU{i} PCIe {link_str(gen, width)} at idle (can reach {link_str(best_gen, best_width)}, "
                   f"{gb(cap_best)} GB/s): the normal power-saving downshift; it should return to Gen{best_gen} "
                   f"under load")
            out.append(Candidate(f"pcie-idle-downshift:gpu{i}", "pcie_below_max", "info", f"GPU{i}", msg, ev,
                                 basis="live"))
    return out


_GOOD_PATHS = ("PIX", "PXB")


def tp_groups(inv: Inventory) -> list[list[int]]:
    """GPUs joined by NVLink or a PCIe switch (PIX/PXB), as groups of two or more, lowest first."""
    parent = {d.index: d.index for d in inv.devices}

    def root(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for p in inv.pairs:
        if p.a in parent and p.b in parent and (p.nvlinks or p.pcie_path in _GOOD_PATHS):
            parent[root(p.a)] = root(p.b)
    groups: dict[int, list[int]] = {}
    for i in sorted(parent):
        groups.setdefault(root(i), []).append(i)
    return sorted((g for g in groups.values() if len(g) > 1), key=lambda g: g[0])


def group_str(g: list[int]) -> str:
    """``GPU0-1`` for a run of indices, ``GPU0,2,5`` otherwise."""
    if g == list(range(g[0], g[-1] + 1)):
        return f"GPU{g[0]}-{g[-1]}"
    return "GPU" + ",".join(str(i) for i in g)


def rule_slow_path(inv: Inventory, frames: Sequence[Frame]) -> list[Candidate]:
    """2. Pairs of GPUs whose path is SYS (or PHB/NODE) with no NVLink.

    Without peer traffic this is a fact about the machine: one info line for all such pairs, naming
    the groups to keep tensor-parallel work in. A pair whose two links both carry heavy traffic (peer
    traffic is likely) gets its own line: SYS critical, PHB/NODE warning.
    """
    out = []
    windows = gpu_windows(frames)
    lost = {r.index for r in frames[-1].gpus if r.lost} if frames else set()
    grouped = grouped_pairs(frames[-1] if frames else None)  # a serving group's group_path line speaks for these
    quiet: list[tuple[Any, float | None]] = []  # slow pairs without peer traffic, with the best they can do
    for p in inv.pairs:
        if (p.nvlinks or p.pcie_path not in ("SYS", "PHB", "NODE") or p.a in lost or p.b in lost
                or (p.a, p.b) in grouped):
            continue
        da, db = _dev(inv, p.a), _dev(inv, p.b)
        if da is None or db is None:
            continue
        peer, expect_now, expect_can = _pair_links(windows, ((p.a, da), (p.b, db)))
        if not peer:
            quiet.append((p, expect_can))
            continue
        out.append(_slow_path_with_traffic(p, da, db, expect_now, expect_can))
    if quiet:
        out.append(_slow_paths_summary(inv, quiet))
    return out


def _pair_links(windows: Mapping[int, GpuWindow], ends: tuple[tuple[int, DeviceInfo], ...]
                ) -> tuple[bool, float | None, float | None]:
    """(peer traffic likely: both links busy and heavily used, the lesser link capacity now, the lesser best)
    of a pair's two ends, bytes/s; a GPU without a window counts its best link now and no traffic."""
    caps, can = [], []
    peer = True
    for i, d in ends:
        g, w = best_link(d)
        c_can = pcie_capacity_bytes_per_s(g, w)
        if c_can:
            can.append(c_can)
        gw = windows.get(i)
        if gw is not None and gw.pcie_capacity_bytes_per_s:
            cap = gw.pcie_capacity_bytes_per_s
            caps.append(cap)
            peer = peer and bool(gw.busy and gw.pcie_peak_bytes_per_s >= PEER_TRAFFIC_SHARE * cap)
        else:
            if c_can:
                caps.append(c_can)
            peer = False
    return peer, (min(caps) if caps else None), (min(can) if can else None)


def _slow_path_with_traffic(p: Any, da: DeviceInfo, db: DeviceInfo, expect_now: float | None,
                            expect_can: float | None) -> Candidate:
    """A slow pair's own line while both its links carry heavy traffic: SYS critical, PHB/NODE warning."""
    numa = ""
    if da.numa_node is not None and db.numa_node is not None:
        numa = f" (NUMA {da.numa_node} ↔ {db.numa_node})" if da.numa_node != db.numa_node else f" (NUMA {da.numa_node})"
    rate = f"at most {gb(expect_now)} GB/s per direction at the links' rate now"
    if expect_can and expect_now and expect_can > expect_now * 1.01:
        rate += f" (they can reach {gb(expect_can)})"
    if p.pcie_path == "SYS":
        sev = "critical"
        msg = (f"GPU{p.a}↔GPU{p.b} path SYS{numa}, no NVLink: peer traffic crosses the CPU interconnect, "
               f"{rate}; tensor-parallel all-reduce between them crawls")
    else:
        sev = "warning"
        msg = (f"GPU{p.a}↔GPU{p.b} path {p.pcie_path}{numa}, no NVLink: peer traffic goes "
               f"{PATH_MEANING[p.pcie_path]}, {rate}")
    msg += "; both links are carrying heavy traffic now"
    ev = {"a": p.a, "b": p.b, "path": p.pcie_path, "numa_a": da.numa_node, "numa_b": db.numa_node,
          "expected_bytes_per_s": expect_now, "can_bytes_per_s": expect_can, "peer_traffic": True}
    return Candidate(f"slow-path:gpu{p.a}-gpu{p.b}", "slow_path", sev, f"GPU{p.a}-GPU{p.b}", msg, ev,
                     variant="peer", basis="avg")


def _slow_paths_summary(inv: Inventory, quiet: list[tuple[Any, float | None]]) -> Candidate:
    """The one machine-wide info line for slow pairs that carry no peer traffic now."""
    sys_pairs = [p for p, _c in quiet if p.pcie_path == "SYS"]
    hb_pairs = [p for p, _c in quiet if p.pcie_path != "SYS"]

    def pairs_text(ps: list[Any], what: str) -> str:
        if len(ps) == 1:
            return f"GPU{ps[0].a}↔GPU{ps[0].b} {what.replace('cross', 'crosses').replace('go ', 'goes ')}"
        return f"{len(ps)} pairs {what}"

    parts = []
    if sys_pairs:
        parts.append(pairs_text(sys_pairs, "cross NUMA nodes (SYS, no NVLink)"))
    if hb_pairs:
        parts.append(pairs_text(hb_pairs, "go through a host bridge (PHB/NODE, no NVLink)"))
    can = [c for _p, c in quiet if c]
    groups = tp_groups(inv)
    if groups:
        advice = "keep tensor-parallel groups inside " + ", ".join(group_str(g) for g in groups)
    else:
        advice = "no pair here avoids it: tensor-parallel all-reduce would cross it"
    msg = f"{' and '.join(parts)}: at most {gb(min(can) if can else None)} GB/s per direction at the links' best; {advice}"
    ev = {"pairs": [f"{p.a}-{p.b}" for p, _c in quiet], "paths": sorted({p.pcie_path for p, _c in quiet}),
          "groups": [group_str(g) for g in groups], "can_bytes_per_s": min(can) if can else None}
    return Candidate("slow-paths", "slow_path", "info", "server", msg, ev, variant="idle", basis="static")


def rule_link_saturated(inv: Inventory, frames: Sequence[Frame]) -> list[Candidate]:
    """3. PCIe or NVLink throughput above 80 % of the link's capacity."""
    out: list[Candidate] = []
    for w, dev in _windows_with_devices(inv, frames):
        i, now, pcie_cap = w.gpu, w.now, w.pcie_capacity_bytes_per_s
        over = [(name, v) for name, v in (("RX", w.pcie_rx_bytes_per_s), ("TX", w.pcie_tx_bytes_per_s))
                if v is not None and pcie_cap and v > SATURATED_SHARE * pcie_cap]
        if over and pcie_cap:
            dirs = " / ".join(f"{name} {gb(v)}" for name, v in over)
            peak = max(v for _n, v in over)
            out.append(Candidate(
                f"pcie-saturated:gpu{i}", "link_saturated", "warning", f"GPU{i}",
                f"GPU{i} PCIe {dirs} of {gb(pcie_cap)} GB/s ({100 * peak / pcie_cap:.0f} %) at "
                f"{link_str(now.pcie_gen, now.pcie_width)}: the link is saturated",
                {"gpu": i, **{f"{n.lower()}_bytes_per_s": v for n, v in over}, "capacity_bytes_per_s": pcie_cap},
                variant="/".join(n for n, _v in over)))
        cap = nvlink_capacity(dev)
        over = [(name, v) for name, v in (("RX", w.nvlink_rx_bytes_per_s), ("TX", w.nvlink_tx_bytes_per_s))
                if v is not None and cap and v > SATURATED_SHARE * cap]
        if over and cap:
            dirs = " / ".join(f"{name} {gb(v)}" for name, v in over)
            peak = max(v for _n, v in over)
            out.append(Candidate(
                f"nvlink-saturated:gpu{i}", "link_saturated", "warning", f"GPU{i}",
                f"GPU{i} NVLink {dirs} of {gb(cap)} GB/s ({100 * peak / cap:.0f} %) over "
                f"{dev.nvlinks_active} links: NVLink is saturated",
                {"gpu": i, **{f"{n.lower()}_bytes_per_s": v for n, v in over}, "capacity_bytes_per_s": cap},
                variant="/".join(n for n, _v in over)))
    return out


# (name, severity, words) of the clock events that are findings, from the one list in vocab; worst first
_CLOCK_RULES: tuple[tuple[str, str, str], ...] = tuple(sorted(
    ((e.name, e.severity, e.meaning) for e in CLOCK_EVENTS if e.severity and e.meaning),
    key=lambda h: SEVERITY_RANK.get(h[1], len(SEVERITIES))))


def _power_cap_bites(r: GpuReading, dev: DeviceInfo, lost_mhz: int | None) -> bool:
    """NVML's power-cap reason can stay set for a moment after the load drops (seen on H200 at a phase
    change: 458 of 700 W, SM clock at its max). It is a finding only while it costs something: the SM
    clock held 2 % or more below its max, or the power within 5 % of the limit (or either unknown)."""
    limit = r.power_limit_w or dev.power_limit_w
    if lost_mhz is None or not dev.sm_clock_max_mhz:
        return True
    if lost_mhz >= 0.02 * dev.sm_clock_max_mhz:
        return True
    return r.power_w is None or not limit or r.power_w >= 0.95 * limit


def rule_clock_events(inv: Inventory, frames: Sequence[Frame]) -> list[Candidate]:
    """4. Power capped, thermal or hardware slowdown, from the clock event reasons."""
    out: list[Candidate] = []
    if not frames:
        return out
    for i, r in enumerate(frames[-1].gpus):
        dev = _dev(inv, i)
        if r.lost or dev is None or not r.clock_event_reasons:
            continue
        names = r.clock_events
        lost_mhz = (dev.sm_clock_max_mhz - r.sm_clock_mhz) if dev.sm_clock_max_mhz and r.sm_clock_mhz else None
        hits = [(key, sev, what) for key, sev, what in _CLOCK_RULES
                if key in names and not (key == "sw_power_cap" and not _power_cap_bites(r, dev, lost_mhz))]
        if not hits:
            continue
        sev = min((h[1] for h in hits), key=lambda sv: SEVERITY_RANK[sv])
        parts = _clock_event_figures(r, dev, hits, lost_mhz)
        what = " + ".join(h[2] for h in hits)
        out.append(Candidate(f"clocks:gpu{i}", "clock_events", sev, f"GPU{i}",
                             f"GPU{i} {what}" + (": " + ", ".join(parts) if parts else ""),
                             {"gpu": i, "reasons": [h[0] for h in hits], "sm_clock_mhz": r.sm_clock_mhz,
                              "sm_clock_max_mhz": dev.sm_clock_max_mhz, "power_w": r.power_w,
                              "temp_gpu_c": r.temp_gpu_c}, variant="+".join(h[0] for h in hits), basis="live"))
    return out


def _clock_event_figures(r: GpuReading, dev: DeviceInfo, hits: list[tuple[str, str, str]],
                         lost_mhz: int | None) -> list[str]:
    """The figures behind a clock-events line: power against its limit, the temperature (for a thermal or
    slowdown reason), the SM clock against its max."""
    parts = []
    if r.power_w is not None and (r.power_limit_w or dev.power_limit_w):
        parts.append(f"{r.power_w:.0f} of {(r.power_limit_w or dev.power_limit_w):.0f} W")
    if r.temp_gpu_c is not None and any("thermal" in h[0] or "slowdown" in h[0] for h in hits):
        parts.append(f"{r.temp_gpu_c:.0f} °C")
    if lost_mhz is not None:
        parts.append(f"SM clock {r.sm_clock_mhz} of {dev.sm_clock_max_mhz} MHz (−{max(lost_mhz, 0)} MHz)")
    return parts


# PCIe replay/recovery/error counters are read every 15 s (sources/nvml.py HEALTH_INTERVAL_S) and carried
# between reads, so in a 10 s window a steady rise showed as a step now and then: the finding came and went
# ("critical 9s (then cleared)" while GPU1's replays kept climbing). They rise from a frame this far back,
# which spans two reads: a steady rise stays one finding; it clears at most this long after the last rise.
COUNTER_WINDOW_S = 35.0


def rule_pcie_errors(inv: Inventory, frames: Sequence[Frame]) -> list[Candidate]:
    """5. PCIe replay, recovery or error counters rising: suspect riser, cable or slot."""
    out: list[Candidate] = []
    span = counter_span(frames)
    if span is None:
        return out
    first, last, dt = span
    for i, r in enumerate(last.gpus):
        if r.lost or i >= len(first.gpus) or first.gpus[i].lost:
            continue
        r0 = first.gpus[i]
        deltas = {}
        for attr, label in (("pcie_replay_count", "replays"), ("pcie_recovery_count", "recoveries"),
                            ("pcie_error_count", "errors")):
            a, b = getattr(r0, attr), getattr(r, attr)
            if a is not None and b is not None and b > a:
                deltas[label] = b - a
        if not deltas:
            continue
        sev = "critical" if deltas.get("errors") or deltas.get("recoveries") else "warning"
        text = ", ".join(f"+{v} {k}" for k, v in deltas.items())
        out.append(Candidate(f"pcie-errors:gpu{i}", "pcie_errors", sev, f"GPU{i}",
                             f"GPU{i} PCIe errors rising: {text} in {dt:.0f} s: suspect the riser, cable or slot",
                             {"gpu": i, "window_s": dt, **deltas,
                              "pcie_replay_count": r.pcie_replay_count, "pcie_recovery_count": r.pcie_recovery_count},
                             variant="+".join(deltas), basis="window"))
    return out


def rule_busy_not_computing(inv: Inventory, frames: Sequence[Frame]) -> list[Candidate]:
    """6. Utilization high while GPM SM activity is low: copies or communication, not compute."""
    out: list[Candidate] = []
    for w in gpu_windows(frames).values():
        i, util, sm, tensor_pct = w.gpu, w.util_gpu_pct, w.sm_active_pct, w.tensor_active_pct
        if util is None or sm is None:
            continue
        if util >= NOT_COMPUTING_UTIL and sm < NOT_COMPUTING_SM:
            tensor = f", tensor {tensor_pct:.0f} %" if tensor_pct is not None else ""
            where = []
            peak, cap = w.pcie_peak_bytes_per_s, w.pcie_capacity_bytes_per_s
            if peak and cap and peak >= BUSY_LINK_SHARE * cap:
                where.append(f"PCIe {gb(peak)} GB/s")
            if w.nvlink_peak_bytes_per_s >= 1e9:
                where.append(f"NVLink {gb(w.nvlink_peak_bytes_per_s)} GB/s")
            hint = f" ({', '.join(where)})" if where else ""
            out.append(Candidate(f"busy-not-computing:gpu{i}", "busy_not_computing", "info", f"GPU{i}",
                                 f"GPU{i} {util:.0f} % busy but SMs {sm:.0f} % active{tensor}: the time goes "
                                 f"to copies or communication{hint}, not compute",
                                 {"gpu": i, "util_gpu_pct": util, "sm_active_pct": sm,
                                  "tensor_active_pct": tensor_pct}))
    return out


def rule_gpu_lost(inv: Inventory, frames: Sequence[Frame]) -> list[Candidate]:
    """7. A GPU that fell off the bus."""
    out: list[Candidate] = []
    if not frames:
        return out
    for i, r in enumerate(frames[-1].gpus):
        if r.lost:
            dev = _dev(inv, i)
            name = f" {dev.name}" if dev else ""
            bus = f" at {dev.bus_id}" if dev else ""
            out.append(Candidate(f"gpu-lost:gpu{i}", "gpu_lost", "critical", f"GPU{i}",
                                 f"GPU{i}{name}{bus} is lost (fell off the bus); the other GPUs go on: check "
                                 f"`dmesg` for Xid 79, power and seating", {"gpu": i}, basis="live"))
    return out


def rule_bottleneck(inv: Inventory, frames: Sequence[Frame]) -> list[Candidate]:
    """8. One line naming what most likely limits throughput, only when the evidence is clear.

    Its wording class is the cause (pcie, nvlink, power, thermal, compute): a new cause is a
    ``finding_changed`` event and starts a new "since".
    """
    return _bottleneck(inv, frames)  # each made with its cause as its variant (_bottleneck_candidate)


def _bottleneck(inv: Inventory, frames: Sequence[Frame]) -> list[Candidate]:
    busy = [w for w in gpu_windows(frames).values() if w.busy]
    if not busy:
        return []
    for cause in BOTTLENECKS:  # the first cause whose evidence is clear
        c = cause(inv, busy)
        if c is not None:
            return [c]
    return []


def _bottleneck_candidate(message: str, evidence: dict[str, Any]) -> Candidate:
    return Candidate("bottleneck", "bottleneck", "info", "server", message, evidence,
                     variant=str(evidence.get("cause", "")))


def _pcie_bound(inv: Inventory, busy: list[GpuWindow]) -> Candidate | None:
    """Interconnect: the busy GPU whose PCIe link is fullest, nearly full, and whose SMs are not the limit."""
    best = None
    for w in busy:
        cap = w.pcie_capacity_bytes_per_s
        if cap and w.pcie_peak_bytes_per_s >= SATURATED_SHARE * cap and (w.sm_active_pct is None or w.sm_active_pct < 60):
            share = w.pcie_peak_bytes_per_s / cap
            if best is None or share > best[0]:
                best = (share, w)
    if best is None:
        return None
    _share, w = best
    i, now = w.gpu, w.now
    d = "RX" if (w.pcie_rx_bytes_per_s or 0) >= (w.pcie_tx_bytes_per_s or 0) else "TX"
    sm = (f", SM activity {w.sm_active_pct:.0f} %" if w.sm_active_pct is not None
          else f", utilization {w.util_gpu_pct:.0f} %" if w.util_gpu_pct is not None else "")
    dev = _dev(inv, i)
    below = ""
    if dev is not None:
        bg, _bw = best_link(dev)
        if bg and now.pcie_gen and now.pcie_gen < bg:
            below = f" (Gen{bg} would give {gb(pcie_capacity_bytes_per_s(bg, now.pcie_width))})"
    return _bottleneck_candidate(f"looks interconnect-bound: GPU{i} PCIe {d} {gb(w.pcie_peak_bytes_per_s)} of "
                                 f"{gb(w.pcie_capacity_bytes_per_s)} GB/s at Gen{now.pcie_gen}{below}{sm}",
                                 {"cause": "pcie", "gpu": i})


def _nvlink_bound(inv: Inventory, busy: list[GpuWindow]) -> Candidate | None:
    """The first busy GPU whose NVLinks are nearly full while its SMs are not the limit."""
    for w in busy:
        dev = _dev(inv, w.gpu)
        cap = nvlink_capacity(dev) if dev else None
        nv = w.nvlink_peak_bytes_per_s
        if cap and nv >= SATURATED_SHARE * cap and (w.sm_active_pct is None or w.sm_active_pct < 60):
            return _bottleneck_candidate(f"looks NVLink-bound: GPU{w.gpu} NVLink {gb(nv)} of {gb(cap)} GB/s",
                                         {"cause": "nvlink", "gpu": w.gpu})
    return None


def _power_bound(inv: Inventory, busy: list[GpuWindow]) -> Candidate | None:
    """At least half the busy GPUs held down by their power cap."""
    capped = [w for w in busy if "sw_power_cap" in w.now.clock_events and (dev := _dev(inv, w.gpu))
              and _power_cap_bites(w.now, dev, (dev.sm_clock_max_mhz - w.now.sm_clock_mhz)
                                   if dev.sm_clock_max_mhz and w.now.sm_clock_mhz else None)]
    if not (capped and len(capped) * 2 >= len(busy)):
        return None
    w = capped[0]
    dev = _dev(inv, w.gpu)
    lost = (dev.sm_clock_max_mhz - w.now.sm_clock_mhz) if dev and dev.sm_clock_max_mhz and w.now.sm_clock_mhz else 0
    return _bottleneck_candidate(f"looks power-bound: {len(capped)} of {len(busy)} busy GPUs at their power cap "
                                 f"(GPU{w.gpu} {fmt_num(w.power_w, ' W')}, SM clock −{max(lost, 0)} MHz)",
                                 {"cause": "power"})




def _thermal_bound(inv: Inventory, busy: list[GpuWindow]) -> Candidate | None:
    """A busy GPU slowing down for heat."""
    hot = [w for w in busy if not HEAT_EVENTS.isdisjoint(w.now.clock_events)]
    if not hot:
        return None
    w = hot[0]
    return _bottleneck_candidate(f"looks thermally limited: GPU{w.gpu} slowing down at "
                                 f"{fmt_num(w.now.temp_gpu_c, ' °C')}", {"cause": "thermal"})


def _compute_bound(inv: Inventory, busy: list[GpuWindow]) -> Candidate | None:
    """Every busy GPU's tensor cores or SMs near full."""
    computing = [w for w in busy if (w.tensor_active_pct or 0) >= 70 or (w.sm_active_pct or 0) >= 85]
    if not (computing and len(computing) == len(busy)):
        return None
    w = computing[0]
    parts = [f"{what} {x:.0f} %" for what, x in (("SM activity", w.sm_active_pct), ("tensor", w.tensor_active_pct))
             if x is not None]
    return _bottleneck_candidate(f"looks compute-bound: GPU{w.gpu} {', '.join(parts)}", {"cause": "compute"})


# The bottleneck's causes, in the order they are weighed: the first with clear evidence is named.
BOTTLENECKS: tuple[Callable[[Inventory, list[GpuWindow]], Candidate | None], ...] = (
    _pcie_bound, _nvlink_bound, _power_bound, _thermal_bound, _compute_bound)


PREEMPTIONS_PER_MIN = 1.0  # a serving engine preempting at least this often is short of KV cache
KV_FULL_PCT = 90.0


def rule_kv_pressure(inv: Inventory, frames: Sequence[Frame]) -> list[Candidate]:
    """9. An inference server preempting requests (KV cache full): evicted requests are recomputed later."""
    out: list[Candidate] = []
    if not frames or not frames[-1].endpoints:
        return out
    win = recent(frames)
    for e in frames[-1].endpoints:
        if not e.up:
            continue
        same = [x for f in win for x in f.endpoints if x.url == e.url and x.model == e.model]
        rates = [x.preemptions_per_min for x in same if x.preemptions_per_min is not None]
        if not rates:
            continue
        per_min = sum(rates) / len(rates)
        if per_min < PREEMPTIONS_PER_MIN:
            continue
        kvs = [x.kv_cache_pct for x in same if x.kv_cache_pct is not None]
        kv = max(kvs) if kvs else None
        name = e.model or e.url
        kv_s = f", KV {kv:.0f} %" if kv is not None else ""
        sev = "warning" if kv is None or kv >= KV_FULL_PCT else "info"
        out.append(Candidate(
            f"kv-pressure:{e.url}:{e.model or ''}", "kv_pressure", sev, "server",
            f"KV cache pressure: {per_min:.0f} preemptions/min{kv_s} ({e.kind or 'server'} {name}): requests are "
            f"evicted and recomputed; fewer concurrent sequences or more KV cache memory would avoid it",
            {"url": e.url, "model": e.model, "preemptions_per_min": per_min, "kv_cache_pct": kv}))
    return out


RULES: dict[str, Callable[[Inventory, Sequence[Frame]], list[Candidate]]] = {
    "gpu_lost": rule_gpu_lost,
    "pcie_below_max": rule_pcie_below_max,
    "slow_path": rule_slow_path,
    "link_saturated": rule_link_saturated,
    "clock_events": rule_clock_events,
    "pcie_errors": rule_pcie_errors,
    "busy_not_computing": rule_busy_not_computing,
    "bottleneck": rule_bottleneck,
    "kv_pressure": rule_kv_pressure,
    **HEALTH_RULES,  # Xid errors, ECC, row remapping (core/health.py)
    "group_path": rule_group_path,
    "link_cost": rule_link_cost,  # what the link costs each token (core/link_cost.py)
    "slow_rank": rule_slow_rank,  # the GPU a group waits for (core/slow_rank.py)
    "link_verdict": rule_link_verdict,  # one verdict on a group's links (core/link_verdict.py)
}


# Rules over a serving group's whole story (its link's cost, its slow rank, its links' verdict) read figures
# that move slowly next to a finding's 5 s hold: an engine runs them every GROUP_RULES_EVERY_S of frame time
# (and at once whenever the groups or the probe change, an Xid arrives or a GPU is lost: what puts a group's links
# at risk is never held back) and carries their candidates in between, which keeps their per-tick cost within a
# tenth of the rest (benchmarks/bench_findings.py, h100-two-tp4).
GROUP_RULES = ("link_cost", "slow_rank", "link_verdict")
GROUP_RULES_EVERY_S = 10.0


def evaluate(inv: Inventory, frames: Sequence[Frame], carried: Mapping[str, list[Candidate]] | None = None
             ) -> list[Candidate]:
    """Run every rule once over one shared :class:`RuleWindow` (a rule in ``carried`` is not run: its
    candidates are taken as they are); candidates sorted severity first."""
    window = frames if isinstance(frames, RuleWindow) else RuleWindow(frames)
    out: list[Candidate] = []
    for name, rule in RULES.items():
        out.extend(carried[name] if carried is not None and name in carried else rule(inv, window))
    return sort_findings(out)


def sort_findings(items: list[Any]) -> list[Any]:
    return sorted(items, key=lambda c: (c.id != "bottleneck", SEVERITY_RANK.get(c.severity, 9), c.id))


def worse(a: str, b: str) -> str:
    """The worse of two severities ('' counts as none)."""
    if not a:
        return b
    if not b:
        return a
    return a if SEVERITY_RANK.get(a, 9) <= SEVERITY_RANK.get(b, 9) else b


FINDING_EVENTS = ("finding_raised", "finding_changed", "finding_cleared")


class FindingsEngine:
    """Holds the window of recent frames and the life cycle of every finding.

    Events (``Event.data``), all with ``id``, ``rule``, ``severity``, ``subject``, ``variant`` (the
    wording class) and ``started_s`` (seconds from the condition's start to the event: the condition
    began at ``t - started_s``, hold_s before the raise). Times travel as offsets from the event's own
    ``t`` because the codec keeps only whole seconds of large floats in ``data``:

    * ``finding_raised``: ``since_s`` (the current severity and wording began at ``t - since_s``), ``evidence``.
    * ``finding_changed``: severity or wording class changed (``since_s`` = 0): ``old_severity``,
      ``old_variant``, ``worst``; for the bottleneck also ``cause`` / ``old_cause``.
    * ``finding_cleared``: ``ended_s`` (the condition ended at ``t - ended_s``; the clear comes hold_s
      later), ``held_s`` = its end − its start, ``worst``.

    Finding events found in the frames fed in (a replay, a remote agent) are hints: a finding this
    engine starts afresh takes its ``started_at`` / ``since`` from them, so a window rebuilt after a
    seek keeps the times the original engine showed (:meth:`prime` feeds the events before the window).
    """

    def __init__(self, inv: Inventory, hold_s: float = 5.0, window_s: float = 10.0):
        self.inv = inv
        self.hold_s = hold_s
        self.window_s = window_s
        self.frames: deque[Frame] = deque()
        self._counter_frames: deque[Frame] = deque()  # COUNTER_WINDOW_S of frames: the counters' baseline
        self._state: dict[str, Finding] = {}
        self._hints: dict[str, dict[str, Any]] = {}
        self.cleared: deque[Finding] = deque(maxlen=200)
        self.probe: Any = None  # the newest link probe's JSON seen in the frames (what the link-cost rule uses)
        self._group_rules: tuple[float, Any, Any, dict[str, list[Candidate]]] | None = None  # (t, groups, probe, out)

    def prime(self, events: Any) -> None:
        """Take the condition-start times of findings open in ``events`` (time order), e.g. a recording's
        events before a rebuilt window; later findings of the same id started afresh reuse them."""
        events = list(events)
        for e in events:
            self._hint(e)
        self.note(events)

    def _hint(self, e: Event) -> None:
        if e.kind not in FINDING_EVENTS or not isinstance(e.data, dict) or not e.data.get("id"):
            return
        fid = str(e.data["id"])
        if e.kind == "finding_cleared":
            self._hints.pop(fid, None)
            return
        started = e.t - _num(e.data.get("started_s"), 0.0)
        old = self._hints.get(fid)
        if e.kind == "finding_changed" and old is not None:
            started = min(started, old["started_at"])
        self._hints[fid] = {"started_at": started, "since": e.t - _num(e.data.get("since_s"), 0.0),
                            "severity": e.data.get("severity"), "variant": e.data.get("variant", "")}

    def note(self, events: Sequence[Event]) -> None:
        """Events queued to travel with the next frame (a link probe run from the TUI): the newest probe is the one
        the link-cost rule reads from this tick on."""
        for e in events:
            if e.kind == PROBE_EVENT:
                self.probe = e.data

    def update(self, frame: Frame) -> list[Event]:
        """Feed one frame; returns the finding_raised / finding_changed / finding_cleared events it caused."""
        self._advance(frame)
        now = frame.t
        events: list[Event] = []
        seen = set()
        window = RuleWindow(self.frames, self._counter_frames[0], self.probe)
        for c in evaluate(self.inv, window, self._carried(window)):
            seen.add(c.id)
            self._state[c.id] = self._track(c, now, events)
        self._expire(seen, now, events)
        return events

    def _carried(self, window: RuleWindow) -> dict[str, list[Candidate]] | None:
        """The group rules' candidates to carry this tick (None: run them now, and keep what they say)."""
        frame = window[-1]
        last = self._group_rules
        urgent = any(e.kind == "xid" for e in frame.events) or any(r.lost for r in frame.gpus)
        if last is not None and not urgent and last[1] == frame.groups and last[2] is self.probe and \
                0 <= frame.t - last[0] < GROUP_RULES_EVERY_S:
            return last[3]
        out = {name: RULES[name](self.inv, window) for name in GROUP_RULES}
        self._group_rules = (frame.t, frame.groups, self.probe, out)
        return out

    def _advance(self, frame: Frame) -> None:
        """Take ``frame`` into the windows (the rules' and the counters' longer one), starting over when time
        went backwards; note its finding events as hints."""
        if self.frames and frame.t < self.frames[-1].t:
            self.frames.clear()  # time went backwards (seek): start over
            self.probe = None
            self._group_rules = None
            self._counter_frames.clear()
        for e in frame.events:
            self._hint(e)
        self.note(frame.events)
        self.frames.append(frame)
        while self.frames and self.frames[0].t < frame.t - self.window_s:
            self.frames.popleft()
        self._counter_frames.append(frame)
        while self._counter_frames and self._counter_frames[0].t < frame.t - max(COUNTER_WINDOW_S, self.window_s):
            self._counter_frames.popleft()

    def _track(self, c: Candidate, now: float, events: list[Event]) -> Finding:
        """The finding for candidate ``c`` at ``now``: a new one (its start from a hint where there is one), or
        the one held, updated (a finding_changed event when its severity or wording changed after its raise);
        raised once it has held ``hold_s`` (a lost GPU at once)."""
        f = self._state.get(c.id)
        if f is None:
            f = self._new_finding(c, now)
        elif _unchanged(f, c):
            pass  # held as it was (most ticks of a steady finding): nothing to copy
        else:
            changed = (f.severity, f.variant) != (c.severity, c.variant)
            old = f
            f = replace(f, severity=c.severity, message=c.message, evidence=c.evidence, variant=c.variant,
                        basis=c.basis, ended_at=None, worst=worse(f.worst, c.severity),
                        since=now if changed else f.since)
            if changed and f.raised_at is not None:
                data = {**self._data(f, now), "old_severity": old.severity, "old_variant": old.variant,
                        "since_s": 0.0, "worst": f.worst, "evidence": _clean(f.evidence)}
                if f.id == "bottleneck":
                    data.update(cause=f.variant, old_cause=old.variant)
                events.append(Event(t=now, kind="finding_changed", text=f.message, data=data))
        if f.raised_at is None and (now - f.started_at >= self.hold_s or c.rule == "gpu_lost"):
            f = replace(f, raised_at=now)
            events.append(Event(t=now, kind="finding_raised", text=f.message,
                                data={**self._data(f, now), "since_s": round(now - (f.since or now), 3),
                                      "evidence": _clean(f.evidence)}))
        return f

    def _new_finding(self, c: Candidate, now: float) -> Finding:
        """A finding first seen at ``now``, started (and its wording since) where a hint says it was."""
        start = since = now
        h = self._hints.get(c.id)
        if h is not None and h["started_at"] <= now:
            start = h["started_at"]
            same = (h["severity"], h["variant"]) == (c.severity, c.variant)
            since = h["since"] if same and start <= h["since"] <= now else now
        return Finding(c.id, c.rule, c.severity, c.subject, c.message, c.evidence, started_at=start,
                       variant=c.variant, basis=c.basis, since=since, worst=c.severity)

    def _expire(self, seen: set[str], now: float, events: list[Event]) -> None:
        """Findings not ``seen`` this time: a pending one goes; a raised one ends, and clears (a
        finding_cleared event) once it has stayed absent ``hold_s``."""
        for fid in list(self._state):
            if fid in seen:
                continue
            f = self._state[fid]
            if f.raised_at is None:
                del self._state[fid]
                continue
            if f.ended_at is None:
                f = self._state[fid] = replace(f, ended_at=now)
            assert f.ended_at is not None  # set just above when it was not
            if now - f.ended_at >= self.hold_s:
                done = replace(f, cleared_at=now)
                self.cleared.append(done)
                del self._state[fid]
                events.append(Event(t=now, kind="finding_cleared", text=f.message,
                                    data={**self._data(f, now), "ended_s": round(now - f.ended_at, 3),
                                          "worst": f.worst, "held_s": round(f.ended_at - f.started_at, 3)}))

    def open_events(self, now: float, skip: set[str] | frozenset[str] = frozenset()) -> list[Event]:
        """A ``finding_raised`` event at ``now`` for every raised finding (ids in ``skip`` left out), with
        its true condition start and "since": what a recording started mid-session (``r`` in the TUI)
        writes first, so the file knows what was already wrong when it began."""
        return [Event(t=now, kind="finding_raised", text=f.message,
                      data={**self._data(f, now), "since_s": round(now - (f.since or now), 3),
                            "evidence": _clean(f.evidence)})
                for f in self.active if f.id not in skip]

    @staticmethod
    def _data(f: Finding, now: float) -> dict[str, Any]:
        return {"id": f.id, "rule": f.rule, "severity": f.severity, "subject": f.subject,
                "started_s": round(now - f.started_at, 3), "variant": f.variant}

    @property
    def active(self) -> list[Finding]:
        """Raised findings, severity first (the bottleneck summary leads); clearing ones (``ended_at``
        set: the condition ended, the hold has not) are included."""
        return sort_findings([f for f in self._state.values() if f.raised_at is not None])


def _unchanged(f: Finding, c: Candidate) -> bool:
    """Whether tracking candidate ``c`` would leave finding ``f`` as it is: the same wording, figures and
    severity, the condition not ended, its worst severity already counted."""
    return (f.ended_at is None and f.message == c.message and f.severity == c.severity and f.variant == c.variant
            and f.basis == c.basis and f.evidence == c.evidence and worse(f.worst, c.severity) == f.worst)


def _num(v: Any, default: float) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else default


def _short_span(seconds: float) -> str:
    """``<1m``, ``4m``, ``2h05m``: a length to the minute (the text changes once a minute)."""
    mins = int(max(0.0, seconds) // 60)
    if mins < 1:
        return "<1m"
    h, m = divmod(mins, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m"


def finding_line(f: Finding, now: float) -> tuple[str, str]:
    """The text shown after a finding's mark, and its state: ``active`` or ``clearing``.

    Active: the message, then what its numbers are and since when: ``5 s average, since 20:19:02 (4m)``
    for averaged evidence, ``since …`` for live readings and static facts. ``since`` is when the current
    severity and wording began (the condition's start, not the raise). Clearing (the condition ended,
    the clearing hold has not passed): ``ended 3s ago:`` first, so the numbers read as the last ones
    seen, not as now. Times are local.
    """
    if f.ended_at is not None:
        ago = max(0, int(now - f.ended_at))
        return f"ended {ago}s ago: {f.message}", "clearing"
    since = f.since if f.since is not None else f.started_at
    when = f"since {time.strftime('%H:%M:%S', time.localtime(since))} ({_short_span(now - since)})"
    if f.basis == "avg":
        when = f"{AVG_S:.0f} s average, {when}"
    return f"{f.message}  · {when}", "active"


def _clean(d: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for k, v in d.items():
        if isinstance(v, float):
            out[k] = round(v, 3) if math.isfinite(v) else None
        else:
            out[k] = v
    return out
