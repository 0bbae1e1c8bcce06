"""--simulate given a recording (or a directory) says what it is in one line: a recording gave
"cannot read ('utf-8' codec can't decode byte 0x8b in position 1…)", a directory "[Errno 21]…" (trial2)."""

from __future__ import annotations

import gzip
import shutil

import pytest
from helpers import ROOT

from gpuscope.sources.scenario import ScenarioError, load, looks_like_recording

DEMO = next((ROOT / "recordings").glob("*.jsonl.gz"))


@pytest.mark.parametrize(("head", "want"), [
    (b"\x1f\x8b\x08\x00", "gzip-compressed"),
    (b'{"type":"header","format":"gpuscope-recording","version":1}\n', "a gpuscope recording"),
    (b'  {"format": "gpuscope-recording"}', "a gpuscope recording"),
    (b'name = "x"\n[[gpus]]\n', None),
    (b'description = "gpuscope-recording"\n', None),  # TOML that merely says the word
    (b"", None),
])
def test_looks_like_recording(head, want):
    assert looks_like_recording(head) == want


def test_load_names_a_recording_and_a_directory(tmp_path):
    gz = tmp_path / "r.jsonl.gz"
    shutil.copy(DEMO, gz)
    plain = tmp_path / "r.jsonl"
    plain.write_bytes(gzip.decompress(DEMO.read_bytes()))
    for p, what in ((gz, "gzip-compressed"), (plain, "a gpuscope recording")):
        with pytest.raises(ScenarioError) as e:
            load(str(p))
        msg = str(e.value)
        assert what in msg and f"gpuscope replay {p}" in msg and "codec" not in msg and "\n" not in msg
    with pytest.raises(ScenarioError, match="is a directory, not a file"):
        load(str(tmp_path))
    binary = tmp_path / "b.toml"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ScenarioError, match="not a TOML text file"):
        load(str(binary))
