"""Bracketed pastes taken whole before Textual's parser (widgets/paste.py, TerminalInput in
widgets/textual_private.py): ESC bytes inside a paste stay text, shown ``␛``, never key presses."""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st
from textual import events

from gpuscope.widgets.paste import PASTE_END, PASTE_START, Pasted, PasteSplitter, partial_end
from gpuscope.widgets.textual_private import MATCHES, TerminalInput

needs_written_for = pytest.mark.skipif(not MATCHES, reason="TerminalInput uses the pinned Textual's parser")

# what a person might paste: ESC alone, a cursor key, a screen clear, a title change (OSC … BEL), F1 (SS3),
# two ESCs, an ESC before the end marker, a long run after an ESC (Textual reissues it as keys past 32)
PAYLOADS = [
    "\x1b",
    "a\x1bb",
    "a\x1b[Ab",
    "a\x1b[2Jb",
    "a\x1b]0;pwned\x07b",
    "a\x1bOPb",
    "a\x1b\x1bb",
    "end\x1b",
    "x\x1bhello world, a pasted line longer than the parser's 32-character search",
    "\x1b[200~nested start",  # a start marker inside a paste is text too
    "plain text",
    "",
]


@pytest.mark.parametrize(("data", "marker", "shortest", "want"), [
    ("abc", PASTE_START, 2, 0),
    ("abc\x1b", PASTE_START, 2, 0),
    ("abc\x1b", PASTE_START, 1, 1),
    ("abc\x1b", PASTE_END, 1, 1),  # inside a paste it may be the end marker's start
    ("abc\x1b[", PASTE_START, 2, 2),
    ("abc\x1b[20", PASTE_START, 2, 4),
    ("abc\x1b[200", PASTE_START, 2, 5),
    ("abc\x1b[201", PASTE_START, 2, 0),  # not the start marker
    ("abc\x1b[201", PASTE_END, 1, 5),
    ("\x1b[200~", PASTE_START, 2, 0),  # the whole marker is found, not held
])
def test_partial_end(data, marker, shortest, want):
    assert partial_end(data, marker, shortest) == want


def _split_everywhere(stream: str) -> list[list[str | Pasted]]:
    """What the splitter gives for ``stream`` cut into two reads at every position (and released at the end)."""
    outs = []
    for cut in range(len(stream) + 1):
        s = PasteSplitter()
        out = s.feed(stream[:cut]) + s.feed(stream[cut:])
        rest = s.release()
        outs.append(_joined(out + ([rest] if rest else [])))
    return outs


def _joined(pieces: list[str | Pasted]) -> list[str | Pasted]:
    """Adjacent text pieces joined (a read boundary may split text; that is not a difference)."""
    out: list[str | Pasted] = []
    for p in pieces:
        if isinstance(p, str) and out and isinstance(out[-1], str):
            out[-1] += p
        elif p != "":
            out.append(p)
    return out


@pytest.mark.parametrize("payload", PAYLOADS)
def test_a_paste_is_one_piece_with_its_escs_wherever_the_reads_split(payload):
    stream = "q" + PASTE_START + payload + PASTE_END + "\x1b[A"  # a key before, the paste, a key after
    for got in _split_everywhere(stream):
        assert got == ["q", Pasted(payload), "\x1b[A"]


@pytest.mark.parametrize(("stream", "want"), [
    ("hello", ["hello"]),
    ("\x1b", ["\x1b"]),  # Escape: held, then released to the parser
    ("\x1b[A", ["\x1b[A"]),
    (PASTE_START + "a" + PASTE_END + PASTE_START + "b" + PASTE_END, [Pasted("a"), Pasted("b")]),
    (PASTE_START + "a\nb\tc" + PASTE_END, [Pasted("a\nb\tc")]),
])
def test_splitter_table(stream, want):
    for got in _split_everywhere(stream):
        assert got == want


def test_an_unfinished_start_marker_is_held_until_released():
    s = PasteSplitter()
    assert s.feed("x\x1b[") == ["x"] and s.holding == "\x1b["
    assert s.release() == "\x1b[" and not s.holding  # Alt+[ after all: the driver gives it to the parser
    assert s.feed(PASTE_START + "in\x1b") == [] and not s.holding  # inside a paste: waits for the end
    assert s.release() == ""
    assert s.feed("[201~") == [Pasted("in")]


