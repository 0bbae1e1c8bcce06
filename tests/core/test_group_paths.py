"""A serving group's path, its finding (replacing the machine-wide slow-path lines), placement and traffic."""

from __future__ import annotations

import pytest

from gpuscope.core.findings import evaluate
from gpuscope.core.group_paths import (
    better_placement,
    group_line,
    group_path_findings,
    path_text,
    placement_text,
    worst_pair,
)
from gpuscope.core.group_traffic import group_traffic, traffic_line
from gpuscope.core.model import (
    DeviceInfo,
    EndpointReading,
    Frame,
    GpuReading,
    Inventory,
    PairLink,
    ServingGroup,
)


def _inv(n: int, numa: list[int], pairs: dict[tuple[int, int], tuple[str, int]], default: str = "SYS") -> Inventory:
    devs = tuple(DeviceInfo(index=i, name="NVIDIA RTX A6000", uuid=f"u{i}", bus_id=f"0000:{i:02x}:00.0",
                            pcie_gen_gpu_max=4, pcie_gen_sys_max=4, pcie_width_gpu_max=16, pcie_width_sys_max=16,
                            numa_node=numa[i]) for i in range(n))
    ps = []
    for a in range(n):
        for b in range(a + 1, n):
            path, nv = pairs.get((a, b), (default, 0))
            ps.append(PairLink(a=a, b=b, pcie_path=path, nvlinks=nv))
    return Inventory(host="h", devices=devs, pairs=tuple(ps))


A6000 = _inv(2, [0, 1], {})
FOUR = _inv(4, [0, 1, 0, 1], {(0, 2): ("PIX", 0), (1, 3): ("PIX", 0)})
NV = _inv(2, [0, 0], {(0, 1): ("SYS", 4)})
VLLM = ServingGroup(server="vLLM", kind="vllm", endpoint="http://localhost:8000", model="Qwen/qwen3-27b", port=8000,
                    pids=(100, 101, 102), gpus=(0, 1), tp=2)


def _frame(gen: int = 1, groups=(VLLM,), n: int = 2, tx: float = 3.8e9, eps=()) -> Frame:
    gpus = tuple(GpuReading(index=i, pcie_gen=gen, pcie_width=16, util_gpu_pct=97, pcie_tx_bytes_per_s=tx,
                            pcie_rx_bytes_per_s=tx) for i in range(n))
    return Frame(t=10.0, gpus=gpus, groups=tuple(groups), endpoints=tuple(eps))


@pytest.mark.parametrize("inv,gpus,want", [
    (A6000, (0, 1), "SYS, Gen1×16"),
    (NV, (0, 1), "NV4, Gen1×16"),
    (FOUR, (0, 2), "PIX, Gen1×16"),
    (FOUR, (0,), "Gen1×16"),
])
def test_path_text(inv, gpus, want):
    assert path_text(inv, _frame(n=len(inv.devices)), gpus) == want


def test_group_line_design_story():
    assert group_line(VLLM, A6000, _frame()) == "vLLM :8000 qwen3-27b · TP=2 on GPU0+GPU1 · SYS, Gen1×16"
    far = ServingGroup(server="vLLM", endpoint="http://far:8000", port=8000, local=False)
    assert "not local" in group_line(far, A6000, _frame())
    hidden = ServingGroup(server="SGLang", endpoint="u", port=30000, note="not readable\x1b[2J")
    assert group_line(hidden, A6000, _frame()) == "SGLang :30000 · GPUs unknown: not readable"


def test_finding_per_group_replaces_machine_wide_line():
    got = group_path_findings(A6000, [_frame()])
    assert len(got) == 1 and got[0].severity == "critical" and got[0].subject == "GPU0-GPU1"
    assert got[0].message == ("vLLM's TP=2 all-reduce crosses NUMA (SYS), no NVLink: at most 4.0 GB/s per "
                              "direction now (Gen1×16)")
    cands = evaluate(A6000, [_frame()])
    rules = {c.rule for c in cands}
    assert "group_path" in rules and "slow_path" not in rules
    # without the group, the machine-wide slow-path line is back
    assert "slow_path" in {c.rule for c in evaluate(A6000, [_frame(groups=())])}


def test_no_finding_for_nvlink_or_one_gpu():
    assert group_path_findings(NV, [_frame()]) == []
    one = ServingGroup(server="llama.cpp", endpoint="u", gpus=(0,))
    assert group_path_findings(A6000, [_frame(groups=(one,))]) == []


