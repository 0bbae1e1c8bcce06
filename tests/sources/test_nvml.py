"""The simulated NVML, the scenario format and the NVML source running unchanged over it."""

from __future__ import annotations

import ctypes
import re
from pathlib import Path
from typing import Any

import pynvml
import pytest
from helpers import run_frames, sim_source

from gpuscope.sources import nvml as nvml_mod
from gpuscope.sources import scenario as scenario_mod
from gpuscope.sources.live import VirtualClock
from gpuscope.sources.nvml import FI_MEMORY_TEMP, FI_PCIE_REPLAY, NvmlSource, NvmlUnavailable
from gpuscope.sources.scenario import ScenarioError, load, parse, shipped
from gpuscope.sources.simnvml import SimNvml

SOURCE = Path(nvml_mod.__file__).read_text()


def test_required_scenarios_ship():
    assert {"a6000-tp2-pcie-gen1", "h200-nvswitch-8", "idle-downshift", "pcie-riser-errors", "gpu-lost",
            "mixed-4"} <= set(shipped())
    for name in shipped():
        assert load(name).gpus


def test_fake_has_every_name_the_source_uses_and_nvidia_ml_py_has_them_too():
    used = set(re.findall(r"\bnv\.(nvml\w+|NVML_\w+|c_nvml\w+)", SOURCE))
    assert len(used) > 30
    fake = SimNvml(load("mixed-4"))
    for name in used:
        assert hasattr(pynvml, name), f"nvidia-ml-py has no {name}"
        assert hasattr(fake, name), f"the simulated NVML lacks {name}"
    for name in dir(pynvml):
        if name.startswith("NVMLError_"):
            assert getattr(fake, name) is getattr(pynvml, name)


def test_inventory_of_the_design_story():
    src = sim_source("a6000-tp2-pcie-gen1")
    inv = src.inventory
    assert inv.simulated and inv.scenario == "a6000-tp2-pcie-gen1"
    assert [d.numa_node for d in inv.devices] == [0, 1]
    assert [d.cpu_affinity for d in inv.devices] == ["0-31", "32-63"]
    assert inv.pair(0, 1).label == "SYS" and inv.pair(0, 1).nvlinks == 0
    assert inv.devices[0].pcie_gen_gpu_max == 4


def test_nvswitch_pairs_read_nv18_like_nvidia_smi():
    inv = sim_source("h200-nvswitch-8").inventory
    assert {p.label for p in inv.pairs} == {"NV18"}
    assert all(p.via_nvswitch for p in inv.pairs)
    assert inv.devices[0].gpm_supported and inv.devices[0].nvlinks_active == 18


def test_readings_under_load_gen1_link_and_rates():
    src = sim_source("a6000-tp2-pcie-gen1", at=30)
    f = run_frames(src, 30, 31)[-1]
    r = f.gpus[0]
    assert (r.pcie_gen, r.pcie_width) == (1, 16)
    assert r.pcie_rx_bytes_per_s == pytest.approx(0.09e9, rel=0.1)  # what TP=2 decode of a 27B model moves
    assert r.sm_active_pct is None  # Ampere: no GPM, so None, never 0
    assert r.fan_pct is not None and r.temp_mem_c is None


def test_gpm_path_gives_activity_and_nvlink():
    src = sim_source("h200-nvswitch-8", at=30)
    f = run_frames(src, 30, 32)[-1]
    r = f.gpus[3]
    assert r.sm_active_pct == pytest.approx(71, rel=0.1)
    assert r.nvlink_tx_bytes_per_s == pytest.approx(58e9, rel=0.1)


