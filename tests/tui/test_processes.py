"""Processes: /proc look-ups, NVML's process lists and per-process utilisation, scenario [[processes]],
the panel's line fitting, recordings, and the TUI (P, the detail view, every screen size)."""

from __future__ import annotations

import os
import pwd
import re
import textwrap
import time

import pytest
from helpers import run_frames, sim_source
from rich.cells import cell_len

from gpuscope.core.codec import frame_from_dict, frame_to_dict
from gpuscope.core.model import Frame, GpuReading, ProcessInfo
from gpuscope.core.session import Session
from gpuscope.outputs.recorder import Recorder
from gpuscope.sources import scenario as scenario_mod
from gpuscope.sources.nvml import NvmlSource
from gpuscope.sources.procinfo import ProcTable, parse_cmdline, parse_uid, read_facts, user_name
from gpuscope.sources.recording import open_recording
from gpuscope.sources.scenario import ScenarioError
from gpuscope.sources.simnvml import SimNvml
from gpuscope.tui.app import GpuDetailScreen, GpuscopeApp
from gpuscope.tui.layout import plan_layout
from gpuscope.widgets.processes_panel import (
    columns_for,
    fmt_mem,
    lines_wanted,
    process_lines,
    process_row,
    short_command,
)

GIB = 2**30


# ------------------------------------------------------------------ /proc
@pytest.mark.parametrize("status,want", [
    ("Name:\tpython3\nUid:\t1000\t1001\t1000\t1000\nGid:\t1\n", 1001),  # the effective uid
    ("Uid:\t0\t0\t0\t0\n", 0),
    ("Uid:\t42\n", 42),
    ("Name:\tx\n", None),
    ("Uid:\tabc\tdef\n", None),
    ("", None),
])
def test_parse_uid(status: str, want: int | None) -> None:
    assert parse_uid(status) == want


@pytest.mark.parametrize("raw,want", [
    (b"python3\0-m\0vllm.entrypoints.openai.api_server\0--model\0x\0", "python3 -m vllm.entrypoints.openai.api_server --model x"),
    (b"", None),
    (b"\0\0", None),
    (b"evil\x1b]0;title\x07\0arg\0", "evil arg"),  # escapes removed: a command line is anyone's text
    (b"a" * 500, "a" * 119 + "…"),
    (b"caf\xc3\xa9\0\xff\0", "café �"),
])
def test_parse_cmdline(raw: bytes, want: str | None) -> None:
    assert parse_cmdline(raw) == want


def _fake_pw(names: dict[int, str]):
    def getpwuid(uid: int) -> pwd.struct_passwd:
        if uid not in names:
            raise KeyError(uid)
        return pwd.struct_passwd((names[uid], "x", uid, uid, "", "/", "/bin/sh"))
    return getpwuid


@pytest.mark.parametrize("uid,want", [(1000, "alice"), (0, "root"), (4242, "4242"), (7, "7")])
def test_user_name(uid: int, want: str) -> None:
    # 4242 is unknown (a container's uid) and 7's name is only an escape sequence: the number, as ps shows it
    names = {1000: "alice", 0: "root", 7: "\x1b[2J"}
    assert user_name(uid, _fake_pw(names)) == want


def _fake_proc(root, pid: int, uid: int, comm: str, cmdline: bytes) -> None:
    d = root / str(pid)
    d.mkdir()
    (d / "status").write_text(f"Name:\t{comm}\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\n")
    (d / "comm").write_text(comm + "\n")
    (d / "cmdline").write_bytes(cmdline)


