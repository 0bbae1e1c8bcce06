"""--force replaces a file, never writes into a FIFO, a device or a directory: `record -o FIFO --force`
blocked forever waiting for a reader (new-user trial). One line, exit 1, quickly."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from helpers import ROOT

DEMO = str(next((ROOT / "recordings").glob("*.jsonl.gz")))


@pytest.mark.parametrize("command", [
    ["record", "-o", "{out}", "--force", "--simulate", "healthy-gen4", "--duration", "1"],
    ["export", DEMO, "--csv", "{out}", "--force"],
])
def test_force_never_writes_into_a_fifo(tmp_path, command):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    args = [a.replace("{out}", str(fifo)) for a in command]
    out = subprocess.run([sys.executable, "-m", "gpuscope", *args], capture_output=True, text=True, timeout=60)
    assert out.returncode == 1, out
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "named pipe" in lines[0] and "Traceback" not in out.stderr, out.stderr
