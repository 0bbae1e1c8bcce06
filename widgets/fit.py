"""Fitting text into a width without cutting a value: drop whole words or whole fields, never digits.

Pure functions (no widget state), tested with tables in tests/tui/test_screen.py.
"""

from __future__ import annotations

from rich.cells import cell_len, get_character_cell_size
from rich.text import Span, Text

from gpuscope.core.units import NONE

ELLIPSIS = "…"

# The characters Rich measures one cell wide, among those the screen draws: printable ASCII and Latin, punctuation
# (the en dash of "0–100%", "…"), super- and subscripts, arrows, mathematical operators (the minus sign of a
# finding's "−495 MHz", "≥", "≈"), control pictures ("␛"), box drawing and blocks (bars, graphs), symbols and
# dingbats ("⚠", "✔"). Measured by Rich itself at import, so :func:`is_narrow` never disagrees with it (the
# blocks' wide emoji are left out there). Measured past Rich's LRU caches (``__wrapped__``, functools' name for
# the function it caches): through ``cell_len`` the 1,958 characters stayed in them, 0.5 MB for the life of the
# process (docs/performance.md, *Memory at one GPU*); tests/widgets/test_lines.py checks it equals ``cell_len``'s.
_measure = getattr(get_character_cell_size, "__wrapped__", get_character_cell_size)
NARROW_RANGES = ((0x20, 0x7E), (0xA0, 0x2FF), (0x2010, 0x2027), (0x2030, 0x205E), (0x2070, 0x209F), (0x2190, 0x22FF),
                 (0x2400, 0x243F), (0x2500, 0x27BF))
_NARROW = frozenset(c for lo, hi in NARROW_RANGES for c in map(chr, range(lo, hi + 1)) if _measure(c) == 1)
# narrow()'s answers for whole lines: a changed line is asked about four times (fitted, made into segments, and
# compared with the line before it and the line after it); cleared past 2,048
_NARROW_SEEN: dict[str, bool] = {}


def is_narrow(text: str) -> bool:
    """Whether every character of ``text`` is one cell wide (as Rich measures it): then its cells are its
    characters, one for one. Rich's own quick check knows fewer characters (not the en dash of every graph's
    scale line) and measures the others one by one."""
    return text.isascii() and text.isprintable() or _NARROW.issuperset(text)


def narrow(text: str) -> bool:
    """:func:`is_narrow` of a line, remembered."""
    got = _NARROW_SEEN.get(text)
    if got is None:
        got = is_narrow(text)
        if len(_NARROW_SEEN) >= 2048:
            _NARROW_SEEN.clear()
        _NARROW_SEEN[text] = got
    return got


def cells(text: str) -> int:
    """``cell_len(text)``, without measuring character by character when :func:`narrow` says each is one cell."""
    return len(text) if narrow(text) else cell_len(text)

KEY_NAMES = {
    "question_mark": "?", "plus": "+", "equals_sign": "=", "minus": "-", "space": "space", "enter": "enter",
    "escape": "esc", "left": "←", "right": "→", "up": "↑", "down": "↓", "home": "home", "end": "end",
    "comma": ",", "full_stop": ".", "slash": "/",
}


def key_name(key: str) -> str:
    """A Textual key name as the user types it: ``question_mark`` → ``?``, ``shift+right`` → ``shift+→``."""
    parts = key.split("+")
    return "+".join(KEY_NAMES.get(p, p) for p in parts)


def key_names(keys: str) -> str:
    """A Binding's comma-separated keys as the user types them: ``plus,equals_sign`` → ``+ =``."""
    return " ".join(key_name(k.strip()) for k in keys.split(",") if k.strip())


def fit_words(text: Text, width: int) -> Text:
    """``text`` cut to ``width`` cells at a space, with ``…`` where words were dropped.

    Whole words go, so a number is either shown whole or not at all (``57.4 of 63.0 GB/s`` never
    becomes ``57.4 of 63.``). A single word wider than ``width`` is replaced by ``…``."""
    if width <= 0:
        return Text("")
    plain = text.plain
    if cells(plain) <= width:
        return text
    cut = width - 1  # room for the ellipsis
    if not narrow(plain):  # one cell a character: the first width - 1 characters are width - 1 cells
        while cut > 0 and cell_len(plain[:cut]) > width - 1:
            cut -= 1
    # end on a word boundary: the next character (if any) must be a space
    if cut < len(plain) and plain[cut] != " ":
        sp = plain.rfind(" ", 0, cut)
        cut = sp if sp > 0 else 0
    out = text_head(text, cut)
    out.rstrip()
    out.append(ELLIPSIS, style="bright_black")
    return out