def test_read_facts_and_cache_with_a_fake_proc(tmp_path) -> None:
    _fake_proc(tmp_path, 2811, 1000, "python3", b"/usr/bin/python3\0-m\0vllm\0")
    getpw = _fake_pw({1000: "alice"})
    f = read_facts(2811, str(tmp_path), getpw)
    assert (f.user, f.name, f.command) == ("alice", "python3", "/usr/bin/python3 -m vllm")
    gone = read_facts(9999, str(tmp_path), getpw)  # not in this /proc, which has no kthreadd: a container's
    assert (gone.user, gone.name, gone.command) == ("–", None, "(other PID namespace)")

    table = ProcTable(str(tmp_path), getpw)
    assert table.facts(2811).user == "alice" and table.facts(2811).user == "alice"
    assert table.reads == 1  # cached per pid
    assert table.facts(9999).user == "–"
    (tmp_path / "2811" / "status").write_text("Uid:\t0\t0\t0\t0\n")  # the pid was reused by root's process
    table.keep([9999])  # 2811 left the GPU: forgotten, so its reuse is read afresh
    assert table.facts(2811).user == "0"  # uid 0 unknown to this fake password database: the number
    assert table.reads == 3


def test_read_facts_of_this_very_process() -> None:
    f = read_facts(os.getpid())
    assert f.user == pwd.getpwuid(os.geteuid()).pw_name and f.command and "python" in f.command.lower()


# ------------------------------------------------------------------ scenarios
BASE = """
name = "t"
[[gpus]]
count = 2
name = "NVIDIA RTX A6000"
{gpu_extra}
[[phases]]
name = "load"
duration_s = 60
util_gpu_pct = 90
mem_used_gib = 40
{phase_extra}
{procs}
"""


def _scenario(tmp_path, procs: str = "", gpu_extra: str = "", phase_extra: str = "") -> str:
    p = tmp_path / "t.toml"
    p.write_text(textwrap.dedent(BASE).format(procs=procs, gpu_extra=gpu_extra, phase_extra=phase_extra))
    return str(p)


@pytest.mark.parametrize("procs,field", [
    ('[[processes]]\npid = 5\nname = "x"\n', "processes[0]: expected one of gpu = N or gpus"),
    ('[[processes]]\ngpu = 0\ngpus = [1]\npid = 5\nname = "x"\n', "processes[0]: expected one of gpu = N or gpus"),
    ('[[processes]]\ngpu = 2\npid = 5\nname = "x"\n', "processes[0].gpu: expected a GPU index 0-1"),
    ('[[processes]]\ngpus = [0, 5]\npid = 5\nname = "x"\n', "processes[0].gpus: expected a list of GPU indices"),
    ('[[processes]]\ngpus = []\npid = 5\nname = "x"\n', "processes[0].gpus: expected at least one"),
    ('[[processes]]\ngpu = 0\nname = "x"\n', "processes[0].pid: required"),
    ('[[processes]]\ngpu = 0\npid = 0\nname = "x"\n', "processes[0].pid: expected a process id"),
    ('[[processes]]\ngpu = 0\npid = "7"\nname = "x"\n', "processes[0].pid: expected an integer"),
    ('[[processes]]\ngpu = 0\npid = 7\n', "processes[0]: expected a non-empty name or command"),
    ('[[processes]]\ngpu = 0\npid = 7\nname = "x"\nsm_pct = 150\n', "processes[0].sm_pct: expected a percentage"),
    ('[[processes]]\ngpu = 0\npid = 7\nname = "x"\nmemory_gib = -1\n', "processes[0].memory_gib: must not be negative"),
    ('[[processes]]\ngpu = 0\npid = 7\nname = "x"\ncolour = 1\n', "processes[0].colour: unknown field"),
    ('[[processes]]\ngpu = 0\npid = 7\nname = "x"\n[[processes]]\ngpus = [1, 0]\npid = 6\nname = "y"\n',
     "processes[1].pid: pid 7 on GPU0 is already listed by processes[0]"),
    ('processes = 3\n', "processes: expected a list"),
])
def test_scenario_process_errors_name_file_and_field(tmp_path, procs: str, field: str) -> None:
    path = _scenario(tmp_path, procs if not procs.startswith("processes =") else "")
    if procs.startswith("processes ="):  # a top-level key must come before the tables
        text = open(path).read()
        open(path, "w").write(procs + text)
    with pytest.raises(ScenarioError) as e:
        scenario_mod.load(path)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"scenario {path}: ") and field in msg, msg


