"""The real backend of ``gpuscope probe``: timed copies on the GPUs through NVIDIA's ``cuda-bindings``.

Method (nvbandwidth's, with the driver API only: no compiler, no NVRTC kernel):

* **Pinned host buffers** from ``cuMemHostAlloc`` (portable), allocated while this thread is pinned
  (``os.sched_setaffinity``) to the CPUs NVML lists as the GPU's own; the driver touches the pages while
  pinning them, so under Linux's default first-touch policy they land on that NUMA node. Where the
  affinity is unknown or cannot be set, the result says ``host_memory_local: null``.
* **Copies queued behind a gate**: each stream first waits (``cuStreamWaitValue32``) on a 32-bit flag in
  mapped pinned memory; the start event, the copy and the stop event are queued behind it, and only then
  is the flag written from the host, so launch gaps and Python's overhead do not count (nvbandwidth does the
  same with a spin kernel). A GPU that refuses stream memory operations runs without the gate (said in the
  notes; a 256 MiB copy takes milliseconds, a launch microseconds).
* **CUDA events** time each copy; one untimed warm-up trial, then the **median** of ``trials``.
* **Host↔device**: ``cuMemcpyHtoDAsync`` / ``cuMemcpyDtoHAsync`` of ``copy_bytes``; both ways: the two at
  once on two streams, the figure is the sum of the two directions.
* **Device↔device**: ``cuMemcpyPeerAsync`` of ``copy_bytes``. Where ``cuDeviceCanAccessPeer`` allows it,
  peer access is enabled (``cuCtxEnablePeerAccess``) and the copy goes straight over NVLink or PCIe;
  otherwise the driver stages it through host memory, and the result says ``p2p: false``. ``read``: the
  copy is queued on the reading (destination) GPU's stream; ``write``: on the writing (source) GPU's.
* **Latency**: batches of 16 back-to-back 4-byte copies on one stream, per-copy time, median of 10 batches.
  This includes the copy engine's per-copy cost (nvbandwidth's latency tests use a pointer-chase kernel
  and read lower).
* **Method**: every figure is a copy-engine (DMA) copy, as nvbandwidth's ``*_ce`` tests; no kernel copies on
  the SMs (nvbandwidth's ``*_sm`` tests read differently: H100 host→device ~35 GB/s vs ~55, its issue #24) and
  no all-reduce. Each Measurement says so in ``method`` (``core/probe.py`` ``METHOD_*``: the CUDA call).
* Device memory: two buffers of ``copy_bytes`` per GPU (≤ ``--max-memory``, default 1 GiB); the host
  the same in pinned memory. Everything is freed in ``close()``, also after Ctrl-C or an error.

The CUDA major version of the bindings must not be newer than the driver's (``cuDriverGetVersion``):
a CUDA 12 driver needs ``cuda-bindings`` 12.x. Missing or mismatched bindings raise
:class:`CudaUnavailable` with the one ``pip install`` line to run.
"""

from __future__ import annotations

import ctypes
import logging
import os
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuscope.core import probe as P
from gpuscope.core.model import Inventory
from gpuscope.core.topology import normalize_bus_id

log = logging.getLogger(__name__)

LAT_BATCH = 16
LAT_BATCHES = 10
WAIT_TIMEOUT_S = 120.0  # a copy set that has not finished by then: the GPU is wedged or far too slow
_MEMHOSTALLOC_PORTABLE = 0x1
_MEMHOSTALLOC_DEVICEMAP = 0x2
_GEQ = 0  # CU_STREAM_WAIT_VALUE_GEQ: wait until (int32)(*addr - value) >= 0 (cyclic)


class CudaUnavailable(P.ProbeError):
    """No CUDA driver, no bindings, or bindings for another CUDA major version than the driver's."""


def install_line(driver_major: int | None) -> str:
    """What to install for a driver of CUDA ``driver_major``."""
    if driver_major:
        return f"pip install 'cuda-bindings>={driver_major},<{driver_major + 1}'"
    return "pip install 'gpuscope-inference[probe]'"


def driver_cuda_version() -> int | None:
    """The driver's CUDA version (13000 for 13.0) read from libcuda with ctypes, before any binding is
    imported; None when there is no driver library."""
    for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        v = ctypes.c_int(0)
        try:
            if lib.cuDriverGetVersion(ctypes.byref(v)) == 0:
                return int(v.value)
        except AttributeError:
            return None
    return None


