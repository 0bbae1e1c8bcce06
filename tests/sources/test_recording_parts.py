"""Recordings joined in one file (`cat a.jsonl.gz b.jsonl.gz`) and files a JSON tool rewrote (issue 27).

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
