import subprocess, sys
code = "from gpuscope.sources.nvml import NvmlSource\nt=NvmlSource(pcie_mode='throughput'); t.open()\nfor _ in range(8): f=t.sample()\nt.close()\nprint('ok', f.gpus[0].nvlink_tx_bytes_per_s, f.gpus[0].pcie_replay_count)"
p = subprocess.run([sys.executable, "-X", "faulthandler", "-c", code], capture_output=True, text=True, timeout=60)
print("G5 throughput mode, split field calls", p.returncode, p.stdout.strip()[-60:], (p.stderr.strip().splitlines() or [''])[0][:80])