@pytest.mark.parametrize("step, ticks, reads", [
    (1.0, 20, 2),   # every second: at the first tick with a sample before it, then over 30-45 s
    (0.5, 34, 2),   # faster ticks: the same 15 s
    (5.0, 6, 2),    # every tick a slow one (5 s), every third a health tick
    (10.0, 4, 2),   # slow ticks 10 s apart: health at 30 and 50 s
    (20.0, 4, 3),   # every tick a health tick: one GPM call a tick with all nine metrics
])
def test_gpm_graphics_engine_is_read_on_health_ticks_and_samples_are_freed_once(step, ticks, reads):
    """GR_ENGINE costs 1.4-1.9 ms of CPU a read on H200 (tools/nvml_call_costs.py), the other metrics 0.01 ms:
    it is read once at the start (from the second sample on, as the others), then on the health ticks (15 s), and
    carried; every GPM sample is freed exactly once (the simulated NVML raises on a double free or a use after
    free), at most four stay allocated per GPU (the last tick's, the last health tick's and two spares), and they are
    filled again tick after tick, not allocated anew (at most three a GPU over the whole run)."""
    src = sim_source("h200-nvswitch-8", at=30)
    sim = src.nvml
    asked: list[tuple[int, ...]] = []
    real = sim.nvmlGpmMetricsGet
    sim.nvmlGpmMetricsGet = lambda mg: asked.append(tuple(mg.metrics[k].metricId for k in range(mg.numMetrics))) \
        or real(mg)
    allocated = []
    alloc = sim.nvmlGpmSampleAlloc
    sim.nvmlGpmSampleAlloc = lambda: allocated.append(1) or alloc()
    frames = run_frames(src, 30, 30 + step * (ticks - 1), step)
    gr = [f.gpus[0].gr_engine_active_pct for f in frames]
    assert gr[0] is None and all(v is not None and 0 <= v <= 100 for v in gr[1:])
    assert [f.gpus[0].sm_active_pct is not None for f in frames] == [False] + [True] * (ticks - 1)
    assert sum(nvml_mod.GPM_GR_ENGINE in m for m in asked) == reads * 8  # 8 GPUs
    assert all(m in (nvml_mod._GPM_METRICS, nvml_mod._GPM_METRICS + nvml_mod.GPM_SLOW, nvml_mod.GPM_SLOW)
               for m in asked)
    assert len(sim.gpm_live) <= 4 * 8
    assert len(allocated) <= 3 * 8  # not one a tick (each case runs at least four)
    src.close()
    assert sim.gpm_live == {}


def test_gpm_metrics_read_through_nvidia_ml_py_s_ctypes_struct_start_clean_each_read():
    """On real NVML the metrics-get struct is a ctypes struct of nvidia-ml-py's own types, with 1,024 slots, filled
    again at every read: the slots a read uses are zeroed before NVML sees them (no value of the read before is
    left there), each metric's value is read from its slot, and a metric NVML refuses is left out."""
    src = sim_source("h200-nvswitch-8", at=30)

    class Binding:  # what _gpm_metrics and _gpm_struct use of nvidia-ml-py, with its real ctypes types
        c_nvmlGpmMetric_t = pynvml.c_nvmlGpmMetric_t
        c_nvmlGpmSample_t = pynvml.c_nvmlGpmSample_t
        NVML_GPM_METRICS_GET_VERSION = pynvml.NVML_GPM_METRICS_GET_VERSION
        seen: list[list[tuple[int, int, float]]] = []

        def nvmlGpmMetricsGet(self, mg: Any) -> Any:  # as the driver: numMetrics slots, each written
            assert mg.version == pynvml.NVML_GPM_METRICS_GET_VERSION and mg.numMetrics <= 9
            slots = [mg.metrics[k] for k in range(mg.numMetrics)]
            self.seen.append([(m.metricId, m.nvmlReturn, m.value) for m in slots])
            for m in slots:
                m.value, m.nvmlReturn = (m.metricId * 1.5, 0) if m.metricId != nvml_mod.GPM_GR_ENGINE else (7.0, 3)
            return mg

    binding = Binding()
    src.nvml = binding
    src._gpm_mg = None
    first = src._gpm_metrics(0, None, None, nvml_mod._GPM_METRICS + nvml_mod.GPM_SLOW)
    assert isinstance(src._gpm_mg, ctypes.Structure) and len(src._gpm_mg.metrics) == 1024
    second = src._gpm_metrics(0, None, None, nvml_mod._GPM_METRICS)
    assert first == second and first  # GR_ENGINE refused (return 3): left out of both
    assert "gr_engine_active_pct" not in first
    # what NVML saw: the ids asked for, every slot clean (return 0, value 0), never the last read's values
    assert [[mid for mid, _, _ in call] for call in binding.seen] == [
        list(nvml_mod._GPM_METRICS + nvml_mod.GPM_SLOW), list(nvml_mod._GPM_METRICS)]
    assert all(ret == 0 and value == 0.0 for call in binding.seen for _, ret, value in call)
    for key, mid, scale in nvml_mod._GPM_FIELDS:
        if mid in nvml_mod._GPM_METRICS and key in first:
            assert first[key] == pytest.approx(mid * 1.5 * scale)


