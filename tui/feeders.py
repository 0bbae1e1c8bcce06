"""Feeders put frames into a Session off the event loop: live sampling or replay of a recording.

Both call :meth:`Session.ingest`, so replay goes through the same path as live data. They never
queue frames for the UI: the UI redraws from the session's latest state when it is ready. Both are
:class:`~gpuscope.tui.workers.Worker` threads owned by the App; they take the session's one lock
(``session.lock``) for every change, as the App does for every read.
"""

from __future__ import annotations

import bisect
import dataclasses
import json
import logging
import math
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gpuscope.core import catalogue
from gpuscope.core.history import History
from gpuscope.core.model import EndpointReading, Event, Frame, GpuReading, ProcessInfo
from gpuscope.core.session import Session, run_ticks
from gpuscope.core.text import clean
from gpuscope.core.units import duration
from gpuscope.core.validate import ENDPOINT_RANGES, GPU_RANGES, Tally, ValidationError, check_frame, check_gpu
from gpuscope.core.view import ReplayStatus
from gpuscope.tui.workers import Worker

if TYPE_CHECKING:  # a replay's modules are loaded by the replay (ReplayFeeder), not by the live screen
    from gpuscope.core.probe import ProbeResult
    from gpuscope.sources.recording import Recording
    from gpuscope.sources.replay_index import HistoryIndex

log = logging.getLogger(__name__)


class LiveFeeder(Worker):
    """Samples a source every ``interval_s`` on the ``gpuscope-sampler`` thread.

    A tick that raises (the source's ``sample()`` or the session's ``ingest``) is logged and counted
    in ``session.tick_errors`` (the status bar shows it) and sampling goes on."""

    label = "LIVE"

    def __init__(self, source: Any, session: Session, interval_s: float, on_update: Callable[[], None]):
        super().__init__("gpuscope-sampler", on_update)
        self.source = source
        self.session = session
        self.interval_s = interval_s

    def run(self) -> None:
        def on_frame(frame: Frame) -> None:
            self.session.ingest(frame)
            self.on_update()

        def on_error(e: Exception) -> None:
            self.session.tick_failed(e)
            self.on_update()

        run_ticks(self.source.sample, on_frame, self.interval_s, self._stop, on_error=on_error)
        if self.session.unrecorded_events:  # a marker dropped just before quitting: one more real sample
            try:                            # carries it into the recording, which would otherwise lose it
                self.session.ingest(self.source.sample())
            except Exception as e:  # noqa: BLE001 - a failing last tick is counted like any other
                self.session.tick_failed(e)

    def _release(self) -> None:
        self.source.close()


