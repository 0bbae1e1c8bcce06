"""What the live TUI costs with simulated GPUs: CPU s/min and bytes/s to the terminal, idle and under load,
at 120×40 and 80×24, with 2 and 8 GPUs; optionally two versions of gpuscope side by side.

    python benchmarks/bench_tui_cost.py                          # this checkout, 60 s
    python benchmarks/bench_tui_cost.py --variant before=/path/to/other/checkout --seconds 90

Every case runs **at the same time** (each TUI under its own pty, drained like a terminal, 1 s
interval), so whatever else the machine does hits all of them alike; a `--variant NAME=DIR` runs the
gpuscope of another checkout (e.g. `git worktree add /tmp/base main`) beside this one, which is how
"before" and "after" are compared on a busy machine. The GPUs are simulated (SIMULATED in every row):
H200-like boards whose idle readings carry the noise real idle H200s show (a ~400 KB/s PCIe rate that
moves by a few KB/s, power by a watt), and a load phase (matmul-like: 100 % util, PCIe and NVLink
traffic). The real-GPU comparison against nvitop is benchmarks/bench_peers_concurrent.py.

    python benchmarks/bench_tui_cost.py --inprocess 5 --variant before=/path/to/other/checkout

``--patches-off`` adds this checkout once more with ``GPUSCOPE_TEXTUAL_PATCHES=0`` (variant
``patches-off``): Textual's public paths only (widgets/textual_private.py), what the private ones save.

    python benchmarks/bench_tui_cost.py --inprocess 5 --patches-off

``--inprocess R`` measures instead the main thread's CPU per refresh on a virtual clock
(benchmarks/tui_refresh_probe.py: same frames for every variant, the history's window filled first,
the bytes each refresh would send): each variant and size R times, alternating, median and min.
Far less noisy than the pty runs on a shared machine, and equal bytes show the screens stayed the same.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(__file__))
from common import load_average, write_json  # noqa: E402
from ptyrun import RunCost, run_under_pty  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
# the repository's folders that make up the installed package (pyproject.toml: [tool.setuptools.package-dir])
SUBPACKAGES = ("core", "cli", "sources", "widgets", "tui", "recordings")

GPU = """
[[gpus]]
count = {n}
name = "NVIDIA H200"
architecture = "hopper"
memory_gib = 141
sm_clock_max_mhz = 1980
mem_clock_max_mhz = 3201
power_limit_w = 700
pcie_gen_gpu_max = 5
pcie_gen_sys_max = 5
pcie_width_max = 16
gpm = true
nvlink_version = 6
fan = false
memory_temp = true