def test_gpm_that_stops_answering_carries_nothing_and_frees_its_samples():
    """GPM refused mid-run (NotSupported after a driver change): the graphics-engine activity read before is not
    repeated for the rest of the run, and the samples kept for the next reads are freed."""
    src = sim_source("h200-nvswitch-8", at=30)
    sim = src.nvml
    before = run_frames(src, 30, 33)
    assert before[-1].gpus[0].gr_engine_active_pct is not None and sim.gpm_live

    def refuse(h, sample):
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)

    sim.nvmlGpmSampleGet = refuse  # type: ignore[method-assign]
    after = run_frames(src, 34, 50)  # slow ticks (35, 40, …) and a health tick (45) among them
    assert all(f.gpus[0].gr_engine_active_pct is None and f.gpus[0].sm_active_pct is None for f in after)
    assert sim.gpm_live == {}
    src.close()


def test_per_process_utilisation_is_read_on_health_ticks_and_carried():
    """nvmlDeviceGetProcessUtilization costs 1.5 ms of CPU a read on H200 with one process: read every 15 s
    (the health ticks), the process list itself every 5 s; between reads a process keeps its last figure and
    one that appeared since has none (never a made-up 0 %)."""
    src = sim_source("h200-nvswitch-8", at=30)
    sim = src.nvml
    calls: list[float] = []
    real = sim.nvmlDeviceGetProcessUtilization
    sim.nvmlDeviceGetProcessUtilization = lambda *a: calls.append(sim.clock.now) or real(*a)
    frames = run_frames(src, 30, 61)
    assert sorted(set(calls)) == [30, 45, 60]
    procs = [{p.pid: p.sm_pct for g in f.gpus for p in g.processes or ()} for f in frames]
    assert procs[0] and all(v is not None for v in procs[0].values())
    assert procs[5] == {pid: procs[0][pid] for pid in procs[5]}  # a slow tick between: the figures read at 30 s
    src._util_kept = {i: {} for i in src._util_kept}  # as if every process had appeared since the last read
    src.nvml.clock.now = 65
    assert all(p.sm_pct is None for g in src.sample().gpus for p in g.processes or ())
    src.close()


def test_power_limit_and_link_width_on_the_slow_ticks_and_carried():
    """The enforced power limit and the link width change with an administrator or a link retraining, not
    with load (0.03 and 0.1 ms of CPU a read on H200): read every 5 s, the last value read carried in every
    frame between (a limit set at 7 s shows from 10 s); a read that fails keeps the last value; the link
    generation, which drops at idle, is read every tick."""
    import pynvml

    src = sim_source("idle-downshift", at=0)
    sim = src.nvml
    asked: dict[str, list[float]] = {"limit": [], "width": [], "gen": []}
    real_limit, real_width, real_gen = (sim.nvmlDeviceGetEnforcedPowerLimit, sim.nvmlDeviceGetCurrPcieLinkWidth,
                                        sim.nvmlDeviceGetCurrPcieLinkGeneration)

    def limit(h: Any) -> int:
        asked["limit"].append(sim.clock.now)
        return 200_000 if sim.clock.now >= 7 else real_limit(h)  # an administrator sets 200 W at 7 s

    def width(h: Any) -> int:
        asked["width"].append(sim.clock.now)
        if sim.clock.now == 5:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNKNOWN)  # a transient failure
        return 8 if sim.clock.now >= 10 else real_width(h)  # retrained to ×8 at 10 s

    def gen(h: Any) -> int:
        asked["gen"].append(sim.clock.now)
        return real_gen(h)
    sim.nvmlDeviceGetEnforcedPowerLimit, sim.nvmlDeviceGetCurrPcieLinkWidth = limit, width
    sim.nvmlDeviceGetCurrPcieLinkGeneration = gen
    frames = run_frames(src, 0, 12)
    assert asked["limit"] == asked["width"] == [0, 5, 10]
    assert asked["gen"] == list(range(13))  # run_frames: 0 to 12 s
    first_limit, first_width = frames[0].gpus[0].power_limit_w, frames[0].gpus[0].pcie_width
    assert first_limit and first_limit != 200 and first_width and first_width != 8
    assert [f.gpus[0].power_limit_w for f in frames] == [first_limit] * 10 + [200.0] * 3
    assert [f.gpus[0].pcie_width for f in frames] == [first_width] * 10 + [8] * 3  # the failed read at 5 s kept it
    src.close()