class ReplayFeeder(Worker):
    """Plays a recording at ``speed`` (0.25×–64×) with pause and seek; frames keep their own times.

    Seeks asked for by the UI (:meth:`request_seek`) run on this thread, never on the event loop. In its
    idle time (paused, or between frames) the thread builds the recording's history index
    (:class:`~gpuscope.sources.replay_index.HistoryIndex`, 16 frames at a time, in file order), from
    which a seek fills the graphs' window by a copy. A frame that cannot be read (a damaged file) is
    logged, counted in ``session.tick_errors`` and skipped; playback goes on."""

    label = "REPLAY"
    SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)
    REBUILD_FRAMES = 240  # at most this many frames fill the graphs' window on a seek (a stride beyond)
    FINDINGS_S = 12.0  # findings are re-run over this much before the target (they average 5 s, hold 5 s)
    QUIET_S = 0.15  # no index building this long after the thread changed what the screen shows

    def __init__(self, rec: Recording, session: Session, on_update: Callable[[], None], speed: float = 1.0,
                 window_s: Callable[[], float] = lambda: 60.0):
        super().__init__("gpuscope-replay", on_update)
        self.rec = rec
        self.session = session
        self.speed = min(self.SPEEDS, key=lambda s: abs(s - speed))
        self.window_s = window_s
        self.playing = True
        self.index = -1
        self.seeks = 0  # seeks done: the UI redraws its graphs when this changes
        self._seek_to: float | None = None  # a seek asked for by the UI, done on the replay thread
        self._mark_t: float | None = None  # the marker last jumped to, while the position has not moved
        self._mark_index = -1
        marks = [e for e in rec.events if e.kind in ("marker", "finding_raised", "gpu_lost")]
        self._marks = tuple((e.t, "marker" if e.kind == "marker" else "finding") for e in marks)
        self._mark_text: dict[float, list[str]] = {}  # what each mark says (marker labels, finding messages)
        for e in marks:
            self._mark_text.setdefault(e.t, []).append(clean(e.text or e.kind, 120))
        # the link probes the recording holds (``record --probe-links``, the palette's probe while recording):
        # the last one at or before the position reaches the topology panel, as the live probe does
        self._probes = sorted((e for e in rec.events if e.kind == "probe"), key=lambda e: e.t)
        self._probe_times = [e.t for e in self._probes]  # bisected on every refresh (build_view, under the lock)
        self._probe_read: dict[int, ProbeResult | None] = {}  # its index in _probes → the probe read back
        self._wake_ev = threading.Event()
        self.history_index: HistoryIndex | None = None
        self._quiet_until = 0.0
        if rec.n_frames:
            from gpuscope.sources.replay_index import HistoryIndex

            try:
                self.history_index = HistoryIndex(rec)
            except ValueError:
                pass  # a derived history metric: seeks read the window from the file

    @property
    def t0(self) -> float:
        return float(self.rec.times[0]) if self.rec.n_frames else 0.0

    @property
    def t1(self) -> float:
        return float(self.rec.times[-1]) if self.rec.n_frames else 0.0

    @property
    def position(self) -> float:
        return float(self.rec.times[self.index]) if self.index >= 0 else self.t0

    @property
    def probe(self) -> ProbeResult | None:
        """The last link probe recorded at or before the position (None: none yet), read once per probe; a
        probe event that cannot be read is logged and shown as none."""
        if not self._probes:
            return None
        at = self.position
        k = bisect.bisect_right(self._probe_times, at + 1e-6) - 1
        if k < 0:
            return None
        if k not in self._probe_read:
            from gpuscope.core.probe import ProbeError, from_json

            try:
                self._probe_read[k] = from_json(self._probes[k].data)
            except ProbeError as e:
                log.warning("%s: a recorded link probe cannot be read: %s", self.rec.path, e)
                self._probe_read[k] = None
        return self._probe_read[k]

    def status(self) -> ReplayStatus:
        """Where the replay stands, as one immutable value (read under the session lock)."""
        with self.session.lock:
            return ReplayStatus(t0=self.t0, t1=self.t1, position=self.position, speed=self.speed,
                                playing=self.playing, marks=self._marks)

    def start(self) -> None:
        if self.rec.n_frames:
            self.seek(self.t0)
        super().start()

    def _wake(self) -> None:
        self._wake_ev.set()

    @property
    def target(self) -> float:
        """Where the replay is or is about to be (a pending seek counts): the base of the next step."""
        pending = self._seek_to
        return pending if pending is not None else self.position

    def request_seek(self, t: float) -> None:
        """Ask for a seek to ``t`` without blocking: the replay thread rebuilds; repeated requests before
        it gets to them collapse into the last one."""
        self._seek_to = min(max(t, self.t0), self.t1)
        self._wake_ev.set()

    def _do_pending_seek(self) -> bool:
        t, self._seek_to = self._seek_to, None
        if t is None:
            return False
        self.seek(t)
        return True

    def run(self) -> None:
        while not self._stop.is_set():
            if self._do_pending_seek():
                continue
            if not self.playing or self.index >= self.rec.n_frames - 1:
                if self.index >= self.rec.n_frames - 1 and self.playing:
                    self.playing = False
                    self.on_update()
                self._idle(0.5)
                self._wake_ev.clear()
                continue
            with self.session.lock:
                i = self.index + 1
                gap = float(self.rec.times[i] - self.rec.times[self.index]) if self.index >= 0 else 0.0
            deadline = time.monotonic() + min(max(gap, 0.0) / self.speed, 5.0)
            while not self._stop.is_set() and time.monotonic() < deadline:
                if self._idle(max(0.0, deadline - time.monotonic())):
                    break
            if self._wake_ev.is_set():
                self._wake_ev.clear()
                continue  # a seek or speed change: re-plan from the new position
            with self.session.lock:
                if self.index + 1 == i and self.playing:
                    self._ingest(i)
            self._quiet()
            self.on_update()

    def _idle(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for a wake-up (a seek, a key), indexing the recording meanwhile. True
        when woken.

        The index is built in steps of ~1 ms, each followed by a pause as long (half a core at most),
        and not in the ``QUIET_S`` after this thread changed the screen: the UI's redraw then runs
        without sharing the GIL (a busy thread makes every GIL hand-over of the event loop wait up to
        the 5 ms switch interval)."""
        deadline = time.monotonic() + timeout_s
        ix = self.history_index
        while ix is not None and not ix.done and not self._stop.is_set():
            now = time.monotonic()
            if now >= deadline:
                return False
            if now < self._quiet_until:
                if self._wake_ev.wait(min(deadline, self._quiet_until) - now):
                    return True
                continue
            try:
                ix.step()
            except Exception:  # noqa: BLE001 - the index is an optimisation: seeks go on without it
                log.exception("history index of %s abandoned", self.rec.path)
                self.history_index = ix = None
                break
            if self._wake_ev.wait(min(time.monotonic() - now, max(0.0, deadline - time.monotonic()))):
                return True
        return self._wake_ev.wait(max(0.0, deadline - time.monotonic()))

    def _quiet(self) -> None:
        self._quiet_until = time.monotonic() + self.QUIET_S

    def _ingest(self, i: int) -> None:
        try:
            for f in self.rec.frames(i, i + 1):
                self.session.ingest(f)
        except Exception as e:  # noqa: BLE001 - a damaged frame is counted and skipped
            self.session.tick_failed(e)
        self.index = i

    def seek(self, t: float) -> None:
        """Jump to time ``t`` (synchronously; the UI calls :meth:`request_seek`, which runs this on the
        replay thread).

        The history before the last ``FINDINGS_S`` seconds comes from the history index when it reaches
        that far (every frame, as playing there would have left the history: a copy, ~1 ms); otherwise
        only what the window shows is rebuilt, from at most ``REBUILD_FRAMES`` frames (every k-th frame
        of a long window, read straight from the file's JSON: the file's own frames, no validation).
        Then the last ``FINDINGS_S`` seconds go through a trusted decode and the findings, as live frames
        go. The new state is built aside and swapped in under the session lock, so the UI never waits
        on a rebuild."""
        s = self.session
        target = self.rec.index_at(t)
        t_target = float(self.rec.times[target])
        start = self.rec.index_at(t_target - self.window_s())
        exact = max(start, self.rec.index_at(t_target - self.FINDINGS_S))
        fresh = Session(s.inventory, interval_s=s.interval_s, history_s=1.0)
        fresh.history = History(s.history.n_gpus, s.history.capacity)
        # findings open before the rebuilt stretch keep their start times ("since" survives a seek)
        t_exact = float(self.rec.times[exact])
        fresh.findings.prime(e for e in self.rec.events if e.t < t_exact)
        ix = self.history_index
        if ix is None or not ix.fill(fresh.history, max(0, exact - fresh.history.capacity), exact):
            stride = max(1, -(-(exact - start) // self.REBUILD_FRAMES))
            for i in range(start, exact, stride):
                _history_from_json(fresh.history, self.rec, i)
        for i in range(exact, target + 1):
            f = _trusted_frame(self.rec, i, full_check=i == target)
            if f is None:
                continue
            try:
                fresh.ingest(f)
            except Exception as e:  # noqa: BLE001 - a damaged frame: counted, skipped
                s.tick_failed(e)
        with s.lock:
            s.history, s.findings, s.last_frame = fresh.history, fresh.findings, fresh.last_frame
            self.index = target
            self.seeks += 1
        self._wake_ev.set()
        self._quiet()
        self.on_update()

    def step(self, seconds: float) -> None:
        self.seek(self.position + seconds)

    def toggle(self) -> None:
        if not self.playing and self.index >= self.rec.n_frames - 1:
            self.seek(self.t0)
        self.playing = not self.playing
        self._wake_ev.set()
        self.on_update()

    def faster(self, up: bool) -> None:
        k = self.SPEEDS.index(self.speed) + (1 if up else -1)
        self.speed = self.SPEEDS[max(0, min(len(self.SPEEDS) - 1, k))]
        self._wake_ev.set()
        self.on_update()

    def marks(self) -> list[tuple[float, str]]:
        return list(self._marks)

    def jump_mark(self, forward: bool) -> str | None:
        """Seek to the next (previous) marker or finding and return what it says (``"+1m05s marker: phase 2"``;
        None when there is no further mark). A mark between two frames lands on the frame before it, so the
        mark last jumped to, not the position, is the base of the next jump."""
        ts = sorted({t for t, _k in self._marks})
        base = self._mark_t if (self._mark_t is not None and self._mark_index == self.index
                                and self._seek_to is None) else self.target
        cands = [t for t in ts if t > base + 1e-6] if forward else [t for t in ts if t < base - 1e-6]
        if cands:
            t = cands[0] if forward else cands[-1]
            self._mark_t = t
            self._mark_index = self.rec.index_at(t)
            self.request_seek(t)
            texts = self._mark_text.get(t, [])
            more = f" (+{len(texts) - 1} more)" if len(texts) > 1 else ""
            return f"+{duration(t - self.t0)} {texts[0] if texts else 'mark'}{more}"
        return None


def _history_from_json(history: Any, rec: Recording, i: int) -> None:
    """Add frame ``i`` to ``history`` straight from the recording's JSON line (no Frame object): the
    seek's fast path for the file's own frames; a line that does not parse is skipped."""
    try:
        d = json.loads(rec.raw_line(i))
        gpus = d.get("gpus") or []
        t = float(d["t"])
    except (ValueError, AttributeError, IndexError, KeyError, TypeError):
        return
    k = history.count % history.capacity
    history.times[k] = t
    rows = [(g.get("index"), _Row(g)) for g in gpus if isinstance(g, dict) and not g.get("lost")]
    rows = [(i, g) for i, g in rows if isinstance(i, int) and 0 <= i < history.n_gpus]
    for key, get in _GPU_GETTERS:
        cols = history.data[key]
        for a in cols:
            a[k] = math.nan
        for idx, g in rows:
            v = get(g)
            if isinstance(v, (int, float)):
                cols[idx][k] = v
    eps = [_Row(e) for e in d.get("endpoints") or [] if isinstance(e, dict)]
    for key, get in _EP_GETTERS:
        vals = [v for e in eps if isinstance(v := get(e), (int, float))]
        history.endpoint_data[key][k] = sum(vals) if vals else math.nan
    history.count += 1


class _Row(dict[str, Any]):
    """A frame's JSON object read like a reading: a missing field is None (for the catalogue's getters)."""

    def __getattr__(self, name: str) -> Any:
        return self.get(name)


_GPU_GETTERS = [(m.key, m.getter()) for m in catalogue.metrics("gpu", history=True) if m.key is not None]
_EP_GETTERS = [(m.key, m.getter()) for m in catalogue.metrics("endpoint", history=True) if m.key is not None]


def _names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls))


_GPU, _PROC, _EP, _EV, _FRAME = (_names(c) for c in (GpuReading, ProcessInfo, EndpointReading, Event, Frame))


_GPU_NUMERIC = tuple(GPU_RANGES)
_EP_NUMERIC = tuple(ENDPOINT_RANGES)


def _in_ranges(g: dict[str, Any]) -> bool:
    """True when every reading of a GPU's JSON object is unknown or inside the gate's range (NaN is not)."""
    for name, (lo, hi) in _GPU_RANGE_ITEMS:
        v = g.get(name)
        if v is not None and not lo <= v <= hi:
            return False
    return True


_GPU_RANGE_ITEMS = tuple(GPU_RANGES.items())


def _trusted_frame(rec: Recording, i: int, full_check: bool = True) -> Frame | None:
    """Frame ``i`` built straight from its JSON line, without the codec's per-field type dispatch: the
    seek's fast path for the file's own frames (several times faster). Readings keep the validation
    gate (ranges, GPU indices) as a played frame does; a reading that is not a number, or anything else
    unexpected, falls back to the checked decode (which skips a damaged frame and notes it in
    ``rec.problems``), so the findings see what playing would show them.

    Without ``full_check`` (frames that only feed the findings, never shown) a GPU whose readings are
    all in range skips the gate's copy (its process list is then not re-cleaned); a frame with events
    always takes the full gate."""
    try:
        d = json.loads(rec.raw_line(i))
        plain = not full_check and not d.get("events")
        gpus = _trusted_gpus(d.get("gpus") or (), plain, rec.tally)
        kw = {k: v for k, v in d.items() if k in _FRAME}
        kw["gpus"] = gpus
        kw["endpoints"] = _trusted_endpoints(d.get("endpoints") or ())
        kw["events"] = tuple(Event(**{k: v for k, v in e.items() if k in _EV}) for e in d.get("events") or ())
        f = Frame(**kw)
        # the frame-level gate (time, GPU indices, counts, endpoints, events); GPUs are already through it
        checked = check_frame(dataclasses.replace(f, gpus=()), rec.inventory, rec.tally)
        _check_indices(f, rec)
        return dataclasses.replace(checked, gpus=f.gpus)
    except (ValueError, TypeError, AttributeError, KeyError, IndexError, ValidationError):
        return next(rec.frames(i, i + 1), None)


def _trusted_gpus(gpus: Any, plain: bool, tally: Tally) -> tuple[GpuReading, ...]:
    """A frame's GPU readings from their JSON objects, each through the gate (``plain``: only those with a
    reading out of range). Raises TypeError for a reading that is not a number."""
    # loaded by now (the replay loads it)
    from gpuscope.sources.replay_index import GPU_INTS, numbers_ok

    out = []
    for g in gpus:
        if not numbers_ok(g, _GPU_NUMERIC, GPU_INTS):
            raise TypeError("a reading that is not a number")
        kw = {k: v for k, v in g.items() if k in _GPU}
        if kw.get("processes") is not None:
            kw["processes"] = tuple(ProcessInfo(**{k: v for k, v in p.items() if k in _PROC})
                                    for p in kw["processes"])
        r = GpuReading(**kw)
        out.append(r if plain and _in_ranges(g) else check_gpu(r, tally))
    return tuple(out)


def _trusted_endpoints(eps: Any) -> tuple[EndpointReading, ...]:
    """A frame's endpoint readings from their JSON objects. Raises TypeError for a reading that is not a
    number or a state that is not a string."""
    from gpuscope.sources.replay_index import ENDPOINT_INTS, numbers_ok

    if not all(numbers_ok(e, _EP_NUMERIC, ENDPOINT_INTS) and isinstance(e.get("state", ""), str) for e in eps):
        raise TypeError("a reading that is not a number (or a state that is not a string)")
    return tuple(EndpointReading(**{k: v for k, v in e.items() if k in _EP}) for e in eps)


def _check_indices(f: Frame, rec: Recording) -> None:
    """The gate's GPU index rules (each once, 0 ≤ index < the inventory's count). Raises ValidationError."""
    n = len(rec.inventory.devices)
    idx = [g.index for g in f.gpus]
    if len(idx) > n or len(set(idx)) != len(idx) or not all(type(k) is int and 0 <= k < n for k in idx):
        raise ValidationError(f"frame {f.t}: GPU indices {idx[:8]} do not match the inventory")
