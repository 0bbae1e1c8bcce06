"""Partial screen updates that cost what changed: only the changed cells are written, only the changed
rows are rendered.

Textual (8.2.8) turns a partial screen update into terminal bytes with ``ChopsUpdate.render_segments``:
for each changed span ``x1..x2`` of a line it crops the right end at ``x2`` but starts writing at the
left edge of the widget (its "TODO: crop to x extents"). So when a GPU panel's power moves from 74 to
75 W, the whole line up to the new digit is sent again, and a graph that gained one cell on its right
side resends the entire line. gpuscope's panels repaint only the cells that changed
(widgets/lines.py), so this left edge was most of what the TUI still wrote at idle.

:func:`install` replaces that one method with a version that also skips the whole segments (runs of
one style) lying left of ``x1``: it starts at the first segment that reaches into the span, so no
character is ever split (a double-width character stays whole) and what the terminal shows afterwards
is the same cell for cell (tests/test_partial_writes.py checks that on an emulated screen). It also
replaces ``Compositor._get_renders`` (:func:`get_renders`) so that a partial update renders only the rows
it will use.
"""

from __future__ import annotations

import sys
from bisect import bisect_left
from typing import Any

from rich.cells import cell_len
from rich.color import ColorSystem
from rich.console import Console
from rich.segment import Segment
from textual._ansi_sequences import SYNC_END, SYNC_START
from textual._compositor import ChopsUpdate, Compositor, CompositorUpdate
from textual.geometry import Region
from textual.strip import Strip

WINDOWS = sys.platform == "win32"  # Textual writes in chunks there: its own _display is kept
TEXTUAL_RENDER_SEGMENTS = ChopsUpdate.render_segments  # Textual's own, kept for the tests' comparison
TEXTUAL_GET_RENDERS = Compositor._get_renders
TEXTUAL_RENDER_PARTIAL_UPDATE = Compositor.render_partial_update


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
    character for character (tests/test_partial_writes.py), without building two Strips for it (each makes
    seven caches, and a partial update did it for every changed span of every frame)."""
    segments = strip._segments
    if right >= strip.cell_length:
        pass  # crop(0, right) is the strip itself
    elif right <= 0:
        segments = []
    else:  # Strip.crop(0, right), on the segments
        cut: list[Segment] = []
        it = iter(segments)
        segment: Segment | None = None
        for segment in it:  # the first segment with a cell (empty ones before it are dropped)
            if cell_len(segment.text) > 0:
                break
        else:
            segment = None
        pos = 0
        while segment is not None:
            end_pos = pos + cell_len(segment.text)
            if end_pos < right:
                cut.append(segment)
            else:
                cut.append(segment.split_cells(right - pos)[0])
                break
            pos = end_pos
            segment = next(it, None)
        segments = cut
    k = 0
    if x < x1:  # skip whole segments left of the span
        while k < len(segments) and x + cell_len(segments[k].text) <= x1:
            x += cell_len(segments[k].text)
            k += 1
    color_system = console._color_system or ColorSystem.TRUECOLOR
    render = Strip.render_style
    return x, "".join([text if style is None else render(style, text, color_system=color_system)
                       for text, style, _ in segments[k:]])


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


def row_runs(rows: list[int], y0: int, y1: int) -> list[tuple[int, int]]:
    """The runs ``[start, end)`` of consecutive rows of ``rows`` (sorted) that lie in ``[y0, y1)``."""
    lo, hi = bisect_left(rows, y0), bisect_left(rows, y1)
    runs: list[tuple[int, int]] = []
    for y in rows[lo:hi]:
        if runs and runs[-1][1] == y:
            runs[-1] = (runs[-1][0], y + 1)
        else:
            runs.append((y, y + 1))
    return runs


def get_renders(self: Any, crop: Region | None = None) -> Any:
    """``Compositor._get_renders`` that, for a partial update, renders each widget from its first to its last
    changed row only. Textual renders every row of every widget that overlaps the changed area (the
    bounding box of every change: from the status line at the top to a graph at the bottom is most of the
    screen) and then uses the changed rows: the screen's, the containers' and the panels' other rows went
    through the style cache and the line filters for nothing (profiled: 94 rows a refresh for 12 changed
    ones). One call per widget: each call has a fixed cost (its colours, filters, title)."""
    if crop is None:
        yield from TEXTUAL_GET_RENDERS(self, None)
        return
    rows = getattr(self, "_gs_rows", None)
    top, bottom = crop.y, crop.bottom
    crop_overlaps = crop.overlaps
    for widget, (region, clip) in self.visible_widgets.items():
        if not crop_overlaps(clip):
            continue
        x, y, width, height = region.intersection(clip)
        y0, y1 = max(y, top), min(y + height, bottom)
        if not width or y1 <= y0:
            continue
        if rows is not None:  # from the first to the last changed row of this widget
            runs = row_runs(rows, y0, y1)
            if not runs:
                continue
            y0, y1 = runs[0][0], runs[-1][1]
        shown = Region(x, y0, width, y1 - y0)  # the clip the chops are cut with: these rows only
        yield region, shown, widget.render_lines(Region(x - region.x, y0 - region.y, width, y1 - y0))


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


def install() -> bool:
    """Use :func:`render_segments` for Textual's partial updates (once; only on the Textual 8 it was
    written against, else Textual's own is kept). Returns True when it is in place."""
    import textual

    if not getattr(textual, "__version__", "").startswith("8."):
        return False
    ChopsUpdate.render_segments = render_segments  # type: ignore[method-assign]
    Compositor._get_renders = get_renders  # type: ignore[method-assign]
    Compositor.render_partial_update = render_partial_update  # type: ignore[method-assign]
    return True
