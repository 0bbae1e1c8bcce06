"""One vocabulary for every front end (TUI, ``topo``, ``summary``, ``export``, the exporter).

Each word gpuscope shows is defined once here, with no I/O and no imports from the rest of the
package (so :mod:`gpuscope.core.model` can build on it):

* severities: names, order and marks;
* semantic levels (``bad``, ``warn``, ``ok``, ``dim``, ``plain``): each front end maps a level to its
  own colour (``widgets/style.py`` for the TUI, ``cli/topo.py`` for ANSI), never a path or severity
  directly;
* topology paths (``SYS``, ``PHB``, ``NV4``…) → level;
* a PCIe link's label (``Gen1×16``) and state (at max / below max while busy / below max at idle);
* "busy" (the one definition, documented in docs/findings.md);
* clock-event ("throttle") reasons: NVML bit, name, badge, level and, where it is a finding, its
  severity and plain-language meaning;
* inference server kinds and an endpoint's state.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol

# ------------------------------------------------------------------ severities
SEVERITIES = ("critical", "warning", "info")  # worst first
SEV_RANK = {s: k for k, s in enumerate(SEVERITIES)}
SEV_MARK = {"critical": "✖", "warning": "▲", "info": "●"}

# ------------------------------------------------------------------ semantic levels
LEVELS = ("bad", "warn", "ok", "dim", "plain")
SEV_LEVEL = {"critical": "bad", "warning": "warn", "info": "dim"}


def path_level(label: str) -> str:
    """The level of a ``topo -m`` label: NV# ok, SYS bad, PHB/NODE warn, X (self) dim, PIX/PXB plain."""
    if label.startswith("NV"):
        return "ok"
    if label == "SYS":
        return "bad"
    if label in ("PHB", "NODE"):
        return "warn"
    if label == "X":
        return "dim"
    return "plain"


# ------------------------------------------------------------------ busy
BUSY_UTIL_PCT = 30.0  # a GPU at or above this utilization is busy
BUSY_LINK_SHARE = 0.10  # a link carrying this share of its capacity is busy


def is_busy(util_pct: float | None, link_bytes_per_s: float | None, capacity_bytes_per_s: float | None) -> bool:
    """A GPU is busy when it computes (utilization ≥ 30 %) or its link carries ≥ 10 % of capacity.

    ``link_bytes_per_s`` is the busier direction of the PCIe link; unknown values count as not busy.
    """
    if util_pct is not None and util_pct >= BUSY_UTIL_PCT:
        return True
    return bool(link_bytes_per_s and capacity_bytes_per_s and link_bytes_per_s >= BUSY_LINK_SHARE * capacity_bytes_per_s)


class _Reading(Protocol):
    # read-only members, so a frozen dataclass (core.model.GpuReading) satisfies the protocol
    @property
    def util_gpu_pct(self) -> float | None: ...
    @property
    def pcie_tx_bytes_per_s(self) -> float | None: ...
    @property
    def pcie_rx_bytes_per_s(self) -> float | None: ...


def reading_busy(r: _Reading, capacity_bytes_per_s: float | None) -> bool:
    """:func:`is_busy` for one instantaneous GPU reading, whose link carries ``capacity_bytes_per_s``."""
    peak = max(r.pcie_tx_bytes_per_s or 0.0, r.pcie_rx_bytes_per_s or 0.0)
    return is_busy(r.util_gpu_pct, peak, capacity_bytes_per_s)


# ------------------------------------------------------------------ PCIe links
LINK_STATES = ("at_max", "below_max_busy", "below_max_idle", "narrow")
LINK_LEVEL = {"at_max": "ok", "below_max_busy": "bad", "below_max_idle": "dim", "narrow": "bad"}  # idle: not an alarm


def link_label(gen: int | None, width: int | None, short: bool = False) -> str:
    """``Gen1×16`` (``G1×16`` when ``short``); ``?`` stands for an unknown generation or width."""
    return f"{'G' if short else 'Gen'}{gen or '?'}×{width or '?'}"


def link_below_max(gen: int | None, width: int | None, best_gen: int | None, best_width: int | None) -> bool:
    """True when the link trained below the best generation or width it can reach (unknowns never are)."""
    return bool((gen and best_gen and gen < best_gen) or (width and best_width and width < best_width))