def test_power_management_limit_on_the_slow_ticks_beside_the_enforced_one():
    """nvmlDeviceGetPowerManagementLimit (mW): the limit set on the GPU, read with the enforced limit on the slow
    ticks (every 5 s) and carried between reads; the simulated NVML answers the scenario's limit for both, and an
    administrator's change shows from the next slow read while the enforced limit can sit below it."""
    src = sim_source("idle-downshift", at=0)
    sim = src.nvml
    asked: list[float] = []
    real = sim.nvmlDeviceGetPowerManagementLimit

    def mgmt(h: Any) -> int:
        asked.append(sim.clock.now)
        return 250_000 if sim.clock.now >= 7 else real(h)  # an administrator sets 250 W at 7 s
    sim.nvmlDeviceGetPowerManagementLimit = mgmt
    frames = run_frames(src, 0, 12)
    src.close()
    assert sorted(set(asked)) == [0, 5, 10]
    assert len(asked) == 3 * len(frames[0].gpus)  # once per GPU per slow tick, never between
    first = frames[0].gpus[0]
    assert first.power_mgmt_limit_w == first.power_limit_w == load("idle-downshift").gpus[0].power_limit_w
    assert [f.gpus[0].power_mgmt_limit_w for f in frames] == [first.power_mgmt_limit_w] * 10 + [250.0] * 3
    assert all(f.gpus[0].power_limit_w == first.power_limit_w for f in frames)  # the enforced one read apart


def test_power_management_limit_not_supported_is_unknown_and_never_asked_again():
    """A GPU whose NVML answers NOT_SUPPORTED for the management limit reads as unknown (None), never 0, and is
    not asked again; the enforced limit is still read."""
    src = sim_source("idle-downshift", at=0)
    sim = src.nvml
    asked: list[float] = []

    def refuse(h: Any) -> int:
        asked.append(sim.clock.now)
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
    sim.nvmlDeviceGetPowerManagementLimit = refuse
    frames = run_frames(src, 0, 12)
    src.close()
    gpus = len(frames[0].gpus)
    assert len(asked) == gpus  # the first slow tick only
    assert all(g.power_mgmt_limit_w is None and g.power_limit_w for f in frames for g in f.gpus)
    assert not any(src.supported(i, "power_mgmt_limit") for i in range(gpus))


def test_nvlink_from_per_link_counters_without_gpm():
    src = sim_source("mixed-4", at=20)
    frames = run_frames(src, 20, 27)
    # read on slow ticks (every 5 s): a 5 s average, carried between reads
    assert frames[1].gpus[0].nvlink_rx_bytes_per_s is None
    for f in frames[5:]:
        assert f.gpus[0].nvlink_rx_bytes_per_s == pytest.approx(1.9e9, rel=0.01)  # summed over the 4 links


class CountingNvml(SimNvml):
    calls: dict[str, int]

    def __getattribute__(self, name):
        v = object.__getattribute__(self, name)
        if name.startswith("nvmlDevice") and callable(v):
            c = object.__getattribute__(self, "calls")

            def counted(*a, **k):
                c[name] = c.get(name, 0) + 1
                return v(*a, **k)
            return counted
        return v


def test_not_supported_calls_are_probed_once():
    fake = CountingNvml(load("h200-nvswitch-8"), pcie_block_s=0)
    fake.calls = {}
    src = NvmlSource(fake, simulated=True)
    src.open()
    for _ in range(5):
        src.sample()
    assert fake.calls["nvmlDeviceGetFanSpeed"] == 8  # passive cooling: NotSupported, asked once per GPU
    assert fake.calls["nvmlDeviceGetTemperature"] == 40
    assert "nvmlDeviceGetPcieThroughput" not in fake.calls  # GPM gives PCIe on Hopper


def test_fallback_pcie_path_runs_in_parallel():
    import time

    src = sim_source("h200-nvswitch-8", block_s=0.02)
    src.pcie_mode = "throughput"
    src._gpm_ok = {i: False for i in src._gpm_ok}
    src.sample()
    t = time.perf_counter()
    src.sample()
    wall = time.perf_counter() - t
    assert wall < 0.2  # 16 calls of 20 ms in series would take 320 ms


def test_gpu_lost_mid_run_marks_only_that_gpu():
    src = sim_source("gpu-lost")
    frames = run_frames(src, 10, 14)
    assert not frames[0].gpus[2].lost
    last = frames[-1]
    assert last.gpus[2].lost and last.gpus[2].util_gpu_pct is None
    assert not last.gpus[0].lost and last.gpus[0].util_gpu_pct is not None
    lost_events = [e for f in frames for e in f.events if e.kind == "gpu_lost"]
    assert len(lost_events) == 1 and lost_events[0].data["gpu"] == 2


