"""Every use of Textual's private internals in gpuscope, in one module: version-pinned, with a switch.

Textual's public API leaves a few costs that gpuscope's screen pays every refresh, so this module reaches
inside it (docs/performance.md says what each one saves, measured, and what Textual could do instead):

* **Partial writes** (:func:`install`): Textual turns a partial screen update into terminal bytes with
  ``ChopsUpdate.render_segments``, which crops each changed span of a line at its right end but writes it
  from the widget's left edge (its "TODO: crop to x extents"): a power reading going from 74 to 75 W
  resent the whole line up to the new digit. :func:`render_segments` skips the whole segments (runs of one
  style) left of the span, so no character is ever split and the terminal shows the same cells
  (tests/widgets/test_partial_writes.py checks that on an emulated screen). ``Compositor._get_renders`` and
  ``render_partial_update`` are replaced too (:func:`get_renders`), so a partial update renders only the
  rows it uses.
* **One write per frame** (:class:`HookedApp`'s ``_display``, :func:`write_update`): Textual writes the
  synchronized-output start, the update and the end as three writes.
* **A quiet input thread** (:func:`driver_for`, :class:`QuietLinuxDriver`): Textual's ``LinuxDriver``
  wakes ten times a second to poll; ours sleeps until there is input. It also takes bracketed pastes whole
  before Textual's parser (widgets/paste.py): an ESC inside a paste is text (shown ``␛``), not a key press.
* **Content rows put together once** (:func:`styled_row`, used by ``widgets/lines.py``): the border and
  padding around a content row, from the widget's style cache.
* **The App's crash** (:class:`HookedApp`'s ``_handle_exception`` / ``_fatal_error``): an exception in a
  handler is kept for ``main`` (one line on the terminal, the traceback in the log) instead of Textual
  printing a traceback with local variables.
* **A wake-up without a message** (:func:`call_from_thread_soon`): a feeder thread's "new data" runs the App's
  redraw as a callback on its event loop, not as a Textual message (posted, queued, dispatched: 2–3× the event
  loop's CPU a wake-up, benchmarks/bench_wake.py with wake-ups 20–200 ms apart), with an exception handled as a
  handler's would be.
* **A repaint without messages** (:func:`repaint`, :func:`painting`): the lines a redraw changes are marked on
  their screen and composited when it ends, not through the widgets' and the screen's message pumps and the
  screen's update timer (5.5 → 1.0 loop iterations a refresh; benchmarks/bench_repaint.py).
* **Memory across fleet visits** (:func:`release_style_caches`): Textual's ``StylesCache.get_inner_outer``
  ``lru_cache`` keeps closed apps' widgets alive.

All of it applies only on the Textual it was written for (:data:`WRITTEN_FOR`, the version pyproject.toml
pins) and only while ``GPUSCOPE_TEXTUAL_PATCHES`` is not ``0``: :data:`ACTIVE`. Otherwise nothing here
touches Textual's internals (no ``textual._*`` module is even imported on another version) and every
caller takes Textual's public path: slower, same screen. Nowhere else in the package may use a private
Textual name (tests/test_layout.py; :data:`OWNED` lists the ones used here).
"""

from __future__ import annotations

import asyncio
import contextvars
import os
import selectors
import sys
import time
from bisect import bisect_left
from codecs import getincrementaldecoder
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from threading import Event, Lock
from typing import TYPE_CHECKING, Any, TypeVar

from rich.cells import cell_len
from rich.color import ColorSystem
from rich.console import Console
from textual import events
from textual.app import App
from textual.constants import ESCAPE_DELAY
from textual.driver import Driver
from textual.drivers.linux_driver import LinuxDriver
from textual.geometry import Region, Size
from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget

from gpuscope.core.text import visible
from gpuscope.widgets.fit import is_narrow
from gpuscope.widgets.paste import LONE_ESC_WAIT_S, Pasted, PasteSplitter

WRITTEN_FOR = "8.2.8"  # the Textual these were written against and checked on: pyproject.toml's pin
SWITCH = "GPUSCOPE_TEXTUAL_PATCHES"  # "0" (or off/false/no): Textual's public paths only


