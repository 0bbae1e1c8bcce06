"""The slow-rank scenarios have known answers: run through the simulated source (the real NVML source over the
simulated NVML, with its serving groups) and the findings engine, each names exactly its lagging GPU and cause;
the shipped scenarios without a slow rank raise none."""

from __future__ import annotations

import pytest
from helpers import WALL0

from gpuscope.core.findings import Finding, FindingsEngine
from gpuscope.sources.groups import with_groups
from gpuscope.sources.live import open_source
from gpuscope.sources.scenario import shipped


def _run(name: str, seconds: int = 20) -> list[Finding]:
    """The engine's raised findings after ``seconds`` of the scenario at 1 Hz (virtual clock)."""
    src = with_groups(open_source(name, virtual_at=0.0, wall0=WALL0), name)
    try:
        eng = FindingsEngine(src.inventory)
        for t in range(seconds + 1):
            src.nvml.clock.now = float(t)
            eng.update(src.sample())
        return eng.active
    finally:
        src.close()


# (scenario, GPU, cause, the start of its message)
KNOWN = [
    ("slow-rank-power-limit", 5, "power_limit", "vLLM :8001 TP=4: GPU5 held at its 550 W power limit while GPU4, GPU6, "
                                                "GPU7 draw "),
    ("slow-rank-power-cap", 1, "sw_power_cap", "vLLM :8000 TP=2: GPU1 power capped at 3"),
    ("slow-rank-thermal", 2, "hw_thermal", "vLLM :8000 TP=4: GPU2 in hardware thermal slowdown at 9"),
    ("slow-rank-sw-slowdown", 0, "sw_thermal", "SGLang :30000 TP=2: GPU0 in thermal slowdown (driver) at 8"),
    ("slow-rank-mem-temp", 1, "mem_temp", "vLLM :8000 TP=4: GPU1 memory at 9"),
    ("slow-rank-pcie-link", 3, "pcie_link", "vLLM :8000 TP=4: GPU3 PCIe Gen1×16 under load (4.0 GB/s) while GPU0, "
                                            "GPU1, GPU2 run at Gen4×16 (31.5 GB/s)"),
]


@pytest.mark.parametrize("name,gpu,cause,start", KNOWN, ids=[k[0] for k in KNOWN])
def test_each_scenario_names_its_slow_rank(name, gpu, cause, start):
    (f,) = [f for f in _run(name) if f.rule == "slow_rank"]
    assert (f.evidence["gpu"], f.evidence["cause"], f.severity, f.subject) == (gpu, cause, "warning", f"GPU{gpu}")
    assert f.message.startswith(start), f.message
    assert f.message.endswith(f"GPU{gpu}'s pace")


def test_the_scenarios_are_shipped_and_listed_in_the_docs():
    from pathlib import Path

    names = set(shipped())
    docs = (Path(__file__).resolve().parents[2] / "docs" / "scenarios.md").read_text()
    for name, *_ in KNOWN:
        assert name in names and name in docs


@pytest.mark.parametrize("name", ["a6000-tp2-pcie-gen1", "mixed-4", "power-capped", "thermal-slowdown",
                                  "h200-nvswitch-8"])
def test_scenarios_without_a_slow_rank_raise_none(name):
    assert [f.id for f in _run(name) if f.rule == "slow_rank"] == []
