#!/usr/bin/env bash
# Everything gpuscope runs on a machine with NVIDIA GPUs, as one command (docs/real-gpus.md says what each task
# found; docs/performance.md how its figures are read):
#
#   tools/gpu_machine.sh TASK [OUT]        from the repository root; results in OUT (default out/)/TASK.tgz
#
#   validate  topology beside nvidia-smi, the NVML tick's cost, a recording of real load phases (bf16 matmul,
#             host<->device and device->device copies, NCCL all-reduce: tools/load_phases.py) with its summary
#             and per-phase means beside what the load measured (tools/phase_report.py)
#   checks    memory info v2 / ECC / Xid calls beside nvidia-smi (tools/device_health_check.py), the link probe
#             beside PyTorch (tools/probe_check.py) and as `gpuscope probe`, a serving group found from a real
#             process (tools/groups_check.py), a recording under load with the probe in it, summary and export
#   peers     CPU, memory and bytes to the terminal: every gpuscope, nvitop and `nvidia-smi dmon` at once, idle
#             then under a bf16 matmul, each gpuscope thread's own CPU clock (benchmarks/bench_peers_concurrent.py
#             --threads), and a cProfile of `gpuscope record` under the load.
#             WARMUP=70 IDLE=60 LOAD=60; VARIANT=name=DIR runs another checkout's TUIs in the same minutes;
#             SECTIONS=1 times named functions too (benchmarks/section_cpu.py)
#   users     the peers comparison with every tool installed as its users install it: gpuscope (this tree's wheel,
#             .whl/new/, and BASE's in .whl/base/ when there) and nvitop (.whl/nv/) each alone in its own venv from
#             .whl/gs/ and .whl/nv/, started by their own commands (`gpuscope`, `nvitop --interval 1`): CPU s/min
#             and peak RSS (VmHWM) of each at once, idle then under a bf16 matmul; and each live import's RSS.
#             WARMUP=20 IDLE=60 LOAD=60
#   profile   where the live TUI's CPU goes, without a tracer's overhead: py-spy samples it (120x40 under a pty)
#             idle and under load, and each NVML call's cost idle and under load (tools/nvml_call_costs.py).
#             Needs py-spy (its wheel in .whl/). WARMUP=40 IDLE=60 LOAD=60 SIZE=120x40
#   exporter  `gpuscope agent --prometheus` on real NVML, scraped every second for 40 s around a 20 s matmul, with
#             nvidia-smi's power beside it; check the scrapes afterwards with tools/exporter_scrapes.py DIR
#   crash     which NVML field-value calls corrupt the heap on this driver, each in its own process
#             (tools/crash_probe.py)
#
# Wheels in .whl/ (textual, nvitop, py-spy, …, for a machine without an index) are installed first into /tmp/site.
# Every task only reads the GPUs: no setting is changed.
set -uo pipefail
cd "$(dirname "$0")/.."
task=${1:?usage: tools/gpu_machine.sh validate|checks|peers|profile|exporter|crash [OUT]}
OUT=${2:-${OUT:-out}}
case $task in validate|checks|peers|users|profile|exporter|crash) ;;
  *) echo "gpu_machine.sh: unknown task $task (validate, checks, peers, users, profile, exporter, crash)" >&2; exit 2 ;; esac
R="$OUT/$task"; mkdir -p "$R"
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if compgen -G ".whl/*.whl" >/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site PATH="/tmp/site/bin:$PATH"
fi
python3 -m pip install -q --no-deps --no-build-isolation . 2>&1 | tail -1
command -v gpuscope >/dev/null || export PATH="$HOME/.local/bin:$PATH"
{ date -u; git log -1 --format='commit %h %s' 2>/dev/null; nvidia-smi -L; nproc
  nvidia-smi --query-gpu=driver_version,memory.used,memory.reserved,memory.total --format=csv
  python3 -c 'import importlib.metadata as m, sys; print("python", sys.version.split()[0],
    *(f"{p} {m.version(p)}" for p in ("nvidia-ml-py", "textual", "rich") ))'; } > "$R/machine.txt" 2>&1
