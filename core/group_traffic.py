"""A serving group's traffic, counted once: PCIe and NVLink bytes/s over its GPUs, its generated tok/s and the
interconnect bytes per generated token, with one rule everywhere (screen, ``summary``, ``compare``, exporter).

The rules, each a small function here:

* **Unknown is never 0.** A group's PCIe traffic is known only when every one of its GPUs reads both PCIe
  counters; its NVLink traffic only when every GPU of it that has active NVLinks reads both NVLink counters.
  A GPU without NVLink moves no NVLink bytes (that is 0, not unknown, and the figure reads ``–``).
* **A byte counted once.** NVML counts traffic per GPU, not per process: when two groups share a GPU (a
  notebook beside a vLLM worker) its bytes cannot be split between them. They are counted with one group,
  the *owner* (:func:`traffic_owners`: a group with an endpoint first, then the larger group, then the
  first listed), and the other says so ("GPU3 counted with vLLM :8001") instead of counting them again.
* **Bytes per token is traffic ÷ tok/s** over the same time (:func:`per_token`): at one instant on the
  screen and the exporter, the mean traffic over a span ÷ the span's tok/s in ``summary``, so a reader can
  divide the two figures shown and get the third.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpuscope.core.groups import group_label
from gpuscope.core.model import EndpointReading, Frame, GpuReading, Inventory, ServingGroup
from gpuscope.core.units import NONE, fmt_gb


@dataclass(frozen=True, slots=True)
class GroupTraffic:
    """A group's traffic: PCIe and NVLink bytes/s summed over the GPUs it owns (:func:`traffic_owners`), both
    directions (a byte between two of its GPUs counts at both ends); its server's generated tok/s; the
    interconnect bytes per generated token. None is unknown; ``nvlink_applies`` False means no GPU of the
    group has NVLink (no NVLink bytes, shown ``–``). ``shared``: its GPUs whose bytes are counted with the
    group named ``shared_with``."""

    pcie_bytes_per_s: float | None
    nvlink_bytes_per_s: float | None
    tokens_per_s: float | None
    bytes_per_token: float | None
    nvlink_applies: bool = False
    shared: tuple[int, ...] = ()
    shared_with: str | None = None
    own: tuple[int, ...] = ()  # the GPUs whose bytes are counted here

    @property
    def moved_bytes_per_s(self) -> float | None:
        """PCIe + NVLink bytes/s; None when either that applies is unknown."""
        return moved(self.pcie_bytes_per_s, self.nvlink_bytes_per_s, self.nvlink_applies)


def moved(pcie: float | None, nvlink: float | None, nvlink_applies: bool) -> float | None:
    """Interconnect bytes/s: PCIe plus NVLink where the GPUs have NVLink; None when a part is unknown."""
    if pcie is None or (nvlink_applies and nvlink is None):
        return None
    return pcie + (nvlink if nvlink_applies and nvlink is not None else 0.0)


def per_token(bytes_per_s: float | None, tokens_per_s: float | None) -> float | None:
    """Bytes per generated token: traffic ÷ tok/s over the same time; None unless both are known and tokens
    are generated."""
    if bytes_per_s is None or tokens_per_s is None or not tokens_per_s > 0:
        return None
    return bytes_per_s / tokens_per_s


def _rank(g: ServingGroup, k: int) -> tuple[int, int, int]:
    return (0 if g.endpoint else 1, -len(g.gpus), k)


def traffic_owners(groups: Sequence[ServingGroup]) -> dict[int, ServingGroup]:
    """GPU index → the group its bytes are counted with: a group with an endpoint before a group by process,
    then the group with more GPUs, then the first listed."""
    out: dict[int, ServingGroup] = {}
    for _, _, g in sorted(((_rank(g, k), k, g) for k, g in enumerate(groups)), key=lambda x: (x[0], x[1])):
        for i in g.gpus:
            out.setdefault(i, g)
    return out


def nvlink_gpus(inv: Inventory) -> frozenset[int]:
    """The GPUs with active NVLinks (whose NVLink counters must be known for their traffic to be)."""
    return frozenset(d.index for d in inv.devices if d.nvlinks_active > 0)


def _pair_sum(r: GpuReading, tx: str, rx: str) -> float | None:
    a, b = getattr(r, tx), getattr(r, rx)
    return None if a is None or b is None else a + b


def gpus_traffic(readings: Sequence[GpuReading], with_nvlink: frozenset[int]) -> tuple[float | None, float | None, bool]:
    """(PCIe, NVLink, NVLink applies) bytes/s over ``readings``, both directions: None when a GPU's counters
    that apply are unknown (a lost GPU's are); NVLink counted for the GPUs in ``with_nvlink`` only."""
    pcie: float | None = 0.0
    nvl: float | None = 0.0
    applies = False
    for r in readings:
        p = None if r.lost else _pair_sum(r, "pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s")
        pcie = None if pcie is None or p is None else pcie + p
        if r.index in with_nvlink:
            applies = True
            n = None if r.lost else _pair_sum(r, "nvlink_tx_bytes_per_s", "nvlink_rx_bytes_per_s")
            nvl = None if nvl is None or n is None else nvl + n
    return (pcie if readings else None), (nvl if applies else None), applies


def group_traffic(g: ServingGroup, frame: Frame, inv: Inventory,
                  owners: dict[int, ServingGroup] | None = None) -> GroupTraffic:
    """:class:`GroupTraffic` of ``g`` in ``frame`` (its endpoint's readings summed over models). ``owners``:
    :func:`traffic_owners` of the frame's groups (computed when not given)."""
    owners = traffic_owners(frame.groups) if owners is None else owners
    own = tuple(i for i in g.gpus if owners.get(i, g) is g or owners.get(i) == g)
    shared = tuple(i for i in g.gpus if i not in own)
    readings = [r for r in frame.gpus if r.index in own]
    if len(readings) < len(own):  # a GPU of the group with no reading: its traffic is unknown
        readings = []
    pcie, nvl, applies = gpus_traffic(readings, nvlink_gpus(inv))
    tok = endpoint_tokens(g, frame.endpoints)
    with_ = group_label(owners[shared[0]]) if shared else None
    return GroupTraffic(pcie, nvl, tok, per_token(moved(pcie, nvl, applies), tok), applies, shared, with_, own)


def endpoint_tokens(g: ServingGroup, eps: Sequence[EndpointReading]) -> float | None:
    """Generated tok/s of the group's endpoint (summed over its models); None when unknown."""
    if not g.endpoint:
        return None
    rates = [e.gen_tokens_per_s for e in eps if e.url == g.endpoint and e.up and e.gen_tokens_per_s is not None]
    return sum(rates) if rates else None


def fmt_bytes(b: float | None) -> str:
    """Bytes as ``1.2 GB``, ``340 MB``, ``12 kB``, ``512 B``; ``–`` for None."""
    if b is None:
        return NONE
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(b) >= scale:
            v = b / scale
            return f"{v:.1f} {unit}" if v < 100 else f"{v:.0f} {unit}"
    return f"{b:.0f} B"


def shared_words(t: GroupTraffic) -> str:
    """``GPU3 counted with vLLM :8001`` for a group whose GPUs' bytes another group counts; else ``""``."""
    if not t.shared:
        return ""
    gpus = "+".join(f"GPU{i}" for i in t.shared)
    return f"{gpus} counted with {t.shared_with}"


def traffic_line(t: GroupTraffic, tokens: bool = True, per_token: bool = True) -> str:
    """``PCIe 15.2 + NVLink – GB/s (both ways) · 55 tok/s · 276 MB/token``: traffic both ways summed over the
    group's GPUs, then (``tokens``) its tok/s and (``per_token``) interconnect bytes per generated token; a
    group with shared GPUs says whose count their bytes are in."""
    out = f"PCIe {fmt_gb(t.pcie_bytes_per_s)} + NVLink {fmt_gb(t.nvlink_bytes_per_s)} GB/s (both ways)"
    if t.shared:
        out = f"traffic: {shared_words(t)}" if not t.own else f"{out} ({shared_words(t)})"
    if tokens:
        out += " · " + (NONE if t.tokens_per_s is None else f"{t.tokens_per_s:,.0f}") + " tok/s"
    if per_token:
        out += f" · {fmt_bytes(t.bytes_per_token)}/token"
    return out