def test_missing_nvml_library_is_a_clear_error():
    class NoLib:
        NVMLError = pynvml.NVMLError

        def nvmlInit(self):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)

    with pytest.raises(NvmlUnavailable, match="Library Not Found"):
        NvmlSource(NoLib()).open()


BASE = {"gpus": [{"count": 2}], "phases": [{"duration_s": 5}]}


@pytest.mark.parametrize("patch,field", [
    ({"gpus": []}, "gpus"),
    ({"gpus": [{"count": 2, "pcie_gen_gpu_max": 9}]}, "gpus[0].pcie_gen_gpu_max"),
    ({"gpus": [{"count": 2, "pcie_width_max": 3}]}, "gpus[0].pcie_width_max"),
    ({"gpus": [{"count": 2, "nmae": "x"}]}, "gpus[0].nmae"),
    ({"gpus": [{"count": 2, "numa_nodes": [0]}]}, "gpus[0].numa_nodes"),
    ({"phases": [{"duration_s": 5}, {"duration_s": 3, "util_gpu_pct": "high"}]}, "phases[1].util_gpu_pct"),
    ({"phases": [{"duration_s": 5, "util_gpu_pct": 140}]}, "phases[0].util_gpu_pct"),
    ({"phases": [{"util_gpu_pct": 4}]}, "phases[0].duration_s"),
    ({"phases": [{"duration_s": 5, "clock_events": ["melting"]}]}, "phases[0].clock_events"),
    ({"topology": {"pairs": [{"a": 0, "b": 5}]}}, "topology.pairs[0].b"),
    ({"topology": {"default_path": "QPI"}}, "topology.default_path"),
    ({"events": [{"at_s": 1, "kind": "explode", "gpu": 0}]}, "events[0].kind"),
    ({"colour": "red"}, "colour"),
])
def test_malformed_scenario_names_file_and_field(patch, field):
    with pytest.raises(ScenarioError) as e:
        parse({**BASE, **patch}, "my.toml")
    msg = str(e.value)
    assert msg.startswith("scenario my.toml: ") and f": {field}:" in msg


def test_scenario_file_errors(tmp_path):
    p = tmp_path / "bad.toml"
    p.write_text("gpus = [ {count = 1 ")
    with pytest.raises(ScenarioError, match="bad.toml: not valid TOML"):
        load(str(p))
    with pytest.raises(ScenarioError, match="unknown scenario 'nope'"):
        load("nope")
    good = tmp_path / "mine.toml"
    good.write_text('name = "mine"\n[[gpus]]\ncount = 3\n[[phases]]\nduration_s = 4\nutil_gpu_pct = 50\n')
    assert len(load(str(good)).gpus) == 3


# ------------------------------------------------------------------ nvml health
# sources/nvml.py: the PCIe health counters (replays, recoveries, AER errors: ~1.6 ms of CPU a GPU per read on
# H200) are read every 15 s, memory temperature every 5 s, and every frame carries the last values read.


SCENARIO = """
name = "t"
[[gpus]]
count = 2
name = "NVIDIA H200"
architecture = "hopper"
memory_temp = true
[[phases]]
name = "load"
duration_s = 600
util_gpu_pct = 90
"""


class FieldLog:
    """The simulated NVML with the field ids of each nvmlDeviceGetFieldValues call kept."""

    def __init__(self, sim: SimNvml):
        self._sim = sim
        self.asked: list[set[Any]] = []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._sim, name)
        if name != "nvmlDeviceGetFieldValues":
            return attr

        def logged(h: Any, ids: list[Any]) -> Any:
            self.asked.append(set(ids))
            return attr(h, ids)
        return logged


def _source(tmp_path: Any) -> tuple[NvmlSource, FieldLog, VirtualClock]:
    """The NVML source over the simulated two H200s, its field reads logged, on a virtual clock at 0."""
    path = tmp_path / "t.toml"
    path.write_text(SCENARIO)
    clock = VirtualClock(0.0)
    log = FieldLog(SimNvml(scenario_mod.load(str(path)), clock=clock, pcie_block_s=0))
    src = NvmlSource(log, simulated=True, clock=lambda: 1.7e9 + clock())
    src.open()
    return src, log, clock


