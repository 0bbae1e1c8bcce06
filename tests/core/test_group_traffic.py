"""A group's traffic counted once: unknown never 0, a shared GPU's bytes in one group only,
bytes per token = the traffic shown ÷ the tok/s shown, in every report."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuscope.core.group_stats import group_rows
from gpuscope.core.group_traffic import (
    group_traffic,
    moved,
    per_token,
    traffic_line,
    traffic_owners,
)
from gpuscope.core.model import (
    DeviceInfo,
    EndpointReading,
    Frame,
    GpuReading,
    Inventory,
    PairLink,
    ServingGroup,
)
from gpuscope.core.stats import phase_totals


def _inv(n: int, nvlinks: int = 4) -> Inventory:
    devs = tuple(DeviceInfo(index=i, name="NVIDIA RTX A6000", uuid=f"u{i}", bus_id=f"0000:{i:02x}:00.0",
                            nvlink_version=3 if nvlinks else None, nvlinks_active=nvlinks) for i in range(n))
    return Inventory(host="h", devices=devs, pairs=(PairLink(a=0, b=1, pcie_path="PIX", nvlinks=nvlinks),))


NV4 = _inv(4)
PLAIN = _inv(4, nvlinks=0)
A = ServingGroup(server="vLLM", endpoint="http://h:8000", port=8000, gpus=(0, 1), tp=2)
B = ServingGroup(server="vLLM", endpoint="http://h:8001", port=8001, gpus=(2, 3), tp=2)
NOTEBOOK = ServingGroup(server="python3 -m ipykernel_launcher", gpus=(3,))


def _gpu(i: int, pcie: float | None = 1e9, nvl: float | None = 30e9, lost: bool = False) -> GpuReading:
    return GpuReading(index=i, lost=lost, pcie_tx_bytes_per_s=pcie, pcie_rx_bytes_per_s=pcie,
                      nvlink_tx_bytes_per_s=nvl, nvlink_rx_bytes_per_s=nvl)


def _frame(gpus, groups=(A, B), tok=(1000.0, 2000.0), t: float = 1.0) -> Frame:
    eps = tuple(EndpointReading(url=g.endpoint, gen_tokens_per_s=k) for g, k in zip((A, B), tok) if k is not None)
    return Frame(t=t, gpus=tuple(gpus), groups=tuple(groups), endpoints=eps)


@pytest.mark.parametrize("pcie,nvl,applies,want", [
    (2e9, 60e9, True, 62e9),
    (2e9, None, True, None),  # NVLink unknown on a GPU that has it: unknown, never PCIe alone
    (2e9, None, False, 2e9),  # no NVLink on these GPUs: PCIe is all
    (None, 60e9, True, None),
    (0.0, 0.0, True, 0.0),
])
def test_moved(pcie, nvl, applies, want):
    assert moved(pcie, nvl, applies) == want


@pytest.mark.parametrize("b,tok,want", [(1e9, 1000.0, 1e6), (1e9, 0.0, None), (None, 5.0, None), (1e9, None, None),
                                        (0.0, 10.0, 0.0), (1e9, float("nan"), None)])
def test_per_token(b, tok, want):
    assert per_token(b, tok) == want


@pytest.mark.parametrize("gpus,inv,want_pcie,want_nvl,want_per", [
    ([_gpu(i) for i in range(4)], NV4, 4e9, 120e9, 124e9 / 1000),
    ([_gpu(0), _gpu(1, nvl=None), _gpu(2), _gpu(3)], NV4, 4e9, None, None),  # unknown never 0
    ([_gpu(0, pcie=None), _gpu(1), _gpu(2), _gpu(3)], NV4, None, 120e9, None),
    ([_gpu(0, nvl=None), _gpu(1, nvl=None), _gpu(2), _gpu(3)], PLAIN, 4e9, None, 4e9 / 1000),  # no NVLink at all
    ([_gpu(0, lost=True), _gpu(1), _gpu(2), _gpu(3)], NV4, None, None, None),  # a lost GPU's traffic is unknown
    ([_gpu(1), _gpu(2), _gpu(3)], NV4, None, None, None),  # a GPU without a reading
])
def test_group_traffic(gpus, inv, want_pcie, want_nvl, want_per):
    t = group_traffic(A, _frame(gpus), inv)
    assert (t.pcie_bytes_per_s, t.nvlink_bytes_per_s) == (want_pcie, want_nvl)
    assert t.bytes_per_token == (pytest.approx(want_per) if want_per is not None else None)


@pytest.mark.parametrize("groups,want", [
    ((A, B, NOTEBOOK), {0: "http://h:8000", 1: "http://h:8000", 2: "http://h:8001", 3: "http://h:8001"}),
    ((NOTEBOOK, B, A), {0: "http://h:8000", 1: "http://h:8000", 2: "http://h:8001", 3: "http://h:8001"}),
    ((NOTEBOOK,), {3: None}),
    ((ServingGroup(server="train", gpus=(1, 2, 3)), NOTEBOOK), {1: None, 2: None, 3: None}),
])
def test_owners_endpoint_first_then_larger(groups, want):
    assert {i: g.endpoint for i, g in traffic_owners(groups).items()} == want


def test_a_shared_gpu_is_counted_once():
    """mixed-4: the notebook on GPU3 beside vLLM :8001 repeats none of its bytes; the groups sum to the machine."""
    f = _frame([_gpu(i) for i in range(4)], groups=(A, B, NOTEBOOK))
    ts = [group_traffic(g, f, NV4) for g in f.groups]
    assert sum(t.moved_bytes_per_s or 0.0 for t in ts) == pytest.approx(4 * 62e9)
    nb = ts[2]
    assert nb.pcie_bytes_per_s is None and nb.shared == (3,) and nb.shared_with == "vLLM :8001"
    assert traffic_line(nb, tokens=False, per_token=False) == "traffic: GPU3 counted with vLLM :8001"
    (row_a, row_b, row_nb) = group_rows(NV4, [f])
    assert row_nb["pcie_bytes_per_s"] is None and row_nb["shared"] == "GPU3 counted with vLLM :8001"
    assert row_b["pcie_bytes_per_s"] == pytest.approx(4e9)


def test_summary_divides():
    """summary: the MB/token shown is the GB/s shown ÷ the tok/s shown, NVLink unknown in some frames or not."""
    frames = [_frame([_gpu(0), _gpu(1, nvl=None if k % 3 == 0 else 30e9), _gpu(2), _gpu(3)], t=float(k),
                     tok=(1000.0 + k, 2000.0)) for k in range(1, 10)]
    (r, _) = group_rows(NV4, frames)
    shown = (r["pcie_bytes_per_s"] + r["nvlink_bytes_per_s"]) / r["gen_tokens_per_s"]
    assert r["bytes_per_token"] == pytest.approx(shown)


def test_phase_totals_is_bytes_over_tokens():
    groups = [{"bytes_per_token": 100.0, "gen_tokens_per_s": 1000.0}, {"bytes_per_token": 10.0, "gen_tokens_per_s": 9000.0},
              {"bytes_per_token": None, "gen_tokens_per_s": 5.0}]
    span = {"endpoints": [], "gpus": [], "groups": groups}
    assert phase_totals(span)["bytes_per_token"] == pytest.approx((100e3 + 90e3) / 10000)


opt = st.one_of(st.none(), st.floats(min_value=0, max_value=1e12))


@given(st.lists(st.tuples(opt, opt, st.booleans()), min_size=1, max_size=4), st.one_of(st.none(), st.floats()))
def test_never_raises(readings, tok):
    gpus = [GpuReading(index=i, lost=lost, pcie_tx_bytes_per_s=p, pcie_rx_bytes_per_s=p, nvlink_tx_bytes_per_s=n,
                       nvlink_rx_bytes_per_s=n) for i, (p, n, lost) in enumerate(readings)]
    g = ServingGroup(server="s", endpoint="http://h:1", gpus=tuple(range(len(readings))))
    f = Frame(t=1.0, gpus=tuple(gpus), groups=(g,), endpoints=(EndpointReading(url="http://h:1", gen_tokens_per_s=tok),))
    t = group_traffic(g, f, NV4)
    traffic_line(t)
    assert t.bytes_per_token is None or t.bytes_per_token >= 0


@pytest.mark.parametrize("a,b,want", [
    ([{"key": "u", "name": "g", "model": "m1"}], [{"key": "u", "name": "g", "model": "m2"}], [("u", None), (None, "u")]),
    ([{"key": "u", "name": "g", "model": "m1"}], [{"key": "u", "name": "g", "model": "m1"}], [("u", "u")]),
    ([{"key": "u", "name": "g", "model": "m1"}], [{"key": "v", "name": "g", "model": "m1"}], [("u", "v")]),  # moved
    ([{"key": "u", "name": "g", "model": None}], [{"key": "u", "name": "g", "model": "m2"}], [("u", "u")]),
])
def test_compare_never_pairs_two_models(a, b, want):
    """compare: two different models on one port are two groups (a tok/s change between them means nothing)."""
    from gpuscope.core.group_stats import compare_groups

    got = [((r["a"] or {}).get("key"), (r["b"] or {}).get("key")) for r in compare_groups(a, b)]
    assert got == want
