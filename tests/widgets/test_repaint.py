"""A changed line reaches the screen without Textual's message round trip (widgets/textual_private.py
``repaint``, ``painting``): marked on its screen at once, composited at the end of a redraw, and Textual's own
path wherever that would not be what Textual does.

The frames are counted at the screen (``_compositor_refresh``) and what reaches the terminal is read from what the
App is given to display (``_display``), not from a fresh render: a change never written would pass that. Waits
are ``asyncio.sleep``, not ``Pilot.pause`` (which composites the screen itself)."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from rich.text import Text
from textual.app import App, ComposeResult
from textual.messages import Layout
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
    DEFAULT_CSS = "Over { align: center middle; } Over Static { width: 10; height: 1; }"

    def compose(self) -> ComposeResult:
        yield Static("on top")


def lines(word: str) -> list[Text]:
    return [Text(f"row {y}: {word if y == 2 else 'same'}") for y in range(4)]


class Watch:
    """The frames ``app``'s current screen composites, and the text of what each sent to the terminal."""

    def __init__(self, app: App[Any]):
        self.frames = 0
        self.sent: list[str] = []
        screen: Any = app.screen
        composite, display = screen._compositor_refresh, app._display

        def counted() -> None:
            self.frames += 1
            composite()

        def shown(on: Any, update: Any) -> None:
            if update is not None:
                self.sent.append(update.render_segments(app.console))
            display(on, update)

        screen._compositor_refresh = counted
        app._display = shown  # type: ignore[method-assign]

    def wrote(self, text: str) -> bool:
        return any(text in s for s in self.sent)

    def first_row(self, text: str) -> int:
        """The screen row the first write of ``text`` went to (the cursor move before it)."""
        sent = next(s for s in self.sent if text in s)
        return int(re.findall(r"\x1b\[(\d+);\d+H", sent[:sent.index(text)])[-1]) - 1


async def started(app: Probe) -> tuple[LineWidget, LineWidget, Watch]:
    a, b = app.query_one("#a", LineWidget), app.query_one("#b", LineWidget)
    a.set_lines(lines("one"))
    b.set_lines(lines("one"))
    await asyncio.sleep(0.2)
    return a, b, Watch(app)


async def test_a_redraw_is_composited_at_its_end_at_once() -> None:
    app = Probe()
    async with app.run_test(size=(40, 12)):
        a, b, watch = await started(app)
        with painting():
            a.set_lines(lines("two"))
            b.set_lines(lines("too"))
            assert watch.frames == 0 and not app.screen._dirty_widgets  # type: ignore[attr-defined]  # held
        assert watch.frames == 1  # no await in between: no message, no timer
        assert watch.wrote("two") and watch.wrote("too")
        assert not app.screen._dirty_widgets and not a._repaint_required  # type: ignore[attr-defined]
        assert not app.screen._update_timer._active.is_set()  # type: ignore[attr-defined]  # the timer stays paused
        await asyncio.sleep(0.2)
        assert watch.frames == 1  # nothing left for the timer to do


async def test_outside_a_redraw_a_repaint_is_textuals_refresh() -> None:
    app = Probe()
    async with app.run_test(size=(40, 12)):
        a, _b, watch = await started(app)
        a.set_lines(lines("three"))
        assert a._repaint_required and watch.frames == 0  # type: ignore[attr-defined]  # the widget's idle does it
        await asyncio.sleep(0.1)
        assert watch.frames == 1 and watch.wrote("three")


async def test_a_task_started_inside_a_redraw_is_not_held() -> None:
    """A callback scheduled inside the redraw runs in a copy of its context, after it ended: its repaint must not
    wait for an end that has passed."""
    app = Probe()
    async with app.run_test(size=(40, 12)):
        a, _b, watch = await started(app)
        with painting():
            asyncio.get_running_loop().call_soon(a.set_lines, lines("later"))
        await asyncio.sleep(0.2)
        assert watch.wrote("later")


async def test_what_the_widget_measures_is_its_new_content() -> None:
    """A repaint drops the widget's measures of its content, as Textual's refresh does (a longer line: wider)."""
    from textual.geometry import Size

    app = Probe()
    async with app.run_test(size=(40, 12)):
        a, _b, _watch = await started(app)
        room = Size(40, 12)
        assert a.get_content_width(room, room) == len("row 0: same")
        with painting():
            a.set_lines(lines("a longer line"))
        assert a.get_content_width(room, room) == len("row 2: a longer line")


