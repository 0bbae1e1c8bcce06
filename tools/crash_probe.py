"""Find which NVML usage corrupts the heap on a given driver: each case runs in its own process.

    python tools/crash_probe.py
"""

from __future__ import annotations

import subprocess
import sys

CASES = {
    "A raw GPM 10 Hz (binding's struct)": """
import pynvml as nv, time
nv.nvmlInit(); hs=[nv.nvmlDeviceGetHandleByIndex(i) for i in range(nv.nvmlDeviceGetCount())]
prev={}
for k in range(60):
    for i,h in enumerate(hs):
        s=nv.nvmlGpmSampleAlloc(); nv.nvmlGpmSampleGet(h,s)
        if i in prev:
            mg=nv.c_nvmlGpmMetricsGet_t(); mg.version=nv.NVML_GPM_METRICS_GET_VERSION; mg.numMetrics=8
            mg.sample1=prev[i]; mg.sample2=s
            for j,m in enumerate((2,3,5,10,20,21,60,61)): mg.metrics[j].metricId=m
            nv.nvmlGpmMetricsGet(mg); nv.nvmlGpmSampleFree(prev[i])
        prev[i]=s
    time.sleep(0.1)
""",
    "B NvmlSource auto 10 Hz": """
import time
from gpuscope.sources.nvml import NvmlSource
s=NvmlSource(); s.open()
for k in range(60): s.sample(); time.sleep(0.1)
""",
    "C NvmlSource auto 10 Hz, no slow readings": """
import time
from gpuscope.sources.nvml import NvmlSource
s=NvmlSource(slow_interval_s=1e9); s.open(); s.sample(); s._slow_last=time.time()
for k in range(60): s.sample(); time.sleep(0.1)
""",
    "D field values x10 in 4 threads": """
import pynvml as nv, threading, time
nv.nvmlInit(); h=nv.nvmlDeviceGetHandleByIndex(0)
def w():
    t=time.time()
    while time.time()-t<4: nv.nvmlDeviceGetFieldValues(h,[82,94,169,175,176,177,178,179,180,183])
ts=[threading.Thread(target=w) for _ in range(4)]; [t.start() for t in ts]; [t.join() for t in ts]
""",
    "E processes + energy 10 Hz": """
import pynvml as nv, time
nv.nvmlInit(); h=nv.nvmlDeviceGetHandleByIndex(0)
for k in range(40): nv.nvmlDeviceGetComputeRunningProcesses(h); nv.nvmlDeviceGetTotalEnergyConsumption(h); time.sleep(0.05)
""",
    "F NvmlSource open/close twice": """
from gpuscope.sources.nvml import NvmlSource
for m in ("auto","throughput"):
    s=NvmlSource(pcie_mode=m); s.open(); s.sample(); s.sample(); s.close()
""",
}

for name, code in CASES.items():
    p = subprocess.run([sys.executable, "-X", "faulthandler", "-c", code], capture_output=True, text=True, timeout=120)
    tail = (p.stderr.strip().splitlines() or [""])[0][:100]
    print(f"{name:<45} rc={p.returncode} {tail}", flush=True)
