"""Recordings joined in one file (`cat a.jsonl.gz b.jsonl.gz`) and files a JSON tool rewrote.

A second header starts another recording: on another machine it is a part of its own, read against its own
inventory; on the same machine with the same GPUs (a recording resumed) it joins the part before, and the
reader says so. Real recordings of the simulated NVML (an L40S and an RTX A6000 machine)."""

from __future__ import annotations

import gzip
import json

import pytest
from helpers import record_sim as record

from gpuscope.core.model import DeviceInfo, Inventory
from gpuscope.sources.recording import (
    RecordingError,
    inventory_change,
    open_recording,
    part_lines,
    write_lines,
)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("parts")
    return {"l40s": record(d / "l40s.jsonl.gz", "power-capped", 12, marker="l40s phase"),
            "a6000": record(d / "a6000.jsonl.gz", "a6000-tp2-pcie-gen1", 8, marker="a6000 phase"),
            "a6000b": record(d / "a6000b.jsonl.gz", "a6000-tp2-pcie-gen1", 5, start=100.0)}


def joined(tmp_path, *paths, name="joined.jsonl.gz"):
    out = tmp_path / name
    out.write_bytes(b"".join(p.read_bytes() for p in paths))  # what `cat a b > out` does
    return out


def test_two_machines_are_two_parts_read_apart(files, tmp_path):
    rec = open_recording(joined(tmp_path, files["l40s"], files["a6000"]))
    assert rec.mixed and [(p.number, p.start, p.stop) for p in rec.parts] == [(1, 0, 12), (2, 12, 20)]
    assert rec.problems == [], "a second header is not damage"
    assert rec.notes == ["a second recording starts at frame 12 (different machine: sim-powercap 2× NVIDIA L40S → "
                         "sim-a6000-tp2 2× NVIDIA RTX A6000)"]
    assert rec.complete and rec.expected_frames == 20
    a, b = rec.part(1), rec.part(2)
    assert (a.n_frames, b.n_frames) == (12, 8)
    assert a.inventory.devices[0].name == "NVIDIA L40S" and b.inventory.devices[0].name == "NVIDIA RTX A6000"
    assert [e.text for e in a.events if e.kind == "marker"] == ["l40s phase"]
    assert [e.text for e in b.events if e.kind == "marker"] == ["a6000 phase"]
    alone = open_recording(files["a6000"])
    assert [b.frame(i) for i in range(b.n_frames)] == [alone.frame(i) for i in range(alone.n_frames)]
    assert list(b.times) == list(alone.times) and b.complete and b.expected_frames == 8
    assert b.index_at(alone.times[3]) == 3
    with pytest.raises(RecordingError, match="has 2 parts: no part 3"):
        rec.part(3)


def test_the_same_machine_resumed_is_joined_and_said(files, tmp_path):
    rec = open_recording(joined(tmp_path, files["a6000"], files["a6000b"]))
    assert not rec.mixed and len(rec.parts) == 1 and len(rec.parts[0].marks) == 2
    assert rec.n_frames == 13 and rec.complete and rec.expected_frames == 13 and rec.problems == []
    assert rec.notes == ["a second recording starts at frame 8 (same machine and GPUs: resumed after 1m33s; joined)"]
    assert rec.part(1) is rec


OVERLAP = ("part 2 overlaps part 1 in time (a second recording starts at frame 8, 7s before part 1's last frame; "
           "same machine and GPUs): kept apart")


def test_a_recording_joined_to_itself_is_two_parts_never_counted_twice(files, tmp_path):
    """`cat a a`: time goes back at the second header, so the same moments would be counted twice: two parts."""
    rec = open_recording(joined(tmp_path, files["a6000"], files["a6000"]))
    assert rec.mixed and [(p.start, p.stop) for p in rec.parts] == [(0, 8), (8, 16)]
    assert rec.notes == [OVERLAP] and rec.parts[1].note == OVERLAP and rec.problems == []
    assert rec.parts_line().startswith(OVERLAP + "; pick one with --part N (1–2)")
    one, two = rec.part(1), rec.part(2)
    assert [one.frame(i) for i in range(8)] == [two.frame(i) for i in range(8)]
    assert two.notes == [f"part 2 of 2: frames 8–15 of the file; {OVERLAP}"] and two.complete


def test_two_recorders_at_once_are_kept_apart(files, tmp_path):
    """Two recorders of one machine running at once (frames 0–7 and 3–10 s): the second starts 4 s back."""
    other = record(tmp_path / "other.jsonl.gz", "a6000-tp2-pcie-gen1", 8, start=3.0)
    rec = open_recording(joined(tmp_path, files["a6000"], other))
    assert rec.mixed and [p.n_frames for p in rec.parts] == [8, 8]
    assert rec.notes == [OVERLAP.replace("7s before", "4s before")]
    rec = open_recording(joined(tmp_path, other, files["a6000"]))  # the other order: the later-started first
    assert rec.mixed and rec.notes == [OVERLAP.replace("7s before", "10s before")]


