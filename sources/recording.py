"""Recordings: gzip-compressed JSON lines, crash-safe, seekable (format: docs/recording-format.md).

Line 1 is a header (``"type": "header"``: format version, inventory, provenance); every later line
is a frame in the core codec (``{"t": …, "gpus": […], "events": […]}``); a clean close adds
``{"type": "end", …}``. The file is a series of gzip members of about 256 KB of text each
(``zcat FILE | jq`` reads it); inside a member the writer sync-flushes every second, so a file cut
at any byte still opens and loses at most the last second. The reader indexes members on open and
decompresses only the member it needs to seek.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gpuscope.core.codec import (
    CodecError,
    frame_from_dict,
    frame_to_dict,
    inventory_from_dict,
    inventory_to_dict,
)
from gpuscope.core.errors import GpuscopeError
from gpuscope.core.model import Event, Frame, Inventory

FORMAT = "gpuscope-recording"
FORMAT_VERSION = 1
MEMBER_BYTES = 256 * 1024


class RecordingError(GpuscopeError):
    """A file that cannot be opened as a recording; the message is one line for the user."""


class Recorder:
    """Appends frames to a recording. Never raises from :meth:`write`: on an I/O error (a full
    disk) it stops, keeps what was written readable, and sets :attr:`error`."""

    def __init__(self, path: str | os.PathLike[str], inventory: Inventory, *, command: list[str] | None = None,
                 origin: dict[str, Any] | None = None, interval_s: float | None = None, flush_s: float = 1.0,
                 fsync: bool = True):
        self.path = Path(path)
        self.flush_s = flush_s
        self.fsync = fsync
        self.error: str | None = None
        self.frames = 0
        self.bytes_raw = 0
        self._member_raw = 0
        self._last_flush = time.monotonic()
        self._t_last: float | None = None
        try:
            self._f = open(self.path, "wb")  # noqa: SIM115 - owned by the recorder
        except OSError as e:
            raise RecordingError(f"cannot write {self.path}: {e.strerror or e}") from None
        from gpuscope import __version__

        header = {
            "type": "header", "format": FORMAT, "version": FORMAT_VERSION, "gpuscope": __version__,
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "command": command or [], "simulated": inventory.simulated, "source": inventory.source,
            "scenario": inventory.scenario, "interval_s": interval_s, "origin": origin or {},
            "inventory": inventory_to_dict(inventory),
        }
        self._z = zlib.compressobj(6, zlib.DEFLATED, 31)
        self._emit(_dumps(header), force_flush=True, end_member=True)

    @property
    def closed(self) -> bool:
        return self._f is None

    def _emit(self, line: bytes, *, force_flush: bool = False, end_member: bool = False) -> None:
        if self._f is None:
            return
        try:
            data = self._z.compress(line)
            self._member_raw += len(line)
            self.bytes_raw += len(line)
            now = time.monotonic()
            if end_member or self._member_raw >= MEMBER_BYTES:
                data += self._z.flush(zlib.Z_FINISH)
                self._z = zlib.compressobj(6, zlib.DEFLATED, 31)
                self._member_raw = 0
                force_flush = True
            elif force_flush or now - self._last_flush >= self.flush_s:
                data += self._z.flush(zlib.Z_SYNC_FLUSH)
                force_flush = True
            if data:
                self._f.write(data)
            if force_flush:
                self._f.flush()
                if self.fsync:
                    os.fsync(self._f.fileno())
                self._last_flush = now
        except OSError as e:
            self.error = f"recording stopped: {e.strerror or e} while writing {self.path}; frames up to then are kept"
            self._abandon()

    def write(self, frame: Frame) -> None:
        """Append one frame (its events travel with it)."""
        if self._f is None:
            return
        self.frames += 1
        self._t_last = frame.t
        self._emit(_dumps(frame_to_dict(frame)))

    def close(self) -> None:
        """End the recording cleanly (end line, gzip trailer)."""
        if self._f is None:
            return
        self._emit(_dumps({"type": "end", "t": self._t_last, "frames": self.frames}), end_member=True)
        self._abandon()

    def _abandon(self) -> None:
        f, self._f = self._f, None
        if f is not None:
            try:
                f.close()
            except OSError:
                pass


def _dumps(obj: Any) -> bytes:
    return (json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n").encode()


@dataclass
class _Member:
    offset: int  # byte offset of the gzip member in the file
    end: int  # one past its last byte
    first: int  # index of its first frame
    count: int


@dataclass
class Recording:
    """An opened recording: header, inventory, time index; frames are decoded on demand."""

    path: Path
    header: dict[str, Any]
    inventory: Inventory
    times: np.ndarray
    members: list[_Member]
    events: list[Event]
    complete: bool
    problems: list[str] = field(default_factory=list)
    _cache: dict[int, list[bytes]] = field(default_factory=dict, repr=False)
    _raw: bytes = field(default=b"", repr=False)

    @property
    def n_frames(self) -> int:
        return int(len(self.times))

    @property
    def duration_s(self) -> float:
        return float(self.times[-1] - self.times[0]) if len(self.times) > 1 else 0.0

    @property
    def simulated(self) -> bool:
        return bool(self.header.get("simulated"))

    def _member_lines(self, m: int) -> list[bytes]:
        if m not in self._cache:
            if len(self._cache) > 8:
                self._cache.pop(next(iter(self._cache)))
            mem = self.members[m]
            text = next(_members(self._raw_bytes(mem.offset, mem.end), []), (0, 0, b""))[2]
            lines = [ln for ln in text.split(b"\n") if ln.startswith(b'{"t":')]
            self._cache[m] = lines[: mem.count]
        return self._cache[m]

    def _raw_bytes(self, a: int, b: int) -> bytes:
        if self._raw:
            return self._raw[a:b]
        with open(self.path, "rb") as f:
            f.seek(a)
            return f.read(b - a)

    def frame(self, i: int) -> Frame:
        """Frame number ``i`` (0-based). A frame that fails to decode raises RecordingError."""
        if not 0 <= i < self.n_frames:
            raise IndexError(i)
        m = _member_of(self.members, i)
        line = self._member_lines(m)[i - self.members[m].first]
        try:
            return frame_from_dict(json.loads(line))
        except (ValueError, CodecError) as e:
            raise RecordingError(f"{self.path}: frame {i} is damaged ({e})") from None

    def raw_line(self, i: int) -> bytes:
        """Frame ``i``'s JSON line as stored (not validated): for fast paths that read a few fields."""
        m = _member_of(self.members, i)
        return self._member_lines(m)[i - self.members[m].first]

    def index_at(self, t: float) -> int:
        """The last frame at or before time ``t`` (clamped to the recording)."""
        i = int(np.searchsorted(self.times, t, side="right")) - 1
        return min(max(i, 0), self.n_frames - 1)

    def frames(self, start: int = 0, stop: int | None = None) -> Iterator[Frame]:
        """Frames ``start`` … ``stop-1``, skipping (and counting) damaged ones."""
        stop = self.n_frames if stop is None else min(stop, self.n_frames)
        for i in range(max(start, 0), stop):
            try:
                yield self.frame(i)
            except RecordingError as e:
                if str(e) not in self.problems:
                    self.problems.append(str(e))


