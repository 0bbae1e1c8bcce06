"""Topology: the ``nvidia-smi topo -m`` labels, link capacities and the per-GPU link table.

All functions here are pure; the NVML source feeds them raw answers.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuscope.core.model import DeviceInfo, Inventory, PairLink
from gpuscope.core.vocab import link_below_max

# NVML_TOPOLOGY_* levels (nvmlGpuTopologyLevel_t) → nvidia-smi labels.
TOPOLOGY_LEVEL_LABELS: dict[int, str] = {
    0: "PIX",  # INTERNAL: same board (multi-GPU card)
    10: "PIX",  # SINGLE: one PCIe switch
    20: "PXB",  # MULTIPLE: several PCIe switches, no host bridge
    30: "PHB",  # HOSTBRIDGE: through a CPU's PCIe host bridge
    40: "NODE",  # NODE: host bridges within one NUMA node
    50: "SYS",  # SYSTEM: across NUMA nodes (the CPU interconnect: QPI/UPI/Infinity Fabric)
}

# How each PCIe path label reads, worst last.
PATH_RANK = {"PIX": 0, "PXB": 1, "PHB": 2, "NODE": 3, "SYS": 4}  # how close a path is, best first
PATH_MEANING = {
    "PIX": "at most one PCIe bridge",
    "PXB": "several PCIe bridges, no host bridge",
    "PHB": "through a CPU's PCIe host bridge",
    "NODE": "between PCIe host bridges within one NUMA node",
    "SYS": "across NUMA nodes, over the CPU interconnect (QPI/UPI/Infinity Fabric)",
}

# Transfer rate per lane (GT/s) and line-encoding efficiency by PCIe generation.
_PCIE_GT_S = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0, 7: 128.0}
_PCIE_ENCODING = {1: 8 / 10, 2: 8 / 10, 3: 128 / 130, 4: 128 / 130, 5: 128 / 130, 6: 242 / 256, 7: 242 / 256}

# NVLink per-link bandwidth, one direction, bytes/s, by nvmlDeviceGetNvLinkVersion's answer
# (NVML numbers versions 1=1.0, 2=2.0, 3=2.2, 4=3.0, 5=3.1, 6=4.0, 7=5.0). These are the data-centre
# rates; the per-link rate depends on the part too (see :data:`NVLINK_PARTS`).
_NVLINK_LINK_BYTES_PER_S = {1: 20e9, 2: 25e9, 3: 25e9, 4: 25e9, 5: 25e9, 6: 25e9, 7: 50e9}

# Parts whose NVLink runs at another per-link rate than their version's data-centre figure, matched
# as a word in the GPU name (case ignored), one direction, bytes/s. GA102 bridges (RTX A6000, A5000,
# A40, RTX 3090 / 3090 Ti): 4 links, 112.5 GB/s both directions together → 14.0625 GB/s per link and
# direction (``nvidia-smi nvlink -s`` prints 14.062 GB/s).
NVLINK_PARTS: tuple[tuple[str, float], ...] = (
    ("A6000", 14.0625e9),
    ("A5000", 14.0625e9),
    ("A40", 14.0625e9),
    ("3090", 14.0625e9),  # also the 3090 Ti
)
_NVLINK_ARCH_BYTES_PER_S = {"blackwell": 50e9}  # NVLink 5, whatever NVML numbers its version


def topology_label(level: int) -> str:
    """The nvidia-smi label of an NVML common-ancestor level (unknown levels read as SYS)."""
    return TOPOLOGY_LEVEL_LABELS.get(level, "SYS")


def pcie_capacity_bytes_per_s(gen: int | None, width: int | None) -> float | None:
    """Usable bandwidth of a PCIe link, one direction, in bytes/s, after line encoding.

    Gen1 ×16 → 4.0 GB/s, Gen4 ×16 → 31.5 GB/s, Gen5 ×16 → 63.0 GB/s. None when unknown.
    """
    if not gen or not width or gen not in _PCIE_GT_S:
        return None
    return _PCIE_GT_S[gen] * 1e9 * _PCIE_ENCODING[gen] / 8 * width


def nvlink_capacity_bytes_per_s(version: int | None, links: int) -> float | None:
    """Bandwidth of ``links`` NVLinks of an NVML NVLink version, one direction, bytes/s."""
    if not links or version not in _NVLINK_LINK_BYTES_PER_S:
        return None
    return _NVLINK_LINK_BYTES_PER_S[version] * links


def nvlink_link_bytes_per_s(name: str | None, version: int | None, architecture: str | None = None,
                            field_bytes_per_s: float | None = None) -> float | None:
    """One NVLink's bandwidth, one direction, bytes/s.

    In order: NVML's own answer (``NVML_FI_DEV_NVLINK_SPEED_MBPS_*``, given as ``field_bytes_per_s``;
    NOT_SUPPORTED on H200 with driver 580), a known part by name (GA102 bridges 14.0625 GB/s), the
    architecture (Blackwell: NVLink 5, 50 GB/s), the NVLink version's data-centre rate (NVLink 3/4:
    25 GB/s). None when nothing is known.
    """
    if field_bytes_per_s and field_bytes_per_s > 0:
        return float(field_bytes_per_s)
    words = (name or "").upper().replace("NVIDIA", " ").replace("GEFORCE", " ").replace("RTX", " ").split()
    for part, rate in NVLINK_PARTS:
        if part.upper() in words:
            return rate
    if architecture and architecture.lower() in _NVLINK_ARCH_BYTES_PER_S:
        return _NVLINK_ARCH_BYTES_PER_S[architecture.lower()]
    return _NVLINK_LINK_BYTES_PER_S.get(version) if version is not None else None


def device_nvlink_capacity_bytes_per_s(dev: DeviceInfo, links: int | None = None) -> float | None:
    """Bandwidth of ``links`` (default: all active) NVLinks of ``dev``, one direction, bytes/s."""
    n = dev.nvlinks_active if links is None else links
    version = dev.nvlink_version or (6 if n else None)  # links seen but no version: assume NVLink 4.0's rate
    rate = nvlink_link_bytes_per_s(dev.name, version, dev.architecture, dev.nvlink_link_bytes_per_s)
    return rate * n if rate and n else None


def nvlink_count(
    own_remote_bus_ids: list[tuple[str, int]], peer_bus_id: str, own_switch_links: int, peer_switch_links: int
) -> tuple[int, bool]:
    """NVLinks that reach a peer: direct links to its bus id plus links through NVSwitches.

    ``own_remote_bus_ids`` lists (remote bus id, remote device type) of this GPU's active links;
    through an NVSwitch every GPU reaches every other, so the pair gets the smaller switch count.
    Returns (count, via_nvswitch).
    """
    peer = normalize_bus_id(peer_bus_id)
    direct = sum(1 for bus, _kind in own_remote_bus_ids if normalize_bus_id(bus) == peer)
    via_switch = min(own_switch_links, peer_switch_links)
    return direct + via_switch, via_switch > 0


def normalize_bus_id(bus_id: str) -> str:
    """``0000:18:00.0`` and ``00000000:18:00.0`` compare equal; case is ignored."""
    s = bus_id.strip().lower()
    if s.count(":") == 2:
        dom, rest = s.split(":", 1)
        s = f"{int(dom, 16):08x}:{rest}"
    return s


def cpu_list(masks: list[int]) -> str:
    """Turn NVML's CPU-affinity words (64 CPUs each, lowest first) into ``0-31,64-95``."""
    cpus = [w * 64 + b for w, m in enumerate(masks) for b in range(64) if m >> b & 1]
    return compress_ranges(cpus)


