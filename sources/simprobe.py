"""``gpuscope probe --simulate SCENARIO``: probe results derived from a scenario's links, labelled SIMULATED.

Each figure is what its link gives as it trains under load (the scenario's ``pcie_gen_load`` /
``pcie_width_load``; NVLinks from the inventory) at the typical efficiency of core/probe.py, times a
seeded noise (the scenario's ``seed`` and ``noise``), so the same scenario gives the same figures. Every
figure's ``method`` is :data:`gpuscope.core.probe.METHOD_SIMULATED`: nothing was copied.
The topology comes from the simulated NVML source, the same path a real run takes.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Sequence
from dataclasses import replace

from gpuscope.core import probe as P
from gpuscope.core.model import Inventory
from gpuscope.sources import scenario as scenario_mod

SIM_BACKEND = "simulated (derived from the scenario's links)"
# Simulated latencies, µs: a small copy-engine copy over PCIe; NVLink peer; staged through host.
_LAT_PCIE_US = 2.2
_LAT_NVLINK_US = 1.9
_LAT_STAGED_US = 9.0


def links_under_load(name: str) -> dict[int, tuple[int, int]]:
    """Each simulated GPU's PCIe (generation, width) while its link is busy, from the scenario."""
    sc = scenario_mod.load(name)
    return {g.index: (g.pcie_gen_load, g.pcie_width_load) for g in sc.gpus}


def simulate(name: str, inv: Inventory, gpus: Sequence[int] | None = None, *, trials: int = P.DEFAULT_TRIALS,
             copy_bytes: int = P.MAX_COPY_BYTES, t: float = 0.0) -> P.ProbeResult:
    """The probe of scenario ``name`` (whose inventory is ``inv``) over ``gpus`` (default all).

    Raises :class:`gpuscope.sources.scenario.ScenarioError` for a scenario that does not load."""
    sc = scenario_mod.load(name)
    loaded = {g.index: (g.pcie_gen_load, g.pcie_width_load) for g in sc.gpus}
    chosen = [d.index for d in inv.devices] if gpus is None else list(gpus)
    rng = random.Random(zlib.crc32(f"{sc.name}:{sc.seed}".encode()))
    noise = min(max(sc.noise, 0.0), 0.2)

    def trial_set(mean: float, n: int, size: int) -> P.Measurement:
        return P.median_measurement([mean * (1 + rng.uniform(-noise, noise)) for _ in range(n)], size,
                                    P.METHOD_SIMULATED)

    results = []
    for d in inv.devices:
        if d.index not in chosen:
            continue
        gen, width = loaded.get(d.index, (None, None))
        g = P.GpuResult(d.index, d.name, P.host_link(d, gen, width), numa_node=d.numa_node, host_memory_local=True)
        one_way = P.host_typical(g, "h2d", at_max=False) or 0.0
        both = P.host_typical(g, "bidir", at_max=False) or 0.0
        results.append(replace(
            g, h2d=trial_set(one_way * 1.01, trials, copy_bytes), d2h=trial_set(one_way * 1.02, trials, copy_bytes),
            bidir=trial_set(both, trials, 2 * copy_bytes),
            h2d_latency=trial_set(_LAT_PCIE_US, P.LATENCY_TRIALS, P.LATENCY_BYTES),
            d2h_latency=trial_set(_LAT_PCIE_US * 1.1, P.LATENCY_TRIALS, P.LATENCY_BYTES)))
    base = P.ProbeResult(t=t, host=inv.host, backend=SIM_BACKEND, gpus=tuple(results), simulated=True,
                         scenario=sc.name,
                         nvlink_link_bytes_per_s={k: v for k, v in P.nvlink_rates(inv).items() if k in chosen})
    pairs = []
    for a, b in P.pairs_of(chosen):
        link = inv.pair(a, b)
        if link is None:
            continue
        da = next(d for d in inv.devices if d.index == a)
        p = P.PairResult(a, b, link.pcie_path, nvlinks=link.nvlinks, nvlink_version=da.nvlink_version,
                         p2p=bool(link.nvlinks) or link.pcie_path != "SYS")
        one = P.pair_typical(base, p, "read", at_max=False) or 0.0
        both = P.pair_typical(base, p, "bidir_read", at_max=False) or 0.0
        lat = _LAT_NVLINK_US if p.nvlinks else (_LAT_PCIE_US * 1.5 if p.p2p else _LAT_STAGED_US)
        pairs.append(replace(
            p, read=trial_set(one, trials, copy_bytes), write=trial_set(one * 1.01, trials, copy_bytes),
            bidir_read=trial_set(both, trials, 2 * copy_bytes),
            bidir_write=trial_set(both * 1.01, trials, 2 * copy_bytes),
            latency=trial_set(lat, P.LATENCY_TRIALS, P.LATENCY_BYTES)))
    notes = ("peer copies between GPUs on a SYS path are staged through host memory (no peer access)",) if any(
        p.p2p is False for p in pairs) else ()
    return replace(base, pairs=tuple(pairs), notes=notes)
