"""Replay seeks from the history index: the graphs and findings after a seek are what playing to that
point leaves, for a few windows and history sizes, with and without the index,
and on hostile frames (out-of-range values, duplicate GPUs, non-numbers) that playing skips or blanks."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from helpers import examples, run_frames, sim_source
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscope.core.session import Session
from gpuscope.outputs.recorder import Recorder
from gpuscope.sources.recording import open_recording
from gpuscope.sources.replay_index import HistoryIndex
from gpuscope.tui.feeders import ReplayFeeder

SCENARIO = "a6000-tp2-pcie-gen1"  # simulated: findings raised and held along the run


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    """400 s of a simulated scenario (findings recorded as events), some frames made hostile."""
    path = tmp_path_factory.mktemp("seek") / "run.jsonl.gz"
    src = sim_source(SCENARIO)
    s = Session(src.inventory, interval_s=1.0)
    s.start_recording(Recorder(str(path), src.inventory, command=["test"], interval_s=1.0, fsync=False,
                                 queue_frames=10_000))
    for k, f in enumerate(run_frames(src, 0, 399)):
        g0, g1 = f.gpus[0], f.gpus[1]
        if k == 50:  # out of the gate's range: unknown when played
            f = dataclasses.replace(f, gpus=(dataclasses.replace(g0, util_gpu_pct=500.0), g1))
        elif k == 51:  # a GPU listed twice: playing skips the frame
            f = dataclasses.replace(f, gpus=(g0, g0))
        elif k == 52:  # not a number: playing skips the frame
            f = dataclasses.replace(f, gpus=(dataclasses.replace(g0, power_w="hot"), g1))
        elif k == 53:  # a lost GPU: its row is unknown
            f = dataclasses.replace(f, gpus=(g0, dataclasses.replace(g1, lost=True)))
        if k in (51, 52):
            s.recorder.write(f, wait=True)  # written as is (the session would refuse it)
            continue
        s.ingest(f)
    s.stop_recording()
    rec = open_recording(path)
    assert rec.n_frames == 400
    return rec


def played(rec, target: int, history_s: float) -> Session:
    """A session that played the recording from the start to frame ``target``, as the replay does."""
    s = Session(rec.inventory, interval_s=1.0, history_s=history_s)
    for f in rec.frames(0, target + 1):
        s.ingest(f)
    return s


def sought(rec, t: float, window_s: float, history_s: float, index: bool) -> Session:
    s = Session(rec.inventory, interval_s=1.0, history_s=history_s)
    feeder = ReplayFeeder(rec, s, lambda: None, window_s=lambda: window_s)
    if index:
        assert feeder.history_index is not None
        feeder.history_index.build()
    else:
        feeder.history_index = None
    feeder.seek(t)
    return s


def assert_same_history(a: Session, b: Session, window_s: float) -> None:
    for key in a.history.data:
        for gpu in range(a.history.n_gpus):
            ta, va = a.history.window(key, gpu, window_s)
            tb, vb = b.history.window(key, gpu, window_s)
            np.testing.assert_array_equal(ta, tb, err_msg=f"{key} GPU{gpu} times")
            np.testing.assert_array_equal(va, vb, err_msg=f"{key} GPU{gpu}")
    for key in a.history.endpoint_data:
        np.testing.assert_array_equal(a.history.window(key, None, window_s)[1],
                                      b.history.window(key, None, window_s)[1], err_msg=key)


def findings(s: Session) -> list[tuple]:
    return [(f.id, f.severity, f.started_at, f.ended_at is None) for f in s.findings.active]


@pytest.mark.parametrize(("target", "window_s", "history_s"), [
    (60, 60.0, 3600.0),  # just past the hostile frames
    (250, 60.0, 3600.0),
    (250, 600.0, 3600.0),  # the window reaches back past the start
    (399, 3600.0, 3600.0),  # the end, the longest window
    (399, 60.0, 100.0),  # a history ring smaller than the recording: the last 100 s
    (30, 600.0, 3600.0),  # before the hostile frames, near the start
])
def test_seek_with_the_index_equals_playing(recording, target, window_s, history_s):
    t = float(recording.times[target])
    want = played(recording, target, history_s)
    got = sought(recording, t, window_s, history_s, index=True)
    assert_same_history(want, got, window_s)
    assert findings(got) == findings(want)
    assert got.last_frame is not None and got.last_frame.t == want.last_frame.t


@pytest.mark.parametrize("target", [40, 250, 399])
def test_seek_without_the_index_keeps_a_short_window_and_the_findings(recording, target):
    """Before the index is in (or without one) a window of ≤ 240 frames is still exact."""
    t = float(recording.times[target])
    want = played(recording, target, 3600.0)
    got = sought(recording, t, 60.0, 3600.0, index=False)
    assert_same_history(want, got, 60.0)
    assert findings(got) == findings(want)


def test_hostile_frames_are_blanked_or_skipped_as_playing_does(recording):
    ix = HistoryIndex(recording)
    ix.build()
    k = ix.gpu_keys.index("util")
    assert np.isnan(ix.data[k, 50, 0]) and not np.isnan(ix.data[k, 50, 1])  # 500 % is out of range
    assert not ix.ok[51] and not ix.ok[52]  # skipped
    assert np.isnan(ix.data[:, 53, 1]).all() and not np.isnan(ix.data[k, 53, 0])  # the lost GPU only
    assert ix.ok.sum() == recording.n_frames - 2


def test_a_partial_index_is_used_only_as_far_as_it_reaches(recording):
    ix = HistoryIndex(recording)
    for _ in range(3):
        assert ix.step(frames=10)
    assert ix.ready == 30 and not ix.done
    s = Session(recording.inventory, interval_s=1.0)
    assert not ix.fill(s.history, 0, 31)
    assert s.history.count == 0
    assert ix.fill(s.history, 0, 30)
    assert s.history.count == 30


@pytest.mark.parametrize(("frames", "gpus", "max_mb", "stride"), [
    (86400, 8, 64, 1),  # 24 h × 8 GPUs at 1 Hz: 39 MB, every frame
    (172800, 8, 64, 2),  # 48 h: every 2nd frame
    (400, 2, 0.001, 45),  # a tiny bound: 117 bytes a frame, ~1 KB
])
def test_index_memory_is_bounded(frames, gpus, max_mb, stride):
    """The index's size (4 bytes × (GPUs × 14 + 1) + 1 per frame) and the stride beyond the bound."""
    rec = type("R", (), {})()
    rec.n_frames = frames
    rec.inventory = type("I", (), {"devices": [None] * gpus})()
    rec.members = []
    ix = HistoryIndex(rec, max_bytes=int(max_mb * 1024 * 1024))
    assert ix.stride == stride
    assert ix.nbytes <= max_mb * 1024 * 1024 + 4 * (gpus * 14 + 1) + 1  # within one frame of the bound