def compress_ranges(nums: list[int]) -> str:
    if not nums:
        return ""
    nums = sorted(set(nums))
    out = []
    start = prev = nums[0]
    for n in nums[1:]:
        if n == prev + 1:
            prev = n
            continue
        out.append(f"{start}-{prev}" if prev > start else str(start))
        start = prev = n
    out.append(f"{start}-{prev}" if prev > start else str(start))
    return ",".join(out)


def matrix(inv: Inventory) -> list[list[str]]:
    """The square ``topo -m`` matrix of labels (``X`` on the diagonal)."""
    n = len(inv.devices)
    m = [["X" if i == j else "?" for j in range(n)] for i in range(n)]
    idx = {d.index: k for k, d in enumerate(inv.devices)}
    for p in inv.pairs:
        if p.a in idx and p.b in idx:
            m[idx[p.a]][idx[p.b]] = m[idx[p.b]][idx[p.a]] = p.label
    return m


@dataclass(frozen=True, slots=True)
class LinkRow:
    """One GPU's PCIe link: generation and width now, GPU max and system max, capacity."""

    index: int
    gen_current: int | None
    width_current: int | None
    gen_gpu_max: int | None
    width_gpu_max: int | None
    gen_sys_max: int | None
    width_sys_max: int | None
    capacity_current_bytes_per_s: float | None
    capacity_max_bytes_per_s: float | None

    @property
    def below_max(self) -> bool:
        return link_below_max(self.gen_current, self.width_current, *best_link(self))


