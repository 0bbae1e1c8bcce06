"""Recordings: round trip, crash safety, damaged and hostile files."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from helpers import examples, run_frames, sim_source, wait_for
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuscope.core.session import Session
from gpuscope.outputs.recorder import Recorder
from gpuscope.sources.recording import RecordingError, open_recording


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    path = tmp_path_factory.mktemp("rec") / "run.jsonl.gz"
    src = sim_source("a6000-tp2-pcie-gen1")
    s = Session(src.inventory, interval_s=1.0)
    s.start_recording(Recorder(str(path), src.inventory, command=["test"], interval_s=1.0))
    frames = []
    for k, f in enumerate(run_frames(src, 0, 40)):
        if k == 12:
            s.add_marker("phase: decode", t=f.t)
        frames.append(s.ingest(f))
    s.stop_recording()
    return path, frames


def test_round_trip(recorded):
    path, frames = recorded
    rec = open_recording(path)
    assert rec.complete and rec.problems == []
    assert rec.n_frames == len(frames) == 41
    assert rec.simulated and rec.header["scenario"] == "a6000-tp2-pcie-gen1"
    assert rec.frame(20).gpus[0].pcie_gen == frames[20].gpus[0].pcie_gen
    assert rec.frame(20).gpus[0].pcie_rx_bytes_per_s == pytest.approx(frames[20].gpus[0].pcie_rx_bytes_per_s, rel=1e-6)
    kinds = {e.kind for e in rec.events}
    assert {"marker", "finding_raised"} <= kinds
    assert rec.index_at(rec.times[5] + 0.5) == 5


def test_readable_with_standard_tools(recorded):
    path, _ = recorded
    with gzip.open(path, "rt") as f:
        lines = [json.loads(x) for x in f]
    assert lines[0]["type"] == "header" and lines[0]["format"] == "gpuscope-recording"
    assert lines[0]["simulated"] is True  # simulated data says so in the file
    assert lines[-1]["type"] == "end" and lines[-1]["frames"] == 41
    assert all("t" in x and "gpus" in x for x in lines[1:-1])


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.floats(0.0, 1.0))
def test_cut_at_any_byte_opens_or_fails_cleanly(recorded, tmp_path_factory, cut):
    path, frames = recorded
    raw = path.read_bytes()
    n = int(len(raw) * cut)
    p = tmp_path_factory.mktemp("cut") / "cut.jsonl.gz"
    p.write_bytes(raw[:n])
    try:
        rec = open_recording(p)
    except RecordingError as e:
        assert str(e).count("\n") == 0
        return
    for f in rec.frames():  # every indexed frame decodes
        assert f.gpus
    assert rec.n_frames <= len(frames)


@pytest.mark.slow
def test_crash_loses_at_most_the_last_second(tmp_path):
    """kill -9 of a recording process: the file opens with all but the last second."""
    out = tmp_path / "killed.jsonl.gz"
    p = subprocess.Popen([sys.executable, "-m", "gpuscope", "record", "-o", str(out), "--simulate", "mixed-4",
                          "--interval", "0.1"], stderr=subprocess.PIPE)

    def frames_on_disk() -> int:
        try:
            return open_recording(out).n_frames
        except RecordingError:  # not created yet, or only part of the header flushed
            return 0

    try:
        n = wait_for(lambda: frames_on_disk() >= 20 and frames_on_disk(), 60, "20 frames flushed to the recording")
        wait_for(lambda: frames_on_disk() > n, 10, "the next flush")
        time.sleep(0.9)  # not a wait for a condition: the kill lands just before the next flush, the worst moment
        t_kill = time.time()
        p.send_signal(signal.SIGKILL)
    finally:
        p.kill()
        p.wait()
    rec = open_recording(out)
    assert not rec.complete
    assert rec.n_frames >= 20
    # frames come every 0.1 s and are flushed every second: the file holds all but ~the last second
    assert t_kill - rec.times[-1] < 2.5


def test_flipped_bytes_give_a_partial_replay_or_clean_error(recorded, tmp_path):
    path, _ = recorded
    raw = bytearray(path.read_bytes())
    for k in range(len(raw) // 2, len(raw) // 2 + 40):
        raw[k] ^= 0xFF
    p = tmp_path / "flipped.jsonl.gz"
    p.write_bytes(bytes(raw))
    rec = open_recording(p)
    assert rec.problems  # says what was lost
    list(rec.frames())


@pytest.mark.parametrize("content,msg", [
    (b"", "empty file"),
    (b"hello world\n", "not a gpuscope recording"),
    (gzip.compress(b'{"some": "json"}\n'), "no gpuscope header"),
    (gzip.compress(b"\x00\x01garbage"), "not a gpuscope recording"),
    (gzip.compress(json.dumps({"type": "header", "format": "gpuscope-recording", "version": 99}).encode() + b"\n"),
     "format version 99 is newer"),
    (gzip.compress(json.dumps({"type": "header", "format": "gpuscope-recording", "version": 1,
                               "inventory": {"host": 3}}).encode() + b"\n"), "inventory is damaged"),
])
def test_bad_files_are_one_line_errors(tmp_path, content, msg):
    p = tmp_path / "bad.jsonl.gz"
    p.write_bytes(content)
    with pytest.raises(RecordingError, match=msg):
        open_recording(p)


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(RecordingError, match="no such file"):
        open_recording(tmp_path / "nope.gz")
    with pytest.raises(RecordingError, match="is a directory"):
        open_recording(tmp_path)


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_full_disk_stops_recording_but_the_session_goes_on():
    src = sim_source("mixed-4")
    s = Session(src.inventory)
    s.recorder = Recorder("/dev/full", src.inventory, force=True)
    for f in run_frames(src, 0, 3):
        s.ingest(f)
    assert s.recorder is None and "No space left on device" in s.record_error
    assert s.frames_seen == 4 and s.last_frame is not None


def test_uncompressed_copy_still_opens(recorded, tmp_path):
    path, frames = recorded
    p = tmp_path / "plain.jsonl"
    p.write_bytes(gzip.decompress(path.read_bytes()))
    rec = open_recording(p)
    assert rec.n_frames == len(frames) and rec.frame(3).gpus


def test_bundled_demo_is_a_real_h200_recording():
    from gpuscope.tui.run import demo_path

    p = demo_path()
    assert p.stat().st_size <= 2_000_000
    rec = open_recording(p)
    assert not rec.simulated and rec.complete
    assert {d.name for d in rec.inventory.devices} == {"NVIDIA H200"}
    texts = [e.text for e in rec.events if e.kind == "marker"]
    assert any("matmul" in t for t in texts) and any("all-reduce" in t for t in texts)
