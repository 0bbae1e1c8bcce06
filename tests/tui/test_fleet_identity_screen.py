"""The fleet screen at 80 columns with the rows agent identity can give: two agents under one name, a skewed
clock, the broker down."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from rich.cells import cell_len

from gpuscope.core.summary import HostSummary, summary_to_dict
from gpuscope.sources.mqtt import Subscriber, parse_broker
from gpuscope.tui.fleet_app import FleetApp
from gpuscope.widgets.fleet_table import FleetTable


def fed() -> Subscriber:
    """A viewer fed by hand (no broker): ``gpu-twin`` published by two machines in turn, ``gpu-slow`` whose clock
    is an hour behind, ``gpu-ok``."""
    sub = Subscriber(parse_broker("mqtt://127.0.0.1:1", env={}))
    now = time.time()

    def send(host: str, machine: str, seq: int, t: float) -> None:
        s = HostSummary(host=host, t=t, seq=seq, gpus=8, util_pct=50.0, machine=machine, run="01")
        assert sub.handle(f"gpuscope/v1/{host}/summary", json.dumps(summary_to_dict(s)).encode())

    for k, m in enumerate(("aa", "bb", "aa", "bb")):
        send("gpu-twin", m * 8, k // 2 + 1, now - 1 + k * 0.1)
    for k in range(4):
        send("gpu-slow", "cc" * 8, k + 1, now - 3600 + k * 0.01)
    send("gpu-ok", "dd" * 8, 1, now)
    return sub


@pytest.mark.slow
@pytest.mark.parametrize("down", [False, True])
def test_identity_rows_fit_80_columns(down):
    sub = fed()
    if down:  # what the subscriber holds after its connection is lost
        sub.connected, sub.last_error = False, "Connection refused"
    app = FleetApp(sub, parse_broker("mqtt://127.0.0.1:45591", env={}))

    async def go() -> list[str]:
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            table = app.query_one(FleetTable)
            lines = [t.plain for t in table.lines()]
            assert all(cell_len(ln) <= table.size.width for ln in lines), lines
            return lines

    lines = asyncio.run(go())
    rows = {ln.split()[0]: ln for ln in lines[1:] if ln.strip()}
    if down:
        assert all(" unknown " in r and "(broker down)" in r for r in rows.values()), rows
        assert not any("OFFLINE" in r for r in rows.values())
    else:
        assert rows["gpu-twin"].endswith("2 agents: give each --name"), rows  # 80 columns: the short wording
        assert "clock 1h behind" in rows["gpu-slow"] and "ago" not in rows["gpu-slow"], rows
        assert "0s ago" in rows["gpu-ok"] or "1s ago" in rows["gpu-ok"], rows
        assert lines[1].startswith("gpu-twin")  # a clash sorts with the warnings, first here
