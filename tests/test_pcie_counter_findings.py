"""PCIe error counters read every 15 s (sources/nvml.py HEALTH_INTERVAL_S) and carried between reads make
one finding while they keep rising, not one that comes and goes: with the engine's 10 s window the
`pcie-riser-errors` scenario's GPU1 showed "critical 9s (then cleared)" in `gpuscope summary` of a 33 s
recording, and the live TUI said "nothing limits this server" two thirds of the time (trial2)."""

from __future__ import annotations

import pytest

from gpuscope.core.findings import COUNTER_WINDOW_S, FindingsEngine
from gpuscope.core.model import DeviceInfo, Frame, GpuReading, Inventory

INV = Inventory(host="t", devices=(DeviceInfo(index=0, name="L40S", uuid="", bus_id="00000000:18:00.0"),))


def _frames(rising_until_s: float, end_s: float, read_every_s: float = 15.0, per_s: float = 40.0):
    """One frame a second; the counter as the NVML source carries it: read every ``read_every_s``."""
    for k in range(int(end_s) + 1):
        last_read = (k // read_every_s) * read_every_s
        value = int(per_s * min(last_read, rising_until_s))
        yield Frame(t=1000.0 + k, gpus=(GpuReading(index=0, pcie_replay_count=value),))


def _events(frames):
    eng = FindingsEngine(INV, hold_s=5.0)
    return [(e.t - 1000.0, e.kind) for f in frames for e in eng.update(f) if e.data.get("id") == "pcie-errors:gpu0"]


@pytest.mark.parametrize("read_every_s", [15.0, 16.0, 20.0])  # 15 s, later when a slow tick is late
def test_a_steady_rise_read_every_15_s_is_one_finding(read_every_s):
    ev = _events(_frames(rising_until_s=1e9, end_s=120, read_every_s=read_every_s))
    assert [k for _t, k in ev] == ["finding_raised"], ev  # was raised/cleared every 15 s


@pytest.mark.parametrize("stop_s", [45.0, 60.0])
def test_it_clears_once_the_counters_stop(stop_s):
    ev = _events(_frames(rising_until_s=stop_s, end_s=stop_s + 2 * COUNTER_WINDOW_S))
    kinds = [k for _t, k in ev]
    assert kinds == ["finding_raised", "finding_cleared"], ev
    last_step = (stop_s // 15) * 15 + 15  # the first read that sees no rise
    assert ev[1][0] <= last_step + COUNTER_WINDOW_S + 5.0 + 1.0