step() {  # NAME CMD…: CMD's output in $R/NAME.txt, its exit status and seconds in $R/steps.txt
  local name=$1; shift; local t0=$SECONDS
  timeout "${LIMIT:-600}" "$@" > "$R/$name.txt" 2>&1
  echo "$name rc=$? $((SECONDS - t0)) s" | tee -a "$R/steps.txt"
}
MATMUL='import sys, time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16); b = torch.randn_like(a)
pre, busy, post = (float(x) for x in sys.argv[1:4]); time.sleep(pre); t = time.time()
while time.time() - t < busy:
    for _ in range(20): a @ b
    torch.cuda.synchronize()
time.sleep(post)'

case $task in
validate)
  step smi_topo nvidia-smi topo -m
  step smi_nvlink nvidia-smi nvlink -s
  step smi_q nvidia-smi -q
  step topo gpuscope topo
  step topo_json sh -c "gpuscope topo --json > '$R/topo.json'"
  step nvml_tick python3 -X faulthandler benchmarks/bench_nvml.py --real --ticks 30 --json "$R/bench_nvml_real.json"
  step record gpuscope record -o "$R/phases.jsonl.gz" --interval 0.5 \
    --note "real load phases by tools/load_phases.py, captured by tools/gpu_machine.sh validate" \
    -- python3 tools/load_phases.py --out "$R/phases.json"
  step summary gpuscope summary "$R/phases.jsonl.gz"
  step phase_report python3 tools/phase_report.py "$R/phases.jsonl.gz" "$R/phases.json"
  ;;
checks)
  step health python3 tools/device_health_check.py --reps 100
  step probe_check python3 tools/probe_check.py --trials 7 --size-mib 256 --json-out "$R/probe_check.json"
  step probe gpuscope probe --yes
  step probe_json sh -c "gpuscope probe --yes --json > '$R/probe.json'"
  step groups python3 tools/groups_check.py --seconds 15
  step record gpuscope record -o "$R/load.jsonl.gz" --probe-links --note "gpu_machine.sh checks: idle, bf16 matmul, idle" \
    -- python3 -c "$MATMUL" 4 12 4
  step summary gpuscope summary "$R/load.jsonl.gz"
  step summary_json sh -c "gpuscope summary --json '$R/load.jsonl.gz' > '$R/summary.json'"
  step export gpuscope export "$R/load.jsonl.gz" --csv "$R/load.csv"
  ;;
peers)
  W=${WARMUP:-70} I=${IDLE:-60} L=${LOAD:-60}
  # bench_peers_concurrent starts its load after warm-up and idle; the profile of `record` runs inside it
  ( sleep $((W + I + 40)); python3 -m cProfile -o "$R/record-load.prof" -m gpuscope record -o /tmp/prof-rec.jsonl.gz \
      --interval 1 --duration "$L" > /dev/null 2>&1 ) &
  prof=$!
  step peers python3 benchmarks/bench_peers_concurrent.py --warmup "$W" --idle "$I" --load "$L" --threads \
    $([ "${SECTIONS:-0}" = 1 ] && echo --sections) ${VARIANT:+--variant "$VARIANT"} --json "$R/peers.json"
  wait $prof
  step record_profile python3 -c "import pstats; s = pstats.Stats('$R/record-load.prof').strip_dirs()
s.sort_stats('tottime').print_stats(40); s.sort_stats('cumtime').print_stats(60)"
  cat "$R/peers.txt"
  ;;
