"""Per-GPU window figures (core.findings.build_gpu_windows): a table of frames and the figures they give."""

from __future__ import annotations

import pytest

from gpuscope.core.findings import AVG_S, GpuWindow, RuleWindow, build_gpu_windows, gpu_windows
from gpuscope.core.model import Frame, GpuReading
from gpuscope.core.topology import pcie_capacity_bytes_per_s

GEN4_X16 = pcie_capacity_bytes_per_s(4, 16)  # 31.5 GB/s
GEN1_X16 = pcie_capacity_bytes_per_s(1, 16)  # 4.0 GB/s


def r(i: int = 0, **kw) -> GpuReading:
    """A reading on a Gen4 ×16 link unless ``kw`` says otherwise."""
    return GpuReading(index=i, **{"pcie_gen": 4, "pcie_width": 16, **kw})


def frames(*per_frame: tuple[GpuReading, ...] | GpuReading, dt: float = 1.0) -> list[Frame]:
    """One frame per argument (a reading or a tuple of readings), ``dt`` seconds apart."""
    return [Frame(t=1000 + k * dt, gpus=rs if isinstance(rs, tuple) else (rs,)) for k, rs in enumerate(per_frame)]


# (case, frames, GPU position, the figures expected of it: None when it has no window)
CASES = [
    ("one frame: its readings", frames(r(util_gpu_pct=40, sm_active_pct=20, tensor_active_pct=5, power_w=300.0,
                                         pcie_tx_bytes_per_s=1e9, pcie_rx_bytes_per_s=3e9,
                                         nvlink_tx_bytes_per_s=7e9, nvlink_rx_bytes_per_s=2e9)), 0,
     dict(util_gpu_pct=40.0, sm_active_pct=20.0, tensor_active_pct=5.0, power_w=300.0, pcie_tx_bytes_per_s=1e9,
          pcie_rx_bytes_per_s=3e9, pcie_peak_bytes_per_s=3e9, pcie_capacity_bytes_per_s=GEN4_X16,
          nvlink_tx_bytes_per_s=7e9, nvlink_rx_bytes_per_s=2e9, nvlink_peak_bytes_per_s=7e9, busy=True)),
    ("means over the frames of the last AVG_S s (the boundary frame included)",
     frames(*(r(util_gpu_pct=10.0 * k, power_w=100.0 + k) for k in range(10))), 0,
     dict(util_gpu_pct=65.0, power_w=106.5)),  # t = 4 … 9 s: 40 … 90 %, 104 … 109 W
    ("a frame without the reading is skipped, not counted as zero",
     frames(r(util_gpu_pct=90), r(), r(util_gpu_pct=30)), 0, dict(util_gpu_pct=60.0)),
    ("never present: None; peaks 0.0",
     frames(r(), r()), 0,
     dict(util_gpu_pct=None, sm_active_pct=None, tensor_active_pct=None, power_w=None, pcie_tx_bytes_per_s=None,
          pcie_rx_bytes_per_s=None, pcie_peak_bytes_per_s=0.0, nvlink_tx_bytes_per_s=None,
          nvlink_rx_bytes_per_s=None, nvlink_peak_bytes_per_s=0.0, busy=False)),
    ("peak is the busier direction's mean", frames(r(pcie_tx_bytes_per_s=5e9), r(pcie_rx_bytes_per_s=2e9)), 0,
     dict(pcie_tx_bytes_per_s=5e9, pcie_rx_bytes_per_s=2e9, pcie_peak_bytes_per_s=5e9)),
    ("capacity is the link's now (Gen1 after Gen4)", frames(r(), r(pcie_gen=1)), 0,
     dict(pcie_capacity_bytes_per_s=GEN1_X16)),
    ("link unknown: no capacity", frames(r(pcie_gen=None, pcie_width=None, pcie_rx_bytes_per_s=9e9)), 0,
     dict(pcie_capacity_bytes_per_s=None, pcie_peak_bytes_per_s=9e9, busy=False)),
    ("busy by utilization", frames(r(util_gpu_pct=30)), 0, dict(busy=True)),
    ("busy by PCIe traffic alone (≥ 10 % of the link)", frames(r(util_gpu_pct=0, pcie_rx_bytes_per_s=3.5e9)), 0,
     dict(busy=True)),
    ("idle", frames(r(util_gpu_pct=29, pcie_rx_bytes_per_s=1e9)), 0, dict(busy=False)),
    ("the second GPU's figures are its own", frames((r(0, util_gpu_pct=10), r(1, util_gpu_pct=80))), 1,
     dict(gpu=1, util_gpu_pct=80.0, busy=True)),
    ("a GPU absent from older frames: the frames that have it",
     frames((r(0),), (r(0), r(1, util_gpu_pct=50)), (r(0), r(1, util_gpu_pct=70))), 1, dict(util_gpu_pct=60.0)),
    ("lost now: no window", frames(r(util_gpu_pct=90), GpuReading(index=0, lost=True)), 0, None),
    ("lost before, back now: the readings it had", frames(GpuReading(index=0, lost=True), r(util_gpu_pct=90)), 0,
     dict(util_gpu_pct=90.0, busy=True)),
    ("not in the last frame: no window", frames((r(0), r(1)), (r(0),)), 1, None),
]


