"""Rates on screen (core/units.py: fmt_rate, sig2): below 1 MB/s two significant digits, so an idle link's
noise does not rewrite the line every second; whole units never cut."""

from __future__ import annotations

import pytest

from gpuscope.core.units import fmt_rate, sig2


@pytest.mark.parametrize("x,want", [
    (0, 0.0), (-5, 0.0), (7, 7.0), (537, 540.0), (412_345, 410_000.0), (404_000, 400_000.0),
    (395_000, 400_000.0), (99_500, 100_000.0), (5_349, 5_300.0), (0.123, 0.12), (1e9, 1e9),
])
def test_sig2(x, want):
    assert sig2(x) == pytest.approx(want)


@pytest.mark.parametrize("x,want", [
    (None, "–"), (float("nan"), "–"),
    (0, "0 B/s"), (7, "7 B/s"), (537, "540 B/s"), (999, "1.0 KB/s"),
    (5_349, "5.3 KB/s"), (9_960, "10 KB/s"), (41_200, "41 KB/s"),
    # an idle H200's PCIe rate: 400 KB/s with a few KB/s of noise reads the same
    (396_000, "400 KB/s"), (400_000, "400 KB/s"), (404_000, "400 KB/s"), (412_345, "410 KB/s"),
    (999_700, "1 MB/s"), (1e6, "1 MB/s"), (420e6, "420 MB/s"), (999e6, "999 MB/s"),
    (1e9, "1.0 GB/s"), (3.94e9, "3.9 GB/s"), (450e9, "450.0 GB/s"),
])
def test_fmt_rate(x, want):
    assert fmt_rate(x) == want


@pytest.mark.parametrize("base", [400_000, 40_000, 4_000, 400])
def test_idle_noise_keeps_the_text(base):
    """±1 % around a value in the middle of its two-digit step reads the same every second."""
    assert len({fmt_rate(base * (1 + k / 1000)) for k in range(-10, 11)}) == 1
