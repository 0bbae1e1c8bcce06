"""Check `gpuscope probe`'s real backend against an independent PyTorch measurement, in the same run.

How to run it on the GPU machine (python3 3.12, torch with CUDA, cuda-bindings matching the driver, nvidia-ml-py):

    # from the repository root, nothing installed: gpuscope is imported from this checkout
    python3 tools/probe_check.py                      # every GPU, 256 MiB copies, 10 trials
    python3 tools/probe_check.py --gpus 0,1 --trials 20 --size-mib 256 --json-out probe-check.json
    # or with gpuscope installed somewhere: PYTHONPATH=/tmp/gs python3 tools/probe_check.py

It runs `gpuscope probe`'s backend (sources/cudaprobe.py: cuda-bindings, pinned buffers, gated copies, CUDA
events, median) and then, on the same GPUs and sizes, a plain PyTorch copy: a pinned tensor copied with
``.to('cuda', non_blocking=True)`` / ``copy_`` on a stream, timed with ``torch.cuda.Event``, median of the
same number of trials (one warm-up first). It prints both side by side with the difference; the goal is
within 5 % for host↔device (and device↔device when two GPUs are present). Exit status 0 when every figure
is within --tolerance (default 5 %), 1 otherwise, 2 when it cannot run. The probe's own table follows.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import statistics
import sys
import time
import types
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
MiB = 1 << 20


def import_gpuscope() -> None:
    """Import ``gpuscope`` as installed, else from this checkout (pkg/ is the package, core/ sources/ cli/ its
    subpackages: the pyproject's package-dir mapping, done by hand)."""
    try:
        import gpuscope.core.probe  # noqa: F401

        return
    except ImportError:
        for k in [k for k in sys.modules if k == "gpuscope" or k.startswith("gpuscope.")]:
            del sys.modules[k]
    root = types.ModuleType("gpuscope")
    root.__path__ = [str(REPO / "pkg")]  # type: ignore[attr-defined]
    exec((REPO / "pkg" / "__init__.py").read_text(), root.__dict__)
    sys.modules["gpuscope"] = root
    for sub in ("core", "sources", "cli"):
        spec = importlib.util.spec_from_file_location(f"gpuscope.{sub}", REPO / sub / "__init__.py",
                                                      submodule_search_locations=[str(REPO / sub)])
        assert spec is not None and spec.loader is not None
        mod = importlib.util.module_from_spec(spec)
        sys.modules[f"gpuscope.{sub}"] = mod
        spec.loader.exec_module(mod)
        setattr(root, sub, mod)


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def torch_figures(torch: Any, gpus: list[int], size: int, trials: int) -> dict[str, float]:
    """PyTorch's own figures, bytes/s: per GPU h2d, d2h, bidir (sum of both at once); per pair read/write."""
    out: dict[str, float] = {}

    def timed(dev: int, jobs: list[Any]) -> list[float]:
        """Each trial: every job (a function of a stream) on its own stream of ``dev``; bytes/s summed."""
        streams = [torch.cuda.Stream(device=dev) for _ in jobs]
        rates: list[float] = []
        for k in range(trials + 1):
            evs = []
            torch.cuda.synchronize(dev)
            for job, s in zip(jobs, streams):
                start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                with torch.cuda.stream(s):
                    start.record(s)
                    job()
                    stop.record(s)
                evs.append((start, stop))
            total = 0.0
            for start, stop in evs:
                stop.synchronize()
                total += size / (start.elapsed_time(stop) / 1e3)
            if k:
                rates.append(total)
        return rates

    def cp(dst: Any, src: Any) -> Any:
        return lambda: dst.copy_(src, non_blocking=True)

    def empty(dev: Any, pinned: bool = False) -> Any:
        return torch.empty(size, dtype=torch.uint8, device=dev, pin_memory=pinned)

    for i in gpus:
        with torch.cuda.device(i):
            h_src, h_dst = empty("cpu", True), empty("cpu", True)
            d_a, d_b = empty(f"cuda:{i}"), empty(f"cuda:{i}")
            out[f"GPU{i} h2d"] = median(timed(i, [cp(d_a, h_src)]))
            out[f"GPU{i} d2h"] = median(timed(i, [cp(h_dst, d_b)]))
            out[f"GPU{i} bidir"] = median(timed(i, [cp(d_a, h_src), cp(h_dst, d_b)]))
    for n, a in enumerate(gpus):
        for b in gpus[n + 1:]:
            src_a, dst_a, src_b, dst_b = empty(f"cuda:{a}"), empty(f"cuda:{a}"), empty(f"cuda:{b}"), empty(f"cuda:{b}")
            with torch.cuda.device(a):  # queued on a's streams: a reads from b, a writes to b
                out[f"GPU{a}-GPU{b} read"] = median(timed(a, [cp(dst_a, src_b)]))
                out[f"GPU{a}-GPU{b} write"] = median(timed(a, [cp(dst_b, src_a)]))
    return out


def probe_figures(r: Any) -> dict[str, float]:
    out: dict[str, float] = {}
    for g in r.gpus:
        for k in ("h2d", "d2h", "bidir"):
            m = getattr(g, k)
            if m is not None:
                out[f"GPU{g.index} {k}"] = m.value
    for p in r.pairs:
        for k in ("read", "write"):
            m = getattr(p, k)
            if m is not None:
                out[f"GPU{p.a}-GPU{p.b} {k}"] = m.value
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", default=None, help="e.g. 0,1 (default all)")
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--size-mib", type=int, default=256)
    ap.add_argument("--tolerance", type=float, default=5.0, help="percent")
    ap.add_argument("--json-out", default=None, help="write the probe's JSON and both figure sets here")
    args = ap.parse_args()
    import_gpuscope()
    from gpuscope.core import probe as P
    from gpuscope.core.errors import GpuscopeError
    from gpuscope.sources import cudaprobe
    from gpuscope.sources.live import open_source

    try:
        import torch
    except ImportError:
        print("probe_check: needs PyTorch with CUDA", file=sys.stderr)
        return 2
    size = args.size_mib * MiB
    try:
        driver = cudaprobe.load_driver()
        src = open_source(None)
    except GpuscopeError as e:
        print(f"probe_check: {e}", file=sys.stderr)
        return 2
    try:
        inv = src.inventory
        gpus = [int(x) for x in args.gpus.split(",")] if args.gpus else [d.index for d in inv.devices]
        from gpuscope.cli.probe import link_reader

        t0 = time.time()
        result = cudaprobe.probe(inv, gpus, copy_bytes=size, trials=args.trials, driver=driver,
                                 link_now=link_reader(src.nvml), progress=lambda s: print(f"  {s}", file=sys.stderr))
        probe_s = time.time() - t0
    finally:
        src.close()
    # torch numbers CUDA devices its own way; map gpuscope's (NVML) indices to torch's by PCI bus id
    from gpuscope.core.topology import normalize_bus_id

    by_bus = {}
    for k in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(k)
        try:
            bus = f"{getattr(props, 'pci_domain_id', 0):08x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
        except (AttributeError, TypeError, ValueError):
            continue
        by_bus[normalize_bus_id(bus)] = k
    tmap = {d.index: by_bus.get(normalize_bus_id(d.bus_id), d.index) for d in inv.devices}
    t1 = time.time()
    tf_raw = torch_figures(torch, [tmap[i] for i in gpus], size, args.trials)
    torch_s = time.time() - t1
    back = {v: k for k, v in tmap.items()}

    def rename(key: str) -> str:
        head, kind = key.split(" ")
        parts = [f"GPU{back[int(x[3:])]}" for x in head.split("-")]
        return f"{'-'.join(parts)} {kind}"

    tf = {rename(k): v for k, v in tf_raw.items()}
    pf = probe_figures(result)
    print(f"\n{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}  {platform.node()}  {result.backend}  "
          f"torch {torch.__version__}  {args.trials} trials of {args.size_mib} MiB  "
          f"(probe {probe_s:.1f} s, torch {torch_s:.1f} s)")
    for d in inv.devices:
        if d.index in gpus:
            print(f"GPU{d.index} {d.name} {d.bus_id} NUMA {d.numa_node} (torch cuda:{tmap[d.index]})")
    print(f"\n{'figure':<18} {'probe GB/s':>11} {'torch GB/s':>11} {'diff':>7}")
    worst = 0.0
    for key in pf:
        if key not in tf:
            continue
        diff = (pf[key] - tf[key]) / tf[key] * 100
        worst = max(worst, abs(diff))
        ok = "ok" if abs(diff) <= args.tolerance else "OFF"
        print(f"{key:<18} {pf[key] / 1e9:>11.2f} {tf[key] / 1e9:>11.2f} {diff:>+6.1f}% {ok}")
    print(f"\nworst difference {worst:.1f} % (goal: within {args.tolerance:g} %)\n")
    print("\n".join(P.table_lines(result)))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps({"probe": P.to_json(result), "probe_gb_per_s": {
            k: v / 1e9 for k, v in pf.items()}, "torch_gb_per_s": {k: v / 1e9 for k, v in tf.items()},
            "worst_difference_pct": worst, "torch": torch.__version__, "host": platform.node(),
            "pid": os.getpid()}, indent=2))
    return 0 if worst <= args.tolerance else 1


if __name__ == "__main__":
    raise SystemExit(main())