def textual_version() -> str:
    """The installed Textual's version ("" when its metadata cannot be read).

    Read from the ``Version:`` line of its ``textual-*.dist-info/METADATA`` beside the package: what
    ``importlib.metadata.version`` answers, without loading ``importlib.metadata`` (with ``email``,
    ``csv``, ``zipfile``: 1.4 MB of the live screen's RSS, docs/performance.md *Memory at one GPU*); that
    is asked only where no such file is found (another kind of install)."""
    import textual

    site = os.path.dirname(os.path.dirname(os.path.abspath(textual.__file__)))
    try:
        names = [n for n in os.listdir(site) if n.startswith("textual-") and n.endswith(".dist-info")]
    except OSError:  # pragma: no cover - the package's own folder
        names = []
    if len(names) == 1:
        try:
            with open(os.path.join(site, names[0], "METADATA"), encoding="utf-8") as f:
                for line in f:
                    if line.startswith("Version:"):
                        return line.split(":", 1)[1].strip()
                    if not line.strip():  # the end of the headers
                        break
        except OSError:  # pragma: no cover
            pass
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("textual")
    except PackageNotFoundError:  # pragma: no cover - Textual is a dependency
        return ""


def applies(textual: str, environ: Mapping[str, str]) -> bool:
    """Whether the private paths apply: on exactly :data:`WRITTEN_FOR`, and not switched off in ``environ``."""
    return textual == WRITTEN_FOR and environ.get(SWITCH, "1").strip().lower() not in ("0", "off", "false", "no")


_VERSION = textual_version()  # read once: it lists site-packages and reads a METADATA file
MATCHES = _VERSION == WRITTEN_FOR  # the code below is valid for this Textual (switched on or not)
ACTIVE = applies(_VERSION, os.environ)  # ... and in use: decided once, at import

# Every private Textual name used below (a module's, or a Textual class's attribute or method): no other
# module of the package may use them (tests/test_layout.py).
OWNED = (
    "textual._ansi_sequences", "textual._compositor", "textual._styles_cache", "textual._parser",
    "textual._xterm_parser", "textual._time",
    "_display", "_handle_exception", "_fatal_error", "_close_messages_no_wait", "_driver", "_running", "_closed",
    "_closing", "_compositor", "_layout_cache", "_set_dirty", "_dirty_widgets", "_update_timer",
    "_on_timer_update", "_layout_required", "_scroll_required", "_recompose_required", "_refresh_styles_required",
    "_exit", "_message_queue", "_repaint_required",
    "_batch_count", "_sync_available", "_previous_cursor_position", "_get_renders", "_render_chops",
    "_regions_to_spans", "_dirty_regions", "_segments", "_styles_cache", "_debug", "_timeout_time",
)

if MATCHES or TYPE_CHECKING:  # as they are in WRITTEN_FOR; never imported on another Textual
    from textual._ansi_sequences import SYNC_END, SYNC_START
    from textual._compositor import ChopsUpdate, Compositor, CompositorUpdate
    from textual._styles_cache import StylesCache

    TEXTUAL_RENDER_SEGMENTS = ChopsUpdate.render_segments  # Textual's own, kept for the tests' comparison
    TEXTUAL_GET_RENDERS = Compositor._get_renders
    TEXTUAL_RENDER_PARTIAL_UPDATE = Compositor.render_partial_update

WINDOWS = sys.platform == "win32"  # Textual writes in chunks there: its own _display is kept
SKIP_HIDDEN = True  # get_renders leaves out the rows hidden by the widgets in front (False: the tests' reference)
R = TypeVar("R")


# ---------------------------------------------------------------------------------------- partial writes
def move_to(x: int, y: int) -> str:
    """The cursor-position sequence to column ``x``, row ``y`` (0-based): what Rich's ``Control.move_to(x, y)``
    writes, without building a Control and its segments for every span of every frame (profiled: a sixth
    of the live screen's main-thread time under load)."""
    return f"\x1b[{y + 1};{x + 1}H"


