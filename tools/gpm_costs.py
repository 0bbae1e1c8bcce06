"""What one GPM read costs on a real GPU, metric by metric, and what gpuscope's whole tick costs (CPU).

    python3 tools/gpm_costs.py [--reps 30] [--ticks 20]

For GPU 0: ``nvmlGpmMetricsGet`` over gpuscope's nine metrics, over each metric alone and over the set without
the NVLink or the PCIe pair (CPU ms per call, median of ``--reps``, samples 0.1 s apart); then
``NvmlSource.sample()`` at 0.5 s apart, and the serving-group finder's ``/proc`` work, each as CPU ms
(``time.thread_time``). Run it idle and under load: the figures go in docs/performance.md.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--ticks", type=int, default=20)
    a = ap.parse_args()
    import pynvml as nv

    from gpuscope.sources import nvml as gn

    nv.nvmlInit()
    h = nv.nvmlDeviceGetHandleByIndex(0)
    src = gn.NvmlSource()
    src.open()
    names = {gn.GPM_GR_ENGINE: "gr_engine", gn.GPM_SM_UTIL: "sm_util", gn.GPM_SM_OCC: "sm_occ",
             gn.GPM_TENSOR: "tensor", gn.GPM_DRAM_BW: "dram_bw", gn.GPM_PCIE_TX: "pcie_tx", gn.GPM_PCIE_RX: "pcie_rx",
             gn.GPM_NVLINK_RX: "nvlink_rx", gn.GPM_NVLINK_TX: "nvlink_tx"}
    allm = [*gn._GPM_METRICS, *gn.GPM_SLOW]  # every tick's eight and the health ticks' graphics engine
    sets = [("all nine", allm), ("without NVLink", [m for m in allm if m not in (gn.GPM_NVLINK_RX, gn.GPM_NVLINK_TX)]),
            ("without PCIe", [m for m in allm if m not in (gn.GPM_PCIE_RX, gn.GPM_PCIE_TX)]),
            ("without NVLink and PCIe", [m for m in allm if m not in (gn.GPM_NVLINK_RX, gn.GPM_NVLINK_TX,
                                                                      gn.GPM_PCIE_RX, gn.GPM_PCIE_TX)])]
    sets += [(names[m], [m]) for m in allm]
    print(f"{'GPM metrics':<26} {'MetricsGet CPU ms':>18} {'SampleGet CPU ms':>17}")
    for label, ms in sets:
        gets, samples = [], []
        prev = nv.nvmlGpmSampleAlloc()
        nv.nvmlGpmSampleGet(h, prev)
        for _ in range(a.reps):
            time.sleep(0.1)
            cur = nv.nvmlGpmSampleAlloc()
            c0 = time.thread_time()
            nv.nvmlGpmSampleGet(h, cur)
            c1 = time.thread_time()
            mg = src._gpm_struct()
            mg.version = nv.NVML_GPM_METRICS_GET_VERSION
            mg.numMetrics = len(ms)
            mg.sample1, mg.sample2 = prev, cur
            for k, m in enumerate(ms):
                mg.metrics[k].metricId = m
            c2 = time.thread_time()
            nv.nvmlGpmMetricsGet(mg)
            c3 = time.thread_time()
            nv.nvmlGpmSampleFree(prev)
            prev = cur
            gets.append((c3 - c2) * 1000)
            samples.append((c1 - c0) * 1000)
        nv.nvmlGpmSampleFree(prev)
        print(f"{label:<26} {statistics.median(gets):>18.3f} {statistics.median(samples):>17.3f}")
    ticks = []
    for _ in range(a.ticks):
        time.sleep(0.5)
        c0 = time.thread_time()
        src.sample()
        ticks.append((time.thread_time() - c0) * 1000)
    print(f"NvmlSource.sample(): median {statistics.median(ticks):.3f} ms CPU, mean {statistics.mean(ticks):.3f}, "
          f"max {max(ticks):.3f} (slow ticks every 5 s included)")
    from gpuscope.sources.groups import GroupFinder

    finder = GroupFinder()
    frame = src.sample()
    builds = []
    for _ in range(5):
        c0 = time.thread_time()
        finder.build([], {p.pid: {0} for g in frame.gpus for p in g.processes or ()})
        builds.append((time.thread_time() - c0) * 1000)
    print(f"serving groups, one /proc build: median {statistics.median(builds):.3f} ms CPU "
          f"({sum(len(g.processes or ()) for g in frame.gpus)} GPU processes)")
    src.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
