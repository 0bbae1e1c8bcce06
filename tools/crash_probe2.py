import subprocess, sys
CASES = {
 "F1 auto open/sample2/close once": "from gpuscope.sources.nvml import NvmlSource\ns=NvmlSource(); s.open(); s.sample(); s.sample(); s.close()\nprint('ok')",
 "F2 close w/o GPM free, reopen": "from gpuscope.sources.nvml import NvmlSource\ns=NvmlSource(); s.open(); s.sample(); s.sample(); s._gpm_prev.clear(); s.close()\nt=NvmlSource(pcie_mode='throughput'); t.open(); t.sample(); t.close()\nprint('ok')",
 "F3 free GPM, no shutdown, reopen": "import pynvml\nfrom gpuscope.sources.nvml import NvmlSource\ns=NvmlSource(); s.open(); s.sample(); s.sample(); pynvml.nvmlShutdown=lambda: None; s.close()\nt=NvmlSource(pcie_mode='throughput'); t.open(); t.sample(); t.close()\nprint('ok')",
 "F4 throughput only": "from gpuscope.sources.nvml import NvmlSource\nt=NvmlSource(pcie_mode='throughput'); t.open(); t.sample(); t.sample(); t.close()\nprint('ok')",
 "F5 raw: init,gpm alloc/get/free,shutdown,init": "import pynvml as nv\nnv.nvmlInit(); h=nv.nvmlDeviceGetHandleByIndex(0); s=nv.nvmlGpmSampleAlloc(); nv.nvmlGpmSampleGet(h,s); nv.nvmlGpmSampleFree(s); nv.nvmlShutdown(); nv.nvmlInit(); h=nv.nvmlDeviceGetHandleByIndex(0); print(nv.nvmlDeviceGetName(h)); nv.nvmlShutdown(); print('ok')",
}
for name, code in CASES.items():
    p = subprocess.run([sys.executable, "-X", "faulthandler", "-c", code], capture_output=True, text=True, timeout=60)
    print(f"{name:<45} rc={p.returncode} {(p.stdout.strip().splitlines() or [''])[-1][:20]} {(p.stderr.strip().splitlines() or [''])[0][:90]}", flush=True)
