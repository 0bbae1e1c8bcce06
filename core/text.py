"""Text from outside (recordings, brokers, endpoints, /proc) made safe for a terminal.

:func:`clean` is the one sanitiser: every string that gpuscope did not write itself passes through it
before it reaches a terminal (the TUI widgets and every command's output), so a recording or a broker
message cannot clear the screen, recolour it, retitle the window, ring the bell or reorder text with
bidirectional overrides.
"""

from __future__ import annotations

import re

# ESC-introduced sequences first (CSI … final byte, OSC/DCS/PM/APC … ST or BEL, two-byte escapes), so that
# their parameters go with them; then any remaining C0/C1 control, DEL, and the bidi/invisible formatting
# characters (LRE…RLO, LRI…PDI, LRM/RLM/ALM, zero-width joiners are kept: emoji need them).
_ESC_SEQ = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]?"  # CSI
    r"|\x1b[\]PX^_][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC, DCS, SOS, PM, APC up to BEL or ST
    r"|\x1b[ -/]*[0-~]?"  # other escapes (ESC c, ESC ( B, …)
    r"|\x9b[0-?]*[ -/]*[@-~]?"  # 8-bit CSI
    r"|[\x9d\x90\x98\x9e\x9f][^\x07\x1b\x9c]*(?:\x07|\x9c|\x1b\\)?"  # 8-bit OSC/DCS/SOS/PM/APC
)
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_SPACE = re.compile(r"[\t\n]+")


def clean(s: object, max_len: int = 200) -> str:
    """``s`` as one printable line: escape sequences and control characters removed, tabs and newlines
    turned into a space, cut to ``max_len`` characters (with ``…``). ``None`` gives ``""``; other
    non-strings are converted with ``str`` first."""
    if s is None:
        return ""
    if not isinstance(s, str):
        s = str(s)
    if s.isprintable() and len(s) <= max_len:
        return s  # the common case: nothing to do
    s = _ESC_SEQ.sub("", s)
    s = _SPACE.sub(" ", s)
    s = _CONTROL.sub("", s)
    if len(s) > max_len:
        s = s[: max(max_len - 1, 0)] + "…"
    return s


_PICTURE = {c: chr(0x2400 + c) for c in range(0x20)} | {0x7F: "\u2421"}  # ESC → ␛, NUL → ␀, DEL → ␡
_PICTURE |= {c: "\ufffd" for c in range(0x80, 0xA0)}  # C1 controls (8-bit CSI …) have no picture: �
_PICTURE |= {ord(c): "\ufffd" for c in "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"}


def visible(s: str, keep: str = "\t\n\r") -> str:
    """``s`` with every control character shown, not obeyed: C0 controls and DEL as their Unicode control
    pictures (ESC → ``␛``, so a pasted ``\x1b[2J`` reads ``␛[2J``), C1 and bidirectional controls as
    ``�``; one character for one, so a cursor or selection in the text stays where it was. For text
    that a person typed or pasted into a field, where :func:`clean` would silently drop what they gave;
    the characters in ``keep`` (tab and line breaks: the field decides) are left as they are."""
    if s.isprintable():
        return s
    return s.translate({c: p for c, p in _PICTURE.items() if chr(c) not in keep})


def clean_opt(s: str | None, max_len: int = 200) -> str | None:
    """:func:`clean` that keeps ``None`` as ``None``."""
    return None if s is None else clean(s, max_len)


def count(n: int, noun: str) -> str:
    """``1 frame``, ``0 frames``, ``2 frames``: a count with its noun in the right number (regular plurals)."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"
