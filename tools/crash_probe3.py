import subprocess, sys
CASES = {
 "G1 throughput, no NVLink fields": "from gpuscope.sources.nvml import NvmlSource\nt=NvmlSource(pcie_mode='throughput'); t.open(); t._nvlink_links={0:[],1:[]}\nfor _ in range(5): t.sample()\nprint('ok')",
 "G2 throughput, 1 worker": "from concurrent.futures import ThreadPoolExecutor\nfrom gpuscope.sources.nvml import NvmlSource\nt=NvmlSource(pcie_mode='throughput'); t.open(); t._pool=ThreadPoolExecutor(1)\nfor _ in range(5): t.sample()\nprint('ok')",
 "G3 raw NVLink fields x10": "import pynvml as nv\nnv.nvmlInit(); h=nv.nvmlDeviceGetHandleByIndex(0)\nids=[(f,l) for l in range(18) for f in (138,139)]\nfor _ in range(10): v=nv.nvmlDeviceGetFieldValues(h, ids)\nprint('ok', v[0].value.ullVal, v[0].nvmlReturn)",
 "G4 raw NVLink fields 1 link x10": "import pynvml as nv\nnv.nvmlInit(); h=nv.nvmlDeviceGetHandleByIndex(0)\nfor _ in range(10): v=nv.nvmlDeviceGetFieldValues(h, [(138,0),(139,0)])\nprint('ok', v[0].value.ullVal)",
}
for name, code in CASES.items():
    p = subprocess.run([sys.executable, "-X", "faulthandler", "-c", code], capture_output=True, text=True, timeout=60)
    print(f"{name:<40} rc={p.returncode} {(p.stdout.strip().splitlines() or [''])[-1][:40]} {(p.stderr.strip().splitlines() or [''])[0][:80]}", flush=True)
