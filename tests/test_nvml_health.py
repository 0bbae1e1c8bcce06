"""sources/nvml.py: the PCIe health counters (replays, recoveries, AER errors: ~1.6 ms of CPU a GPU per read on
H200) are read every 15 s, memory temperature every 5 s, and every frame carries the last values read."""

from __future__ import annotations

from typing import Any

from gpuscope.sources import scenario as scenario_mod
from gpuscope.sources.live import VirtualClock
from gpuscope.sources.nvml import FI_MEMORY_TEMP, FI_PCIE_REPLAY, NvmlSource
from gpuscope.sources.simnvml import SimNvml

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
