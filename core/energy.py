"""The energy counter, advanced every frame.

NVML's total-energy counter (``nvmlDeviceGetTotalEnergyConsumption``, mJ since the driver loaded) is the
exact figure, but one call costs ~4 ms of CPU on H200, so the NVML source reads it only every
``ENERGY_INTERVAL_S`` (30 s). Served as it is, ``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`` then steps every
~30 s, and ``rate(…[1m])`` over a window holding one or two steps reads 0.5–1.2× the real power.

:class:`EnergyMeter` fills the gaps: between counter reads it adds power × time (the power the frame already
read), and when a new counter value arrives it re-anchors to it. The result is monotonic — an estimate
that ran ahead of the counter holds until the counter passes it, never steps back — except when
the counter itself goes back (the driver reloaded: a counter reset, which Prometheus's ``rate`` handles).
So the error is bounded by one read interval of power-reading error, and it never accumulates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpuscope.core.catalogue import WATTS

# A gap longer than this between frames adds nothing: after a stall the next counter read says what happened,
# and power read before the stall would only be a guess (the NVML source reads the counter every 30 s)
MAX_GAP_S = 10.0


@dataclass(slots=True)
class EnergyMeter:
    """One GPU's energy estimate (joules). Feed it every frame with :meth:`step`."""

    served: float | None = None  # the estimate served last (J)
    anchor: float | None = None  # the NVML counter value it last anchored to (J)
    since: float = 0.0  # power × time added since that anchor (J)
    t: float | None = None  # when it was last advanced (the source's clock, s)

    def step(self, t: float, power_w: float | None, counter_j: float | None) -> float | None:
        """The energy at time ``t`` (s, monotonic clock), given the power read now (W; None: unknown) and
        the NVML counter's latest value (J, possibly read long ago; None: the GPU has no counter).

        * No counter ever: None (the series is absent; power alone does not make a counter).
        * A counter value not seen before: anchor to it (the estimate is then counter + power × time since);
          when it went back (a driver reload) the served value restarts from it.
        * Otherwise: add ``power_w × (t − last t)``. Unknown power, power outside the catalogue's valid range
          (a bad reading must not be added to a counter that never goes back), a clock that did not advance
          and a gap over :data:`MAX_GAP_S` add 0.

        The served value is the larger of the last one served and the estimate, so an estimate that ran
        ahead of the counter holds until the counter catches up instead of stepping back, and the overshoot
        never carries past the next anchor (it is bounded by one read interval, never accumulated).
        """
        if counter_j is None:
            return self.served
        if self.anchor is None or self.served is None or counter_j != self.anchor:
            if self.served is None or self.anchor is None or counter_j < self.anchor:
                self.served = counter_j  # the first reading, or the counter went back (driver reload)
            self.anchor, self.since, self.t = counter_j, 0.0, t
        else:
            if (self.t is not None and power_w is not None and math.isfinite(power_w)
                    and WATTS[0] < power_w <= WATTS[1] and 0 < t - self.t <= MAX_GAP_S):
                self.since += power_w * (t - self.t)
            self.t = t if self.t is None else max(self.t, t)
        self.served = max(self.served, self.anchor + self.since)
        return self.served
