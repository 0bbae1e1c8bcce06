"""The fleet screen's key path and memory: a key repaints the lines that changed, a refresh sorts only when
the order may have changed, and a closed app's widgets are released (Pilot, fed subscriber, no broker)."""

from __future__ import annotations

import asyncio
import gc

import pytest
from test_fleet_table import fed, selected_line, summary
from textual._styles_cache import StylesCache

from gpuscope.tui.fleet import release_closed_app
from gpuscope.tui.fleet_app import FleetApp
from gpuscope.widgets import fleet_table
from gpuscope.widgets.fleet_table import FleetTable
from gpuscope.widgets.textual_private import ACTIVE

CRIT = [{"id": "gpu_lost:GPU3", "sev": "critical", "since": 1_700_000_000.0, "text": "GPU3 fell off the bus"}]


@pytest.mark.slow
async def test_a_key_repaints_the_header_and_two_rows_only():
    sub = fed(500)
    app = FleetApp(sub, sub.cfg)
    async with app.run_test(size=(150, 30)) as pilot:
        await pilot.pause()
        table = app.query_one(FleetTable)
        asked: list[int] = []
        shows: list[int] = []
        render_line, show = table.render_line, table.show
        table.render_line = lambda y: (asked.append(y), render_line(y))[1]  # type: ignore[method-assign]
        table.show = lambda *a, **k: (shows.append(1), show(*a, **k))[1]  # type: ignore[method-assign]
        for _ in range(20):  # a 1 s refresh in the window repaints every row: try again
            asked.clear(), shows.clear()
            before = table.index
            await pilot.press("down")
            await pilot.pause()
            await pilot.pause()
            if not shows:
                break
        assert not shows, "every try met a refresh"
        assert table.index == before + 1
        assert set(asked) == {0, before + 1, before + 2}  # header (position), the old and the new highlight
        assert table.selected in selected_line(table)
        # a scroll past the last row in view moves every row: all re-drawn, from strips built for this refresh
        for _ in range(table.rows):
            await pilot.press("down")
        await pilot.pause()
        assert table.top > 0 and table.selected in selected_line(table)


@pytest.mark.parametrize("messages,changes", [
    ([("host-0001", "summary", summary("host-0001", 2))], False),  # routine: same rank, still online
    ([("host-0001", "summary", summary("host-0001", 2, CRIT))], True),  # a critical finding: re-sort
    ([("host-0001", "status", b'{"state": "offline", "summary": 1}')], True),  # offline hosts sort first
    ([("host-0001", "status", b'{"state": "online", "summary": 1}')], False),  # already online
    ([("host-9999", "summary", summary("host-9999", 1))], True),  # a new host
    ([("host-0001", "summary", b"")], True),  # retired (cleared retained message)
    ([("host-0001", "summary", b"{not json")], False),  # dropped and counted: nothing changed
])
def test_order_generation_moves_only_when_the_order_may_change(messages, changes):
    sub = fed(3)
    gen = sub.order_gen
    for host, kind, payload in messages:
        sub.handle(f"gpuscope/v1/{host}/{kind}", payload)
    assert (sub.order_gen != gen) == changes


async def test_a_refresh_sorts_only_when_the_order_may_have_changed(monkeypatch):
    sub = fed(200)
    calls: list[int] = []
    real = fleet_table.order
    monkeypatch.setattr(fleet_table, "order", lambda hs: (calls.append(len(hs)), real(hs))[1])
    app = FleetApp(sub, sub.cfg)
    async with app.run_test(size=(150, 30)) as pilot:
        await pilot.pause()
        table = app.query_one(FleetTable)
        calls.clear()
        sub.handle("gpuscope/v1/host-0100/summary", summary("host-0100", 2))  # routine
        app.refresh_fleet()
        assert calls == []
        sub.handle("gpuscope/v1/host-0150/summary", summary("host-0150", 3, CRIT))
        app.refresh_fleet()
        assert calls == [200] and table.order[0] == "host-0150"
        await pilot.pause()
        assert "GPU3 fell off the bus" in table.plain()


def _live_styles_caches() -> int:
    gc.collect()
    return sum(isinstance(o, StylesCache) for o in gc.get_objects())


async def _one_fleet_screen(sub) -> None:
    app = FleetApp(sub, sub.cfg)
    async with app.run_test(size=(150, 30)) as pilot:
        await pilot.pause()
        await pilot.press("down", "enter")
    assert app.return_value == "host-0001"


@pytest.mark.slow
@pytest.mark.skipif(not ACTIVE, reason="Textual's private cache is released only on the Textual it was written for")
def test_a_closed_apps_widgets_are_released_between_visits():
    sub = fed(50)
    asyncio.run(_one_fleet_screen(sub))
    release_closed_app()
    after_one = _live_styles_caches()
    for _ in range(3):
        asyncio.run(_one_fleet_screen(sub))
    kept = _live_styles_caches()  # Textual's method lru_cache still holds the closed apps' widgets' caches
    release_closed_app()
    assert kept > after_one  # what release_closed_app is for (fails if Textual stops keeping them: drop it)
    assert _live_styles_caches() == after_one  # flat: nothing of the closed apps is left
