from __future__ import annotations

import os
import time

import pytest

os.environ["TZ"] = "UTC"
time.tzset()

WALL0 = 1_800_000_000.0  # a fixed start time so screens and files are reproducible


def sim_source(scenario: str, at: float = 0.0, block_s: float = 0.0):
    """The real NVML source over the simulated NVML, on a virtual clock frozen at ``at``."""
    from gpuscope.sources.live import open_source

    return open_source(scenario, virtual_at=at, pcie_block_s=block_s, wall0=WALL0)


def run_frames(src, start: float, end: float, step: float = 1.0):
    """Advance the virtual clock from ``start`` to ``end``, sampling every ``step`` seconds."""
    frames = []
    t = start
    while t <= end + 1e-9:
        src.nvml.clock.now = t
        frames.append(src.sample())
        t += step
    return frames


@pytest.fixture
def sim():
    return sim_source
