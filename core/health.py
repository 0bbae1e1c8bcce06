"""GPU health: NVIDIA's Xid catalogue for the common codes and the health rules (Xid errors, ECC, row
remapping) that the findings engine runs beside its own (``core/findings.py`` registers :data:`HEALTH_RULES`).

Pure and table-driven: each rule is ``rule(inv, frames) -> list[Candidate]`` over the engine's window
(the last frame is "now"), like the rules in :mod:`gpuscope.core.findings`. The readings they use:

* ``GpuReading.xids``: the source's running tally of critical Xid errors per GPU and code (count and
  last time), so one Xid that repeats is one finding with its count, never a flood;
* ``ecc_uncorrected_volatile`` (else ``..._aggregate``): uncorrectable ECC errors, compared with the
  window's counter baseline (they are read on the slow path and carried between reads);
* ``remap_pending`` / ``remap_failure`` / ``remapped_rows_*``: NVML's row remapper.

Words follow NVIDIA's Xid catalogue (docs.nvidia.com/deploy/xid-errors) and its GPU memory error
management guide; the action is what an operator of an inference server does next. NVML's event gives the code
alone: the subcodes of Xid 74 and 144-150 (which link, which NVLink unit, fatal or not) are only in the kernel log,
so the table speaks of the code and its action says where to read the rest.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gpuscope.core.candidate import Candidate
from gpuscope.core.model import DeviceInfo, Frame, GpuReading, Inventory, XidCount
from gpuscope.core.text import count


@dataclass(frozen=True, slots=True)
class XidInfo:
    """What one Xid code means and what to do about it."""

    meaning: str
    action: str
    severity: str  # critical, warning or info (core/vocab.py SEVERITIES)
    link: str = ""  # the link it speaks of: "nvlink" (NVLink and fabric), "pcie" (the bus), "" (none)


# Xid 144-150 (NVLink 5, Blackwell: NVIDIA's catalogue lists them for B100 and GB200, not A100/H100; driver R565+,
# mnemonics NVLINK_SAW_ERROR ... NVLINK_MSE_ERROR): each names the NVLink unit that failed and is sent to NVIDIA's
# NVLink 5 workflow. Whether one is fatal depends on a subcode (the unit's sub-block: RLW_REMAP, RLW_SRC_TRACK,
# TLW_RX, ...) and an error-status word that only the kernel log carries, never NVML's event. So gpuscope treats
# every one as critical; the action says where the deciding words are. What each unit does is not written here:
# NVIDIA's catalogue does not say, and gpuscope does not guess.
_NVLINK5_ACTION = ("fatal or not by its subcode: read the full Xid line in `dmesg` and the Xid 154 beside it (the "
                   "recovery action: drain, GPU reset or node reboot); stop the workload on this GPU's NVLink peers, "
                   "whose collectives can hang until the reset")


# NVIDIA's Xid catalogue, the codes an inference server meets most.
XID_CATALOGUE: dict[int, XidInfo] = {
    13: XidInfo("graphics engine exception (usually the application: an illegal address or out-of-range access)",
                "check the application; if several applications hit it, run the GPU diagnostics", "warning"),
    31: XidInfo("GPU memory page fault (usually the application: an illegal memory access)",
                "check the application; if several applications hit it, suspect the driver or the GPU", "warning"),
    43: XidInfo("GPU stopped processing (an application hit a fault and was stopped)",
                "the GPU itself is fine: restart the application", "warning"),
    45: XidInfo("preemptive cleanup after earlier errors (a process was stopped)",
                "it follows another fault: look at the Xid before it", "info"),
    48: XidInfo("double-bit ECC error (uncorrectable memory error)",
                "reset the GPU; if it recurs, the GPU should be replaced", "critical"),
    61: XidInfo("internal micro-controller breakpoint or warning",
                "reset the GPU when it is idle; update the driver if it recurs", "warning"),
    62: XidInfo("internal micro-controller halted",
                "reset the GPU; if it recurs, update the driver or replace the GPU", "critical"),
    63: XidInfo("ECC page retirement or row remap recorded",
                "reset the GPU when it is idle to apply the remap", "warning"),
    64: XidInfo("ECC page retirement or row remap could not be recorded",
                "reset the GPU; if it recurs, the GPU should be replaced", "critical"),
    68: XidInfo("video decoder (NVDEC) exception",
                "check the application using the video decoder; update the driver if it recurs", "warning"),
    74: XidInfo("NVLink error",
                "its line in `dmesg` names the link and the error bits; check the NVLink connections and NVSwitches; "
                "reset the GPU; if it recurs, have the board checked",
                "critical", "nvlink"),
    79: XidInfo("fell off the bus", "check power and seating; the node needs a reset", "critical", "pcie"),
    92: XidInfo("high single-bit ECC error rate",
                "watch the ECC counts and remapped rows; have the GPU checked if they keep rising", "warning"),
    94: XidInfo("contained ECC error (uncorrectable; only the application that used the memory was stopped)",
                "restart that application; reset the GPU when it is idle to remap the row", "warning"),
    95: XidInfo("uncontained ECC error (uncorrectable; every application on the GPU is affected)",
                "reset the GPU now; if it recurs, the GPU should be replaced", "critical"),
    119: XidInfo("GSP timeout (the GPU's system processor stopped answering)",
                 "reset the GPU; update the driver if it recurs", "critical"),
    120: XidInfo("GSP error (the GPU's system processor hit an error)",
                 "reset the GPU; update the driver if it recurs", "critical"),
    144: XidInfo("NVLink 5 error in the SAW unit", _NVLINK5_ACTION, "critical", "nvlink"),
    145: XidInfo("NVLink 5 error in the RLW unit", _NVLINK5_ACTION, "critical", "nvlink"),
    146: XidInfo("NVLink 5 error in the TLW unit", _NVLINK5_ACTION, "critical", "nvlink"),
    147: XidInfo("NVLink 5 error in the TREX unit", _NVLINK5_ACTION, "critical", "nvlink"),
    148: XidInfo("NVLink 5 error in the NVLPW_CTRL unit", _NVLINK5_ACTION, "critical", "nvlink"),
    149: XidInfo("NVLink 5 error in the NETIR unit", _NVLINK5_ACTION, "critical", "nvlink"),
    150: XidInfo("NVLink 5 error in the MSE unit", _NVLINK5_ACTION, "critical", "nvlink"),
}

# The Xids that speak of a link (:attr:`XidInfo.link`): what a serving group's link verdict reads (core/link_verdict.py).
LINK_XIDS: dict[int, str] = {code: info.link for code, info in XID_CATALOGUE.items() if info.link}


def xid_info(xid: int) -> XidInfo:
    """The catalogue entry of ``xid``, or a generic one pointing at NVIDIA's catalogue."""
    return XID_CATALOGUE.get(xid) or XidInfo("not in gpuscope's table",
                                             "look it up in NVIDIA's Xid catalogue and `dmesg`", "warning")