def test_a_strided_index_fills_every_kth_frame(recording):
    """Beyond its memory bound the index keeps every k-th frame; a seek fills the window at that stride."""
    ix = HistoryIndex(recording, max_bytes=400 * 117 // 4)  # 2 GPUs: 117 bytes a frame → every 4th
    ix.build()
    assert ix.stride == 4
    s = Session(recording.inventory, interval_s=1.0)
    assert ix.fill(s.history, 100, 200)
    t, v = s.history.window("power", 0, 1e9)
    np.testing.assert_array_equal(t, recording.times[100:200:4])
    want = [f.gpus[0].power_w for f in recording.frames(100, 200)][::4]
    np.testing.assert_array_equal(v, np.array(want, dtype=np.float32))


_NUMBER = st.one_of(st.floats(allow_nan=True, allow_infinity=True, width=32), st.integers(-10, 10**13),
                    st.floats(-10, 1e4), st.integers(0, 200))
_VALUE = st.one_of(st.none(), _NUMBER, _NUMBER, _NUMBER, st.booleans(), st.just("x"))  # mostly numbers


@settings(max_examples=examples(80), deadline=None)
@given(st.lists(st.fixed_dictionaries({
    "util_gpu_pct": _VALUE, "power_w": _VALUE, "mem_used_bytes": _VALUE, "pcie_tx_bytes_per_s": _VALUE,
    "index": st.sampled_from([0, 0, 0, 1, 1, 5, -1]), "lost": st.sampled_from([False, False, False, True])}),
    min_size=1, max_size=3),
    st.one_of(st.none(), _VALUE))
def test_index_rows_equal_what_playing_the_line_stores(tmp_path_factory, gpus, tok):
    """Any frame line, hostile or not: the index row is what History.add stores for the played frame
    (skipped when the checked decode refuses it)."""
    import gzip
    import json

    inv = sim_source(SCENARIO).inventory  # 2 GPUs
    from gpuscope.core.codec import inventory_to_dict

    path = tmp_path_factory.mktemp("hyp") / "h.jsonl.gz"
    header = {"type": "header", "format": "gpuscope-recording", "version": 1, "inventory": inventory_to_dict(inv)}
    frame = {"t": 1000.0, "gpus": gpus}
    if tok is not None:
        frame["endpoints"] = [{"url": "http://x", "gen_tokens_per_s": tok}]
    with gzip.open(path, "wt") as f:
        f.write(json.dumps(header) + "\n" + json.dumps(frame) + "\n")
    rec = open_recording(path)
    assert rec.n_frames == 1
    ix = HistoryIndex(rec)
    ix.build()
    play = Session(rec.inventory, interval_s=1.0)
    for fr in rec.frames():
        play.history.add(fr)
    s = Session(rec.inventory, interval_s=1.0)
    assert ix.fill(s.history, 0, 1)
    assert s.history.count == play.history.count
    for key in play.history.data:
        for gpu, ring in enumerate(play.history.data[key]):  # the first sample, every GPU
            np.testing.assert_array_equal(s.history.data[key][gpu][:1], ring[:1], err_msg=f"{key} GPU{gpu}")
    np.testing.assert_array_equal(s.history.tok_s[:1], play.history.tok_s[:1])
