"""The energy counter advanced every frame (core/energy.py): a table of cases, a monotonicity property, and
the NVML source over the simulated NVML, whose 60 s energy rate must now match its power."""

from __future__ import annotations

import pytest
from helpers import run_frames, sim_source
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscope.core.energy import EnergyMeter


def run(steps: list[tuple[float, float | None, float | None]]) -> list[float | None]:
    m = EnergyMeter()
    return [m.step(t, p, c) for t, p, c in steps]


@pytest.mark.parametrize("steps,want", [
    # no counter: absent, whatever the power
    ([(0, 100.0, None), (1, 100.0, None)], [None, None]),
    # the first counter value is served as it is, then power × time is added every frame
    ([(0, 100.0, 1000.0), (1, 100.0, 1000.0), (2, 200.0, 1000.0)], [1000.0, 1100.0, 1300.0]),
    # a new counter value re-anchors: above the estimate it jumps up to it
    ([(0, 100.0, 1000.0), (1, 100.0, 1000.0), (2, 100.0, 1250.0), (3, 100.0, 1250.0)],
     [1000.0, 1100.0, 1250.0, 1350.0]),
    # below the estimate it holds (never steps back) until counter + power × time passes it
    ([(0, 100.0, 1000.0), (1, 100.0, 1000.0), (2, 100.0, 1000.0), (3, 100.0, 1150.0), (4, 100.0, 1150.0),
      (5, 100.0, 1150.0)], [1000.0, 1100.0, 1200.0, 1200.0, 1250.0, 1350.0]),
    # an overshoot never accumulates: after the anchor the estimate is counter + power × time since it
    ([(0, 200.0, 0.0), (10, 200.0, 0.0), (10.5, 200.0, 1000.0), (20.5, 100.0, 1000.0)],
     [0.0, 2000.0, 2000.0, 2000.0]),
    # unknown power adds nothing; a clock that did not advance adds nothing; negative power adds nothing
    ([(0, 100.0, 10.0), (1, None, 10.0), (1, 100.0, 10.0), (2, -5.0, 10.0), (3, 100.0, 10.0)],
     [10.0, 10.0, 10.0, 10.0, 110.0]),
    # a power reading outside the valid range or not finite adds nothing (it would never come back out)
    ([(0, 100.0, 0.0), (1, 1e7, 0.0), (2, float("nan"), 0.0), (3, float("inf"), 0.0), (4, 100.0, 0.0)],
     [0.0, 0.0, 0.0, 0.0, 100.0]),
    # a stalled sampler: a gap over MAX_GAP_S adds nothing; the next counter read says what happened
    ([(0, 100.0, 0.0), (60, 100.0, 0.0), (61, 100.0, 0.0), (62, 100.0, 6200.0)], [0.0, 0.0, 100.0, 6200.0]),
    # the counter went back (the driver reloaded): a reset, served from the new counter
    ([(0, 100.0, 5000.0), (1, 100.0, 5000.0), (2, 100.0, 20.0), (3, 100.0, 20.0)], [5000.0, 5100.0, 20.0, 120.0]),
    # the counter unreadable for a while: the last value is held, then the whole gap is added
    ([(0, 100.0, 50.0), (1, 100.0, None), (2, 100.0, 50.0)], [50.0, 50.0, 250.0]),
])
def test_energy_meter(steps, want):
    assert run(steps) == pytest.approx(want)


finite = st.floats(min_value=0.0, max_value=1e4, allow_nan=False)


@settings(max_examples=200)
@given(st.lists(st.tuples(st.floats(min_value=0.0, max_value=5.0), st.none() | finite, st.none() | finite,
                          st.booleans()), min_size=1, max_size=60))
def test_energy_never_goes_back_unless_the_counter_does(steps):
    """Whatever the power, the clock steps and the counter reads, the served value only goes back when the
    counter itself went back (a reset)."""
    m = EnergyMeter()
    t, counter, last = 0.0, 0.0, None
    for dt, power, inc, read in steps:
        t += dt
        if inc is not None:
            counter += inc  # the true counter only grows here; read every few steps
        v = m.step(t, power, counter if read else (m.anchor if m.anchor is not None else None))
        if last is not None:
            assert v is not None and v >= last
        last = v


def test_nvml_energy_rate_matches_power_over_a_minute():
    """The simulated NVML's counter is read every 30 s (as on a real GPU); the served energy advances every
    frame, so a 60 s rate (what ``rate(…[1m])`` reads) matches the mean power within a few percent at every
    window position, where the raw counter's read 0.5-1.5×."""
    src = sim_source("h200-nvswitch-8", at=100.0)
    frames = run_frames(src, 100.0, 400.0)
    src.close()
    ratios = []
    for k in range(60, len(frames)):
        a, b = frames[k - 60].gpus[0], frames[k].gpus[0]
        assert a.energy_j is not None and b.energy_j is not None
        mean_w = sum(f.gpus[0].power_w or 0.0 for f in frames[k - 59:k + 1]) / 60
        ratios.append((b.energy_j - a.energy_j) / 60 / mean_w)
    assert min(ratios) > 0.9 and max(ratios) < 1.1, (min(ratios), max(ratios))
