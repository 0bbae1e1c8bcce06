"""The link probe from the live screen's command palette: the same measure path as
``gpuscope probe``, run on a worker thread, never on the event loop.

Steps, each of which the App shows: :meth:`LinkProbe.refusal` (replay, a remote host), :meth:`LinkProbe.prepare`
(on the worker: CUDA loaded first on real GPUs, the plan, who else uses the GPUs), the App's confirmation
modal(s), :meth:`LinkProbe.measure` (on the worker: the scenario's simulated probe, labelled SIMULATED, or the
CUDA backend), then :meth:`LinkProbe.finished` (on the event loop: keeps the result and its findings, and puts
the ``probe`` event into a running recording). No Textual here.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from gpuscope.core import probe as P
from gpuscope.core.errors import GpuscopeError, one_line
from gpuscope.core.findings import Finding
from gpuscope.core.model import ServingGroup
from gpuscope.core.session import Session
from gpuscope.tui.workers import Worker

log = logging.getLogger(__name__)

REPLAY_REFUSAL = "the link probe measures this machine's GPUs: not available in replay (run gpuscope probe there)"
REMOTE_REFUSAL = "the link probe measures this machine's GPUs: not available for a remote host (run gpuscope probe there)"


class ProbeStopped(GpuscopeError):
    """The screen closed while a probe ran: the run stops between two figures (buffers freed)."""


@dataclass(frozen=True)
class ProbePrep:
    """What a run will do, shown before it starts: the plan, and the other processes on the GPUs."""

    plan: P.Plan
    busy: dict[int, list[str]]  # GPU index → "pid name" of each other process on it (real GPUs only)
    scenario: str | None  # simulated: the scenario; None: the real GPUs
    driver: Any = None  # what cudaprobe.load_driver returned (real GPUs)
    group: str | None = None  # the serving group whose links are probed (its label); None: every GPU

    def lines(self) -> list[str]:
        """The confirmation modal's text."""
        from gpuscope.core.groups import gpus_text

        which = ([f"Serving group {self.group}: {gpus_text(self.plan.gpus)} and the pairs among them."]
                 if self.group else [])
        if self.scenario:
            return [*which, f"SIMULATED ({self.scenario}): nothing runs on a GPU; the figures come from the "
                    "scenario's links.", "A real run: " + self.plan.announce().removeprefix("probe: ")]
        return [*which, "Link probe: it adds load to the GPUs while it runs.",
                self.plan.announce().removeprefix("probe: ")]

    def busy_text(self) -> str:
        """``GPU0: 1234 python, …; GPU1: …`` (empty: nobody else)."""
        from gpuscope.core.probe_plan import busy_text

        return busy_text(self.busy)


