#!/usr/bin/env bash
# Real-GPU run: tick benchmark, gpuscope beside nvitop and nvidia-smi dmon, demo recording with provenance.
set -uo pipefail
OUT=${OUT:-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site
fi
python3 -m pip install -q --no-deps --no-build-isolation . 2>&1 | tail -1
python3 -m pip show nvidia-ml-py 2>/dev/null | grep -i ^version
python3 -c 'import pynvml; print("NVML_GPM_METRIC_MAX", pynvml.NVML_GPM_METRIC_MAX)'
python3 -X faulthandler benchmarks/bench_nvml.py --real --ticks 30 --json "$OUT/bench_nvml_real.json"
gpuscope topo --json | python3 -c 'import json,sys; d=json.load(sys.stdin); print([(g["numa_node"], g["cpu_affinity"]) for g in d["gpus"]])'
python3 benchmarks/bench_peers.py --seconds ${PEER_SECONDS:-45} --json "$OUT/peers.json"
gpuscope record -o "$OUT/h200-2gpu-load-phases.jsonl.gz" --interval 0.5 \
  --note "real load phases by tools/load_phases.py (idle, bf16 matmul, pinned host<->device copies, device->device copies over NVLink, NCCL all-reduce) on a lent 2x H200 SXM machine; captured by tools/device_peers.sh" \
  -- python3 tools/load_phases.py --out "$OUT/phases.json"
python3 tools/phase_report.py "$OUT/h200-2gpu-load-phases.jsonl.gz" "$OUT/phases.json" | tee "$OUT/phase_report.txt"