def render_segments(self: Any, console: Console) -> str:
    """``ChopsUpdate.render_segments`` that writes each span from the segment where it starts."""
    sequences: list[str] = []
    append = sequences.append
    chops = self.chops
    chop_ends = self.chop_ends
    last_y = self.spans[-1][0]
    for y, x1, x2 in self.spans:
        line = chops[y]
        ends = chop_ends[y]
        for end, (x, strip) in zip(ends, line.items()):
            if strip is None or x >= x2 or end <= x1:
                continue
            if x2 > x >= x1 and end <= x2:
                append(move_to(x, y))
                append(strip.render(console))
                continue
            start, text = span_text(strip, x, x1, min(end, x2) - x, console)
            append(move_to(start, y))
            append(text)
        if y != last_y:
            append("\n")
    return "".join(sequences)


def span_text(strip: Strip, x: int, x1: int, right: int, console: Console) -> tuple[int, str]:
    """The column and terminal text of ``strip`` (drawn from column ``x``) cut at cell ``right`` of the
    strip, from the segment that reaches column ``x1`` (whole segments left of it are skipped, never half
    a character): what ``strip.crop(0, right)``, those segments dropped and the rest rendered give,
    character for character (tests/widgets/test_partial_writes.py), without building two Strips for it (each makes
    seven caches, and a partial update did it for every changed span of every frame). One pass over the segments,
    each measured once."""
    crop = right < strip.cell_length  # else crop(0, right) is the strip itself
    if crop and right <= 0:
        return x, ""
    color_system = console._color_system or ColorSystem.TRUECOLOR
    render = Strip.render_style
    widths = _WIDTHS
    if len(widths) > 4096:
        widths.clear()
    out: list[str] = []
    started = not crop  # crop(0, right) drops the empty segments before the first cell
    skipping = x < x1
    pos = 0  # cells of the strip passed
    for segment in strip._segments:
        text, style = segment.text, segment.style
        got = widths.get(text)
        if got is None:
            one = is_narrow(text)
            got = widths[text] = (len(text) if one else cell_len(text), one)
        n = got[0]
        if not started:
            if not n:
                continue
            started = True
        last = crop and pos + n >= right
        if last and pos + n > right:  # the segment the cut falls in: its cells up to it (a wide character padded)
            text = text[:right - pos] if got[1] else segment.split_cells(right - pos)[0].text
            n = right - pos
        pos += n
        if skipping and x + n <= x1:
            x += n
        else:
            skipping = False
            out.append(text if style is None else render(style, text, color_system=color_system))
        if last:
            break
    return x, "".join(out)


_WIDTHS: dict[str, tuple[int, bool]] = {}  # span_text's segment texts: cells, one a character (cleared past 4,096)


def render_partial_update(self: Any) -> ChopsUpdate | None:
    """``Compositor.render_partial_update`` that tells :func:`get_renders` which rows changed: the same
    update, the same chops."""
    update_regions = self._dirty_regions.copy()
    self._dirty_regions.clear()
    if not update_regions:
        return None
    crop = Region.from_union(update_regions).intersection(self.size.region)
    spans = list(self._regions_to_spans(update_regions))
    rows = {y for y, _, _ in spans}
    self._gs_rows = sorted(rows)
    try:
        chops = self._render_chops(crop, rows.__contains__)
    finally:
        self._gs_rows = None
    return ChopsUpdate(chops, spans, [cut_set[1:] for cut_set in self.cuts])


def uncovered(rows: list[int], x: int, x1: int, above: list[tuple[int, int, int, int]]) -> list[int]:
    """The rows of ``rows`` where the cells ``[x, x1)`` are not all covered by ``above``: the visible
    rectangles ``(x0, y0, x1, y1)`` of the widgets drawn over this one (their intervals on a row joined,
    so two panels side by side cover the container behind both)."""
    if not rows:
        return []
    lo, hi = rows[0], rows[-1]
    near = sorted((a, y0, b, y1) for a, y0, b, y1 in above if b > x and a < x1 and y0 <= hi and y1 > lo)
    out = []
    for y in rows:
        spans = [(a, b) for a, y0, b, y1 in near if y0 <= y < y1]  # sorted by their left edge
        reach = x
        for a, b in spans:
            if a > reach:
                break
            reach = max(reach, b)
        if reach < x1:
            out.append(y)
    return out


