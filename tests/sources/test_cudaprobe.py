"""The real probe backend (sources/cudaprobe.py) against a fake of cuda.bindings.driver, and the command's
edges (no CUDA, mismatched bindings, busy GPUs, Ctrl-C). The real thing runs on a GPU: tools/probe_check.py."""

from __future__ import annotations

import ctypes
import io
import json
from types import SimpleNamespace
from typing import Any

import pytest

from gpuscope.cli import probe as cli_probe
from gpuscope.cli.main import main
from gpuscope.core import probe as P
from gpuscope.core.errors import GpuscopeError
from gpuscope.core.model import DeviceInfo, Inventory, PairLink
from gpuscope.sources import cudaprobe

OK, NOT_READY, ALREADY = 0, 600, 704
MiB = 1 << 20


class _Stream:
    def __init__(self) -> None:
        self.clock = 0.0
        self.wait: tuple[int, int] | None = None


class _Event:
    def __init__(self) -> None:
        self.t = 0.0
        self.wait: tuple[int, int] | None = None


class FakeDriver:
    """Enough of cuda.bindings.driver's legacy API (tuples of result code and outputs) for CudaProbe: copies
    take bytes / bandwidth on their stream's clock; a stream gated by cuStreamWaitValue32 holds its events
    until the host writes the flag."""

    CUresult = SimpleNamespace(CUDA_SUCCESS=OK, CUDA_ERROR_NOT_READY=NOT_READY,
                               CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED=ALREADY)

    def __init__(self, h2d: float = 25e9, d2h: float = 26e9, peer: float = 20e9, can_peer: bool = True,
                 gate: bool = True, interrupt_after: int | None = None) -> None:
        self.bw = {"h2d": h2d, "d2h": d2h, "peer": peer}
        self.can_peer = can_peer
        self.gate = gate
        self.interrupt_after = interrupt_after
        self.copies = 0
        self.live: dict[int, str] = {}  # id → what, for everything allocated and not freed
        self.host: dict[int, Any] = {}
        self.ctx: Any = None
        self.released: list[Any] = []

    def _new(self, what: str, obj: Any) -> Any:
        self.live[id(obj)] = what
        return obj

    def _free(self, obj: Any) -> tuple[int]:
        self.live.pop(id(obj), None)
        return (OK,)

    def cuGetErrorName(self, err: int) -> tuple[int, bytes]:  # noqa: N802
        return OK, f"CUDA_ERROR_{err}".encode()

    def cuDeviceGetCount(self) -> tuple[int, int]:  # noqa: N802
        return OK, 2

    def cuDeviceGet(self, i: int) -> tuple[int, int]:  # noqa: N802
        return OK, i

    def cuDeviceGetPCIBusId(self, n: int, dev: int) -> tuple[int, bytes]:  # noqa: N802
        return OK, f"0000:{0x18 + dev:02X}:00.0\x00\x00".encode()  # CUDA ordinal 0 is NVML's GPU1 below

    def cuDevicePrimaryCtxRetain(self, dev: int) -> tuple[int, Any]:  # noqa: N802
        return OK, self._new("ctx", ["ctx", dev])

    def cuDevicePrimaryCtxRelease(self, dev: int) -> tuple[int]:  # noqa: N802
        self.released.append(dev)
        for k, v in list(self.live.items()):
            if v == "ctx":
                self.live.pop(k)
                break
        return (OK,)

    def cuCtxSetCurrent(self, ctx: Any) -> tuple[int]:  # noqa: N802
        self.ctx = ctx
        return (OK,)

    def cuCtxSynchronize(self) -> tuple[int]:  # noqa: N802
        return (OK,)

    def cuMemGetInfo(self) -> tuple[int, int, int]:  # noqa: N802
        return OK, 80 << 30, 80 << 30

    def cuStreamCreate(self, flags: int) -> tuple[int, Any]:  # noqa: N802
        return OK, self._new("stream", _Stream())

    def cuStreamDestroy(self, s: Any) -> tuple[int]:  # noqa: N802
        return self._free(s)

    def cuStreamSynchronize(self, s: Any) -> tuple[int]:  # noqa: N802
        return (OK,)

    def cuEventCreate(self, flags: int) -> tuple[int, Any]:  # noqa: N802
        return OK, self._new("event", _Event())

    def cuEventDestroy(self, e: Any) -> tuple[int]:  # noqa: N802
        return self._free(e)

    def cuMemAlloc(self, n: int) -> tuple[int, Any]:  # noqa: N802
        return OK, self._new("device", ["dptr", n])

    def cuMemFree(self, d: Any) -> tuple[int]:  # noqa: N802
        return self._free(d)

    def cuMemHostAlloc(self, n: int, flags: int) -> tuple[int, int]:  # noqa: N802
        buf = (ctypes.c_char * n)()
        addr = ctypes.addressof(buf)
        self.host[addr] = buf
        self.live[addr] = "host"
        return OK, addr

    def cuMemFreeHost(self, addr: int) -> tuple[int]:  # noqa: N802
        self.live.pop(addr, None)
        return (OK,)

    def cuMemHostGetDevicePointer(self, addr: int, flags: int) -> tuple[int, int]:  # noqa: N802
        return OK, addr

    def cuStreamWaitValue32(self, s: _Stream, addr: int, value: int, flags: int) -> tuple[int]:  # noqa: N802
        if not self.gate:
            return (801,)
        s.wait = (addr, value)
        return (OK,)

    def cuEventRecord(self, e: _Event, s: _Stream) -> tuple[int]:  # noqa: N802
        e.t, e.wait = s.clock, s.wait
        return (OK,)

    def cuEventQuery(self, e: _Event) -> tuple[int]:  # noqa: N802
        if e.wait is not None:
            addr, value = e.wait
            if ctypes.c_uint32.from_address(addr).value < value:
                return (NOT_READY,)
        return (OK,)

    def cuEventElapsedTime(self, a: _Event, b: _Event) -> tuple[int, float]:  # noqa: N802
        return OK, (b.t - a.t) * 1e3

    def _copy(self, s: _Stream, n: int, kind: str) -> tuple[int]:
        self.copies += 1
        if self.interrupt_after is not None and self.copies > self.interrupt_after:
            raise KeyboardInterrupt
        s.clock += n / self.bw[kind] + (1e-6 if n < 1024 else 0.0)
        return (OK,)

    def cuMemcpyHtoDAsync(self, d: Any, h: int, n: int, s: _Stream) -> tuple[int]:  # noqa: N802
        assert h in self.host and d[1] >= n
        return self._copy(s, n, "h2d")

    def cuMemcpyDtoHAsync(self, h: int, d: Any, n: int, s: _Stream) -> tuple[int]:  # noqa: N802
        assert h in self.host and d[1] >= n
        return self._copy(s, n, "d2h")

    def cuMemcpyPeerAsync(self, dst: Any, dctx: Any, src: Any, sctx: Any, n: int, s: _Stream) -> tuple[int]:  # noqa: N802
        assert dctx is not sctx
        return self._copy(s, n, "peer")

    def cuDeviceCanAccessPeer(self, a: int, b: int) -> tuple[int, int]:  # noqa: N802
        return OK, int(self.can_peer)

    def cuCtxEnablePeerAccess(self, ctx: Any, flags: int) -> tuple[int]:  # noqa: N802
        return (OK,)

    def cuCtxDisablePeerAccess(self, ctx: Any) -> tuple[int]:  # noqa: N802
        return (OK,)


