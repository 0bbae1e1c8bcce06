"""``gpuscope probe``: measure what each link delivers, beside its ceiling and what it typically gives.

The command, :func:`run_probe` (its flags are cli/options.py's ``add_probe_arguments``; the plan, core/probe_plan.py).
The figures come from ``sources/cudaprobe.py`` (the GPUs, through cuda-bindings) or, with ``--simulate``,
``sources/simprobe.py``; everything else (verdicts, JSON, table) is ``core/probe.py``.
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from typing import Any, TextIO

from gpuscope.cli.options import ProbeOptions
from gpuscope.cli.probe_args import MIN_MAX_MEMORY, gpu_list, memory_size  # noqa: F401 - named here as before
from gpuscope.core import probe as P
from gpuscope.core.errors import GpuscopeError
from gpuscope.core.groups import gpus_text, group_label
from gpuscope.core.model import EndpointReading, Event, Frame, ServingGroup
from gpuscope.core.probe_plan import (
    busy_text,
    chosen_gpus,
    group_gpus,
    make_plan,
    match_group,
    other_processes,
    port_of,
)
from gpuscope.core.validate import dumps_out
from gpuscope.sources.cudaprobe import link_reader

EXIT_INTERRUPTED = 130


def _say(err: TextIO, text: str) -> None:
    err.write(text + "\n")
    err.flush()


def confirm(busy: dict[int, list[str]], yes: bool, stdin: TextIO, err: TextIO) -> None:
    """Ask before probing GPUs that other processes use; raise GpuscopeError when the answer is no, or when
    nobody can answer (stdin not a terminal) and ``--yes`` was not given."""
    if not busy or yes:
        return
    where = busy_text(busy)
    if not (hasattr(stdin, "isatty") and stdin.isatty()):
        raise GpuscopeError(f"other processes use the GPUs ({where}): the probe adds load; rerun with --yes to "
                            "probe anyway")
    err.write(f"other processes use the GPUs ({where}); the probe adds load. Probe anyway? [y/N] ")
    err.flush()
    answer = stdin.readline().strip().lower()
    if answer not in ("y", "yes"):
        raise GpuscopeError("not probed")


def find_groups(src: Any, simulate: str | None, frame: Frame, name: str) -> tuple[ServingGroup, ...]:
    """The serving groups of the open source, found as the live view finds them (sources/groups.py): a scenario's
    declared servers, or this machine's ``/proc`` beside the frame's GPU processes. A NAME with a port
    (``:8000``, a URL) is looked up as an endpoint too, so its listener's group is found without polling it."""
    if frame.groups:
        return frame.groups
    if simulate:
        from gpuscope.sources.simservers import SimServers

        servers = SimServers.for_source(src)
        return servers.groups(frame) if servers is not None else ()
    from gpuscope.sources.groups import GroupFinder

    port = port_of(name)
    eps = frame.endpoints
    if port is not None:
        url = name if "://" in name else f"http://localhost:{port}" if name.lstrip(":").isdigit() else f"http://{name}"
        eps = (*eps, EndpointReading(url=url))
    return GroupFinder().groups(replace(frame, endpoints=eps))


def _chosen(args: ProbeOptions, src: Any, frame: Frame, err: TextIO) -> tuple[list[int], str | None]:
    """The GPUs to probe (``--gpus``, ``--group``'s or all) and the group's label (None: no group)."""
    if not args.group:
        return chosen_gpus(src.inventory, args.gpus), None
    g = match_group(find_groups(src, args.simulate, frame, args.group), args.group)
    gpus = group_gpus(src.inventory, g)
    _say(err, f"group {group_label(g)}: {gpus_text(gpus)} and the pairs among them")
    return gpus, group_label(g)


def measure(args: ProbeOptions, src: Any, stdin: TextIO, err: TextIO,
            driver: tuple[Any, str] | None = None) -> P.ProbeResult:
    """Probe the GPUs of the open source ``src`` (simulated with ``args.simulate``): say the plan on ``err``,
    ask before loading busy GPUs, measure. KeyboardInterrupt passes through once everything was freed."""
    frame = src.sample()
    gpus, group = _chosen(args, src, frame, err)
    if group is not None:
        return replace(_measure(args, src, frame, gpus, stdin, err, driver), group=group)
    return _measure(args, src, frame, gpus, stdin, err, driver)


def _measure(args: ProbeOptions, src: Any, frame: Frame, gpus: list[int], stdin: TextIO, err: TextIO,
             driver: tuple[Any, str] | None) -> P.ProbeResult:
    inv = src.inventory
    max_memory = args.max_memory
    trials = args.trials
    plan = make_plan(inv, frame, gpus, max_memory, trials)
    if args.simulate:
        from gpuscope.sources import simprobe

        _say(err, f"SIMULATED ({args.simulate}): nothing runs on a GPU (a real run: "
             + plan.announce().removeprefix("probe: ") + ")")
        return simprobe.simulate(args.simulate, inv, gpus, trials=trials, copy_bytes=plan.copy_bytes, t=time.time())
    from gpuscope.sources import cudaprobe

    driver = driver or cudaprobe.load_driver()
    _say(err, plan.announce())
    confirm(other_processes(frame, gpus), args.yes, stdin, err)
    unseen = [i for i in gpus if i < len(frame.gpus) and frame.gpus[i].processes is None]
    if unseen:
        _say(err, f"note: NVML does not list the processes of {', '.join(f'GPU{i}' for i in unseen)}: "
             "cannot tell whether others use them")
    return cudaprobe.probe(inv, gpus, copy_bytes=plan.copy_bytes, trials=trials, link_now=link_reader(src.nvml),
                           progress=lambda s: _say(err, s), driver=driver)


def run_probe(args: ProbeOptions, stdin: TextIO | None = None, out: TextIO | None = None,
              err: TextIO | None = None) -> int:
    """``gpuscope probe``: say what it will cost, ask if others use the GPUs, measure, print (table or JSON).

    Exit 0 when it ran (findings or not), 130 on Ctrl-C (everything freed); a GpuscopeError otherwise."""
    from gpuscope.sources.live import open_source

    stdin, out, err = stdin or sys.stdin, out or sys.stdout, err or sys.stderr
    driver = None
    if not args.simulate:
        from gpuscope.sources import cudaprobe

        driver = cudaprobe.load_driver()  # no CUDA: one line, before anything is asked
    src = open_source(args.simulate, virtual_at=0.0 if args.simulate else None)
    try:
        result = measure(args, src, stdin, err, driver)
    except KeyboardInterrupt:
        _say(err, "gpuscope: probe stopped (Ctrl-C); GPU and host buffers freed")
        return EXIT_INTERRUPTED
    finally:
        src.close()
    if args.json:
        out.write(dumps_out(P.to_json(result), indent=2) + "\n")
    else:
        out.write("\n".join(P.table_lines(result)) + "\n")
    out.flush()
    return 0


def probe_event(args: ProbeOptions, src: Any, stdin: TextIO | None = None, err: TextIO | None = None) -> Event:
    """Run the probe for ``gpuscope record --probe-links`` on the recording's source and return the event that
    carries it (kind ``probe``, the JSON in ``data``, the summary line in ``text``)."""
    err = err or sys.stderr
    try:
        result = measure(args, src, stdin or sys.stdin, err)
    except KeyboardInterrupt:
        _say(err, "gpuscope: probe stopped (Ctrl-C); GPU and host buffers freed")
        raise
    ev = P.probe_event(result)
    _say(err, f"gpuscope: {ev.text}")
    return ev
