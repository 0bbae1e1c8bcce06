"""The recording writer: frames appended to a gzip JSONL file on their own thread, crash-safe (the format is
docs/recording-format.md; the reader is sources/recording.py)."""

from __future__ import annotations

import datetime as _dt
import errno
import json
import logging
import os
import queue
import stat
import threading
import time
import zlib
from pathlib import Path
from typing import Any, BinaryIO

from gpuscope import __version__
from gpuscope.core import recording_format as fmt  # MEMBER_BYTES read when used: tests shrink it
from gpuscope.core.codec import (
    frame_to_dict,
    inventory_to_dict,
)
from gpuscope.core.errors import SHOWN
from gpuscope.core.model import Frame, Inventory
from gpuscope.core.recording_format import FORMAT, FORMAT_VERSION, RecordingError
from gpuscope.core.redact import redact_argv
from gpuscope.sources.files import not_writable_as_file

log = logging.getLogger("gpuscope.sources.recording")  # the name the writer has always logged under (log filters)


class Recorder:
    """Appends frames to a recording on its own writer thread (``gpuscope-recorder``).

    :meth:`write` only queues the frame (a bounded queue of ``queue_frames``), so the caller, who holds
    the session lock the UI also takes, never waits for gzip, ``write`` or ``fsync``. It never raises:
    on an I/O error (a full disk) the writer stops, keeps what was written readable, and sets
    :attr:`error`; a frame that finds the queue full (the disk stalls) is not lost silently but counted
    in :attr:`dropped` and logged. :meth:`close` drains the queue, writes the end line and joins the
    writer. The header is written before the constructor returns, so an unwritable path fails there
    (``RecordingError``) or shows in :attr:`error` before any frame.
    """

    QUEUE_FRAMES = 256  # about 4 minutes at 1 Hz, 25 s at 10 Hz

    def __init__(self, path: str | os.PathLike[str], inventory: Inventory, *, command: list[str] | None = None,
                 origin: dict[str, Any] | None = None, interval_s: float | None = None, flush_s: float = 1.0,
                 fsync: bool = True, queue_frames: int = QUEUE_FRAMES, close_timeout_s: float = 10.0,
                 force: bool = False):
        self.path = Path(path)
        self.flush_s = flush_s
        self.fsync = fsync
        self.close_timeout_s = close_timeout_s
        self.error: str | None = None
        self.frames = 0  # frames written (by the writer thread)
        self.kept = 0  # frames on the disk for sure: written, flushed and synced; after an error, what the file holds
        self.dropped = 0  # frames refused because the queue was full
        self.accepted = 0  # frames queued (written, or to be written, unless an error stops the writer)
        self.removed = False  # the file was created here, nothing reached it, and it was removed (see _remove_if_empty)
        self.created = False  # the file did not exist before: gpuscope made it (only such a file is ever removed)
        self._bytes = 0  # bytes written to the file
        self._durable_bytes = 0  # the file's length at the last flush that reached the disk
        self._member_raw = 0
        self._unflushed = False
        self._last_flush = time.monotonic()
        self._t_last: float | None = None
        self._closing = False
        self._q: queue.Queue[Frame | None] = queue.Queue(maxsize=max(1, queue_frames))
        why = not_writable_as_file(self.path)  # even with --force: a FIFO with no reader would block forever
        if why is not None:
            raise RecordingError(f"{self.path} {why}; refusing to write there")
        try:  # never overwrite: an existing file is refused unless force (`--force`)
            # unbuffered: after a failed write the file can be cut back to its last flush point, with no
            # buffer left to spill past it on close
            existed = force and os.path.lexists(self.path)
            self._f: BinaryIO | None = open(self.path, "wb" if force else "xb", buffering=0)  # noqa: SIM115
            self.created = not existed
            st = os.fstat(self._f.fileno())
            self._identity = (st.st_dev, st.st_ino)  # the file this recorder made: only it is ever removed
            # fsync is for files: on a device (`-o /dev/null --force`, which not_writable_as_file allows) it
            # fails with EINVAL and stopped the recording at its first frame
            self._syncable = stat.S_ISREG(st.st_mode)
        except FileExistsError:
            raise RecordingError(f"{self.path} exists; refusing to overwrite it (use --force)") from None
        except OSError as e:
            raise RecordingError(f"cannot write {self.path}: {e.strerror or e}") from None
        header = {
            "type": "header", "format": FORMAT, "version": FORMAT_VERSION, "gpuscope": __version__,
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "command": redact_argv(command or []), "simulated": inventory.simulated, "source": inventory.source,
            "scenario": inventory.scenario, "interval_s": interval_s, "origin": origin or {},
            "inventory": inventory_to_dict(inventory),
        }
        self._z = zlib.compressobj(6, zlib.DEFLATED, 31)
        self._emit(_dumps(header), force_flush=True, end_member=True)
        self._thread = threading.Thread(target=self._run, name="gpuscope-recorder", daemon=True)
        if self._f is not None:
            self._thread.start()

    @property
    def closed(self) -> bool:
        return self._f is None

    def write(self, frame: Frame, *, wait: bool = False) -> None:
        """Queue one frame (its events travel with it). Never blocks unless ``wait`` (bulk writers such
        as a benchmark or a converter, where no UI is waiting): a full queue counts the frame in
        :attr:`dropped` instead."""
        if self._f is None or self._closing:
            return
        try:
            if wait:
                self._q.put(frame)
            else:
                self._q.put_nowait(frame)
            self.accepted += 1
        except queue.Full:
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 100 == 0:
                log.warning("recorder queue full (the disk is slow or stalled): %d frames dropped from %s",
                            self.dropped, self.path)

    def close(self, wait: bool = True) -> None:
        """Drain the queue, end the recording cleanly (end line, gzip trailer) and join the writer.

        If the disk does not take the queued frames within ``close_timeout_s``, gives up waiting and
        sets :attr:`error` (the writer thread is a daemon and cannot hold the process). With
        ``wait=False`` (a UI stopping a recording) it returns at once and the writer finishes on its
        own; a later ``close()`` waits for that."""
        first = not self._closing
        self._closing = True
        if not self._thread.is_alive():
            self._abandon()
            return
        deadline = time.monotonic() + self.close_timeout_s
        if first:
            try:
                if wait:
                    self._q.put(None, timeout=self.close_timeout_s)
                else:
                    self._q.put_nowait(None)
            except queue.Full:
                pass  # the writer also stops once it has drained the queue and sees _closing
        if not wait:
            return
        self._thread.join(max(0.0, deadline - time.monotonic()))
        if self._thread.is_alive():
            self.error = self.error or (f"recording of {self.path} did not finish: the disk did not take the last "
                                        f"frames within {self.close_timeout_s:g} s")
            log.error("%s", self.error, extra=SHOWN)

    # ------------------------------------------------------------ writer thread
    def _run(self) -> None:
        while True:
            try:
                frame = self._q.get(timeout=self.flush_s)
            except queue.Empty:
                if self._unflushed:
                    self._emit(b"", force_flush=True)  # an idle recorder still reaches the disk within flush_s
                    if not self._unflushed:
                        self.kept = self.frames
                if self._f is None:
                    return
                if self._closing and self._q.empty():
                    break  # closed without waiting, and everything queued is written (frames queued between the
                    # wait above and close() are not: a writer that broke out then lost them all)
                continue
            if frame is None or self._f is None:
                break  # closing, or stopped on an error (the rest is discarded: error says so)
            try:
                line = _dumps(frame_to_dict(frame))
            except Exception as e:  # noqa: BLE001 - a bug must stop the recording visibly, not kill it silently
                log.exception("cannot encode frame at t=%s", frame.t)
                self._fail(f"recording stopped: cannot encode a frame ({type(e).__name__}: {e}); frames up to "
                           "then are kept")
                return
            self._t_last = frame.t
            self._emit(line)
            if self._f is None:
                return  # a write error: error is set, the file closed
            self.frames += 1
            if not self._unflushed:
                self.kept = self.frames
        if self._f is not None:
            end: dict[str, Any] = {"type": "end", "t": self._t_last, "frames": self.frames}
            if self.dropped:
                end["dropped"] = self.dropped
            self._emit(_dumps(end), end_member=True)
            if self._f is not None:
                self.kept = self.frames
        self._abandon()

    def _emit(self, line: bytes, *, force_flush: bool = False, end_member: bool = False) -> None:
        if self._f is None:
            return
        try:
            data = self._z.compress(line)
            self._member_raw += len(line)
            now = time.monotonic()
            if end_member or self._member_raw >= fmt.MEMBER_BYTES:
                data += self._z.flush(zlib.Z_FINISH)
                self._z = zlib.compressobj(6, zlib.DEFLATED, 31)
                self._member_raw = 0
                force_flush = True
            elif force_flush or now - self._last_flush >= self.flush_s:
                data += self._z.flush(zlib.Z_SYNC_FLUSH)
                force_flush = True
            if data:
                view = memoryview(data)
                while view:  # an unbuffered write may take part of it
                    n = self._f.write(view)
                    if not n:
                        raise OSError(errno.EIO, "the file took no more bytes")
                    self._bytes += n
                    view = view[n:]
            self._unflushed = not force_flush
            if force_flush:
                if self.fsync and self._syncable:
                    os.fsync(self._f.fileno())
                self._last_flush = now
                self._durable_bytes = self._bytes
        except OSError as e:
            self._cut_back()
            if self._remove_if_empty():
                self._fail(f"recording stopped: {e.strerror or e} while writing {self.path}; nothing was written; "
                           f"removed the empty {self.path}")
            else:
                self._fail(f"recording stopped: {e.strerror or e} while writing {self.path}; {self.kept:,} "
                           f"frame{'' if self.kept == 1 else 's'} kept")

    def _cut_back(self) -> None:
        """After a failed write or sync, cut the file back to its last flush point: what follows it may be
        half a deflate block, and what it holds is then exactly the :attr:`kept` frames."""
        if self._f is not None and self._bytes != self._durable_bytes:
            try:
                os.ftruncate(self._f.fileno(), self._durable_bytes)
            except OSError as e:
                log.warning("cannot cut %s back to %d bytes after a write error: %s", self.path,
                            self._durable_bytes, e.strerror or e)

    def _remove_if_empty(self) -> bool:
        """After a write error that left the file empty (not even the header reached the disk): remove it,
        but only if this recorder created it (never a file that was there before, even with ``--force``)
        and the path still names this very file and it holds 0 bytes. True when it was removed."""
        if self._f is None or not self.created or self._durable_bytes or self.kept:
            return False
        try:
            if os.fstat(self._f.fileno()).st_size != 0:
                return False
        except OSError:
            return False
        return self.discard()

    def discard(self) -> bool:
        """Remove the file this recorder created (``record -- CMD`` whose command never ran; a write error
        that left it empty): only if it created it (never a file that was there before, even with
        ``--force``) and the path still names that very file. True when it was removed."""
        if not self.created or self.removed:
            return False
        try:
            there = os.stat(self.path, follow_symlinks=False)
            if (there.st_dev, there.st_ino) != self._identity:
                return False
            os.unlink(self.path)
        except OSError as e:
            log.warning("cannot remove %s: %s", self.path, e.strerror or e)
            return False
        self.removed = True
        return True

    def _fail(self, message: str) -> None:
        self.error = message
        log.error("%s", message, extra=SHOWN)  # every front end shows record errors itself
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


