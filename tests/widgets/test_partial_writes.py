"""widgets/textual_private.py (partial writes): a partial update writes only from the segment where a changed span starts, and
the terminal ends up showing exactly what Textual's own (longer) output would have shown."""

from __future__ import annotations

import random
import re

import pytest
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

from gpuscope.widgets import textual_private as partial_writes

if not partial_writes.MATCHES:  # the code under test is for one Textual; another has its public paths only
    pytest.skip(f"written for Textual {partial_writes.WRITTEN_FOR}", allow_module_level=True)
from textual._compositor import ChopsUpdate  # noqa: E402

ORIGINAL = partial_writes.TEXTUAL_RENDER_SEGMENTS
MOVE = re.compile(r"\x1b\[(\d+);(\d+)H")
SGR = re.compile(r"\x1b\[[0-9;]*m")


def apply(screen: list[list[str]], data: str) -> None:
    """Write ``data`` (text, cursor moves and styles, which are ignored) onto ``screen`` as a terminal would."""
    y = x = 0
    data = SGR.sub("", data)
    for k, part in enumerate(MOVE.split(data)):
        if k % 3 == 1:
            y = int(part) - 1
        elif k % 3 == 2:
            x = int(part) - 1
        else:
            for ch in part:
                if ch == "\n":
                    continue
                screen[y][x] = ch
                x += 1


def update(lines: list[list[str]], spans: list[tuple[int, int, int]]) -> ChopsUpdate:
    """One chop per line (a widget as wide as the screen), each line cut into runs of several styles."""
    chops = [{0: Strip([Segment(run, Style(bold=k % 2 == 1)) for k, run in enumerate(_runs("".join(ln)))])}
             for ln in lines]
    return ChopsUpdate(chops, spans, [[len(ln)] for ln in lines])


def _runs(s: str) -> list[str]:
    out, k = [], 0
    while k < len(s):
        n = 1 + (k * 7) % 5
        out.append(s[k:k + n])
        k += n
    return out


CONSOLE = Console(color_system=None, force_terminal=True, width=200)


@pytest.mark.parametrize("x1,x2,want_start", [(0, 3, 0), (3, 5, 1), (10, 12, 10), (19, 20, 18), (5, 20, 4)])
def test_starts_at_the_segment_holding_the_span(x1: int, x2: int, want_start: int) -> None:
    line = list("abcdefghijklmnopqrst")  # runs (see _runs): a|bcd|efgh|ij|k|lmn|opqr|st
    out = partial_writes.render_segments(update([line], [(0, x1, x2)]), CONSOLE)
    m = MOVE.match(out)
    assert m and int(m.group(2)) - 1 == want_start
    assert SGR.sub("", out[m.end():]) == "".join(line)[want_start:x2]


@pytest.mark.parametrize("seed", range(20))
def test_screen_is_the_same_as_with_textuals_output(seed: int) -> None:
    rnd = random.Random(seed)
    w, h = 40, 6
    new = [[rnd.choice("abc xyz01") for _ in range(w)] for _ in range(h)]
    spans = sorted({(y, a, a + rnd.randint(1, w - a)) for y in rnd.sample(range(h), 3) for a in [rnd.randrange(w)]})
    upd = update(new, spans)
    ours = partial_writes.render_segments(upd, CONSOLE)
    theirs = ORIGINAL(upd, CONSOLE)
    a = [["."] * w for _ in range(h)]
    b = [["."] * w for _ in range(h)]
    apply(a, theirs)
    apply(b, ours)
    # every cell of a span shows the new text either way; ours writes no more than Textual's
    for y, x1, x2 in spans:
        assert b[y][x1:x2] == new[y][x1:x2] == a[y][x1:x2]
    assert all(b[y][x] in (".", new[y][x]) for y in range(h) for x in range(w))
    assert len(ours) <= len(theirs)