def get_renders(self: Any, crop: Region | None = None) -> Any:
    """``Compositor._get_renders`` that, for a partial update, renders each widget from its first to its last
    changed row only, and not at all in the rows where the widgets above it hide it. Textual renders every
    row of every widget that overlaps the changed area (the bounding box of every change: from the status
    line at the top to a graph at the bottom is most of the screen) and then uses the changed rows: the
    screen's, the containers' and the panels' other rows went through the style cache and the line filters
    for nothing (profiled: 94 rows a refresh for 12 changed ones); and the containers behind a panel
    (its grid, the scroll view, the screen) were rendered for every changed row of it, three times the
    panel's rows, to be thrown away: the compositor paints front to back and keeps, for each cut of a row,
    the first strip given, so a row hidden by the widgets in front gives nothing
    (tests/widgets/test_partial_writes.py: the same chops with and without this). That holds while every widget
    draws rows as wide as itself, as Textual's style cache and LineWidget do: a shorter strip would leave cuts
    for the widget behind to fill. One call per widget: each
    call has a fixed cost (its colours, filters, title)."""
    if crop is None:
        yield from TEXTUAL_GET_RENDERS(self, None)
        return
    rows = getattr(self, "_gs_rows", None)
    top, bottom = crop.y, crop.bottom
    crop_overlaps = crop.overlaps
    above: list[tuple[int, int, int, int]] = []  # the visible rectangles of the widgets rendered so far
    for widget, (region, clip) in self.visible_widgets.items():  # front to back
        if not crop_overlaps(clip):
            continue
        x, y, width, height = region.intersection(clip)
        y0, y1 = max(y, top), min(y + height, bottom)
        if not width or y1 <= y0:
            continue
        if rows is not None:  # from the first to the last changed row of this widget that shows
            lo, hi = bisect_left(rows, y0), bisect_left(rows, y1)
            mine = uncovered(rows[lo:hi], x, x + width, above) if SKIP_HIDDEN and above else rows[lo:hi]
            above.append((x, y, x + width, y + height))
            if not mine:
                continue
            y0, y1 = mine[0], mine[-1] + 1
        shown = Region(x, y0, width, y1 - y0)  # the clip the chops are cut with: these rows only
        part = Region(x - region.x, y0 - region.y, width, y1 - y0)
        only = getattr(widget, "render_rows", None) if rows is not None else None
        if only is not None:  # a LineWidget: the rows between its changed ones are not drawn (never used)
            yield region, shown, only(part, [y - region.y for y in mine])
        else:
            yield region, shown, widget.render_lines(part)


def install() -> bool:
    """Use :func:`render_segments`, :func:`get_renders` and :func:`render_partial_update` for Textual's
    partial updates (process-wide, once; only when :data:`ACTIVE`, else Textual's own are kept). Returns
    True when they are in place."""
    if not ACTIVE:
        return False
    ChopsUpdate.render_segments = render_segments  # type: ignore[method-assign]
    Compositor._get_renders = get_renders  # type: ignore[method-assign]
    Compositor.render_partial_update = render_partial_update  # type: ignore[method-assign]
    return True


# --------------------------------------------------------------------------------------- one write a frame
def write_update(app: Any, renderable: object) -> bool:
    """Write a screen update to the terminal as ONE write: Textual's ``App._display`` writes the
    synchronized-output start, the update and the end as three writes (three wake-ups of its writer
    thread, up to three flushes: three packets over SSH for one frame). Handles the common case (a
    compositor update on a full-screen terminal) and returns True; anything else (False) is left to
    Textual's own ``_display``."""
    driver = getattr(app, "_driver", None)
    if (not isinstance(renderable, CompositorUpdate) or driver is None or driver.is_inline or app.is_headless
            or not app._running or app._closed or app._batch_count or WINDOWS):
        return False
    try:
        cursor = app.screen.outer_size.clamp_offset(app.cursor_position)
        sequence = renderable.render_segments(app.console) + move_to(cursor.x, cursor.y)
        app._previous_cursor_position = cursor
    except Exception as error:  # as Textual's: the app's error handling decides
        app._handle_exception(error)
        return True
    if app._sync_available:
        sequence = SYNC_START + sequence + SYNC_END
    driver.write(sequence)
    driver.flush()
    return True