def test_an_overlap_after_a_resume_is_said_against_the_joined_part(files, tmp_path):
    """a, a resumed 1m33s later (joined), then a again: it goes back before the resumed part's last frame."""
    rec = open_recording(joined(tmp_path, files["a6000"], files["a6000b"], files["a6000"]))
    assert [(p.start, p.stop, len(p.marks)) for p in rec.parts] == [(0, 13, 2), (13, 21, 1)]
    assert rec.notes == ["a second recording starts at frame 8 (same machine and GPUs: resumed after 1m33s; joined)",
                         "part 2 overlaps part 1 in time (a third recording starts at frame 13, 1m44s before part 1's "
                         "last frame; same machine and GPUs): kept apart"]


@pytest.mark.parametrize("times, frame, want", [
    ([0.0, 1.0, 2.0, 3.0], 2, ""),  # time goes on: a resumed recording
    ([0.0, 1.0, 1.0, 2.0], 2, ""),  # the same second is not back
    ([0.0, 5.0, 2.0, 3.0], 2, "3s before part 1's last frame"),
    ([0.0, 1.0, 0.7, 2.0], 2, "0.3s before part 1's last frame"),  # under a second: not "0s"
    ([9.0, 1.0, 5.0, 6.0], 2, "4s before part 1's last frame"),  # the latest frame of the part, not its last in the file
    ([0.0, 1.0], 0, ""),  # no frame before
])
def test_overlap_change(times, frame, want):
    from gpuscope.sources.recording import _PartMark, overlap_change

    mark = _PartMark(frame, 0, {}, _inv(), b"", seq=1)
    got = overlap_change(times, 0, mark, 1)
    assert (want in got and got.startswith("part 2 overlaps part 1 in time") and got.endswith("kept apart")) if want \
        else got == ""


def test_three_recordings_two_machines(files, tmp_path):
    rec = open_recording(joined(tmp_path, files["a6000"], files["a6000b"], files["l40s"]))
    assert [(p.start, p.stop, len(p.marks)) for p in rec.parts] == [(0, 13, 2), (13, 25, 1)]
    assert rec.notes[1].startswith("a third recording starts at frame 13 (different machine: sim-a6000-tp2")
    first = rec.part(1)
    assert first.n_frames == 13 and first.complete and first.expected_frames == 13
    assert first.notes == ["part 1 of 2: frames 0–12 of the file; it joins 2 recordings of this machine (resumed)"]


@pytest.mark.parametrize("how", ["one member", "plain"])
def test_joined_text_not_members(files, tmp_path, how):
    """`zcat a b | gzip` (one gzip member holding both) and `zcat a b > c.jsonl` read the same."""
    text = b"".join(gzip.decompress(files[k].read_bytes()) for k in ("l40s", "a6000"))
    p = tmp_path / ("c.jsonl.gz" if how == "one member" else "c.jsonl")
    p.write_bytes(gzip.compress(text) if how == "one member" else text)
    rec = open_recording(p)
    assert [(x.start, x.stop) for x in rec.parts] == [(0, 12), (12, 20)] and rec.problems == []
    b = rec.part(2)
    assert b.frame(0) == open_recording(files["a6000"]).frame(0)
    assert [e.text for e in b.events if e.kind == "marker"] == ["a6000 phase"]


def test_part_lines_are_the_recording_as_stored(files, tmp_path):
    rec = open_recording(joined(tmp_path, files["l40s"], files["a6000"]))
    for p, key in zip(rec.parts, ("l40s", "a6000")):
        out = tmp_path / f"p{p.number}.jsonl.gz"
        write_lines(out, part_lines(rec, p))
        assert gzip.decompress(out.read_bytes()) == gzip.decompress(files[key].read_bytes())
        back = open_recording(out)
        assert back.complete and back.problems == [] and not back.mixed and back.n_frames == p.n_frames
    with pytest.raises(FileExistsError):
        write_lines(tmp_path / "p1.jsonl.gz", iter([b"{}"]))
    assert open_recording(tmp_path / "p1.jsonl.gz").n_frames == 12, "the existing file is untouched"


def test_a_failed_write_leaves_no_half_file(tmp_path):
    def lines():
        yield b'{"type":"header"}'
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        write_lines(tmp_path / "x.jsonl.gz", lines())
    assert not (tmp_path / "x.jsonl.gz").exists()


