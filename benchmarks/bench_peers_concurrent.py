"""gpuscope beside nvitop and nvidia-smi dmon, all at once, on a machine with GPUs.

    python benchmarks/bench_peers_concurrent.py [--idle 30] [--load 60] [--warmup 6] [--json out.json]

Every monitor runs at the same time, at a 1 s interval, so that whatever else the machine does hits all
of them alike (measuring them in turn, as bench_peers.py does, lets noise favour one): gpuscope's TUI at
120×40 and at 80×24, nvitop at 120×40 and at 80×24 (TUIs under real ptys whose output is drained like a
terminal), headless `gpuscope record`, and `nvidia-smi dmon -s puct -d 1`. Two phases: idle (no load:
bytes/s to the terminal), then a bf16 matmul load on every GPU. Prints CPU seconds per minute, % of a
core, peak RSS, bytes/s to the terminal and the ratio to nvitop at the same size. ``--warmup`` seconds
pass before each phase's measurement starts (every tool alike): 70 s measures the steady state, after
gpuscope's 1 min history graphs have filled (until then they change every second).

``--threads`` runs each gpuscope under benchmarks/thread_cpu.py and adds its threads' CPU (ms of CPU per
second, from the threads' own nanosecond clocks) under the table: which part of the process costs what.
``--sections`` runs them under benchmarks/section_cpu.py instead: the same, plus the CPU of each part of a
refresh and of a sampling tick (its wrappers, about 1 µs a call and a few dozen calls a second, cost every
gpuscope alike: a before/after holds, but ``--threads`` gives the ratios to nvitop without them).
``--variant NAME=DIR`` also runs the TUIs of another checkout (DIR), labelled NAME, in the same minute: a
before/after on the same GPUs under the same load.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(__file__))
from bench_peers import LOAD  # noqa: E402 - the same bf16 matmul load as the one-at-a-time comparison
from bench_tui_cost import package_tree  # noqa: E402
from common import write_json  # noqa: E402
from ptyrun import RunCost, run_under_pty  # noqa: E402

THREAD_CPU = os.path.join(os.path.dirname(os.path.abspath(__file__)), "thread_cpu.py")
SECTION_CPU = os.path.join(os.path.dirname(os.path.abspath(__file__)), "section_cpu.py")
# a case: (name, command, columns, rows, a TUI?, extra environment)
Case = tuple[str, list[str], int, int, bool, dict[str, str]]


def _threads_json(out: str, name: str) -> str:
    """Where thread_cpu.py writes the case ``name``'s figures."""
    return os.path.join(out, "threads-" + name.replace(" ", "_") + ".json")


GPUSCOPE: list[str] = [sys.executable, "-m", "gpuscope"]  # --gpuscope PATH: an installed one, as users run it
NVITOP: list[str] | None = None  # --nvitop PATH: nvitop installed alone in its own venv, as users run it


def _gpuscope(args: list[str], name: str, out: str, warmup_s: float, seconds: float, probe: str | None
              ) -> list[str]:
    """The command that runs gpuscope with ``args``: under the script ``probe`` (thread_cpu.py or section_cpu.py,
    its JSON in ``out``) when given."""
    if not probe:
        return [*GPUSCOPE, *args]
    path = _threads_json(out, name)
    return [sys.executable, probe, "--after", str(warmup_s + 0.2), "--for", str(seconds - 0.4),
            "--json", path, "--", *args]


def _cases(out: str, warmup_s: float = 6.0, seconds: float = 30.0, probe: str | None = None,
           variants: list[tuple[str, str]] | None = None, simulate: str | None = None) -> list[Case]:
    def gs(args: list[str], name: str) -> list[str]:
        return _gpuscope(args + (["--simulate", simulate] if simulate else []), name, out, warmup_s, seconds, probe)

    cases: list[Case] = [
        ("gpuscope TUI 120x40", gs(["--interval", "1"], "gpuscope TUI 120x40"), 120, 40, True, {}),
        ("gpuscope TUI 80x24", gs(["--interval", "1"], "gpuscope TUI 80x24"), 80, 24, True, {}),
        ("gpuscope record", gs(["record", "-o", os.path.join(out, f"r{time.time_ns()}.jsonl.gz"), "--interval", "1"],
                               "gpuscope record"), 120, 40, False, {})]
    for vname, path in variants or []:
        exe = os.path.isfile(path) and os.access(path, os.X_OK)  # an installed gpuscope (its own venv), else a tree
        env = {} if exe else {"PYTHONPATH": os.pathsep.join(p for p in (path, os.environ.get("PYTHONPATH", "")) if p)}
        for cols, rows in ((120, 40), (80, 24)):
            name = f"gpuscope {vname} TUI {cols}x{rows}"
            cmd = ([path, "--interval", "1", *(["--simulate", simulate] if simulate else [])] if exe
                   else gs(["--interval", "1"], name))
            cases.append((name, cmd, cols, rows, True, env))
    import importlib.util

    if NVITOP is not None or importlib.util.find_spec("nvitop") is not None:
        nv = [*(NVITOP or [sys.executable, "-m", "nvitop"]), "--interval", "1"]
        cases += [("nvitop 120x40", nv, 120, 40, True, {}), ("nvitop 80x24", nv, 80, 24, True, {})]
    if shutil.which("nvidia-smi"):
        cases.append(("nvidia-smi dmon -s puct -d 1", ["nvidia-smi", "dmon", "-s", "puct", "-d", "1"], 120, 40, False,
                      {}))
    return cases