def xid_text(gpu: int, xid: int) -> str:
    """One line for an Xid event: ``GPU1 Xid 79: fell off the bus``."""
    return f"GPU{gpu} Xid {xid}: {xid_info(xid).meaning}"


def tally_xid(tally: dict[int, XidCount], xid: int, t: float) -> None:
    """Count one Xid ``xid`` seen at ``t`` into one GPU's ``tally`` (code → :class:`XidCount`)."""
    old = tally.get(xid)
    tally[xid] = XidCount(xid=xid, count=(old.count + 1) if old else 1, last_t=max(t, old.last_t) if old else t)


def mig_text(dev: DeviceInfo) -> str | None:
    """``MIG: 3 instances`` for a GPU in MIG mode (``MIG: no instances`` when none is created yet), else None."""
    return None if dev.mig_instances is None else mig_words(dev.mig_instances)


def mig_words(n: int) -> str:
    """``MIG: 3 instances``, ``MIG: 1 instance``, ``MIG: no instances``."""
    return f"MIG: {count(n, 'instance')}" if n else "MIG: no instances"


def _clock(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t))


def rule_xid(inv: Inventory, frames: Sequence[Frame]) -> list[Candidate]:
    """Critical Xid errors: one finding per GPU and code, with its meaning, what to do, count and last time."""
    out: list[Candidate] = []
    if not frames:
        return out
    for r in frames[-1].gpus:
        for x in r.xids or ():
            info = xid_info(x.xid)
            times = f"{x.count}×, last at {_clock(x.last_t)}" if x.count > 1 else f"at {_clock(x.last_t)}"
            out.append(Candidate(f"xid:gpu{r.index}:{x.xid}", "xid", info.severity, f"GPU{r.index}",
                                 f"GPU{r.index} Xid {x.xid}: {info.meaning} — {info.action} ({times})",
                                 {"gpu": r.index, "xid": x.xid, "count": x.count, "last_t": x.last_t},
                                 basis="static"))
    return out


def _uncorrected(r0: GpuReading, r: GpuReading) -> tuple[int | None, int | None]:
    """The uncorrectable counts of two readings, of one kind: volatile where both have it, else aggregate."""
    if r0.ecc_uncorrected_volatile is not None and r.ecc_uncorrected_volatile is not None:
        return r0.ecc_uncorrected_volatile, r.ecc_uncorrected_volatile
    return r0.ecc_uncorrected_aggregate, r.ecc_uncorrected_aggregate


def counter_span(frames: Sequence[Frame]) -> tuple[Frame, Frame, float] | None:
    """The ends of the counter window of a rule over counters (PCIe errors, ECC): the window's counter base
    (the engine keeps one older frame for counters) or its first frame, its last frame, and the seconds
    between; None when there are fewer than two frames or no time between them."""
    if len(frames) < 2:
        return None
    first, last = getattr(frames, "counter_base", None) or frames[0], frames[-1]
    dt = last.t - first.t
    return (first, last, dt) if dt > 0 else None