users)
  W=${WARMUP:-20} I=${IDLE:-60} L=${LOAD:-60}
  venv() {  # DIR WHEEL-DIR… PACKAGE…: a venv of its own with only what PACKAGE needs, from the carried wheels
    local dir=$1 links=(); shift
    while [ -d "${1:-}" ]; do links+=(--find-links "$1"); shift; done
    python3 -m venv "$dir" && "$dir/bin/pip" install -q --no-index "${links[@]}" "$@"
  }
  venv /tmp/v-nvitop .whl/nv nvitop || exit 1
  venv /tmp/v-new .whl/gs .whl/new/*.whl || exit 1
  base=()
  if compgen -G ".whl/base/*.whl" >/dev/null; then venv /tmp/v-base .whl/gs .whl/base/*.whl && base=(--variant base=/tmp/v-base/bin/gpuscope); fi
  for py in /tmp/v-new/bin/python /tmp/v-nvitop/bin/python; do "$py" -m pip list 2>/dev/null | wc -l; done > "$R/venvs.txt"
  step imports /tmp/v-new/bin/python -c 'import os, sys, importlib
def rss():
    return next(int(l.split()[1]) // 1024 for l in open("/proc/self/status") if l.startswith("VmRSS:"))
print("python", rss(), "MB")
for m in ("pynvml", "rich", "textual.app", "httpx", "gpuscope.core.session", "gpuscope.sources.nvml", "gpuscope.sources.live",
          "gpuscope.tui.app", "gpuscope.tui.run", "gpuscope.cli.main"):
    importlib.import_module(m); print(m, rss(), "MB")
import pynvml; pynvml.nvmlInit(); print("nvmlInit", rss(), "MB")'
  step users python3 benchmarks/bench_peers_concurrent.py --warmup "$W" --idle "$I" --load "$L" \
    --gpuscope /tmp/v-new/bin/gpuscope --nvitop /tmp/v-nvitop/bin/nvitop "${base[@]}" --json "$R/users.json"
  cat "$R/imports.txt" "$R/users.txt"
  ;;
profile)
  W=${WARMUP:-40} I=${IDLE:-60} L=${LOAD:-60}
  command -v py-spy >/dev/null || { echo "gpu_machine.sh profile: py-spy not found (put its wheel in .whl/)" >&2; exit 1; }
  step costs_idle python3 tools/nvml_call_costs.py --reps 40
  rm -f /tmp/tui.pid
  python3 benchmarks/ptyrun.py --size "${SIZE:-120x40}" --seconds $((W + I + L + 30)) --pid-file /tmp/tui.pid \
    -- python3 -m gpuscope --interval 1 > "$R/pty.txt" 2>&1 &
  for _ in $(seq 50); do [ -s /tmp/tui.pid ] && break; sleep 0.2; done
  pid=$(cat /tmp/tui.pid) || { echo "gpu_machine.sh profile: the TUI did not start" >&2; exit 1; }
  sleep "$W"
  step spy_idle py-spy record --pid "$pid" --rate 2000 --duration "$I" --format raw --threads --nonblocking \
    -o "$R/idle-stacks.txt"
  python3 -c "$MATMUL" 0 $((L + 25)) 0 &
  load=$!
  sleep 15
  step spy_load py-spy record --pid "$pid" --rate 2000 --duration "$L" --format raw --threads --nonblocking \
    -o "$R/load-stacks.txt"
  step costs_load python3 tools/nvml_call_costs.py --reps 40
  wait $load; wait
  ;;
exporter)
  gpuscope agent --prometheus 127.0.0.1:19400 --dcgm-names both > "$R/agent.log" 2>&1 &
  agent=$!
  nvidia-smi --query-gpu=timestamp,power.draw,power.draw.instant,total_energy_consumption,utilization.gpu \
    --format=csv,noheader -lms 1000 > "$R/smi.csv" 2>&1 &
  smi=$!
  sleep 4
  python3 -c "$MATMUL" 8 20 0 &
  load=$!
  python3 - "$R" <<'PY'
import gzip, sys, time, urllib.request
out, url = sys.argv[1], "http://127.0.0.1:19400/metrics"
for i in range(40):
    t = time.time()
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            open(f"{out}/scrape_{i:03d}.txt", "wb").write(r.read())
        with open(f"{out}/scrape_times.txt", "a") as f:
            f.write(f"{i} {t:.3f}\n")
        if i % 10 == 0:
            with urllib.request.urlopen(urllib.request.Request(url, headers={"Accept-Encoding": "gzip"}), timeout=5) as r:
                body, enc = r.read(), r.headers.get("Content-Encoding")
            with open(f"{out}/gzip.txt", "a") as f:
                plain = len(gzip.decompress(body)) if enc == "gzip" else len(body)
                f.write(f"{i} encoding={enc} bytes={len(body)} plain={plain}\n")
    except Exception as e:  # noqa: BLE001
        with open(f"{out}/scrape_errors.txt", "a") as f:
            f.write(f"{i} {e!r}\n")
    time.sleep(max(0.0, 1.0 - (time.time() - t)))
PY
  wait $load
  kill $agent $smi 2>/dev/null; wait $agent 2>/dev/null
  echo "agent rc=$?" >> "$R/agent.log"
  ;;
crash)
  step crash_probe python3 tools/crash_probe.py
  ;;
esac
[ -f "$R/steps.txt" ] && cat "$R/steps.txt"
tar czf "$OUT/$task.tgz" -C "$OUT" "$task" && rm -rf "$R" && echo "results: $OUT/$task.tgz"
