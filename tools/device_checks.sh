#!/usr/bin/env bash
# One real-GPU run of the checks of issues 25-29: memory info v2 beside nvidia-smi and the CPU of the new NVML
# calls (tools/device_health_check.py), the link probe beside PyTorch (tools/probe_check.py) and as a command,
# a serving group found from a real process (tools/groups_check.py), and a real recording under load with the
# probe in it, summarised. Read-only for the GPUs: no setting is changed. Results under $OUT (results.tgz).
# Usage (repository root, on the GPU machine, wheels for textual & co. in .whl/): OUT=outdir tools/device_checks.sh
set -uo pipefail
OUT=${OUT:-out}; mkdir -p "$OUT/c"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site
fi
python3 -m pip install -q --no-deps --no-build-isolation . 2>&1 | tail -1
command -v gpuscope >/dev/null || export PATH="$HOME/.local/bin:$PATH"
R="$OUT/c"
{ date -u; nvidia-smi -L; nvidia-smi --query-gpu=driver_version,memory.used,memory.reserved,memory.total --format=csv
  python3 -c 'import pynvml, textual; print("nvidia-ml-py", pynvml.__file__, "textual", textual.__version__)'
  python3 -c 'import cuda.bindings; print("cuda-bindings", cuda.bindings.__version__)'; } > "$R/machine.txt" 2>&1
step() { local name=$1; shift; local t0=$SECONDS; timeout "${LIMIT:-120}" "$@" > "$R/$name.txt" 2>&1
         echo "$name rc=$? $((SECONDS - t0)) s" | tee -a "$R/steps.txt"; }
step health python3 tools/device_health_check.py --reps 100
step probe_check python3 tools/probe_check.py --trials 7 --size-mib 256 --json-out "$R/probe_check.json"
step probe_table gpuscope probe --yes
step probe_json sh -c 'gpuscope probe --yes --json > '"$R"'/probe.json'
step groups python3 tools/groups_check.py --seconds 15
step topo gpuscope topo
# a real recording: the probe first (--probe-links), then idle, a bf16 matmul, idle; then summary and export
LOAD='import time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16); b = torch.randn_like(a)
time.sleep(4); t = time.time()
while time.time() - t < 12:
    a @ b
torch.cuda.synchronize(); time.sleep(4)'
LIMIT=150 step record gpuscope record -o "$R/load.jsonl.gz" --probe-links --note "device_checks.sh: idle, bf16 matmul, idle" \
  -- python3 -c "$LOAD"
step summary gpuscope summary "$R/load.jsonl.gz"
step summary_json sh -c 'gpuscope summary --json '"$R"'/load.jsonl.gz > '"$R"'/summary.json'
step export gpuscope export "$R/load.jsonl.gz" --csv "$R/load.csv"
step nvml_bench python3 -X faulthandler benchmarks/bench_nvml.py --real --ticks 30 --json "$R/bench_nvml_real.json"
cat "$R/steps.txt"
tar czf "$OUT/results.tgz" -C "$OUT" c && rm -rf "$OUT/c"