def bindings_version() -> str | None:
    """The installed ``cuda-bindings`` version, or None."""
    try:
        from importlib.metadata import PackageNotFoundError, version
    except ImportError:  # pragma: no cover
        return None
    try:
        return version("cuda-bindings")
    except PackageNotFoundError:
        return None


def load_driver() -> tuple[Any, str]:
    """Import ``cuda.bindings.driver`` for this machine's driver and ``cuInit`` it.

    Returns (module, backend words). Raises :class:`CudaUnavailable` with one line saying what to do."""
    drv = driver_cuda_version()
    if drv is None:
        raise CudaUnavailable("no NVIDIA CUDA driver (libcuda.so.1) found: the probe needs a GPU and its driver "
                              "(try --simulate SCENARIO)")
    major = drv // 1000
    have = bindings_version()
    if have is None:
        raise CudaUnavailable(f"the probe needs NVIDIA's CUDA bindings for the driver's CUDA {major}: "
                              f"{install_line(major)}")
    try:
        have_major = int(have.split(".")[0])
    except ValueError:
        have_major = major
    if have_major > major:
        raise CudaUnavailable(f"cuda-bindings {have} is for CUDA {have_major}, the driver supports CUDA "
                              f"{major}.{drv % 1000 // 10}: {install_line(major)}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # its own version warning: said above in one line instead
            from cuda.bindings import driver as cu  # type: ignore[import-not-found, import-untyped, unused-ignore]
    except ImportError as e:
        raise CudaUnavailable(f"cuda-bindings {have} does not import ({e}): {install_line(major)}") from None
    (err,) = cu.cuInit(0)
    if err != cu.CUresult.CUDA_SUCCESS:
        raise CudaUnavailable(f"cuInit failed: {_err_name(cu, err)} (is a GPU visible? CUDA_VISIBLE_DEVICES?)")
    return cu, f"cuda-bindings {have} (driver CUDA {major}.{drv % 1000 // 10})"


def _err_name(cu: Any, err: Any) -> str:
    try:
        e2, name = cu.cuGetErrorName(err)
        if e2 == cu.CUresult.CUDA_SUCCESS and name:
            return name.decode() if isinstance(name, bytes) else str(name)
    except Exception:  # noqa: BLE001 - naming an error must never raise another
        pass
    return str(err)


class CudaCallError(P.ProbeError):
    """A CUDA driver call that failed: ``cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY``."""


@dataclass
class _Gpu:
    index: int  # NVML index (the one gpuscope shows)
    ordinal: int  # CUDA ordinal
    dev: Any
    ctx: Any = None
    streams: list[Any] = field(default_factory=list)
    events: list[tuple[Any, Any]] = field(default_factory=list)  # (start, stop) per stream
    dbuf: list[Any] = field(default_factory=list)
    hbuf: list[int] = field(default_factory=list)
    gate_host: int = 0
    gate_dev: Any = None
    gate_ok: bool = False
    gen: int = 0
    cpus: set[int] | None = None


def parse_cpus(text: str | None) -> set[int] | None:
    """``0-31,64-95`` → the set of CPU numbers (None when unknown or malformed)."""
    if not text:
        return None
    out: set[int] = set()
    try:
        for part in text.split(","):
            lo, _, hi = part.strip().partition("-")
            out.update(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        return None
    return out or None


class CudaProbe:
    """One run's GPUs, contexts and buffers. Use as a context manager: ``close()`` frees everything."""

    def __init__(self, cu: Any, backend: str, inv: Inventory, gpus: Sequence[int], copy_bytes: int,
                 trials: int = P.DEFAULT_TRIALS):
        self.cu = cu
        self.backend = backend
        self.inv = inv
        self.size = copy_bytes
        self.trials = max(1, trials)
        self.notes: list[str] = []
        self.gpus: dict[int, _Gpu] = {}
        self._order = list(gpus)
        self._affinity0: set[int] | None = None
        self._peer_enabled: list[tuple[_Gpu, _Gpu]] = []
        self._closed = False

    # -------------------------------------------------------------- driver calls
    def call(self, name: str, *args: Any) -> Any:
        """``cu.<name>(*args)``: the outputs after the result code; a failure raises :class:`CudaCallError`."""
        out = getattr(self.cu, name)(*args)
        err = out[0]
        if err != self.cu.CUresult.CUDA_SUCCESS:
            raise CudaCallError(f"{name}: {_err_name(self.cu, err)}")
        return None if len(out) == 1 else out[1] if len(out) == 2 else tuple(out[1:])

    def _set(self, g: _Gpu) -> None:
        self.call("cuCtxSetCurrent", g.ctx)

    # -------------------------------------------------------------- set-up
    def __enter__(self) -> CudaProbe:
        try:
            self.open()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def open(self) -> None:
        """Map gpuscope's (NVML) indices to CUDA ordinals by PCI bus id, then set up each GPU."""
        count = self.call("cuDeviceGetCount")
        by_bus: dict[str, tuple[int, Any]] = {}
        for ordinal in range(count):
            dev = self.call("cuDeviceGet", ordinal)
            bus = self.call("cuDeviceGetPCIBusId", 64, dev)
            text = bus.decode(errors="replace") if isinstance(bus, (bytes, bytearray)) else str(bus)
            by_bus[normalize_bus_id(text.split("\x00")[0])] = (ordinal, dev)
        for i in self._order:
            d = next((d for d in self.inv.devices if d.index == i), None)
            if d is None:
                raise P.ProbeError(f"no GPU{i} on this machine")
            hit = by_bus.get(normalize_bus_id(d.bus_id))
            if hit is None:
                raise P.ProbeError(f"GPU{i} ({d.bus_id}) is not visible to CUDA (CUDA_VISIBLE_DEVICES?)")
            self.gpus[i] = _Gpu(i, hit[0], hit[1], cpus=parse_cpus(d.cpu_affinity))
        try:
            self._affinity0 = set(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            self._affinity0 = None
        for g in self.gpus.values():
            self._setup(g)

    def _pin_to(self, g: _Gpu) -> bool:
        """Run this thread on ``g``'s own CPUs (True when done)."""
        if not g.cpus or self._affinity0 is None:
            return False
        cpus = g.cpus & self._affinity0 or g.cpus
        try:
            os.sched_setaffinity(0, cpus)
            return True
        except (OSError, ValueError):
            return False

    def _unpin(self) -> None:
        if self._affinity0 is not None:
            try:
                os.sched_setaffinity(0, self._affinity0)
            except (OSError, ValueError):
                pass

    def _setup(self, g: _Gpu) -> None:
        g.ctx = self.call("cuDevicePrimaryCtxRetain", g.dev)
        self._set(g)
        free, _total = self.call("cuMemGetInfo")
        need = 2 * self.size
        if int(free) < need + (64 << 20):
            raise P.ProbeError(f"GPU{g.index} has {int(free) >> 20} MiB free, the probe needs {need >> 20} MiB "
                               "(lower --max-memory)")
        for _ in range(2):
            g.streams.append(self.call("cuStreamCreate", 1))  # CU_STREAM_NON_BLOCKING
            g.events.append((self.call("cuEventCreate", 0), self.call("cuEventCreate", 0)))
            g.dbuf.append(self.call("cuMemAlloc", self.size))
        pinned = self._pin_to(g)
        try:
            for _ in range(2):
                g.hbuf.append(int(self.call("cuMemHostAlloc", self.size, _MEMHOSTALLOC_PORTABLE)))
            g.gate_host = int(self.call("cuMemHostAlloc", 64, _MEMHOSTALLOC_PORTABLE | _MEMHOSTALLOC_DEVICEMAP))
        finally:
            self._unpin()
        g.cpus = g.cpus if pinned else None
        ctypes.c_uint32.from_address(g.gate_host).value = 0
        g.gate_dev = self.call("cuMemHostGetDevicePointer", g.gate_host, 0)
        try:  # is the gate usable? (value 0 is met at once)
            self.call("cuStreamWaitValue32", g.streams[0], g.gate_dev, 0,
                      _GEQ)
            self.call("cuStreamSynchronize", g.streams[0])
            g.gate_ok = True
        except CudaCallError as e:
            self.notes.append(f"GPU{g.index}: copies not held behind a gate ({e}): launch gaps count")

    def enable_peer(self, a: _Gpu, b: _Gpu) -> bool:
        """Enable peer access both ways where the hardware allows it; False: copies are staged through host."""
        if not (self.call("cuDeviceCanAccessPeer", a.dev, b.dev) and self.call("cuDeviceCanAccessPeer", b.dev, a.dev)):
            return False
        for x, y in ((a, b), (b, a)):
            self._set(x)
            (err,) = self.cu.cuCtxEnablePeerAccess(y.ctx, 0)
            if err == self.cu.CUresult.CUDA_SUCCESS:
                self._peer_enabled.append((x, y))
            elif err != self.cu.CUresult.CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED:
                raise CudaCallError(f"cuCtxEnablePeerAccess: {_err_name(self.cu, err)}")
        return True

    # -------------------------------------------------------------- timing
    def _timed(self, jobs: list[tuple[_Gpu, int, Callable[[Any], None]]], trials: int,
               during: Callable[[], None] | None = None) -> list[list[float]]:
        """Run ``jobs`` (gpu, stream slot, enqueue(stream)) together ``trials`` + 1 times (the first untimed);
        each job's milliseconds per timed trial. ``during`` runs once while the last trial's copies fly."""
        times: list[list[float]] = [[] for _ in jobs]
        gates = {id(g): g for g, _, _ in jobs}.values()
        for k in range(trials + 1):
            for g in gates:
                g.gen += 1
            for g, slot, enqueue in jobs:
                self._set(g)
                s = g.streams[slot]
                start, stop = g.events[slot]
                if g.gate_ok:
                    self.call("cuStreamWaitValue32", s, g.gate_dev, g.gen & 0xFFFFFFFF,
                              _GEQ)
                self.call("cuEventRecord", start, s)
                enqueue(s)
                self.call("cuEventRecord", stop, s)
            for g in gates:
                ctypes.c_uint32.from_address(g.gate_host).value = g.gen & 0xFFFFFFFF
            if during is not None and k == trials:
                during()
            for n, (g, slot, _) in enumerate(jobs):
                start, stop = g.events[slot]
                self._wait(stop)
                if k:
                    times[n].append(float(self.call("cuEventElapsedTime", start, stop)))
        return times

    def _wait(self, event: Any) -> None:
        """Poll an event (Ctrl-C stays responsive) until it completes; ProbeError after WAIT_TIMEOUT_S."""
        deadline = time.monotonic() + WAIT_TIMEOUT_S
        while True:
            (err,) = self.cu.cuEventQuery(event)
            if err == self.cu.CUresult.CUDA_SUCCESS:
                return
            if err != self.cu.CUresult.CUDA_ERROR_NOT_READY:
                raise CudaCallError(f"cuEventQuery: {_err_name(self.cu, err)}")
            if time.monotonic() > deadline:
                raise P.ProbeError(f"a copy did not finish within {WAIT_TIMEOUT_S:.0f} s")
            time.sleep(0.0002)

    def _rate(self, times_ms: list[float], nbytes: int, method: str) -> P.Measurement:
        return P.median_measurement([nbytes / (ms / 1e3) for ms in times_ms if ms > 0], nbytes, method)

    def _both(self, times: list[list[float]], nbytes: int, method: str) -> P.Measurement:
        sums = [nbytes / (x / 1e3) + nbytes / (y / 1e3) for x, y in zip(times[0], times[1]) if x > 0 and y > 0]
        return P.median_measurement(sums, 2 * nbytes, method)

    def _latency(self, jobs: list[tuple[_Gpu, int, Callable[[Any], None]]], method: str) -> P.Measurement:
        def batch(enqueue: Callable[[Any], None]) -> Callable[[Any], None]:
            def run(s: Any) -> None:
                for _ in range(LAT_BATCH):
                    enqueue(s)
            return run
        t = self._timed([(g, slot, batch(f)) for g, slot, f in jobs], LAT_BATCHES)
        return P.median_measurement([ms * 1e3 / LAT_BATCH for ms in t[0]], P.LATENCY_BYTES, method)

    # -------------------------------------------------------------- the figures
    def host(self, i: int, link_now: Callable[[int], tuple[int | None, int | None]] | None = None,
             progress: Callable[[str], None] | None = None) -> P.GpuResult:
        """GPU ``i``'s host figures; ``link_now(i)`` is asked for the link's generation and width while the
        last host→device copy is in flight (GPUs lower the generation at idle)."""
        g = self.gpus[i]
        dev = next(d for d in self.inv.devices if d.index == i)
        n = self.size
        if progress:
            progress(f"GPU{i}: host↔device")
        pinned = self._pin_to(g)
        seen: list[tuple[int | None, int | None]] = []
        try:
            h2d = self._timed([(g, 0, lambda s: self.call("cuMemcpyHtoDAsync", g.dbuf[0], g.hbuf[0], n, s))],
                              self.trials, during=(lambda: seen.append(link_now(i))) if link_now else None)
            d2h = self._timed([(g, 1, lambda s: self.call("cuMemcpyDtoHAsync", g.hbuf[1], g.dbuf[1], n, s))],
                              self.trials)
            both = self._timed([(g, 0, lambda s: self.call("cuMemcpyHtoDAsync", g.dbuf[0], g.hbuf[0], n, s)),
                                (g, 1, lambda s: self.call("cuMemcpyDtoHAsync", g.hbuf[1], g.dbuf[1], n, s))],
                               self.trials)
            lat_h2d = self._latency([(g, 0, lambda s: self.call("cuMemcpyHtoDAsync", g.dbuf[0], g.hbuf[0],
                                                                  P.LATENCY_BYTES, s))], P.METHOD_H2D)
            lat_d2h = self._latency([(g, 1, lambda s: self.call("cuMemcpyDtoHAsync", g.hbuf[1], g.dbuf[1],
                                                                  P.LATENCY_BYTES, s))], P.METHOD_D2H)
        finally:
            if pinned:
                self._unpin()
        gen, width = seen[0] if seen else (None, None)
        return P.GpuResult(i, dev.name, P.host_link(dev, gen, width), numa_node=dev.numa_node,
                           host_memory_local=True if g.cpus else None,
                           h2d=self._rate(h2d[0], n, P.METHOD_H2D), d2h=self._rate(d2h[0], n, P.METHOD_D2H),
                           bidir=self._both(both, n, P.METHOD_BIDIR),
                           h2d_latency=lat_h2d, d2h_latency=lat_d2h)

    def pair(self, a_i: int, b_i: int, progress: Callable[[str], None] | None = None) -> P.PairResult:
        """Device↔device figures between GPUs ``a_i`` < ``b_i``."""
        a, b = self.gpus[a_i], self.gpus[b_i]
        n = self.size
        link = self.inv.pair(a_i, b_i)
        da = next(d for d in self.inv.devices if d.index == a_i)
        p2p = self.enable_peer(a, b)
        if progress:
            progress(f"GPU{a_i}↔GPU{b_i}: device↔device" + ("" if p2p else " (staged through host: no peer access)"))

        def copy(dst: _Gpu, src: _Gpu, nbytes: int = n) -> Callable[[Any], None]:
            return lambda s: self.call("cuMemcpyPeerAsync", dst.dbuf[1], dst.ctx, src.dbuf[0], src.ctx, nbytes, s)

        read = self._timed([(a, 0, copy(a, b))], self.trials)  # a reads b: on a's stream
        write = self._timed([(a, 0, copy(b, a))], self.trials)  # a writes to b: on a's stream
        bidir_read = self._timed([(a, 0, copy(a, b)), (b, 0, copy(b, a))], self.trials)
        bidir_write = self._timed([(a, 0, copy(b, a)), (b, 0, copy(a, b))], self.trials)
        how = P.METHOD_PEER if p2p else P.METHOD_PEER_STAGED
        lat = self._latency([(a, 0, copy(a, b, P.LATENCY_BYTES))], how)
        return P.PairResult(a_i, b_i, link.pcie_path if link else "SYS", nvlinks=link.nvlinks if link else 0,
                            nvlink_version=da.nvlink_version, p2p=p2p,
                            read=self._rate(read[0], n, how), write=self._rate(write[0], n, how),
                            bidir_read=self._both(bidir_read, n, how), bidir_write=self._both(bidir_write, n, how),
                            latency=lat)

    def run(self, link_now: Callable[[int], tuple[int | None, int | None]] | None = None,
            progress: Callable[[str], None] | None = None, t: float | None = None) -> P.ProbeResult:
        """Every GPU's host figures, then every pair's."""
        t0 = time.time() if t is None else t
        gpus = tuple(self.host(i, link_now, progress) for i in self._order)
        pairs = tuple(self.pair(a, b, progress) for a, b in P.pairs_of(self._order))
        notes = list(self.notes)
        if any(g.host_memory_local is None for g in gpus):
            notes.append("host buffers: NUMA placement unknown (GPU's CPU affinity not known or not settable)")
        if any(p.p2p is False for p in pairs):
            notes.append("pairs without peer access were copied through host memory (staged by the driver)")
        return P.ProbeResult(t=t0, host=self.inv.host, backend=self.backend, gpus=gpus, pairs=pairs,
                             notes=tuple(notes),
                             nvlink_link_bytes_per_s={k: v for k, v in P.nvlink_rates(self.inv).items()
                                                      if k in self.gpus})

    # -------------------------------------------------------------- tear-down
    def close(self) -> None:
        """Open every gate (so no stream waits forever), wait for the GPUs, free all buffers, streams and
        events, disable peer access and release the contexts. Safe to call twice and after any failure."""
        if self._closed:
            return
        self._closed = True
        cu = self.cu
        for g in self.gpus.values():
            if g.gate_host:
                ctypes.c_uint32.from_address(g.gate_host).value = (g.gen + 1) & 0xFFFFFFFF
        for g in self.gpus.values():
            if g.ctx is None:
                continue
            _quiet(cu.cuCtxSetCurrent, g.ctx)
            _quiet(cu.cuCtxSynchronize)
        for x, y in self._peer_enabled:
            _quiet(cu.cuCtxSetCurrent, x.ctx)
            _quiet(cu.cuCtxDisablePeerAccess, y.ctx)
        for g in self.gpus.values():
            if g.ctx is None:
                continue
            _quiet(cu.cuCtxSetCurrent, g.ctx)
            for start, stop in g.events:
                _quiet(cu.cuEventDestroy, start)
                _quiet(cu.cuEventDestroy, stop)
            for s in g.streams:
                _quiet(cu.cuStreamDestroy, s)
            for d in g.dbuf:
                _quiet(cu.cuMemFree, d)
            for h in g.hbuf + ([g.gate_host] if g.gate_host else []):
                _quiet(cu.cuMemFreeHost, h)
            _quiet(cu.cuDevicePrimaryCtxRelease, g.dev)
        self._unpin()


def _quiet(fn: Callable[..., Any], *args: Any) -> None:
    """A clean-up call whose failure is logged, never raised (the first error is the one to show)."""
    try:
        fn(*args)
    except Exception as e:  # noqa: BLE001
        log.debug("clean-up %s failed: %s", getattr(fn, "__name__", fn), e)


def probe(inv: Inventory, gpus: Sequence[int], *, copy_bytes: int, trials: int = P.DEFAULT_TRIALS,
          link_now: Callable[[int], tuple[int | None, int | None]] | None = None,
          progress: Callable[[str], None] | None = None, driver: tuple[Any, str] | None = None) -> P.ProbeResult:
    """Measure ``gpus`` of ``inv`` on the real GPUs (``driver``: what :func:`load_driver` returned, else it is
    called). Raises :class:`CudaUnavailable` (no driver or bindings), :class:`gpuscope.core.probe.ProbeError`
    (a GPU missing, short of memory, a failed call); KeyboardInterrupt passes through after everything was
    freed."""
    cu, backend = driver or load_driver()
    with CudaProbe(cu, backend, inv, gpus, copy_bytes, trials) as run:
        return run.run(link_now, progress)


def link_reader(nvml: Any) -> Callable[[int], tuple[int | None, int | None]]:
    """A function giving GPU ``i``'s PCIe generation and width now (NVML), None where it cannot say."""

    def read(i: int) -> tuple[int | None, int | None]:
        try:
            h = nvml.nvmlDeviceGetHandleByIndex(i)
            return int(nvml.nvmlDeviceGetCurrPcieLinkGeneration(h)), int(nvml.nvmlDeviceGetCurrPcieLinkWidth(h))
        except Exception:  # noqa: BLE001 - NVML's errors: the link stays unknown
            return None, None

    return read
