"""A full disk while recording: what the recorder says it kept is what the file holds (what `summary`
then reads), never more. After a failed write or sync the recorder cuts the file back to its last flush
point, so half a deflate block never follows it.

Three ways in: ``os.fsync`` failing with ENOSPC (the harness of tests/e2e/test_runtime.py), the file taking
part of a write then ENOSPC (a wrapper around the recorder's file), and end to end a real
``gpuscope record`` under a file-size limit (RLIMIT_FSIZE: the kernel cuts the write short and fails the
next one, as a full disk does; EFBIG instead of ENOSPC).
"""

from __future__ import annotations

import errno
import os
import re
import resource
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import run_frames, sim_source

from gpuscope.core import recording_format
from gpuscope.outputs.recorder import Recorder
from gpuscope.sources import recording as recording_mod
from gpuscope.sources.recording import RecordingError, open_recording


def frames_in(path: Path) -> int:
    try:
        return open_recording(path).n_frames
    except RecordingError:
        return 0


@pytest.fixture(scope="module")
def frames() -> list[Any]:
    return run_frames(sim_source("mixed-4"), 0, 59)


def failing_fsync(fail_at: int):
    """An ``os.fsync`` whose call number ``fail_at`` and every later one fail with ENOSPC (a full disk)."""
    calls = [0]
    real = os.fsync

    def fsync(fd: int) -> None:
        calls[0] += 1
        if calls[0] >= fail_at:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(fd)
    fsync.calls = calls  # type: ignore[attr-defined]
    return fsync


@pytest.mark.parametrize("fail_at", [1, 2, 3, 7, 20])
def test_a_failed_sync_keeps_what_was_synced_before_it(tmp_path, monkeypatch, frames, fail_at):
    """fsync number ``fail_at`` (the header's is 1) fails with ENOSPC: the frames synced before it are
    kept, counted, and all the file holds."""
    fsync = failing_fsync(fail_at)

    monkeypatch.setattr(recording_mod.os, "fsync", fsync)
    path = tmp_path / "r.jsonl.gz"
    rec = Recorder(path, sim_source("mixed-4").inventory, flush_s=0.0)
    for f in frames[:40]:
        rec.write(f, wait=True)
    rec.close()
    assert rec.error is not None and "No space left on device" in rec.error, (fsync.calls, rec.frames)
    assert rec.kept == frames_in(path) == max(0, fail_at - 2)  # one sync per frame (flush_s=0) after the header's
    if fail_at == 1:  # not even the header reached the disk: the empty file gpuscope made is removed
        assert rec.error.endswith(f"nothing was written; removed the empty {path}") and not path.exists()
    else:
        assert rec.error.endswith(f"{rec.kept:,} frame{'s' if rec.kept != 1 else ''} kept")


class ShortFile:
    """The recorder's file, taking ``budget`` more bytes: the write that crosses it is cut short (the
    bytes up to the budget are written) and the next one fails with ENOSPC, as on a full disk."""

    def __init__(self, f: Any, budget: int):
        self.f = f
        self.budget = budget

    def write(self, data: Any) -> int:
        if self.budget <= 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        n = self.f.write(bytes(data[:self.budget]))
        self.budget -= n
        return n

    def fileno(self) -> int:
        return self.f.fileno()

    def close(self) -> None:
        self.f.close()


@pytest.mark.parametrize("budget", [1, 50, 300, 1000, 2500, 6000])
@pytest.mark.parametrize("flush_s", [0.0, 3600.0])
def test_a_short_write_keeps_what_was_flushed_before_it(tmp_path, frames, budget, flush_s):
    """The disk fills up ``budget`` bytes after the header: with a flush after every frame, or none but
    at member ends (flush_s an hour), the count kept is what the file holds, and the file opens."""
    path = tmp_path / "r.jsonl.gz"
    old = recording_format.MEMBER_BYTES
    recording_format.MEMBER_BYTES = 20_000  # a few members in 60 frames of 4 GPUs
    try:
        rec = Recorder(path, sim_source("mixed-4").inventory, flush_s=flush_s, fsync=False)
        rec._f = ShortFile(rec._f, budget)  # type: ignore[assignment]
        for f in frames:
            rec.write(f, wait=True)
        rec.close()
    finally:
        recording_format.MEMBER_BYTES = old
    assert rec.error is not None and "No space left on device" in rec.error
    assert 0 <= rec.kept < len(frames)
    assert frames_in(path) == rec.kept
    assert path.stat().st_size == rec._durable_bytes  # cut back to the last flush point


