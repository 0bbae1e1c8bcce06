"""A bracketed paste with ESC bytes in it, into the marker prompt: the bytes stay in the
prompt's text, shown as ``␛`` (core.text.visible), and none of them runs as a key binding: the Escape
binding does not cancel the prompt, nothing after an ESC is typed as keys, and no ESC reaches the terminal.
With Pilot (the events the driver's TerminalInput posts) and in a real terminal (tmux ``paste-buffer -p``)."""

from __future__ import annotations

import shlex
import sys

import pytest
from helpers import Tmux, make_app, needs_tmux, wait_for
from helpers import pilot_until as until
from textual.widgets import Input

from gpuscope.tui.screens import MarkerScreen
from gpuscope.widgets.paste import PASTE_END, PASTE_START
from gpuscope.widgets.textual_private import MATCHES, TerminalInput

pytestmark = pytest.mark.skipif(not MATCHES, reason="the driver's TerminalInput needs the pinned Textual")

# (pasted, what the prompt holds and shows)
CASES = [
    ("end\x1b", "end␛"),  # a trailing ESC: Textual's parser alone presses Escape, cancelling the prompt
    ("a\x1b[2Jb", "a␛[2Jb"),  # a screen clear
    ("note\x1b]0;pwned\x07", "note␛]0;pwned␇"),  # a title change, BEL as ctrl+g
    ("x\x1bq", "x␛q"),  # Alt+q to the parser: q (quit) must not be pressed
    ("\x1b\x1b\x1b", "␛␛␛"),
]


def _poster(app):
    """Post as the terminal driver does (``Driver.process_message``: the app is the sender)."""
    def post(message) -> None:
        message.set_sender(app)
        app.post_message(message)
    return post


@pytest.mark.parametrize(("pasted", "shown"), CASES)
async def test_a_pasted_esc_stays_text_in_the_marker_prompt(pasted, shown):
    app = make_app("mixed-4", 0, 5)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("M")
        await until(pilot, lambda: isinstance(app.screen, MarkerScreen))
        box = app.screen.query_one(Input)
        TerminalInput(_poster(app)).feed(PASTE_START + pasted + PASTE_END)
        await until(pilot, lambda: box.value == shown)
        await pilot.pause(0.2)  # past the escape delay: nothing was left to turn into a key
        assert isinstance(app.screen, MarkerScreen) and box.value == shown
        line = box.render_line(0).text
        assert "\x1b" not in line and shown in line
        await pilot.press("enter")
        await until(pilot, lambda: not isinstance(app.screen, MarkerScreen))
        assert app.session._pending[-1].text == shown  # the marker's label, as the prompt showed it
        assert app.is_running


async def test_textuals_parser_alone_would_cancel_the_prompt():
    """The same bytes through the bare parser (what Textual's own driver does): the Escape binding runs.
    This is the failure the tests above guard against."""
    from textual._xterm_parser import XTermParser

    app = make_app("mixed-4", 0, 5)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("M")
        await until(pilot, lambda: isinstance(app.screen, MarkerScreen))
        post = _poster(app)
        for event in XTermParser().feed(PASTE_START + "end\x1b" + PASTE_END):
            post(event)
        await until(pilot, lambda: not isinstance(app.screen, MarkerScreen))


@pytest.mark.slow
@needs_tmux
def test_a_pasted_esc_in_a_real_terminal(tmp_path):
    """tmux pastes with the bracketed-paste markers (``paste-buffer -p``, as the app asked for them): the
    prompt stays open showing ␛, the screen is not cleared nor the pane retitled, and Enter drops the
    marker with that label, which the recording keeps as text."""
    from gpuscope.sources.recording import open_recording

    buf = tmp_path / "paste.txt"
    buf.write_bytes(b"lbl\x1b[2J\x1b]0;pwned\x07\x1bq\x1b")
    out = tmp_path / "r.jsonl.gz"
    cmd = f"{shlex.quote(sys.executable)} -m gpuscope --simulate mixed-4 --record {shlex.quote(str(out))}"
    with Tmux(cmd, size=(100, 30)) as t:
        t.wait_screen("SIMULATED", "GPU1")
        t.keys("M")
        t.wait_screen("marker label")
        t.run("load-buffer", "-b", "esc", str(buf), check=True)
        t.run("paste-buffer", "-p", "-b", "esc", "-t", t.name, check=True)
        screen = t.wait_screen("lbl␛[2J␛]0;pwned␇␛q␛", timeout=20)
        assert "SIMULATED" in screen and "Inference" in screen  # not cleared
        assert "pwned" not in t.run("display-message", "-p", "-t", t.name, "#{pane_title}").stdout
        t.keys("Enter")
        wait_for(lambda: "marker label" not in t.screen() and "marker dropped" in t.screen(), 20,
                 "Enter to close the prompt (the note line says the marker was dropped)")
        closed = t.screen()
        wait_for(lambda: t.screen() != closed, 20, "the next frame (the marker travels with it)")
        t.keys("q")
        t.wait_screen("EXITED 0", timeout=20)
    labels = [e.text for e in open_recording(out).events if e.kind == "marker"]
    assert labels == ["lbl␛[2J␛]0;pwned␇␛q␛"]


async def test_a_pasted_esc_stays_text_in_the_command_palette():
    """The palette's search box is Textual's own Input: the same driver path makes a paste text there too."""
    from textual.command import CommandPalette

    app = make_app("mixed-4", 0, 5)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("ctrl+p")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette))
        box = app.screen.query_one(Input)
        TerminalInput(_poster(app)).feed(PASTE_START + "probe\x1b" + PASTE_END)
        await until(pilot, lambda: box.value == "probe␛")
        await pilot.pause(0.2)
        assert isinstance(app.screen, CommandPalette)  # Escape would have closed it
        assert "\x1b" not in box.render_line(0).text