async def test_an_exiting_app_is_not_composited() -> None:
    """Textual's timer draws nothing once the app exits; neither does the end of a redraw."""
    app = Probe()
    async with app.run_test(size=(40, 12)):
        a, _b, watch = await started(app)
        app.exit()
        with painting():
            a.set_lines(lines("gone"))
        assert watch.frames == 0 and not watch.wrote("gone")


async def test_nested_the_outermost_paints() -> None:
    app = Probe()
    async with app.run_test(size=(40, 12)):
        a, _b, watch = await started(app)
        with painting():
            with painting():
                a.set_lines(lines("four"))
            assert watch.frames == 0
        assert watch.frames == 1 and watch.wrote("four")
        assert tp._HELD.get() is None


async def test_a_redraw_that_raises_leaves_its_repaints_to_the_timer() -> None:
    app = Probe()
    async with app.run_test(size=(40, 12)):
        _a, b, watch = await started(app)
        with pytest.raises(ZeroDivisionError), painting():
            b.set_lines(lines("five"))
            1 / 0  # noqa: B018
        assert watch.frames == 0 and tp._HELD.get() is None
        await asyncio.sleep(0.1)
        assert watch.frames == 1 and watch.wrote("five")


@pytest.mark.parametrize("pending", ["screen layout", "widget layout", "widget styles", "widget shown",
                                     "styles looked at again", "layout message queued"])
async def test_a_layout_pending_leaves_the_frame_to_the_timer(pending: str) -> None:
    """The screen must lay out first: its timer does both, as Textual would; no frame in the old layout."""
    app = Probe()
    async with app.run_test(size=(40, 12)):
        a, b, watch = await started(app)
        with painting():
            b.set_lines(lines("six"))
            if pending == "screen layout":
                app.screen.refresh(layout=True)
            elif pending == "widget layout":
                a.refresh(layout=True)
            elif pending == "widget shown":
                a.display = False
            elif pending == "layout message queued":  # a widget's idle posted it; the screen has not taken it yet
                app.screen.post_message(Layout(a))
            elif pending == "styles looked at again":  # nothing to lay out or draw after: only this resumes the timer
                a._refresh_styles()  # type: ignore[attr-defined]
            else:
                a.styles.height = 6
        assert watch.frames == 0
        await asyncio.sleep(0.2)
        assert watch.frames >= 1 and watch.wrote("six")
        assert watch.first_row("six") == b.region.y + 2  # the first frame that has it: laid out before it was drawn
        if pending == "widget styles":
            assert b.region.y == 6


async def test_a_line_count_change_is_a_layout_through_textual() -> None:
    app = Probe()
    async with app.run_test(size=(40, 12)):
        a, _b, watch = await started(app)
        with painting():
            a.set_lines(lines("seven") + [Text("row 4: new")])
        assert watch.frames == 0 and a not in app.screen._dirty_widgets  # type: ignore[attr-defined]
        await asyncio.sleep(0.2)
        assert watch.wrote("row 4: new")


async def test_under_a_modal_textuals_path_still_shows_it() -> None:
    """Textual composites the screen under a modal (it shows through): its path, not this one."""
    app = Probe()
    async with app.run_test(size=(40, 12)):
        a, _b, under = await started(app)  # counts the frames of the screen under the modal
        await app.push_screen(Over())
        await asyncio.sleep(0.1)
        under.frames = 0
        watch = Watch(app)
        with painting():
            a.set_lines(lines("eight"))
        assert watch.frames == 0 and under.frames == 0  # not composited here: Textual's refresh, through messages
        await asyncio.sleep(0.2)
        assert isinstance(app.screen, Over)
        assert watch.wrote("eight")  # under the modal, while it is up


class WithStatic(App[None]):
    CSS = "LineWidget { height: auto; } Static { height: 1; }"

    def compose(self) -> ComposeResult:
        yield Static("header one", id="head")
        yield LineWidget(id="a")


