#!/usr/bin/env bash
# One real-GPU run for "where does the CPU go": gpuscope beside nvitop and dmon, all at once, with each gpuscope
# thread's CPU (bench_peers_concurrent.py --threads), and a cProfile of `record` (its sampling runs on the main
# thread) under the same load. Results in $OUT/results.tgz.
# Usage: OUT=outdir WARMUP=70 IDLE=60 LOAD=60 [VARIANT=name=DIR] [SECTIONS=1] tools/device_threads.sh
# (SECTIONS=1: each part's CPU too, benchmarks/section_cpu.py, in place of thread_cpu.py)
set -uo pipefail
OUT=${OUT:-out}; mkdir -p "$OUT/r"
export PYTHONUNBUFFERED=1
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site
fi
python3 -m pip install -q --no-deps --no-build-isolation . 2>&1 | tail -1
{ date -u; nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1; nproc
  python3 -c 'import pynvml, textual, sys; print("python", sys.version.split()[0], "textual", textual.__version__)'; } \
  2>&1 | tee "$OUT/r/machine.txt"
( sleep $(( ${WARMUP:-70} + ${IDLE:-60} + 40 )); \
  python3 -m cProfile -o "$OUT/r/record-load.prof" -m gpuscope record -o /tmp/prof-rec.jsonl.gz --interval 1 \
    --duration "${LOAD:-60}" > /dev/null 2>&1 ) &
prof=$!
python3 benchmarks/bench_peers_concurrent.py --idle "${IDLE:-60}" --load "${LOAD:-60}" --warmup "${WARMUP:-70}" \
  --threads $([ "${SECTIONS:-0}" = 1 ] && echo --sections) ${VARIANT:+--variant "$VARIANT"} --json "$OUT/r/peers.json" 2>&1 | tee "$OUT/r/peers.txt"
wait $prof
python3 -c "import pstats; s = pstats.Stats('$OUT/r/record-load.prof').strip_dirs(); s.sort_stats('tottime').print_stats(40); s.sort_stats('cumtime').print_stats(60)" > "$OUT/r/record-prof.txt" 2>&1
tar czf "$OUT/results.tgz" -C "$OUT" r && rm -rf "$OUT/r"
