"""Opening a GPU source: real NVML, or the simulated NVML over a scenario."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from gpuscope.sources.nvml import NvmlSource, NvmlUnavailable

if TYPE_CHECKING:
    from collections.abc import Callable

    from gpuscope.core.model import Frame
    from gpuscope.sources.endpoint import EndpointPoller

NO_DRIVER_HINT = "try `gpuscope --simulate a6000-tp2-pcie-gen1` or `gpuscope demo`"


@dataclass
class VirtualClock:
    """A clock that moves only when told to (for one-shot reads and tests)."""

    now: float = 0.0

    def __call__(self) -> float:
        return self.now


def open_source(simulate: str | None = None, *, pcie_mode: str = "auto", virtual_at: float | None = None,
                pcie_block_s: float = 0.020, wall0: float | None = None) -> NvmlSource:
    """Open and return an :class:`NvmlSource` whose inventory is read.

    ``simulate`` is a shipped scenario name or a file; ``virtual_at`` freezes the simulated clock at
    that many seconds into the scenario (advance it through ``source.nvml.clock.now``).
    Raises :class:`NvmlUnavailable` (no driver) or :class:`ScenarioError`.
    """
    if simulate:
        # here, not at the top: on real GPUs the scenario reader and the simulated NVML stay unloaded
        from gpuscope.sources import scenario as scenario_mod
        from gpuscope.sources.simnvml import SimNvml

        sc = scenario_mod.load(simulate)
        clock = VirtualClock(virtual_at) if virtual_at is not None else None
        fake = SimNvml(sc, clock=clock, pcie_block_s=pcie_block_s)
        wall0 = time.time() if wall0 is None else wall0
        src = NvmlSource(fake, label="SIMULATED", simulated=True, scenario=sc.name, host=sc.host,
                         pcie_mode=pcie_mode,
                         clock=(lambda: wall0 + fake.clock()) if clock is not None else time.time,
                         )  # Xids taken in sample() (a virtual clock: deterministically)
    else:
        src = NvmlSource(label="LIVE", pcie_mode=pcie_mode)
    try:
        src.open()
    except NvmlUnavailable as e:
        raise NvmlUnavailable(f"no NVIDIA driver found: {e}; {NO_DRIVER_HINT}") from None
    return src


class WithEndpoints:
    """A GPU source whose frames also carry the latest readings of inference endpoints."""

    def __init__(self, source: NvmlSource, poller: EndpointPoller):
        self.source = source
        self.poller = poller
        self.inventory = source.inventory
        self.label = source.label
        self.nvml = source.nvml

    def sample(self) -> Frame:
        frame = self.source.sample()
        return replace(frame, endpoints=self.poller.latest())

    def read_on_demand(self, energy_wanted: Callable[[], bool] | None,
                       process_util_wanted: Callable[[], bool] | None) -> None:
        """:meth:`NvmlSource.read_on_demand` of the GPU source."""
        self.source.read_on_demand(energy_wanted, process_util_wanted)

    def close(self) -> None:
        self.poller.stop()
        self.source.close()


def parse_headers(values: list[str], env: dict[str, str]) -> dict[str, str]:
    """Headers from ``--endpoint-header 'Name: value'`` and the environment (so tokens stay out of
    the process list): ``GPUSCOPE_ENDPOINT_HEADERS='A: x; B: y'``, ``GPUSCOPE_ENDPOINT_TOKEN`` (Bearer).
    Raises ValueError on a malformed header."""
    out: dict[str, str] = {}
    items = list(values)
    if env.get("GPUSCOPE_ENDPOINT_HEADERS"):
        items += [x for x in env["GPUSCOPE_ENDPOINT_HEADERS"].split(";") if x.strip()]
    for item in items:
        name, sep, value = item.partition(":")
        if not sep or not name.strip() or any(c.isspace() for c in name.strip()):
            raise ValueError(f"bad header {item.split(':')[0]!r}: expected 'Name: value'")
        out[name.strip()] = value.strip()
    if env.get("GPUSCOPE_ENDPOINT_TOKEN"):
        out["Authorization"] = "Bearer " + env["GPUSCOPE_ENDPOINT_TOKEN"]
    return out
