"""Wall and CPU time of every NVML call the source makes, per GPU (run on a machine with GPUs).

    python tools/nvml_call_costs.py [--reps 40]

CPU time is the calling thread's (time.thread_time), so it shows what NVML burns while it blocks.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import pynvml as nv


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=40)
    a = ap.parse_args()
    nv.nvmlInit()
    h = nv.nvmlDeviceGetHandleByIndex(0)
    fields = [82, 94, 169, 175, 176, 177, 178, 179, 180, 183]
    s1 = nv.nvmlGpmSampleAlloc()
    s2 = nv.nvmlGpmSampleAlloc()
    nv.nvmlGpmSampleGet(h, s1)
    time.sleep(0.2)

    def gpm_metrics() -> None:
        nv.nvmlGpmSampleGet(h, s2)
        mg = nv.c_nvmlGpmMetricsGet_t()
        mg.version = nv.NVML_GPM_METRICS_GET_VERSION
        mg.numMetrics = 8
        mg.sample1, mg.sample2 = s1, s2
        for k, m in enumerate((2, 3, 5, 10, 20, 21, 60, 61)):
            mg.metrics[k].metricId = m
        nv.nvmlGpmMetricsGet(mg)

    def gpm_gr() -> None:  # the graphics engine's activity alone (read on the health ticks)
        nv.nvmlGpmSampleGet(h, s2)
        mg = nv.c_nvmlGpmMetricsGet_t()
        mg.version = nv.NVML_GPM_METRICS_GET_VERSION
        mg.numMetrics = 1
        mg.sample1, mg.sample2 = s1, s2
        mg.metrics[0].metricId = 1
        nv.nvmlGpmMetricsGet(mg)

    def not_found_ok(fn: Callable[..., Any], *args: Any) -> Any:  # "no process ran in the window" costs the call
        try:
            return fn(*args)
        except nv.NVMLError_NotFound:
            return None

    calls = {
        "UtilizationRates": lambda: nv.nvmlDeviceGetUtilizationRates(h),
        "MemoryInfo": lambda: nv.nvmlDeviceGetMemoryInfo(h),
        "ClockInfo x3": lambda: [nv.nvmlDeviceGetClockInfo(h, k) for k in (0, 1, 2)],
        "PowerUsage": lambda: nv.nvmlDeviceGetPowerUsage(h),
        "EnforcedPowerLimit": lambda: nv.nvmlDeviceGetEnforcedPowerLimit(h),
        "TotalEnergyConsumption": lambda: nv.nvmlDeviceGetTotalEnergyConsumption(h),
        "Temperature": lambda: nv.nvmlDeviceGetTemperature(h, 0),
        "PerformanceState": lambda: nv.nvmlDeviceGetPerformanceState(h),
        "CurrentClocksEventReasons": lambda: nv.nvmlDeviceGetCurrentClocksEventReasons(h),
        "CurrPcieLinkGeneration+Width": lambda: (nv.nvmlDeviceGetCurrPcieLinkGeneration(h),
                                                 nv.nvmlDeviceGetCurrPcieLinkWidth(h)),
        "ComputeRunningProcesses": lambda: nv.nvmlDeviceGetComputeRunningProcesses(h),
        "FieldValues (10 health fields)": lambda: nv.nvmlDeviceGetFieldValues(h, fields),
        "FieldValues (memory temp only)": lambda: nv.nvmlDeviceGetFieldValues(h, [82]),
        "FieldValues (PCIe replay only)": lambda: nv.nvmlDeviceGetFieldValues(h, [94]),
        "FieldValues (energy only)": lambda: nv.nvmlDeviceGetFieldValues(h, [nv.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION]),
        "FieldValues (memory temp + energy)": lambda: nv.nvmlDeviceGetFieldValues(
            h, [nv.NVML_FI_DEV_MEMORY_TEMP, nv.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION]),
        "GraphicsRunningProcesses": lambda: nv.nvmlDeviceGetGraphicsRunningProcesses(h),
        "ProcessUtilization (NotFound counts)": lambda: not_found_ok(nv.nvmlDeviceGetProcessUtilization, h, 0),
        "ProcessUtilization (since 15 s ago)": lambda: not_found_ok(
            nv.nvmlDeviceGetProcessUtilization, h, int(time.time() * 1e6) - 15_000_000),
        "ProcessUtilization (since 1 s ago)": lambda: not_found_ok(
            nv.nvmlDeviceGetProcessUtilization, h, int(time.time() * 1e6) - 1_000_000),
        "ProcessesUtilizationInfo (v2 API)": lambda: not_found_ok(nv.nvmlDeviceGetProcessesUtilizationInfo, h, 0),
        "GPM GR engine only": gpm_gr,
        "GPM SampleAlloc+Get+Free": lambda: nv.nvmlGpmSampleFree(nv.nvmlGpmSampleGet(h, nv.nvmlGpmSampleAlloc())),
        "GPM SampleGet only": lambda: nv.nvmlGpmSampleGet(h, s2),
        "GPM SampleGet + MetricsGet (8)": gpm_metrics,
        "PcieThroughput (RX)": lambda: nv.nvmlDeviceGetPcieThroughput(h, 1),
    }
    print(f"{'call (GPU0)':<34} {'wall ms':>9} {'CPU ms':>9}")
    for name, fn in calls.items():
        try:
            fn()
        except nv.NVMLError as e:
            print(f"{name:<34} {'n/a: ' + str(e):>19}")
            continue
        reps = max(5, a.reps // 4) if "Throughput" in name or "GPM" in name else a.reps
        w0, c0 = time.perf_counter(), time.thread_time()
        for _ in range(reps):
            fn()
        w, c = (time.perf_counter() - w0) / reps, (time.thread_time() - c0) / reps
        print(f"{name:<34} {1000 * w:>9.3f} {1000 * c:>9.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
