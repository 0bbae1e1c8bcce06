"""A recording whose every frame is damaged (valid JSON, wrong types) is one error for summary, export
and compare, not "0 frames" with exit 0 (new-user trial); one with some damaged frames still opens and
says how many, in one readable line."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT

DEMO = next((ROOT / "recordings").glob("*.jsonl.gz"))


def damaged_copy(tmp_path: Path, every: int) -> Path:
    """The demo with every ``every``-th frame's GPU list replaced by a number (the validation gate fails)."""
    out, k = [], 0
    for ln in gzip.open(DEMO, "rt").read().splitlines():
        if '"gpus":[' in ln:
            if k % every == 0:
                ln = ln.replace('"gpus":[', '"gpus":7,"g":[', 1)
            k += 1
        out.append(ln)
    p = tmp_path / f"damaged-{every}.jsonl.gz"
    with gzip.open(p, "wt") as f:
        f.write("\n".join(out) + "\n")
    return p


def gpuscope(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuscope", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("command", [["summary", "{f}"], ["export", "{f}", "--csv", "{out}"],
                                     ["compare", str(DEMO), "{f}"]])
def test_every_frame_damaged_is_one_error(tmp_path, command):
    f = damaged_copy(tmp_path, 1)
    out = gpuscope(*[a.replace("{f}", str(f)).replace("{out}", str(tmp_path / "o.csv")) for a in command])
    assert out.returncode == 1, out
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "no frame can be read" in lines[0] and "frame.gpus" in lines[0], out.stderr
    assert not (tmp_path / "o.csv").exists()


def test_some_damaged_frames_still_open_in_one_line(tmp_path):
    f = damaged_copy(tmp_path, 3)  # a third of the frames
    out = gpuscope("summary", str(f))
    assert out.returncode == 0, out.stderr
    problems = [ln for ln in out.stdout.splitlines() if ln.startswith("problems:")]
    assert len(problems) == 1 and "more" in problems[0] and len(problems[0]) < 1200, problems


def test_export_and_compare_say_an_input_was_cut_off(tmp_path):
    """`summary` said a file was cut off; export and compare said nothing (their means are of what survived)."""
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(DEMO.read_bytes()[:5000])
    out = gpuscope("export", str(cut), "--csv", str(tmp_path / "o.csv"))
    assert out.returncode == 0 and "cut off" in out.stderr and out.stderr.count("\n") == 2, out.stderr
    out = gpuscope("compare", str(DEMO), str(cut))
    assert out.returncode == 0 and any(ln.startswith("note: B:") and "cut off" in ln for ln in out.stdout.splitlines())