def _inv() -> Inventory:
    devs = tuple(DeviceInfo(i, "NVIDIA H200", f"GPU-{i}", f"00000000:{0x19 - i:02X}:00.0", pcie_gen_gpu_max=5,
                            pcie_width_gpu_max=16, pcie_gen_sys_max=5, pcie_width_sys_max=16, numa_node=0,
                            nvlink_version=6, nvlinks_active=18) for i in range(2))
    return Inventory("h", devs, (PairLink(0, 1, "NODE", 18, True),))


def _run(fake: FakeDriver, **kw: Any) -> P.ProbeResult:
    return cudaprobe.probe(_inv(), [0, 1], copy_bytes=4 * MiB, trials=3, driver=(fake, "fake"),
                           link_now=lambda i: (5, 16), **kw)


def test_figures_from_timed_copies() -> None:
    fake = FakeDriver()
    r = _run(fake)
    g0 = r.gpu(0)
    assert g0 is not None and g0.h2d is not None and g0.d2h is not None and g0.bidir is not None
    assert g0.h2d.value == pytest.approx(25e9) and g0.h2d.trials == 3 and g0.h2d.size_bytes == 4 * MiB
    assert g0.d2h.value == pytest.approx(26e9)
    assert g0.bidir.value == pytest.approx(51e9)
    assert g0.link.gen_now == 5 and g0.h2d_latency is not None and 0 < g0.h2d_latency.value < 10
    (p,) = r.pairs
    assert p.p2p is True and p.nvlinks == 18 and p.read is not None and p.read.value == pytest.approx(20e9)
    assert fake.live == {}, "everything allocated was freed"
    assert sorted(fake.released) == [0, 1]


def test_without_peer_access_the_pair_is_staged() -> None:
    r = _run(FakeDriver(can_peer=False))
    assert r.pairs[0].p2p is False
    assert any("through host memory" in n for n in r.notes)