class HookedApp(App[R]):
    """An App with gpuscope's hooks into Textual (each only when :data:`ACTIVE`; else Textual's own):

    * a screen update goes to the terminal as one write (:func:`write_update`), and partial updates write
      only the changed cells (:func:`install`, on construction);
    * the terminal driver's input thread sleeps until there is input (:func:`driver_for`);
    * with ``KEEP_CRASH``, an exception a handler let escape is kept in :attr:`crash` (for the caller to
      raise again once the app has closed) and Textual prints no traceback. Without the hooks Textual
      prints its own traceback and :attr:`return_code` is 1, and :attr:`crash` stays ``None``.
    """

    KEEP_CRASH = False

    def __init__(self, *args: Any, **kw: Any):
        super().__init__(*args, **kw)
        self.crash: Exception | None = None
        install()  # only the changed cells of a line go to the terminal

    def get_driver_class(self) -> type[Driver]:
        """Textual's driver, with an input thread that sleeps until there is input (:class:`QuietLinuxDriver`)."""
        return driver_for(super().get_driver_class())

    if ACTIVE:  # never defined on another Textual: its private methods may have other signatures there
        def _display(self, screen: Any, renderable: Any) -> None:
            """A screen update goes to the terminal as one write (:func:`write_update`)."""
            if write_update(self, renderable):
                self.post_display_hook()
                return
            super()._display(screen, renderable)

        def _handle_exception(self, error: Exception) -> None:
            """Textual's hook for an exception a handler let escape: the app exits as before; with
            ``KEEP_CRASH`` the error is kept in :attr:`crash` (``main`` logs its traceback, shows one line)."""
            if self.KEEP_CRASH and self.crash is None:
                self.crash = error
            super()._handle_exception(error)

        def _fatal_error(self) -> None:
            """Textual's exit after that exception, without queuing its Rich traceback for the terminal
            (with ``KEEP_CRASH``)."""
            if not self.KEEP_CRASH:
                super()._fatal_error()
                return
            self._close_messages_no_wait()  # Textual's version also queues a Rich traceback for the terminal


# ------------------------------------------------------------------------------------- a widget's rows
def styled_row(widget: Widget, y: int, size: Size, content: Size, base_background: Any, background: Any,
               content_row: Strip) -> Strip | None:
    """Row ``y`` of ``widget`` (``size`` cells, its content area ``content``) as Textual's style cache draws
    it, with ``content_row`` as the content: the border and padding around a content row. For
    ``widgets/lines.py``, which takes the segments around the content once and puts every changed row
    together itself. ``None`` when not :data:`ACTIVE`: draw with Textual's own ``render_lines``."""
    if not ACTIVE:
        return None
    styles = widget.styles
    app = widget.app
    return widget._styles_cache.render_line(
        styles, y, size, content, styles.padding, base_background, background,
        lambda _y: content_row, None, None, 1.0, app.ansi_theme, app.native_ansi_color)


# ------------------------------------------------------------------------------ a wake-up without a message
def call_from_thread_soon(app: App[Any], loop: asyncio.AbstractEventLoop | None, context: contextvars.Context | None,
                          callback: Callable[[], object]) -> bool:
    """Run ``callback`` soon on ``app``'s event loop ``loop``, in ``context`` (the App's, copied on mount: its
    handlers' context, which Textual's timers read), from any thread; an exception it lets escape goes to the App
    as a handler's does (the app exits, :class:`HookedApp` keeps the crash); once the App is closing it is not
    called (as ``post_message`` drops a message then). What ``App.post_message`` of a message whose handler calls
    ``callback`` does, without the message (the CPU of both threads a wake-up: benchmarks/bench_wake.py).
    False when not :data:`ACTIVE`, without a loop or a context, or when the loop is closed: post the message."""
    if not ACTIVE or loop is None or context is None or loop.is_closed():
        return False

    def run() -> None:
        if app._closing or app._closed:
            return
        try:
            callback()
        except Exception as error:  # noqa: BLE001 - as Textual's handlers: the App decides
            app._handle_exception(error)

    try:
        loop.call_soon_threadsafe(run, context=context)
    except RuntimeError:  # closed in between
        return False
    return True


# ------------------------------------------------------------------------------ a repaint without messages
class _Redraw:
    """One :func:`painting`'s repaints, held until it ends (``open`` until then)."""

    __slots__ = ("open", "repaints")

    def __init__(self) -> None:
        self.open = True
        self.repaints: list[tuple[Widget, list[Region]]] = []