def test_scenario_processes_expand_per_gpu_with_rank(tmp_path) -> None:
    sc = scenario_mod.load(_scenario(tmp_path, '[[processes]]\ngpus = [1, 0]\npid = 100\nuser = "vllm"\n'
                                               'command = "/opt/venv/bin/python worker TP{rank}"\n'))
    assert [(p.gpu, p.pid, p.name, p.command) for p in sc.processes] == [
        (1, 100, "python", "/opt/venv/bin/python worker TP0"), (0, 101, "python", "/opt/venv/bin/python worker TP1")]


def _frame(path: str, at: float = 10.0) -> Frame:
    src = sim_source(path)
    return run_frames(src, at, at)[0]


def test_listed_processes_share_memory_and_sm(tmp_path) -> None:
    f = _frame(_scenario(tmp_path, '[[processes]]\ngpu = 0\npid = 10\nname = "big"\n'
                                   '[[processes]]\ngpu = 0\npid = 11\nname = "small"\nmemory_gib = 2\nsm_pct = 5\n'))
    big, small = sorted(f.gpus[0].processes, key=lambda p: p.pid)
    assert small.used_memory_bytes == 2 * GIB and small.sm_pct == 5
    assert big.used_memory_bytes == f.gpus[0].mem_used_bytes - 2 * GIB  # the rest of the GPU's memory
    assert big.sm_pct == pytest.approx(f.gpus[0].util_gpu_pct - 5, abs=1.01)
    assert f.gpus[1].processes == ()  # listed nowhere, no count: no processes


def test_phase_count_limits_listed_and_pads_generic(tmp_path) -> None:
    procs = '[[processes]]\ngpus = [0, 1]\npid = 10\nname = "w"\n'
    f0 = _frame(_scenario(tmp_path, procs, phase_extra="processes = 0"))
    assert [g.processes for g in f0.gpus] == [(), ()]
    f2 = _frame(_scenario(tmp_path, procs, phase_extra="processes = 2"))
    assert [p.name for p in f2.gpus[0].processes] == ["w", "python3"]  # the listed one, then a generic one


def test_graphics_processes_are_marked(tmp_path) -> None:
    f = _frame(_scenario(tmp_path, '[[processes]]\ngpu = 0\npid = 10\nname = "Xorg"\ngraphics = true\n'
                                   'memory_gib = 0.1\n[[processes]]\ngpu = 0\npid = 11\nname = "w"\n'))
    kinds = {p.pid: p.kind for p in f.gpus[0].processes}
    assert kinds == {10: "G", 11: "C"}


class Counting:
    """The simulated NVML with its process calls counted (and optionally replaced)."""

    def __init__(self, sim: SimNvml, util=None):
        self._sim = sim
        self.calls: dict[str, int] = {}
        self._util = util

    def __getattr__(self, name):
        attr = getattr(self._sim, name)
        if not name.startswith("nvmlDeviceGet") or not callable(attr):
            return attr

        def counted(*a):
            self.calls[name] = self.calls.get(name, 0) + 1
            if name == "nvmlDeviceGetProcessUtilization" and self._util is not None:
                return self._util(*a)
            return attr(*a)
        return counted


def _source(path: str, util=None) -> tuple[NvmlSource, Counting, object]:
    from gpuscope.sources.live import VirtualClock

    sc = scenario_mod.load(path)
    clock = VirtualClock(0.0)
    fake = Counting(SimNvml(sc, clock=clock, pcie_block_s=0), util)
    src = NvmlSource(fake, simulated=True, clock=lambda: 1.7e9 + clock())
    src.open()
    return src, fake, clock


def _run(src: NvmlSource, clock, times) -> list[Frame]:
    out = []
    for t in times:
        clock.now = t
        out.append(src.sample())
    return out


