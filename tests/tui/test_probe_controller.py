"""The link probe from the command palette (tui/probe_controller.py): the plan in a modal,
the run on a worker thread, the figures in the topology panel, the findings, the recording, the refusals."""

from __future__ import annotations

from dataclasses import replace

from helpers import make_app, run_frames, sim_source
from helpers import pilot_until as until
from rich.cells import cell_len

from gpuscope.core.model import ProcessInfo
from gpuscope.core.session import Session
from gpuscope.outputs.recorder import Recorder
from gpuscope.sources import simprobe
from gpuscope.sources.cudaprobe import CudaUnavailable
from gpuscope.sources.recording import open_recording
from gpuscope.tui.app import GpuscopeApp
from gpuscope.tui.feeders import ReplayFeeder
from gpuscope.tui.probe_controller import REPLAY_REFUSAL, LinkProbe
from gpuscope.tui.screens import ConfirmScreen
from gpuscope.widgets.findings_panel import FindingsPanel
from gpuscope.widgets.topology_panel import TopologyPanel

GEN1 = "a6000-tp2-pcie-gen1"


async def _palette(pilot, app, words: str = "probe links") -> None:
    """Run a command of the palette as a user does: ctrl+p, its words, enter."""
    await pilot.press("ctrl+p")
    await until(pilot, lambda: app.screen.__class__.__name__ == "CommandPalette")
    await pilot.press(*words)
    await pilot.pause(0.2)
    await pilot.press("enter")


def _text(widget) -> str:
    return str(widget.render())


