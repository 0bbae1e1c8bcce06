"""The inference panel names its serving group (Pilot, over the design story's simulated server)."""

from __future__ import annotations

from helpers import WALL0, run_frames

from gpuscope.core.session import Session
from gpuscope.sources.groups import with_groups
from gpuscope.sources.live import open_source
from gpuscope.tui.app import GpuscopeApp
from gpuscope.widgets.inference_panel import InferencePanel


def _app(scenario: str, start: float, end: float) -> GpuscopeApp:
    src = with_groups(open_source(scenario, virtual_at=0.0, pcie_block_s=0.0, wall0=WALL0), scenario)
    session = Session(src.inventory, interval_s=1.0)
    for f in run_frames(src, start, end):
        session.ingest(f)
    return GpuscopeApp(session, None, label="SIMULATED", interval_s=1.0)


async def test_inference_panel_names_the_group_its_path_and_traffic():
    app = _app("a6000-tp2-pcie-gen1", 0, 30)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        panel = app.query_one(InferencePanel)
        text = panel._gs_last.plain
        assert "group    SIMULATED vLLM :8000 gemma-2-27b-it · TP=2 on GPU0+GPU1 · SYS, Gen1×16" in text
        assert "tok/s" in text and "MB/token" in text and "PCIe" in text
        findings = " ".join(f.message for f in app.session.findings.active)
        assert "vLLM's TP=2 all-reduce crosses NUMA (SYS), no NVLink" in findings
        assert "GPU0↔GPU1 path SYS" not in findings  # the group's line replaces the machine-wide one


async def test_mixed_4_two_groups_and_the_notebook_at_80_columns():
    """Tall enough, every group's lines; at 80×24 the panel keeps to its share of the rows (the GPUs' rows are
    never pushed off): each server's first line before any detail, and how many lines a taller terminal adds."""
    from gpuscope.widgets.gpu_table import GpuTable

    app = _app("mixed-4", 0, 20)
    async with app.run_test(size=(80, 50)) as pilot:
        await pilot.pause()
        text = app.query_one(InferencePanel)._gs_last.plain
        assert "group    SIMULATED vLLM :8000 · TP=2 on GPU0+GPU1 · NV4, Gen4×16" in text
        assert "group    SIMULATED vLLM :8001 · TP=2 on GPU2+GPU3 · NV4, Gen4×16" in text
        assert "python3 -m ipykernel_launcher: GPU3" in text
        assert all(len(line) <= 80 for line in text.splitlines())
    app = _app("mixed-4", 0, 20)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.pause()
        text = app.query_one(InferencePanel)._gs_last.plain
        lines = text.splitlines()
        assert lines[1].startswith("vllm     localhost:8000 Qwen/Qwen2.5-32B-Instruct")  # which server: its port
        assert lines[2].startswith("vllm     localhost:8001 mistralai/Mistral-Small")  # every server before any group
        assert lines[-1].startswith("… ") and "more lines: a taller terminal shows them" in lines[-1]
        table = app.query_one(GpuTable)
        assert table.display and table.size.height >= 5  # its header and every GPU's row


async def test_topology_panel_marks_the_groups_pairs():
    from gpuscope.widgets.topology_panel import TopologyPanel

    app = _app("mixed-4", 0, 20)
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        content = app.query_one(TopologyPanel)._gs_last
        text = content.plain
        assert "vLLM :8000 Qwen2.5-32B-Instruct on GPU0+GPU1: NV4 (underlined)" in text
        underlined = {content.plain[s.start:s.end].strip() for s in content.spans if "underline" in str(s.style)}
        assert underlined == {"NV4"}  # GPU0↔GPU1 and GPU2↔GPU3, both NV4; the SYS pairs are not