# The redraw whose repaints are held (None outside one). A context variable: a redraw runs on its app's loop, in
# its own context. A task started inside it inherits it, closed by then: its repaints are not held.
_HELD: contextvars.ContextVar[_Redraw | None] = contextvars.ContextVar("gpuscope_painting", default=None)
_PENDING = ("_layout_required", "_scroll_required", "_recompose_required", "_refresh_styles_required")


def repaint(widget: Widget, regions: list[Region]) -> None:
    """``widget.refresh(*regions)``: a repaint of those content regions, not a layout. Inside :func:`painting` it
    is held, and done without Textual's message round trip when the redraw ends; elsewhere it is Textual's
    ``refresh``."""
    held = _HELD.get()
    if held is not None and held.open and ACTIVE:
        held.repaints.append((widget, regions))
    else:
        widget.refresh(*regions)


@contextmanager
def painting() -> Iterator[None]:
    """Run a redraw whose :func:`repaint` calls are composited once, at its end, at once.

    Textual's ``refresh`` marks the widget and prompts its message pump; on that idle the widget posts ``Update``
    to its screen, whose pump takes it and on its own idle resumes its update timer, whose task wakes to composite,
    then sleeps until its next frame and wakes again: five loop iterations for one changed line where one does
    (benchmarks/bench_repaint.py). At the end of the redraw each held widget is marked as ``refresh`` marks it
    (its measures of its content dropped, its regions dirty) and put in its screen's dirty widgets, as
    ``Screen._on_update`` would, and the screen composited (``Screen._on_timer_update``, what its timer runs).

    Textual's own ``refresh`` for every held repaint instead where that would not be what Textual does: not
    :data:`ACTIVE`; the redraw raised; anything on the screen waiting for a layout (a widget's or the screen's
    layout, scroll, recompose or styles, or a message in the screen's queue: a ``Layout`` posted and not yet
    taken): Textual lays out first and composites after, and so it does here; the widget not mounted, hidden or
    closing; its screen not the one on top (Textual composites a screen under a modal its own way) or not laid
    out yet; a batch update open; the app exiting. Nested, the outermost one paints. Only for a body that does
    not await (the event loop's thread, one context)."""
    outer = _HELD.get()
    if outer is not None and outer.open:
        yield
        return
    held = _Redraw()
    token = _HELD.set(held)
    done = False
    try:
        yield
        done = True
    finally:
        held.open = False
        _HELD.reset(token)
        if held.repaints:
            _paint(held.repaints, done)


def _paint(repaints: list[tuple[Widget, list[Region]]], now: bool) -> None:
    """Composite ``repaints`` at once (:func:`painting`) when ``now`` and nothing waits on their screen, with the
    repaints Textual's ``refresh`` asked for in the same redraw (a Static's ``update``: one frame, one write, as
    Textual would make); the others through Textual's ``refresh``."""
    screen: Any = _top_screen(repaints[0][0]) if now else None
    asked = _quiet(screen) if screen is not None else None
    fast: list[tuple[Widget, list[Region]]] = []
    rest: list[tuple[Widget, list[Region]]] = []
    for widget, regions in repaints:
        ours = asked is not None and _top_screen(widget) is screen and not widget._closing and widget.display
        (fast if ours else rest).append((widget, regions))
    try:
        if fast and asked is not None:
            for widget, regions in fast:
                widget._layout_cache.clear()  # as refresh does: what the widget renders and measures is its content's
                widget.clear_cached_dimensions()
                widget._set_dirty(*regions)
                screen._dirty_widgets.add(widget)
            for widget in asked:  # what the widget's idle would do (Widget._check_refresh), now
                widget._repaint_required = False
                if widget.display:
                    screen._dirty_widgets.add(widget)
            screen._on_timer_update()
    finally:
        for widget, regions in rest:
            widget.refresh(*regions)


def _top_screen(node: Any) -> Any:
    """``node``'s screen when it is the one on top (None when not, or when there is none: the app closing)."""
    try:
        screen = node if node is node.app.screen else node.screen
        return screen if screen is node.app.screen else None
    except Exception:  # noqa: BLE001 - NoScreen, ScreenStackError: Textual's path decides
        return None


