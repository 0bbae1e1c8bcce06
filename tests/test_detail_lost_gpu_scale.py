"""A lost GPU's detail graphs keep their ceilings from the inventory: its last reading has no memory size
and no link, so the scales fell back to the window's peak ("memory used 0–70" on an 80 GiB A100, drawn
full height; "PCIe TX 0–1.02678" drawn full height for 1.0 of 31.5 GB/s). gpuscope --simulate gpu-lost,
key 3, 120×40 (trial2)."""

from __future__ import annotations

import pytest

from gpuscope.core.model import DeviceInfo, GpuReading
from gpuscope.tui.screens import detail_number, detail_top, round_up_2

A100 = DeviceInfo(index=2, name="NVIDIA A100 80GB PCIe", uuid="u", bus_id="b", memory_total_bytes=80 * 2**30,
                  sm_clock_max_mhz=1410, power_limit_w=300.0, pcie_gen_gpu_max=4, pcie_width_gpu_max=16,
                  pcie_gen_sys_max=4, pcie_width_sys_max=16)
LOST = GpuReading(index=2, lost=True)
LIVE = GpuReading(index=2, mem_total_bytes=40 * 2**30, pcie_gen=1, pcie_width=16)


@pytest.mark.parametrize(("metric", "reading", "peak", "want"), [
    ("mem_used", LOST, 70.0, 80.0),      # was 70.0 (the peak)
    ("mem_used", None, 70.0, 80.0),
    ("mem_used", LIVE, 30.0, 40.0),      # a reading's own size wins
    ("pcie_tx", LOST, 1.02678, 31.5),    # was 1.02678: Gen4×16 is the best this link trains to
    ("pcie_rx", None, 2.57, 31.5),
    ("pcie_rx", LIVE, 2.57, 4.0),        # the trained link (Gen1×16), not the best one
    ("power", LOST, 246.3, 300.0),
    ("sm_clock", LOST, 1320.0, 1410.0),
    ("temp", LOST, 66.0, 100.0),
])
def test_detail_top_of_a_lost_gpu(metric, reading, peak, want):
    assert detail_top(metric, A100, reading, peak) == want


def test_pcie_without_any_link_facts_falls_back_to_a_round_peak():
    bare = DeviceInfo(index=0, name="x", uuid="u", bus_id="b")
    top = detail_top("pcie_tx", bare, LOST, 1.02678)
    assert top == 1.1 and detail_number(top, "GB/s", ceiling=True) == "1.1"


@pytest.mark.parametrize(("x", "want"), [
    (1.02678, 1.1), (2.57321, 2.6), (70.0, 70.0), (257.3, 260.0), (99.0, 99.0), (100.0, 100.0),
    (0.013, 0.013), (0.0131, 0.014), (0.0, 0.0), (-3.0, -3.0), (float("inf"), float("inf")),
])
def test_round_up_2(x, want):
    assert round_up_2(x) == want