def test_without_gate_it_still_runs_and_says_so() -> None:
    r = _run(FakeDriver(gate=False))
    assert r.gpu(0).h2d.value == pytest.approx(25e9)  # type: ignore[union-attr]
    assert any("not held behind a gate" in n for n in r.notes)


def test_ctrl_c_frees_everything() -> None:
    fake = FakeDriver(interrupt_after=7)
    with pytest.raises(KeyboardInterrupt):
        _run(fake)
    assert fake.live == {}


def test_gpu_not_visible_to_cuda() -> None:
    inv = _inv()
    inv = Inventory("h", (inv.devices[0], DeviceInfo(1, "x", "u", "0000:99:00.0")), inv.pairs)
    fake = FakeDriver()
    with pytest.raises(P.ProbeError, match="not visible to CUDA"):
        cudaprobe.probe(inv, [0, 1], copy_bytes=4 * MiB, driver=(fake, "fake"))
    assert fake.live == {}


@pytest.mark.parametrize("driver,bindings,words", [
    (None, None, "no NVIDIA CUDA driver"),
    (13000, None, "pip install 'cuda-bindings>=13,<14'"),
    (12040, "13.5.0", "cuda-bindings 13.5.0 is for CUDA 13, the driver supports CUDA 12.4: pip install "
                      "'cuda-bindings>=12,<13'"),
])
def test_missing_or_mismatched_cuda(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                    driver: int | None, bindings: str | None, words: str) -> None:
    monkeypatch.setattr(cudaprobe, "driver_cuda_version", lambda: driver)
    monkeypatch.setattr(cudaprobe, "bindings_version", lambda: bindings)
    assert main(["probe"]) == 1
    err = capsys.readouterr().err
    assert words in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("text,value", [("1G", 1 << 30), ("512M", 512 * MiB), ("268435456", 256 * MiB),
                                        ("1.5GiB", 3 << 29), ("64 mb", 64 * MiB)])
def test_memory_sizes(text: str, value: int) -> None:
    assert cli_probe.memory_size(text) == value


@pytest.mark.parametrize("text", ["", "G", "-1G", "1T", "lots", "nan"])
def test_bad_memory_sizes(text: str) -> None:
    import argparse

    with pytest.raises(argparse.ArgumentTypeError):
        cli_probe.memory_size(text)


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("stdin,yes,ok", [
    (io.StringIO(""), False, False),  # nobody to ask: refused
    (io.StringIO(""), True, True),
    (_Tty("y\n"), False, True),
    (_Tty("\n"), False, False),
])
def test_confirm_before_loading_busy_gpus(stdin: io.StringIO, yes: bool, ok: bool) -> None:
    busy = {0: ["2811 python3"]}
    err = io.StringIO()
    if ok:
        cli_probe.confirm(busy, yes, stdin, err)
    else:
        with pytest.raises(GpuscopeError) as e:
            cli_probe.confirm(busy, yes, stdin, err)
        assert "\n" not in str(e.value)
        assert "--yes" in str(e.value) or str(e.value) == "not probed"


def _fake_real_machine(monkeypatch: pytest.MonkeyPatch, fake: FakeDriver) -> None:
    """`gpuscope probe` without --simulate, on the simulated H200 machine (NVML) with the fake CUDA."""
    from gpuscope.sources import live

    real_open = live.open_source
    monkeypatch.setattr(cudaprobe, "load_driver", lambda: (fake, "fake"))
    monkeypatch.setattr(live, "open_source", lambda simulate=None, **kw: real_open("h200-nvswitch-8", virtual_at=0.0))
    bus = {0: 0x19, 1: 0x18}  # the fake's bus ids

    def inv_patch(inv: Inventory) -> Inventory:
        from dataclasses import replace

        return replace(inv, devices=tuple(replace(d, bus_id=f"00000000:{bus.get(d.index, 0x99):02X}:00.0")
                                          for d in inv.devices))

    real_probe = cudaprobe.probe
    monkeypatch.setattr(cudaprobe, "probe", lambda inv, gpus, **kw: real_probe(inv_patch(inv), gpus, **kw))