def test_install_is_idempotent_and_only_when_active() -> None:
    assert partial_writes.install() is partial_writes.install() is partial_writes.ACTIVE
    assert (ChopsUpdate.render_segments is partial_writes.render_segments) is partial_writes.ACTIVE


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
async def test_partial_updates_leave_the_screen_as_a_full_redraw_would(size: tuple[int, int]) -> None:
    """Change a few cells in two GPU panels (or table rows) far apart; apply the partial update Textual
    sends (written by render_segments) to the screen as it was: it must read exactly like a full redraw of the
    new screen."""

    from helpers import make_app

    from gpuscope.widgets.lines import LineWidget

    captured: list[ChopsUpdate] = []
    original_init = ChopsUpdate.__init__

    def spy(self, chops, spans, chop_ends):  # type: ignore[no-untyped-def]
        captured.append(self)
        original_init(self, chops, spans, chop_ends)

    app = make_app("h200-nvswitch-8", 0, 30)
    async with app.run_test(size=size) as pilot:
        for _ in range(6):
            await pilot.pause()
        assert (ChopsUpdate.render_segments is partial_writes.render_segments) is partial_writes.ACTIVE
        comp = app.screen._compositor
        before = [[ch for ch in "".join(s.text for s in row)] for row in comp.render_full_update().strips]
        widgets = [w for w in app.screen.query(LineWidget) if w.display and w.size.height > 1]
        first, last = widgets[0], widgets[-1]
        for w, k in ((first, 1), (last, len(last._lines) - 1)):
            lines = list(w._lines)
            t = lines[k]
            lines[k] = t[:5] + type(t)("#", style="bold") + t[6:]
            w.set_lines(lines)
        ChopsUpdate.__init__ = spy  # type: ignore[method-assign]
        try:
            for _ in range(3):
                await pilot.pause()
        finally:
            ChopsUpdate.__init__ = original_init  # type: ignore[method-assign]
        assert captured, "no partial update was sent"
        for upd in captured:
            apply(before, partial_writes.render_segments(upd, CONSOLE))
        after = ["".join(s.text for s in row) for row in comp.render_full_update().strips]
        assert ["".join(r) for r in before] == after
        assert any("#" in row for row in after)


@pytest.mark.parametrize("x, y", [(0, 0), (5, 0), (0, 7), (79, 23), (199, 59)])
def test_move_to_is_richs_cursor_sequence(x: int, y: int) -> None:
    from rich.control import Control

    assert partial_writes.move_to(x, y) == Control.move_to(x, y).segment.text


class _Driver:
    """Records what the app writes (the terminal end of Textual's driver)."""

    is_inline = False

    def __init__(self) -> None:
        self.writes: list[str] = []
        self.flushes = 0

    def write(self, data: str) -> None:
        self.writes.append(data)

    def flush(self) -> None:
        self.flushes += 1


@pytest.mark.parametrize("sync", [True, False])
def test_an_update_is_one_write(sync: bool) -> None:
    """Textual writes synchronized-output start, update and end separately; write_update writes them as
    one string, in the same order, and the cursor goes where Textual puts it."""
    from types import SimpleNamespace

    from textual._ansi_sequences import SYNC_END, SYNC_START
    from textual.geometry import Offset, Size

    line = list("abcdefghijklmnopqrst")
    upd = update([line, line], [(0, 2, 6), (1, 0, 20)])
    driver = _Driver()
    app = SimpleNamespace(_driver=driver, is_headless=False, _running=True, _closed=False, _batch_count=0,
                          _sync_available=sync, console=CONSOLE, cursor_position=Offset(3, 1),
                          screen=SimpleNamespace(outer_size=Size(20, 2)), _previous_cursor_position=None)
    assert partial_writes.write_update(app, upd)
    assert len(driver.writes) == 1 and driver.flushes == 1
    body = upd.render_segments(CONSOLE) + "\x1b[2;4H"  # ours where installed (textual_private.ACTIVE)
    assert driver.writes[0] == (SYNC_START + body + SYNC_END if sync else body)
    assert not partial_writes.write_update(app, "not a compositor update")  # left to Textual