def test_health_counters_every_15_s_memory_temperature_every_5_s(tmp_path) -> None:
    src, log, clock = _source(tmp_path)
    reads: dict[int, tuple[bool, bool]] = {}  # second → (memory temperature asked, health asked)
    frames = []
    for t in range(0, 46):
        clock.now = float(t)
        before = len(log.asked)
        frames.append(src.sample())
        asked = set().union(*log.asked[before:]) if len(log.asked) > before else set()
        if asked:
            reads[t] = (FI_MEMORY_TEMP in asked, FI_PCIE_REPLAY in asked)
    assert {t for t, (temp, _) in reads.items() if temp} == {0, 5, 10, 15, 20, 25, 30, 35, 40, 45}
    assert {t for t, (_, health) in reads.items() if health} == {0, 15, 30, 45}
    # every frame carries the counters and the temperature last read (the simulated H200 has both)
    assert all(g.pcie_replay_count is not None and g.temp_mem_c is not None for f in frames for g in f.gpus)


def test_a_failed_health_read_carries_the_last_counters(tmp_path) -> None:
    """A health tick whose field read fails (the call raises) still carries the counters read before: the
    pcie_errors finding compares them over its window and must not see a frame without them."""
    import pynvml

    src, log, clock = _source(tmp_path)
    clock.now = 0.0
    first = src.sample()
    real = log._sim.nvmlDeviceGetFieldValues

    def failing(h: Any, ids: list[Any]) -> Any:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_UNKNOWN)
    log._sim.nvmlDeviceGetFieldValues = failing
    try:
        clock.now = 15.0  # a health tick whose read fails
        frame = src.sample()
    finally:
        log._sim.nvmlDeviceGetFieldValues = real
    assert [g.pcie_replay_count for g in frame.gpus] == [g.pcie_replay_count for g in first.gpus]
    assert all(g.pcie_replay_count is not None for g in frame.gpus)


@pytest.mark.parametrize("wanted_from, reads", [
    (None, [30, 60, 90]),    # always wanted (record, the agent): every 30 s from the first tick
    (1000, []),              # never wanted in the run: never read, and no energy in the frames
    (47, [47, 80]),          # wanted from 47 s (a recording starts on a tick that is not slow): at once, then at
                             # the first slow tick (every 5 s) 30 s on
])
def test_energy_counter_is_read_only_while_wanted(wanted_from, reads):
    """The energy counter costs 4.1-4.5 ms of CPU a read on H200 and the live screen shows it nowhere: with
    read_on_demand it is read only while something stores it, at the first tick it is wanted, then every 30 s;
    a frame taken while it is not wanted carries no energy (None), never a stale or made-up figure."""
    src = sim_source("h200-nvswitch-8", at=30)
    sim = src.nvml
    calls: list[float] = []
    real = sim.nvmlDeviceGetTotalEnergyConsumption
    sim.nvmlDeviceGetTotalEnergyConsumption = lambda h: (calls.append(sim.clock.now) if h is src._handles[0] else None
                                                         ) or real(h)
    if wanted_from is not None:
        src.read_on_demand(energy_wanted=lambda: sim.clock.now >= wanted_from, process_util_wanted=None)
    frames = run_frames(src, 30, 95)
    src.close()
    assert calls == reads
    energy = [f.gpus[0].energy_j for f in frames]
    start = 0 if wanted_from is None else min(len(frames), max(0, wanted_from - 30))
    assert all(e is None for e in energy[:start]) and all(e is not None for e in energy[start:])
    assert all(b >= a for a, b in zip(energy[start:], energy[start + 1:]))


def test_per_process_utilisation_is_read_only_while_wanted():
    """Per-process utilisation (2.0-2.4 ms of CPU a read on H200) shows only in the processes panel: with
    read_on_demand it is read only while wanted, at once when it becomes wanted (that tick is a slow one: the
    process list with it, and the slow ticks go on 5 s from it); while not wanted the processes are listed (every
    slow tick) without a figure, and none is carried into a later wanted spell."""
    src = sim_source("h200-nvswitch-8", at=30)
    sim = src.nvml
    calls: list[tuple[float, int]] = []  # (when, the lastSeenTimeStamp asked with)
    real = sim.nvmlDeviceGetProcessUtilization
    sim.nvmlDeviceGetProcessUtilization = lambda h, ts: (calls.append((sim.clock.now, ts)) if h is src._handles[0]
                                                         else None) or real(h, ts)
    shown = {"on": False}
    src.read_on_demand(energy_wanted=None, process_util_wanted=lambda: shown["on"])
    off = run_frames(src, 30, 41)
    shown["on"] = True
    on = run_frames(src, 42, 61)
    shown["on"] = False
    off_again = run_frames(src, 62, 64)
    shown["on"] = True  # wanted again at 65 s, neither a health tick nor a regular slow one (62 was): read at once
    again = run_frames(src, 65, 65)
    src.close()
    assert [t for t, _ in calls] == [42, 47, 65]  # wanted at 42 s: at once, then the health tick (slow: 47, 52, …)
    assert calls[1][1] > 0 and calls[2][1] == 0  # NVML's last-seen time is not carried over the spell without reads
    procs = [[p for g in f.gpus for p in g.processes or ()] for f in off + on + off_again + again]
    assert all(procs) and all(p.sm_pct is None for ps in procs[:12] for p in ps)  # 30-41 s: not wanted
    assert all(p.sm_pct is not None for ps in procs[12:32] for p in ps)  # 42-61 s
    assert all(p.sm_pct is None for ps in procs[32:35] for p in ps)  # from the slow tick at 62 s: not wanted, none
    assert all(p.sm_pct is not None for p in procs[35])


