"""Opening a recording: the fast path (members inflated ahead on threads, intact members indexed without
splitting their lines) reads exactly what the line-by-line reader reads, damaged or hostile files
included; and a file cut inside its first member says so."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest
from helpers import examples, record_sim, run_frames, sim_source
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuscope.core.codec import inventory_to_dict
from gpuscope.core.model import DeviceInfo, Inventory
from gpuscope.outputs.recorder import Recorder
from gpuscope.sources import recording_scan
from gpuscope.sources.recording import MAGIC, RecordingError, damage_at, open_recording, read_recording
from gpuscope.sources.recording_scan import events_at, threads_for

INV = Inventory(host="h", devices=tuple(DeviceInfo(index=i, name="GPU", uuid=f"u{i}", bus_id=f"b{i}")
                                        for i in range(2)))
HEADER = json.dumps({"type": "header", "format": "gpuscope-recording", "version": 1, "interval_s": 1.0,
                     "inventory": inventory_to_dict(INV)}, separators=(",", ":")).encode()


def frame_line(t: float, events: bool = False, where: str = "end") -> bytes:
    d: dict[str, Any] = {"t": t, "gpus": [{"index": 0, "util_gpu_pct": 50, "power_w": 300.5},
                                          {"index": 1, "util_gpu_pct": 7}]}
    ev = [{"t": t, "kind": "mark", "text": f"m{t:g}"}]
    if events and where == "first":
        d = {"events": ev, **d}
    elif events:
        d["events"] = ev
    return json.dumps(d, separators=(",", ":")).encode()


# the kinds of line a member may hold: the recorder's own, and what damage or a hand edit leaves
LINES: dict[str, Any] = {
    "frame": lambda t: frame_line(t),
    "events": lambda t: frame_line(t, events=True),
    "events-first": lambda t: frame_line(t, events=True, where="first"),
    "bad-events": lambda t: frame_line(t)[:-1] + b',"events":[{"kind":7}]}',
    "nan-t": lambda t: b'{"t":NaN,"gpus":[]}',
    "huge-t": lambda t: b'{"t":1e300,"gpus":[]}',
    "no-comma": lambda t: b'{"t":' + str(t).encode() + b"}",
    "text-t": lambda t: b'{"t":"soon","gpus":[]}',
    "end": lambda t: b'{"type":"end","t":' + str(t).encode() + b',"frames":3}',
    "end-bad": lambda t: b'{"type":"end","frames":true}',
    "junk": lambda t: b"hello",
    "empty": lambda t: b"",
    "header-again": lambda t: HEADER,
    "key-in-string": lambda t: frame_line(t)[:-1] + b',"note":"\\"events\\":"}',
}


def build(members: list[list[str]], header_alone: bool, trailing_newline: bool) -> bytes:
    t = 1.7e9
    chunks: list[bytes] = []
    first = [HEADER]
    for m, kinds in enumerate(members):
        lines = [] if m else list(first)
        for kind in kinds:
            t += 1.0
            lines.append(LINES[kind](t))
        if m == 0 and header_alone:
            chunks.append(gzip.compress(b"\n".join(lines[:1]) + b"\n", mtime=0))
            lines = lines[1:]
        text = b"\n".join(lines) + (b"\n" if trailing_newline and lines else b"")
        chunks.append(gzip.compress(text, mtime=0))
    return b"".join(chunks)


def mutate(raw: bytes, muts: list[tuple[str, float, int]]) -> bytes:
    b = bytearray(raw)
    for kind, f, k in sorted(((kind, f, k) for kind, f, k in muts), key=lambda m: -m[1]):
        pos = int(f * max(0, len(b) - 1))
        if not b:
            break  # cut to nothing already
        if kind == "flip":
            b[pos] ^= (k % 255) + 1
        elif kind == "delete":
            del b[pos:pos + k]
        elif kind == "cut":
            del b[pos:]
        elif kind == "magic":  # gzip's magic where no member starts: the look-ahead's false start
            b[pos:pos] = MAGIC + bytes((pos + i) % 256 for i in range(k % 12))
        else:
            b[pos:pos] = bytes((pos * 31 + i) % 256 for i in range(k))
    return bytes(b)


def opened(path: Path, raw: bytes, **kw: Any) -> Any:
    """Everything a reader can see of an opened recording (or its one-line error)."""
    try:
        r = read_recording(path, raw, **kw)
    except RecordingError as e:
        return ("error", str(e))
    lines = [r.raw_line(i) for i in range(r.n_frames)]
    return (r.header, r.times.tolist(), [(m.offset, m.end, m.first, m.count, m.keep) for m in r.members],
            r.events, r.complete, r.problems, r.damaged_at, r.expected_frames, lines)


member = st.lists(st.sampled_from(sorted(LINES)), min_size=0, max_size=6)
mutation = st.tuples(st.sampled_from(["flip", "delete", "insert", "cut", "magic"]), st.floats(0, 1),
                     st.integers(1, 64))


@settings(max_examples=examples(150), deadline=None, derandomize=True)
@given(st.lists(member, min_size=1, max_size=6), st.booleans(), st.booleans(),
       st.lists(mutation, max_size=3), st.sampled_from([0, 1, 3]), st.sampled_from([60, 10**9]))
def test_fast_and_threaded_open_read_what_the_line_reader_reads(tmp_path_factory, members, header_alone,
                                                                trailing_newline, muts, threads, keep_text):
    raw = mutate(build(members, header_alone, trailing_newline), muts)
    if not raw:
        return
    path = tmp_path_factory.getbasetemp() / "x.jsonl.gz"
    path.write_bytes(raw)  # frames are read back from the file
    want = opened(path, raw, threads=0, fast=False)
    mp = pytest.MonkeyPatch()
    try:
        mp.setattr(recording_scan, "KEEP_TEXT", keep_text)  # 60: every member handed back and inflated again
        assert opened(path, raw, threads=threads) == want
    finally:
        mp.undo()


def test_plain_text_recordings_read_the_same():
    raw = HEADER + b"\n" + b"\n".join(LINES[k](1.7e9 + i) for i, k in enumerate(sorted(LINES) * 2)) + b"\n"
    assert opened(Path("x.jsonl"), raw) == opened(Path("x.jsonl"), raw, fast=False)


@pytest.mark.parametrize(("text", "want"), [
    (b"", []),
    (b'{"t":1,"events":[]}', [7]),
    (b'"events":"events":', [0, 9]),
    (b'"clock_event_reasons":1,"event":2', []),
    (b'x\n"events":\n', [2]),
])
def test_events_at(text, want):
    assert events_at(text) == want


@pytest.mark.parametrize(("size", "cpus", "want"), [
    (1000, 8, 0),  # a small file: no pool
    (50_000_000, 1, 0),  # one CPU: no pool
    (50_000_000, 2, 1),  # one CPU left to the walk
    (50_000_000, 3, 2),
    (50_000_000, 16, 4),  # at most 4
])
def test_threads_for(monkeypatch, size, cpus, want):
    monkeypatch.setattr(recording_scan.os, "sched_getaffinity", lambda _pid: set(range(cpus)))
    assert threads_for(size) == want


# ----------------------------------------------------------------- a file cut inside its first member
@pytest.fixture(scope="module")
def small(tmp_path_factory) -> tuple[bytes, int]:
    """A real recording (3 frames) and where its first member (the header's) ends."""
    from gpuscope.core.model import Frame, GpuReading
    from gpuscope.outputs.recorder import Recorder
    from gpuscope.sources.recording import open_recording

    p = tmp_path_factory.mktemp("small") / "r.jsonl.gz"
    r = Recorder(p, INV, interval_s=1.0, fsync=False)
    for i in range(3):
        r.write(Frame(t=1.7e9 + i, gpus=(GpuReading(index=0, util_gpu_pct=5.0),)), wait=True)
    r.close()
    return p.read_bytes(), open_recording(p).members[0].offset


CUT = "cut off before its first complete second ({n:,} bytes): nothing to read"


@pytest.mark.parametrize(("cut", "want"), [
    (1, CUT),  # one byte of gzip's magic
    (2, CUT),
    (3, CUT),  # the magic, nothing more
    (10, CUT),  # gzip's header, no data
    (40, CUT),
    (-12, CUT),  # the header line's last bytes missing
])
def test_a_file_cut_inside_its_first_member_says_so(tmp_path, small, cut, want):
    raw, first_end = small
    n = cut if cut > 0 else first_end + cut
    p = tmp_path / "cut.jsonl.gz"
    p.write_bytes(raw[:n])
    with pytest.raises(RecordingError) as e:
        read_recording(p, raw[:n])
    assert str(e.value) == f"{p}: " + want.format(n=n)


@pytest.mark.parametrize("short", [1, 8])
def test_a_whole_header_without_its_gzip_trailer_opens_with_no_frames(tmp_path, small, short):
    raw, first_end = small
    p = tmp_path / "cut.jsonl.gz"
    rec = read_recording(p, raw[:first_end - short])
    assert rec.n_frames == 0 and rec.problems == ["the file ends mid-stream (cut off); the last partial second is lost"]


@pytest.mark.parametrize(("content", "want"), [
    (b"PK\x03\x04 a zip file", "not a gpuscope recording (not gzip-compressed JSON lines)"),
    (b"\x1fX", "not a gpuscope recording (not gzip-compressed JSON lines)"),
    (gzip.compress(b"a log line\nanother\n"), "not a gpuscope recording (first line: "),
    (gzip.compress(b""), "not a gpuscope recording (no header line)"),
    (MAGIC + bytes(7) + b"\xff" * 30,  # damaged, not cut
     "damaged at byte 10 (corrupt compressed data) before its first complete second: nothing to read"),
])
def test_files_that_are_not_recordings_are_not_called_cut(tmp_path, content, want):
    p = tmp_path / "x.gz"
    with pytest.raises(RecordingError) as e:
        read_recording(p, content)
    assert str(e.value).startswith(f"{p}: {want}")


def test_summary_of_a_file_cut_in_its_first_member_is_one_line_exit_1(tmp_path, small):
    import subprocess
    import sys

    raw, first_end = small
    p = tmp_path / "cut.jsonl.gz"
    p.write_bytes(raw[:first_end // 2])
    out = subprocess.run([sys.executable, "-m", "gpuscope", "summary", str(p)], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 1, out
    assert out.stderr == f"gpuscope: error: {p}: {CUT.format(n=first_end // 2)}\n"


WHEN = "before its first complete second: nothing to read"


@pytest.fixture(scope="module")
def six_frames(tmp_path_factory) -> tuple[bytes, int]:
    """A real recording of 6 SIMULATED frames of 2 GPUs, and where its first member (the header's) ends."""
    p = tmp_path_factory.mktemp("six_frames") / "r.jsonl.gz"
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
def test_a_flipped_byte_in_the_first_members_trailer_is_damage(tmp_path, six_frames, back, field):
    """A recording whose first gzip member (the header's) is damaged says so: "damaged at byte N (why) before its
    first complete second", exit 1, one line. One flipped byte in that member's CRC was reported as "not a
    gpuscope recording" (the member's text was lost, and the next member's first line, a frame, was read as
    the header). And flipping any one byte of a small recording never gives a traceback."""
    raw, first_end = six_frames
    p = tmp_path / "flip.jsonl.gz"
    with pytest.raises(RecordingError) as e:
        read_recording(p, flipped(raw, first_end - back))
    at = first_end - (8 if field == "CRC" else 4)  # said at the first byte of the field that failed
    assert str(e.value) == f"{p}: damaged at byte {at:,} (gzip {field} check failed) {WHEN}"


@pytest.mark.parametrize(("where", "why"), [
    (2, "not gzip data"),  # the compression method byte: not a gzip member at all
    (0.5, None),  # in the middle of the deflate data: corrupt data, or a CRC that no longer matches
])
def test_other_damage_in_the_first_member_is_damage_too(tmp_path, six_frames, where, why):
    """A recording whose first gzip member (the header's) is damaged says so: "damaged at byte N (why) before its
    first complete second", exit 1, one line. One flipped byte in that member's CRC was reported as "not a
    gpuscope recording" (the member's text was lost, and the next member's first line, a frame, was read as
    the header). And flipping any one byte of a small recording never gives a traceback."""
    raw, first_end = six_frames
    at = where if isinstance(where, int) else int(first_end * where)
    p = tmp_path / "flip.jsonl.gz"
    with pytest.raises(RecordingError) as e:
        read_recording(p, flipped(raw, at))
    msg = str(e.value)
    assert msg.startswith(f"{p}: damaged at byte ") and msg.endswith(WHEN), msg
    if why is not None:
        assert f"({why})" in msg


def test_damage_at_names_the_byte_and_the_reason(six_frames):
    """A recording whose first gzip member (the header's) is damaged says so: "damaged at byte N (why) before its
    first complete second", exit 1, one line. One flipped byte in that member's CRC was reported as "not a
    gpuscope recording" (the member's text was lost, and the next member's first line, a frame, was read as
    the header). And flipping any one byte of a small recording never gives a traceback."""
    raw, first_end = six_frames
    assert damage_at(flipped(raw, first_end - 6), 0) == (first_end - 8, "gzip CRC check failed")
    assert damage_at(flipped(raw, 2), 0) == (0, "not gzip data")
    assert damage_at(raw, 0) == (first_end - 1, "no damage found: the member is intact")


def test_summary_of_a_flipped_crc_is_one_line_exit_1(tmp_path, six_frames):
    """A recording whose first gzip member (the header's) is damaged says so: "damaged at byte N (why) before its
    first complete second", exit 1, one line. One flipped byte in that member's CRC was reported as "not a
    gpuscope recording" (the member's text was lost, and the next member's first line, a frame, was read as
    the header). And flipping any one byte of a small recording never gives a traceback."""
    raw, first_end = six_frames
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
def test_any_one_flipped_byte_is_a_recording_or_a_one_line_error(tmp_path, six_frames, where, xor):
    """A recording whose first gzip member (the header's) is damaged says so: "damaged at byte N (why) before its
    first complete second", exit 1, one line. One flipped byte in that member's CRC was reported as "not a
    gpuscope recording" (the member's text was lost, and the next member's first line, a frame, was read as
    the header). And flipping any one byte of a small recording never gives a traceback.

    Flipping any single byte opens the file or raises RecordingError (never anything else), one line
    naming the file; a flip inside the first member (past gzip's two magic bytes, which make it "not
    gzip") is never called "not a gpuscope recording"."""
    raw, first_end = six_frames
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


def test_a_recording_recompressed_in_one_member_past_the_cap_says_so(tmp_path, monkeypatch):
    """``zcat … | gzip`` of a long recording makes one member holding more text than a reader inflates at once:
    the error said "corrupt compressed data" (gzip -t passes); it says what the file is and how to read it."""
    import gzip as _gzip

    from gpuscope.sources import recording

    src = tmp_path / "a.jsonl.gz"
    record_sim(src, "healthy-gen4", 3)
    text = _gzip.open(src).read()
    whole = tmp_path / "whole.jsonl.gz"
    whole.write_bytes(_gzip.compress(text))  # one member, as gzip makes it
    assert recording.open_recording(whole).n_frames >= 3  # under the cap: read
    monkeypatch.setattr(recording, "MAX_MEMBER_TEXT", len(text) // 2)  # the cap, scaled to this small file
    with pytest.raises(recording.RecordingError) as e:
        recording.open_recording(whole)
    assert "one gzip member inflates beyond" in str(e.value) and "zcat FILE > FILE.jsonl" in str(e.value)
    assert "corrupt" not in str(e.value)
