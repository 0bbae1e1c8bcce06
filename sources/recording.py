"""Recordings: gzip-compressed JSON lines, crash-safe, seekable (format: docs/recording-format.md).

Line 1 is a header (``"type": "header"``: format version, inventory, provenance); every later line
is a frame in the core codec (``{"t": …, "gpus": […], "events": […]}``); a clean close adds
``{"type": "end", …}``. The file is a series of gzip members of about 256 KB of text each
(``zcat FILE | jq`` reads it); inside a member the writer sync-flushes every second, so a file cut
at any byte still opens and loses at most the last second. The reader indexes members on open and
decompresses only the member it needs to seek.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuscope.core import recording_format as fmt  # MEMBER_BYTES read when used: tests shrink it
from gpuscope.core.codec import (
    CodecError,
    frame_from_dict,
    inventory_from_dict,
)
from gpuscope.core.errors import GpuscopeError
from gpuscope.core.model import Event, Frame, Inventory
from gpuscope.core.recording_format import FORMAT as FORMAT  # re-exported: the reader's names as before
from gpuscope.core.recording_format import FORMAT_VERSION as FORMAT_VERSION
from gpuscope.core.recording_format import RecordingError as RecordingError
from gpuscope.core.text import clean, count
from gpuscope.core.units import duration
from gpuscope.core.validate import Tally, ValidationError, in_range, loads
from gpuscope.sources.files import not_a_regular_file, read_error
from gpuscope.sources.recording_scan import Prefetch, events_at, threads_for

if TYPE_CHECKING:  # numpy only where a recording is read: `gpuscope record` and the live screen do not load it
    import numpy as np

log = logging.getLogger(__name__)

MAGIC = b"\x1f\x8b\x08"  # a gzip member (deflate) starts with these bytes: where the reader resynchronises
MAX_MEMBER_TEXT = 64 * 1024 * 1024  # a member inflating beyond this is refused (the writer's hold ~256 KB)
OVERSIZED_MEMBER = (f"one gzip member inflates beyond {MAX_MEMBER_TEXT >> 20} MiB (gpuscope writes ~256 KB members; "
                    "a recording recompressed in one piece reads uncompressed: zcat FILE > FILE.jsonl)")
MAX_LINE = 16 * 1024 * 1024


@dataclass
class _Member:
    offset: int  # byte offset of the gzip member in the file
    end: int  # one past its last byte
    first: int  # index of its first frame
    count: int
    keep: list[int] = field(default_factory=list)  # line numbers (in the member's text) of its frames


@dataclass
class _Decoded:
    start: int  # byte offset of the member
    end: int  # one past its last byte (for a damaged member: where the next readable member starts)
    text: bytes
    damaged: bool  # a decompression or checksum error: lines are each checked before they are kept
    cut: bool = False  # the file ends inside this member
    events: list[int] | None = None  # where the events key is in the text (an intact member's, from Prefetch)


@dataclass
class _PartMark:
    """Where a header line starts a recording inside the file (the walk's note; :class:`Part` is the result)."""

    frame: int  # index of its first frame
    event: int  # index of its first event in the file's event list
    header: dict[str, Any]
    inventory: Inventory
    header_line: bytes  # as stored (``split`` writes it out unchanged)
    complete: bool = False  # its end line was seen
    end_frames: int | None = None  # the writer's count, from the end line
    end_line: bytes = b""  # as stored
    expected: int | None = None  # end_frames, or estimated from its time span (set after the walk)
    seq: int = 0  # its place among the file's header lines
    byte: int = 0  # where the gzip member holding its header line starts (damage before it is the part before's)
    lines_at: int = 0  # damaged lines counted, and unreadable headers said, before it
    bad_at: int = 0


@dataclass(frozen=True)
class Part:
    """One machine's stretch of a file that joins several recordings (``cat a.jsonl.gz b.jsonl.gz``):
    frames ``start`` … ``stop - 1``, read against its own inventory. A recording that continues the one
    before on the same machine with the same GPUs (resumed) joins its part; one that does not starts a
    new part, and ``change`` says what differs from the part before ("" for the first). A recording that
    holds no frames (a ``record`` killed at once) is no part of its own: it is ``folded`` into the part
    before it (the first part when none is), which keeps its lines for ``split``."""

    number: int  # 1-based, as `--part N` names it
    start: int
    stop: int
    marks: tuple[_PartMark, ...]  # the recordings (header lines) it joins, in file order
    change: str
    note: str = ""  # for a part after the first: "a second recording starts at frame N (different machine: …)"
    folded: tuple[_PartMark, ...] = ()  # recordings with no frames, kept with this part (not read)
    overlaps: bool = False  # the same machine, but its time overlaps the part before's: ``change`` is the whole note

    @property
    def stored(self) -> tuple[_PartMark, ...]:
        """Every recording whose lines this part holds, in file order (its own and those folded in)."""
        return tuple(sorted(self.marks + self.folded, key=lambda m: m.seq))

    @property
    def header(self) -> dict[str, Any]:
        return self.marks[0].header

    @property
    def inventory(self) -> Inventory:
        return self.marks[0].inventory

    @property
    def n_frames(self) -> int:
        return self.stop - self.start

    @property
    def complete(self) -> bool:
        return all(m.complete for m in self.marks)

    @property
    def expected_frames(self) -> int | None:
        known = [m.expected for m in self.marks]
        return None if any(x is None for x in known) else sum(x for x in known if x is not None)


@dataclass
class Recording:
    """An opened recording: header, inventory, time index; frames are decoded on demand.

    Frames are kept in file order whatever their clock says (a clock stepping back is not damage);
    ``times`` is in file order too. ``damaged_at`` lists the byte offsets of damaged members;
    ``expected_frames`` is the writer's count (from the end line) or an estimate, None if unknown.
    """

    path: Path
    header: dict[str, Any]
    inventory: Inventory
    times: np.ndarray
    members: list[_Member]
    events: list[Event]
    complete: bool
    problems: list[str] = field(default_factory=list)
    damaged_at: list[int] = field(default_factory=list)
    expected_frames: int | None = None
    tally: Tally = field(default_factory=Tally)
    parts: list[Part] = field(default_factory=list)  # one per header line (one for a file of one recording)
    notes: list[str] = field(default_factory=list)  # what the reader says that is not damage (a joined file)
    _cache: dict[int, list[bytes]] = field(default_factory=dict, repr=False)
    _raw: bytes = field(default=b"", repr=False)
    _reach: np.ndarray | None = field(default=None, repr=False)
    _cut: bool = field(default=False, repr=False)  # what the walk found, for each part's own problems
    _damaged_lines: int = field(default=0, repr=False)
    _bad_headers: list[str] = field(default_factory=list, repr=False)

    @property
    def n_frames(self) -> int:
        return int(len(self.times))

    @property
    def duration_s(self) -> float:
        return float(self.times.max() - self.times.min()) if len(self.times) > 1 else 0.0

    @property
    def simulated(self) -> bool:
        return bool(self.header.get("simulated"))

    def _member_lines(self, m: int) -> list[bytes]:
        if m not in self._cache:
            if len(self._cache) > 8:
                self._cache.pop(next(iter(self._cache)))
            self._cache[m] = self.member_lines(m)
        return self._cache[m]

    def member_lines(self, m: int) -> list[bytes]:
        """The stored JSON lines of member ``m``'s frames (frames ``members[m].first`` on), decompressed
        now and not cached: for a reader that walks the whole file once (the replay's history index)
        without evicting what seeks keep in the cache. Not validated."""
        mem = self.members[m]
        if self._raw and mem.offset == 0 and not self._raw.startswith(MAGIC[:2]):
            text = self._raw
        else:
            dec = next(_members(self._raw_bytes(mem.offset, mem.end), []), None)
            text = dec.text if dec is not None else b""
        lines = text.split(b"\n")
        return [lines[k] if k < len(lines) else b"" for k in mem.keep]

    def _raw_bytes(self, a: int, b: int) -> bytes:
        if self._raw:
            return self._raw[a:b]
        with open(self.path, "rb") as f:
            f.seek(a)
            return f.read(b - a)

    def frame(self, i: int) -> Frame:
        """Frame number ``i`` (0-based, file order). A frame that fails to decode or fails the validation
        gate raises RecordingError; readings outside their physical range come back as None (counted in
        :attr:`tally`)."""
        if not 0 <= i < self.n_frames:
            raise IndexError(i)
        m = _member_of(self.members, i)
        line = self._member_lines(m)[i - self.members[m].first]
        inv = self.inventory if len(self.parts) < 2 else self.part_of(i).inventory
        try:
            return frame_from_dict(loads(line, "frame"), inv, self.tally)
        except (ValidationError, CodecError) as e:
            raise RecordingError(f"{self.path}: frame {i} is damaged ({e})") from None

    @property
    def mixed(self) -> bool:
        """The file joins recordings of different machines (or GPUs): statistics over it all would mix
        two inventories, so a reader takes one :meth:`part` at a time."""
        return len(self.parts) > 1

    def part_of(self, i: int) -> Part:
        """The part that frame ``i`` belongs to."""
        return next((p for p in self.parts if p.start <= i < p.stop), self.parts[-1])

    def part(self, number: int) -> Recording:
        """Part ``number`` (1-based) as a recording of its own: its header, inventory, frames and events
        (the file is shared, nothing is read again). A number out of range is a RecordingError."""
        if not 1 <= number <= len(self.parts):
            raise RecordingError(f"{self.path} has {count(len(self.parts), 'part')}: no part {number}")
        if len(self.parts) == 1:
            return self
        pt = self.parts[number - 1]
        members = []
        for mem in self.members:
            a, b = max(mem.first, pt.start), min(mem.first + mem.count, pt.stop)
            if a < b:
                members.append(_Member(mem.offset, mem.end, a - pt.start, b - a,
                                       mem.keep[a - mem.first:b - mem.first]))
        ev_start = pt.marks[0].event
        nxt = self.parts[number] if number < len(self.parts) else None
        ev_stop = nxt.marks[0].event if nxt is not None else len(self.events)
        here = Part(1, 0, pt.n_frames, pt.marks, "", folded=pt.folded)
        first = pt.marks[0] if number > 1 else _PartMark(0, 0, {}, pt.inventory, b"")  # the file's start
        lo, hi = first.byte, nxt.marks[0].byte if nxt is not None else math.inf
        rec = Recording(path=self.path, header=pt.header, inventory=pt.inventory, times=self.times[pt.start:pt.stop],
                        members=members, events=self.events[ev_start:ev_stop], complete=pt.complete,
                        damaged_at=[d for d in self.damaged_at if lo <= d < hi], expected_frames=pt.expected_frames,
                        tally=self.tally, parts=[here],
                        notes=[f"part {number} of {len(self.parts)}: frames {pt.start:,}–{pt.stop - 1:,} of the file"
                               + (f"; {pt.change}" if pt.overlaps else f" ({pt.change})" if pt.change else "")
                               + (f"; it joins {len(pt.marks)} recordings of this machine (resumed)"
                                  if len(pt.marks) > 1 else "")], _raw=self._raw,
                        _cut=self._cut and nxt is None,
                        _damaged_lines=(nxt.marks[0].lines_at if nxt else self._damaged_lines) - first.lines_at,
                        _bad_headers=self._bad_headers[first.bad_at:nxt.marks[0].bad_at if nxt else None])
        rec.problems = _problems(rec)
        return rec

    def parts_line(self, option: str = "--part") -> str:
        """Why a reader must pick a part of a mixed file, and how (with ``option``: ``compare`` has
        ``--part-a`` and ``--part-b``), in one line."""
        return "; ".join(p.note for p in self.parts[1:]) + (
            f"; pick one with {option} N (1–{len(self.parts)}), or write each to a file of its own with "
            f"`gpuscope split {self.path}`")

    def raw_line(self, i: int) -> bytes:
        """Frame ``i``'s JSON line as stored (not validated): for fast paths that read a few fields."""
        m = _member_of(self.members, i)
        return self._member_lines(m)[i - self.members[m].first]

    def index_at(self, t: float) -> int:
        """The last frame (file order) whose clock, or any earlier frame's, has reached ``t``; clamped.

        Searching the running maximum of the frame times keeps this well defined when the clock steps
        backwards (an NTP correction): the timeline orders by time, the file keeps its order."""
        import numpy as np

        if self._reach is None or len(self._reach) != self.n_frames:
            self._reach = np.maximum.accumulate(self.times) if self.n_frames else self.times
        i = int(np.searchsorted(self._reach, t, side="right")) - 1
        return min(max(i, 0), self.n_frames - 1)

    def frames(self, start: int = 0, stop: int | None = None) -> Iterator[Frame]:
        """Frames ``start`` … ``stop-1``, skipping (and counting) damaged ones."""
        stop = self.n_frames if stop is None else min(stop, self.n_frames)
        for i in range(max(start, 0), stop):
            try:
                yield self.frame(i)
            except RecordingError as e:
                if str(e) not in self.problems and len(self.problems) < 50:
                    self.problems.append(str(e))

    def summary(self) -> str:
        """One line on what survived: ``"frames 351 of ~401; 1 damaged member at byte 3,510"``."""
        n = self.n_frames
        of = ""
        if self.expected_frames is not None and self.expected_frames != n:
            of = f" of {'' if self.complete and not self.damaged_at else '~'}{self.expected_frames:,}"
        out = f"frames {n:,}{of}"
        if self.damaged_at:
            k = len(self.damaged_at)
            where = ", ".join(f"{b:,}" for b in self.damaged_at[:5]) + (", …" if k > 5 else "")
            out += f"; {k} damaged member{'s' if k != 1 else ''} at byte{'s' if k != 1 else ''} {where}"
        return out


def part_lines(rec: Recording, part: Part) -> Iterator[bytes]:
    """The lines of ``part`` as stored in ``rec``'s file (each without its newline): each of its recordings'
    header line, frames and end line (when it has one), so that a part written out is the recording it was
    (unknown fields included) and reads the same. Frames lost to damage stay lost."""
    stops = [m.frame for m in part.stored[1:]] + [part.stop]
    for mark, stop in zip(part.stored, stops):
        yield mark.header_line
        for i in range(mark.frame, stop):
            yield rec.raw_line(i)
        if mark.end_line:
            yield mark.end_line


def write_lines(path: str | os.PathLike[str], lines: Iterator[bytes], compress: bool = True) -> int:
    """Write ``lines`` as a new recording file at ``path`` in the writer's layout (gzip members of about
    :data:`gpuscope.core.recording_format.MEMBER_BYTES` of text, so the file seeks like a recorded one; ``compress=False``: plain JSON
    lines); never overwrites (an existing path is a FileExistsError, any other failure an OSError, and a
    file left half-written is removed). Returns the bytes written."""
    f = open(path, "xb")  # noqa: SIM115 - closed below, and removed when the writing fails
    size = 0
    try:
        z, raw = zlib.compressobj(6, zlib.DEFLATED, 31), 0
        for ln in lines:
            if not compress:
                size += f.write(ln + b"\n") or 0
                continue
            data = z.compress(ln + b"\n")
            raw += len(ln) + 1
            if raw >= fmt.MEMBER_BYTES or ln.startswith(b'{"type":"header"'):  # a header alone, as the writer has it
                data += z.flush(zlib.Z_FINISH)
                z, raw = zlib.compressobj(6, zlib.DEFLATED, 31), 0
            size += f.write(data) or 0
        if raw:
            size += f.write(z.flush(zlib.Z_FINISH)) or 0
        f.flush()
        os.fsync(f.fileno())
    except BaseException:
        with contextlib.suppress(OSError):  # closing flushes what is buffered: on a full disk that fails too
            f.close()
        os.unlink(path)
        raise
    f.close()
    return size


def _member_of(members: list[_Member], i: int) -> int:
    lo, hi = 0, len(members) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if members[mid].first <= i:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _inflate(raw: bytes, pos: int, step_bytes: int = 1 << 18) -> tuple[int, bytes, bool, bool]:
    """Inflate the gzip member at ``pos``: (end, text, damaged, cut). Text is bounded by MAX_MEMBER_TEXT
    (a gzip bomb is damage, not memory). On damage the member is inflated again in small steps so that
    the text before the damage is kept."""
    start = pos
    d = zlib.decompressobj(31)
    parts: list[bytes] = []
    size = 0
    n = len(raw)
    try:
        while pos < n and not d.eof:
            step = raw[pos:pos + step_bytes]
            out = d.decompress(step, MAX_MEMBER_TEXT - size + 1)
            parts.append(out)
            size += len(out)
            if size > MAX_MEMBER_TEXT:
                return pos, b"".join(parts)[:MAX_MEMBER_TEXT], True, False
            pos += len(step) - len(d.unconsumed_tail)
            if d.unconsumed_tail and not d.eof:
                continue
        if d.eof:
            return pos - len(d.unused_data), b"".join(parts), False, False
        parts.append(d.flush())
        return pos, b"".join(parts), False, True
    except zlib.error:
        if step_bytes > 256:
            return _inflate(raw, start, 256)
        return pos, b"".join(parts), True, False


def _members(raw: bytes, damage: list[int], prefetch: Prefetch | None = None) -> Iterator[_Decoded]:
    """Each gzip member of ``raw``, decompressed one at a time (memory stays at one member's text, or
    a few with ``prefetch``, which inflates ahead on threads and gives the same results).

    After damage (a decompression or checksum error, or bytes that are not a member) the reader
    resynchronises at the next gzip magic (1f 8b 08) and goes on; ``damage`` collects the byte offsets
    where damage starts (one per damaged stretch)."""
    pos = 0
    n = len(raw)
    in_damage = False  # one entry per damaged stretch, however many false starts it holds
    while pos < n:
        if raw[pos:pos + 3] != MAGIC:
            if not in_damage:
                damage.append(pos)
                in_damage = True
            nxt = raw.find(MAGIC, pos + 1)
            if nxt < 0:
                return
            pos = nxt
            continue
        events = None
        if prefetch is None:
            end, text, damaged, cut = _inflate(raw, pos)
        else:
            (end, text, damaged, cut), events = prefetch.get(pos)
        nxt = raw.find(MAGIC, pos + 1) if (damaged or cut) else -1
        if cut and nxt >= 0:
            damaged, cut = True, False  # it "ends" at the end of the file yet a later member exists
        if damaged:
            if not in_damage:
                damage.append(pos)
            in_damage = True
            end = nxt if nxt >= 0 else n
        else:
            in_damage = False
        yield _Decoded(pos, end, text, damaged, cut, events if not (damaged or cut) else None)
        if damaged:
            if nxt < 0:
                return
            pos = nxt
            continue
        if cut:
            return
        pos = end


def _frame_time(ln: bytes) -> float | None:
    """The ``t`` of a frame line without parsing the rest; None when it is not a finite time."""
    try:
        t = float(ln[5:ln.index(b",", 5)])
    except ValueError:
        return None
    return _finite_time(t)


def _finite_time(t: Any) -> float | None:
    """``t`` as a frame time (unix seconds), or None when it is not a finite number in range."""
    if not isinstance(t, (int, float)) or isinstance(t, bool):
        return None
    try:
        t = float(t)
    except OverflowError:  # an integer beyond a float's range
        return None
    return t if math.isfinite(t) and abs(t) <= 1e11 else None


def open_recording(path: str | os.PathLike[str]) -> Recording:
    """Open and index a recording. Raises :class:`RecordingError` with a one-line reason.

    A cut-off or damaged file opens with every intact frame: the reader resynchronises at the next gzip
    member after damage. :attr:`Recording.problems` says what was lost (its first line is
    :meth:`Recording.summary` when anything was). The members are inflated ahead on a few threads
    (:mod:`gpuscope.sources.recording_scan`); what is read does not depend on that.
    """
    p = Path(path)
    if (why := not_a_regular_file(p)) is not None:
        raise RecordingError(f"{p}: {why}")
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise RecordingError(f"{p}: {read_error(e, folder='is a directory, not a recording')}") from None
    return read_recording(p, raw)


def read_recording(p: Path, raw: bytes, *, threads: int | None = None, fast: bool = True) -> Recording:
    """:func:`open_recording` on the bytes ``raw`` of the file ``p``. ``threads``: inflating threads
    (None: :func:`~gpuscope.sources.recording_scan.threads_for` the size); ``fast=False`` inflates on
    the calling thread and reads every line one by one (what the fast path must agree with: tests)."""
    import numpy as np  # reading only (the writer, `gpuscope record`, does without)

    plain = _is_plain(p, raw)
    damage: list[int] = []
    ix = _Index(p)
    _walk(ix, raw, plain, damage, threads, fast)
    header, inv, times = ix.header, ix.inv, ix.times
    if header is None or inv is None:
        raise _no_header(p, raw, ix.cut, damage)
    parts = _parts(ix.parts, times)
    _expect_frames(ix.parts, times, bool(damage) or ix.cut)
    rec = Recording(path=p, header=parts[0].header, inventory=parts[0].inventory,
                    times=np.asarray(times, dtype=np.float64), members=ix.members, events=ix.events,
                    complete=all(p_.complete for p_ in parts), damaged_at=damage,
                    expected_frames=_expected_frames(parts), tally=ix.tally, parts=parts,
                    notes=join_notes(ix.parts, parts, times), _cut=ix.cut, _damaged_lines=ix.damaged_lines,
                    _bad_headers=ix.bad_headers)
    rec.problems = _problems(rec)
    if plain:
        rec._raw = raw
    return rec


def _is_plain(p: Path, raw: bytes) -> bool:
    """Whether ``raw`` is an uncompressed recording (JSON lines) rather than gzip members; a
    :class:`RecordingError` when it can be neither."""
    if not raw:
        raise RecordingError(f"{p}: empty file, not a recording")
    if len(raw) < len(MAGIC) and MAGIC.startswith(raw):
        raise _cut_early(p, raw)  # not even a whole gzip header
    plain = raw[:2] != b"\x1f\x8b"
    if plain and raw[:1] != b"{":  # not an uncompressed recording (e.g. `zcat run.jsonl.gz > run.jsonl`)
        raise RecordingError(f"{p}: not a gpuscope recording (not gzip-compressed JSON lines)")
    return plain


def _walk(ix: _Index, raw: bytes, plain: bool, damage: list[int], threads: int | None, fast: bool) -> None:
    """Read every member of ``raw`` into ``ix`` (the whole of a ``plain`` file as one), noting in ``damage``
    where damaged members start; stops where the header's member was damaged."""
    with Prefetch(raw, _inflate, MAGIC, threads_for(len(raw)) if threads is None else threads) as pf:
        decoded = iter([_Decoded(0, len(raw), raw, False)]) if plain else _members(raw, damage, pf if fast else None)
        for dec in decoded:
            if ix.header is None and damage and not dec.text.startswith(b'{"type":"header"'):
                break  # the header's member was damaged: what follows has no header to be read against
            ix.member(dec, fast)


def _no_header(p: Path, raw: bytes, cut: bool, damage: list[int]) -> RecordingError:
    """Why a file yielded no header to read its frames against: cut off, damaged, or not a recording."""
    if cut and not damage:
        return _cut_early(p, raw)
    if damage:
        at, why = damage_at(raw, damage[0])
        return RecordingError(f"{p}: damaged at byte {at:,} ({why}) before its first complete second: "
                              "nothing to read")
    return RecordingError(f"{p}: not a gpuscope recording (no header line)")


def _expect_frames(marks: list[_PartMark], times: list[float], lossy: bool) -> None:
    """Set each recording's expected frame count: the writer's, else (in a ``lossy`` file: damaged or cut)
    estimated from its time span and interval."""
    for mark, stop in zip(marks, [m.frame for m in marks[1:]] + [len(times)]):
        span = times[mark.frame:stop]
        interval = mark.header.get("interval_s")
        mark.expected = mark.end_frames
        if mark.expected is None and lossy and len(span) > 1 and interval:
            mark.expected = int(round((max(span) - min(span)) / interval)) + 1


def _expected_frames(parts: list[Part]) -> int | None:
    """The frames the file should hold: the one part's count, or the sum where every part's is known."""
    if len(parts) == 1:
        return parts[0].expected_frames
    if all(p_.expected_frames is not None for p_ in parts):
        return sum(p_.expected_frames or 0 for p_ in parts)
    return None


def _problems(rec: Recording) -> list[str]:
    """What ``rec`` (a file, or one part of it) lost, in lines: the first is :meth:`Recording.summary`
    when any member was damaged."""
    problems = [rec.summary()] if rec.damaged_at else []
    if rec._cut:
        problems.append("the file ends mid-stream (cut off); the last partial second is lost")
    if rec._damaged_lines:
        problems.append(f"{count(rec._damaged_lines, 'damaged line')} skipped")
    problems.extend(rec._bad_headers)
    if not rec.complete and not problems:
        problems.append("no end marker: the recording did not close cleanly (still running, or killed)")
    return problems


ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth")


def _ordinal(k: int) -> str:
    """``"a second recording"`` for k = 1 (0-based), … ``"recording 12"`` beyond the tenth."""
    return f"a {ORDINALS[k]} recording" if k < len(ORDINALS) else f"recording {k + 1}"


def gpu_words(inv: Inventory) -> str:
    """The GPUs of an inventory in a few words: ``"2× L40S"``, ``"1× H100 + 1× A100"``."""
    seen: dict[str, int] = {}
    for d in inv.devices:
        seen[d.name] = seen.get(d.name, 0) + 1
    return " + ".join(f"{n}× {clean(name, 40)}" for name, n in seen.items())


def inventory_change(a: Inventory, b: Inventory) -> str:
    """What makes inventory ``b`` another machine than ``a``, in words; ``""`` when it is the same machine
    with the same GPUs (same host, same simulated flag, the same GPUs by name, UUID and bus id): a recording
    resumed there, whose statistics may join ``a``'s. A driver upgrade alone is not another machine."""
    ga, gb = gpu_words(a), gpu_words(b)
    if a.host != b.host:
        return f"different machine: {clean(a.host, 60)} {ga} → {clean(b.host, 60)} {gb}"
    if a.simulated != b.simulated:
        return f"{'simulated' if a.simulated else 'real'} → {'simulated' if b.simulated else 'real'}: {ga} → {gb}"
    if ga != gb:
        return f"different GPUs on {clean(a.host, 60)}: {ga} → {gb}"
    if [(d.uuid, d.bus_id) for d in a.devices] != [(d.uuid, d.bus_id) for d in b.devices]:
        return f"different GPUs on {clean(a.host, 60)}: same models ({ga}), other UUIDs or bus ids"
    return ""


def _parts(marks: list[_PartMark], times: Sequence[float]) -> list[Part]:
    """The file's parts: runs of recordings on one machine (see :class:`Part`); a recording with no
    frames is folded into the part before it (the first part when none is). A recording of the same
    machine whose first frame is earlier than the run's latest (two recorders at once, a file joined to
    itself) starts a part of its own: :func:`overlap_change` says why."""
    n_frames = len(times)
    stops = [m.frame for m in marks[1:]] + [n_frames]
    live = [m for m, stop in zip(marks, stops) if stop > m.frame] or marks[:1]
    parts: list[Part] = []
    run: list[_PartMark] = []
    change, overlaps = "", False
    for k, mark in enumerate(live):
        why = inventory_change(run[0].inventory, mark.inventory) if run else ""
        back = "" if why or not run else overlap_change(times, run[0].frame, mark, len(parts) + 1)
        if run and (why or back):
            parts.append(Part(len(parts) + 1, run[0].frame, mark.frame, tuple(run), change, overlaps=overlaps))
            run, change, overlaps = [], why or back, bool(back)
        run.append(mark)
        if k == len(live) - 1:
            parts.append(Part(len(parts) + 1, run[0].frame, n_frames, tuple(run), change, overlaps=overlaps))
    folded: list[list[_PartMark]] = [[] for _ in parts]
    at = 0
    for mark in marks:
        if any(mark is m for m in live):
            at = next(k for k, p in enumerate(parts) if any(mark is m for m in p.marks))
        else:
            folded[at].append(mark)
    return [replace(p, folded=tuple(f)) for p, f in zip(parts, folded)]


def overlap_change(times: Sequence[float], start: int, mark: _PartMark, number: int) -> str:
    """Why the recording ``mark`` cannot join part ``number`` (its frames ``start`` … before ``mark``'s first)
    although it is the same machine with the same GPUs: time goes back at the boundary, so the two overlap
    (two recorders at once, a file joined to itself) and a reader that joined them would count the same
    moments twice. The whole note: ``part 2 overlaps part 1 in time (a second recording starts at frame 30,
    29s before part 1's last frame; same machine and GPUs): kept apart``; ``""`` when time goes on."""
    frame = mark.frame
    if not start < frame < len(times):
        return ""
    back = float(max(times[start:frame])) - float(times[frame])
    if not back > 0:
        return ""
    ago = duration(back) if back >= 1 else f"{back:.1f}s"
    return (f"part {number + 1} overlaps part {number} in time ({_ordinal(mark.seq)} starts at frame {frame:,}, "
            f"{ago} before part {number}'s last frame; same machine and GPUs): kept apart")


def join_notes(marks: list[_PartMark], parts: list[Part], times: list[float]) -> list[str]:
    """One line per header after the first: ``a second recording starts at frame 400 (different
    machine: a 2× L40S → b 2× RTX A6000)``, or, on the same machine, ``… (same machine and GPUs: resumed
    after 2m10s; joined)`` (the gap between the last frame before and the first after, when both exist).
    Each part after the first gets its own line as its ``note``. A recording with no frames is said
    apart: ``a second recording at frame 400 holds no frames (different machine: …): skipped``."""
    out = []
    for k, mark in enumerate(marks):
        part = next(p for p in parts if any(m is mark for m in p.stored))
        if not any(m is mark for m in part.marks):
            how = inventory_change(part.inventory, mark.inventory) or "same machine and GPUs"
            out.append(f"{_ordinal(k) if k else 'the first recording'} at frame {mark.frame:,} holds no frames "
                       f"({how}{'' if mark.complete else '; it did not close cleanly'}): skipped")
            continue
        if part.number == 1 and part.marks[0] is mark:  # the file's first recording that holds frames
            continue
        if part.overlaps and part.marks[0] is mark:
            out.append(part.change)
            parts[part.number - 1] = replace(part, note=out[-1])
            continue
        if part.marks[0] is mark:
            how = part.change
        else:
            gap = times[mark.frame] - times[mark.frame - 1] if 0 < mark.frame < len(times) else None
            how = "same machine and GPUs: resumed" + (f" after {duration(gap)}" if gap is not None and gap > 0 else "")
            how += "; joined"
        out.append(f"{_ordinal(k)} starts at frame {mark.frame:,} ({how})")
        if part.marks[0] is mark:
            parts[part.number - 1] = replace(part, note=out[-1])
    return out


_ZLIB_WORDS = (  # zlib's complaint -> what it means, in words
    ("incorrect data check", "gzip CRC check failed"),  # the trailer's 4-byte CRC-32 ...
    ("incorrect length check", "gzip length check failed"),  # ... and 4-byte length: said at its first byte
    ("header", "bad gzip header"),
    ("unknown compression method", "bad gzip header"),
)


def damage_at(raw: bytes, pos: int, limit: int = 1 << 18) -> tuple[int, str]:
    """Where, in ``raw``, the gzip member at byte ``pos`` stops inflating, and why in words:
    ``(618, "gzip CRC check failed")`` (for a failed check: the first byte of the trailer field).
    Inflates one byte at a time (the error path only, and at most ``limit`` bytes: beyond that the
    member's own offset is given, with "corrupt compressed data")."""
    if raw[pos:pos + 3] != MAGIC:
        return pos, "not gzip data"
    try:  # a whole member past the cap (a recording recompressed in one piece): say that, not "corrupt"
        if len(zlib.decompressobj(31).decompress(raw[pos:], MAX_MEMBER_TEXT + 1)) > MAX_MEMBER_TEXT:
            return pos, OVERSIZED_MEMBER
    except zlib.error:
        pass  # damaged: found byte by byte below
    d = zlib.decompressobj(31)
    for i in range(pos, min(len(raw), pos + limit)):
        try:
            d.decompress(raw[i:i + 1])
        except zlib.error as e:
            msg = str(e)
            words = next((words for key, words in _ZLIB_WORDS if key in msg), "corrupt compressed data")
            return (i - 3 if "check failed" in words else i), words  # zlib fails on the field's last byte
        if d.eof:
            return i, "no damage found: the member is intact"
    return pos, "corrupt compressed data"


def _cut_early(p: Path, raw: bytes) -> RecordingError:
    """A gzip stream that ends inside the header's member: a copy or download cut short."""
    return RecordingError(f"{p}: cut off before its first complete second ({len(raw):,} bytes): nothing to read")


class _Index:
    """What open_recording gathers while it walks the members."""

    def __init__(self, p: Path):
        self.p = p
        self.header: dict[str, Any] | None = None
        self.inv: Inventory | None = None
        self.tally = Tally()
        self.times: list[float] = []
        self.events: list[Event] = []
        self.members: list[_Member] = []
        self.complete = False
        self.end_frames: int | None = None
        self.damaged_lines = 0
        self.cut = False
        self.parts: list[_PartMark] = []  # one per header line: where each joined recording starts
        self.bad_headers: list[str] = []  # a later header line that could not be read: why
        self.at = 0  # where the member being read starts

    def member(self, dec: _Decoded, fast: bool) -> None:
        """Read one member: an intact one fast (unless ``fast`` is off), any other line by line; the frames it
        keeps become a :class:`_Member`."""
        first = len(self.times)
        self.at = dec.start
        if fast and not dec.damaged and not dec.cut:
            keep = self.intact(dec.text, events_at(dec.text) if dec.events is None else dec.events)
        else:
            keep = self.salvage(dec)
        if keep:
            self.members.append(_Member(offset=dec.start, end=dec.end, first=first, count=len(keep), keep=keep))
        self.cut = self.cut or dec.cut

    def salvage(self, dec: _Decoded) -> list[int]:
        """Read a member line by line (one that is damaged or cut, or any with ``fast=False``); the
        numbers of the lines kept as frames."""
        lines = dec.text.split(b"\n")
        last_partial = bool(dec.text) and not dec.text.endswith(b"\n")
        keep: list[int] = []
        for k, ln in enumerate(lines):
            if not ln:
                continue
            if last_partial and k == len(lines) - 1:
                if dec.damaged or dec.cut:
                    continue  # a line cut in half by the damage or the end of the file
            if self.header is None:
                if dec.damaged:  # the header is taken only from a member that passed gzip's checks: garbled,
                    return []  # it could still read as JSON (a host, an inventory, "simulated" changed)
                self._header(ln)
                continue
            if ln.startswith(b'{"t":'):
                self._frame(k, ln, dec.damaged, keep)
            elif ln.startswith(b'{"type":"end"'):
                self._end(ln)
            else:
                self._other(k, ln, dec.damaged, keep)
        return keep

    def intact(self, text: bytes, events: list[int]) -> list[int]:
        """Read an intact member: as :meth:`salvage` would, but only the frames' times are parsed here
        (frame lines holding the events key at an offset in ``events``, or too long, are decoded in
        full); the numbers of the lines kept as frames."""
        keep: list[int] = []
        times = self.times
        n = len(text)
        ev = iter(events)
        next_ev = next(ev, n)
        k = s = 0
        while s <= n:  # line k is text[s:e], as text.split(b"\n") numbers them
            e = text.find(b"\n", s)
            if e < 0:
                e = n
            while next_ev < s:
                next_ev = next(ev, n)
            if e > s:
                if self.header is None:  # the first non-empty line is the header, whatever it holds
                    self._header(text[s:e])
                elif text.startswith(b'{"t":', s):
                    c = text.find(b",", s + 5, e)
                    try:
                        t = float(text[s + 5:c]) if c >= 0 else math.nan
                    except ValueError:
                        t = math.nan
                    if next_ev < e or e - s > MAX_LINE or not (math.isfinite(t) and abs(t) <= 1e11):
                        self._frame(k, text[s:e], False, keep)
                    else:
                        times.append(t)
                        keep.append(k)
                elif text.startswith(b'{"type":"end"', s):
                    self._end(text[s:e])
                else:
                    self._other(k, text[s:e], False, keep)
            k += 1
            s = e + 1
        return keep

    def _header(self, ln: bytes) -> None:
        self.header = _header(self.p, ln)
        try:
            self.inv = inventory_from_dict(self.header.get("inventory"), self.tally)
        except CodecError as e:
            raise RecordingError(f"{self.p}: the header's inventory is damaged ({e})") from None
        self.parts.append(_PartMark(len(self.times), len(self.events), self.header, self.inv, ln, seq=len(self.parts),
                                    byte=self.at, lines_at=self.damaged_lines, bad_at=len(self.bad_headers)))

    def _other(self, k: int, ln: bytes, damaged: bool, keep: list[int]) -> None:
        """A line that is neither the writer's frame nor its end line: a second header (recordings joined
        with ``cat``), or a line a JSON tool rewrote (keys re-ordered, ``jq -S``): parsed in full and
        taken for what it is; anything else is a damaged line (not counted inside a damaged member, whose
        garbled text is counted as the member's damage)."""
        if ln.startswith(b'{"type":"header"'):
            self._second_header(ln, damaged)
            return
        try:
            d = loads(ln, "line")
        except ValidationError:
            d = None
        kind = d.get("type") if isinstance(d, dict) else None
        if kind == "header":
            self._second_header(ln, damaged)
        elif kind == "end":
            self._end(ln)
        elif isinstance(d, dict) and "t" in d:
            self._frame(k, ln, True, keep, d)
        elif not damaged:
            self.damaged_lines += 1

    def _second_header(self, ln: bytes, damaged: bool) -> None:
        """A header after the first: the recording that follows is another one (``cat a.jsonl.gz
        b.jsonl.gz``), read against its own inventory. One that cannot be read is said (its frames are
        then checked against the inventory before it, and those that do not fit are damaged)."""
        if damaged:  # garbled text can still read as JSON: a damaged member's header is not trusted
            self.bad_headers.append(f"a header at frame {len(self.times):,} is in a damaged member")
            return
        try:
            self._header(ln)
        except RecordingError as e:
            self.bad_headers.append(f"a second header at frame {len(self.times):,} cannot be read "
                                    f"({str(e).split(': ', 1)[-1]})")

    def _frame(self, k: int, ln: bytes, damaged: bool, keep: list[int], parsed: Any = None) -> None:
        t = _frame_time(ln) if parsed is None else _finite_time(parsed.get("t"))
        f: Frame | None = None
        if t is not None and (damaged or b'"events":' in ln or len(ln) > MAX_LINE):
            try:  # a damaged member's lines, lines with events and lines a tool rewrote are checked in full
                f = frame_from_dict(loads(ln, "frame") if parsed is None else parsed, self.inv, Tally())
            except (ValidationError, CodecError):
                t = None
        if t is None:
            self.damaged_lines += 1
            return
        self.times.append(t)
        keep.append(k)
        if f is not None and f.events:
            self.events.extend(f.events)

    def _end(self, ln: bytes) -> None:
        self.complete = True
        n_end: Any = None
        try:
            n_end = json.loads(ln).get("frames")
        except (ValueError, AttributeError, RecursionError):
            pass
        self.end_frames = n_end if isinstance(n_end, int) and not isinstance(n_end, bool) else None
        if self.parts:
            self.parts[-1].complete = True
            self.parts[-1].end_frames = self.end_frames
            self.parts[-1].end_line = ln


def _header(p: Path, line: bytes) -> dict[str, Any]:
    try:
        h = loads(line, "header")
    except ValidationError as e:
        raise RecordingError(f"{p}: not a gpuscope recording (first line: {e})") from None
    if not isinstance(h, dict) or h.get("format") != FORMAT or h.get("type") != "header":
        raise RecordingError(f"{p}: not a gpuscope recording (no gpuscope header)")
    v = h.get("version")
    if not isinstance(v, int) or isinstance(v, bool):
        raise RecordingError(f"{p}: the header has no format version")
    if v > FORMAT_VERSION:
        raise RecordingError(f"{p}: recording format version {v} is newer than this gpuscope reads "
                             f"({FORMAT_VERSION}); upgrade gpuscope")
    iv = h.get("interval_s")
    if iv is not None and not in_range(iv, 0.001, 86400.0):
        raise RecordingError(f"{p}: the header's interval_s is not a number of seconds ({clean(repr(iv), 40)})")
    for key in ("simulated",):
        if key in h and not isinstance(h[key], bool) and h[key] is not None:
            raise RecordingError(f"{p}: the header's {key} is not true/false")
    if not isinstance(h.get("origin", {}), dict) or not isinstance(h.get("command", []), list):
        raise RecordingError(f"{p}: the header's origin/command fields are damaged")
    return h
def open_or_fail(path: Any, part: int | None = None, *, mixed: bool = False, option: str = "--part") -> Any:
    """Open a recording for a command; a bad or empty file is a one-line GpuscopeError (RecordingError).

    ``part``: only that part of a file joining recordings of different machines (or overlapping in time).
    Without it such a file is refused ("a second recording starts at frame N (different machine: …); pick one
    with --part N …", ``option`` naming the command's own flag), unless ``mixed`` (a caller that reads each part
    apart itself): statistics never mix two inventories, nor count the same moments twice."""
    rec = open_recording(path)
    if part is not None:
        rec = rec.part(part)
    elif rec.mixed and not mixed:
        raise GpuscopeError(clean(f"{path}: {rec.parts_line(option)}", 600))
    if rec.n_frames == 0:
        raise GpuscopeError(clean(f"{path}: the recording holds no frames" + (f" ({'; '.join(rec.problems)})"
                                                                           if rec.problems else ""), 400))
    first_error = readable_sample(rec)
    if first_error is not None:  # every frame tried is damaged: not "0 frames" and exit 0, nor an empty replay
        raise GpuscopeError(clean(f"{path}: no frame can be read ({rec.n_frames:,} in the file; {first_error})", 400))
    return rec



def readable_sample(rec: Any, tries: int = 9) -> str | None:
    """None when at least one of ``tries`` frames spread over the recording (first, last and between)
    decodes; else the first one's error. A recording whose frames are all damaged is then one error, while
    one with some damaged frames still opens (and lists them as problems)."""
    n = rec.n_frames
    picks = sorted({round(k * (n - 1) / max(1, tries - 1)) for k in range(tries)}) if n else []
    first: str | None = None
    for i in picks:
        try:
            rec.frame(i)
            return None
        except RecordingError as e:
            first = first or str(e).split(": ", 1)[-1]
    return first