def _quiet(screen: Any) -> list[Widget] | None:
    """None unless ``screen`` may be composited now as its update timer would, with nothing waiting on it: laid
    out, not closing, no batch update, the app not exiting, no message in its queue (a ``Layout`` posted by a
    widget), and no layout, scroll, recompose or styles pending on it or a widget of it (flags Textual sets at once
    and acts on later, through the widget's idle and the screen's ``Layout`` message). Else its widgets whose
    repaint Textual's ``refresh`` asked for and their idle has not yet handed to the screen."""
    app = screen.app
    if (screen._closing or app._batch_count or app._exit or screen not in screen._compositor
            or not screen._message_queue.empty()):
        return None
    asked: list[Widget] = []
    for node in (screen, *screen.walk_children(with_self=False)):
        for name in _PENDING:
            if getattr(node, name, False):
                return None
        if node is not screen and node._repaint_required and not node._closing:
            asked.append(node)
    return asked


# ---------------------------------------------------------------------------- memory across fleet visits
def release_style_caches() -> None:
    """Empty Textual's ``StylesCache.get_inner_outer``: an ``lru_cache`` (1,024 entries) on a method, whose
    key holds a widget's StylesCache, and with it every line the widget last rendered, after the widget and
    its app are gone (measured: ~1 MB per fleet visit until the cap, 55 MB; docs/mqtt.md). Costs the next
    app a few recomputed colour pairs. Does nothing when not :data:`ACTIVE` (memory then grows to that cap)."""
    if not ACTIVE:
        return
    clear = getattr(getattr(StylesCache, "get_inner_outer", None), "cache_clear", None)
    if clear is not None:
        clear()


# ------------------------------------------------------------------------------------ the input thread
# Textual's LinuxDriver (8.2.8) reads keys on a thread that wakes every 0.1 s (select(0.1)) to see whether
# the app is closing and whether a lone Escape has waited long enough to be a key: ~20 % of the TUI's whole
# CPU on a 2-GPU screen (per-thread CPU in benchmarks/bench_tui_cost.py: the input thread used 1.7 ms a
# second, the screen's main thread 5). QuietLinuxDriver keeps everything else of LinuxDriver and replaces only
# that loop: it blocks until the terminal has input, or until the parser has a deadline (a lone Escape becomes
# a key after its timeout, as before), or until the driver is told to stop input (a self-pipe, written when
# exit_event is set). Suspend/resume (Ctrl+Z) and closing go through LinuxDriver's own disable_input, which
# sets exit_event and joins the thread: that set now also wakes it.
EOF_PAUSE_S = 0.1  # a closed terminal reads as endless end-of-file: look again this often, not in a spin


class WakingEvent(Event):
    """A ``threading.Event`` whose ``set`` also writes a byte to a pipe (when one is attached), so a
    thread blocked in ``select`` on that pipe wakes and sees it."""

    def __init__(self) -> None:
        super().__init__()
        self._wake_fd = -1
        self._fd_lock = Lock()  # set() never writes to a descriptor being closed (its number may be reused)

    def attach(self, wake_fd: int) -> None:
        with self._fd_lock:
            self._wake_fd = wake_fd

    def detach(self) -> None:
        """Stop writing to the pipe: call before closing it."""
        with self._fd_lock:
            self._wake_fd = -1

    def set(self) -> None:
        super().set()
        with self._fd_lock:
            if self._wake_fd >= 0:
                try:
                    os.write(self._wake_fd, b"x")
                except OSError:  # the pipe is full: the thread is already being woken
                    pass


def read_timeout(deadline: float | None, now: float) -> float | None:
    """How long the input thread may block: until the parser's ``deadline`` (``get_time()`` seconds, a
    pending lone Escape) when it has one, never less than 0; ``None`` (until input) when it has none."""
    if deadline is None:
        return None
    return max(0.0, deadline - now)


