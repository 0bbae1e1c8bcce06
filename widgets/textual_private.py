"""Every use of Textual's private internals in gpuscope, in one module: patches for what Textual should fix itself,
each proposed upstream with a reproduction and its measured gain (docs/textual-upstream.md), carried until it lands:
partial writes cropped to their x extents (:func:`render_segments`), one write a frame and the crash kept for
``main`` (:class:`HookedApp`), an input thread that sleeps until there is input and takes bracketed pastes whole
(:class:`QuietLinuxDriver`, widgets/paste.py), closed apps' widgets released (:func:`release_style_caches`).
Only on :data:`WRITTEN_FOR` (the pin) while ``GPUSCOPE_TEXTUAL_PATCHES`` is not ``0`` (:data:`ACTIVE`): else no
``textual._*`` module is imported and every caller takes Textual's public path (tests/test_layout.py: :data:`OWNED`)."""

from __future__ import annotations

import os
import select
import selectors
import sys
import time
from codecs import getincrementaldecoder
from collections.abc import Callable, Iterable
from contextlib import suppress
from typing import TYPE_CHECKING, Any, TypeVar

from rich.console import Console
from textual import events
from textual.app import App
from textual.constants import ESCAPE_DELAY
from textual.driver import Driver
from textual.drivers.linux_driver import LinuxDriver
from textual.message import Message
from textual.strip import Strip

from gpuscope.core.text import visible
from gpuscope.widgets.paste import LONE_ESC_WAIT_S, Pasted, PasteSplitter
from gpuscope.widgets.textual_pin import WRITTEN_FOR, applies, textual_version  # noqa: F401 - re-exported
from gpuscope.widgets.wakeup import WakingEvent, drain, read_timeout

MATCHES = textual_version() == WRITTEN_FOR  # the code below is valid for this Textual (switched on or not)
ACTIVE = MATCHES and applies(WRITTEN_FOR, os.environ)  # ... and in use: decided once, at import
# Every private Textual name used below: no other module of the package may use them (tests/test_layout.py).
OWNED = (
    "textual._ansi_sequences", "textual._compositor", "textual._styles_cache", "textual._parser", "textual._time",
    "textual._xterm_parser", "_display", "_handle_exception", "_fatal_error", "_close_messages_no_wait", "_driver", "_running", "_closed",
    "_batch_count", "_sync_available", "_previous_cursor_position", "_debug", "_timeout_time",
)

if MATCHES or TYPE_CHECKING:  # as they are in WRITTEN_FOR; never imported on another Textual
    from textual._ansi_sequences import SYNC_END, SYNC_START
    from textual._compositor import ChopsUpdate, CompositorUpdate
    from textual._parser import ParseError
    from textual._styles_cache import StylesCache
    from textual._time import get_time
    from textual._xterm_parser import XTermParser
    TEXTUAL_RENDER_SEGMENTS = ChopsUpdate.render_segments  # Textual's own, kept for the tests' comparison

R = TypeVar("R")


def move_to(x: int, y: int) -> str:
    """What Rich's ``Control.move_to(x, y)`` writes (0-based), without a Control and its segments per span."""
    return f"\x1b[{y + 1};{x + 1}H"


def render_segments(self: Any, console: Console) -> str:
    """``ChopsUpdate.render_segments`` that writes each changed span from the first whole segment reaching it (never
    half a character), where Textual writes from the chop's left edge (its "TODO: crop to x extents")."""
    out: list[str] = []
    last_y = self.spans[-1][0]
    for y, x1, x2 in self.spans:
        for end, (x, strip) in zip(self.chop_ends[y], self.chops[y].items()):
            if strip is None or x >= x2 or end <= x1:
                continue
            if x < x1 or end > x2:
                segments, skip = list(strip.crop(0, min(end, x2) - x)), x < x1
                while skip and segments and x + segments[0].cell_length <= x1:
                    x += segments.pop(0).cell_length
                strip = Strip(segments)
            out += (move_to(x, y), strip.render(console))
        if y != last_y:
            out.append("\n")
    return "".join(out)


def install() -> bool:
    """Use :func:`render_segments` for Textual's partial updates (process-wide; only when :data:`ACTIVE`)."""
    if ACTIVE:
        ChopsUpdate.render_segments = render_segments  # type: ignore[method-assign]
    return ACTIVE


def write_update(app: Any, renderable: object) -> bool:
    """Write a compositor update on a full-screen terminal as ONE write (sync start, update, cursor, sync end);
    False for anything else, left to Textual's own ``_display``."""
    driver = getattr(app, "_driver", None)
    if (not isinstance(renderable, CompositorUpdate) or driver is None or driver.is_inline or app.is_headless
            or not app._running or app._closed or app._batch_count
            or sys.platform == "win32"):  # Textual writes in chunks there: its own _display
        return False
    try:
        cursor = app.screen.outer_size.clamp_offset(app.cursor_position)
        sequence = renderable.render_segments(app.console) + move_to(cursor.x, cursor.y)
        app._previous_cursor_position = cursor
    except Exception as error:  # as Textual's: the app's error handling decides
        app._handle_exception(error)
        return True
    driver.write(SYNC_START + sequence + SYNC_END if app._sync_available else sequence)
    driver.flush()
    return True


