"""Cost of one tick of the NVML source: CPU time per GPU and wall time per tick.

    python benchmarks/bench_nvml.py            # simulated 1, 2, 4, 8 GPUs, GPM and fallback paths
    python benchmarks/bench_nvml.py --real     # this machine's GPUs (real NVML), both PCIe paths

The simulated ``nvmlDeviceGetPcieThroughput`` blocks 20 ms like the real one, so the fallback
path's wall time is meaningful: it must stay near 20 ms, not grow as 40 ms × GPUs.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import write_json  # noqa: E402

from gpuscope.sources import scenario as sc_mod
from gpuscope.sources.nvml import NvmlSource
from gpuscope.sources.simnvml import SimNvml


def sim_scenario(n: int, gpm: bool) -> sc_mod.Scenario:
    return sc_mod.parse({
        "name": f"bench-{n}", "gpus": [{"count": n, "name": "NVIDIA Bench", "gpm": gpm, "pcie_gen_gpu_max": 4}],
        "topology": {"default_path": "SYS"},
        "phases": [{"duration_s": 1e9, "util_gpu_pct": 90, "pcie_rx_gb_per_s": 5, "pcie_tx_gb_per_s": 1}],
    }, "bench")


def measure(src: NvmlSource, ticks: int) -> dict[str, float]:
    src.sample()  # probe
    n = len(src.inventory.devices)
    walls = []
    c0 = time.process_time()
    for _ in range(ticks):
        t = time.perf_counter()
        src.sample()
        walls.append(time.perf_counter() - t)
        time.sleep(0.1)  # GPM needs ≥ 100 ms between samples; also what a live loop does
    cpu = time.process_time() - c0
    walls.sort()
    return {"gpus": n, "cpu_ms_per_gpu": 1000 * cpu / ticks / n, "cpu_ms_per_tick": 1000 * cpu / ticks,
            "wall_ms_p50": 1000 * walls[len(walls) // 2], "wall_ms_max": 1000 * walls[-1]}


def run(real: bool, ticks: int) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    if real:
        for mode in ("auto", "throughput"):
            src = NvmlSource(pcie_mode=mode)
            src.open()
            label = "GPM" if mode == "auto" and any(d.gpm_supported for d in src.inventory.devices) else "fallback"
            rows.append({"source": "real NVML", "pcie_path": label, **measure(src, ticks)})
            src.close()
        return rows
    for gpm in (True, False):
        for n in (1, 2, 4, 8):
            src = NvmlSource(SimNvml(sim_scenario(n, gpm)), simulated=True)
            src.open()
            rows.append({"source": "simulated", "pcie_path": "GPM" if gpm else "fallback", **measure(src, ticks)})
            src.close()
    return rows


def table(rows: list[dict[str, object]]) -> str:
    head = f"{'source':<11} {'PCIe path':<9} {'GPUs':>4} {'CPU ms/GPU':>10} {'CPU ms/tick':>11} {'wall p50 ms':>11} {'wall max ms':>11}"
    out = [head, "-" * len(head)]
    for r in rows:
        out.append(f"{r['source']:<11} {r['pcie_path']:<9} {r['gpus']:>4} {r['cpu_ms_per_gpu']:>10.3f} "
                   f"{r['cpu_ms_per_tick']:>11.3f} {r['wall_ms_p50']:>11.1f} {r['wall_ms_max']:>11.1f}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--real", action="store_true")
    ap.add_argument("--ticks", type=int, default=30)
    ap.add_argument("--json", metavar="FILE")
    a = ap.parse_args(argv)
    rows = run(a.real, a.ticks)
    print(table(rows))
    write_json(a.json, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
