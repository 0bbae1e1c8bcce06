"""Text formatters for numbers with units, shared by the TUI and the headless commands (plain strings)."""

from __future__ import annotations

import math

NONE = "–"  # how a missing reading reads


def is_whole_unit(unit: str) -> bool:
    """Whether readings in ``unit`` are shown as whole numbers everywhere (clocks: ``1980 MHz``, never
    ``1979.5 MHz``); ``unit`` as a screen writes it, with or without its leading space."""
    return unit.strip() == "MHz"


def duration(seconds: float, short: bool = False) -> str:
    """Seconds as ``1h02m03s``, ``3m05s`` or ``12s`` (nearest whole second, never negative: a recording
    of 4.998 s reads ``5s``, not ``4s``).

    ``short`` drops the seconds from durations of an hour or more (``1h02m``), for narrow places.
    """
    s = max(0, int(seconds + 0.5))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    if h:
        return f"{h}h{m:02d}m" if short else f"{h}h{m:02d}m{sec:02d}s"
    if m:
        return f"{m}m{sec:02d}s"
    return f"{sec}s"


def human_bytes(n: float) -> str:
    """A byte count in decimal units: ``512 B``, ``1.5 KB``, ``3.2 MB``, ``12.0 GB`` (GB at most)."""
    for unit in ("B", "KB", "MB"):
        if n < 1000:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"


def sig2(x: float) -> float:
    """``x`` rounded to two significant digits (``412_345`` → ``410_000``; 0 and below → 0)."""
    if not x > 0 or math.isinf(x):
        return 0.0 if not x > 0 else x
    return round(x, 1 - math.floor(math.log10(x)))


def fmt_rate(bytes_per_s: float | None) -> str:
    """Bytes/s as a short figure: ``3.9 GB/s``, ``420 MB/s``; below 1 MB/s two significant digits
    (``410 KB/s``, ``5.3 KB/s``, ``540 B/s``), so an idle link's noise (400 ± 4 KB/s) does not change the
    text every second; ``–`` when missing. The one formatter of rates on screen."""
    if bytes_per_s is None or math.isnan(bytes_per_s):
        return NONE
    if bytes_per_s >= 1e9:
        return f"{bytes_per_s / 1e9:.1f} GB/s"
    if bytes_per_s < 1e6:
        x = sig2(bytes_per_s)
        if x < 1e6:  # 999.7 KB/s rounds up to 1 MB/s
            if x < 1e3:
                return f"{x:.0f} B/s"
            return f"{x / 1e3:.1f} KB/s" if x < 1e4 else f"{x / 1e3:.0f} KB/s"
        bytes_per_s = x
    return f"{bytes_per_s / 1e6:.0f} MB/s"


def fmt_gb(x: float | None) -> str:
    """Bytes (or bytes/s) as GB with one decimal, without the unit (``3.9``, ``–``)."""
    return NONE if x is None else f"{x / 1e9:.1f}"


def fmt_num(x: float | None, unit: str = "", digits: int = 0, scale: float = 1.0) -> str:
    """``x / scale`` with ``digits`` decimals and ``unit`` appended (``75%``, ``–`` when missing)."""
    return NONE if x is None else f"{x / scale:.{digits}f}{unit}"
