"""A changed line reaches the screen without Textual's message round trip (widgets/textual_private.py
``repaint``, ``painting``): marked on its screen at once, composited at the end of a redraw, and Textual's own
path wherever that would not be what Textual does."""

from __future__ import annotations

from typing import Any

import pytest
from rich.text import Text
from textual.app import App, ComposeResult
from textual.screen import ModalScreen
from textual.widgets import Static

from gpuscope.widgets import textual_private as tp
from gpuscope.widgets.lines import LineWidget
from gpuscope.widgets.textual_private import painting

pytestmark = pytest.mark.skipif(not tp.ACTIVE, reason="the private paths are off: Textual's path is the only one")


class Probe(App[None]):
    CSS = "LineWidget { height: auto; }"

    def compose(self) -> ComposeResult:
        yield LineWidget(id="a")
        yield LineWidget(id="b")


class Over(ModalScreen[None]):
    def compose(self) -> ComposeResult:
        yield Static("on top")


def lines(word: str) -> list[Text]:
    return [Text(f"row {y}: {word if y == 2 else 'same'}") for y in range(4)]


def shown(w: LineWidget) -> str:
    """What the screen's compositor holds for ``w``'s rows (a full render of the screen as it now is)."""
    region = w.content_region
    strips = w.screen._compositor.render_full_update().strips  # type: ignore[attr-defined]
    return "\n".join("".join(s.text for s in strips[y])[region.x:region.right] for y in range(region.y, region.bottom))


def frames(app: App[Any]) -> list[int]:
    """A counter of the frames ``app``'s current screen composites (its instance's ``_compositor_refresh``)."""
    screen: Any = app.screen
    count = [0]
    composite = screen._compositor_refresh

    def counted() -> None:
        count[0] += 1
        composite()

    screen._compositor_refresh = counted
    return count


async def started(app: Probe, pilot: Any) -> tuple[LineWidget, LineWidget]:
    a, b = app.query_one("#a", LineWidget), app.query_one("#b", LineWidget)
    a.set_lines(lines("one"))
    b.set_lines(lines("one"))
    for _ in range(3):
        await pilot.pause()
    return a, b


async def test_a_redraw_is_composited_at_its_end_at_once() -> None:
    app = Probe()
    async with app.run_test(size=(40, 12)) as pilot:
        a, b = await started(app, pilot)
        count = frames(app)
        with painting():
            a.set_lines(lines("two"))
            b.set_lines(lines("two"))
            assert count[0] == 0  # not yet: once, at the end
            assert {a, b} <= app.screen._dirty_widgets  # type: ignore[attr-defined]
        assert count[0] == 1  # no await in between: no message, no timer
        assert "row 2: two" in shown(a) and "row 2: two" in shown(b)
        assert not app.screen._dirty_widgets  # type: ignore[attr-defined]
        for _ in range(3):
            await pilot.pause()
        assert count[0] == 1  # nothing left for the timer to do


async def test_a_repaint_outside_a_redraw_is_marked_at_once_and_composited_by_the_timer() -> None:
    app = Probe()
    async with app.run_test(size=(40, 12)) as pilot:
        a, _b = await started(app, pilot)
        count = frames(app)
        a.set_lines(lines("three"))
        assert a in app.screen._dirty_widgets  # type: ignore[attr-defined]  # at once, not on the widget's idle
        assert not a._repaint_required  # type: ignore[attr-defined]  # no Update message to come
        assert count[0] == 0
        await pilot.pause(0.1)
        assert count[0] == 1 and "row 2: three" in shown(a)


async def test_nested_the_outermost_paints_and_an_exception_still_paints() -> None:
    app = Probe()
    async with app.run_test(size=(40, 12)) as pilot:
        a, b = await started(app, pilot)
        count = frames(app)
        with painting():
            with painting():
                a.set_lines(lines("four"))
            assert count[0] == 0
        assert count[0] == 1
        with pytest.raises(ZeroDivisionError), painting():
            b.set_lines(lines("five"))
            1 / 0  # noqa: B018
        assert count[0] == 2 and "row 2: five" in shown(b)
        assert not tp._Held.screens and tp._Held.depth == 0


async def test_a_layout_pending_leaves_the_frame_to_the_timer() -> None:
    """The screen must lay out first: its timer does both, as Textual would."""
    app = Probe()
    async with app.run_test(size=(40, 12)) as pilot:
        a, _b = await started(app, pilot)
        count = frames(app)
        with painting():
            a.set_lines(lines("six"))
            app.screen.refresh(layout=True)
        assert count[0] == 0
        await pilot.pause(0.1)
        assert count[0] >= 1 and "row 2: six" in shown(a)


async def test_a_line_count_change_is_a_layout_through_textual() -> None:
    app = Probe()
    async with app.run_test(size=(40, 12)) as pilot:
        a, _b = await started(app, pilot)
        count = frames(app)
        with painting():
            a.set_lines(lines("seven") + [Text("row 4: new")])
        assert count[0] == 0 and a not in app.screen._dirty_widgets  # type: ignore[attr-defined]
        for _ in range(3):
            await pilot.pause(0.05)
        assert "row 4: new" in shown(a)


async def test_under_another_screen_textuals_path_and_shown_when_back() -> None:
    app = Probe()
    async with app.run_test(size=(40, 12)) as pilot:
        a, _b = await started(app, pilot)
        main = app.screen
        await app.push_screen(Over())
        await pilot.pause()
        top_count = frames(app)
        with painting():
            a.set_lines(lines("eight"))
            assert a not in main._dirty_widgets and not tp._Held.screens  # type: ignore[attr-defined]
        assert top_count[0] == 0
        app.pop_screen()
        for _ in range(3):
            await pilot.pause(0.05)
        assert "row 2: eight" in shown(a)


@pytest.mark.parametrize("how", ["hidden", "batch", "unmounted"])
async def test_textuals_path_where_its_own_would_differ(how: str) -> None:
    app = Probe()
    async with app.run_test(size=(40, 12)) as pilot:
        a, _b = await started(app, pilot)
        count = frames(app)
        if how == "unmounted":
            w = LineWidget()
            with painting():
                w.set_lines(lines("x"))
                w.set_lines(lines("y"))
            assert count[0] == 0 and not tp._Held.screens
            return
        if how == "hidden":
            a.display = False
            await pilot.pause()
            count[0] = 0
            with painting():
                a.set_lines(lines("nine"))
            assert a not in app.screen._dirty_widgets and count[0] == 0  # type: ignore[attr-defined]
            a.display = True
        else:
            with app.batch_update():
                with painting():
                    a.set_lines(lines("nine"))
                assert a not in app.screen._dirty_widgets and count[0] == 0  # type: ignore[attr-defined]
        for _ in range(3):
            await pilot.pause(0.05)
        assert "row 2: nine" in shown(a)


async def test_the_live_screens_redraw_composites_once_at_its_end() -> None:
    """GpuscopeApp.refresh_view draws inside painting(): a new frame's changed lines are on the screen when it
    returns."""
    from helpers import make_app, run_frames, sim_source

    app = make_app("h200-nvswitch-8", 0, 20)
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(4):
            await pilot.pause()
        src = sim_source("h200-nvswitch-8")
        frame = list(run_frames(src, 20, 22))[-1]
        count = frames(app)
        app.session.ingest(frame)
        app.refresh_view()
        assert count[0] == 1
        assert not app.screen._dirty_widgets  # type: ignore[attr-defined]