def test_process_util_not_supported_is_never_asked_again(tmp_path) -> None:
    path = _scenario(tmp_path, '[[processes]]\ngpus = [0, 1]\npid = 10\nname = "w"\n', gpu_extra="process_util = false")
    src, fake, clock = _source(path)
    frames = _run(src, clock, [0, 6, 12, 18])
    assert fake.calls["nvmlDeviceGetProcessUtilization"] == 2  # once per GPU, then never
    assert fake.calls["nvmlDeviceGetComputeRunningProcesses"] == 8  # every slow read (every 5 s)
    assert all(p.sm_pct is None for f in frames for g in f.gpus for p in g.processes)


def test_process_list_not_supported_reads_none(tmp_path) -> None:
    path = _scenario(tmp_path, '[[processes]]\ngpus = [0, 1]\npid = 10\nname = "w"\n', gpu_extra="process_list = false")
    src, fake, clock = _source(path)
    frames = _run(src, clock, [0, 6, 12])
    assert all(g.processes is None for f in frames for g in f.gpus)
    assert fake.calls["nvmlDeviceGetComputeRunningProcesses"] == 2
    assert "nvmlDeviceGetProcessUtilization" not in fake.calls


def test_processes_are_read_on_the_slow_path_only(tmp_path) -> None:
    path = _scenario(tmp_path, '[[processes]]\ngpus = [0, 1]\npid = 10\nname = "w"\n')
    src, fake, clock = _source(path)
    frames = _run(src, clock, [0, 1, 2, 3, 4])  # one slow read, then carried
    assert fake.calls["nvmlDeviceGetComputeRunningProcesses"] == 2
    assert fake.calls["nvmlDeviceGetProcessUtilization"] == 2
    assert all(f.gpus[0].processes == frames[0].gpus[0].processes for f in frames)


@pytest.mark.parametrize("answer,want_sm", [
    ("not_found", 0.0),  # no sample since the last read: every process 0 %
    ("success_quirk", 0.0),  # nvidia-ml-py raises NVMLError(SUCCESS) when the first call finds nothing
    ("unknown_error", None),  # transient: unknown, and asked again next time
    ("two_samples", 40.0),  # the newest sample of a pid counts
])
def test_process_util_answers(tmp_path, answer: str, want_sm: float | None) -> None:
    from types import SimpleNamespace as NS

    import pynvml

    def util(h, last_seen):
        if answer == "not_found":
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        if answer == "success_quirk":
            raise pynvml.NVMLError(pynvml.NVML_SUCCESS)
        if answer == "unknown_error":
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNKNOWN)
        return [NS(pid=10, timeStamp=last_seen + 5, smUtil=40, memUtil=7),
                NS(pid=10, timeStamp=last_seen + 2, smUtil=90, memUtil=9)]

    path = _scenario(tmp_path, '[[processes]]\ngpu = 0\npid = 10\nname = "w"\n')
    src, fake, clock = _source(path, util)
    f1, f2, f3 = _run(src, clock, [0, 6, 15])  # read at 0, carried at 6, read again at 15 (the health ticks)
    assert [f.gpus[0].processes[0].sm_pct for f in (f1, f2, f3)] == [want_sm] * 3
    assert fake.calls["nvmlDeviceGetProcessUtilization"] == 2  # none of these stops the asking
    if answer == "two_samples":
        assert src._util_seen[0] == 10  # the next read asks from the newest sample seen (5, then 10)


# ------------------------------------------------------------------ the panel's lines
def P(pid: int, mem: float | None, **kw) -> ProcessInfo:  # noqa: N802
    return ProcessInfo(pid=pid, used_memory_bytes=None if mem is None else int(mem * 2**30), **kw)  # mem in GiB


@pytest.mark.parametrize("n,want", [(None, "–"), (135.5e9, "126 GiB"), (45.25 * 2**30, "45.2 GiB"),
                                    (512 * 2**20, "512 MiB"), (2 * 2**40, "2.0 TiB"), (4096, "4 KiB"),
                                    (999.96e9, "931 GiB")])
def test_fmt_mem(n, want) -> None:
    assert fmt_mem(None if n is None else int(n)) == want and cell_len(want) <= 9


