"""GPU processes whose pid is not in this /proc: from another PID namespace (gpuscope in a container,
NVML giving host pids) or gone. Shown as what they are, user "–", not as an unknown "?"."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest

from gpuscope.sources.procinfo import (
    NOT_HERE_USER,
    NOT_IN_PROC,
    OTHER_NAMESPACE,
    UNKNOWN_USER,
    ProcTable,
    in_container,
    read_facts,
)


def getpw(uid: int) -> pwd.struct_passwd:
    if uid != 1000:
        raise KeyError(uid)
    return pwd.struct_passwd(("alice", "x", uid, uid, "", "/", "/bin/sh"))


def fake_proc(root: Path, pid2: str | None, pids: dict[int, dict[str, bytes]]) -> str:
    """A /proc with pid 2's comm ``pid2`` (None: no pid 2) and ``pids`` (file name → content)."""
    if pid2 is not None:
        (root / "2").mkdir()
        (root / "2" / "comm").write_text(pid2 + "\n")
    for pid, files in pids.items():
        (root / str(pid)).mkdir()
        for name, content in files.items():
            (root / str(pid) / name).write_bytes(content)
    return str(root)


VLLM = {"status": b"Uid:\t1000\t1000\t1000\t1000\n", "comm": b"python3\n", "cmdline": b"python3\0-m\0vllm\0"}


@pytest.mark.parametrize(("pid2", "pid", "files", "want"), [
    # the host's /proc (kthreadd is pid 2): a pid that is there, and one that is not (it ended, or is hidden)
    ("kthreadd", 2811, VLLM, ("alice", "python3", "python3 -m vllm")),
    ("kthreadd", 9999, None, (NOT_HERE_USER, None, NOT_IN_PROC)),
    # a container's /proc (no kthreadd): a host pid NVML gives is not there
    (None, 9999, None, (NOT_HERE_USER, None, OTHER_NAMESPACE)),
    ("bash", 9999, None, (NOT_HERE_USER, None, OTHER_NAMESPACE)),  # pid 2 is the container's own process
    ("kthreadd\n", 9999, None, (NOT_HERE_USER, None, NOT_IN_PROC)),  # trailing whitespace is not a difference
    # the pid is there but its status cannot be read (hidepid=1 shows the directory): unknown, as before
    ("kthreadd", 2811, {"comm": b"python3\n"}, (UNKNOWN_USER, "python3", None)),
    (None, 2811, {}, (UNKNOWN_USER, None, None)),
])
def test_facts_of_a_pid(tmp_path, pid2, pid, files, want):
    root = fake_proc(tmp_path, pid2, {pid: files} if files is not None else {})
    f = read_facts(pid, root, getpw)
    assert (f.user, f.name, f.command) == want


@pytest.mark.parametrize(("pid2", "want"), [("kthreadd", False), (None, True), ("sleep", True)])
def test_in_container(tmp_path, pid2, want):
    assert in_container(fake_proc(tmp_path, pid2, {})) is want


def test_the_table_asks_once_whether_it_is_in_a_container(tmp_path):
    root = fake_proc(tmp_path, None, {2811: VLLM})
    table = ProcTable(root, getpw)
    assert table.facts(2811).user == "alice"
    assert table.facts(70001).command == OTHER_NAMESPACE
    (tmp_path / "2").mkdir()
    (tmp_path / "2" / "comm").write_text("kthreadd\n")  # not asked again: a /proc does not change namespace
    assert table.facts(70002).command == OTHER_NAMESPACE


def test_this_machine_has_an_answer():
    """The real /proc: this very process is found; whatever namespace the tests run in, a pid above
    pid_max is missing and said to be so."""
    me = read_facts(os.getpid())
    assert me.user not in (NOT_HERE_USER, UNKNOWN_USER)
    gone = read_facts(2**23)  # above any pid_max (4,194,304 at most)
    assert gone.user == NOT_HERE_USER and gone.command in (OTHER_NAMESPACE, NOT_IN_PROC)
