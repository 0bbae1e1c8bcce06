"""GPU health check on a real GPU machine: memory info v1 vs v2 vs nvidia-smi, ECC, row remapping, Xid events,
the CPU cost of each of these NVML calls, and gpuscope's own readings. Prints a plain-text report on stdout.
Read-only: it never changes a GPU setting (no clocks, no power limits, no ECC or MIG mode, no resets); it only
reads and waits for events.

How to run (from the repository root; Python 3 with nvidia-ml-py; nvidia-smi on PATH; no network needed):

    python3 tools/device_health_check.py                 # everything, ~1 minute
    python3 tools/device_health_check.py --reps 200 --no-load

gpuscope does not need to be installed: the script always tests the checkout it sits in, by building the
package's installed shape in a temporary folder (symlinks to this checkout's core/, sources/, …) and importing
from there (only the standard library and nvidia-ml-py are needed). ``--installed`` uses an installed gpuscope
instead.

(a) For each GPU: NVML memory info v1 and v2 and ``nvidia-smi --query-gpu=index,memory.used,memory.reserved,
    memory.total`` read within the same second, the differences in MiB; once idle and once while a process holds
    1 GiB on GPU0 (started in the background when torch is importable: ``--no-load`` skips it).
(b) CPU time per call (time.process_time over ``--reps`` calls, GPU0) of each new call: memory info v1/v2, ECC
    mode and counts, remapped rows, event set create/register/free, event wait with timeout 0.
(c) gpuscope's own reading through sources/nvml.py (the live source): memory info version, used, reserved, ECC,
    row remapping, whether the Xid thread runs and any note it made.

``--simulate SCENARIO`` runs (b) and (c) over the simulated NVML instead (no GPU; nvidia-smi skipped): a dry run.
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

MIB = 2**20
ROOT = Path(__file__).resolve().parent.parent
LOAD_CMD = ("import torch; x=torch.empty(2**30, dtype=torch.uint8, device='cuda:0'); "
            "torch.cuda.synchronize(); import time; time.sleep(40)")


def import_gpuscope(installed: bool) -> str:
    """Make ``import gpuscope`` work (this checkout, or with ``installed`` the installed one); says which."""
    if installed:
        try:
            import gpuscope  # noqa: F401, PLC0415

            return f"installed ({Path(gpuscope.__file__).parent})"
        except ImportError:
            pass
    tmp = Path(tempfile.mkdtemp(prefix="gpuscope-shape-"))
    atexit.register(shutil.rmtree, tmp, True)
    pkg = tmp / "gpuscope"
    pkg.mkdir()
    for f in (ROOT / "pkg").glob("*.py"):
        (pkg / f.name).symlink_to(f)
    for d in ("core", "cli", "sources", "tui", "widgets"):
        (pkg / d).symlink_to(ROOT / d)
    sys.path.insert(0, str(tmp))
    for name in [m for m in sys.modules if m == "gpuscope" or m.startswith("gpuscope.")]:
        del sys.modules[name]
    return f"this checkout ({ROOT}, through {pkg})"


# ------------------------------------------------------------------ (a) memory: v1, v2, nvidia-smi
def smi_memory(fields: str = "index,memory.used,memory.reserved,memory.total"
               ) -> tuple[dict[int, dict[str, float | None]], float, str]:
    """nvidia-smi's memory per GPU (MiB), its wall time, and an error text ('' when it answered). An nvidia-smi
    without ``memory.reserved`` is asked again without it."""
    cmd = ["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits"]
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return {}, time.perf_counter() - t0, str(e)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        if "memory.reserved" in fields:
            got, wall2, err = smi_memory("index,memory.used,memory.total")
            return got, wall2, err or "(this nvidia-smi has no memory.reserved)"
        return {}, wall, (p.stdout + p.stderr).strip()[:200]
    out: dict[int, dict[str, float | None]] = {}
    for line in p.stdout.splitlines():
        parts = [x.strip() for x in line.split(",")]
        if len(parts) == 3:  # no memory.reserved
            parts.insert(2, "[N/A]")
        if len(parts) != 4:
            continue

        def num(s: str) -> float | None:
            try:
                return float(s)
            except ValueError:
                return None  # [N/A], [Not Supported]

        idx = num(parts[0])
        if idx is not None:
            out[int(idx)] = {"used": num(parts[1]), "reserved": num(parts[2]), "total": num(parts[3])}
    return out, wall, ""


def nvml_memory(nv: Any, h: Any) -> dict[str, Any]:
    """v1 and v2 of one GPU in MiB (v2: None and the error when the driver lacks it)."""
    out: dict[str, Any] = {}
    m1 = nv.nvmlDeviceGetMemoryInfo(h)
    out["v1"] = {"used": m1.used / MIB, "free": m1.free / MIB, "total": m1.total / MIB}
    try:
        m2 = nv.nvmlDeviceGetMemoryInfo(h, version=nv.nvmlMemory_v2)
        out["v2"] = {"used": m2.used / MIB, "reserved": m2.reserved / MIB, "free": m2.free / MIB, "total": m2.total / MIB}
    except Exception as e:  # noqa: BLE001 - reported, not fatal
        out["v2"] = None
        out["v2_error"] = f"{type(e).__name__}: {e}"
    return out


def d(a: float | None, b: float | None) -> str:
    return "n/a" if a is None or b is None else f"{a - b:+.1f}"


def memory_report(nv: Any, handles: list[Any], label: str, simulated: bool) -> None:
    print(f"\n(a) memory, {label}: NVML v1/v2 read just before and just after one nvidia-smi query (MiB)")
    before = [nvml_memory(nv, h) for h in handles]
    t0 = time.time()
    smi, wall, err = ({}, 0.0, "skipped (simulated)") if simulated else smi_memory()
    after = [nvml_memory(nv, h) for h in handles]
    span = time.time() - t0
    said = f"answered in {wall * 1000:.0f} ms" + (f" {err}" if smi and err else "")
    print(f"    nvidia-smi: {said if smi else err}; NVML before→after span {span:.2f} s")
    print(f"    {'GPU':<4}{'when':<7}{'v1 used':>10}{'v2 used':>10}{'v2 resv':>10}{'smi used':>10}{'smi resv':>10}"
          f"{'v2-smi':>9}{'v1-smi':>9}{'resv-smi':>9}{'v1-(v2+r)':>10}{'total':>10}")
    for i, (b, a) in enumerate(zip(before, after)):
        s = smi.get(i, {})
        for when, m in (("before", b), ("after", a)):
            v1, v2 = m["v1"], m["v2"]
            v2u = v2["used"] if v2 else None
            v2r = v2["reserved"] if v2 else None
            sum2 = (v2u + v2r) if v2 else None
            print(f"    {i:<4}{when:<7}{v1['used']:>10.1f}{_f(v2u):>10}{_f(v2r):>10}{_f(s.get('used')):>10}"
                  f"{_f(s.get('reserved')):>10}{d(v2u, s.get('used')):>9}{d(v1['used'], s.get('used')):>9}"
                  f"{d(v2r, s.get('reserved')):>9}{d(v1['used'], sum2):>10}{v1['total']:>10.0f}")
        if b.get("v2_error"):
            print(f"    GPU{i}: memory info v2 not available: {b['v2_error']}")
    ok = [abs(a["v2"]["used"] - smi[i]["used"]) <= 1.0  # type: ignore[operator]
          for i, a in enumerate(after) if a["v2"] and smi.get(i, {}).get("used") is not None]
    if ok:
        print(f"    v2 used within 1 MiB of nvidia-smi's memory.used: {sum(ok)} of {len(ok)} GPUs")


def _f(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1f}"


def start_load(nv: Any, h0: Any, idle_used: float | None) -> subprocess.Popen[bytes] | None:
    """A process holding 1 GiB on GPU0 (torch), or None; waits until NVML sees the memory (60 s at most)."""
    try:
        import importlib.util  # noqa: PLC0415

        if importlib.util.find_spec("torch") is None:
            print("\n(a) no torch here: the 'process holds memory' part is skipped")
            return None
    except (ImportError, ValueError):
        return None
    p = subprocess.Popen([sys.executable, "-c", LOAD_CMD], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and p.poll() is None:
        used = nvml_memory(nv, h0)["v1"]["used"]
        if idle_used is not None and used >= idle_used + 1000:
            time.sleep(1.0)  # let the allocation settle
            return p
        time.sleep(0.5)
    err = p.stderr.read().decode(errors="replace")[-300:] if p.poll() is not None and p.stderr else ""
    print(f"\n(a) the torch process did not show 1 GiB on GPU0 within 60 s {err!r}")
    stop_load(p)
    return None


def stop_load(p: subprocess.Popen[bytes]) -> None:
    p.terminate()
    try:
        p.wait(timeout=15)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


# ------------------------------------------------------------------ (b) CPU per call
def cpu_per_call(reps: int, fn: Any) -> tuple[float, float, str]:
    """(CPU ms, wall ms) per call of ``fn`` over ``reps`` calls, and the error text when it fails."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001
        if "Timeout" not in type(e).__name__:
            return float("nan"), float("nan"), f"{type(e).__name__}: {e}"
    c0, w0 = time.process_time(), time.perf_counter()
    for _ in range(reps):
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - the event wait answers Timeout when nothing happened
            if "Timeout" not in type(e).__name__:
                raise
    return (time.process_time() - c0) / reps * 1000, (time.perf_counter() - w0) / reps * 1000, ""