class LinkProbe:
    """Prepares, runs and keeps the live screen's link probe. ``nvml``: a function giving the source's NVML
    module (for the links' generation while probed); ``load_driver`` and ``cuda_probe`` stand in for
    ``sources/cudaprobe.py`` in tests."""

    def __init__(self, session: Session, nvml: Callable[[], Any] = lambda: None, *,
                 load_driver: Callable[[], Any] | None = None, cuda_probe: Callable[..., P.ProbeResult] | None = None,
                 max_memory: int = P.DEFAULT_MAX_MEMORY, trials: int = P.DEFAULT_TRIALS):
        self.session = session
        self.nvml = nvml
        self._load_driver = load_driver
        self._cuda_probe = cuda_probe
        self.max_memory = max_memory
        self.trials = trials
        self.result: P.ProbeResult | None = None  # the last probe, shown until the next one
        self.findings: list[Finding] = []  # its findings (core/probe.py probe_finding_list)
        self.worker: OneShot | None = None

    @property
    def running(self) -> bool:
        return self.worker is not None and self.worker.alive

    def refusal(self, replay: bool) -> str | None:
        """Why the probe cannot run on this screen (None: it can)."""
        if replay:
            return REPLAY_REFUSAL
        if self.session.inventory.source == "remote":
            return REMOTE_REFUSAL
        if self.running:
            return "a link probe is running already"
        return None

    def group(self, label: str) -> ServingGroup | None:
        """The current serving group labelled ``label`` (core/groups.py ``group_label``) in the last frame."""
        from gpuscope.core.groups import group_label

        with self.session.lock:
            frame = self.session.last_frame
        return next((g for g in (frame.groups if frame is not None else ()) if group_label(g) == label), None)

    def prepare(self, group: str | None = None) -> ProbePrep:
        """The plan (worker thread) over every GPU, or over the GPUs of the serving group labelled ``group`` (the
        same plan as ``gpuscope probe --group``). On real GPUs CUDA is loaded first: without it, one line
        (:class:`gpuscope.sources.cudaprobe.CudaUnavailable`) before anything is asked."""
        from gpuscope.core.probe_plan import chosen_gpus, group_gpus, make_plan, other_processes

        inv = self.session.inventory
        with self.session.lock:
            frame = self.session.last_frame
        scenario = inv.scenario if inv.simulated else None
        driver = None
        if scenario is None:
            if self._load_driver is not None:
                driver = self._load_driver()
            else:
                from gpuscope.sources import cudaprobe

                driver = cudaprobe.load_driver()
        if group is None:
            gpus = chosen_gpus(inv, None)
        else:
            g = self.group(group)
            if g is None:
                raise GpuscopeError(f"the serving group {group} is gone")
            gpus = group_gpus(inv, g)
        plan = make_plan(inv, frame, gpus, self.max_memory, self.trials)
        busy = {} if scenario else other_processes(frame, gpus)
        return ProbePrep(plan, busy, scenario, driver, group)

    def measure(self, prep: ProbePrep, stop: threading.Event) -> P.ProbeResult:
        """Run the probe of ``prep`` (worker thread); ``stop`` set: :class:`ProbeStopped` between two figures."""
        result = self._measure(prep, stop)
        return replace(result, group=prep.group) if prep.group else result

    def _measure(self, prep: ProbePrep, stop: threading.Event) -> P.ProbeResult:
        inv = self.session.inventory
        gpus = list(prep.plan.gpus)
        if prep.scenario:
            from gpuscope.sources import simprobe

            return simprobe.simulate(prep.scenario, inv, gpus, trials=prep.plan.trials,
                                     copy_bytes=prep.plan.copy_bytes, t=time.time())

        def progress(_line: str) -> None:
            if stop.is_set():
                raise ProbeStopped("link probe stopped")

        from gpuscope.sources.cudaprobe import link_reader

        nvml = self.nvml()
        link_now = link_reader(nvml) if nvml is not None else None
        if self._cuda_probe is not None:
            run = self._cuda_probe
        else:
            from gpuscope.sources import cudaprobe

            run = cudaprobe.probe
        return run(inv, gpus, copy_bytes=prep.plan.copy_bytes, trials=prep.plan.trials, link_now=link_now,
                   progress=progress, driver=prep.driver)

    def finished(self, result: P.ProbeResult) -> str:
        """Keep ``result`` (event loop): its figures for the topology panel, its findings for the findings panel
        (replacing the last probe's), and its ``probe`` event with the next frame: the findings engine's link-cost
        rule reads it from then on, and a running recording keeps it. Returns the message line."""
        self.result = result
        self.findings = P.probe_finding_list(result)
        line = P.summary_line(result)
        self.session.add_event(P.probe_event(result))
        if self.session.recorder is not None:
            line += " (in the recording)"
        return line

    def start(self, name: str, fn: Callable[[threading.Event], Any], done: Callable[[Any, str | None], object]) -> None:
        """Run ``fn(stop)`` on the ``gpuscope-probe`` thread; ``done(value, None)`` or ``done(None, error line)``
        is called on that thread when it ends (the App posts a message from it)."""
        self.worker = OneShot(name, fn, done)
        self.worker.start()

    def stop(self) -> None:
        """The screen closes: a run in progress stops between two figures and frees its buffers."""
        if self.worker is not None:
            self.worker.stop(timeout_s=5.0)


class OneShot(Worker):
    """One call on its own named thread (``gpuscope-probe``); its outcome goes to ``done``, never raised."""

    def __init__(self, what: str, fn: Callable[[threading.Event], Any], done: Callable[[Any, str | None], object]):
        super().__init__("gpuscope-probe", lambda: None)
        self.what = what
        self.fn = fn
        self.done = done

    def run(self) -> None:
        try:
            value = self.fn(self._stop)
        except GpuscopeError as e:
            self.done(None, str(e))
        except Exception as e:  # noqa: BLE001 - a bug: logged, one line on screen, never a traceback
            log.exception("link probe (%s) failed", self.what)
            self.done(None, f"failed: {one_line(e)} (details in the log)")
        else:
            self.done(value, None)

    def _release(self) -> None:
        pass
