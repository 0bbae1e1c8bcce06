"""The GPU panel (widgets/gpu_panel.py): what its lines call each reading."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from helpers import run_frames, sim_source

from gpuscope.core.boards import has_hbm, memory_temp_label
from gpuscope.core.session import Session


@pytest.mark.parametrize(("name", "hbm"), [
    ("NVIDIA H200", True),
    ("NVIDIA H100 80GB HBM3", True),
    ("NVIDIA H100 PCIe", True),
    ("NVIDIA H100 NVL", True),
    ("NVIDIA GH200 480GB", True),
    ("NVIDIA H800", True),
    ("NVIDIA H20", True),
    ("NVIDIA A100-SXM4-80GB", True),
    ("NVIDIA A100 80GB PCIe", True),
    ("NVIDIA A800-SXM4-80GB", True),
    ("NVIDIA A30", True),
    ("NVIDIA B200", True),
    ("NVIDIA GB200", True),
    ("NVIDIA B300 SXM6 AC", True),
    ("Tesla V100-SXM2-32GB", True),
    ("Tesla V100S-PCIE-32GB", True),
    ("Quadro GV100", True),
    ("Quadro GP100", True),
    ("Tesla P100-PCIE-16GB", True),
    ("NVIDIA TITAN V", True),
    ("NVIDIA RTX A6000", False),  # GDDR6
    ("NVIDIA RTX A3000 Laptop GPU", False),  # not an A30
    ("NVIDIA A10", False),
    ("NVIDIA A40", False),
    ("NVIDIA L40S", False),
    ("NVIDIA GeForce RTX 4090", False),
    ("NVIDIA RTX PRO 6000 Blackwell Server Edition", False),  # Blackwell, but GDDR7
    ("NVIDIA GB10", False),  # LPDDR5x
    ("Tesla T4", False),
    ("", False),
    (None, False),
])
def test_which_boards_have_hbm(name, hbm):
    """A GPU panel's first line used "mem" twice: memory temperature ("mem 70°C") and memory use ("mem 60.0/141
    GiB"), one word for two readings. The temperature is now "HBM" on an HBM board and "VRAM" on others; "mem"
    is use."""
    assert has_hbm(name) is hbm
    assert memory_temp_label(name) == ("HBM" if hbm else "VRAM")


@pytest.mark.parametrize(("scenario", "word"), [
    ("nccl-busy-not-computing", "HBM"),  # two H200s: a panel each fits at 160x50 (eight would not)
    ("a6000-tp2-pcie-gen1", "VRAM"),  # a GDDR board: NVML gives no memory temperature there, so one is put in
])
async def test_the_panel_says_hbm_or_vram_for_the_temperature_and_mem_only_for_use(scenario, word):
    """A GPU panel's first line used "mem" twice: memory temperature ("mem 70°C") and memory use ("mem 60.0/141
    GiB"), one word for two readings. The temperature is now "HBM" on an HBM board and "VRAM" on others; "mem"
    is use."""
    from gpuscope.tui.app import GpuscopeApp

    src = sim_source(scenario)
    session = Session(src.inventory, interval_s=1.0)
    for f in run_frames(src, 0, 10):
        g0 = f.gpus[0] if f.gpus[0].temp_mem_c is not None else replace(f.gpus[0], temp_mem_c=70.0)
        session.ingest(replace(f, gpus=(g0, *f.gpus[1:])))
    app = GpuscopeApp(session, None, label="SIMULATED", interval_s=1.0, compact=False)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        first = app.query_one("#gpu0")._gs_last.plain.split("\n")[0]  # line-drawn: its text
    assert re.search(rf" {word} \d+°C", first), first  # memory temperature
    assert re.search(r"  mem \d+\.\d/\d+ GiB", first), first  # memory use
    assert len(re.findall(r"\bmem\b", first)) == 1, first