@pytest.mark.parametrize("width,kind,want", [
    (76, False, ["gpu", "pid", "user", "mem", "sm", "command"]),
    (76, True, ["gpu", "pid", "user", "kind", "mem", "sm", "command"]),
    (43, False, ["gpu", "pid", "user", "mem", "sm", "command"]),  # command at its minimum, 8
    (42, False, ["gpu", "pid", "user", "mem", "sm"]),  # the command goes first
    (30, True, ["gpu", "pid", "mem", "sm"]),  # then TYPE, then USER
    (21, False, ["gpu", "pid", "mem"]),  # then SM %; GPU, PID and memory stay
])
def test_columns_for(width: int, kind: bool, want: list[str]) -> None:
    assert [c.key for c in columns_for(width, kind_column=kind)] == want


@pytest.mark.parametrize("width", [21, 25, 30, 42, 43, 56, 76, 116, 196])
def test_rows_fit_and_never_cut_a_number(width: int) -> None:
    p = P(4194303, 141.2, user="a-very-long-user-name", command="/usr/bin/python3 -m vllm --model x" * 3,
          sm_pct=100.0, kind="C+G")
    cols = columns_for(width, kind_column=True)
    row = process_row(7, p, cols, width).plain
    assert cell_len(row) <= width
    for number in ("7", "4194303", "141 GiB"):
        assert re.search(rf"(^|\s){re.escape(number)}(\s|$)", row), (number, row)
    if any(c.key == "sm" for c in cols):
        assert "100%" in row


@pytest.mark.parametrize("p,want", [
    (P(1, 1, command="/usr/bin/python3 -m vllm"), "python3 -m vllm"),
    (P(1, 1, name="VLLM::Worker_TP0"), "VLLM::Worker_TP0"),
    (P(1, 1), "?"),
    (P(1, 1, command="./run.sh --x /a/b"), "run.sh --x /a/b"),
])
def test_short_command(p: ProcessInfo, want: str) -> None:
    assert short_command(p) == want


def _f(*gpus: GpuReading) -> Frame:
    return Frame(t=1.0, gpus=gpus)


BIG = P(10, 70.0, user="vllm", command="python3 -m vllm", sm_pct=97.0)
SMALL = P(11, 1.5, user="alice", command="python3 notebook.py", sm_pct=1.0)
MID = P(12, 20.0, user="bob", command="python3 train.py")


@pytest.mark.parametrize("frame,budget,gpu,want", [
    (None, 5, None, ["waiting for the first reading"]),
    (_f(GpuReading(0, processes=()), GpuReading(1, processes=())), 5, None, ["no processes on any GPU"]),
    (_f(GpuReading(0, processes=None), GpuReading(1, processes=None)), 5, None,
     ["processes not reported by these GPUs"]),
    (_f(GpuReading(0, processes=None)), 5, 0, ["processes not reported by this GPU"]),
    (_f(GpuReading(0, processes=()), GpuReading(1, processes=None)), 5, None,
     ["no processes on any GPU", "GPU1: processes not reported by this GPU"]),
    (_f(GpuReading(0, processes=(SMALL,)), GpuReading(1, processes=(BIG, MID))), 5, None,
     ["HEADER", "1 10 vllm 70.0 GiB 97% python3 -m vllm", "1 12 bob 20.0 GiB – python3 train.py",
      "0 11 alice 1.5 GiB 1% python3 notebook.py"]),
    (_f(GpuReading(0, processes=(SMALL,)), GpuReading(1, processes=(BIG, MID))), 3, None,
     ["HEADER", "1 10 vllm 70.0 GiB 97% python3 -m vllm", "+2 more (smaller)"]),
    (_f(GpuReading(0, processes=(SMALL,)), GpuReading(1, processes=(BIG, MID))), 2, None,
     ["1 10 vllm 70.0 GiB 97% python3 -m vllm", "+2 more (smaller)"]),  # two lines: no header, the largest
    (_f(GpuReading(0, processes=(SMALL,)), GpuReading(1, processes=None)), 3, None,
     ["HEADER", "0 11 alice 1.5 GiB 1% python3 notebook.py", "GPU1: processes not reported by this GPU"]),
    (_f(GpuReading(0, processes=(SMALL, MID)), GpuReading(1, processes=None)), 3, None,
     ["HEADER", "0 12 bob 20.0 GiB – python3 train.py", "0 11 alice 1.5 GiB 1% python3 notebook.py"]),  # rows first
    (_f(GpuReading(0, processes=(SMALL,)), GpuReading(1, processes=(BIG, MID))), 1, None,
     ["3 processes (no room to list them)"]),
    (_f(GpuReading(0, processes=(SMALL,)), GpuReading(1, processes=(BIG, MID))), 5, 0,
     ["HEADER", "11 alice 1.5 GiB 1% python3 notebook.py"]),
    (_f(GpuReading(0, processes=(SMALL,)), GpuReading(1, processes=None)), 5, None,
     ["HEADER", "0 11 alice 1.5 GiB 1% python3 notebook.py", "GPU1: processes not reported by this GPU"]),
    (_f(GpuReading(0, lost=True), GpuReading(1, processes=())), 5, None, ["no processes on this GPU"]),
    (_f(GpuReading(0, lost=True)), 5, 0, ["GPU0 lost"]),
])
def test_process_lines_states_and_order(frame, budget, gpu, want) -> None:
    lines = [" ".join(t.plain.split()) for t in process_lines(frame, 76, budget, gpu=gpu)]
    lines = ["HEADER" if ln.startswith("GPU PID") or ln.startswith("PID USER") else ln for ln in lines]
    assert lines == want
    if gpu is None:
        assert lines_wanted(frame) == len(process_lines(frame, 76, 10**6))


