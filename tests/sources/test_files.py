"""Output files (sources/files.py): what record and export write to with and without --force, and what they
refuse."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from helpers import ROOT

from gpuscope.sources.files import not_writable_as_file

DEMO = str(next((ROOT / "recordings").glob("*.jsonl.gz")))


def test_not_writable_as_file_names_a_directory(tmp_path):
    """Output paths that are not files: a directory is named as one (the old "exists; use --force" hint led to
    "cannot write adir: Is a directory" with --force), and a device that not_writable_as_file allows
    (/dev/null) records instead of stopping at the first frame on fsync's EINVAL (trial2)."""
    assert not_writable_as_file(tmp_path) == "is a directory, not a file"
    assert not_writable_as_file(tmp_path / "absent") is None
    (tmp_path / "f").write_text("x")
    assert not_writable_as_file(tmp_path / "f") is None


@pytest.mark.slow
@pytest.mark.parametrize("force", [[], ["--force"]])
@pytest.mark.parametrize("command", [
    ["record", "-o", "{out}", "--simulate", "healthy-gen4", "--duration", "1"],
    ["export", DEMO, "--csv", "{out}"],
])
def test_directory_output_is_named_a_directory(tmp_path, command, force):
    """Output paths that are not files: a directory is named as one (the old "exists; use --force" hint led to
    "cannot write adir: Is a directory" with --force), and a device that not_writable_as_file allows
    (/dev/null) records instead of stopping at the first frame on fsync's EINVAL (trial2)."""
    d = tmp_path / "adir"
    d.mkdir()
    (d / "keep").write_text("precious")
    args = [a.replace("{out}", str(d)) for a in command] + force
    out = subprocess.run([sys.executable, "-m", "gpuscope", *args], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1, out
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "is a directory, not a file" in lines[0] and "--force" not in lines[0], out.stderr
    assert (d / "keep").read_text() == "precious" and os.listdir(d) == ["keep"]


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists(os.devnull), reason="no /dev/null")
def test_record_to_dev_null_with_force_records(tmp_path):
    """Output paths that are not files: a directory is named as one (the old "exists; use --force" hint led to
    "cannot write adir: Is a directory" with --force), and a device that not_writable_as_file allows
    (/dev/null) records instead of stopping at the first frame on fsync's EINVAL (trial2)."""
    out = subprocess.run([sys.executable, "-m", "gpuscope", "record", "-o", os.devnull, "--force", "--simulate",
                          "healthy-gen4", "--duration", "2"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "recorded" in out.stderr and "stopped" not in out.stderr and "Invalid argument" not in out.stderr


@pytest.mark.parametrize("command", [
    ["record", "-o", "{out}", "--force", "--simulate", "healthy-gen4", "--duration", "1"],
    ["export", DEMO, "--csv", "{out}", "--force"],
])
def test_force_never_writes_into_a_fifo(tmp_path, command):
    """--force replaces a file, never writes into a FIFO, a device or a directory: `record -o FIFO --force`
    blocked forever waiting for a reader. One line, exit 1, quickly."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    args = [a.replace("{out}", str(fifo)) for a in command]
    out = subprocess.run([sys.executable, "-m", "gpuscope", *args], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1, out
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "named pipe" in lines[0] and "Traceback" not in out.stderr, out.stderr