class TerminalInput:
    """Terminal text → Textual events, posted with ``post`` (the driver's ``process_message``): bracketed
    pastes whole (:class:`~gpuscope.widgets.paste.PasteSplitter`; one ``Paste`` event, control characters
    made visible), the rest through Textual's own ``XTermParser``. Not thread-safe: one reader feeds it."""

    def __init__(self, post: Callable[[Message], None], debug: bool = False):
        from textual._xterm_parser import XTermParser

        self._post = post
        self._parser = XTermParser(debug)
        self._pastes = PasteSplitter()
        self._held_until: float | None = None  # when a partial paste marker stops waiting for more input

    def _to_parser(self, data: str) -> None:
        for event in self._parser.feed(data):
            self._post(event)

    def feed(self, data: str) -> None:
        """Text read from the terminal."""
        from textual._time import get_time

        for piece in self._pastes.feed(data):
            if isinstance(piece, Pasted):
                self._post(events.Paste(visible(piece.text)))
            else:
                self._to_parser(piece)
        held = self._pastes.holding
        if not held:
            self._held_until = None
        elif self._held_until is None:
            self._held_until = get_time() + (LONE_ESC_WAIT_S if held == "\x1b" else ESCAPE_DELAY)

    def deadline(self) -> float | None:
        """When :meth:`tick` has something to do without more input (a lone Escape, a held ``ESC [``)."""
        d = [t for t in (self._parser._timeout_time, self._held_until) if t is not None]
        return min(d) if d else None

    def tick(self) -> None:
        """Time passed: what waited for more input that did not come is given to the parser, and its keys out."""
        from textual._time import get_time

        if self._held_until is not None and get_time() >= self._held_until:
            self._held_until = None
            self._to_parser(self._pastes.release())
        for event in self._parser.tick():
            self._post(event)

    def close(self) -> None:
        """End of input: the parser is finished (what it still waited for is dropped, as LinuxDriver does)."""
        from textual._parser import ParseError

        try:
            for _ in self._parser.feed(""):
                pass
        except (EOFError, ParseError):
            pass


class QuietLinuxDriver(LinuxDriver):
    """``LinuxDriver`` with an input thread that wakes only when it has something to do."""

    def __init__(self, *args: Any, **kw: Any):
        super().__init__(*args, **kw)
        self.exit_event: WakingEvent = WakingEvent()

    def run_input_thread(self) -> None:
        """Read the terminal and post its events, blocking while there is nothing to read. Each run
        (start, and again after a suspend) has its own wake-up pipe, closed when it ends."""
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        self.exit_event.attach(wake_w)
        try:
            self._read_input(wake_r)
        finally:
            self.exit_event.detach()
            os.close(wake_r)
            os.close(wake_w)

    def _read_input(self, wake: int) -> None:
        from textual._time import get_time

        fileno = self.fileno
        selector = selectors.DefaultSelector()
        selector.register(fileno, selectors.EVENT_READ, "tty")
        selector.register(wake, selectors.EVENT_READ, "wake")
        terminal = TerminalInput(self.process_message, self._debug)
        decode = getincrementaldecoder("utf-8")().decode
        feed, tick = terminal.feed, terminal.tick

        def read_tty(final: bool) -> bool:
            """Feed what the terminal has; False at end of file or a read error (a closed terminal)."""
            try:
                data = os.read(fileno, 4096)
            except OSError:
                return False
            if not data:
                return False
            feed(decode(data, final=final))
            return True

        try:
            while not self.exit_event.is_set():
                timeout = read_timeout(terminal.deadline(), get_time())
                ready = selector.select(timeout)
                for key, _mask in ready:
                    if key.data == "wake":
                        _drain(wake)
                    elif not read_tty(final=False) and not self.exit_event.is_set():
                        time.sleep(EOF_PAUSE_S)  # the hang-up watchdog closes the app
                tick()
            selector.unregister(fileno)  # what arrived while closing, as LinuxDriver does
            if _readable(fileno):
                read_tty(final=True)
            tick()
        finally:
            selector.close()
            terminal.close()


def _drain(fd: int) -> None:
    """Read a non-blocking pipe until it is empty."""
    try:
        while os.read(fd, 512):
            pass
    except BlockingIOError:
        pass


def _readable(fd: int) -> bool:
    """Whether ``fd`` has input now (a zero-timeout select)."""
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        return bool(sel.select(0))


def driver_for(default: type[Driver]) -> type[Driver]:
    """The driver an app should use: :class:`QuietLinuxDriver` where Textual would use ``LinuxDriver``
    itself and :data:`ACTIVE`, else Textual's choice (headless tests, Windows, a driver named in
    ``TEXTUAL_DRIVER``, another Textual, switched off)."""
    return QuietLinuxDriver if ACTIVE and default is LinuxDriver else default
