"""Fixtures only. The shared helpers live in tests/helpers.py (``from helpers import …``, from any folder)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

os.environ["TZ"] = "UTC"
time.tzset()

# tests/ on sys.path, so ``import helpers`` works from every folder under it, whatever pytest's import mode
# (the default mode adds it for this file too; importlib mode does not).
sys.path.insert(0, str(Path(__file__).resolve().parent))

from helpers import FUZZ_SCALE, MOSQUITTO, Broker, sim_source  # noqa: E402


@pytest.fixture
def sim():
    return sim_source


@pytest.fixture(autouse=True)
def _collector_as_it_was():
    """A command run in this process (``record``, ``agent``) sets the collector for a long run
    (core/gc_tune.py: frozen survivors, higher thresholds); the next test gets it back as it was."""
    import gc

    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)
    gc.unfreeze()


def pytest_configure(config: pytest.Config) -> None:
    if not 0 < FUZZ_SCALE <= 1:
        raise pytest.UsageError(f"GPUSCOPE_FUZZ_SCALE={os.environ.get('GPUSCOPE_FUZZ_SCALE')!r}: "
                                "expected a number in (0, 1]")


@pytest.fixture
def broker(tmp_path):
    if MOSQUITTO is None:
        pytest.skip("mosquitto not installed (.ci/run installs it)")
    b = Broker(tmp_path)
    yield b
    b.stop()