def text_head(text: Text, end: int) -> Text:
    """``text[:end]`` (0 ≤ ``end``): the same text, style and spans (each cut at ``end``, the empty ones dropped),
    made directly rather than through Rich's ``Text.divide`` (which makes three lines to keep one: a changed
    finding is fitted every second, tests/widgets/test_lines.py compares the two)."""
    out = Text(text.plain[:end], style=text.style, justify=text.justify, overflow=text.overflow)
    out.spans = [Span(max(0, start), min(stop, end), style) for start, stop, style in text.spans
                 if min(stop, end) > max(0, start)]
    return out


def middle_cut(text: str, width: int) -> str:
    """``text`` in at most ``width`` cells, cut in the middle with ``…`` when longer: a file name's start and
    its end (the extension) say most. Characters are kept whole (a wide one that does not fit goes)."""
    if cell_len(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:max(0, width)]
    room = width - 1
    head_room = (room + 1) // 2
    head = ""
    for ch in text:
        if cell_len(head + ch) > head_room:
            break
        head += ch
    tail = ""
    for ch in reversed(text[len(head):]):
        if cell_len(head) + cell_len(ch + tail) > room:
            break
        tail = ch + tail
    return head + ELLIPSIS + tail


SHORT_MIN = 8  # a short form cut in the middle to fewer cells than this says nothing: left out


def fit_segments(segments: list[tuple[Text, int]] | list[tuple[Text, int, str | None]], width: int,
                 sep: str = "  ") -> Text:
    """Join ``(text, priority)`` segments with ``sep``, dropping the lowest priority (then the
    rightmost of equal priority) until they fit in ``width`` cells. Priority 0 is never dropped. A dropped
    segment that fits in the room left once the line fits is put back (best priority first): a long one
    (a file name) dropped must not take a short one of its priority (the host) with it. A segment may carry
    a short form (``(text, priority, short)``: a file name without its note): when the whole does not fit back,
    the short form does, cut in the middle (:func:`middle_cut`) to the room left, if that leaves
    :data:`SHORT_MIN` cells or more."""
    texts = [seg[0] for seg in segments]
    prios = [seg[1] for seg in segments]
    shorts = [seg[2] if len(seg) > 2 else None for seg in segments]
    keep = list(range(len(segments)))

    def total(ix: list[int]) -> int:
        return sum(cell_len(texts[i].plain) for i in ix) + cell_len(sep) * max(0, len(ix) - 1)

    dropped: list[int] = []
    while total(keep) > width:
        droppable = [i for i in keep if prios[i] > 0]
        if not droppable:
            break
        worst = max(droppable, key=lambda i: (prios[i], i))
        keep.remove(worst)
        dropped.append(worst)
    # best priority first; within a priority the whole segments before any short form (the host before a cut name)
    attempts = sorted([(prios[i], 0, i) for i in dropped] + [(prios[i], 1, i) for i in dropped if shorts[i]])
    for _prio, short_form, i in attempts:
        if i in keep:
            continue
        if not short_form:
            if total(sorted([*keep, i])) <= width:
                keep = sorted([*keep, i])
            continue
        short = shorts[i]
        assert short  # only segments with a short form have a second attempt
        room = width - total(keep) - (cell_len(sep) if keep else 0)
        cut = middle_cut(short, room)
        if cut and cell_len(cut) >= min(SHORT_MIN, cell_len(short)):
            texts[i] = Text(cut, style=texts[i].style)
            keep = sorted([*keep, i])
    out = Text()
    for k, i in enumerate(keep):
        if k:
            out.append(sep)
        out.append_text(texts[i])
    return out


def short_affinity(aff: str | None, width: int) -> str:
    """A CPU affinity list in at most ``width`` cells, whole ranges only: ``0-55,112-167`` →
    ``0-55,+1`` when it does not fit; ``–`` when unknown."""
    if not aff:
        return NONE
    if cell_len(aff) <= width:
        return aff
    parts = aff.split(",")
    for k in range(len(parts) - 1, 0, -1):
        s = ",".join(parts[:k]) + f",+{len(parts) - k}"
        if cell_len(s) <= width:
            return s
    s = f"{parts[0]}+" if len(parts) > 1 else parts[0]
    return s if cell_len(s) <= width else ELLIPSIS