@pytest.mark.parametrize("case,fs,i,expect", CASES, ids=[c[0] for c in CASES])
def test_build_gpu_windows(case, fs, i, expect):
    windows = build_gpu_windows(fs)
    if expect is None:
        assert i not in windows, case
        return
    w = windows[i]
    assert isinstance(w, GpuWindow)
    assert (w.gpu, w.now) == (i, fs[-1].gpus[i])
    got = {k: getattr(w, k) for k in expect}
    assert got == pytest.approx(expect), case


def test_the_span_is_avg_s():
    assert AVG_S == 5.0  # CASES' "last AVG_S s" case counts frames at 1 s steps against it


def test_no_frames_no_windows():
    assert build_gpu_windows([]) == {}
    assert gpu_windows([]) == {}


def test_every_gpu_not_lost_in_position_order():
    fs = frames((r(0), GpuReading(index=1, lost=True), r(2), r(3)))
    assert list(build_gpu_windows(fs)) == [0, 2, 3]


def test_a_window_is_frozen():
    w = build_gpu_windows(frames(r()))[0]
    with pytest.raises(AttributeError):
        w.busy = True  # type: ignore[misc]


def test_one_evaluation_builds_the_windows_once():
    fs = frames((r(0, util_gpu_pct=50), r(1)), (r(0, util_gpu_pct=70), r(1)))
    window = RuleWindow(fs)
    first = gpu_windows(window)
    assert gpu_windows(window) is first  # shared by every rule of the evaluation
    assert first == build_gpu_windows(fs)  # the same figures as a plain list of frames gives


@pytest.mark.parametrize("reading,want", [
    # busy from PCIe traffic alone, link full, neither SM activity nor utilization known
    (r(pcie_gen=1, pcie_rx_bytes_per_s=3.9e9), "looks interconnect-bound: GPU0 PCIe RX 3.9 of 4.0 GB/s at Gen1"),
    # tensor pipe busy, SM activity unknown
    (r(util_gpu_pct=95, tensor_active_pct=80), "looks compute-bound: GPU0 tensor 80 %"),
    (r(util_gpu_pct=95, sm_active_pct=90, tensor_active_pct=80), "looks compute-bound: GPU0 SM activity 90 %, tensor 80 %"),
])
def test_bottleneck_words_with_unknown_readings(reading: GpuReading, want: str) -> None:
    """The bottleneck rule formatted an unknown (None) SM activity or utilization with ``:.0f`` and raised
    TypeError: a GPU busy by PCIe traffic alone without utilization, or a tensor pipe busy without SM activity."""
    from gpuscope.core.findings import rule_bottleneck
    from gpuscope.core.model import DeviceInfo, Inventory

    inv = Inventory(host="h", devices=(DeviceInfo(index=0, name="x", uuid="u", bus_id="b"),))
    got = rule_bottleneck(inv, frames(*([reading] * 6)))
    assert [c.message for c in got] == [want]
