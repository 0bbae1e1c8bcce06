"""Run every benchmark and print one table (and write it as JSON).

    python benchmarks/run_all.py [--quick] [--json benchmarks.json]

Covers: NVML source tick cost per GPU count (simulated; add --real on a GPU machine), the TUI under a
real pty at 1 and 10 Hz, recorder cost and size, opening and seeking a 24-hour 8-GPU recording, and
/metrics parsing and polling, the Prometheus exporter's scrape cost, and the findings engine per frame. The side-by-side run against nvitop and nvidia-smi needs GPUs:
`python benchmarks/bench_peers.py` (docs/performance.md has the figures from 2× H200).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def run(script: str, *args: str) -> object:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    subprocess.run([sys.executable, os.path.join(HERE, script), *args, "--json", out], check=True,
                   stdout=subprocess.DEVNULL)
    with open(out) as f:
        data = json.load(f)
    os.unlink(out)
    return data


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="shorter runs (1-hour recording, 15 s TUI)")
    ap.add_argument("--real", action="store_true", help="also the NVML source on this machine's GPUs")
    ap.add_argument("--json", metavar="FILE", default="benchmarks.json")
    a = ap.parse_args(argv)
    rows: list[tuple[str, str, str]] = []
    nvml = run("bench_nvml.py", "--ticks", "15")
    for r in nvml:
        if r["gpus"] in (1, 8):
            rows.append((f"NVML tick, {r['pcie_path']}, {r['gpus']} simulated GPUs",
                         f"{r['cpu_ms_per_gpu']:.2f} ms CPU/GPU, {r['wall_ms_p50']:.1f} ms wall",
                         "wall ≤ 30 ms at 8 GPUs (fallback)"))
    if a.real:
        for r in run("bench_nvml.py", "--real", "--ticks", "20"):
            rows.append((f"NVML tick, {r['pcie_path']}, {r['gpus']} real GPUs",
                         f"{r['cpu_ms_per_gpu']:.2f} ms CPU/GPU, {r['wall_ms_p50']:.1f} ms wall", ""))
    tui = run("bench_tui.py", "--seconds", "15" if a.quick else "60")
    for r in tui:
        hz = "1 Hz" if "1 Hz" in r["case"] else "10 Hz"
        target = "≤ 3 %, ≤ 15 KB/s" if hz == "1 Hz" else "≤ 15 %"
        rows.append((f"TUI, 8 simulated GPUs, 120×40 pty, {hz}", f"{r['cpu_pct']:.2f} % CPU, {r['kb_per_s']:.1f} KB/s, "
                     f"RSS +{r['rss_growth_mb']:.1f} MB", target))
    rec = run("bench_recording.py", "--hours", "1" if a.quick else "24")
    w, r = rec["write"], rec["read"]  # type: ignore[index]
    rows += [("recorder CPU per 8-GPU frame", f"{w['cpu_ms_per_frame']:.3f} ms", "≤ 0.5 ms"),
             ("recording size per GPU-hour, 1 Hz", f"{w['kb_per_gpu_hour']:.0f} KB", "≤ 250 KB"),
             (f"open {w['frames'] // 3600} h × 8 GPU recording", f"{r['open_s']:.2f} s, {r['max_rss_mb']:.0f} MB",
              "≤ 2 s, ≤ 300 MB"),
             ("decode one frame in it (p50 / max)", f"{r['seek_ms_p50']:.1f} / {r['seek_ms_max']:.1f} ms", "≤ 100 ms")]
    seek = run("bench_seek.py", "--hours", "1" if a.quick else "24", "--seeks", "5")
    for r in seek:  # type: ignore[union-attr]
        rows.append((f"replay seek (key → redrawn), {r['window']} window", f"{r['seek_ms_p50']:.0f} / "
                     f"{r['seek_ms_max']:.0f} ms, UI blocked ≤ {r['ui_blocked_ms_max']:.0f} ms", "≤ 50 ms"))
    lk: dict = run("bench_session_lock.py", "--frames", "100" if a.quick else "300")  # type: ignore[assignment]
    rows.append(("session lock held per recorded frame (fsync each)", f"{lk['queued']['held_ms_p50']:.2f} ms p50, "
                 f"UI wait p99 {lk['queued']['ui_wait_ms_p99']:.2f} ms (inline: {lk['inline']['held_ms_p50']:.1f} ms)",
                 "no disk work under the lock"))
    ep = run("bench_endpoint.py", "--seconds", "10" if a.quick else "30")
    rows += [("parse a 2,000-line /metrics", f"{ep['parse_2000_lines_ms_p50']:.2f} ms", "≤ 5 ms"),  # type: ignore[index]
             ("poll a 2,000-line /metrics at 1 Hz", f"{ep['poll_1hz_cpu_pct_2000_lines']:.2f} % CPU", "≤ 1 %"),  # type: ignore[index]
             ("poll a real vLLM /metrics at 1 Hz", f"{ep['poll_1hz_cpu_pct_vllm_capture']:.2f} % CPU", "≤ 1 %")]  # type: ignore[index]
    pr: dict = run("bench_prometheus.py", "--scrapes", "100" if a.quick else "300")  # type: ignore[assignment]
    rows += [("Prometheus scrape, 8 GPUs + 2 endpoints, new frame each",
              f"{pr['fresh']['cpu_ms_per_scrape']:.2f} ms CPU", "≤ 2 ms"),
             ("Prometheus scrape, cached frame", f"{pr['cached']['cpu_ms_per_scrape']:.2f} ms CPU", "≤ 2 ms"),
             ("Prometheus, 16 concurrent scrapers", f"{pr['cached']['concurrent_scrapes_per_s']:.0f} scrapes/s", "")]
    ws: dict = run("bench_webserve.py", "--scrapes", "50" if a.quick else "200")  # type: ignore[assignment]
    rows += [(f"Prometheus scrape over TLS + basic auth, gzip, kept alive, {ml}",
              f"{ws[f'tls_{m}']['keepalive_gzip_cpu_ms']:.2f} ms CPU", "≤ 1 ms")
             for m, ml in (("fresh", "new frame each"), ("cached", "cached frame"))]
    fi = run("bench_findings.py", "--rounds", "3" if a.quick else "10")
    for r in fi:  # type: ignore[union-attr]
        rows.append((f"findings per frame, {r['case']}", f"{r['us_per_frame']:.0f} µs", "≤ 1 ms at 8 GPUs"))
    w1 = max(len(x[0]) for x in rows)
    w2 = max(len(x[1]) for x in rows)
    print(f"{'benchmark':<{w1}}  {'result':<{w2}}  target")
    print("-" * (w1 + w2 + 30))
    for name, res, tgt in rows:
        print(f"{name:<{w1}}  {res:<{w2}}  {tgt}")
    with open(a.json, "w") as f:
        json.dump({"rows": [{"benchmark": n, "result": r, "target": t} for n, r, t in rows],
                   "raw": {"nvml": nvml, "tui": tui, "recording": rec, "seek": seek, "endpoint": ep,
                           "prometheus": pr, "webserve": ws, "findings": fi}}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