async def test_a_statics_update_in_the_same_redraw_is_in_the_same_frame() -> None:
    """A Static (the header, the processes panel) updated through Textual's refresh in the redraw: one frame, one
    write, as Textual's own path makes."""
    app = WithStatic()
    async with app.run_test(size=(40, 12)):
        a = app.query_one("#a", LineWidget)
        a.set_lines(lines("one"))
        await asyncio.sleep(0.2)
        watch = Watch(app)
        with painting():
            app.query_one("#head", Static).update("header two", layout=False)
            a.set_lines(lines("eleven"))
        assert watch.frames == 1 and len(watch.sent) == 1
        assert "header two" in watch.sent[0] and "eleven" in watch.sent[0]
        await asyncio.sleep(0.2)
        assert watch.frames == 1


class OverLines(ModalScreen[None]):
    DEFAULT_CSS = "OverLines { align: center middle; } OverLines LineWidget { width: 20; height: auto; }"

    def compose(self) -> ComposeResult:
        yield LineWidget(id="top")


async def test_a_redraw_over_two_screens_composites_the_top_one_and_leaves_the_other_to_textual() -> None:
    app = Probe()
    async with app.run_test(size=(40, 12)):
        a, _b, under = await started(app)
        over = OverLines()
        await app.push_screen(over)
        top = over.query_one("#top", LineWidget)
        top.set_lines(lines("up"))
        await asyncio.sleep(0.2)
        under.frames = 0
        watch = Watch(app)
        with painting():
            top.set_lines(lines("twelve"))
            a.set_lines(lines("thirteen"))
        assert watch.frames == 1 and watch.wrote("twelve") and under.frames == 0
        assert a._repaint_required  # type: ignore[attr-defined]  # Textual's refresh, on its own screen
        await asyncio.sleep(0.2)
        assert watch.wrote("thirteen")  # under the modal, through Textual's path


class Scrolled(App[None]):
    CSS = "LineWidget { height: auto; } VerticalScroll { height: 8; }"

    def compose(self) -> ComposeResult:
        from textual.containers import VerticalScroll

        with VerticalScroll():
            for k in range(4):
                yield LineWidget(id=f"w{k}")


async def test_a_scroll_pending_leaves_the_frame_to_the_timer() -> None:
    """Scrolled in the same redraw: Textual moves the view first, then draws; no frame at the old offset."""
    from textual.containers import VerticalScroll

    app = Scrolled()
    async with app.run_test(size=(40, 12)):
        ws = list(app.query(LineWidget))
        for w in ws:
            w.set_lines(lines("one"))
        await asyncio.sleep(0.2)
        watch = Watch(app)
        view = app.query_one(VerticalScroll)
        with painting():
            ws[1].set_lines(lines("scrolled"))
            view.scroll_to(y=3, animate=False, immediate=True)
        assert watch.frames == 0
        await asyncio.sleep(0.2)
        assert watch.first_row("scrolled") == ws[1].region.y + 2 == 4 + 2 - 3


async def test_a_recompose_pending_leaves_the_frame_to_textual() -> None:
    app = Probe()
    async with app.run_test(size=(40, 12)):
        a, b, watch = await started(app)
        with painting():
            b.set_lines(lines("ten"))
            a.refresh(recompose=True)
        assert watch.frames == 0
        await asyncio.sleep(0.2)
        assert watch.wrote("ten")


@pytest.mark.parametrize("how", ["hidden", "batch"])
async def test_textuals_path_where_its_own_would_differ(how: str) -> None:
    app = Probe()
    async with app.run_test(size=(40, 12)):
        a, _b, watch = await started(app)
        if how == "hidden":
            a.display = False
            await asyncio.sleep(0.1)
            watch.frames = 0
            with painting():
                a.set_lines(lines("nine"))
            assert a not in app.screen._dirty_widgets and watch.frames == 0  # type: ignore[attr-defined]
            a.display = True
        else:
            with app.batch_update():
                with painting():
                    a.set_lines(lines("nine"))
                assert a not in app.screen._dirty_widgets and watch.frames == 0  # type: ignore[attr-defined]
        await asyncio.sleep(0.2)
        assert watch.wrote("nine")


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
        watch = Watch(app)
        app.session.ingest(frame)
        app.refresh_view()
        assert watch.frames == 1 and watch.sent
        assert not app.screen._dirty_widgets  # type: ignore[attr-defined]