def _member_of(members: list[_Member], i: int) -> int:
    lo, hi = 0, len(members) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if members[mid].first <= i:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _members(raw: bytes, problems: list[str]) -> Iterator[tuple[int, int, bytes]]:
    """(start, end, text) of each gzip member, decompressed one at a time (memory stays at one
    member's text, ~256 KB, not the whole file's). Damage or a cut ends the series with a note."""
    pos = 0
    while pos < len(raw):
        d = zlib.decompressobj(31)
        parts = []
        start = pos
        try:
            while pos < len(raw) and not d.eof:
                step = raw[pos:pos + (1 << 18)]
                parts.append(d.decompress(step))
                pos += len(step)
            if d.eof:
                pos -= len(d.unused_data)
            else:
                parts.append(d.flush())
                problems.append("the file ends mid-stream (cut off); the last partial second is lost")
        except zlib.error as e:
            try:
                parts.append(d.flush())
            except zlib.error:
                pass
            problems.append(f"damaged data at byte ~{pos}: {e}; frames after it are lost")
            yield start, pos, b"".join(parts)
            return
        yield start, pos, b"".join(parts)
        if not d.eof:
            return


def open_recording(path: str | os.PathLike[str]) -> Recording:
    """Open and index a recording. Raises :class:`RecordingError` with a one-line reason.

    A cut-off or damaged file opens with what could be read; :attr:`Recording.problems` says what
    was lost.
    """
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise RecordingError(f"{p}: no such file") from None
    except IsADirectoryError:
        raise RecordingError(f"{p}: is a directory, not a recording") from None
    except OSError as e:
        raise RecordingError(f"{p}: cannot read ({e.strerror or e})") from None
    if not raw:
        raise RecordingError(f"{p}: empty file, not a recording")
    problems: list[str] = []
    members: list[_Member] = []
    if raw[:2] != b"\x1f\x8b":
        if raw[:1] == b"{":  # an uncompressed recording (e.g. `zcat run.jsonl.gz > run.jsonl`)
            text, members_text = raw, [(0, len(raw), raw)]
        else:
            raise RecordingError(f"{p}: not a gpuscope recording (not gzip-compressed JSON lines)")
    else:
        members_text = _members(raw, problems)
        text = b""
    header: dict[str, Any] | None = None
    times: list[float] = []
    events: list[Event] = []
    complete = False
    damaged = 0
    for (start, end, mtext) in members_text:
        lines = mtext.split(b"\n")
        if mtext and not mtext.endswith(b"\n"):
            lines = lines[:-1]  # a line cut in half
        first = len(times)
        count = 0
        for ln in lines:
            if not ln:
                continue
            if header is None:
                header = _header(p, ln)
                continue
            if ln.startswith(b'{"t":'):
                try:
                    t = float(ln[5:ln.index(b",", 5)])
                except ValueError:
                    damaged += 1
                    continue
                if times and t < times[-1]:
                    damaged += 1
                    continue
                times.append(t)
                count += 1
                if b'"events":' in ln:
                    try:
                        events.extend(frame_from_dict(json.loads(ln)).events)
                    except (ValueError, CodecError):
                        pass
            elif ln.startswith(b'{"type":"end"'):
                complete = True
            else:
                damaged += 1
        if count:
            members.append(_Member(offset=start, end=end, first=first, count=count))
    if header is None:
        raise RecordingError(f"{p}: not a gpuscope recording (no header line)")
    if damaged:
        problems.append(f"{damaged} damaged line{'s' if damaged > 1 else ''} skipped")
    try:
        inv = inventory_from_dict(header.get("inventory"))
    except CodecError as e:
        raise RecordingError(f"{p}: the header's inventory is damaged ({e})") from None
    rec = Recording(path=p, header=header, inventory=inv, times=np.asarray(times, dtype=np.float64),
                    members=members, events=events, complete=complete, problems=problems)
    if text:  # uncompressed: serve lines straight from memory
        rec._raw = raw
        rec.members = [_Member(0, len(raw), 0, len(times))]
        rec._cache[0] = [ln for ln in raw.split(b"\n") if ln.startswith(b'{"t":')]
    if not complete and not problems:
        problems.append("no end marker: the recording did not close cleanly (still running, or killed)")
    return rec


def _header(p: Path, line: bytes) -> dict[str, Any]:
    try:
        h = json.loads(line)
    except ValueError:
        raise RecordingError(f"{p}: not a gpuscope recording (first line is not JSON)") from None
    if not isinstance(h, dict) or h.get("format") != FORMAT or h.get("type") != "header":
        raise RecordingError(f"{p}: not a gpuscope recording (no gpuscope header)")
    v = h.get("version")
    if not isinstance(v, int):
        raise RecordingError(f"{p}: the header has no format version")
    if v > FORMAT_VERSION:
        raise RecordingError(f"{p}: recording format version {v} is newer than this gpuscope reads "
                             f"({FORMAT_VERSION}); upgrade gpuscope")
    return h
