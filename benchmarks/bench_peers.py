"""gpuscope beside the tools users run today, on a machine with GPUs, same interval, same load.

    python benchmarks/bench_peers.py [--seconds 60] [--json out.json]

Starts a bf16 matmul load on every GPU (PyTorch), then measures each monitor in turn for the same
time at a 1 s interval: `gpuscope` (TUI under a 120×40 pty), `gpuscope record`, `nvitop --interval 1`
(TUI under a pty, if installed) and `nvidia-smi dmon -s puct -d 1`. Reports CPU seconds per minute
of monitoring and peak RSS, and the ratios to gpuscope.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from common import write_json  # noqa: E402
from ptyrun import run_under_pty  # noqa: E402

LOAD = """
import torch, time
xs = [(torch.randn(8192, 8192, dtype=torch.bfloat16, device=f'cuda:{i}'),) * 2 for i in range(torch.cuda.device_count())]
while True:
    for a, b in xs:
        torch.matmul(a, b)
    time.sleep(0.002)
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--json", metavar="FILE")
    a = ap.parse_args(argv)
    load = subprocess.Popen([sys.executable, "-c", LOAD])
    time.sleep(8)
    out = tempfile.mkdtemp()
    gs = [sys.executable, "-m", "gpuscope"]
    cases = [("gpuscope (TUI, pty)", gs + ["--interval", "1"], True),
             ("gpuscope record", gs + ["record", "-o", os.path.join(out, "r.jsonl.gz"), "--interval", "1"], False)]
    if shutil.which("nvitop") or _has_module("nvitop"):
        cases.append(("nvitop --interval 1 (TUI, pty)", [sys.executable, "-m", "nvitop", "--interval", "1"], True))
    if shutil.which("nvidia-smi"):
        cases.append(("nvidia-smi dmon -s puct -d 1", ["nvidia-smi", "dmon", "-s", "puct", "-d", "1"], False))
    rows = []
    try:
        for name, cmd, pty in cases:
            c = run_under_pty(cmd, a.seconds, use_pty=True, quit_keys=b"q" if pty else b"")
            rows.append({"tool": name, "cpu_s_per_min": round(c.cpu_s * 60 / c.seconds, 3),
                         "cpu_pct": round(c.cpu_pct, 2), "peak_rss_mb": round(c.peak_rss_mb, 1),
                         "bytes_per_s": round(c.bytes_per_s)})
    finally:
        load.terminate()
        load.wait()
    base = rows[0]["cpu_s_per_min"] or 1e-9
    print(f"{'tool':<34} {'CPU s/min':>10} {'CPU %':>7} {'peak RSS MB':>12} {'vs gpuscope TUI':>16}")
    for r in rows:
        r["cpu_ratio_to_gpuscope_tui"] = round(r["cpu_s_per_min"] / base, 2)
        print(f"{r['tool']:<34} {r['cpu_s_per_min']:>10} {r['cpu_pct']:>7} {r['peak_rss_mb']:>12} "
              f"{r['cpu_ratio_to_gpuscope_tui']:>15}x")
    write_json(a.json, rows)
    return 0


def _has_module(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


if __name__ == "__main__":
    sys.exit(main())
