"""Opening a GPU source: real NVML, or the simulated NVML over a scenario."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from gpuscope.sources.nvml import NvmlSource, NvmlUnavailable

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from gpuscope.core.model import Frame
    from gpuscope.sources.endpoint import EndpointPoller

NO_DRIVER_HINT = "try `gpuscope --simulate a6000-tp2-pcie-gen1` or `gpuscope demo`"


@dataclass
class VirtualClock:
    """A clock that moves only when told to (for one-shot reads and tests)."""

    now: float = 0.0

    def __call__(self) -> float:
        return self.now


def open_source(simulate: str | None = None, *, pcie_mode: str = "auto", virtual_at: float | None = None,
                pcie_block_s: float = 0.020, wall0: float | None = None) -> NvmlSource:
    """Open and return an :class:`NvmlSource` whose inventory is read.

    ``simulate`` is a shipped scenario name or a file; ``virtual_at`` freezes the simulated clock at
    that many seconds into the scenario (advance it through ``source.nvml.clock.now``).
    Raises :class:`NvmlUnavailable` (no driver) or :class:`ScenarioError`.
    """
    if simulate:
        # here, not at the top: on real GPUs the scenario reader and the simulated NVML stay unloaded
        from gpuscope.sources import scenario as scenario_mod
        from gpuscope.sources.simnvml import SimNvml

        sc = scenario_mod.load(simulate)
        clock = VirtualClock(virtual_at) if virtual_at is not None else None
        fake = SimNvml(sc, clock=clock, pcie_block_s=pcie_block_s)
        wall0 = time.time() if wall0 is None else wall0
        src = NvmlSource(fake, label="SIMULATED", simulated=True, scenario=sc.name, host=sc.host,
                         pcie_mode=pcie_mode,
                         clock=(lambda: wall0 + fake.clock()) if clock is not None else time.time,
                         )  # Xids taken in sample() (a virtual clock: deterministically)
    else:
        src = NvmlSource(label="LIVE", pcie_mode=pcie_mode)
    try:
        src.open()
    except NvmlUnavailable as e:
        raise NvmlUnavailable(f"no NVIDIA driver found: {e}; {NO_DRIVER_HINT}") from None
    return src


class WithEndpoints:
    """A GPU source whose frames also carry the latest readings of inference endpoints."""

    def __init__(self, source: NvmlSource, poller: EndpointPoller):
        self.source = source
        self.poller = poller
        self.inventory = source.inventory
        self.label = source.label
        self.nvml = source.nvml

    def sample(self) -> Frame:
        frame = self.source.sample()
        return replace(frame, endpoints=self.poller.latest())

    def read_on_demand(self, energy_wanted: Callable[[], bool] | None,
                       process_util_wanted: Callable[[], bool] | None) -> None:
        """:meth:`NvmlSource.read_on_demand` of the GPU source."""
        self.source.read_on_demand(energy_wanted, process_util_wanted)

    def close(self) -> None:
        self.poller.stop()
        self.source.close()


# An HTTP header's name (RFC 9110 "token"); a ';' in GPUSCOPE_ENDPOINT_HEADERS starts a new header only when a
# 'Name:' follows it, so a Cookie's 'a=1; b=2' stays one value.
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_NEXT_HEADER = re.compile(r";(?=\s*[!#$%&'*+\-.^_`|~0-9A-Za-z]+\s*:)")
_PLAIN_NAME = re.compile(r"[A-Za-z][A-Za-z_-]{0,39}")  # a name an error may quote: no digits, as tokens have
HEADER_FLAG, HEADERS_VAR, TOKEN_VAR = "--endpoint-header", "GPUSCOPE_ENDPOINT_HEADERS", "GPUSCOPE_ENDPOINT_TOKEN"


def shown_name(name: str) -> str:
    """A header's name as an error quotes it (``'X-Api-Key'``), or ``a header`` when it does not look like a
    name (digits in it, too long: a value written where the name goes may be a secret)."""
    return f"header {name!r}" if _PLAIN_NAME.fullmatch(name) else "a header"


def header_value_problem(value: str) -> str | None:
    """Why ``value`` (already stripped) cannot be sent as an HTTP header's value, in words that never quote
    it, or None when it can: no line break (it would end the header: httpx refuses it, quoting the value),
    no other control character, ASCII only (httpx encodes header values as ASCII)."""
    if "\n" in value or "\r" in value:
        return "has a line break in it"
    if any(ord(c) < 32 and c != "\t" or ord(c) == 127 for c in value):
        return "has a control character in it"
    if not value.isascii():
        return "has a character outside ASCII in it"
    return None


def env_header_items(text: str) -> list[str]:
    """``GPUSCOPE_ENDPOINT_HEADERS`` split into headers: one a line when it has several lines, else at each
    ``;`` followed by ``Name:`` (``'A: x; Cookie: a=1; b=2'`` is two headers, the Cookie keeping ``a=1; b=2``);
    a ``;`` ending a header is dropped (``'A: x;'``)."""
    text = text.strip()
    parts = text.splitlines() if "\n" in text or "\r" in text else _NEXT_HEADER.split(text)
    return [x for x in (p.strip().rstrip(";").strip() for p in parts) if x]


def _header(item: str, where: str) -> tuple[str, str]:
    """``'Name: value'`` → (name, value stripped); a ValueError naming ``where`` (and the name, once it is a
    valid one), never the value."""
    name, sep, value = item.partition(":")
    name = name.strip()
    if not sep:
        raise ValueError(f"bad header in {where}: expected 'Name: value' (there is no ':')")
    if not _HEADER_NAME.fullmatch(name):
        raise ValueError(f"bad header in {where}: expected 'Name: value' (the name before ':' must be one word: "
                         "letters, digits, - or _)")
    value = value.strip()
    problem = header_value_problem(value)
    if problem is not None:
        raise ValueError(f"bad header in {where}: the value of {shown_name(name)} {problem}")
    return name, value


def bearer_token(text: str) -> str:
    """``GPUSCOPE_ENDPOINT_TOKEN`` as sent after ``Bearer``: surrounding whitespace dropped (a file-made
    Kubernetes Secret ends in a newline), a leading ``Bearer `` too; a ValueError that never quotes it when
    it holds nothing else or a line break, control character or non-ASCII character inside."""
    token = text.strip()
    if token[:7].lower() == "bearer ":
        token = token[7:].strip()
    if not token:
        raise ValueError(f"{TOKEN_VAR} is set but holds no token")
    problem = header_value_problem(token)
    if problem is not None:
        raise ValueError(f"{TOKEN_VAR} {problem} (a token is one line)")
    return token


def parse_headers(values: list[str], env: Mapping[str, str], basic_auth_from: str | None = None) -> dict[str, str]:
    """Headers from ``--endpoint-header 'Name: value'`` and the environment (so tokens stay out of the
    process list): ``GPUSCOPE_ENDPOINT_HEADERS`` (``'A: x; B: y'``, or one header a line), and
    ``GPUSCOPE_ENDPOINT_TOKEN`` (``Authorization: Bearer …``). Values are stripped.

    A ValueError (one line naming the flag or variable, and the header's name where it is a valid one, never
    a value) for a malformed header, a value that cannot be sent (:func:`header_value_problem`), a header
    given twice (the same name from two places, in any case: nothing silently wins), or an ``Authorization``
    header beside Basic auth (``basic_auth_from`` names where that came from)."""
    found: dict[str, tuple[str, str, str]] = {}  # lower-case name → (name, value, where it came from)
    items = [(v, HEADER_FLAG) for v in values]
    items += [(v, HEADERS_VAR) for v in env_header_items(env.get(HEADERS_VAR) or "")]
    for item, where in items:
        name, value = _header(item, where)
        _add(found, name, value, where)
    if env.get(TOKEN_VAR):
        _add(found, "Authorization", "Bearer " + bearer_token(env[TOKEN_VAR]), TOKEN_VAR)
    if basic_auth_from is not None and "authorization" in found:
        raise ValueError(f"Basic auth ({basic_auth_from}) and an Authorization header ({found['authorization'][2]}) "
                         "both given: give one")
    return {name: value for name, value, _ in found.values()}


def _add(found: dict[str, tuple[str, str, str]], name: str, value: str, where: str) -> None:
    old = found.get(name.lower())
    if old is not None:
        places = where if old[2] == where else f"{old[2]} and {where}"
        raise ValueError(f"{shown_name(name)} given twice ({places}): give it once")
    found[name.lower()] = (name, value, where)
