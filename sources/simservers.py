"""Simulated inference servers: a scenario's ``[[servers]]`` as endpoint readings and serving groups.

Nothing listens and nothing is polled: each frame gets, for every declared server, an
:class:`~gpuscope.core.model.EndpointReading` (its URL ``http://localhost:PORT``, its tok/s in the
scenario's current phase) and a :class:`~gpuscope.core.model.ServingGroup` marked ``simulated`` (the panel
says SIMULATED, as the header does). Timed by the simulated NVML's own clock, so phases line up.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gpuscope.core.groups import Claim, ProcView, build_groups
from gpuscope.core.model import EndpointReading, Frame, ServingGroup
from gpuscope.sources.groups import gpu_pids
from gpuscope.sources.scenario import Scenario, SimServer
from gpuscope.sources.simnvml import SimNvml

RATE_WINDOW_S = 10.0  # what a real poller's window would be


def server_url(s: SimServer) -> str:
    return f"http://localhost:{s.port}"


def phase_index(sc: Scenario, t: float) -> int | None:
    """The index of the phase running ``t`` seconds into the scenario (None: no phases)."""
    phase = sc.phase_at(t)
    return next((k for k, p in enumerate(sc.phases) if p is phase), None)


class SimServers:
    """Adds the scenario's simulated servers to each frame (see the module docstring)."""

    def __init__(self, nvml: SimNvml):
        self.nvml = nvml
        self.scenario = sc = nvml.scenario
        # the same builder as on a real machine, over the scenario's processes: a server's first pid listens,
        # the others are its children; processes on GPUs no server claims form groups by program
        self.claims = [Claim(url=server_url(s), port=s.port, local=True, listener=s.pids[0], kind=s.kind,
                             model=s.model, tp=s.tp, pp=s.pp) for s in sc.servers]
        self.view = ProcView()
        for s in sc.servers:
            for pid in s.pids[1:]:
                self.view.ppids[pid] = s.pids[0]
        for proc in sc.processes:
            self.view.args.setdefault(proc.pid, proc.command.split())
            self.view.names.setdefault(proc.pid, proc.name)
        self._key: object = None
        self._groups: tuple[ServingGroup, ...] = ()

    @classmethod
    def for_source(cls, source: Any) -> SimServers | None:
        """The simulated servers of the scenario behind ``source`` (None when it declares none)."""
        nvml = getattr(source, "nvml", None)
        if not isinstance(nvml, SimNvml) or not nvml.scenario.servers:
            return None
        return cls(nvml)

    def readings(self, t: float) -> tuple[EndpointReading, ...]:
        """Every server's reading ``t`` seconds into the scenario (the phase's tok/s, with the scenario's noise)."""
        k = phase_index(self.scenario, t)
        out = []
        for n, s in enumerate(self.scenario.servers):
            tok = s.tok_s[k] if k is not None else 0.0
            if tok:
                tok *= self.nvml._noise(1000 + n, "tok_s", t)
            running = 8.0 if tok else 0.0
            out.append(EndpointReading(url=server_url(s), kind=s.kind, model=s.model, gen_tokens_per_s=round(tok, 1),
                                       requests_running=running, requests_waiting=0.0, rate_window_s=RATE_WINDOW_S))
        return tuple(out)

    def groups(self, frame: Frame) -> tuple[ServingGroup, ...]:
        """The groups for this frame's (simulated) GPU processes; a server whose GPUs report no process
        list holds its declared GPUs."""
        held = gpu_pids(frame.gpus)
        for s in self.scenario.servers:
            if all(g.processes is None for g in frame.gpus if g.index in s.gpus):
                held.setdefault(s.pids[0], set()).update(s.gpus)
        key = tuple(sorted((p, tuple(sorted(g))) for p, g in held.items()))
        if key != self._key:
            self._key = key
            self._groups = tuple(replace(g, simulated=True) for g in build_groups(self.claims, held, self.view))
        return self._groups

    def add(self, frame: Frame) -> Frame:
        eps = self.readings(self.nvml.clock())
        return replace(frame, endpoints=(*frame.endpoints, *eps), groups=(*frame.groups, *self.groups(frame)))
