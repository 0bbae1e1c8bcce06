"""The processes panel's data on real GPUs: what NVML and /proc give, and what each process call costs.

    python tools/processes_probe.py [--reads 3] [--simulate SCENARIO]

Reads the process lists through gpuscope's own NVML source (slow path, every 5 s: ``--reads`` reads
take about 5 s each), prints every GPU's processes as the panel shows them (PID, user, GPU memory,
SM %, command), says which process calls answered NotSupported, and times the three raw calls
(``nvmlDeviceGetComputeRunningProcesses``, ``…GraphicsRunningProcesses``, ``…ProcessUtilization``) per GPU:
wall and calling-thread CPU, median of 20. Run it while a model is served (e.g. vLLM) so the lists are
not empty. ``--simulate`` runs the same over a scenario (no GPU needed; the figures are then simulated).
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from gpuscope.core.model import Frame
from gpuscope.sources.live import open_source
from gpuscope.widgets.processes_panel import process_lines


def _cost(fn: Any, reps: int = 20) -> tuple[float, float, str]:
    """Median wall and thread-CPU ms of ``fn()``, and how it answered (ok / the NVML error)."""
    walls, cpus, answer = [], [], "ok"
    for _ in range(reps):
        w0, c0 = time.perf_counter(), time.thread_time()
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - the answer is the point
            answer = type(e).__name__
        walls.append((time.perf_counter() - w0) * 1e3)
        cpus.append((time.thread_time() - c0) * 1e3)
    return statistics.median(walls), statistics.median(cpus), answer


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reads", type=int, default=3, help="slow-path reads (5 s apart)")
    ap.add_argument("--simulate", default=None)
    a = ap.parse_args()
    src = open_source(a.simulate, pcie_block_s=0.0)
    inv = src.inventory
    assert inv is not None
    print(f"{inv.host}: {len(inv.devices)} GPU, driver {inv.driver_version}"
          + ("  (SIMULATED)" if inv.simulated else ""))
    frame: Frame | None = None
    for k in range(max(1, a.reads)):
        if k:
            time.sleep(src.slow_interval_s + 0.1)
        frame = src.sample()
    for i in range(len(inv.devices)):
        print(f"\nGPU{i} {inv.devices[i].name}")
        for line in process_lines(frame, 100, 40, gpu=i):
            print("  " + line.plain)
    unsupported = sorted(k for k in src._unsupported if k[1] in ("procs", "gprocs", "proc_util"))
    print("\nNotSupported (never asked again):", ", ".join(f"GPU{i} {key}" for i, key in unsupported) or "none")
    nv = src.nvml
    print("\ncall costs, median of 20 (ms wall / ms CPU of the calling thread / answer)")
    for i, h in enumerate(src._handles):
        seen = src._util_seen.get(i, 0)
        for name, fn in (("ComputeRunningProcesses", lambda h=h: nv.nvmlDeviceGetComputeRunningProcesses(h)),
                         ("GraphicsRunningProcesses", lambda h=h: nv.nvmlDeviceGetGraphicsRunningProcesses(h)),
                         ("ProcessUtilization", lambda h=h, s=seen: nv.nvmlDeviceGetProcessUtilization(h, s))):
            wall, cpu, answer = _cost(fn)
            print(f"  GPU{i} {name:<26} {wall:7.3f} {cpu:7.3f}  {answer}")
    src.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