@pytest.mark.parametrize("size,n,procs,topo", [((80, 24), 2, 6, (5, 2)), ((80, 24), 8, 9, (11, 2)),
                                                ((60, 20), 8, 9, (0, 2)), ((120, 40), 8, 20, (11, 2)),
                                                ((80, 14), 8, 9, (11, 2)), ((200, 60), 8, 40, (11, 2))])
def test_plan_gives_processes_rows_never_at_the_gpus_cost(size, n, procs, topo) -> None:
    w, h = size
    off = plan_layout(w, h, n, 3, topo_lines=topo)
    on = plan_layout(w, h, n, 3, topo_lines=topo, procs_lines=procs)
    assert off.procs_lines == 0
    used = 2 + n + 1 + on.findings_rows + on.procs_rows + (topo[on.topology] + 2 if on.topology >= 0 else 0)
    assert used <= h
    assert on.findings_lines >= min(1, off.findings_lines)  # the first findings line comes first
    if h - 2 - (n + 1) - off.findings_rows >= 4:
        assert on.procs_lines >= 2  # a header and a row at least


# ------------------------------------------------------------------ codec and recordings
def test_codec_decodes_old_processes_without_the_new_fields() -> None:
    old = {"t": 1.0, "gpus": [{"index": 0, "processes": [{"pid": 7, "used_memory_bytes": 1000, "name": "python3"}]}]}
    p = frame_from_dict(old).gpus[0].processes[0]
    assert (p.pid, p.name, p.user, p.command, p.sm_pct, p.kind) == (7, "python3", None, None, None, "C")


def test_codec_round_trips_and_sanitises_the_new_fields() -> None:
    p = ProcessInfo(pid=7, used_memory_bytes=10, name="w", user="vllm", command="python3 -m vllm", sm_pct=42.0,
                    mem_pct=3.0, kind="C+G")
    f = Frame(t=1.0, gpus=(GpuReading(0, processes=(p,)),))
    assert frame_from_dict(frame_to_dict(f)) == f
    bad = frame_to_dict(f)
    bad["gpus"][0]["processes"][0].update(user="\x1b[2Jroot", sm_pct=250, kind="X", command="a\nb")
    q = frame_from_dict(bad).gpus[0].processes[0]
    assert (q.user, q.sm_pct, q.kind, q.command) == ("root", None, "C", "a b")


