#!/usr/bin/env bash
# Validate the NVML source on real GPUs and capture the demo recording (see docs/real-gpus.md).
# Usage (on a machine with NVIDIA GPUs, PyTorch and nvidia-ml-py): OUT=outdir tools/device_validate.sh
set -uo pipefail
OUT=${OUT:-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
python3 -m pip install -q --no-deps --no-build-isolation . 2>&1 | tail -2
command -v gpuscope || export PATH="$HOME/.local/bin:$PATH"
nvidia-smi -L; nvidia-smi topo -m | tee "$OUT/nvidia-smi-topo.txt"
nvidia-smi -q | grep -A12 'GPU Link Info' | head -26 > "$OUT/nvidia-smi-link.txt"
python3 -c 'import pynvml; print("nvidia-ml-py", getattr(pynvml, "__version__", "?"))'
gpuscope topo | tee "$OUT/topo.txt"; gpuscope topo --json > "$OUT/topo.json"; echo "topo rc=$?"
python3 benchmarks/bench_nvml.py --real --ticks 30 --json "$OUT/bench_nvml_real.json"
gpuscope record -o "$OUT/h200-demo.jsonl.gz" --interval 0.5 -- python3 tools/load_phases.py --out "$OUT/phases.json"
echo "record rc=$?"
python3 tools/phase_report.py "$OUT/h200-demo.jsonl.gz" "$OUT/phases.json" | tee "$OUT/phase_report.txt"
