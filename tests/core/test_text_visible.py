"""core.text.visible: control characters a person pasted into a field shown, not obeyed, one for one."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuscope.core.text import clean, visible


@pytest.mark.parametrize(("s", "want"), [
    ("plain label", "plain label"),
    ("\x1b", "␛"),
    ("a\x1b[2Jb", "a␛[2Jb"),  # a screen clear, as text
    ("\x1b]0;title\x07", "␛]0;title␇"),  # a window title change (OSC … BEL)
    ("nul\x00del\x7f", "nul␀del␡"),
    ("\x9b31m", "\ufffd31m"),  # 8-bit CSI: no control picture, the replacement character
    ("abc\u202eevil", "abc\ufffdevil"),  # a bidi override would reorder what follows
    ("tab\tline\nret\r", "tab\tline\nret\r"),  # kept: the field decides what a line break means
    ("née 東京 👍", "née 東京 👍"),
])
def test_visible(s, want):
    assert visible(s) == want


def test_visible_can_keep_nothing():
    assert visible("a\tb\n", keep="") == "a␉b␊"


@given(st.text())
def test_one_character_for_one_and_nothing_left_to_obey(s):
    v = visible(s, keep="")
    assert len(v) == len(s)  # a cursor or a selection stays where it was
    assert clean(v, max_len=len(v) + 1) == v  # the sanitiser finds nothing to remove
