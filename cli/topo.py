"""``gpuscope topo``: the annotated topology, as text (coloured on a terminal) or JSON."""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from gpuscope.core.candidate import Candidate
from gpuscope.core.findings import evaluate
from gpuscope.core.health import mig_words
from gpuscope.core.model import Frame, Inventory
from gpuscope.core.topology import (
    PATH_MEANING,
    best_link,
    device_nvlink_capacity_bytes_per_s,
    link_row,
    matrix,
    pair_bandwidth_bytes_per_s,
    pcie_capacity_bytes_per_s,
)
from gpuscope.core.validate import dumps_out
from gpuscope.core.vocab import (
    LINK_LEVEL,
    SEV_LEVEL,
    SEV_MARK,
    link_label,
    link_state,
    path_level,
    reading_busy,
)

TOPO_SCHEMA = "gpuscope.topo/1"

_COLORS = {"red": "\x1b[31m", "amber": "\x1b[33m", "green": "\x1b[32m", "dim": "\x1b[2m", "bold": "\x1b[1m",
           "reset": "\x1b[0m"}


# The ANSI colour of each semantic level of core/vocab.py (the TUI maps the same levels in widgets/style.py).
LEVEL_COLOR: dict[str, str | None] = {"bad": "red", "warn": "amber", "ok": "green", "dim": "dim", "plain": None}


def label_color(label: str) -> str | None:
    """SYS red, PHB/NODE amber, NV# green, X dim (the TUI's scheme: :func:`gpuscope.core.vocab.path_level`)."""
    return LEVEL_COLOR[path_level(label)]


def read_topology(src: Any, settle_s: float = 0.5) -> tuple[Inventory, list[Frame]]:
    """Two samples ``settle_s`` apart (GPM rates need an interval)."""
    frames = [src.sample()]
    clock: Any = getattr(src.nvml, "clock", None)  # a simulated source's VirtualClock, else None
    if hasattr(clock, "now"):
        clock.now += 1.0
    else:
        time.sleep(settle_s)
    frames.append(src.sample())
    return src.inventory, frames


def topo_json(inv: Inventory, frame: Frame, findings: list[Candidate]) -> dict[str, Any]:
    gpus = []
    for d in inv.devices:
        r = frame.gpus[d.index] if d.index < len(frame.gpus) else None
        row = link_row(d, r.pcie_gen if r else None, r.pcie_width if r else None)
        busy = r is not None and not r.lost and reading_busy(r, row.capacity_current_bytes_per_s)
        can_gen, can_width = best_link(d)
        gpus.append({
            "index": d.index, "name": d.name, "bus_id": d.bus_id, "uuid": d.uuid,
            "numa_node": d.numa_node, "cpu_affinity": d.cpu_affinity, "lost": bool(r and r.lost),
            "nvlinks_active": d.nvlinks_active, "nvlink_version": d.nvlink_version,
            "mig_instances": d.mig_instances,
            "nvlink_gb_per_s": _gbs(device_nvlink_capacity_bytes_per_s(d)),
            "pcie": {
                "gen_current": row.gen_current, "width_current": row.width_current,
                "gen_gpu_max": row.gen_gpu_max, "gen_sys_max": row.gen_sys_max,
                "width_max": d.pcie_width_sys_max, "below_max": row.below_max,
                "state": link_state(row.gen_current, row.width_current, *best_link(row), busy),
                "capacity_current_gb_per_s": _gbs(row.capacity_current_bytes_per_s),
                "capacity_max_gb_per_s": _gbs(row.capacity_max_bytes_per_s),
                "gen_can": can_gen, "width_can": can_width,
                "capacity_can_gb_per_s": _gbs(pcie_capacity_bytes_per_s(can_gen, can_width)),
            },
        })
    current = {r.index: (r.pcie_gen, r.pcie_width) for r in frame.gpus if r.pcie_gen and r.pcie_width}
    return {
        "schema": TOPO_SCHEMA,
        "host": inv.host,
        "driver_version": inv.driver_version,
        "simulated": inv.simulated,
        "scenario": inv.scenario,
        "gpus": gpus,
        "matrix": matrix(inv),
        "pairs": [{"a": p.a, "b": p.b, "label": p.label, "pcie_path": p.pcie_path, "nvlinks": p.nvlinks,
                   "via_nvswitch": p.via_nvswitch,
                   "now_gb_per_s": _gbs(pair_bandwidth_bytes_per_s(inv, p, current)),
                   "can_gb_per_s": _gbs(pair_bandwidth_bytes_per_s(inv, p)),
                   "expected_gb_per_s": _gbs(pair_bandwidth_bytes_per_s(inv, p, current))} for p in inv.pairs],
        "findings": [{"id": c.id, "rule": c.rule, "severity": c.severity, "subject": c.subject,
                      "message": c.message} for c in findings],
    }