def test_better_placement_named():
    g = ServingGroup(server="vLLM", endpoint="u", port=8000, gpus=(0, 1), tp=2)
    got = group_path_findings(FOUR, [_frame(groups=(g,), n=4)])
    assert got[0].message.endswith("; GPU0+GPU2 share NUMA 0 and a PCIe switch")
    assert got[0].evidence["better_gpus"] == [0, 2]
    # GPU2 held by another group: the other switch pair is suggested instead
    other = ServingGroup(server="python train.py", gpus=(2,))
    got = group_path_findings(FOUR, [_frame(groups=(g, other), n=4)])
    assert got[0].evidence["better_gpus"] == [1, 3]
    assert better_placement(A6000, (0, 1), frozenset()) is None  # nothing better exists


def test_placement_text_nvlink():
    inv = _inv(3, [0, 0, 1], {(0, 1): ("SYS", 4)})
    assert placement_text(inv, (0, 1), worst_pair(inv, (0, 1))) == "GPU0+GPU1 share NUMA 0 and NVLink (NV4)"


def test_group_traffic_and_bytes_per_token():
    ep = EndpointReading(url="http://localhost:8000", kind="vllm", gen_tokens_per_s=55.0)
    t = group_traffic(VLLM, _frame(eps=(ep,)), A6000)
    assert t.pcie_bytes_per_s == pytest.approx(4 * 3.8e9) and t.nvlink_bytes_per_s is None
    assert t.bytes_per_token == pytest.approx(4 * 3.8e9 / 55)
    assert traffic_line(t) == "PCIe 15.2 + NVLink – GB/s (both ways) · 55 tok/s · 276 MB/token"
    idle = group_traffic(VLLM, _frame(eps=(EndpointReading(url="http://localhost:8000", gen_tokens_per_s=0.0),)), A6000)
    assert idle.bytes_per_token is None


def test_group_finding_idle_is_a_warning():
    idle = Frame(t=1.0, gpus=tuple(GpuReading(index=i, pcie_gen=1, pcie_width=16, util_gpu_pct=0) for i in range(2)),
                 groups=(VLLM,))
    (f,) = group_path_findings(A6000, [idle])
    assert f.severity == "warning" and f.evidence["busy"] is False


# ------------------------------------------------------------------ summary, --by-marker, compare
def test_group_stats_bytes_per_token_and_compare():
    from gpuscope.cli.report import render_phases, render_summary
    from gpuscope.core.group_stats import compare_groups, group_rows, group_text
    from gpuscope.core.stats import phase_totals, span_stats

    ep = EndpointReading(url="http://localhost:8000", kind="vllm", gen_tokens_per_s=50.0)
    frames = [_frame(eps=(ep,)), _frame(eps=(ep,), tx=1.0e9)]
    (r,) = group_rows(A6000, frames)
    assert r["gen_tokens_per_s"] == 50.0 and r["path"] == "SYS, Gen1×16"
    assert r["bytes_per_token"] == pytest.approx((4 * 3.8e9 + 4 * 1.0e9) / 100)
    assert group_text(r).startswith("vLLM :8000 qwen3-27b · TP=2 on GPU0+GPU1 · SYS, Gen1×16: 50.0 tok/s, PCIe 9.6 GB/s")
    fixed = [_frame(gen=4, eps=(ep,), tx=1.0e9)]
    (rb,) = group_rows(A6000, fixed)
    (row,) = compare_groups([r], [rb])
    assert row["a"] is r and row["b"] is rb
    moved = compare_groups([r], [{**rb, "key": "elsewhere"}])  # a server moved: matched by order
    assert moved[0]["a"] is r and moved[0]["b"]["key"] == "elsewhere"
    spans = [{"label": "decode", "kind": "phase", "start": 0.0, "end": 20.0}]
    (span,) = span_stats(frames, spans, 2, 20.0, inv=A6000)
    assert span["groups"][0]["bytes_per_token"] == pytest.approx(r["bytes_per_token"])
    assert phase_totals(span)["bytes_per_token"] == pytest.approx(r["bytes_per_token"])
    text = render_phases({"file": "f", "host": "h", "simulated": False, "start": 0.0, "spans": [span]})
    assert "  group vLLM :8000 qwen3-27b · TP=2 on GPU0+GPU1 · SYS, Gen1×16: 50.0 tok/s" in text
    doc = {"file": "f", "host": "h", "simulated": False, "start": 0.0, "duration_s": 2.0, "frames": 2, "problems": [],
           "gpus": [], "endpoints": [], "findings": [], "markers": [], "groups": [r]}
    assert "serving groups" in render_summary(doc)
