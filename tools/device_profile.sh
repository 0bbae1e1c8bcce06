#!/usr/bin/env bash
# Where the live TUI's CPU goes on a real GPU, function by function: the main and sampler threads profiled by CPU
# time (benchmarks/thread_profile.py, Python ≤ 3.11: the lent machines have 3.12, so this needs an older python3 there) at SIZE (default 120x40), idle then under the bf16 matmul of
# bench_peers.py. Results in $OUT/profile.tgz. Usage: OUT=dir AFTER=65 FOR=45 SIZE=120x40 tools/device_profile.sh
set -uo pipefail
OUT=${OUT:-out}; mkdir -p "$OUT/p"
export PYTHONUNBUFFERED=1
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site
fi
python3 -m pip install -q --no-deps --no-build-isolation . 2>&1 | tail -1
AFTER=${AFTER:-65}; FOR=${FOR:-45}; SIZE=${SIZE:-120x40}
run() {  # $1: phase name
  python3 - "$1" <<PY
import sys; sys.path.insert(0, "benchmarks")
from ptyrun import run_under_pty
cols, rows = (int(x) for x in "$SIZE".split("x"))
cmd = [sys.executable, "benchmarks/thread_profile.py", "--after", "$AFTER", "--for", "$FOR", "--out", "$OUT/p/" + sys.argv[1],
       "--", "--interval", "1"]
print(sys.argv[1], run_under_pty(cmd, $AFTER + $FOR + 5, cols=cols, rows=rows, warmup_s=0))
PY
}
run idle
python3 -c "import sys; sys.path.insert(0, 'benchmarks'); from bench_peers import LOAD; exec(LOAD)" &
load=$!
sleep 8
run load
kill $load; wait $load 2>/dev/null
tar czf "$OUT/profile.tgz" -C "$OUT" p && rm -rf "$OUT/p"