def _gbs(x: float | None) -> float | None:
    return round(x / 1e9, 2) if x is not None else None


def render_text(doc: dict[str, Any], color: bool) -> str:
    def c(text: str, name: str | None) -> str:
        return f"{_COLORS[name]}{text}{_COLORS['reset']}" if color and name else text

    lines = []
    sim = f"  {c('SIMULATED', 'amber')} scenario {doc['scenario']}" if doc["simulated"] else ""
    lines.append(c(f"gpuscope topo — {doc['host']}", "bold") + f"  driver {doc['driver_version'] or '?'}{sim}")
    lines.append("")
    n = len(doc["gpus"])
    head = "      " + "".join(f"{'GPU' + str(j):>6}" for j in range(n)) + "  CPU affinity      NUMA"
    lines.append(c(head, "bold"))
    for i, g in enumerate(doc["gpus"]):
        cells = []
        for j in range(n):
            lab = doc["matrix"][i][j]
            cells.append(c(f"{lab:>6}", label_color(lab)))
        numa = "-" if g["numa_node"] is None else str(g["numa_node"])
        lines.append(f"{'GPU' + str(i):<6}" + "".join(cells) + f"  {(g['cpu_affinity'] or '-'):<17} {numa}")
    for g in doc["gpus"]:
        if g.get("mig_instances") is not None:
            lines.append(c(f"GPU{g['index']} {mig_words(g['mig_instances'])}", "bold"))
    lines.append("")
    lines.append(c(f"{'PCIe link':<28}{'now':<11}{'can reach':<11}{'GPU max':<9}{'slot max':<10}"
                   "now / can reach", "bold"))
    for g in doc["gpus"]:
        p = g["pcie"]
        name = f"GPU{g['index']} {g['name'].replace('NVIDIA ', '')}"[:27]
        if g["lost"]:
            lines.append(f"{name:<28}" + c("lost", "red"))
            continue
        now = link_label(p["gen_current"], p["width_current"])
        can = link_label(p["gen_can"], p["width_can"])
        state = p["state"]
        now_s = c(f"{now:<11}", LEVEL_COLOR[LINK_LEVEL[state]] if state != "at_max" else None)
        lines.append(f"{name:<28}{now_s}{can:<11}{'Gen' + str(p['gen_gpu_max'] or '?'):<9}"
                     f"{link_label(p['gen_sys_max'], p['width_max']):<10}"
                     f"{_fmt(p['capacity_current_gb_per_s'])} / {_fmt(p['capacity_can_gb_per_s'])} GB/s")
    if doc["pairs"]:
        lines.append("")
        lines.append(c(f"{'pair':<14}{'path':<7}per direction now / can reach", "bold"))
        for p in doc["pairs"]:
            lab = p["label"]
            what = f"{p['nvlinks']} NVLinks" + (" via NVSwitch" if p["via_nvswitch"] else "") if p["nvlinks"] \
                else PATH_MEANING.get(p["pcie_path"], "")
            rate = f"{_fmt(p['now_gb_per_s'])} / {_fmt(p['can_gb_per_s'])} GB/s"
            lines.append(f"{'GPU' + str(p['a']) + '↔GPU' + str(p['b']):<14}{c(f'{lab:<7}', label_color(lab))}"
                         f"{rate:<19}{c(what, 'dim')}")
    lines.append("")
    if doc["findings"]:
        lines.append(c("Findings", "bold"))
        for f in doc["findings"]:
            sev = f["severity"]
            col = LEVEL_COLOR[SEV_LEVEL[sev]]
            lines.append(f"  {c(SEV_MARK[sev] + ' ' + sev, col):<10} {f['message']}")
    else:
        lines.append(c("Findings: none", "green"))
    lines.append("")
    lines.append(c("Legend: X self · NV# NVLinks · PIX one PCIe bridge · PXB several bridges · PHB host bridge · "
                   "NODE within a NUMA node · SYS across NUMA nodes", "dim"))
    return "\n".join(lines)


def _fmt(x: float | None) -> str:
    return "?" if x is None else f"{x:.1f}"


def run_topo(src: Any, as_json: bool) -> int:
    inv, frames = read_topology(src)
    findings = [c for c in evaluate(inv, frames) if c.rule != "bottleneck"]
    doc = topo_json(inv, frames[-1], findings)
    if as_json:
        print(dumps_out(doc, indent=2))
    else:
        color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
        print(render_text(doc, color))
    return 0
