from __future__ import annotations

import pytest

from gpuscope.core.model import DeviceInfo, Inventory, PairLink
from gpuscope.core.topology import (
    compress_ranges,
    cpu_list,
    link_row,
    matrix,
    normalize_bus_id,
    nvlink_capacity_bytes_per_s,
    nvlink_count,
    pair_bandwidth_bytes_per_s,
    pcie_capacity_bytes_per_s,
    topology_label,
)


@pytest.mark.parametrize("level,label", [(0, "PIX"), (10, "PIX"), (20, "PXB"), (30, "PHB"), (40, "NODE"),
                                         (50, "SYS"), (99, "SYS")])
def test_topology_label(level, label):
    assert topology_label(level) == label


@pytest.mark.parametrize("gen,width,gb", [(1, 16, 4.0), (2, 16, 8.0), (3, 16, 15.75), (4, 16, 31.51), (5, 16, 63.02),
                                          (4, 8, 15.75), (1, 1, 0.25), (6, 16, 121.0)])
def test_pcie_capacity(gen, width, gb):
    assert pcie_capacity_bytes_per_s(gen, width) / 1e9 == pytest.approx(gb, abs=0.01)


@pytest.mark.parametrize("gen,width", [(None, 16), (4, None), (0, 16), (9, 16)])
def test_pcie_capacity_unknown(gen, width):
    assert pcie_capacity_bytes_per_s(gen, width) is None


@pytest.mark.parametrize("version,links,gb", [(6, 18, 450.0), (4, 12, 300.0), (7, 18, 900.0), (6, 0, None),
                                              (None, 4, None)])
def test_nvlink_capacity(version, links, gb):
    v = nvlink_capacity_bytes_per_s(version, links)
    assert (v / 1e9 if v else None) == gb


@pytest.mark.parametrize("remotes,peer,own_sw,peer_sw,expect", [
    ([], "0000:18:00.0", 18, 18, (18, True)),  # H200 on NVSwitch: nvidia-smi shows NV18
    ([("00000000:18:00.0", 0)] * 4, "0000:18:00.0", 0, 0, (4, False)),  # direct bridge, other domain width
    ([("00000000:28:00.0", 0)] * 4, "0000:18:00.0", 0, 0, (0, False)),  # links to another GPU
    ([], "0000:18:00.0", 18, 0, (0, False)),  # peer not on the switch
    ([("0000:18:00.0", 0)] * 2, "0000:18:00.0", 6, 12, (8, True)),
])
def test_nvlink_count(remotes, peer, own_sw, peer_sw, expect):
    assert nvlink_count(remotes, peer, own_sw, peer_sw) == expect


@pytest.mark.parametrize("a,b", [("0000:18:00.0", "00000000:18:00.0"), ("00000000:AB:00.0", "00000000:ab:00.0")])
def test_normalize_bus_id(a, b):
    assert normalize_bus_id(a) == normalize_bus_id(b)


@pytest.mark.parametrize("masks,text", [([0xFFFFFFFF], "0-31"), ([0xFFFFFFFF00000000], "32-63"), ([0b1011], "0-1,3"),
                                        ([0, 1], "64"), ([], "")])
def test_cpu_list(masks, text):
    assert cpu_list(masks) == text


def test_compress_ranges():
    assert compress_ranges([5, 1, 2, 3, 9]) == "1-3,5,9"


def _inv():
    devs = tuple(DeviceInfo(index=i, name="g", uuid="", bus_id=f"0:{i}", pcie_gen_gpu_max=4, pcie_gen_sys_max=4,
                            pcie_width_sys_max=16, numa_node=i) for i in range(3))
    pairs = (PairLink(0, 1, "SYS"), PairLink(0, 2, "PIX", nvlinks=4), PairLink(1, 2, "NODE"))
    return Inventory(host="h", devices=devs, pairs=pairs)


def test_matrix_labels():
    assert matrix(_inv()) == [["X", "SYS", "NV4"], ["SYS", "X", "NODE"], ["NV4", "NODE", "X"]]


def test_pair_bandwidth_uses_current_link_when_given():
    inv = _inv()
    p = inv.pair(1, 0)
    assert pair_bandwidth_bytes_per_s(inv, p) / 1e9 == pytest.approx(31.5, abs=0.05)
    assert pair_bandwidth_bytes_per_s(inv, p, {0: (1, 16)}) / 1e9 == pytest.approx(4.0)


def test_link_row_below_max():
    d = _inv().devices[0]
    assert link_row(d, 1, 16).below_max
    assert not link_row(d, 4, 16).below_max
    assert link_row(d, 4, 8).below_max
