"""Scenario files (sources/scenario.py): what --simulate accepts, and the words a file gives to the screen."""

from __future__ import annotations

import gzip
import shutil
import subprocess
import sys

import pytest
from helpers import ROOT

from gpuscope.sources import scenario
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
    """--simulate given a recording (or a directory) says what it is in one line: a recording gave "cannot read
    ('utf-8' codec can't decode byte 0x8b in position 1…)", a directory "[Errno 21]…" (trial2)."""
    assert looks_like_recording(head) == want


def test_load_names_a_recording_and_a_directory(tmp_path):
    """--simulate given a recording (or a directory) says what it is in one line: a recording gave "cannot read
    ('utf-8' codec can't decode byte 0x8b in position 1…)", a directory "[Errno 21]…" (trial2)."""
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


HOSTILE = "x\\u001b]0;PWN\\u0007\\u001b[2Jzz"


@pytest.mark.parametrize("field", ["name", "host", "description", "driver_version"])
def test_scenario_words_are_clean(tmp_path, field):
    """Words a scenario file gives (its name, host, description, driver) reach the TUI header and `topo`: they
    are one printable line each, whatever the file holds (an OSC title and a screen
    clear in `name` once reached the terminal and wiped the SIMULATED label)."""
    p = tmp_path / "s.toml"
    p.write_text(f'{field} = "{HOSTILE}"\n[[gpus]]\ncount = 2\n')
    sc = scenario.load(str(p))
    value = getattr(sc, field)
    assert "\x1b" not in value and "\x07" not in value and "zz" in value


def test_topo_header_has_no_escape_sequences(tmp_path):
    """Words a scenario file gives (its name, host, description, driver) reach the TUI header and `topo`: they
    are one printable line each, whatever the file holds (an OSC title and a screen
    clear in `name` once reached the terminal and wiped the SIMULATED label)."""
    p = tmp_path / "s.toml"
    p.write_text(f'name = "{HOSTILE}"\nhost = "h\\u001b[5m"\n[[gpus]]\ncount = 2\nname = "GPU\\u001b[31mRED"\n')
    out = subprocess.run([sys.executable, "-m", "gpuscope", "topo", "--simulate", str(p)], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "\x1b" not in out.stdout and "\x07" not in out.stdout
    assert "SIMULATED scenario xzz" in out.stdout