@pytest.mark.parametrize("flush_s", [0.0, 1.0])
@pytest.mark.parametrize("run", range(3))
def test_a_clean_close_keeps_every_frame(tmp_path, frames, flush_s, run):
    """Frames queued while the writer waits idle, then close(): all written. (The writer used to break
    out when it found the queue empty and the recorder closing, dropping what came between: with
    flush_s=0 nearly always.)"""
    path = tmp_path / "r.jsonl.gz"
    rec = Recorder(path, sim_source("mixed-4").inventory, fsync=False, flush_s=flush_s)
    for f in frames:
        rec.write(f, wait=True)
    rec.close()
    assert rec.error is None and rec.kept == rec.frames == len(frames) == frames_in(path)


def _file_size_limit(limit: int) -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails (EFBIG) instead of killing the process
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


@pytest.mark.slow
def test_record_on_a_full_disk_says_what_summary_then_reads(tmp_path):
    path = tmp_path / "full.jsonl.gz"
    out = subprocess.run([sys.executable, "-m", "gpuscope", "record", "--simulate", "a6000-tp2-pcie-gen1",
                          "--interval", "0.1", "--duration", "60", "-o", str(path)],
                         preexec_fn=lambda: _file_size_limit(2300), capture_output=True, text=True, timeout=120)
    assert out.returncode == 1, out
    m = re.search(r"stopped early: (\d+) SIMULATED frames? kept of (\d+) sampled, of 2 GPUs", out.stderr)
    assert m, out.stderr
    kept, sampled = int(m[1]), int(m[2])
    assert 0 < kept < sampled
    assert f"; {kept} frames kept\n" in out.stderr  # the writer's own line agrees
    s = subprocess.run([sys.executable, "-m", "gpuscope", "summary", "--json", str(path)], capture_output=True,
                       text=True, timeout=60)
    assert s.returncode == 0, s.stderr
    assert f'"frames": {kept},' in s.stdout


@pytest.mark.slow
def test_record_of_a_command_on_a_full_disk_says_it_once(tmp_path):
    """`record -- CMD`: the command's last frame after it exits went through the error path again, and the
    "recording stopped" line was printed twice. Once, and the command's status passes on."""
    path = tmp_path / "full.jsonl.gz"
    out = subprocess.run([sys.executable, "-m", "gpuscope", "record", "--simulate", "a6000-tp2-pcie-gen1",
                          "--interval", "0.1", "-o", str(path), "--", sys.executable, "-c",
                          "import time, sys; time.sleep(6); sys.exit(7)"],
                         preexec_fn=lambda: _file_size_limit(1200), capture_output=True, text=True, timeout=120)
    assert out.returncode == 7, out
    assert out.stderr.count("recording stopped") == 1, out.stderr
    assert "stopped early:" in out.stderr


@pytest.mark.parametrize("fail_at, there_before, force, removed", [
    (1, False, False, True),  # the header's sync fails: the file gpuscope created is empty, and removed
    (1, False, True, True),  # --force, but nothing was there: still gpuscope's own empty file
    (1, True, True, False),  # --force over a user's file: not gpuscope's, never removed (even if now empty)
    (2, False, False, False),  # the first frame's sync fails: the header is kept, the file opens, it stays
])
def test_an_empty_file_left_by_a_full_disk_is_removed_only_if_gpuscope_made_it(
        tmp_path, monkeypatch, frames, fail_at, there_before, force, removed):
    fsync = failing_fsync(fail_at)

    path = tmp_path / "r.jsonl.gz"
    if there_before:
        path.write_bytes(b"the user's data")
    monkeypatch.setattr(recording_mod.os, "fsync", fsync)
    rec = Recorder(path, sim_source("mixed-4").inventory, flush_s=0.0, force=force)
    for f in frames[:5]:
        rec.write(f, wait=True)
    rec.close()
    assert rec.kept == 0 and rec.error is not None and "No space left on device" in rec.error
    assert rec.removed == removed
    assert path.exists() != removed
    assert ("nothing was written; removed the empty" in rec.error) == removed, rec.error
    if not removed:
        assert rec.error.endswith("; 0 frames kept")


@pytest.mark.slow
def test_record_of_a_command_that_wrote_nothing_removes_the_empty_file(tmp_path):
    """`record -o F -- CMD` where not even the header fits: F was created by gpuscope and is empty, so it is
    removed and both lines say so (it was left behind as a 0-byte file)."""
    path = tmp_path / "full.jsonl.gz"
    out = subprocess.run([sys.executable, "-m", "gpuscope", "record", "--simulate", "a6000-tp2-pcie-gen1",
                          "--interval", "0.1", "-o", str(path), "--", sys.executable, "-c", "import sys; sys.exit(3)"],
                         preexec_fn=lambda: _file_size_limit(100), capture_output=True, text=True, timeout=120)
    assert out.returncode == 3, out
    assert not path.exists()
    assert f"; nothing was written; removed the empty {path}\n" in out.stderr, out.stderr
    assert f"to nothing: removed the empty {path}" in out.stderr, out.stderr
    assert out.stderr.count("recording stopped") == 1, out.stderr