[topology]
default_path = "SYS"
nvswitch_links = 18
"""

IDLE = """
[[phases]]
name = "idle"
duration_s = 600
load = false
util_gpu_pct = 0
power_w = 75
sm_clock_mhz = 345
mem_clock_mhz = 3201
temp_gpu_c = 31
mem_used_gib = 0.5
sm_active_pct = 0
tensor_active_pct = 0
dram_bw_util_pct = 0
pcie_rx_gb_per_s = 0.0004
pcie_tx_gb_per_s = 0.0004
"""

LOAD = """
[[phases]]
name = "bf16 matmul"
duration_s = 600
load = true
util_gpu_pct = 100
util_mem_pct = 40
power_w = 640
sm_clock_mhz = 1755
mem_clock_mhz = 3201
temp_gpu_c = 62
mem_used_gib = 60
sm_active_pct = 97
tensor_active_pct = 80
dram_bw_util_pct = 35
pcie_rx_gb_per_s = 0.3
pcie_tx_gb_per_s = 0.05
nvlink_rx_gb_per_s = 20
nvlink_tx_gb_per_s = 20
processes = 1
"""


def scenario_text(n: int, phase: str, noise: float = 0.01) -> str:
    """A scenario file (docs/scenarios.md) for ``n`` H200-like GPUs in one ``phase`` (idle or load), readings
    moving by ``noise`` (a share: 0.06 changes about as many cells a second as real H200s under a matmul)."""
    head = (f'name = "bench-{phase}-{n}"\ndescription = "benchmark: {n} simulated H200s, {phase}"\n'
            f'host = "sim-bench"\ncpu_count = 64\nloop = true\nnoise = {noise}\n')
    return head + GPU.format(n=n) + (IDLE if phase == "idle" else LOAD)


def package_tree(checkout: str, dest: str) -> str:
    """A directory to put on PYTHONPATH so that ``import gpuscope`` is ``checkout``'s code (the package's
    root is ``pkg/``, its subpackages the top-level folders: mirrored with symlinks)."""
    root = os.path.join(dest, "gpuscope")
    os.makedirs(root)
    for name in os.listdir(os.path.join(checkout, "pkg")):
        if name.endswith(".py"):
            shutil.copy(os.path.join(checkout, "pkg", name), root)
    for sub in SUBPACKAGES:
        os.symlink(os.path.abspath(os.path.join(checkout, sub)), os.path.join(root, sub))
    return dest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60, help="measured seconds per case (after the warm-up)")
    ap.add_argument("--warmup", type=float, default=15, help="seconds before measuring (all start at once)")
    ap.add_argument("--gpus", type=int, nargs="+", default=[2, 8])
    ap.add_argument("--sizes", nargs="+", default=["120x40", "80x24"])
    ap.add_argument("--phases", nargs="+", default=["idle", "load"], choices=["idle", "load"])
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=DIR",
                    help="also run the gpuscope of checkout DIR, labelled NAME (this checkout is 'this')")
    ap.add_argument("--patches-off", action="store_true",
                    help="also run this checkout with GPUSCOPE_TEXTUAL_PATCHES=0 (variant 'patches-off')")
    ap.add_argument("--noise", type=float, default=0.01,
                    help="how much the simulated readings move (0.06: about the screen changes of real H200s)")
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("--inprocess", type=int, default=0, metavar="R",
                    help="CPU ms per refresh in process (tui_refresh_probe.py), R runs each, instead of ptys")
    a = ap.parse_args(argv)
    tmp = tempfile.mkdtemp(prefix="bench-tui-cost-")
    variants = [("this", REPO)] + [tuple(v.split("=", 1)) for v in a.variant]  # type: ignore[misc]
    paths = {name: package_tree(d, os.path.join(tmp, f"pkg-{name}")) for name, d in variants}
    envs: dict[str, dict[str, str]] = {name: {} for name, _d in variants}
    if a.patches_off:  # this checkout on Textual's public paths only
        variants.append(("patches-off", REPO))
        paths["patches-off"], envs["patches-off"] = paths["this"], {"GPUSCOPE_TEXTUAL_PATCHES": "0"}
    if a.inprocess:
        try:
            return inprocess(a, tmp, variants, paths, envs)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    cases = []
    for phase in a.phases:
        for n in a.gpus:
            scen = os.path.join(tmp, f"bench-{phase}-{n}.toml")
            with open(scen, "w") as f:
                f.write(scenario_text(n, phase, a.noise))
            for size in a.sizes:
                cols, rows = (int(x) for x in size.split("x"))
                for name, _d in variants:
                    cases.append((name, phase, n, size, cols, rows, scen))
    results: dict[int, RunCost] = {}
    threads = []
    for k, (name, _phase, _n, _size, cols, rows, scen) in enumerate(cases):
        cmd = [sys.executable, "-m", "gpuscope", "--simulate", scen, "--interval", "1"]
        env = {"PYTHONPATH": paths[name], "PYTHONDONTWRITEBYTECODE": "1", **envs[name]}

        def one(k: int = k, cmd: list[str] = cmd, cols: int = cols, rows: int = rows, env: dict[str, str] = env) -> None:
            results[k] = run_under_pty(cmd, a.seconds, cols=cols, rows=rows, warmup_s=a.warmup, env=env)
        t = threading.Thread(target=one)
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    table = []
    for k, (name, phase, n, size, _c, _r, _s) in enumerate(cases):
        c = results.get(k)
        if c is None:
            continue
        table.append({"variant": name, "phase": phase, "gpus": n, "size": size,
                      "cpu_s_per_min": round(c.cpu_s * 60 / c.seconds, 3), "bytes_per_s": round(c.bytes_per_s),
                      "peak_rss_mb": round(c.peak_rss_mb, 1)})
    load = load_average()
    print(f"SIMULATED GPUs, {len(cases)} TUIs at once, {a.seconds:g} s measured after {a.warmup:g} s, "
          f"1 s interval; load average {load}")
    print(f"{'phase':<6} {'GPUs':>4} {'size':>7} {'variant':<11} {'CPU s/min':>10} {'term B/s':>9} {'RSS MB':>7}")
    for r in table:
        print(f"{r['phase']:<6} {r['gpus']:>4} {r['size']:>7} {r['variant']:<11} {r['cpu_s_per_min']:>10} "
              f"{r['bytes_per_s']:>9} {r['peak_rss_mb']:>7}")
    write_json(a.json, {"load_average": load, "seconds": a.seconds, "rows": table})
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


def inprocess(a: argparse.Namespace, tmp: str, variants: list[tuple[str, str]], paths: dict[str, str],
              envs: dict[str, dict[str, str]]) -> int:
    """The ``--inprocess`` table: per phase, GPUs, size and variant, main-thread CPU ms per refresh."""
    import json
    import statistics
    import subprocess

    probe = os.path.join(HERE, "tui_refresh_probe.py")
    got: dict[tuple[str, int, str, str], list[dict[str, float]]] = {}
    for phase in a.phases:
        for n in a.gpus:
            scen = os.path.join(tmp, f"bench-{phase}-{n}.toml")
            with open(scen, "w") as f:
                f.write(scenario_text(n, phase, a.noise))
            for _ in range(a.inprocess):
                for size in a.sizes:
                    for name, _d in variants:
                        out = subprocess.run([sys.executable, probe, scen, size, str(int(a.warmup)), str(int(a.seconds))],
                                             env={**os.environ, "PYTHONPATH": paths[name], **envs[name]}, capture_output=True,
                                             text=True, cwd=tmp, check=True)
                        got.setdefault((phase, n, size, name), []).append(json.loads(out.stdout.strip().splitlines()[-1]))
    load = load_average()
    print(f"SIMULATED GPUs, in process: {a.seconds:g} refreshes after {a.warmup:g} frames of history, "
          f"{a.inprocess} runs each; load average {load}")
    print(f"{'phase':<6} {'GPUs':>4} {'size':>7} {'variant':<11} {'ms/refresh median':>18} {'min':>6} {'B/refresh':>10}")
    table = []
    for (phase, n, size, name), runs in got.items():
        ms = [r["cpu_ms_per_refresh"] for r in runs]
        row = {"variant": name, "phase": phase, "gpus": n, "size": size, "ms_median": round(statistics.median(ms), 2),
               "ms_min": round(min(ms), 2), "bytes_per_refresh": round(runs[0]["bytes_per_refresh"])}
        table.append(row)
        print(f"{phase:<6} {n:>4} {size:>7} {name:<11} {row['ms_median']:>18} {row['ms_min']:>6} {row['bytes_per_refresh']:>10}")
    write_json(a.json, {"load_average": load, "inprocess": a.inprocess, "rows": table})
    return 0


if __name__ == "__main__":
    sys.exit(main())
