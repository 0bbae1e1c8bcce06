#!/usr/bin/env bash
# Where the live TUI's CPU goes on a real GPU, by thread and function, without a tracing profiler's overhead:
# py-spy samples the running TUI (120×40, 1 s interval, under a pseudo-terminal) for IDLE s, then for LOAD s under
# a bf16 matmul; collapsed stacks per thread in $OUT/results.tgz, with tools/nvml_call_costs.py idle and under load.
# Usage: OUT=outdir WARMUP=40 IDLE=60 LOAD=60 [SIZE=120x40] tools/device_pyspy.sh   (carry .whl with py-spy's wheel)
set -uo pipefail
OUT=${OUT:-out}; mkdir -p "$OUT/r"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  && export PYTHONPATH=/tmp/site
python3 -m pip install -q --no-deps --no-build-isolation . 2>&1 | tail -1
SPY=/tmp/site/bin/py-spy
python3 -c "import importlib.metadata as m, sys; print(sys.version.split()[0], *(p + ' ' + m.version(p) for p in ('rich', 'textual', 'nvidia-ml-py')))" > "$OUT/r/versions.txt" 2>&1
python3 tools/nvml_call_costs.py --reps 40 > "$OUT/r/costs-idle.txt" 2>&1
rm -f /tmp/tui.pid
python3 benchmarks/ptyrun.py --size "${SIZE:-120x40}" --seconds $(( ${WARMUP:-40} + ${IDLE:-60} + ${LOAD:-60} + 30 )) \
  --pid-file /tmp/tui.pid -- python3 -m gpuscope --interval 1 > "$OUT/r/pty.txt" 2>&1 &
for _ in $(seq 50); do [ -s /tmp/tui.pid ] && break; sleep 0.2; done
pid=$(cat /tmp/tui.pid) || { echo "device_pyspy: the TUI did not start" >&2; exit 1; }
sleep "${WARMUP:-40}"
"$SPY" record --pid "$pid" --rate 2000 --duration "${IDLE:-60}" --format raw --threads --nonblocking \
  -o "$OUT/r/idle.txt" > "$OUT/r/spy-idle.log" 2>&1
python3 -c "
import torch, time
a = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16); b = a.clone()
end = time.time() + ${LOAD:-60} + 25
while time.time() < end:
    for _ in range(20): a @ b
    torch.cuda.synchronize()
" &
load=$!
sleep 15
"$SPY" record --pid "$pid" --rate 2000 --duration "${LOAD:-60}" --format raw --threads --nonblocking \
  -o "$OUT/r/load.txt" > "$OUT/r/spy-load.log" 2>&1
python3 tools/nvml_call_costs.py --reps 40 > "$OUT/r/costs-load.txt" 2>&1
wait $load
wait
tar czf "$OUT/results.tgz" -C "$OUT" r && rm -rf "$OUT/r"
