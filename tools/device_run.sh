#!/usr/bin/env bash
# One real-GPU run: install the wheels in .whl/ (if any), validate NVML/topology against nvidia-smi, measure the
# NVML tick, measure gpuscope beside nvitop and dmon concurrently, record real load phases. Results under $OUT.
# Usage: OUT=outdir IDLE=20 LOAD=40 tools/device_run.sh
set -uo pipefail
OUT=${OUT:-out}; mkdir -p "$OUT/r"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site
fi
python3 -m pip install -q --no-deps --no-build-isolation . 2>&1 | tail -1
command -v gpuscope >/dev/null || export PATH="$HOME/.local/bin:$PATH"
{ date -u; nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1
  python3 -c 'import pynvml, textual; print("nvidia-ml-py", pynvml.__file__, "textual", textual.__version__)'; } \
  2>&1 | tee "$OUT/r/machine.txt"
nvidia-smi topo -m > "$OUT/r/nvidia-smi-topo.txt" 2>&1
nvidia-smi -q > "$OUT/r/nvidia-smi-q.txt" 2>&1
nvidia-smi nvlink -s > "$OUT/r/nvidia-smi-nvlink-s.txt" 2>&1
gpuscope topo > "$OUT/r/topo.txt" 2>&1; echo "topo rc=$?" >> "$OUT/r/topo.txt"
gpuscope topo --json > "$OUT/r/topo.json" 2>&1
python3 -X faulthandler benchmarks/bench_nvml.py --real --ticks 30 --json "$OUT/r/bench_nvml_real.json" \
  > "$OUT/r/bench_nvml.txt" 2>&1
python3 benchmarks/bench_peers_concurrent.py --idle "${IDLE:-20}" --load "${LOAD:-40}" --warmup "${WARMUP:-6}" \
  --json "$OUT/r/peers.json" \
  > "$OUT/r/peers.txt" 2>&1
if [ "${PROCS:-0}" = 1 ]; then  # the processes panel's data under a real CUDA process on every GPU
  python3 -c "import sys; sys.path.insert(0, 'benchmarks'); from bench_peers import LOAD; exec(LOAD)" &
  load=$!
  sleep 10
  python3 tools/processes_probe.py --reads 2 > "$OUT/r/processes_probe.txt" 2>&1
  gpuscope record -o "$OUT/r/procs.jsonl.gz" --duration 12 > "$OUT/r/procs_record.txt" 2>&1
  kill $load; wait $load 2>/dev/null
  python3 - "$OUT/r/procs.jsonl.gz" >> "$OUT/r/processes_probe.txt" 2>&1 <<'PY'
import gzip, json, sys
last = [json.loads(l) for l in gzip.open(sys.argv[1], "rt") if '"gpus"' in l][-1]
print("last recorded frame's processes:")
for g in last["gpus"]:
    print(g.get("index"), json.dumps(g.get("processes")))
PY
  ps -eo pid,user,args | grep -i "[p]ython3 -c" >> "$OUT/r/processes_probe.txt"
fi
if [ "${PHASES:-0}" = 1 ]; then
  gpuscope record -o "$OUT/r/phases.jsonl.gz" --interval 0.5 \
    --note "real load phases by tools/load_phases.py on a lent H200 machine; captured by tools/device_run.sh" \
    -- python3 tools/load_phases.py --out "$OUT/r/phases.json" > "$OUT/r/record.txt" 2>&1
  gpuscope summary "$OUT/r/phases.jsonl.gz" > "$OUT/r/summary.txt" 2>&1
  python3 tools/phase_report.py "$OUT/r/phases.jsonl.gz" "$OUT/r/phases.json" > "$OUT/r/phase_report.txt" 2>&1
fi
cat "$OUT/r/topo.txt" "$OUT/r/nvidia-smi-topo.txt" "$OUT/r/bench_nvml.txt" "$OUT/r/peers.txt" "$OUT"/r/summary.txt \
  "$OUT"/r/processes_probe.txt 2>/dev/null
tar czf "$OUT/results.tgz" -C "$OUT" r && rm -rf "$OUT/r"