def test_energy_read_again_after_a_spell_without_reads_starts_afresh():
    """A spell without reads drops what was read before it: when the counter is wanted again and that read fails,
    the frame has no energy (None), never the figure served minutes before."""
    src = sim_source("h200-nvswitch-8", at=30)
    sim = src.nvml
    wanted = {"on": True}
    src.read_on_demand(energy_wanted=lambda: wanted["on"], process_util_wanted=None)
    before = run_frames(src, 30, 32)
    wanted["on"] = False
    run_frames(src, 33, 200)
    wanted["on"] = True

    def fail(h):
        raise pynvml.NVMLError(pynvml.NVML_ERROR_UNKNOWN)

    sim.nvmlDeviceGetTotalEnergyConsumption = fail  # type: ignore[method-assign]
    after = run_frames(src, 201, 203)
    src.close()
    assert before[-1].gpus[0].energy_j is not None
    assert all(f.gpus[0].energy_j is None for f in after)


@pytest.mark.parametrize("now, last, util_wanted, util_was_wanted, due", [
    (30.0, None, True, True, True),     # the first tick
    (34.0, 30.0, True, True, False),    # within the interval
    (35.0, 30.0, True, True, True),     # one interval on
    (29.0, 30.0, True, True, True),     # the clock went back
    (31.0, 30.0, True, False, True),    # the processes panel opened: at once
    (31.0, 30.0, False, True, False),   # it closed: nothing to read early
    (31.0, 30.0, False, False, False),  # still closed
])
def test_slow_tick_due(now, last, util_wanted, util_was_wanted, due):
    assert nvml_mod.slow_tick_due(now, last, 5.0, util_wanted, util_was_wanted) is due


@pytest.mark.parametrize("now, last_read, slow, wanted, was_wanted, due", [
    (30.0, -1e18, True, True, False, True),   # the first tick, wanted
    (31.0, 30.0, False, True, True, False),   # read a second ago
    (60.0, 30.0, True, True, True, True),     # 30 s on, a slow tick
    (61.0, 30.0, False, True, True, False),   # 30 s on, not a slow tick: the next slow one
    (59.0, 30.0, True, True, True, False),    # a slow tick before the 30 s
    (47.0, -1e18, False, True, False, True),  # becomes wanted on a tick that is not slow: at once
    (47.0, 30.0, True, False, True, False),   # not wanted: never
    (90.0, 30.0, True, False, False, False),
])
def test_energy_read_due(now, last_read, slow, wanted, was_wanted, due):
    assert nvml_mod.energy_read_due(now, last_read, slow, wanted, was_wanted) is due


def test_energy_demand_is_asked_once_a_tick_for_every_gpu():
    """Whether the energy counter is wanted is asked once a tick: a recording that starts while a tick reads its
    eight GPUs gives a frame in which they all agree (every GPU with energy, or none)."""
    src = sim_source("h200-nvswitch-8", at=30)
    asked = []

    def flips() -> bool:  # wanted, then not, then wanted…: asked per GPU, the GPUs of one frame would disagree
        asked.append(1)
        return len(asked) % 2 == 1

    src.read_on_demand(energy_wanted=flips, process_util_wanted=None)
    frames = run_frames(src, 30, 35)
    src.close()
    assert len(asked) == len(frames)
    assert all(len({g.energy_j is None for g in f.gpus}) == 1 for f in frames)


# ------------------------------------------------------------------ NVLink error counters
# sources/nvml.py: NVML's all-links NVLink error fields (CRC flit/data, replays, recoveries) in a call of their own on
# the health ticks, else the per-link counter summed; unknown (None), never 0, where neither answers.