def test_command_on_a_busy_machine_refuses_without_yes(monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    _fake_real_machine(monkeypatch, FakeDriver())
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    rc = main(["probe", "--gpus", "0,1", "--max-memory", "8M"])
    err = capsys.readouterr().err
    assert rc == 1 and "rerun with --yes" in err and "Traceback" not in err


def test_command_json_with_yes(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _fake_real_machine(monkeypatch, FakeDriver(h2d=10e9))
    rc = main(["probe", "--gpus", "0,1", "--max-memory", "8M", "--yes", "--json", "--trials", "2"])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    assert "about" in cap.err.splitlines()[0] and "MiB device + " in cap.err
    d = json.loads(cap.out)
    assert d["simulated"] is False and d["backend"] == "fake"
    assert d["gpus"][0]["h2d"]["gb_per_s"] == pytest.approx(10.0)
    assert d["gpus"][0]["h2d"]["level"] == "bad"  # 10 of a typical 52.9 on Gen5×16
    assert d["findings"] and d["findings"][0]["severity"] == "critical"


def test_command_ctrl_c(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    fake = FakeDriver(interrupt_after=3)
    _fake_real_machine(monkeypatch, fake)
    rc = main(["probe", "--gpus", "0,1", "--max-memory", "8M", "--yes"])
    err = capsys.readouterr().err
    assert rc == 130 and "buffers freed" in err and fake.live == {}


def test_command_simulated(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["probe", "--simulate", "a6000-tp2-pcie-gen1"]) == 0
    cap = capsys.readouterr()
    assert cap.err.startswith("SIMULATED (a6000-tp2-pcie-gen1): nothing runs on a GPU (a real run: ")
    assert "SIMULATED" in cap.out and "the link trained at" in cap.out
    assert all(len(x) <= 80 for x in cap.out.splitlines())


def test_record_probe_links_then_summary_and_compare(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """Before/after of a slot fix in one command: each recording carries its probe; compare lines them up."""
    before, after = tmp_path / "before.jsonl.gz", tmp_path / "after.jsonl.gz"
    for path, scenario in ((before, "a6000-tp2-pcie-gen1"), (after, "healthy-gen4")):
        assert main(["record", "-o", str(path), "--simulate", scenario, "--probe-links", "--duration", "0.3",
                     "--interval", "0.1"]) == 0
    err = capsys.readouterr().err
    assert "SIMULATED probe: 10 of 10 figures low" in err
    assert main(["summary", str(before)]) == 0
    out = capsys.readouterr().out
    assert "SIMULATED probe at the start: 10 of 10 figures low" in out and "✖ GPU0 host→device" in out
    assert main(["summary", str(before), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["probes"][0]["schema"] == P.PROBE_SCHEMA
    assert main(["compare", str(before), str(after)]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("GPU0 host→device"))
    assert "Gen1×16 (max Gen4×16) → Gen4×16" in line and "+" in line
    assert main(["compare", str(before), str(after), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["probes"]
    assert {r["kind"] for r in rows} >= {"h2d", "d2h", "bidir", "read"}


def test_recorded_probe_unreadable_is_one_line() -> None:
    assert P.report_lines({"schema": "nope"}) == ["probe: unreadable (probe JSON: schema 'nope' is not "
                                                  "gpuscope.probe/1)"]
    assert P.compare_probes([{"schema": "nope"}], []) == []


def test_every_figure_says_it_was_a_copy_engine_copy() -> None:
    """The real backend copies with cuMemcpy*Async only (copy engines, no SM kernel, no all-reduce): each
    figure names its call; a pair without peer access says the driver staged it."""
    r = _run(FakeDriver())
    g = r.gpu(0)
    assert g is not None
    assert (g.h2d.method, g.d2h.method, g.bidir.method) == (P.METHOD_H2D, P.METHOD_D2H, P.METHOD_BIDIR)  # type: ignore[union-attr]
    assert (g.h2d_latency.method, g.d2h_latency.method) == (P.METHOD_H2D, P.METHOD_D2H)  # type: ignore[union-attr]
    (p,) = r.pairs
    assert {m.method for m in (p.read, p.write, p.bidir_read, p.bidir_write, p.latency)} == {P.METHOD_PEER}  # type: ignore[union-attr]
    assert r.allreduce is None
    assert {P.method_tag(m.method) for m in P.measurements(r)} == {"CE"}
    staged = _run(FakeDriver(can_peer=False)).pairs[0]
    assert staged.read is not None and staged.read.method == P.METHOD_PEER_STAGED


def test_nvlinked_pair_without_peer_access_is_said_in_the_table() -> None:
    """An NVLinked pair the driver will not let peer (a VM, IOMMU): the copy is staged at host speed, and the
    verdict says P2P off or routed through the host with the figures."""
    r = _run(FakeDriver(h2d=54e9, d2h=55e9, peer=37e9, can_peer=False))
    text = "\n".join(P.table_lines(r))
    assert "GPU0←GPU1 read 37.0 GB/s: P2P off or routed through the host: 10 % of NV18" in " ".join(text.split())
    assert "near what the host links give" in " ".join(text.split())