def rule_ecc_uncorrectable(inv: Inventory, frames: Sequence[Frame]) -> list[Candidate]:
    """Uncorrectable ECC errors rising over the counter window (the counts are read every 15 s)."""
    out: list[Candidate] = []
    span = counter_span(frames)
    if span is None:
        return out
    first, last, dt = span
    before = {r.index: r for r in first.gpus if not r.lost}
    for r in last.gpus:
        r0 = before.get(r.index)
        if r.lost or r0 is None:
            continue
        a, b = _uncorrected(r0, r)
        if a is None or b is None or b <= a:
            continue
        agg = f", {r.ecc_uncorrected_aggregate} over the GPU's life" if r.ecc_uncorrected_aggregate is not None else ""
        out.append(Candidate(f"ecc-uncorrectable:gpu{r.index}", "ecc_uncorrectable", "critical", f"GPU{r.index}",
                             f"GPU{r.index} uncorrectable ECC errors rising: +{b - a} in {dt:.0f} s ({b} now{agg}) — "
                             f"reset the GPU when it is idle; if they recur, the GPU should be replaced",
                             {"gpu": r.index, "window_s": dt, "rise": b - a, "ecc_uncorrected": b,
                              "ecc_uncorrected_aggregate": r.ecc_uncorrected_aggregate}, basis="window"))
    return out


def _rows(r: GpuReading) -> str:
    parts = [f"{n} for {what} errors" for n, what in ((r.remapped_rows_uncorrectable, "uncorrectable"),
                                                      (r.remapped_rows_correctable, "correctable")) if n]
    return f" ({' and '.join(parts)} remapped)" if parts else ""


def rule_row_remap(inv: Inventory, frames: Sequence[Frame]) -> list[Candidate]:
    """Row remapping: a remap that failed (replace the GPU) or one pending until the GPU is reset."""
    out: list[Candidate] = []
    if not frames:
        return out
    for r in frames[-1].gpus:
        if r.lost:
            continue
        ev = {"gpu": r.index, "remapped_rows_uncorrectable": r.remapped_rows_uncorrectable,
              "remapped_rows_correctable": r.remapped_rows_correctable}
        if r.remap_failure:
            out.append(Candidate(f"row-remap-failure:gpu{r.index}", "row_remap", "critical", f"GPU{r.index}",
                                 f"GPU{r.index} row remapping failed{_rows(r)}: the memory has no spare rows left — "
                                 f"the GPU should be replaced", ev, variant="failure", basis="live"))
        elif r.remap_pending:
            out.append(Candidate(f"row-remap-pending:gpu{r.index}", "row_remap", "warning", f"GPU{r.index}",
                                 f"GPU{r.index} row remap pending{_rows(r)}: reset the GPU when it is idle to apply",
                                 ev, variant="pending", basis="live"))
    return out


HEALTH_RULES: dict[str, Callable[[Inventory, Sequence[Frame]], list[Candidate]]] = {
    "xid": rule_xid,
    "ecc_uncorrectable": rule_ecc_uncorrectable,
    "row_remap": rule_row_remap,
}


def gpu_health(r: GpuReading | None, xids: tuple[XidCount, ...] | None = None) -> dict[str, Any]:
    """One GPU's health at the end of a recording, for ``summary``: its Xids (code, count, last time, meaning,
    action), ECC counts and row remapper state from its last reading ``r`` (None where unknown)."""
    keys = ("ecc_corrected_volatile", "ecc_uncorrected_volatile", "ecc_corrected_aggregate",
            "ecc_uncorrected_aggregate", "remapped_rows_correctable", "remapped_rows_uncorrectable",
            "remap_pending", "remap_failure", "mem_reserved_bytes")
    out: dict[str, Any] = {k: getattr(r, k) if r is not None else None for k in keys}
    out["xids"] = [{"xid": x.xid, "count": x.count, "last_t": x.last_t, "meaning": info.meaning,
                    "action": info.action, "severity": info.severity}
                   for x in sorted(xids or (), key=lambda x: x.last_t) for info in (xid_info(x.xid),)]
    return out


def health_lines(h: dict[str, Any]) -> list[str]:
    """``summary``'s words for one GPU's health (:func:`gpu_health`): nothing when all is well or unknown."""
    out = []
    for x in h.get("xids") or ():
        times = f"{x['count']}×, last at {_clock(x['last_t'])}" if x["count"] > 1 else f"at {_clock(x['last_t'])}"
        out.append(f"Xid {x['xid']}: {x['meaning']} — {x['action']} ({times})")
    if h.get("remap_failure"):
        out.append("row remapping failed: the GPU should be replaced")
    elif h.get("remap_pending"):
        out.append("row remap pending: reset the GPU when it is idle to apply")
    ecc = [f"{h[k]} {w}" for k, w in (("ecc_uncorrected_volatile", "uncorrectable"),
                                       ("ecc_corrected_volatile", "correctable")) if h.get(k)]
    rows = [f"{h[k]} {w}" for k, w in (("remapped_rows_uncorrectable", "for uncorrectable errors"),
                                        ("remapped_rows_correctable", "for correctable errors")) if h.get(k)]
    if ecc:
        out.append("ECC errors since the driver loaded: " + ", ".join(ecc))
    if rows:
        out.append("remapped rows: " + ", ".join(rows))
    return out