def best_link(row: LinkRow | DeviceInfo) -> tuple[int | None, int | None]:
    """The best generation and width this GPU can reach in this slot (min of GPU and system max)."""
    if isinstance(row, LinkRow):
        g = (row.gen_gpu_max, row.gen_sys_max)
        w = (row.width_gpu_max, row.width_sys_max)
    else:
        g = (row.pcie_gen_gpu_max, row.pcie_gen_sys_max)
        w = (row.pcie_width_gpu_max, row.pcie_width_sys_max)
    gens = [x for x in g if x]
    widths = [x for x in w if x]
    return (min(gens) if gens else None, min(widths) if widths else None)


def link_row(dev: DeviceInfo, gen_current: int | None, width_current: int | None) -> LinkRow:
    gpu_gen = dev.pcie_gen_gpu_max or dev.pcie_gen_sys_max
    gpu_width = dev.pcie_width_gpu_max or dev.pcie_width_sys_max
    return LinkRow(
        index=dev.index,
        gen_current=gen_current,
        width_current=width_current,
        gen_gpu_max=dev.pcie_gen_gpu_max,
        width_gpu_max=dev.pcie_width_gpu_max,
        gen_sys_max=dev.pcie_gen_sys_max,
        width_sys_max=dev.pcie_width_sys_max,
        capacity_current_bytes_per_s=pcie_capacity_bytes_per_s(gen_current, width_current),
        capacity_max_bytes_per_s=pcie_capacity_bytes_per_s(gpu_gen, gpu_width),
    )


def pair_bandwidth_bytes_per_s(inv: Inventory, pair: PairLink, current: dict[int, tuple[int, int]] | None = None
                               ) -> float | None:
    """What a pair can expect between them, one direction: NVLink if present, else the slower PCIe link.

    ``current`` maps a GPU index to its link's (generation, width) now; without it, the best link.

    A SYS path also crosses the CPU interconnect, which in practice delivers well under the PCIe
    link rate for peer traffic; the figure returned is the PCIe ceiling (an upper bound).
    """
    da = next((d for d in inv.devices if d.index == pair.a), None)
    db = next((d for d in inv.devices if d.index == pair.b), None)
    if da is None or db is None:
        return None
    if pair.nvlinks:
        return device_nvlink_capacity_bytes_per_s(da, pair.nvlinks)
    caps = []
    for d in (da, db):
        g, w = (current or {}).get(d.index) or best_link(d)
        c = pcie_capacity_bytes_per_s(g, w)
        if c:
            caps.append(c)
    return min(caps) if caps else None


# ------------------------------------------------------------------ what healthy links typically deliver
# Share of the ceiling a healthy link typically gives one way (core/probe.py's docstring gives the sources:
# bandwidthTest / nvbandwidth copy-engine figures; NVLink 4: ~370 of 450 GB/s on H100).
PCIE_TYPICAL_SHARE = {1: 0.80, 2: 0.80, 3: 0.80, 4: 0.80, 5: 0.84, 6: 0.84, 7: 0.84}
NVLINK_TYPICAL_SHARE = 0.84
# Peer copies without NVLink, as a share of the slower PCIe link's typical figure (rough).
PEER_PATH_FACTOR = {"PIX": 0.95, "PXB": 0.95, "PHB": 0.85, "NODE": 0.8, "SYS": 0.6}
STAGED_FACTOR = 0.45  # through host memory: two copies in turn plus the host's memory bandwidth


def pcie_typical(gen: int | None, width: int | None) -> float | None:
    """What a healthy PCIe link of this generation and width gives one way, bytes/s."""
    cap = pcie_capacity_bytes_per_s(gen, width)
    return cap * PCIE_TYPICAL_SHARE.get(gen or 0, 0.8) if cap else None