def _events(chunks: list[str], wait: bool = False) -> list[events.Event]:
    """The events for ``chunks`` read one after another; with ``wait``, then no more input, ticking at each
    deadline as the driver's loop does (select until TerminalInput.deadline, then tick)."""
    from textual._time import get_time

    got: list[events.Event] = []
    ti = TerminalInput(got.append)
    for c in chunks:
        ti.feed(c)
    end = time.monotonic() + 5
    while wait and (deadline := ti.deadline()) is not None and time.monotonic() < end:
        time.sleep(max(0.0, deadline - get_time()) + 0.005)
        ti.tick()
    ti.close()
    return got


def _described(evs: list[events.Event]) -> list[tuple[str, str]]:
    return [("paste", e.text) if isinstance(e, events.Paste) else ("key", e.key) for e in evs
            if isinstance(e, (events.Paste, events.Key))]


@needs_written_for
@pytest.mark.parametrize(("payload", "shown"), [
    ("\x1b", "␛"),
    ("a\x1bb", "a␛b"),
    ("a\x1b[Ab", "a␛[Ab"),
    ("a\x1b[2Jb", "a␛[2Jb"),
    ("a\x1b]0;pwned\x07b", "a␛]0;pwned␇b"),
    ("a\x1b\x1bb", "a␛␛b"),
    ("end\x1b", "end␛"),
    ("x\x1bhello world, a pasted line longer than the parser's 32-character search",
     "x␛hello world, a pasted line longer than the parser's 32-character search"),
    ("two\nlines", "two\nlines"),  # line breaks are the field's business (Input keeps the first line)
])
def test_terminal_input_posts_one_paste_and_no_keys(payload, shown):
    got = _described(_events([PASTE_START + payload + PASTE_END]))
    assert got == [("paste", shown)]


@needs_written_for
def test_keys_around_a_paste_are_still_keys():
    got = _described(_events(["\x1b[A" + PASTE_START + "a\x1bb" + PASTE_END + "q"]))
    assert got == [("key", "up"), ("paste", "a␛b"), ("key", "q")]


@needs_written_for
@pytest.mark.parametrize(("chunks", "want"), [
    (["\x1b"], [("key", "escape")]),  # a lone Escape, at the parser's deadline
    (["x\x1b["], [("key", "x"), ("key", "left_square_bracket")]),  # held for a paste start that never came:
    # released at the escape delay (Textual reads a lone ESC [ as "[" after an unmatched ESC)
])
def test_what_waits_is_released_when_no_more_input_comes(chunks, want):
    got = _described(_events(chunks, wait=True))
    assert [k for k in got if k != ("key", "circumflex_accent")] == want


@needs_written_for
def test_textuals_own_parser_still_turns_a_pasted_esc_into_keys():
    """Why TerminalInput exists: on the pinned Textual the bare parser types what follows a pasted ESC as
    keys and cuts the paste (a lone ESC is the escape binding). When this fails, Textual has fixed it and
    PasteSplitter can go."""
    from textual._xterm_parser import XTermParser

    p = XTermParser()
    got = _described([*p.feed(PASTE_START + "a\x1b[2Jb" + PASTE_END), *p.tick()])
    assert ("paste", "a") in got and ("key", "J") in got
    got = _described([*XTermParser().feed(PASTE_START + "end\x1b" + PASTE_END)])
    assert ("key", "escape") in got


# any terminal input, cut into reads anywhere: the splitter never fails, loses nothing and adds nothing
_BITS = st.sampled_from(["a", "q", "\x1b", "[", "2", "0", "1", "~", "\x07", "\n", "é", PASTE_START, PASTE_END,
                         "\x1b[A", "\x1b[20"])


@given(st.lists(_BITS, max_size=40), st.lists(st.integers(0, 200), max_size=6))
def test_the_splitter_is_lossless_on_any_input(bits, cuts):
    stream = "".join(bits)
    s = PasteSplitter()
    out: list[str | Pasted] = []
    prev = 0
    for c in sorted(min(c, len(stream)) for c in cuts) + [len(stream)]:
        out += s.feed(stream[prev:c])
        prev = c
    out.append(s.release())
    rebuilt = "".join(p if isinstance(p, str) else PASTE_START + p.text + PASTE_END for p in out)
    unfinished = s._paste is not None  # a paste whose end never came stays open (its text waits)
    if not unfinished:
        assert rebuilt == stream
    else:
        assert stream.startswith(rebuilt)
