#!/usr/bin/env bash
# One real-GPU run of the exporter (issue 30): `gpuscope agent --prometheus --dcgm-names both` on real NVML,
# scraped every second for ~40 s while a bf16 matmul runs for 20 s in the middle, with nvidia-smi's power beside
# it; plain and gzip scrapes. Read-only for the GPUs. The scrapes are checked afterwards with promtool and
# tools/exporter_scrapes.py on the dev machine. Results: $OUT/exporter.tgz.
# Usage (repository root, on the GPU machine, wheels for textual & co. in .whl/): OUT=outdir tools/device_exporter_check.sh
set -uo pipefail
OUT=${OUT:-out}; R="$OUT/x"; mkdir -p "$R"
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site
fi
python3 -m pip install -q --no-deps --no-build-isolation . 2>&1 | tail -1
command -v gpuscope >/dev/null || export PATH="$HOME/.local/bin:$PATH"
{ date -u; nvidia-smi -L; nvidia-smi --query-gpu=driver_version,power.draw,memory.used,memory.reserved --format=csv; } > "$R/machine.txt" 2>&1
gpuscope agent --prometheus 127.0.0.1:19400 --dcgm-names both > "$R/agent.log" 2>&1 &
agent=$!
nvidia-smi --query-gpu=timestamp,power.draw,power.draw.instant,total_energy_consumption,utilization.gpu --format=csv,noheader -lms 1000 > "$R/smi.csv" 2>&1 &
smi=$!
sleep 4
python3 - "$R" <<'PY' &
import sys, time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16); b = torch.randn_like(a)
time.sleep(8); t = time.time()
while time.time() - t < 20:
    a @ b
torch.cuda.synchronize()
PY
load=$!
python3 - "$R" <<'PY'
import gzip, sys, time, urllib.request
out = sys.argv[1]
for i in range(40):
    t = time.time()
    try:
        with urllib.request.urlopen("http://127.0.0.1:19400/metrics", timeout=5) as r:
            open(f"{out}/scrape_{i:03d}.txt", "wb").write(r.read())
        with open(f"{out}/scrape_times.txt", "a") as f:
            f.write(f"{i} {t:.3f}\n")
        if i % 10 == 0:
            req = urllib.request.Request("http://127.0.0.1:19400/metrics", headers={"Accept-Encoding": "gzip"})
            with urllib.request.urlopen(req, timeout=5) as r:
                body = r.read()
                enc = r.headers.get("Content-Encoding")
            with open(f"{out}/gzip.txt", "a") as f:
                f.write(f"{i} encoding={enc} bytes={len(body)} "
                        f"plain={len(gzip.decompress(body)) if enc == 'gzip' else len(body)}\n")
    except Exception as e:  # noqa: BLE001
        with open(f"{out}/scrape_errors.txt", "a") as f:
            f.write(f"{i} {e!r}\n")
    time.sleep(max(0.0, 1.0 - (time.time() - t)))
PY
wait $load
kill $agent $smi 2>/dev/null; wait $agent 2>/dev/null
echo "agent rc=$?" >> "$R/agent.log"
tar czf "$OUT/exporter.tgz" -C "$OUT" x && rm -rf "$R"
