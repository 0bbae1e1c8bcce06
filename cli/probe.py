"""``gpuscope probe``: measure what each link delivers, beside its ceiling and what it typically gives.

Two functions for the command line: :func:`add_arguments` (the flags) and :func:`run_probe` (the command).
The figures come from ``sources/cudaprobe.py`` (the GPUs, through cuda-bindings) or, with ``--simulate``,
``sources/simprobe.py``; everything else (verdicts, JSON, table) is ``core/probe.py``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from gpuscope.core import probe as P
from gpuscope.core.errors import GpuscopeError
from gpuscope.core.model import Event, Frame, Inventory
from gpuscope.core.text import clean
from gpuscope.core.topology import pair_bandwidth_bytes_per_s
from gpuscope.core.validate import dumps_out

if TYPE_CHECKING:
    from gpuscope.cli.options import ProbeOptions

EXIT_INTERRUPTED = 130
_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "KIB": 1 << 10, "M": 1 << 20, "MB": 1 << 20, "MIB": 1 << 20,
          "G": 1 << 30, "GB": 1 << 30, "GIB": 1 << 30}


def memory_size(text: str) -> int:
    """``--max-memory``: bytes, or a number with K/M/G (binary: 512M = 512 MiB)."""
    s = text.strip().upper().replace(" ", "")
    num = s.rstrip("KMGIB")
    unit = s[len(num):]
    try:
        value = float(num)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (bytes, or with K, M, G: 512M)") from None
    if unit not in _UNITS or not value > 0 or value * _UNITS[unit] > 1 << 50:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (bytes, or with K, M, G: 512M)")
    return int(value * _UNITS[unit])


def gpu_list(text: str) -> list[int]:
    """``--gpus 0,1``: GPU indices as gpuscope and nvidia-smi number them."""
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a list of GPU indices: {text!r} (e.g. 0,1)") from None
    if not out or any(i < 0 or i > 4095 for i in out) or len(set(out)) != len(out):
        raise argparse.ArgumentTypeError(f"not a list of GPU indices: {text!r} (e.g. 0,1)")
    return out


def trials_count(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 1 <= n <= 100:
        raise argparse.ArgumentTypeError("must be between 1 and 100")
    return n


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of ``gpuscope probe``."""
    p.add_argument("--json", action="store_true", help=f"machine-readable output (schema {P.PROBE_SCHEMA}, "
                   "docs/probe-json.md)")
    p.add_argument("--simulate", metavar="SCENARIO", help="figures derived from a scenario's links (no GPU; "
                   "labelled SIMULATED)")
    p.add_argument("--yes", action="store_true", help="run even where other processes use the GPUs (else asked)")
    p.add_argument("--max-memory", type=memory_size, default=P.DEFAULT_MAX_MEMORY, metavar="BYTES",
                   help="device memory per GPU at most (default 1G; also 512M, 268435456)")
    p.add_argument("--gpus", type=gpu_list, metavar="0,1", help="the GPUs to probe (default all; pairs among them)")
    p.add_argument("--trials", type=trials_count, default=P.DEFAULT_TRIALS, metavar="N",
                   help=f"timed trials per figure, the median is shown (default {P.DEFAULT_TRIALS})")


def _say(err: TextIO, text: str) -> None:
    err.write(text + "\n")
    err.flush()


def chosen_gpus(inv: Inventory, wanted: Sequence[int] | None) -> list[int]:
    have = [d.index for d in inv.devices]
    if not have:
        raise GpuscopeError("no GPU to probe")
    if wanted is None:
        return have
    missing = [i for i in wanted if i not in have]
    if missing:
        raise GpuscopeError(f"--gpus: no GPU{missing[0]} here (GPUs: {','.join(map(str, have))})")
    return sorted(wanted)


def make_plan(inv: Inventory, frame: Frame | None, gpus: list[int], max_memory: int, trials: int) -> P.Plan:
    """The run's plan with the bandwidth each figure is expected to give (for the time estimate)."""
    host: dict[int, float | None] = {}
    for d in inv.devices:
        r = frame.gpus[d.index] if frame is not None and d.index < len(frame.gpus) else None
        link = P.host_link(d, r.pcie_gen if r else None, r.pcie_width if r else None)
        host[d.index] = P.pcie_typical(link.gen_now or link.gen_max, link.width_now or link.width_max)
    pairs: dict[tuple[int, int], float | None] = {}
    for a, b in P.pairs_of(gpus):
        pl = inv.pair(a, b)
        bw = pair_bandwidth_bytes_per_s(inv, pl) if pl is not None else None
        pairs[(a, b)] = bw * (0.8 if pl and pl.nvlinks else 0.4) if bw else None
    return P.make_plan(gpus, host, pairs, max_memory=max_memory, trials=trials)


def other_processes(frame: Frame | None, gpus: list[int]) -> dict[int, list[str]]:
    """GPU index → "pid name" of each process on it other than this one (from NVML's process lists)."""
    me = os.getpid()
    out: dict[int, list[str]] = {}
    if frame is None:
        return out
    for i in gpus:
        r = frame.gpus[i] if i < len(frame.gpus) else None
        procs = [p for p in (r.processes or ()) if p.pid != me] if r is not None else []
        if procs:
            out[i] = [f"{p.pid} {clean(p.name or '?', 30)}" for p in procs]
    return out


def busy_text(busy: dict[int, list[str]]) -> str:
    """``GPU0: 1234 python, …; GPU1: …``: the other processes on the GPUs (empty: nobody else)."""
    return "; ".join(f"GPU{i}: {', '.join(ps[:3])}{' …' if len(ps) > 3 else ''}" for i, ps in busy.items())


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


def link_reader(nvml: Any) -> Callable[[int], tuple[int | None, int | None]]:
    """A function giving GPU ``i``'s PCIe generation and width now (NVML), None where it cannot say."""

    def read(i: int) -> tuple[int | None, int | None]:
        try:
            h = nvml.nvmlDeviceGetHandleByIndex(i)
            return int(nvml.nvmlDeviceGetCurrPcieLinkGeneration(h)), int(nvml.nvmlDeviceGetCurrPcieLinkWidth(h))
        except Exception:  # noqa: BLE001 - NVML's errors: the link stays unknown
            return None, None

    return read


def measure(args: ProbeOptions, src: Any, stdin: TextIO, err: TextIO,
            driver: tuple[Any, str] | None = None) -> P.ProbeResult:
    """Probe the GPUs of the open source ``src`` (simulated with ``args.simulate``): say the plan on ``err``,
    ask before loading busy GPUs, measure. KeyboardInterrupt passes through once everything was freed."""
    inv = src.inventory
    frame = src.sample()
    gpus = chosen_gpus(inv, args.gpus)
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