def run_phase(seconds: float, out: str, warmup_s: float = 6.0, probe: str | None = None,
              variants: list[tuple[str, str]] | None = None, simulate: str | None = None) -> list[dict[str, object]]:
    """Start every monitor at once, measure each for the same ``seconds``, return one row each (with its
    threads' ms of CPU per second under ``probe``, for gpuscope's rows)."""
    results: dict[str, RunCost] = {}
    runners = []
    for name, cmd, cols, rows, tui, env in _cases(out, warmup_s, seconds, probe, variants, simulate):
        def one(name: str = name, cmd: list[str] = cmd, cols: int = cols, rows: int = rows, tui: bool = tui,
                env: dict[str, str] = env) -> None:
            results[name] = run_under_pty(cmd, seconds, cols=cols, rows=rows, quit_keys=b"q" if tui else b"",
                                          warmup_s=warmup_s, env=env)
        t = threading.Thread(target=one, name=name)
        t.start()
        runners.append((name, t))
    for _name, t in runners:
        t.join()
    table = []
    for name, _t in runners:
        c = results.get(name)
        if c is None:
            continue
        row: dict[str, object] = {"tool": name, "cpu_s_per_min": round(c.cpu_s * 60 / c.seconds, 3),
                                  "cpu_pct": round(c.cpu_pct, 2), "peak_rss_mb": round(c.peak_rss_mb, 1),
                                  "bytes_per_s": round(c.bytes_per_s)}
        path = _threads_json(out, name)
        if probe and os.path.exists(path):
            with open(path) as f:
                got = json.load(f)
            row["threads_ms_per_s"] = got["ms_per_s"]
            if "sections" in got:
                row["sections"] = got["sections"]
            os.unlink(path)
        table.append(row)
    return table


def _print(title: str, rows: list[dict[str, object]]) -> None:
    by = {r["tool"]: r for r in rows}
    print(f"\n{title}")
    print(f"{'tool':<32} {'CPU s/min':>10} {'CPU %':>7} {'peak RSS MB':>12} {'term B/s':>9} {'vs nvitop':>10}")
    for r in rows:
        ref = by.get("nvitop 80x24" if "80x24" in str(r["tool"]) else "nvitop 120x40")
        ratio = (f"{float(r['cpu_s_per_min']) / float(ref['cpu_s_per_min']):.2f}x"  # type: ignore[arg-type]
                 if ref and float(ref["cpu_s_per_min"]) > 0 else "–")  # type: ignore[arg-type]
        r["cpu_ratio_to_nvitop_same_size"] = ratio
        print(f"{r['tool']:<32} {r['cpu_s_per_min']:>10} {r['cpu_pct']:>7} {r['peak_rss_mb']:>12} "
              f"{r['bytes_per_s']:>9} {ratio:>10}")
    for r in rows:
        th = r.get("threads_ms_per_s")
        if isinstance(th, dict):
            parts = ", ".join(f"{k} {v:.2f}" for k, v in sorted(th.items(), key=lambda kv: -kv[1]) if v >= 0.005)
            print(f"  {r['tool']}: ms of CPU a second by thread: {parts}")
        sections = r.get("sections")
        if isinstance(sections, dict):
            parts = ", ".join(f"{k.rpartition(':')[2]} {v['ms_per_s']:.3f} ({v['calls_per_s']:g}/s)"
                              for k, v in sections.items() if v["ms_per_s"] >= 0.005)
            print(f"  {r['tool']}: ms of CPU a second by part: {parts}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--idle", type=float, default=30)
    ap.add_argument("--load", type=float, default=60)
    ap.add_argument("--warmup", type=float, default=6.0)
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("--threads", action="store_true", help="also each gpuscope thread's CPU (thread_cpu.py)")
    ap.add_argument("--sections", action="store_true",
                    help="also each thread's and each part's CPU (section_cpu.py; implies --threads)")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=DIR",
                    help="also run the TUIs of the gpuscope checkout DIR (or the installed gpuscope executable DIR), "
                         "labelled NAME")
    ap.add_argument("--gpuscope", metavar="PATH", help="the gpuscope to measure: an installed executable (its own "
                    "venv, as users run it; default: this tree through this Python)")
    ap.add_argument("--nvitop", metavar="PATH", help="nvitop installed alone in its own venv (default: python -m "
                    "nvitop in this Python, which shares gpuscope's environment and is not how users run it)")
    ap.add_argument("--simulate", metavar="SCENARIO",
                    help="gpuscope on a simulated machine (to try this script without GPUs; compares nothing)")
    a = ap.parse_args(argv)
    out = tempfile.mkdtemp()
    probe = SECTION_CPU if a.sections else THREAD_CPU if a.threads else None
    global GPUSCOPE, NVITOP
    if a.gpuscope:
        GPUSCOPE = [a.gpuscope]
    if a.nvitop:
        NVITOP = [a.nvitop]
    variants = [(name, d if os.path.isfile(d) else package_tree(d, os.path.join(out, f"pkg-{name}")))
                for name, d in (v.split("=", 1) for v in a.variant)]
    doc: dict[str, object] = {}
    if a.idle > 0:
        doc["idle"] = run_phase(a.idle, out, a.warmup, probe, variants, a.simulate)
        _print(f"idle, {a.idle:g} s after {a.warmup:g} s, all monitors at once", doc["idle"])  # type: ignore[arg-type]
    if a.load > 0:
        load = subprocess.Popen([sys.executable, "-c", LOAD])
        try:
            time.sleep(8)
            doc["load"] = run_phase(a.load, out, a.warmup, probe, variants, a.simulate)
        finally:
            load.terminate()
            load.wait()
        _print(f"bf16 matmul on every GPU, {a.load:g} s after {a.warmup:g} s, all monitors at once", doc["load"])  # type: ignore[arg-type]
    write_json(a.json, doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
