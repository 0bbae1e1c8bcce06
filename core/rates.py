"""A per-second rate over a stretch of a recording (generated tok/s of the whole file, of a serving group, of a
marker span): one rule for ``summary``, its group lines, ``summary --by-marker`` and ``compare``.

The rule is a counter's: tokens generated over the stretch ÷ the time it lasted. A recording keeps the
server's rates, not its counters, so the tokens come from the rates: each reading counts its rate over the time
since the frame before it, so spans that tile the recording add up to it and a span equal to the whole file
gives the whole file's figure. A reading with no frame before it (the file's first) counts over the usual frame
interval. A gap longer than the usual interval and the reading's own rate window (a recorder that stalled, a
recording resumed after a pause) counts only that long: what happened in the rest of it is not known.

A server's rate is the change of its counter over its last ``rate_window_s`` seconds, so a reading tells of the
middle of that window (:func:`reading_time`), not of its frame's time: a span takes the readings whose window
middle lies in it (the first ones of a recording, whose middle is before its first frame, go to the first span).
Read at the frame's time, a 241 tok/s phase after a 68 tok/s one measured 197 with 1 s windows.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from typing import Any

# the per-second rates summed this way; latency means and gauges (requests waiting, KV %) are plain means
RATE_FIELDS = ("gen_tokens_per_s", "prompt_tokens_per_s", "prompt_computed_tokens_per_s", "prompt_cached_tokens_per_s")

RateReading = tuple[float, float | None, float | None]  # (rate per s, s since the frame before, rate window s)


def _positive(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0 else None


def reading_time(t: float, window_s: float | None) -> float:
    """The moment a reading in the frame at ``t`` tells of: the middle of its rate window (``t`` without one)."""
    w = _positive(window_s)
    return t - w / 2 if w is not None else t


def since_before(t: float, before: float | None) -> float | None:
    """Seconds from the frame before (at ``before``; None: there is none) to the frame at ``t``; None when not
    known or when the clock went back (a frame's order is the file's, not its clock's)."""
    return None if before is None else _positive(t - before)


def rate_over(readings: Iterable[RateReading]) -> float | None:
    """The rate of a stretch: the sum of each reading's rate × the seconds it stands for, ÷ those seconds (see the
    module docstring); None when no reading is known. ``readings``: ``(rate, seconds since the frame before or
    None, rate window in seconds or None)``, rates finite."""
    rs = [(float(r), _positive(dt), _positive(w)) for r, dt, w in readings if r is not None and math.isfinite(r)]
    if not rs:
        return None
    known = [dt for _, dt, _ in rs if dt is not None]
    step = statistics.median_low(known) if known else 1.0  # the usual frame interval (of two, the shorter)
    tokens = seconds = 0.0
    for rate, dt, window in rs:
        held = step if dt is None else min(dt, max(step, window or 0.0))
        tokens += rate * held
        seconds += held
    return tokens / seconds