def test_a_recording_carries_the_processes(tmp_path) -> None:
    """What `gpuscope record` writes: the same source and recorder; the processes come back whole."""
    path = tmp_path / "r.jsonl.gz"
    src = sim_source("mixed-4")
    s = Session(src.inventory, interval_s=1.0)
    s.start_recording(Recorder(str(path), src.inventory, command=["test"], interval_s=1.0))
    frames = [s.ingest(f) for f in run_frames(src, 0, 12)]
    s.stop_recording()
    rec = open_recording(path)
    got = rec.frame(12).gpus[3].processes
    assert got == frames[12].gpus[3].processes
    assert {(p.pid, p.user) for p in got} == {(3302, "bob"), (9120, "carol")}
    assert all(p.sm_pct is not None and p.command for p in got)


# ------------------------------------------------------------------ the TUI
def _app(scenario: str, end: float = 20) -> GpuscopeApp:
    src = sim_source(scenario)
    session = Session(src.inventory, interval_s=1.0)
    for f in run_frames(src, 0, end):
        session.ingest(f)
    return GpuscopeApp(session, None, label="SIMULATED", interval_s=1.0)


async def _until(pilot, cond, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond() and time.monotonic() < deadline:
        await pilot.pause(0.01)
    assert cond()


def _screen(app) -> str:
    from test_screen import screen_lines

    return "\n".join(screen_lines(app))


async def test_P_shows_and_hides_the_simulated_processes() -> None:  # noqa: N802
    app = _app("mixed-4")
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert not app.query_one("#procs").display and "carol" not in _screen(app)  # hidden by default
        await pilot.press("P")
        await _until(pilot, lambda: "carol" in _screen(app))
        text = _screen(app)
        assert "Processes (simulated)" in text and "3101" in text and "alice" in text
        rows = [ln for ln in text.splitlines() if re.search(r"\b(3101|3102|3301|3302|9120)\b", ln)]
        assert len(rows) == 5 and "9120" in rows[-1]  # largest memory first: the notebook last
        for i in range(4):  # every GPU still visible
            assert re.search(rf"(^|[│ ─]){i} \S|GPU{i} \S", text, re.M)
        await pilot.press("P")
        await _until(pilot, lambda: "carol" not in _screen(app))


async def test_detail_view_lists_that_gpus_processes() -> None:
    app = _app("mixed-4")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("4")  # GPU3
        await _until(pilot, lambda: isinstance(app.screen, GpuDetailScreen) and "carol" in _screen(app))
        text = _screen(app)
        assert "9120" in text and "3302" in text and "3101" not in text  # GPU3's only
        assert "Processes (simulated)" in text


async def test_not_reported_is_said_in_the_panel(tmp_path) -> None:
    path = _scenario(tmp_path, '[[processes]]\ngpus = [0, 1]\npid = 10\nname = "w"\n', gpu_extra="process_list = false")
    app = _app(path)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("P")
        await _until(pilot, lambda: "processes not reported by these GPUs" in _screen(app))


SCREEN_SIZES = [(80, 24), (100, 30), (120, 40), (160, 50), (200, 60), (60, 20)]


@pytest.mark.screen
@pytest.mark.parametrize("size", SCREEN_SIZES, ids=[f"{w}x{h}" for w, h in SCREEN_SIZES])
@pytest.mark.parametrize("scenario", ["a6000-tp2-pcie-gen1", "h200-nvswitch-8", "mixed-4"])
async def test_screen_fits_with_the_panel_on(scenario: str, size: tuple[int, int]) -> None:
    """The screen check of tests/tui/test_screen.py with the processes panel on."""
    from test_screen import _check

    app = _app(scenario, 40)
    app.show_processes = True  # as after P
    await _check(app, size, "SIMULATED")


async def test_P_in_replay_shows_an_old_recordings_processes() -> None:  # noqa: N802
    """The bundled demo was recorded on real H200s before user, command and SM % existed: its processes
    still show, with user "?" and SM % "–" (nothing invented)."""
    from gpuscope.tui.feeders import ReplayFeeder
    from gpuscope.tui.run import demo_path

    rec = open_recording(demo_path())
    session = Session(rec.inventory, interval_s=1.0, history_s=3600.0)
    app = GpuscopeApp(session, None, label="REPLAY", interval_s=1.0, origin_note="demo")
    feeder = ReplayFeeder(rec, session, app.notify_update, window_s=lambda: app.window_s)
    feeder.seek(rec.times[0] + 0.5 * rec.duration_s)
    feeder.playing = False
    feeder.start = lambda: None  # type: ignore[method-assign]
    feeder.stop = lambda: None  # type: ignore[method-assign]
    app.feeder = feeder
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("P")
        await _until(pilot, lambda: re.search(r"\b835 \?\s+2\.0 GiB\s+– python3", _screen(app)) is not None)
        assert "Processes (simulated)" not in _screen(app)  # a real recording is not labelled simulated


async def test_P_is_in_the_palette_and_harmless_in_the_detail_view() -> None:  # noqa: N802
    from gpuscope.tui.commands import palette_commands

    app = _app("mixed-4")
    async with app.run_test(size=(100, 30)) as pilot:
        cmds = {n: cb for n, _h, cb in palette_commands(app)}
        assert "Processes panel" in cmds
        await cmds["Processes panel"]()  # run_action: a coroutine, as the palette awaits it
        await _until(pilot, lambda: "carol" in _screen(app))
        await pilot.press("2")  # GPU1's detail, then P there: nothing breaks, the main screen keeps the state
        await _until(pilot, lambda: isinstance(app.screen, GpuDetailScreen))
        await pilot.press("P")
        await pilot.press("escape")
        await _until(pilot, lambda: not isinstance(app.screen, GpuDetailScreen))
        await _until(pilot, lambda: "carol" not in _screen(app))  # P toggled it off
        assert app.crash is None


async def test_live_screen_reads_process_utilisation_and_energy_only_when_shown_or_recorded(tmp_path) -> None:
    """tui/run.py read_on_demand wires the live screen's source as the CLI builds it (serving groups around
    the NVML source): per-process utilisation is read while the processes panel shows (P) or a recording runs,
    the energy counter while a recording runs; the frames say so (None, else a figure)."""
    from gpuscope.sources.groups import with_groups
    from gpuscope.tui.run import read_on_demand

    src = with_groups(sim_source("mixed-4", at=30), "mixed-4")
    session = Session(src.inventory, interval_s=1.0)
    app = GpuscopeApp(session, None, label="SIMULATED", interval_s=1.0)
    read_on_demand(src, session, app)

    def tick(t: float) -> GpuReading:
        src.nvml.clock.now = t
        return src.sample().gpus[0]

    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        first = tick(30)  # a slow tick
        assert first.processes and all(p.sm_pct is None for p in first.processes) and first.energy_j is None
        await pilot.press("P")
        await _until(pilot, lambda: app.show_processes)
        shown = tick(33)  # not a slow tick: the panel opened, the process list and its figures at once
        assert all(p.sm_pct is not None for p in shown.processes or ()) and shown.energy_j is None
        await pilot.press("P")
        await _until(pilot, lambda: not app.show_processes)
        assert all(p.sm_pct is None for p in tick(40).processes or ())  # the slow tick after the panel closed
        await pilot.press("d")  # a GPU's detail view lists its processes with SM %: read while it is open
        await _until(pilot, lambda: isinstance(app.screen, GpuDetailScreen))
        assert all(p.sm_pct is not None for p in tick(41).processes or ())
        await pilot.press("escape")
        await _until(pilot, lambda: not isinstance(app.screen, GpuDetailScreen) and app.details_open == 0)
        assert all(p.sm_pct is None for p in tick(46).processes or ())  # the slow tick after it closed
        session.start_recording(Recorder(str(tmp_path / "r.jsonl.gz"), session.inventory, interval_s=1.0))
        recording = tick(48)  # not a slow tick (46 was): both at once (the utilisation became wanted again)
        assert recording.energy_j is not None and all(p.sm_pct is not None for p in recording.processes or ())
        session.stop_recording()
        assert tick(49).energy_j is None
    src.close()