async def test_palette_probe_on_a_simulated_gen1_machine_shows_the_verdict_beside_the_links():
    """`gpuscope --simulate a6000-tp2-pcie-gen1`, ctrl+p "Probe links", enter: the plan in a modal, then the
    simulated figures (13 % of what Gen4×16 typically gives) in the topology panel, as findings, and said."""
    app = make_app(GEN1, 0, 10, compact=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await _palette(pilot, app)
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        modal = _text(app.screen.query_one("#confirm"))
        assert "SIMULATED" in modal and "MiB" in modal and "about" in modal  # the plan: how long, how much
        await pilot.press("enter")
        await until(pilot, lambda: app.link_probe.result is not None)
        await until(pilot, lambda: "Link probe" in _text(app.query_one(TopologyPanel)))
        topo = _text(app.query_one(TopologyPanel))
        assert "SIMULATED" in topo
        assert "GPU0 host→dev 3.3 dev→host 3.3 GB/s: 13 % of typ 25.2" in topo
        assert "GPU1 host→dev 3.3" in topo
        assert "GPU0↔GPU1 read 1.5 write 1.5 GB/s: 13 % of typ 11.3" in topo
        assert "SIMULATED probe" in app.message_line
        await until(pilot, lambda: "12 % of Gen4×16" in _text(app.query_one(FindingsPanel)))
        # a second probe replaces the first one's findings (never doubled)
        n = len(app.build_view(False).findings)
        await _palette(pilot, app)
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        first = app.link_probe.result
        await pilot.press("enter")
        await until(pilot, lambda: app.link_probe.result is not first)
        assert len(app.build_view(False).findings) == n


async def test_palette_probe_at_80x24_breaks_nothing():
    app = make_app(GEN1, 0, 10)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await _palette(pilot, app)
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("enter")
        await until(pilot, lambda: app.link_probe.result is not None)
        await pilot.pause(0.3)
        assert app.screen is app.screen_stack[0]
        topo = app.query_one(TopologyPanel)
        if app.query_one("#bottom").display:
            assert all(cell_len(line) <= 80 - 4 for line in _text(topo).splitlines())
        assert "SIMULATED probe" in app.message_line


async def test_escape_cancels_the_probe():
    app = make_app(GEN1, 0, 5)
    async with app.run_test(size=(120, 40)) as pilot:
        app.action_probe_links()
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("escape")
        await until(pilot, lambda: app.message_line == "link probe cancelled")
        assert app.link_probe.result is None


async def test_replay_refuses_the_probe(tmp_path):
    path = tmp_path / "r.jsonl.gz"
    src = sim_source(GEN1)
    s = Session(src.inventory)
    s.start_recording(Recorder(str(path), src.inventory))
    for f in run_frames(src, 0, 5):
        s.ingest(f)
    s.stop_recording()
    src.close()
    rec = open_recording(path)
    session = Session(rec.inventory)
    app = GpuscopeApp(session, None, label="REPLAY", interval_s=1.0)
    app.feeder = ReplayFeeder(rec, session, app.notify_update, window_s=lambda: app.window_s)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await _palette(pilot, app)
        await until(pilot, lambda: app.message_line == REPLAY_REFUSAL)
        assert app.link_probe.worker is None and not isinstance(app.screen, ConfirmScreen)


def _real_app(busy: bool = False) -> GpuscopeApp:
    """The Gen1 machine as if its GPUs were real (no scenario): CUDA faked, optionally a vLLM worker on GPU0."""
    src = sim_source(GEN1)
    inv = replace(src.inventory, simulated=False, scenario=None, source="nvml")
    session = Session(inv, interval_s=1.0)
    for f in run_frames(src, 0, 3):
        if busy:
            gpus = list(f.gpus)
            gpus[0] = replace(gpus[0], processes=(ProcessInfo(pid=4242, name="vllm"),))
            f = replace(f, gpus=tuple(gpus))
        session.ingest(f)
    src.close()
    return GpuscopeApp(session, None, label="LIVE", interval_s=1.0)


async def test_without_cuda_one_line_on_the_note_line():
    app = _real_app()

    def no_cuda():
        raise CudaUnavailable("no NVIDIA CUDA driver (libcuda.so.1) found: the probe needs a GPU and its driver")

    app.link_probe = LinkProbe(app.session, load_driver=no_cuda)
    async with app.run_test(size=(120, 40)) as pilot:
        app.action_probe_links()
        await until(pilot, lambda: "no NVIDIA CUDA driver" in app.message_line)
        assert app.message_line.startswith("link probe: ") and "\n" not in app.message_line
        assert not isinstance(app.screen, ConfirmScreen)


async def test_busy_gpus_are_refused_unless_confirmed_again():
    """Real GPUs with another process: the plan, then a second question naming the process; esc refuses in
    one line; enter twice runs the CUDA backend (faked here) on the worker thread."""
    app = _real_app(busy=True)
    runs = []

    def cuda_probe(inv, gpus, **kw):
        runs.append(kw)
        return simprobe.simulate(GEN1, inv, gpus, trials=kw["trials"], copy_bytes=kw["copy_bytes"])

    app.link_probe = LinkProbe(app.session, load_driver=lambda: ("cu", "fake"), cuda_probe=cuda_probe)
    async with app.run_test(size=(120, 40)) as pilot:
        app.action_probe_links()
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert "adds load" in _text(app.screen.query_one("#confirm"))
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen) and "4242 vllm" in _text(
            app.screen.query_one("#confirm")))
        await pilot.press("escape")
        await until(pilot, lambda: app.message_line.startswith("not probed: other processes use the GPUs"))
        assert "GPU0: 4242 vllm" in app.message_line and not runs
        app.action_probe_links()
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen) and "4242" in _text(
            app.screen.query_one("#confirm")))
        await pilot.press("enter")
        await until(pilot, lambda: app.link_probe.result is not None)
        assert runs and runs[0]["driver"] == ("cu", "fake")


async def test_a_probe_goes_into_the_running_recording(tmp_path):
    """As `record --probe-links` does: the probe event (its JSON) in the recording running with r."""
    path = tmp_path / "r.jsonl.gz"
    app = make_app(GEN1, 0, 5, record_path=str(path))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        app.action_probe_links()
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("enter")
        await until(pilot, lambda: app.link_probe.result is not None)
        assert "in the recording" in app.message_line
        src = sim_source(GEN1, at=6.0)
        try:
            app.session.ingest(src.sample())  # the next frame carries the queued event
        finally:
            src.close()
    rec = open_recording(path)
    probes = [e for f in rec.frames() for e in f.events if e.kind == "probe"]
    assert len(probes) == 1 and probes[0].data["simulated"] is True and probes[0].data["gpus"]


