"""The agent's name (--name) and machine id: stable across restarts, hashed, never fatal when state cannot be kept."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpuscope.cli.agent_id import check_name, machine_id, state_file
from gpuscope.core.errors import GpuscopeError

RAW = "0123456789abcdef0123456789abcdef"


@pytest.mark.parametrize("env,want", [
    ({"STATE_DIRECTORY": "/var/lib/gpuscope", "XDG_STATE_HOME": "/x", "HOME": "/h"}, "/var/lib/gpuscope/agent-id"),
    ({"STATE_DIRECTORY": "/a:/b"}, "/a/agent-id"),  # systemd lists several with ':': the first
    ({"XDG_STATE_HOME": "/x", "HOME": "/h"}, "/x/gpuscope/agent-id"),
    ({"HOME": "/h"}, "/h/.local/state/gpuscope/agent-id"),
])
def test_state_file_follows_systemd_then_xdg(env, want):
    assert state_file(env) == Path(want)


def test_machine_id_is_a_keyed_hash_of_etc_machine_id(tmp_path):
    mid = tmp_path / "machine-id"
    mid.write_text(RAW + "\n")
    got, warning = machine_id(tmp_path / "state" / "agent-id", (str(mid),))
    assert re.fullmatch(r"[0-9a-f]{16}", got) and warning is None
    assert got not in RAW  # never the id as read (machine-id(5): not to be exposed on the network)
    assert not (tmp_path / "state").exists()  # nothing written where the machine has an id
    other = tmp_path / "other-id"
    other.write_text(RAW[::-1])
    assert machine_id(tmp_path / "s", (str(other),))[0] != got  # another machine, another id


def test_without_a_machine_id_a_random_one_is_kept_and_stable_across_restarts(tmp_path):
    state = tmp_path / "state" / "gpuscope" / "agent-id"
    first, w1 = machine_id(state, (str(tmp_path / "no-such"),))
    assert w1 is None and re.fullmatch(r"[0-9a-f]{32}\n", state.read_text())
    # a restart is a new process reading the same state file: run the lookup in one, twice
    code = ("import sys; from pathlib import Path; from gpuscope.cli.agent_id import machine_id; "
            "print(machine_id(Path(sys.argv[1]), ())[0])")
    again = [subprocess.run([sys.executable, "-c", code, str(state)], capture_output=True, text=True,
                            check=True).stdout.strip() for _ in range(2)]
    assert again == [first, first]
    elsewhere, _ = machine_id(tmp_path / "another" / "agent-id", ())
    assert elsewhere != first  # random where nothing is kept


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_an_unwritable_state_dir_warns_and_goes_on(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        got, warning = machine_id(ro / "gpuscope" / "agent-id", ())
    finally:
        ro.chmod(0o700)
    assert re.fullmatch(r"[0-9a-f]{16}", got)
    assert warning is not None and "\n" not in warning
    assert warning.startswith(f"cannot keep the agent's id in {ro}/gpuscope/agent-id (Permission denied)")


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc")
def test_a_state_dir_that_cannot_be_made_warns_even_as_root():
    got, warning = machine_id(Path("/proc/gpuscope-no-such/agent-id"), ())  # nobody can make a folder in /proc
    assert re.fullmatch(r"[0-9a-f]{16}", got)
    assert warning is not None and warning.startswith("cannot keep the agent's id in /proc/gpuscope-no-such/agent-id (")
    assert "for this run only" in warning and "\n" not in warning


def test_a_state_file_without_an_id_is_left_alone(tmp_path):
    state = tmp_path / "agent-id"
    state.write_text("my notes\n")
    got, warning = machine_id(state, ())
    assert re.fullmatch(r"[0-9a-f]{16}", got) and warning is not None and "left as it is" in warning
    assert state.read_text() == "my notes\n"  # never overwritten


@pytest.mark.parametrize("name,ok", [
    ("gpu-07", True), ("node_1.rack-2", True), ("x" * 128, True), ("x" * 129, False), ("", False),
    ("a/b", False), ("a+b", False), ("#", False), ("two words", False), ("gpu\x1b[2J", False), ("gpu\n07", False),
    ("ünïcode", False),
])
def test_check_name(name, ok):
    if ok:
        assert check_name(name) == name
    else:
        with pytest.raises(GpuscopeError) as e:
            check_name(name)
        msg = str(e.value)
        assert msg.startswith("--name ") and "\n" not in msg and "\x1b" not in msg
        assert "ASCII letters, digits, '.', '_' and '-' only" in msg and e.value.exit_status == 2


@pytest.mark.slow
def test_agent_refuses_a_bad_name_in_one_line():
    r = subprocess.run([sys.executable, "-m", "gpuscope", "agent", "--broker", "mqtt://127.0.0.1:1", "--simulate",
                        "mixed-4", "--name", "rack/7"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and r.stderr.startswith("gpuscope: error: argument --name: 'rack/7': '/' is not "
                                                              "allowed: ASCII letters"), r.stderr