def link_state(gen: int | None, width: int | None, best_gen: int | None, best_width: int | None, busy: bool) -> str:
    """One of :data:`LINK_STATES`: at its max; narrower than it can be (a seating, riser or slot fault at any
    load: GPUs lower the generation at idle, never the width); a lower generation while busy (a problem); a
    lower generation at idle (the normal power saving)."""
    if not link_below_max(gen, width, best_gen, best_width):
        return "at_max"
    if width and best_width and width < best_width:
        return "narrow"
    return "below_max_busy" if busy else "below_max_idle"


# ------------------------------------------------------------------ clock events
@dataclass(frozen=True, slots=True)
class ClockEvent:
    """One NVML clock-event ("throttle") reason: its bit, name, badge and, if it is a finding, its words."""

    bit: int
    name: str
    badge: str
    level: str  # one of LEVELS
    severity: str | None = None  # the finding's severity; None: not a finding
    meaning: str | None = None  # the finding's words


CLOCK_EVENTS: tuple[ClockEvent, ...] = (
    ClockEvent(0x1, "gpu_idle", "idle", "dim"),
    ClockEvent(0x2, "applications_clocks", "app clk", "dim"),
    ClockEvent(0x4, "sw_power_cap", "PWR CAP", "warn", "warning", "power capped"),
    ClockEvent(0x8, "hw_slowdown", "HW SLOW", "bad", "critical",
               "hardware slowdown (power or temperature over the hardware limit)"),
    ClockEvent(0x10, "sync_boost", "sync", "dim"),
    ClockEvent(0x20, "sw_thermal", "THERMAL", "warn", "warning", "thermal slowdown (driver)"),
    ClockEvent(0x40, "hw_thermal", "HW THERM", "bad", "critical", "hardware thermal slowdown"),
    ClockEvent(0x80, "hw_power_brake", "PWR BRAKE", "bad", "critical", "hardware power brake (external power signal)"),
    ClockEvent(0x100, "display_clocks", "display_clocks", "dim"),
)
CLOCK_EVENT_NAMES = tuple(e.name for e in CLOCK_EVENTS)
CLOCK_EVENT_BY_NAME = {e.name: e for e in CLOCK_EVENTS}
HEAT_EVENTS = frozenset(("hw_thermal", "sw_thermal", "hw_slowdown"))  # the clock events that mean heat

# A link probe in a recording: the Event kind carrying its JSON, and the largest figure it can hold (10 TB/s one
# way, a 1 s small copy; a figure beyond is a damaged file, not a measurement).
PROBE_EVENT = "probe"
PROBE_FIGURE_MAX = {"gb_per_s": 10_000.0, "us": 1e6}

# ------------------------------------------------------------------ inference servers
SERVER_KINDS = ("vllm", "sglang", "tgi", "llamacpp", "trtllm", "triton", "lmdeploy")


class EndpointState(str, Enum):
    """What an endpoint reading says about its server, carried in ``EndpointReading.state`` beside the
    human text in ``error`` (recorded as the value: ``"up"``…). Front ends decide on the state, never on
    the text."""

    UP = "up"  # answers with metrics: a gen rate, or a rate window, is known
    STARTING = "starting"  # answers (or not asked yet), no rate yet: fewer than two fresh scrapes since
    # the start, an outage or a restart
    BAD_RESPONSE = "bad_response"  # answers, but no rate: answers were not metrics or too large (``error`` says)
    UNREACHABLE = "unreachable"  # no usable answer: refused, timed out, an HTTP error status (``up`` false)


def state_of(up: bool | None, bad_answers: bool, gen_tokens_per_s: float | None,
             rate_window_s: float | None) -> EndpointState:
    """The state from what a reading knows: ``up`` (answered; None: no answer yet), ``bad_answers`` (some
    answers were not usable metrics), the gen rate and the rate window (None: not known). A bad answer
    counts only while it leaves no rate to show."""
    if up is False:
        return EndpointState.UNREACHABLE
    if gen_tokens_per_s is None:
        if bad_answers:
            return EndpointState.BAD_RESPONSE
        if rate_window_s is None:
            return EndpointState.STARTING
    return EndpointState.UP


def endpoint_state(e: Any) -> str:
    """An endpoint reading's state in three words, from its explicit ``state``: ``down`` (unreachable),
    ``bad`` (it answers, but no answer was usable: too large, not metrics) or ``ok`` (up, or starting)."""
    if e.state is EndpointState.UNREACHABLE:
        return "down"
    if e.state is EndpointState.BAD_RESPONSE:
        return "bad"
    return "ok"
