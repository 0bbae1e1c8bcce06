"""Simulated inference servers: a scenario's ``[[servers]]`` as endpoint readings and serving groups.

Nothing listens and nothing is polled: each frame gets, for every declared server, an
:class:`~gpuscope.core.model.EndpointReading` (its URL ``http://localhost:PORT``, its tok/s over the last
``rate_window_s`` seconds, as a real server's poller gives it) and a :class:`~gpuscope.core.model.ServingGroup`
marked ``simulated`` (the panel says SIMULATED, as the header does). Timed by the simulated NVML's own clock,
so phases line up.

The tok/s is a trailing window's: the mean of the scenario's instant rate (its phase's tok/s, with noise) over
the last :data:`RATE_WINDOW_S` seconds (fewer at the start: the server starts with the scenario), so a phase
change shows as a ramp over a window, and a reading tells of the middle of its window, as
:mod:`gpuscope.core.rates` reads it. Gauges (requests running) are the instant's, as a server's are.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gpuscope.core.groups import Claim, ProcView, build_groups, gpu_pids
from gpuscope.core.model import EndpointReading, Frame, ServingGroup
from gpuscope.sources.scenario import Scenario, SimServer
from gpuscope.sources.simnvml import SimNvml

RATE_WINDOW_S = 10.0  # what a real poller's window would be
STEP_S = 0.1  # the scenario noise's tick: a window's mean is taken at the middle of each tick in it


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

    def instant_tok_s(self, n: int, t: float) -> float:
        """Server ``n``'s generated tok/s at the instant ``t`` seconds into the scenario: its phase's, with the
        scenario's noise."""
        k = phase_index(self.scenario, t)
        tok = self.scenario.servers[n].tok_s[k] if k is not None else 0.0
        return tok * self.nvml._noise(1000 + n, "tok_s", t) if tok else 0.0

    def window_tok_s(self, n: int, t: float) -> tuple[float, float | None]:
        """Server ``n``'s generated tok/s as its poller reads it at ``t`` (seconds into the scenario), and the
        window it is over (s): the mean of :meth:`instant_tok_s` over the last :data:`RATE_WINDOW_S` seconds,
        or over the time since the start when shorter; the instant's, window None, at the very start."""
        window = min(RATE_WINDOW_S, t)
        if window < STEP_S:
            return self.instant_tok_s(n, t), None
        steps = round(window / STEP_S)
        return sum(self.instant_tok_s(n, t - (i + 0.5) * window / steps) for i in range(steps)) / steps, window

    def readings(self, t: float) -> tuple[EndpointReading, ...]:
        """Every server's reading ``t`` seconds into the scenario (tok/s over its window: :meth:`window_tok_s`)."""
        k = phase_index(self.scenario, t)
        out = []
        for n, s in enumerate(self.scenario.servers):
            tok, window = self.window_tok_s(n, t)
            running = 8.0 if k is not None and s.tok_s[k] else 0.0  # a gauge: the instant's
            if k is not None and s.running is not None:
                running = s.running[k]
            itl = s.itl_ms[k] / 1000 if k is not None and s.itl_ms is not None and s.itl_ms[k] else None
            out.append(EndpointReading(url=server_url(s), kind=s.kind, model=s.model, gen_tokens_per_s=round(tok, 1),
                                       requests_running=running, requests_waiting=0.0, rate_window_s=window,
                                       itl_mean_s=itl))
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