def call_costs(nv: Any, h: Any, reps: int) -> None:
    print(f"\n(b) CPU time per call on GPU0 (time.process_time over {reps} calls; wall beside it)")
    es = None
    try:
        es = nv.nvmlEventSetCreate()
        nv.nvmlDeviceRegisterEvents(h, nv.nvmlEventTypeXidCriticalError, es)
    except Exception as e:  # noqa: BLE001
        print(f"    event set: {type(e).__name__}: {e}")

    def create_free() -> None:
        s = nv.nvmlEventSetCreate()
        nv.nvmlEventSetFree(s)

    def create_register_free() -> None:
        s = nv.nvmlEventSetCreate()
        try:
            nv.nvmlDeviceRegisterEvents(h, nv.nvmlEventTypeXidCriticalError, s)
        finally:
            nv.nvmlEventSetFree(s)

    C, U = nv.NVML_MEMORY_ERROR_TYPE_CORRECTED, nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
    V, A = nv.NVML_VOLATILE_ECC, nv.NVML_AGGREGATE_ECC
    calls = {
        "nvmlDeviceGetMemoryInfo (v1)": lambda: nv.nvmlDeviceGetMemoryInfo(h),
        "nvmlDeviceGetMemoryInfo (v2)": lambda: nv.nvmlDeviceGetMemoryInfo(h, version=nv.nvmlMemory_v2),
        "nvmlDeviceGetEccMode": lambda: nv.nvmlDeviceGetEccMode(h),
        "TotalEccErrors corrected volatile": lambda: nv.nvmlDeviceGetTotalEccErrors(h, C, V),
        "TotalEccErrors uncorrected volatile": lambda: nv.nvmlDeviceGetTotalEccErrors(h, U, V),
        "TotalEccErrors corrected aggregate": lambda: nv.nvmlDeviceGetTotalEccErrors(h, C, A),
        "TotalEccErrors uncorrected aggregate": lambda: nv.nvmlDeviceGetTotalEccErrors(h, U, A),
        "nvmlDeviceGetRemappedRows": lambda: nv.nvmlDeviceGetRemappedRows(h),
        "EventSetCreate + Free": create_free,
        "EventSetCreate + RegisterEvents + Free": create_register_free,
        "nvmlEventSetWait_v2 (timeout 0)": (lambda: nv.nvmlEventSetWait_v2(es, 0)) if es is not None else None,
    }
    print(f"    {'call':<40}{'CPU ms':>10}{'wall ms':>10}")
    for name, fn in calls.items():
        if fn is None:
            print(f"    {name:<40}{'n/a (no event set)':>20}")
            continue
        cpu, wall, err = cpu_per_call(reps, fn)
        print(f"    {name:<40}" + (f"{'n/a: ' + err[:60]}" if err else f"{cpu:>10.4f}{wall:>10.4f}"))
    if es is not None:
        for ms, n in ((500, 6), (1000, 3)):  # the Xid thread's wait: is its CPU per wait or per second?
            c0, w0 = time.process_time(), time.perf_counter()
            for _ in range(n):
                try:
                    nv.nvmlEventSetWait_v2(es, ms)
                except Exception as e:  # noqa: BLE001 - Timeout: nothing happened
                    if "Timeout" not in type(e).__name__:
                        print(f"    nvmlEventSetWait_v2 ({ms} ms): {type(e).__name__}: {e}")
                        break
            wall = time.perf_counter() - w0
            print(f"    {'nvmlEventSetWait_v2 (timeout ' + str(ms) + ' ms)':<40}{(time.process_time() - c0) / n * 1000:>10.4f}"
                  f"{wall / n * 1000:>10.1f}   = {(time.process_time() - c0) / wall * 1000:.3f} ms CPU per second")
        nv.nvmlEventSetFree(es)


