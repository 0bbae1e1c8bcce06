"""The replay's history index: every frame's history series of a recording in numpy arrays, so a seek
fills the graphs' window with a slice copy instead of decompressing and parsing the gzip members the
window spans (an hour at 1 Hz is ~80 members of a 24 h × 8-GPU file: ~0.2 s).

The index is built a few frames at a time (:meth:`HistoryIndex.step`, ~1 ms each) by whoever has idle time
(the replay thread between frames), in file order; frames ``[0, ready)`` are usable as soon as they
are in. Values are exactly what :meth:`gpuscope.core.history.History.add` stores when the frame is
played: the same fields, float32, readings outside the validation gate's ranges unknown (NaN), a lost
GPU's row unknown, endpoint values summed. A frame that is not plainly the recorder's own output
(bad GPU indices, a value that is not a number, JSON that does not parse) goes through the checked
decode, and a frame that fails it is left out, as playing skips it.

Memory: 4 bytes × (GPUs × 14 GPU metrics + 1 endpoint metric) + 1 byte per frame: 39 MB for 24 h × 8
GPUs at 1 Hz. Beyond ``max_bytes`` the index keeps every k-th frame (a seek then fills the window at
that stride, as a graph column of 160 cells needs no more).
"""

from __future__ import annotations

import json
import math
import typing
from array import array
from typing import Any

import numpy as np

from gpuscope.core import catalogue
from gpuscope.core.model import EndpointReading, GpuReading
from gpuscope.core.validate import ENDPOINT_RANGES, GPU_RANGES, MAX_ENDPOINTS
from gpuscope.sources.recording import Recording, RecordingError

MAX_BYTES = 64 * 1024 * 1024
_NUM = frozenset({int, float, type(None)})


def _int_fields(cls: type) -> frozenset[str]:
    hints = typing.get_type_hints(cls)
    return frozenset(n for n, tp in hints.items() if int in typing.get_args(tp) and float not in typing.get_args(tp))


GPU_INTS = _int_fields(GpuReading)
ENDPOINT_INTS = _int_fields(EndpointReading)


def numbers_ok(obj: dict[str, Any], names: tuple[str, ...] | list[str], ints: frozenset[str]) -> bool:
    """True when the JSON object's ``names`` are all numbers or null, as the codec takes them: not a
    bool or a string, and a whole number where the field is an integer (a non-finite value is left
    to the gate's ranges)."""
    vals = list(map(obj.get, names))
    if not _NUM.issuperset(map(type, vals)):
        return False
    for n, v in zip(names, vals):
        if type(v) is float and n in ints and math.isfinite(v) and not v.is_integer():
            return False
    return True


def _fields(scope: str, ranges: dict[str, tuple[float, float]]) -> list[tuple[str, str, float, float]] | None:
    """(history key, JSON field, low, high) of the catalogue's history metrics; None when one is derived
    (``read``), which the index cannot take from the JSON."""
    out = []
    for m in catalogue.metrics(scope, history=True):
        if m.key is None:
            continue
        if m.read is not None:
            return None
        lo, hi = ranges.get(m.name, (-math.inf, math.inf))
        out.append((m.key, m.name, lo, hi))
    return out


