"""Opening a recording fast: gzip members inflated on a few threads ahead of the walk that indexes them.

:func:`gpuscope.sources.recording.open_recording` walks the members of a file in order (that walk, and
the salvage of damaged members, live in ``recording.py``). Most of its time was zlib (~1.1 s of 2 s for a
24 h × 8-GPU file); zlib releases the GIL, so :class:`Prefetch` inflates the members ahead of the walk
on a small thread pool and finds where the events are in each (:func:`events_at`); the walk asks it for the member at a byte
offset and gets exactly what inflating there itself would give (the work is a pure function of the file
and the offset), so what a damaged file salvages does not depend on the threads.

A pool thread holds the GIL only to look for the ``"events":`` key in the text (one C search); the
lines themselves are found and their times parsed by the walk.

Where the next member starts is only known once this one is inflated, so the pool works on every
offset where gzip's magic bytes occur (a chance occurrence inside compressed data, about one per
16 MB, costs a failed inflate and is dropped). The look-ahead is bounded (a few members), and a member
inflating to more than ``KEEP_TEXT`` is handed back without its text and inflated again by the walk,
so a file of gzip bombs never holds more than one bomb's text at a time.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from types import TracebackType

EVENTS_KEY = b'"events":'
KEEP_TEXT = 8 * 1024 * 1024  # a member's text larger than this is not kept by the look-ahead (see above)
MIN_PARALLEL_BYTES = 1024 * 1024  # smaller files are read on the calling thread (a pool costs ~1 ms)

Inflated = tuple[int, bytes, bool, bool]  # (end, text, damaged, cut), as recording._inflate returns


def events_at(text: bytes) -> list[int]:
    """Byte offsets in ``text`` where the ``"events":`` key occurs (usually none): the frame lines that
    hold one are decoded in full at open, for their markers."""
    out = []
    i = text.find(EVENTS_KEY)
    while i >= 0:
        out.append(i)
        i = text.find(EVENTS_KEY, i + 1)
    return out


def threads_for(size: int) -> int:
    """How many pool threads to inflate a file of ``size`` bytes with: none for a small file or a
    single CPU, otherwise one per CPU this process may use beyond the walk's own, at most 4 (zlib
    inflates ~500 MB of text a second a thread: 4 keep ahead of the walk). On 2 CPUs, 1: a second one
    measured no faster there and cost ~0.6 s more CPU (the threads contend for the GIL)."""
    if size < MIN_PARALLEL_BYTES:
        return 0
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return min(4, cpus - 1)


class Prefetch:
    """Members of ``raw`` inflated (and their events found) ahead of an in-order walk.

    ``inflate(raw, pos)`` is the walk's own inflate; :meth:`get` returns ``(inflate(raw, pos), events)``
    whether or not a thread did it, ``events`` being :func:`events_at` of the text, or None where the
    member is damaged or cut (the walk reads those line by line). With ``threads`` 0 everything runs on the caller's thread. Use as a
    context manager: leaving it drops the look-ahead and lets the threads go."""

    def __init__(self, raw: bytes, inflate: Callable[[bytes, int], Inflated], magic: bytes, threads: int):
        self.raw = raw
        self.inflate = inflate
        self.magic = magic
        self.ahead = threads + 2
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="gpuscope-inflate") if threads > 0 else None
        self.futures: dict[int, Future[tuple[Inflated | None, list[int] | None]]] = {}
        self.frontier = -1  # the last offset handed to the pool

    def __enter__(self) -> Prefetch:
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=False, cancel_futures=True)
            self.pool = None
        self.futures.clear()

    def _work(self, pos: int, keep_big: bool) -> tuple[Inflated | None, list[int] | None]:
        got = self.inflate(self.raw, pos)
        _end, text, damaged, cut = got
        if len(text) > KEEP_TEXT and not keep_big:
            return None, None  # too big to hold ahead of the walk: the walk inflates it again
        return got, None if damaged or cut else events_at(text)

    def get(self, pos: int) -> tuple[Inflated, list[int] | None]:
        """The member at byte ``pos``: what ``inflate(raw, pos)`` returns, and where its events are (None
        when damaged or cut)."""
        if self.pool is not None:
            for q in [q for q in self.futures if q < pos]:
                self.futures.pop(q).cancel()  # a chance magic inside a member the walk went past
            self.frontier = max(self.frontier, pos - 1)
            while len(self.futures) < self.ahead:
                nxt = self.raw.find(self.magic, self.frontier + 1)
                if nxt < 0:
                    break
                self.frontier = nxt
                self.futures[nxt] = self.pool.submit(self._work, nxt, False)
            fut = self.futures.pop(pos, None)
            if fut is not None:
                got, events = fut.result()
                if got is not None:
                    return got, events
        got, events = self._work(pos, True)
        assert got is not None
        return got, events