def test_keys_reordered_by_a_json_tool_are_read(files, tmp_path):
    """`jq -S` sorts keys (``t`` is no longer first) and python's json.tool adds spaces: every frame is
    still read, none is "damaged", and each reads as the original does."""
    lines = gzip.decompress(files["a6000"].read_bytes()).splitlines()
    sorted_ = b"\n".join(json.dumps(json.loads(x), sort_keys=True).encode() for x in lines) + b"\n"
    p = tmp_path / "sorted.jsonl.gz"
    p.write_bytes(gzip.compress(sorted_))
    rec, orig = open_recording(p), open_recording(files["a6000"])
    assert rec.problems == [] and rec.complete and rec.n_frames == orig.n_frames
    assert [rec.frame(i) for i in range(rec.n_frames)] == [orig.frame(i) for i in range(orig.n_frames)]
    assert [e.text for e in rec.events if e.kind == "marker"] == ["a6000 phase"]


@pytest.mark.parametrize("line, problem", [
    (b'{"gpus": [], "t": "soon"}', "1 damaged line skipped"),
    (b'{"gpus": 5, "t": 1.7e9}', "1 damaged line skipped"),
    (b'{"gpus": [], "t": 1e400}', "1 damaged line skipped"),
    (b'{"gpus": [], "t": 1' + b"0" * 400 + b"}", "1 damaged line skipped"),
    (b'[1, 2]', "1 damaged line skipped"),
    (b'{"type": "header", "format": "gpuscope-recording", "version": 9}',
     "a second header at frame 8 cannot be read (recording format version 9 is newer"),
    (b'{"type":"header","format":"gpuscope-recording","version":1}',
     "a second header at frame 8 cannot be read (the header's inventory is damaged"),
])
def test_lines_that_are_not_frames_say_why(files, tmp_path, line, problem):
    text = gzip.decompress(files["a6000"].read_bytes()).splitlines()
    text.insert(-1, line)  # before the end line
    p = tmp_path / "odd.jsonl.gz"
    p.write_bytes(gzip.compress(b"\n".join(text) + b"\n"))
    rec = open_recording(p)
    assert rec.n_frames == 8 and any(x.startswith(problem) for x in rec.problems), rec.problems


def _inv(host="h", names=("L40S", "L40S"), uuids=("u0", "u1"), simulated=False):
    return Inventory(host=host, simulated=simulated, devices=tuple(
        DeviceInfo(index=i, name=n, uuid=u, bus_id=f"b{i}") for i, (n, u) in enumerate(zip(names, uuids))))


@pytest.mark.parametrize("b, change", [
    (_inv(), ""),
    (Inventory(host="h", driver_version="560", devices=_inv().devices), ""),  # a driver upgrade: same machine
    (_inv(host="g"), "different machine: h 2× L40S → g 2× L40S"),
    (_inv(names=("RTX A6000", "RTX A6000")), "different GPUs on h: 2× L40S → 2× RTX A6000"),
    (_inv(names=("L40S",), uuids=("u0",)), "different GPUs on h: 2× L40S → 1× L40S"),
    (_inv(names=("L40S", "H100")), "different GPUs on h: 2× L40S → 1× L40S + 1× H100"),
    (_inv(uuids=("u0", "u9")), "different GPUs on h: same models (2× L40S), other UUIDs or bus ids"),
    (_inv(simulated=True), "real → simulated: 2× L40S → 2× L40S"),
    (_inv(host="g\x1b[2J"), "different machine: h 2× L40S → g 2× L40S"),  # terminal-safe
])
def test_inventory_change(b, change):
    assert inventory_change(_inv(), b) == change


def test_the_replay_index_of_a_part_is_the_recordings(files, tmp_path):
    """The replay's history index over part 2 (its members re-based inside the joined file) holds what the
    index of the recording alone holds, and plays it with part 2's GPUs."""
    import numpy as np

    from gpuscope.sources.replay_index import HistoryIndex

    both = open_recording(joined(tmp_path, files["l40s"], files["a6000"]))
    a, b = HistoryIndex(both.part(2)), HistoryIndex(open_recording(files["a6000"]))
    a.build()
    b.build()
    assert a.ready == b.ready == 8 and a.ok.all()
    assert np.array_equal(a.data, b.data, equal_nan=True) and np.array_equal(a.endpoint, b.endpoint, equal_nan=True)


def _empty(tmp_path, key, files, end: bool, name="empty.jsonl.gz"):
    """A recording of ``key``'s machine with no frames: its header alone (a `record` killed at once), or
    with an end line of 0 frames."""
    header = gzip.decompress(files[key].read_bytes()).split(b"\n", 1)[0]
    out = tmp_path / name
    out.write_bytes(gzip.compress(header + b"\n") + (gzip.compress(b'{"type":"end","t":1.0,"frames":0}\n') if end else b""))
    return out


