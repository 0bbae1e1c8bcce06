"""Words a scenario file gives (its name, host, description, driver) reach the TUI header and `topo`:
they are one printable line each, whatever the file holds (found by a new-user trial: an OSC title and a
screen clear in `name` reached the terminal and wiped the SIMULATED label)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gpuscope.sources import scenario

HOSTILE = "x\\u001b]0;PWN\\u0007\\u001b[2Jzz"


@pytest.mark.parametrize("field", ["name", "host", "description", "driver_version"])
def test_scenario_words_are_clean(tmp_path, field):
    p = tmp_path / "s.toml"
    p.write_text(f'{field} = "{HOSTILE}"\n[[gpus]]\ncount = 2\n')
    sc = scenario.load(str(p))
    value = getattr(sc, field)
    assert "\x1b" not in value and "\x07" not in value and "zz" in value


def test_topo_header_has_no_escape_sequences(tmp_path):
    p = tmp_path / "s.toml"
    p.write_text(f'name = "{HOSTILE}"\nhost = "h\\u001b[5m"\n[[gpus]]\ncount = 2\nname = "GPU\\u001b[31mRED"\n')
    out = subprocess.run([sys.executable, "-m", "gpuscope", "topo", "--simulate", str(p)], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "\x1b" not in out.stdout and "\x07" not in out.stdout
    assert "SIMULATED scenario xzz" in out.stdout