class HookedApp(App[R]):
    """An App with gpuscope's patches (only when :data:`ACTIVE`): one write a frame, cropped partial writes, the quiet
    driver, and with ``KEEP_CRASH`` an exception a handler let escape kept in :attr:`crash` (raised again once the
    app closed) with no traceback printed by Textual."""

    KEEP_CRASH = False

    def __init__(self, *args: Any, **kw: Any):
        super().__init__(*args, **kw)
        self.crash: Exception | None = None
        install()

    def get_driver_class(self) -> type[Driver]:
        return driver_for(super().get_driver_class())

    if ACTIVE:  # never defined on another Textual: its private methods may have other signatures there
        def _display(self, screen: Any, renderable: Any) -> None:
            if write_update(self, renderable):
                self.post_display_hook()
                return
            super()._display(screen, renderable)

        def _handle_exception(self, error: Exception) -> None:
            if self.KEEP_CRASH and self.crash is None:
                self.crash = error
            super()._handle_exception(error)

        def _fatal_error(self) -> None:
            if not self.KEEP_CRASH:
                super()._fatal_error()
                return
            self._close_messages_no_wait()  # Textual's version also queues a Rich traceback for the terminal


def release_style_caches() -> None:
    """Empty ``StylesCache.get_inner_outer``'s ``lru_cache``: its keys keep closed apps' widgets alive (fleet visits)."""
    if ACTIVE:
        StylesCache.get_inner_outer.cache_clear()


class TerminalInput:
    """Terminal text → Textual events, given to ``post``: bracketed pastes whole (one ``Paste`` event, control
    characters made visible), the rest through Textual's ``XTermParser``. One reader feeds it."""

    def __init__(self, post: Callable[[Message], None], debug: bool = False):
        self._post, self._parser, self._pastes = post, XTermParser(debug), PasteSplitter()
        self._held_until: float | None = None  # when a partial paste marker stops waiting for more input

    def feed(self, data: str) -> None:
        """Text read from the terminal."""
        for piece in self._pastes.feed(data):
            if isinstance(piece, Pasted):
                self._post(events.Paste(visible(piece.text)))
            else:
                self._post_all(self._parser.feed(piece))
        held = self._pastes.holding
        if not held:
            self._held_until = None
        elif self._held_until is None:
            self._held_until = get_time() + (LONE_ESC_WAIT_S if held == "\x1b" else ESCAPE_DELAY)

    def deadline(self) -> float | None:
        """When :meth:`tick` has something to do without more input (a lone Escape, a held ``ESC [``)."""
        return min((t for t in (self._parser._timeout_time, self._held_until) if t is not None), default=None)

    def tick(self) -> None:
        """Time passed: what waited for input that did not come goes to the parser, and its keys out."""
        if self._held_until is not None and get_time() >= self._held_until:
            self._held_until = None
            self._post_all(self._parser.feed(self._pastes.release()))
        self._post_all(self._parser.tick())

    def _post_all(self, got: Iterable[Message]) -> None:
        for event in got:
            self._post(event)

    def close(self) -> None:  # end of input: what the parser still waited for is dropped, as LinuxDriver does
        with suppress(EOFError, ParseError):
            list(self._parser.feed(""))


class QuietLinuxDriver(LinuxDriver):
    """``LinuxDriver`` whose input thread blocks until the terminal has input, the parser has a deadline (a lone
    Escape) or ``exit_event`` is set (it writes a pipe the thread waits on), not ``select(0.1)`` in a loop."""

    def __init__(self, *args: Any, **kw: Any):
        super().__init__(*args, **kw)
        self.exit_event: WakingEvent = WakingEvent()

    def run_input_thread(self) -> None:
        """Read the terminal and post its events; each run (start, and after a suspend) has its own wake-up pipe."""
        wake, wake_w = os.pipe()
        os.set_blocking(wake, False)
        os.set_blocking(wake_w, False)
        self.exit_event.attach(wake_w)
        selector = selectors.DefaultSelector()
        selector.register(self.fileno, selectors.EVENT_READ, "tty")
        selector.register(wake, selectors.EVENT_READ, "wake")
        terminal = TerminalInput(self.process_message, self._debug)
        decode = getincrementaldecoder("utf-8")().decode

        def read_tty(final: bool) -> bool:  # False at end of file or a read error (a closed terminal)
            try:
                data = os.read(self.fileno, 4096)
            except OSError:
                return False
            if data:
                terminal.feed(decode(data, final=final))
            return bool(data)

        try:
            while not self.exit_event.is_set():
                for key, _mask in selector.select(read_timeout(terminal.deadline(), get_time())):
                    if key.data == "wake":
                        drain(wake)
                    elif not read_tty(final=False) and not self.exit_event.is_set():
                        time.sleep(0.1)  # a closed terminal reads as endless EOF: the hang-up watchdog ends the app
                terminal.tick()
            if select.select([self.fileno], [], [], 0)[0]:  # what arrived while closing, as LinuxDriver does
                read_tty(final=True)
            terminal.tick()
        finally:
            selector.close()
            terminal.close()
            self.exit_event.detach()
            os.close(wake)
            os.close(wake_w)


def driver_for(default: type[Driver]) -> type[Driver]:
    """:class:`QuietLinuxDriver` where Textual would use ``LinuxDriver`` and :data:`ACTIVE`, else Textual's choice."""
    return QuietLinuxDriver if ACTIVE and default is LinuxDriver else default