# ------------------------------------------------------------------ (c) gpuscope's own reading
def gpuscope_reading(nvml: Any, label: str, simulated: bool) -> None:
    from gpuscope.sources.nvml import NvmlSource  # noqa: PLC0415

    print(f"\n(c) gpuscope's reading through sources/nvml.py, {label}")
    src = NvmlSource(nvml, simulated=simulated)
    inv = src.open()
    try:
        f = src.sample()
        t_open = time.perf_counter()
        c0 = time.process_time()
        ticks = 5
        for _ in range(ticks):
            f2 = src.sample()
        cpu = (time.process_time() - c0) / ticks * 1000
        wall = (time.perf_counter() - t_open) / ticks * 1000
        how = "thread" if src._xid_thread is not None else "polled each tick" if src._event_set is not None else "not watched"
        print(f"    Xid events: {how}; notes: "
              + ("; ".join(e.text for e in f.events if e.kind == "note") or "none"))
        print(f"    a tick after the first (slow ticks included): {cpu:.2f} ms CPU, {wall:.1f} ms wall (whole process)")
        print(f"    {'GPU':<4}{'memory info':>12}{'used MiB':>10}{'resv MiB':>10}{'ECC c/u vol':>13}{'ECC c/u agg':>13}"
              f"{'rows c/u':>10}{'pending':>8}{'failed':>7}{'Xids':>6}")
        for dev, g in zip(inv.devices, f2.gpus):
            def n(x: Any) -> str:
                return "–" if x is None else str(x)
            print(f"    {dev.index:<4}{'v' + n(dev.memory_info_version):>12}"
                  f"{_f(g.mem_used_bytes / MIB if g.mem_used_bytes is not None else None):>10}"
                  f"{_f(g.mem_reserved_bytes / MIB if g.mem_reserved_bytes is not None else None):>10}"
                  f"{n(g.ecc_corrected_volatile) + '/' + n(g.ecc_uncorrected_volatile):>13}"
                  f"{n(g.ecc_corrected_aggregate) + '/' + n(g.ecc_uncorrected_aggregate):>13}"
                  f"{n(g.remapped_rows_correctable) + '/' + n(g.remapped_rows_uncorrectable):>10}"
                  f"{n(g.remap_pending):>8}{n(g.remap_failure):>7}{len(g.xids or ()):>6}")
    finally:
        src.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=200, help="calls per CPU measurement (200)")
    ap.add_argument("--no-load", action="store_true", help="skip the part with a process holding memory")
    ap.add_argument("--installed", action="store_true", help="test the installed gpuscope, not this checkout")
    ap.add_argument("--simulate", metavar="SCENARIO", help="a dry run over the simulated NVML (no GPU needed)")
    a = ap.parse_args()
    where = import_gpuscope(a.installed)
    import pynvml  # noqa: PLC0415

    if a.simulate:
        from gpuscope.sources.scenario import load  # noqa: PLC0415
        from gpuscope.sources.simnvml import SimNvml  # noqa: PLC0415

        nv: Any = SimNvml(load(a.simulate), pcie_block_s=0.0)
    else:
        nv = pynvml
    print("gpuscope device health check" + (" — SIMULATED NVML" if a.simulate else ""))
    print(f"    {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}; gpuscope from {where}")
    ver = getattr(pynvml, "__version__", None)
    try:
        from importlib.metadata import version  # noqa: PLC0415

        ver = ver or version("nvidia-ml-py")
    except Exception:  # noqa: BLE001
        pass
    print(f"    nvidia-ml-py {ver or '?'} ({pynvml.__file__}); python {sys.version.split()[0]}; "
          f"nvidia-smi {'at ' + str(shutil.which('nvidia-smi')) if shutil.which('nvidia-smi') else 'not found'}")
    nv.nvmlInit()
    try:
        n = nv.nvmlDeviceGetCount()
        handles = [nv.nvmlDeviceGetHandleByIndex(i) for i in range(n)]
        drv = nv.nvmlSystemGetDriverVersion()
        print(f"    driver {drv.decode() if isinstance(drv, bytes) else drv}; {n} GPUs")
        for i, h in enumerate(handles):
            name = nv.nvmlDeviceGetName(h)
            try:
                ecc = nv.nvmlDeviceGetEccMode(h)
            except Exception as e:  # noqa: BLE001
                ecc = type(e).__name__
            print(f"    GPU{i} {name.decode() if isinstance(name, bytes) else name}; ECC mode [current, pending] {ecc}")
        memory_report(nv, handles, "idle", bool(a.simulate))
        call_costs(nv, handles[0], a.reps)
        gpuscope_reading(nv if a.simulate else None, "idle", bool(a.simulate))
        if not a.no_load and not a.simulate:
            idle = nvml_memory(nv, handles[0])["v1"]["used"]
            p = start_load(nv, handles[0], idle)
            if p is not None:
                try:
                    memory_report(nv, handles, "a process holds 1 GiB on GPU0", False)
                    gpuscope_reading(None, "a process holds 1 GiB on GPU0", False)
                finally:
                    stop_load(p)
    finally:
        nv.nvmlShutdown()  # NVML counts inits: gpuscope's source init/shutdown pairs leave this one open until here
    print("\ndone: nothing was changed on any GPU")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
