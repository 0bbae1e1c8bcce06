"""Peak RSS of the live TUI and of its imports, at 1, 2 and 8 simulated GPUs (the goal: lighter than
nvitop at one GPU; docs/performance.md, *Memory at one GPU*).

    python benchmarks/bench_rss.py                                   # this checkout, 3 runs, 75 s each
    python benchmarks/bench_rss.py --variant before=/path/to/other/checkout --runs 5

Each case is ``gpuscope --simulate SCENARIO`` under a real pty (benchmarks/ptyrun.py, drained like a
terminal, 1 s interval) at 80×24 and 120×40; peak RSS is the process's VmHWM after ``--seconds`` (it grows
for the first minute, while the graphs fill their window, then stays). The import rows are ``python -c
'import MODULE'`` (VmHWM at exit): what a module costs before anything runs, measured one after the other,
variants alternated. Within a run all the TUIs (every case and variant) run at once, so the machine's load
hits them alike; the table gives the median (and the spread) of ``--runs`` runs. The GPUs are SIMULATED
(sources/scenarios: 1 GPU ``slot-limited``, 2 GPUs ``healthy-gen4``, 8 GPUs ``h200-nvswitch-8``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(__file__))
from bench_tui_cost import REPO, package_tree  # noqa: E402
from common import load_average, write_json  # noqa: E402
from ptyrun import run_under_pty  # noqa: E402

SCENARIOS = {1: "slot-limited", 2: "healthy-gen4", 8: "h200-nvswitch-8"}
# the last: what the live screen imports on real GPUs before its first sample (no scenario, no simulated NVML)
LIVE_REAL = "gpuscope.cli.main,gpuscope.tui.run,gpuscope.sources.live,gpuscope.sources.groups,pynvml"
IMPORTS = ("gpuscope.cli.main", "gpuscope.tui.app", "gpuscope.tui.run", "textual.app", "numpy", LIVE_REAL)
# --stages: where the live screen's import RSS goes, each stage importing more (cumulative, in this order)
STAGES = (("Python itself", ""), ("numpy", "numpy"), ("Textual (with Rich, asyncio, ssl)", "textual.app,textual.widgets"),
          ("gpuscope core (session, findings, history, catalogue)", "gpuscope.core.session,gpuscope.core.view"),
          ("NVML source and serving groups (pynvml)", "gpuscope.sources.live,gpuscope.sources.groups,pynvml"),
          ("widgets and the App (tui/app.py)", "gpuscope.tui.app"),
          ("command line and hand-over (cli/main.py, tui/run.py)", "gpuscope.cli.main,gpuscope.tui.run"))
STAGE = ("import sys\nfor m in sys.argv[1].split(','):\n    m and __import__(m)\n"
         "print(next(int(x.split()[1]) for x in open('/proc/self/status') if x.startswith('VmRSS')) / 1024)")
PEAK = ("import resource, sys\nfor m in sys.argv[1].split(','): __import__(m)\n"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)")


def import_peak_mb(module: str, env: dict[str, str]) -> float:
    """VmHWM (MB) of a fresh Python that imports ``module`` (several: comma-separated) and exits."""
    out = subprocess.run([sys.executable, "-c", PEAK, module], env={**os.environ, **env}, capture_output=True,
                         text=True, check=True, cwd=tempfile.gettempdir())
    return float(out.stdout.strip())


def stages(env: dict[str, str], runs: int) -> list[tuple[str, float]]:
    """VmRSS (MB, median of ``runs`` fresh processes) after each cumulative stage of :data:`STAGES`."""
    out, mods = [], []
    for label, more in STAGES:
        mods += [m for m in more.split(",") if m]
        got = [float(subprocess.run([sys.executable, "-c", STAGE, ",".join(mods)], env={**os.environ, **env},
                                    capture_output=True, text=True, check=True, cwd=tempfile.gettempdir()).stdout)
               for _ in range(runs)]
        out.append((label, statistics.median(got)))
    return out


def one(into: list[float], n: int, size: str, env: dict[str, str], seconds: float) -> None:
    """One TUI of ``n`` simulated GPUs at ``size`` for ``seconds``: its peak RSS (MB) appended to ``into``."""
    cols, rows = (int(x) for x in size.split("x"))
    cmd = [sys.executable, "-m", "gpuscope", "--simulate", SCENARIOS[n], "--interval", "1"]
    into.append(run_under_pty(cmd, seconds, cols=cols, rows=rows, warmup_s=3, env=env).peak_rss_mb)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=75,
                    help="how long each TUI runs before its peak is read (RSS grows while the graphs fill their first minute)")
    ap.add_argument("--runs", type=int, default=3, help="runs per case and variant (alternated); median shown")
    ap.add_argument("--gpus", type=int, nargs="+", default=[1, 2, 8], choices=sorted(SCENARIOS))
    ap.add_argument("--sizes", nargs="+", default=["80x24", "120x40"])
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=DIR",
                    help="also run the gpuscope of checkout DIR, labelled NAME (this checkout is 'this')")
    ap.add_argument("--no-imports", action="store_true", help="leave out the import rows")
    ap.add_argument("--stages", action="store_true",
                    help="only the import stages: VmRSS after each (numpy, Textual, gpuscope's layers), per variant")
    ap.add_argument("--json", metavar="FILE")
    a = ap.parse_args(argv)
    tmp = tempfile.mkdtemp(prefix="bench-rss-")
    variants = [("this", REPO)] + [tuple(v.split("=", 1)) for v in a.variant]
    envs = {name: {"PYTHONPATH": package_tree(d, os.path.join(tmp, f"pkg-{name}")), "PYTHONDONTWRITEBYTECODE": "1"}
            for name, d in variants}
    if a.stages:
        try:
            table = {name: stages(envs[name], a.runs) for name, _d in variants}
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        print(f"VmRSS (MB) after each import stage (cumulative), median of {a.runs}; the step in brackets")
        print(f"{'stage':<56}" + "".join(f" {name:>16}" for name, _d in variants))
        for k, (label, _mods) in enumerate(STAGES):
            cells = [f"{t[k][1]:.1f} ({t[k][1] - (t[k - 1][1] if k else 0):+.1f})" for t in table.values()]
            print(f"{label:<56}" + "".join(f" {c:>16}" for c in cells))
        write_json(a.json, {name: dict(t) for name, t in table.items()})
        return 0
    got: dict[tuple[str, str], list[float]] = {}
    try:
        for _ in range(a.runs):
            if not a.no_imports:
                for module in IMPORTS:
                    for name, _d in variants:
                        label = "import: the live screen's modules (real GPUs)" if module == LIVE_REAL else f"import {module}"
                        got.setdefault((label, name), []).append(import_peak_mb(module, envs[name]))
            threads = []
            for n in a.gpus:
                for size in a.sizes:
                    for name, _d in variants:
                        case = f"TUI {n} GPU{'s' if n > 1 else ''} {SCENARIOS[n]} {size}"
                        got.setdefault((case, name), [])
                        t = threading.Thread(target=one, args=(got[(case, name)], n, size, envs[name], a.seconds))
                        t.start()
                        threads.append(t)
            for t in threads:
                t.join()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    load = load_average()
    print(f"SIMULATED GPUs; peak RSS (VmHWM) in MB, median of {a.runs} (min–max); TUIs after {a.seconds:g} s; "
          f"load average {load}")
    names = [name for name, _d in variants]
    print(f"{'case':<44}" + "".join(f" {name:>18}" for name in names))
    table = []
    for case in dict.fromkeys(c for c, _n in got):
        cells = []
        for name in names:
            v = got[(case, name)]
            row = {"case": case, "variant": name, "median_mb": round(statistics.median(v), 1),
                   "min_mb": round(min(v), 1), "max_mb": round(max(v), 1)}
            table.append(row)
            cells.append(f"{row['median_mb']:.1f} ({row['min_mb']:.1f}–{row['max_mb']:.1f})")
        print(f"{case:<44}" + "".join(f" {c:>18}" for c in cells))
    write_json(a.json, {"load_average": load, "runs": a.runs, "seconds": a.seconds, "rows": table})
    return 0


if __name__ == "__main__":
    sys.exit(main())
