"""Serving groups: the /proc parsers (tables and fuzz), building groups, and the finder over a fake /proc."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers import FIXTURES
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscope.core.groups import (
    Claim,
    ProcView,
    build_groups,
    endpoint_address,
    gpus_text,
    group_label,
    parallel_from_args,
    parallel_from_metrics,
    parse_cgroup,
    parse_net_tcp,
    parse_nspid,
    parse_stat_ppid,
    program_label,
    socket_inode,
)
from gpuscope.core.model import EndpointReading, Frame, GpuReading, ProcessInfo
from gpuscope.sources.groups import GroupFinder

TCP = """  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:1F40 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 44321 1 0000000000000000 100 0 0 10 0
   1: 0100007F:0277 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1234 1 0000000000000000 100 0 0 10 0
   2: 0100007F:1F40 0100007F:D2F0 01 00000000:00000000 00:00000000 00000000  1000        0 55555 1 0000000000000000 20 4 30 10 -1
"""
TCP6 = """  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:1F41 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 777 1 0000000000000000 100 0 0 10 0
"""


def test_parse_net_tcp_keeps_listeners_only():
    got = parse_net_tcp(TCP)
    assert [(x.port, x.inode) for x in got] == [(8000, 44321), (631, 1234)]
    assert [(x.port, x.inode) for x in parse_net_tcp(TCP6)] == [(8001, 777)]


@pytest.mark.parametrize("link,want", [
    ("socket:[44321]", 44321), ("pipe:[12]", None), ("/dev/nvidia0", None), ("socket:[x]", None),
    ("socket:[12]trailing", None), ("", None),
])
def test_socket_inode(link, want):
    assert socket_inode(link) == want


@pytest.mark.parametrize("text,want", [
    ("1234 (python3) S 1200 1234 1200 0 -1", 1200),
    ("99 (my (odd) name) R 7 99 99", 7),
    ("5 (a) b) S 3 5", 3),
    ("garbage", None), ("1 (x)", None), ("1 (x) S notanumber", None), ("", None),
])
def test_parse_stat_ppid(text, want):
    assert parse_stat_ppid(text) == want


@pytest.mark.parametrize("text,want", [
    ("Name:\tpython3\nNSpid:\t4242\t1\nPPid:\t1\n", (4242, 1)),
    ("NSpid:\t17\n", (17,)),
    ("Name:\tx\n", ()),
    ("NSpid:\tx y\n", ()),
    ("NSpid:\t-3\n", ()),
])
def test_parse_nspid(text, want):
    assert parse_nspid(text) == want


CID = "4f1c2b3a9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a"


@pytest.mark.parametrize("text,want", [
    ("0::/user.slice/user-1000.slice/session-3.scope\n", None),
    ("0::/\n", None),
    (f"12:cpu,cpuacct:/docker/{CID}\n", "docker 4f1c2b3a9d8e"),
    (f"0::/system.slice/docker-{CID}.scope\n", "docker 4f1c2b3a9d8e"),
    (f"0::/system.slice/containerd.service/kubepods-besteffort.slice/kubepods-besteffort-pod0b9e1c2d_1111_2222_3333_444455556666.slice/cri-containerd-{CID}.scope\n",
     "pod 0b9e1c2d-1111-2222-3333-444455556666 / 4f1c2b3a9d8e"),
    (f"11:memory:/kubepods/burstable/pod0b9e1c2d-1111-2222-3333-444455556666/{CID}\n",
     "pod 0b9e1c2d-1111-2222-3333-444455556666 / 4f1c2b3a9d8e"),
    (f"0::/machine.slice/libpod-{CID}.scope/container\n", "podman 4f1c2b3a9d8e"),
    (f"0::/kubepods.slice/crio-{CID}.scope\n", "cri-o 4f1c2b3a9d8e"),
    ("garbage without colons", None),
])
def test_parse_cgroup(text, want):
    assert parse_cgroup(text) == want


@pytest.mark.parametrize("args,want", [
    (["python3", "-m", "vllm.entrypoints.openai.api_server", "--tensor-parallel-size", "2"], (2, None)),
    (["vllm", "serve", "m", "--tensor-parallel-size=4", "--pipeline-parallel-size", "2"], (4, 2)),
    (["vllm", "serve", "m", "-tp", "8", "-pp", "2"], (8, 2)),
    (["python", "-m", "sglang.launch_server", "--tp-size", "4"], (4, None)),
    (["python", "-m", "sglang.launch_server", "--tp", "2", "--pp-size", "2"], (2, 2)),
    (["trtllm-serve", "m", "--tp_size", "2", "--pp_size", "1"], (2, 1)),
    (["x", "--tensor-parallel-size"], (None, None)),
    (["x", "--tensor-parallel-size", "two"], (None, None)),
    (["x", "--tensor-parallel-size", "0"], (None, None)),
    (["x", "--tensor-parallel-size", "99999"], (None, None)),
    ([], (None, None)),
])
def test_parallel_from_args(args, want):
    assert parallel_from_args(args) == want


def test_parallel_from_metrics():
    assert parallel_from_metrics({"vllm:parallel_config_info": [({"tensor_parallel_size": "2",
                                                                  "pipeline_parallel_size": "1"}, 1.0)]}) == (2, 1)
    sg = {"sglang:num_running_reqs": [({"tp_rank": "0", "pp_rank": "0"}, 1.0), ({"tp_rank": "1", "pp_rank": "0"}, 1.0)]}
    assert parallel_from_metrics(sg) == (2, 1)
    assert parallel_from_metrics({"vllm:cache_config_info": [({"block_size": "16"}, 1.0)]}) == (None, None)


def test_parallel_from_metrics_fixtures():
    """The real vLLM captures carry no parallel config labels: TP stays unknown (the command line decides)."""
    from gpuscope.sources.endpoint import parse_metrics

    base = FIXTURES / "inference"
    for name in ("vllm_v0.txt", "vllm_v1.txt", "vllm_0.32.0_v1_cpu_load.txt", "sglang.txt"):
        samples = parse_metrics((base / name).read_text())
        assert parallel_from_metrics(samples) == (None, None), name


@pytest.mark.parametrize("args,want", [
    (["/usr/bin/python3", "train.py", "--lr", "1"], "python3 train.py"),
    (["python", "-u", "/home/a/train.py"], "python train.py"),
    (["python3", "-m", "vllm.entrypoints.openai.api_server"], "python3 -m vllm.entrypoints.openai.api_server"),
    (["/opt/bin/torchrun", "--nproc-per-node", "4", "train.py"], "torchrun"),
    (["python3", "-c", "import x"], "python3 -c"),
    ([], "?"),
])
def test_program_label(args, want):
    assert program_label(args) == want


@pytest.mark.parametrize("url,want", [
    ("http://localhost:8000/metrics", ("localhost", 8000)),
    ("https://gpu1.example:9443", ("gpu1.example", 9443)),
    ("http://10.0.0.5", ("10.0.0.5", 80)),
    ("https://h", ("h", 443)),
    ("localhost:30000", ("localhost", 30000)),
    ("http://[::1]:8000/", ("::1", 8000)),
    ("http://h:99999/", ("", None)),
])
def test_endpoint_address(url, want):
    assert endpoint_address(url) == want


def test_gpus_text():
    assert gpus_text([1, 0]) == "GPU0+GPU1"
    assert gpus_text([2, 3, 4, 5]) == "GPU2–GPU5"
    assert gpus_text([0, 2, 5]) == "GPU0+GPU2+GPU5"
    assert gpus_text([]) == "no GPU"


# ------------------------------------------------------------------ building groups
VLLM_ARGS = ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "Qwen/qwen3-27b",
             "--tensor-parallel-size", "2"]


def _view(**kw):
    return ProcView(**kw)


def test_build_groups_tp2_server_and_unclaimed_training():
    # 100 = the API server (listener), 101/102 its workers on GPU0/GPU1; 200 torchrun with workers 201-204 on GPU2-5
    ppids = {100: 1, 101: 100, 102: 100, 200: 50, 201: 200, 202: 200, 203: 200, 204: 200, 50: 1}
    args = {100: VLLM_ARGS, 101: VLLM_ARGS, 102: VLLM_ARGS, **{p: ["python", "train.py"] for p in (201, 202, 203, 204)}}
    held = {101: {0}, 102: {1}, 201: {2}, 202: {3}, 203: {4}, 204: {5}}
    claims = [Claim(url="http://localhost:8000", port=8000, local=True, listener=100, kind="vllm",
                    model="Qwen/qwen3-27b")]
    g = build_groups(claims, held, _view(ppids=ppids, args=args))
    assert len(g) == 2
    assert (g[0].server, g[0].pids, g[0].gpus, g[0].tp, g[0].port) == ("vLLM", (100, 101, 102), (0, 1), 2, 8000)
    assert group_label(g[0]) == "vLLM :8000 qwen3-27b"
    assert (g[1].server, g[1].gpus, g[1].kind, g[1].endpoint) == ("python train.py", (2, 3, 4, 5), None, None)


def test_build_groups_metrics_tp_wins_over_cmdline():
    claims = [Claim(url="u", port=1, local=True, listener=10, kind="vllm", tp=4, pp=2)]
    g = build_groups(claims, {10: {0}}, _view(ppids={10: 1}, args={10: VLLM_ARGS}))
    assert (g[0].tp, g[0].pp) == (4, 2)


def test_build_groups_container_pid_by_nspid():
    # NVML answers with the container's pid 1; the host pid of the listener is 4242 (NSpid 4242 1)
    claims = [Claim(url="u", port=8000, local=True, listener=4242, kind="vllm")]
    g = build_groups(claims, {1: {0}}, _view(ppids={4242: 4000}, nspids={4242: (4242, 1)},
                                              containers={4242: "docker 4f1c2b3a9d8e"}))
    assert (g[0].pids, g[0].gpus, g[0].container) == ((4242,), (0,), "docker 4f1c2b3a9d8e")


def test_build_groups_not_local_and_not_found():
    claims = [Claim(url="http://far:8000", port=8000, local=False, kind="vllm"),
              Claim(url="http://localhost:9", port=9, local=True, why="the process listening on port 9 is not "
                    "readable by this user", kind="sglang")]
    g = build_groups(claims, {}, _view())
    assert (g[0].local, g[0].note, g[0].gpus) == (False, "not local", ())
    assert g[1].note and "not readable" in g[1].note


def test_build_groups_hostile_cycle_terminates():
    ppids = {1: 2, 2: 1, 3: 3, 10: 11, 11: 10}
    g = build_groups([Claim(url="u", port=1, local=True, listener=10)], {11: {0}, 3: {1}}, _view(ppids=ppids))
    assert g[0].gpus == (0,)
    assert g[1].gpus == (1,)


# ------------------------------------------------------------------ fuzz: never a traceback
@settings(max_examples=150, deadline=None)
@given(st.text(max_size=400))
def test_fuzz_text_parsers(text):
    parse_net_tcp(text)
    parse_stat_ppid(text)
    parse_nspid(text)
    parse_cgroup(text)
    socket_inode(text)
    endpoint_address(text)
    parallel_from_args(text.split())
    program_label(text.split())


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.integers(0, 50), st.integers(0, 50), max_size=30),
       st.dictionaries(st.integers(0, 50), st.sets(st.integers(0, 7), max_size=3), max_size=10),
       st.lists(st.integers(0, 50), max_size=3))
def test_fuzz_build_groups(ppids, held, listeners):
    claims = [Claim(url=f"u{k}", port=k + 1, local=True, listener=p) for k, p in enumerate(listeners)]
    groups = build_groups(claims, held, _view(ppids=ppids))
    seen: set[int] = set()
    heads: set[int] = set()
    for g in groups:  # a GPU process joins one group at most (two URLs of one listener: the same group twice)
        if g.endpoint and g.pids:
            if g.pids[0] in heads:
                continue
            heads.add(g.pids[0])
        joined = set(g.pids[1:]) if g.endpoint else set(g.pids)
        assert not (joined & seen)
        seen |= joined


# ------------------------------------------------------------------ the finder over a fake /proc
def _proc(root: Path, pid: int, ppid: int, args: list[str], fds: dict[str, str] | None = None, nspid: str = "",
          cgroup: str = "0::/\n") -> None:
    d = root / str(pid)
    (d / "fd").mkdir(parents=True)
    (d / "stat").write_text(f"{pid} ({Path(args[0]).name}) S {ppid} {pid} {pid} 0")
    (d / "status").write_text(f"Name:\t{Path(args[0]).name}\nNSpid:\t{nspid or pid}\n")
    (d / "cmdline").write_bytes(b"\0".join(a.encode() for a in args) + b"\0")
    (d / "comm").write_text(Path(args[0]).name + "\n")
    (d / "cgroup").write_text(cgroup)
    for n, target in (fds or {}).items():
        os.symlink(target, d / "fd" / n)


def _frame(procs: dict[int, list[int]], eps=()) -> Frame:
    gpus = tuple(GpuReading(index=i, processes=tuple(ProcessInfo(pid=p) for p in pids)) for i, pids in procs.items())
    return Frame(t=1.0, gpus=gpus, endpoints=tuple(eps))


def test_finder_fake_proc(tmp_path):
    (tmp_path / "net").mkdir()
    (tmp_path / "net" / "tcp").write_text(TCP)
    (tmp_path / "net" / "tcp6").write_text(TCP6.splitlines()[0] + "\n")
    _proc(tmp_path, 1, 0, ["/sbin/init"])
    _proc(tmp_path, 100, 1, VLLM_ARGS, {"0": "/dev/null", "5": "socket:[44321]"},
          cgroup=f"0::/system.slice/docker-{CID}.scope\n")
    _proc(tmp_path, 101, 100, VLLM_ARGS, {"3": "/dev/nvidia0"})
    _proc(tmp_path, 102, 100, VLLM_ARGS)
    _proc(tmp_path, 300, 1, ["python3", "train.py"])
    t = [0.0]
    f = GroupFinder(str(tmp_path), clock=lambda: t[0], resolve=lambda h: [])
    ep = EndpointReading(url="http://localhost:8000/metrics", kind="vllm", model="qwen3-27b")
    frame = _frame({0: [101], 1: [102], 2: [300]}, [ep])
    g = f.groups(frame)
    assert (g[0].server, g[0].pids, g[0].gpus, g[0].tp, g[0].container) == (
        "vLLM", (100, 101, 102), (0, 1), 2, "docker 4f1c2b3a9d8e")
    assert (g[1].server, g[1].gpus) == ("python3 train.py", (2,))
    assert f.groups(frame) is g  # cached while nothing changes


def test_finder_without_endpoints_reads_only_the_gpu_processes_ancestry(tmp_path):
    """No endpoint: the groups need the GPU processes' ancestors only, not a read of every process (3.6 ms of
    CPU a build on the H200 host); the groups are the ones the whole tree gives."""
    _proc(tmp_path, 1, 0, ["/sbin/init"])
    _proc(tmp_path, 50, 1, ["torchrun", "--nproc-per-node", "2", "train.py"])
    _proc(tmp_path, 51, 50, ["python3", "train.py"])
    _proc(tmp_path, 52, 50, ["python3", "train.py"])
    _proc(tmp_path, 300, 1, ["python3", "other.py"])
    for pid in range(400, 440):  # the rest of the machine
        _proc(tmp_path, pid, 1, ["sleep", "1000"])
    f = GroupFinder(str(tmp_path), resolve=lambda h: [])
    held = {51: {0}, 52: {1}, 300: {2}}
    read: list[int] = []
    real_ppid = f.reader.ppid
    f.reader.ppid = lambda pid: read.append(pid) or real_ppid(pid)  # type: ignore[method-assign]
    g = f.groups(_frame({0: [51], 1: [52], 2: [300]}))
    assert sorted(set(read)) == [50, 51, 52, 300]
    assert f.reader.ancestry(held) == {51: 50, 52: 50, 50: 1, 300: 1}
    assert [(x.server, x.pids, x.gpus) for x in g] == [
        ("python3 train.py", (51, 52), (0, 1)), ("python3 other.py", (300,), (2,))]
    full = GroupFinder(str(tmp_path), resolve=lambda h: [])
    full.reader.ancestry = lambda pids: full.reader.ppids()  # type: ignore[method-assign]
    assert full.groups(_frame({0: [51], 1: [52], 2: [300]})) == g


@pytest.mark.parametrize("endpoint, at, new_pid, rebuilt", [
    (False, 4.0, False, False), (False, 29.0, False, False), (False, 30.0, False, True),  # no endpoint: every 30 s
    (False, 1.0, True, True),                                                            # ... or when a process comes
    (True, 4.0, False, False), (True, 5.0, False, True),                                 # an endpoint: every 5 s
    ("added", 1.0, False, True),                                                         # ... or when one comes
])
def test_finder_rebuild_cadence(tmp_path, endpoint: bool | str, at: float, new_pid: bool, rebuilt: bool) -> None:
    """Groups are rebuilt when the GPU processes or endpoints change, else every 5 s with an endpoint (a listener
    to find, a TP size to learn) and every 30 s without one (only the GPU processes' ancestry)."""
    (tmp_path / "net").mkdir()
    (tmp_path / "net" / "tcp").write_text(TCP)
    (tmp_path / "net" / "tcp6").write_text(TCP6.splitlines()[0] + "\n")
    _proc(tmp_path, 1, 0, ["/sbin/init"])
    _proc(tmp_path, 100, 1, VLLM_ARGS, {"5": "socket:[44321]"})
    _proc(tmp_path, 101, 100, VLLM_ARGS)
    _proc(tmp_path, 102, 100, VLLM_ARGS)
    t = [0.0]
    f = GroupFinder(str(tmp_path), clock=lambda: t[0], resolve=lambda h: [])
    eps = [EndpointReading(url="http://localhost:8000/metrics", kind="vllm")]
    builds: list[int] = []
    real = f.build
    f.build = lambda e, h: builds.append(1) or real(e, h)  # type: ignore[method-assign]
    f.groups(_frame({0: [101]}, eps if endpoint is True else []))
    t[0] = at
    f.groups(_frame({0: [101], 1: [102]} if new_pid else {0: [101]}, eps if endpoint else []))
    assert len(builds) == (2 if rebuilt else 1)


def test_finder_listener_unreadable_says_so(tmp_path):
    (tmp_path / "net").mkdir()
    (tmp_path / "net" / "tcp").write_text(TCP)
    _proc(tmp_path, 101, 1, VLLM_ARGS)
    os.chmod(tmp_path / "101" / "fd", 0)
    try:
        f = GroupFinder(str(tmp_path), resolve=lambda h: [])
        if f.reader.socket_inodes(101) is not None:
            pytest.skip("running as root: every fd directory is readable")
        g = f.groups(_frame({0: [101]}, [EndpointReading(url="http://127.0.0.1:8000", kind="vllm")]))
        assert g[0].pids == () and g[0].note and "not readable" in g[0].note
        assert g[1].gpus == (0,)  # its GPU process still forms a group by program
    finally:
        os.chmod(tmp_path / "101" / "fd", 0o755)


def test_finder_not_local_and_no_listener(tmp_path):
    (tmp_path / "net").mkdir()
    (tmp_path / "net" / "tcp").write_text(TCP)
    f = GroupFinder(str(tmp_path), resolve=lambda h: ["192.0.2.7"])
    g = f.groups(_frame({}, [EndpointReading(url="http://gpu-far.example:8000", kind="vllm"),
                             EndpointReading(url="http://localhost:9999", kind="vllm")]))
    assert (g[0].local, g[0].note) == (False, "not local")
    assert g[1].local and "nothing listens on port 9999" in (g[1].note or "")


# ------------------------------------------------------------------ recording: codec and gate
def test_group_codec_round_trip_and_old_frames():
    from gpuscope.core.codec import frame_from_dict, frame_to_dict
    from gpuscope.core.model import ServingGroup

    g = ServingGroup(server="vLLM", kind="vllm", endpoint="http://localhost:8000", model="qwen3-27b", port=8000,
                     pids=(100, 101, 102), gpus=(0, 1), tp=2, container="docker 4f1c2b3a9d8e")
    f = Frame(t=5.0, gpus=(GpuReading(index=0), GpuReading(index=1)), groups=(g,))
    d = frame_to_dict(f)
    assert d["groups"][0]["tp"] == 2 and "pp" not in d["groups"][0]
    assert frame_from_dict(d).groups == (g,)
    old = {"t": 5.0, "gpus": [{"index": 0}]}  # a recording from before groups
    assert frame_from_dict(old).groups == ()


def test_group_gate_drops_what_cannot_be_true():
    from gpuscope.core.codec import frame_from_dict
    from gpuscope.core.validate import Tally

    tally = Tally()
    d = {"t": 1.0, "gpus": [{"index": 0}, {"index": 1}],
         "groups": [{"server": "vLLM\x1b[2J", "port": 70000, "tp": 0, "pp": 99999, "pids": [0, 5, -1],
                     "gpus": [0, 1, 7], "note": "x\x07"}]}
    g = frame_from_dict(d, tally=tally).groups[0]
    assert (g.server, g.port, g.tp, g.pp, g.pids, g.note) == ("vLLM", None, None, None, (5,), "x")
    assert g.gpus == (0, 1, 7)  # without an inventory any index up to MAX_GPUS stands
    assert tally.readings == 5
    with pytest.raises(Exception, match="groups"):
        frame_from_dict({"t": 1.0, "gpus": [], "groups": "nope"})


@pytest.mark.parametrize("host,want", [
    ("localhost", True), ("127.0.0.1", True), ("127.0.0.2", True), ("::1", None), ("[::1]", None),
    ("192.0.2.7", False), ("far.example", False),
])
def test_is_local_host(host, want):
    from gpuscope.sources.groups import is_local_host

    got = is_local_host(host, resolve=lambda h: ["192.0.2.7"])
    if want is None:  # ::1 where the kernel has IPv6
        assert got in (True, False)
    else:
        assert got is want


def test_two_urls_of_one_server_share_its_group():
    claims = [Claim(url="http://localhost:8000", port=8000, local=True, listener=10, kind="vllm"),
              Claim(url="http://127.0.0.1:8000", port=8000, local=True, listener=10, kind="vllm")]
    a, b = build_groups(claims, {11: {0}, 12: {1}}, _view(ppids={11: 10, 12: 10}))
    assert a.gpus == b.gpus == (0, 1) and a.pids == b.pids == (10, 11, 12) and b.endpoint == "http://127.0.0.1:8000"
