"""Find which NVML usage corrupts the heap on a given driver: each case runs in its own process.

On 2x H200 / driver 580.159.04 / nvidia-ml-py 13.610 (docs/measurements/nvml_crash_probes.txt) the
cases that mix health and per-link NVLink field values in one call (F, F4, G2) aborted; G5, the
split calls gpuscope makes now, did not.

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

CASES.update({
    'F1 auto open/sample2/close once': "from gpuscope.sources.nvml import NvmlSource\ns=NvmlSource(); s.open(); s.sample(); s.sample(); s.close()\nprint('ok')",
    'F2 close w/o GPM free, reopen': "from gpuscope.sources.nvml import NvmlSource\ns=NvmlSource(); s.open(); s.sample(); s.sample(); s._gpm_prev.clear(); s.close()\nt=NvmlSource(pcie_mode='throughput'); t.open(); t.sample(); t.close()\nprint('ok')",
    'F3 free GPM, no shutdown, reopen': "import pynvml\nfrom gpuscope.sources.nvml import NvmlSource\ns=NvmlSource(); s.open(); s.sample(); s.sample(); pynvml.nvmlShutdown=lambda: None; s.close()\nt=NvmlSource(pcie_mode='throughput'); t.open(); t.sample(); t.close()\nprint('ok')",
    'F4 throughput only': "from gpuscope.sources.nvml import NvmlSource\nt=NvmlSource(pcie_mode='throughput'); t.open(); t.sample(); t.sample(); t.close()\nprint('ok')",
    'F5 raw: init,gpm alloc/get/free,shutdown,init': "import pynvml as nv\nnv.nvmlInit(); h=nv.nvmlDeviceGetHandleByIndex(0); s=nv.nvmlGpmSampleAlloc(); nv.nvmlGpmSampleGet(h,s); nv.nvmlGpmSampleFree(s); nv.nvmlShutdown(); nv.nvmlInit(); h=nv.nvmlDeviceGetHandleByIndex(0); print(nv.nvmlDeviceGetName(h)); nv.nvmlShutdown(); print('ok')",
    'G1 throughput, no NVLink fields': "from gpuscope.sources.nvml import NvmlSource\nt=NvmlSource(pcie_mode='throughput'); t.open(); t._nvlink_links={0:[],1:[]}\nfor _ in range(5): t.sample()\nprint('ok')",
    'G2 throughput, 1 worker': "from concurrent.futures import ThreadPoolExecutor\nfrom gpuscope.sources.nvml import NvmlSource\nt=NvmlSource(pcie_mode='throughput'); t.open(); t._pool=ThreadPoolExecutor(1)\nfor _ in range(5): t.sample()\nprint('ok')",
    'G3 raw NVLink fields x10': "import pynvml as nv\nnv.nvmlInit(); h=nv.nvmlDeviceGetHandleByIndex(0)\nids=[(f,l) for l in range(18) for f in (138,139)]\nfor _ in range(10): v=nv.nvmlDeviceGetFieldValues(h, ids)\nprint('ok', v[0].value.ullVal, v[0].nvmlReturn)",
    'G4 raw NVLink fields 1 link x10': "import pynvml as nv\nnv.nvmlInit(); h=nv.nvmlDeviceGetHandleByIndex(0)\nfor _ in range(10): v=nv.nvmlDeviceGetFieldValues(h, [(138,0),(139,0)])\nprint('ok', v[0].value.ullVal)",
    'G5 throughput mode, split field calls (the fix)': "from gpuscope.sources.nvml import NvmlSource\nt=NvmlSource(pcie_mode='throughput'); t.open()\nfor _ in range(8): f=t.sample()\nt.close()\nprint('ok')",
})

for name, code in CASES.items():
    p = subprocess.run([sys.executable, "-X", "faulthandler", "-c", code], capture_output=True, text=True, timeout=120)
    tail = (p.stderr.strip().splitlines() or [""])[0][:100]
    out = (p.stdout.strip().splitlines() or [""])[-1][:30]
    print(f"{name:<48} rc={p.returncode} {out} {tail}", flush=True)