NVLINK_SCENARIO = """
name = "t"
[[gpus]]
count = 2
name = "NVIDIA H100 80GB HBM3"
architecture = "hopper"
{gpu}
[topology]
default_path = "SYS"
nvswitch_links = {links}
[[phases]]
name = "load"
duration_s = 600
util_gpu_pct = 90
[[events]]
at_s = 1
kind = "nvlink_errors"
gpu = 1
crc_flit_per_s = 4
crc_data_per_s = 2
replays_per_s = 3
recoveries_per_s = 0.5
"""


class CallLog:
    """The simulated NVML with the arguments of its field-value and per-link NVLink error calls kept."""

    def __init__(self, sim: SimNvml):
        self._sim = sim
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._sim, name)
        if name not in ("nvmlDeviceGetFieldValues", "nvmlDeviceGetNvLinkErrorCounter"):
            return attr

        def logged(*args: Any) -> Any:
            self.calls.append((name, args[1:]))
            return attr(*args)
        return logged


def _nvlink_source(tmp_path: Any, gpu: str = "", links: int = 18) -> tuple[NvmlSource, CallLog, VirtualClock]:
    path = tmp_path / "t.toml"
    path.write_text(NVLINK_SCENARIO.format(gpu=gpu, links=links))
    clock = VirtualClock(0.0)
    log = CallLog(SimNvml(scenario_mod.load(str(path)), clock=clock, pcie_block_s=0))
    src = NvmlSource(log, simulated=True, clock=lambda: 1.7e9 + clock())
    src.open()
    return src, log, clock


def _counts(g: Any) -> tuple[Any, ...]:
    return g.nvlink_crc_flit_count, g.nvlink_crc_data_count, g.nvlink_replay_count, g.nvlink_recovery_count


def test_nvlink_error_counters_from_the_all_links_fields_on_health_ticks(tmp_path) -> None:
    src, log, clock = _nvlink_source(tmp_path)
    try:
        frames = []
        for t in range(0, 17):
            clock.now = float(t)
            frames.append(src.sample())
    finally:
        src.close()
    asked = [args[0] for name, args in log.calls if name == "nvmlDeviceGetFieldValues" and 52 in args[0]]
    assert asked and all(ids == [38, 45, 52, 59] for ids in asked)  # a call of their own, never mixed
    assert len(asked) == 4  # two GPUs, health ticks at 0 and 15 s
    assert not [c for c in log.calls if c[0] == "nvmlDeviceGetNvLinkErrorCounter"]  # the fields answered
    assert _counts(frames[0].gpus[1]) == (0, 0, 0, 0)
    assert _counts(frames[14].gpus[1]) == (0, 0, 0, 0)  # carried between reads: the 0 s read
    assert _counts(frames[15].gpus[1]) == (56, 28, 42, 7)  # 14 s of the event's rates
    assert _counts(frames[16].gpus[0]) == (0, 0, 0, 0)


def test_nvlink_error_counters_summed_per_link_where_the_fields_do_not_answer(tmp_path) -> None:
    src, log, clock = _nvlink_source(tmp_path, gpu="nvlink_error_fields = false")
    try:
        clock.now = 15.0
        g = src.sample().gpus[1]
    finally:
        src.close()
    per_link = [args for name, args in log.calls if name == "nvmlDeviceGetNvLinkErrorCounter"]
    assert len(per_link) == 2 * 4 * 18  # two GPUs, four counters, 18 links each
    assert _counts(g) == (56, 28, 42, 7)  # the same totals as the fields give


def test_nvlink_error_counters_unknown_where_nvml_has_none(tmp_path) -> None:
    src, log, clock = _nvlink_source(tmp_path, gpu="nvlink_counters = false")
    try:
        for t in (0.0, 15.0, 30.0):
            clock.now = t
            g = src.sample().gpus[1]
        assert _counts(g) == (None, None, None, None)  # unknown, never 0
        per_link = [args for name, args in log.calls if name == "nvmlDeviceGetNvLinkErrorCounter"]
        assert len(per_link) == 2 * 4  # NotSupported on each GPU's first link, for each counter: never asked again
        assert not src.supported(1, "nvlink_error:nvlink_replay_count")
    finally:
        src.close()


def test_no_nvlink_no_nvlink_error_calls(tmp_path) -> None:
    src, log, clock = _nvlink_source(tmp_path, links=0)
    try:
        g = src.sample().gpus[1]
    finally:
        src.close()
    assert _counts(g) == (None, None, None, None)
    assert not [c for c in log.calls if c[0] == "nvmlDeviceGetNvLinkErrorCounter" or 52 in c[1][0]]
