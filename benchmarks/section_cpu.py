"""The live screen's CPU by part, in this process, at the rate the app really runs (not a hot loop).

    python benchmarks/section_cpu.py --after 30 --for 60 --json OUT.json -- [gpuscope's arguments]

Run under a terminal (tmux, benchmarks/ptyrun.py). Each function of :data:`SECTIONS` is wrapped so that, over the
measured stretch, the CPU of the thread that calls it (``time.thread_time_ns``: its own clock) is added up, with
its calls; the sections nest (a panel's ``show`` is inside ``refresh_view``), each figure includes what it
calls. Every thread's CPU is written beside them (``ms_per_s``, as thread_cpu.py writes it), so what no section
covers shows too: the event loop, Textual's message pump, thread wake-ups. The wrappers cost about 1 µs a call, a
few dozen calls a second at one GPU. Why this and not a profiler: a 1 Hz monitor's work runs on cold caches (measured here: the same
refresh costs 2–3× what a hot loop of refreshes does), and a profiler's own cost swamps the small functions.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import runpy
import sys
import threading
import time
from collections import Counter
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import measured_run_args  # noqa: E402
from thread_cpu import measured_stretch  # noqa: E402

SECTIONS = (
    "gpuscope.tui.app:GpuscopeApp.refresh_view",
    "gpuscope.tui.app:GpuscopeApp.build_view",
    "gpuscope.tui.app:GpuscopeApp.notify_update",
    "gpuscope.tui.app:GpuscopeApp._check_stale",
    "gpuscope.widgets.gpu_panel:GpuPanel.show",
    "gpuscope.widgets.gpu_panel:GpuPanel._graph_lines",
    "gpuscope.widgets.gpu_panel:GpuPanel._panel_graphs",
    "gpuscope.widgets.gpu_panel:GpuPanel._graphs",
    "gpuscope.widgets.gpu_table:GpuTable.show",
    "gpuscope.widgets.status_bar:StatusBar.show",
    "gpuscope.widgets.findings_panel:FindingsPanel.show",
    "gpuscope.widgets.lines:LineWidget.set_lines",
    "textual.screen:Screen._compositor_refresh",
    "textual._compositor:Compositor.render_update",
    "gpuscope.core.session:Session.ingest",
    "gpuscope.core.findings:FindingsEngine.update",
    "gpuscope.core.history:History.add",
    "gpuscope.sources.nvml:NvmlSource.sample",
    "gpuscope.sources.nvml:NvmlSource._basic",
    "gpuscope.sources.nvml:NvmlSource._gpm",
    "gpuscope.sources.nvml:NvmlSource._processes",
    "gpuscope.sources.nvml:NvmlSource._ecc_safe",
    "gpuscope.sources.nvml:NvmlSource._poll_xids",
    "gpuscope.sources.nvml:NvmlSource._fields",
)

_cpu: Counter[str] = Counter()
_calls: Counter[str] = Counter()
_on = [False]


def _wrap(name: str) -> bool:
    """Wrap one ``module:Class.method``; False when it is not there (another version of the code)."""
    module, _, attr = name.partition(":")
    owner_name, _, method = attr.rpartition(".")
    try:
        owner: Any = getattr(importlib.import_module(module), owner_name)
        fn = getattr(owner, method)
    except (ImportError, AttributeError):
        return False
    if not callable(fn) or isinstance(owner.__dict__.get(method), (staticmethod, classmethod)):
        return False

    @functools.wraps(fn)
    def timed(*args: Any, **kw: Any) -> Any:
        if not _on[0]:
            return fn(*args, **kw)
        t0 = time.thread_time_ns()
        try:
            return fn(*args, **kw)
        finally:
            _cpu[name] += time.thread_time_ns() - t0
            _calls[name] += 1

    setattr(owner, method, timed)
    return True


def measure(after_s: float, for_s: float, path: str, wrapped: list[str]) -> None:
    dt, threads = measured_stretch(after_s, for_s, lambda on: _on.__setitem__(0, on))
    sections = {n: {"ms_per_s": round(_cpu[n] / 1e6 / dt, 3), "calls_per_s": round(_calls[n] / dt, 2)}
                for n in sorted(wrapped, key=lambda n: -_cpu[n])}
    with open(path, "w") as f:
        json.dump({"seconds": round(dt, 2), "ms_per_s": threads, "sections": sections}, f, indent=1)


def main() -> None:
    a, args = measured_run_args("--json", "where to write each section's and each thread's ms of CPU a second")
    wrapped: list[str] = []  # filled below: the clock starts first, as thread_cpu.py's (the callers time both alike)
    threading.Thread(target=measure, args=(a.after, a.for_s, a.json, wrapped), name="thread_cpu",
                     daemon=True).start()
    wrapped += [n for n in SECTIONS if _wrap(n)]
    sys.argv = ["gpuscope", *args]
    runpy.run_module("gpuscope", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
