"""A recording whose first gzip member (the header's) is damaged says so: "damaged at byte N (why) before
its first complete second", exit 1, one line. One flipped byte in that member's CRC was reported as "not a
gpuscope recording" (the member's text was lost, and the next member's first line, a frame, was read as
the header: new-user trial). And flipping any one byte of a small recording never gives a traceback.
"""

from __future__ import annotations

import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from helpers import examples, run_frames, sim_source
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuscope.sources.recording import Recorder, RecordingError, damage_at, open_recording, read_recording

WHEN = "before its first complete second: nothing to read"


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> tuple[bytes, int]:
    """A real recording of 6 SIMULATED frames of 2 GPUs, and where its first member (the header's) ends."""
    p = tmp_path_factory.mktemp("small") / "r.jsonl.gz"
    rec = Recorder(p, sim_source("a6000-tp2-pcie-gen1").inventory, interval_s=1.0, fsync=False)
    for f in run_frames(sim_source("a6000-tp2-pcie-gen1"), 0, 5):
        rec.write(f, wait=True)
    rec.close()
    raw = p.read_bytes()
    d = zlib.decompressobj(31)
    d.decompress(raw)
    assert d.eof
    return raw, len(raw) - len(d.unused_data)


def flipped(raw: bytes, at: int, xor: int = 0x01) -> bytes:
    b = bytearray(raw)
    b[at] ^= xor
    return bytes(b)


@pytest.mark.parametrize(("back", "field"), [
    (8, "CRC"), (7, "CRC"), (6, "CRC"), (5, "CRC"),  # the trailer: CRC-32 of the text ...
    (4, "length"), (3, "length"), (2, "length"), (1, "length"),  # ... then its length mod 2**32
])
def test_a_flipped_byte_in_the_first_members_trailer_is_damage(tmp_path, small, back, field):
    raw, first_end = small
    p = tmp_path / "flip.jsonl.gz"
    with pytest.raises(RecordingError) as e:
        read_recording(p, flipped(raw, first_end - back))
    at = first_end - (8 if field == "CRC" else 4)  # said at the first byte of the field that failed
    assert str(e.value) == f"{p}: damaged at byte {at:,} (gzip {field} check failed) {WHEN}"


@pytest.mark.parametrize(("where", "why"), [
    (2, "not gzip data"),  # the compression method byte: not a gzip member at all
    (0.5, None),  # in the middle of the deflate data: corrupt data, or a CRC that no longer matches
])
def test_other_damage_in_the_first_member_is_damage_too(tmp_path, small, where, why):
    raw, first_end = small
    at = where if isinstance(where, int) else int(first_end * where)
    p = tmp_path / "flip.jsonl.gz"
    with pytest.raises(RecordingError) as e:
        read_recording(p, flipped(raw, at))
    msg = str(e.value)
    assert msg.startswith(f"{p}: damaged at byte ") and msg.endswith(WHEN), msg
    if why is not None:
        assert f"({why})" in msg


def test_damage_at_names_the_byte_and_the_reason(small):
    raw, first_end = small
    assert damage_at(flipped(raw, first_end - 6), 0) == (first_end - 8, "gzip CRC check failed")
    assert damage_at(flipped(raw, 2), 0) == (0, "not gzip data")
    assert damage_at(raw, 0) == (first_end - 1, "no damage found: the member is intact")


def test_summary_of_a_flipped_crc_is_one_line_exit_1(tmp_path, small):
    raw, first_end = small
    p = tmp_path / "flip.jsonl.gz"
    p.write_bytes(flipped(raw, first_end - 7))
    out = subprocess.run([sys.executable, "-m", "gpuscope", "summary", str(p)], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 1, out
    assert out.stderr == (f"gpuscope: error: {p}: damaged at byte {first_end - 8:,} (gzip CRC check failed) "
                          f"{WHEN}\n")


@settings(max_examples=examples(300), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.floats(0, 1, exclude_max=True), st.integers(1, 255))
def test_any_one_flipped_byte_is_a_recording_or_a_one_line_error(tmp_path, small, where, xor):
    """Flipping any single byte opens the file or raises RecordingError (never anything else), one line
    naming the file; a flip inside the first member (past gzip's two magic bytes, which make it "not
    gzip") is never called "not a gpuscope recording"."""
    raw, first_end = small
    at = int(where * len(raw))
    p = Path(tmp_path) / "flip.jsonl.gz"
    p.write_bytes(flipped(raw, at, xor))
    try:
        rec = open_recording(p)
    except RecordingError as e:
        msg = str(e)
        assert "\n" not in msg and msg.startswith(f"{p}: ")
        if 2 <= at < first_end:
            assert "not a gpuscope recording" not in msg, (at, xor, msg)
        return
    for _ in rec.frames():  # every frame it kept decodes
        pass
