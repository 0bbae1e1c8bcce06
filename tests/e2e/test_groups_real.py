"""Serving groups found for real: real processes, real sockets on 127.0.0.1, the real /proc (a fake NVML only
for the GPU side: the frame says which pid holds which GPU)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from gpuscope.core.model import EndpointReading, Frame, GpuReading, ProcessInfo
from gpuscope.sources.groups import GroupFinder

# A server: listens on an ephemeral port of 127.0.0.1, starts one worker (its child), prints
# "PORT PID WORKER_PID" (pids as its own PID namespace sees them) and lives until its stdin closes.
SERVER = r"""
import os, socket, subprocess, sys
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen()
w = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
print(s.getsockname()[1], os.getpid(), w.pid, flush=True)
sys.stdin.read()
w.stdin.close()
w.wait()
"""


def _start(cmd: list[str]) -> tuple[subprocess.Popen[str], int, int, int]:
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout is not None
    line = p.stdout.readline()
    if not line:
        err = p.stderr.read() if p.stderr else ""
        p.wait(5)
        raise RuntimeError(f"server did not start: {err.strip()[-300:]}")
    port, pid, worker = (int(x) for x in line.split())
    return p, port, pid, worker


def _stop(p: subprocess.Popen[str]) -> None:
    try:
        if p.stdin:
            p.stdin.close()
        p.wait(10)
    except subprocess.TimeoutExpired:
        p.kill()  # our own child, by its handle
        p.wait(5)


def _frame(holders: dict[int, int], port: int) -> Frame:
    """A frame as the NVML source makes it: GPU ``i`` lists the pid ``holders[i]``; one endpoint on ``port``."""
    gpus = tuple(GpuReading(index=i, processes=(ProcessInfo(pid=pid),)) for i, pid in sorted(holders.items()))
    return Frame(t=1.0, gpus=gpus, endpoints=(EndpointReading(url=f"http://127.0.0.1:{port}/metrics", kind="vllm"),))


def test_real_listener_found_by_port_and_its_child_as_descendant():
    p, port, pid, worker = _start([sys.executable, "-c", SERVER])
    try:
        assert pid == p.pid
        (g,) = GroupFinder().groups(_frame({0: pid, 1: worker}, port))
        assert (g.server, g.port, g.pids, g.gpus, g.local) == ("vLLM", port, (pid, worker), (0, 1), True)
        # only the worker on a GPU: the server still heads the group, found through its child
        (g,) = GroupFinder().groups(_frame({3: worker}, port))
        assert (g.pids, g.gpus) == ((pid, worker), (3,))
    finally:
        _stop(p)


def test_a_port_nobody_listens_on_says_so():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening
        g, = GroupFinder().groups(_frame({}, port))
    assert g.pids == () and "nothing listens" in (g.note or "")


def _unshare_works() -> str | None:
    if os.geteuid() != 0:
        return "needs root (unshare --pid)"
    exe = shutil.which("unshare")
    if exe is None:
        return "no unshare command"
    r = subprocess.run([exe, "--pid", "--fork", "--kill-child", "true"], capture_output=True, text=True, timeout=10)
    if r.returncode != 0:
        return f"unshare --pid --fork not permitted here: {r.stderr.strip()[:120]}"
    return None


def test_server_in_its_own_pid_namespace_matched_by_nspid():
    why = _unshare_works()
    if why:
        pytest.skip(why)
    p, port, ns_pid, ns_worker = _start(["unshare", "--pid", "--fork", "--kill-child", sys.executable, "-c", SERVER])
    try:
        assert ns_pid == 1  # the server is its namespace's init; NVML in that container would answer 1
        (g,) = GroupFinder().groups(_frame({0: ns_pid, 1: ns_worker}, port))
        host_pid = g.pids[0]
        assert host_pid not in (1, ns_worker) and g.gpus == (0, 1)
        with open(f"/proc/{host_pid}/status") as f:
            nspid = next(line for line in f if line.startswith("NSpid:")).split()[1:]
        assert nspid == [str(host_pid), "1"]
        with open(f"/proc/{host_pid}/stat") as f:
            assert int(f.read().rsplit(")", 1)[1].split()[1]) == p.pid  # a child of our unshare
    finally:
        _stop(p)