async def test_a_recorded_probe_reaches_the_topology_panel_in_replay(tmp_path):
    """`gpuscope replay` of a recording holding a link probe showed no probe in the topology panel (live it
    does): the last probe at or before the position is drawn, and none before it was taken."""
    from gpuscope.core.probe import probe_event

    path = tmp_path / "r.jsonl.gz"
    src = sim_source(GEN1)
    s = Session(src.inventory, interval_s=1.0)
    s.start_recording(Recorder(str(path), src.inventory, command=["test"], interval_s=1.0, fsync=False))
    for k, f in enumerate(run_frames(src, 0, 9)):
        if k == 4:
            s.add_event(probe_event(simprobe.simulate(GEN1, src.inventory, t=f.t)))
        s.ingest(f)
    s.stop_recording()
    src.close()
    rec = open_recording(path)
    assert [e.kind for e in rec.events].count("probe") == 1
    session = Session(rec.inventory, interval_s=1.0)
    app = GpuscopeApp(session, None, label="REPLAY", interval_s=1.0)
    feeder = ReplayFeeder(rec, session, app.notify_update, window_s=lambda: app.window_s)
    feeder.seek(rec.times[0])
    feeder.playing = False
    feeder.start = lambda: None  # type: ignore[method-assign]  # a still picture, moved by the test's seeks
    feeder.stop = lambda: None  # type: ignore[method-assign]
    app.feeder = feeder
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: "GPU0↔GPU1" in _text(app.query_one(TopologyPanel)))
        assert "Link probe" not in _text(app.query_one(TopologyPanel))  # not taken yet at the start
        feeder.seek(rec.times[-1])
        await until(pilot, lambda: "Link probe" in _text(app.query_one(TopologyPanel)))
        assert app.build_view(False).probe is not None
        feeder.seek(rec.times[0])  # back before it: gone again
        await until(pilot, lambda: "Link probe" not in _text(app.query_one(TopologyPanel)))


def _grouped_app(scenario: str = "mixed-4") -> GpuscopeApp:
    """The live screen over a scenario with its serving groups (as `gpuscope --simulate` has them)."""
    from gpuscope.sources.groups import with_groups

    src = with_groups(sim_source(scenario), scenario)
    session = Session(src.inventory, interval_s=1.0)
    for f in run_frames(src, 0, 5):
        session.ingest(f)
    src.close()
    return GpuscopeApp(session, None, label="SIMULATED", interval_s=1.0)


async def test_palette_offers_each_groups_probe_and_runs_its_plan():
    """mixed-4's two vLLM replicas (and the notebook): "Probe the links of <group>" for each; picking the :8001
    replica probes GPU2+GPU3 and their pair only, as `gpuscope probe --group :8001` does."""
    from gpuscope.tui.commands import palette_commands

    app = _grouped_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        offered = {n: h for n, h, _cb in palette_commands(app) if n.startswith("Probe the links of ")}
        assert offered == {
            "Probe the links of vLLM :8000 Qwen2.5-32B-Instruct":
                "host↔device of GPU0+GPU1 and the 1 pair among them (adds load; asks first)",
            "Probe the links of vLLM :8001 Mistral-Small-24B-Instruct-2501":
                "host↔device of GPU2+GPU3 and the 1 pair among them (adds load; asks first)",
            "Probe the links of python3 -m ipykernel_launcher": "host↔device of GPU3 (adds load; asks first)",
        }
        await _palette(pilot, app, "probe the links of vllm :8001")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        modal = _text(app.screen.query_one("#confirm"))
        assert "Serving group vLLM :8001 Mistral-Small-24B-Instruct-2501: GPU2+GPU3 and the pairs among them" in modal
        assert "2 GPUs, 1 pair" in modal
        await pilot.press("enter")
        await until(pilot, lambda: app.link_probe.result is not None)
        r = app.link_probe.result
        assert r.group == "vLLM :8001 Mistral-Small-24B-Instruct-2501"
        assert [g.index for g in r.gpus] == [2, 3] and [(p.a, p.b) for p in r.pairs] == [(2, 3)]


async def test_no_group_probe_without_groups():
    from gpuscope.tui.commands import palette_commands

    app = make_app(GEN1, 0, 3)  # frames without serving groups
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert not [n for n, _h, _cb in palette_commands(app) if n.startswith("Probe the links of ")]
        assert "Probe links (adds load)" in [n for n, _h, _cb in palette_commands(app)]
