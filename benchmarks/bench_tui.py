"""The live TUI under a real pty: CPU share of one core, bytes/s written to the terminal, RSS growth.

    python benchmarks/bench_tui.py                 # simulated 8 GPUs (h200-nvswitch-8), 120×40, 1 Hz and 10 Hz
    python benchmarks/bench_tui.py --long 600      # plus RSS growth over 10 minutes at 10 Hz

Targets: at 1 Hz ≤ 3 % of a core and ≤ 15 KB/s; at 10 Hz ≤ 15 %; RSS growth < 10 MB / 10 min.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from common import write_json  # noqa: E402
from ptyrun import run_under_pty  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--long", type=float, default=0, help="also run 10 Hz this long to measure RSS growth")
    ap.add_argument("--scenario", default="h200-nvswitch-8")
    ap.add_argument("--json", metavar="FILE")
    a = ap.parse_args(argv)
    rows = []
    for interval in (1.0, 0.1):
        cmd = [sys.executable, "-m", "gpuscope", "--simulate", a.scenario, "--interval", str(interval)]
        c = run_under_pty(cmd, a.seconds)
        rows.append({"case": f"TUI {a.scenario} {1 / interval:.0f} Hz", "seconds": round(c.seconds, 1),
                     "cpu_pct": round(c.cpu_pct, 2), "kb_per_s": round(c.bytes_per_s / 1000, 2),
                     "rss_mb": round(c.rss_end_mb, 1), "rss_growth_mb": round(c.rss_end_mb - c.rss_start_mb, 2)})
    if a.long:
        cmd = [sys.executable, "-m", "gpuscope", "--simulate", a.scenario, "--interval", "0.1"]
        c = run_under_pty(cmd, a.long)
        rows.append({"case": f"TUI {a.scenario} 10 Hz, {a.long:.0f} s", "seconds": round(c.seconds, 1),
                     "cpu_pct": round(c.cpu_pct, 2), "kb_per_s": round(c.bytes_per_s / 1000, 2),
                     "rss_mb": round(c.rss_end_mb, 1), "rss_growth_mb": round(c.rss_end_mb - c.rss_start_mb, 2)})
    print(f"{'case':<40} {'s':>6} {'CPU %':>7} {'KB/s':>7} {'RSS MB':>7} {'RSS growth MB':>14}")
    for r in rows:
        print(f"{r['case']:<40} {r['seconds']:>6} {r['cpu_pct']:>7} {r['kb_per_s']:>7} {r['rss_mb']:>7} "
              f"{r['rss_growth_mb']:>14}")
    write_json(a.json, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
