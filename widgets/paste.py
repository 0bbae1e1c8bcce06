"""Bracketed pastes cut out of terminal input before Textual's parser sees it.

Why: Textual 8.2.8's ``XTermParser`` reads an ESC inside a bracketed paste as the start of a key sequence:
the ESC and what follows it leave the paste and arrive as key presses (a pasted ``\\x1b`` fires the
``escape`` binding and cancels the marker prompt; ``\\x1b]0;x\\x07`` presses ctrl+g), and the pasted text is
cut at the ESC. :class:`PasteSplitter` takes the text between the terminal's paste markers
(``ESC [200~`` … ``ESC [201~``) whole, whatever it holds, and hands the rest to the parser;
:class:`~gpuscope.widgets.textual_private.QuietLinuxDriver` posts each paste as one ``Paste`` event with its
control characters made visible (:func:`gpuscope.core.text.visible`: ESC shows as ``␛``), so pasted bytes
are text in the prompt, never keys and never terminal commands. Pure (no Textual): tested with tables.
"""

from __future__ import annotations

from dataclasses import dataclass

PASTE_START, PASTE_END = "\x1b[200~", "\x1b[201~"
LONE_ESC_WAIT_S = 0.03  # how long a trailing ESC outside a paste waits for a paste marker's rest before it
# goes to the parser (then Textual's own escape delay makes it the Escape key)


@dataclass(frozen=True, slots=True)
class Pasted:
    """The text of one bracketed paste, as the terminal sent it (markers removed, nothing else)."""

    text: str


def partial_end(data: str, marker: str, shortest: int) -> int:
    """How many characters at the end of ``data`` are the start of ``marker`` (at least ``shortest``, else 0):
    what must wait for the next read to know whether the marker is there."""
    for k in range(min(len(marker) - 1, len(data)), shortest - 1, -1):
        if data.endswith(marker[:k]):
            return k
    return 0


class PasteSplitter:
    """Terminal input → pieces in order: ``str`` for Textual's parser, :class:`Pasted` for each paste.

    A marker split across reads is held until the next one. Outside a paste what is held (a trailing ESC,
    ``ESC [``, … ``ESC [200``) may be a key after all (Escape, Alt+[): :meth:`release` gives it up when no
    more input comes (the driver waits :data:`LONE_ESC_WAIT_S` after a lone ESC, so Escape stays prompt: the
    rest of a marker cut by a read boundary is already waiting; the escape delay after longer starts).
    Inside a paste everything waits for the end marker: an ESC there is text."""

    def __init__(self) -> None:
        self._paste: list[str] | None = None  # the paste's text so far; None outside a paste
        self._held = ""

    @property
    def holding(self) -> str:
        """What input outside a paste waits for the next read ("" when none; :meth:`release` gives it up)."""
        return self._held if self._paste is None else ""

    def release(self) -> str:
        """What is held outside a paste, for the parser (no more input came to complete a marker)."""
        if self._paste is not None:
            return ""
        out, self._held = self._held, ""
        return out

    def feed(self, data: str) -> list[str | Pasted]:
        out: list[str | Pasted] = []
        data, self._held = self._held + data, ""
        while data:
            if self._paste is None:
                i = data.find(PASTE_START)
                if i < 0:
                    k = partial_end(data, PASTE_START, 1)
                    if k:
                        data, self._held = data[:-k], data[-k:]
                    if data:
                        out.append(data)
                    break
                if i:
                    out.append(data[:i])
                data, self._paste = data[i + len(PASTE_START):], []
            else:
                j = data.find(PASTE_END)
                if j < 0:
                    k = partial_end(data, PASTE_END, 1)
                    self._paste.append(data[:len(data) - k])
                    self._held = data[len(data) - k:]
                    break
                out.append(Pasted("".join(self._paste) + data[:j]))
                data, self._paste = data[j + len(PASTE_END):], None
        return out