A6000 = "sim-a6000-tp2 2× NVIDIA RTX A6000"
L40S = "sim-powercap 2× NVIDIA L40S"


@pytest.mark.parametrize("end", [True, False])
@pytest.mark.parametrize("order, spans, note", [
    (("l40s", "E"), [(0, 12)],
     [f"a second recording at frame 12 holds no frames (different machine: {L40S} → {A6000}): skipped"]),
    (("E", "l40s"), [(0, 12)],
     [f"the first recording at frame 0 holds no frames (different machine: {L40S} → {A6000}): skipped"]),
    (("l40s", "E", "a6000"), [(0, 12), (12, 20)],
     [f"a second recording at frame 12 holds no frames (different machine: {L40S} → {A6000}): skipped",
      f"a third recording starts at frame 12 (different machine: {L40S} → {A6000})"]),
    (("a6000", "E"), [(0, 8)], ["a second recording at frame 8 holds no frames (same machine and GPUs): skipped"]),
])
def test_a_recording_with_no_frames_is_no_part(files, tmp_path, end, order, spans, note):
    """A header with no frames (an empty recording joined with `cat`) is no part of its own (it made a part
    "frames 12–11" dated 1970, that `--part 2` could not open): it is said, and its lines stay with the part
    before it, so the parts written out still hold every line of the file."""
    empty = _empty(tmp_path, "a6000", files, end)
    rec = open_recording(joined(tmp_path, *(empty if k == "E" else files[k] for k in order)))
    if not end:  # killed at once: said of it, not of the recordings that hold the frames
        note = [x.replace("): skipped", "; it did not close cleanly): skipped") for x in note]
    assert [(p.start, p.stop) for p in rec.parts] == spans and rec.notes == note
    assert rec.problems == [] and rec.complete
    first = [k for k in order if k != "E"][0]
    assert rec.inventory == open_recording(files[first]).inventory
    assert rec.part(1).inventory == rec.inventory and rec.part(1).n_frames == spans[0][1]
    assert b"\n".join(ln for p in rec.parts for ln in part_lines(rec, p)) + b"\n" == \
        gzip.decompress(rec.path.read_bytes()), "every line as stored, in file order"


def test_a_file_of_empty_recordings_is_one_empty_part(files, tmp_path):
    rec = open_recording(joined(tmp_path, _empty(tmp_path, "a6000", files, True, "a.jsonl.gz"),
                                _empty(tmp_path, "l40s", files, True, "b.jsonl.gz")))
    assert [(p.start, p.stop) for p in rec.parts] == [(0, 0)] and rec.n_frames == 0
    assert rec.notes == [f"a second recording at frame 0 holds no frames (different machine: {A6000} → {L40S}): skipped"]


def _damaged(path, tmp_path):
    """``path`` with a byte of its last member's CRC flipped (the text is there, but not to be trusted)."""
    raw = bytearray(path.read_bytes())
    raw[-8] ^= 0xFF
    out = tmp_path / f"damaged-{path.name}"
    out.write_bytes(bytes(raw))
    return out


@pytest.mark.parametrize("where", ["member in part 1", "member in part 2", "line in part 1", "line in part 2",
                                   "cut in part 2"])
def test_a_parts_problems_are_its_own(files, tmp_path, where):
    """`summary --part 2` reported damage that lies in part 1: each part says what it lost, no more."""
    a, b = files["l40s"], files["a6000"]
    hit = 1 if where.endswith("1") else 2
    if where.startswith("member"):
        a, b = (_damaged(a, tmp_path), b) if hit == 1 else (a, _damaged(b, tmp_path))
        rec = open_recording(joined(tmp_path, a, b))
    elif where.startswith("line"):
        text = [gzip.decompress(p.read_bytes()).split(b"\n") for p in (a, b)]
        text[hit - 1].insert(3, b"[1, 2]")
        p = tmp_path / "lines.jsonl"
        p.write_bytes(b"\n".join(text[0]) + b"\n".join(text[1]))
        rec = open_recording(p)
    else:
        both = joined(tmp_path, a, b)
        rec = open_recording(joined(tmp_path, both, name="cut.jsonl.gz"))
        raw = rec.path.read_bytes()
        rec.path.write_bytes(raw[:-30])
        rec = open_recording(rec.path)
    assert rec.problems and rec.mixed, rec.problems
    lost, kept = rec.part(hit), rec.part(3 - hit)
    assert kept.problems == [] and kept.damaged_at == []
    assert lost.problems, rec.problems
    assert set(lost.problems) <= set(rec.problems) | {lost.summary()}
    assert lost.damaged_at == rec.damaged_at