class HistoryIndex:
    """Per-frame history series of ``rec`` (file order), built incrementally with :meth:`step`.

    Raises ValueError when the catalogue keeps a derived metric in history (nothing to index from)."""

    def __init__(self, rec: Recording, max_bytes: int = MAX_BYTES):
        gpu, ep = _fields("gpu", GPU_RANGES), _fields("endpoint", ENDPOINT_RANGES)
        if gpu is None or ep is None:
            raise ValueError("a history metric is derived: no index")
        self.rec = rec
        self.n_gpus = len(rec.inventory.devices)
        self.gpu_keys = [k for k, *_ in gpu]
        self.ep_keys = [k for k, *_ in ep]
        self._gpu_names = [n for _k, n, *_ in gpu]
        self._ep = [(n, lo, hi) for _k, n, lo, hi in ep]
        self._lo = np.array([lo for *_x, lo, _hi in gpu], dtype=np.float64)
        self._hi = np.array([hi for *_x, hi in gpu], dtype=np.float64)
        n = rec.n_frames
        per_frame = 4 * (self.n_gpus * len(gpu) + len(ep)) + 1
        self.stride = max(1, -(-n * per_frame // max(1, max_bytes)))
        rows = -(-n // self.stride)
        # metric-major, so that a window of one metric is one contiguous block (a seek copies 15 of them)
        self.data = np.full((len(gpu), rows, self.n_gpus), np.nan, dtype=np.float32)
        self.endpoint = np.full((len(ep), rows), np.nan, dtype=np.float32)
        self.ok = np.zeros(rows, dtype=bool)  # False: the frame is damaged (playing skips it) or not in yet
        self.ready = 0  # frames [0, ready) are indexed
        self._next = 0  # the member being indexed
        self._lines: list[bytes] | None = None  # its lines, while the walk is inside it
        self._j = 0  # the next of them

    @property
    def nbytes(self) -> int:
        return int(self.data.nbytes + self.endpoint.nbytes + self.ok.nbytes)

    @property
    def done(self) -> bool:
        return self._next >= len(self.rec.members)

    def step(self, frames: int = 16) -> bool:
        """Index up to ``frames`` more frames (about 1 ms for 16 frames of 8 GPUs; a gzip member is
        decompressed when the walk enters it). Returns False when all are in."""
        if self.done:
            return False
        m = self._next
        mem = self.rec.members[m]
        if self._lines is None:
            self._lines, self._j = self.rec.member_lines(m), 0
        lines, j0 = self._lines, self._j
        j1 = min(len(lines), j0 + frames)
        g = self.n_gpus
        vals: list[list[Any]] = []
        cells: list[int] = []
        for j in range(j0, j1):
            i = mem.first + j
            if i % self.stride:
                continue
            row = i // self.stride
            got = self._fast(lines[j])
            if got is None:
                got = self._checked(i)
            if got is None:
                continue
            gpus, eps = got
            for k, v in gpus:
                cells.append(row * g + k)
                vals.append(v)
            self.endpoint[:, row] = eps
            self.ok[row] = True
        if vals:
            a = np.array(vals, dtype=np.float64)
            a[(a < self._lo) | (a > self._hi)] = np.nan  # the gate's ranges (NaN compares false: stays NaN)
            self.data.reshape(len(self.gpu_keys), -1)[:, cells] = a.T
        self._j = j1
        self.ready = mem.first + j1
        if j1 >= len(lines):
            self._next, self._lines = m + 1, None
            self.ready = mem.first + mem.count
        return True

    def build(self) -> None:
        """Index every member now (tests, benchmarks)."""
        while self.step():
            pass

    def _fast(self, line: bytes) -> tuple[list[tuple[int, list[Any]]], list[float]] | None:
        """The frame's values straight from its JSON; None when anything is not plainly the recorder's
        own output (then the checked decode decides)."""
        try:
            d = json.loads(line)
        except ValueError:
            return None
        if not isinstance(d, dict):
            return None
        gpus = d.get("gpus") or []
        eps = d.get("endpoints") or []
        if not isinstance(gpus, list) or len(gpus) > self.n_gpus or not isinstance(eps, list) \
                or len(eps) > MAX_ENDPOINTS:
            return None
        seen: set[int] = set()
        out = []
        names = self._gpu_names
        for r in gpus:
            if not isinstance(r, dict):
                return None
            k = r.get("index")
            if type(k) is not int or not 0 <= k < self.n_gpus or k in seen:
                return None
            seen.add(k)
            if not numbers_ok(r, names, GPU_INTS):
                return None
            v = list(map(r.get, names))
            if r.get("lost") is True:
                continue
            out.append((k, v))
        sums = []
        for n, lo, hi in self._ep:
            got = []
            for e in eps:
                if not isinstance(e, dict):
                    return None
                x = e.get(n)
                if not numbers_ok(e, (n,), ENDPOINT_INTS):
                    return None
                if x is not None and math.isfinite(x) and lo <= x <= hi:
                    got.append(x)
            sums.append(sum(got) if got else math.nan)
        return out, sums

    def _checked(self, i: int) -> tuple[list[tuple[int, list[Any]]], list[float]] | None:
        try:
            f = self.rec.frame(i)
        except RecordingError:
            return None
        gpus = [(r.index, [getattr(r, n) for n in self._gpu_names]) for r in f.gpus
                if not r.lost and r.index < self.n_gpus]
        sums = []
        for n, _lo, _hi in self._ep:
            got = [v for e in f.endpoints if (v := getattr(e, n)) is not None]
            sums.append(sum(got) if got else math.nan)
        return gpus, sums

    def fill(self, history: Any, lo: int, hi: int) -> bool:
        """Put frames ``[lo, hi)`` (file order; every ``stride``-th; damaged ones left out, as playing
        does) into the empty ``history``, keeping the last ``history.capacity``. Returns False, leaving
        ``history`` untouched, when the index does not reach ``hi`` yet or does not fit ``history``."""
        if hi > self.ready or history.n_gpus != self.n_gpus or history.count:
            return False
        if set(history.data) != set(self.gpu_keys) or set(history.endpoint_data) != set(self.ep_keys):
            return False
        r0, r1 = -(-lo // self.stride), -(-hi // self.stride)
        rows: slice | np.ndarray
        if self.ok[r0:r1].all():  # the usual case: a plain slice, contiguous copies
            r0 = max(r0, r1 - history.capacity)
            rows, n = slice(r0, r1), r1 - r0
            times = self.rec.times[r0 * self.stride:r1 * self.stride:self.stride]
        else:
            rows = np.arange(r0, r1)[self.ok[r0:r1]][-history.capacity:]
            n = len(rows)
            times = self.rec.times[rows * self.stride]
        history.times[:n] = _typed("d", times)  # the History's rings are the stdlib's arrays (core/history.py)
        for k, key in enumerate(self.gpu_keys):
            block = self.data[k, rows]
            for g, ring in enumerate(history.data[key]):
                ring[:n] = _typed("f", block[:, g])
        for k, key in enumerate(self.ep_keys):
            history.endpoint_data[key][:n] = _typed("f", self.endpoint[k, rows])
        history.count = n
        return True


def _typed(typecode: str, values: np.ndarray) -> array[float]:
    """``values`` as a stdlib ``array`` of ``typecode`` ('d': float64, 'f': float32), copied as raw bytes."""
    out: array[float] = array(typecode)  # typecode 'd' or 'f'
    out.frombytes(np.ascontiguousarray(values, dtype=np.float64 if typecode == "d" else np.float32).tobytes())
    return out
