"""Dependable under damage, hostile input and lost terminals: salvage, never overwrite, the
validation gate, sanitised text, loud failures, no orphans."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuscope.core import recording_format
from gpuscope.core.codec import CodecError, frame_from_dict, inventory_from_dict, inventory_to_dict
from gpuscope.core.model import DeviceInfo, Frame, GpuReading, Inventory
from gpuscope.core.stats import summarize
from gpuscope.core.text import clean
from gpuscope.core.validate import Tally, dumps_out, loads
from gpuscope.outputs.recorder import Recorder
from gpuscope.sources.recording import RecordingError, open_recording

GPUSCOPE = [sys.executable, "-m", "gpuscope"]
ROOT = Path(__file__).resolve().parents[2]


def run(*args: str, timeout: float = 60, **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*GPUSCOPE, *args], capture_output=True, text=True, timeout=timeout, **kw)


def inv(n: int = 2) -> Inventory:
    return Inventory(host="h", devices=tuple(DeviceInfo(index=i, name="GPU", uuid=f"u{i}", bus_id=f"b{i}")
                                             for i in range(n)))


def frame(t: float, n: int = 2, **kw) -> Frame:
    return Frame(t=t, gpus=tuple(GpuReading(index=i, util_gpu_pct=50.0, power_w=300.0, **kw) for i in range(n)))


def write(path: Path, frames: list[Frame], inventory: Inventory | None = None, member_bytes: int | None = None,
          monkeypatch: pytest.MonkeyPatch | None = None, close: bool = True) -> Path:
    if member_bytes is not None and monkeypatch is not None:
        monkeypatch.setattr(recording_format, "MEMBER_BYTES", member_bytes)
    r = Recorder(path, inventory or inv(), interval_s=1.0, fsync=False, force=True)
    for f in frames:
        r.write(f, wait=True)
    if close:
        r.close()
    return path


def header_line(**over) -> bytes:
    h = {"type": "header", "format": "gpuscope-recording", "version": 1, "interval_s": 1.0,
         "inventory": inventory_to_dict(inv())}
    h.update(over)
    return json.dumps(h).encode() + b"\n"


# ----------------------------------------------------------------------------------------------- salvage
@pytest.fixture(scope="module")
def multi(tmp_path_factory):
    """A 401-frame recording of 8 simulated-looking GPUs in ~10 gzip members (a long recording's shape)."""
    p = tmp_path_factory.mktemp("multi") / "multi.jsonl.gz"
    mp = pytest.MonkeyPatch()
    try:
        frames = [Frame(t=1.7e9 + i * 0.1, gpus=tuple(GpuReading(index=g, util_gpu_pct=float((i * 7 + g) % 101),
                                                                 power_w=100.0 + (i * 13 + g) % 500,
                                                                 sm_clock_mhz=1000 + (i * 31 + g) % 900,
                                                                 pcie_rx_bytes_per_s=float(i * 12345 + g))
                                                      for g in range(8))) for i in range(401)]
        write(p, frames, inv(8), member_bytes=40_000, monkeypatch=mp)
    finally:
        mp.undo()
    rec = open_recording(p)
    assert rec.n_frames == 401 and rec.complete and len(rec.members) >= 8, [m.count for m in rec.members]
    return p, rec


def test_one_flipped_byte_costs_one_member(multi, tmp_path):
    p, rec = multi
    raw = bytearray(p.read_bytes())
    m = rec.members[0]
    raw[m.offset + 40] ^= 0xFF
    bad = tmp_path / "flip.jsonl.gz"
    bad.write_bytes(raw)
    got = open_recording(bad)
    assert got.n_frames >= 401 - m.count
    assert got.damaged_at == [m.offset]
    assert got.problems[0] == f"frames {got.n_frames} of ~401; 1 damaged member at byte {m.offset:,}"
    assert sum(1 for _ in got.frames()) == got.n_frames  # every kept frame decodes
    out = run("summary", str(bad))
    assert out.returncode == 0 and f"frames {got.n_frames} of ~401; 1 damaged member" in out.stdout


def _touched(members: list[tuple[int, int, int]], spans: list[tuple[int, int]]) -> int:
    """Frames in members that no mutated byte span touches."""
    return sum(c for (a, b, c) in members if not any(s < b and e > a for s, e in spans))


mutation = st.tuples(st.sampled_from(["flip", "delete", "insert"]), st.floats(0, 1), st.integers(1, 64))


@settings(max_examples=examples(60), deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(mutation, min_size=1, max_size=4))
def test_random_damage_keeps_every_untouched_member(multi, tmp_path, muts):
    p, rec = multi
    raw = bytearray(p.read_bytes())
    members = [(m.offset, m.end, m.count) for m in rec.members]
    header_end = rec.members[0].offset
    spans: list[tuple[int, int]] = []
    edits = sorted(((int(f * (len(raw) - 1)), kind, k) for kind, f, k in muts), reverse=True)
    for pos, kind, k in edits:  # from the end, so earlier positions stay valid
        if kind == "flip":
            raw[pos] ^= (k % 255) + 1
            spans.append((pos, pos + 1))
        elif kind == "delete":
            del raw[pos:pos + k]
            spans.append((pos, pos + k))
        else:
            raw[pos:pos] = bytes((pos * 31 + i) % 256 for i in range(k))
            spans.append((pos - 1, pos + 1))
    bad = tmp_path / "bad.jsonl.gz"
    bad.write_bytes(bytes(raw))
    try:
        got = open_recording(bad)
    except RecordingError:
        assert any(s < header_end for s, _ in spans)  # only a damaged header may refuse the whole file
        return
    assert got.n_frames >= _touched(members, spans)
    n = sum(1 for _ in got.frames())
    assert n >= _touched(members, spans) - 0  # kept frames decode (damaged members' lines were checked in full)
    summarize(got)


def test_clock_steps_back_are_kept_in_file_order(tmp_path):
    ts = [100.0 + i for i in range(30)] + [50.0 + i for i in range(41)]  # an NTP step back after 30 frames
    p = write(tmp_path / "ntp.jsonl.gz", [frame(t) for t in ts])
    rec = open_recording(p)
    assert rec.n_frames == 71 and rec.problems == []
    assert [f.t for f in rec.frames()] == ts
    assert rec.index_at(1000.0) == 70 and rec.index_at(0.0) == 0
    doc = summarize(rec)
    assert doc["duration_s"] == pytest.approx(79.0)  # earliest to latest frame


@pytest.mark.parametrize("t", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_non_finite_time_rejects_that_frame_only(tmp_path, t):
    good = json.dumps({"t": 1.0, "gpus": [{"index": 0}]}).encode() + b"\n"
    bad = b'{"t":' + t.encode() + b',"gpus":[{"index":0}]}\n'
    p = tmp_path / "nan.jsonl.gz"
    p.write_bytes(gzip.compress(header_line() + good + bad + good.replace(b"1.0", b"2.0")))
    rec = open_recording(p)
    assert rec.n_frames == 2 and any("damaged line" in x for x in rec.problems)
    for cmd in (["summary", str(p)], ["summary", "--json", str(p)], ["compare", str(p), str(p)]):
        out = run(*cmd)
        assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    json.loads(run("summary", "--json", str(p)).stdout)  # strict JSON: no NaN/Infinity


def test_out_of_range_readings_become_unknown_and_are_counted():
    t = Tally()
    f = frame_from_dict({"t": 1, "gpus": [{"index": 0, "util_gpu_pct": float("nan"), "power_w": float("inf"),
                                           "pcie_rx_bytes_per_s": -5, "sm_clock_mhz": 1e30, "pcie_gen": 99,
                                           "temp_gpu_c": 55}],
                         "endpoints": [{"url": "http://x", "kv_cache_pct": float("inf")}]}, inv(1), t)
    g = f.gpus[0]
    assert (g.util_gpu_pct, g.power_w, g.pcie_rx_bytes_per_s, g.sm_clock_mhz, g.pcie_gen) == (None,) * 5
    assert g.temp_gpu_c == 55 and f.endpoints[0].kv_cache_pct is None and t.readings == 6
    assert "6 out-of-range readings shown as unknown" in t.describe()


@pytest.mark.parametrize("doc,msg", [
    ({"t": 1, "gpus": [{"index": 0}, {"index": 0}]}, "GPU 0 appears twice"),
    ({"t": 1, "gpus": [{"index": 0}, {"index": 1}, {"index": 2}]}, "3 GPUs but the inventory lists 2"),
    ({"t": 1, "gpus": [{"index": 5}]}, "outside"),
    ({"t": float("nan"), "gpus": []}, "not a finite number"),
])
def test_frames_inconsistent_with_the_inventory_are_rejected(doc, msg):
    with pytest.raises(CodecError, match=msg):
        frame_from_dict(doc, inv(2))


@pytest.mark.parametrize("devices,msg", [
    ([], "no GPUs"),
    ([{"index": 0, "name": "a", "uuid": "u", "bus_id": "b"}] * 2, "listed twice"),
    ([{"index": 3, "name": "a", "uuid": "u", "bus_id": "b"}], "outside"),
])
def test_bad_inventories_are_rejected(devices, msg):
    with pytest.raises(CodecError, match=msg):
        inventory_from_dict({"host": "h", "devices": devices})


def test_deep_nesting_is_a_clean_error():
    from gpuscope.core.validate import ValidationError
    with pytest.raises(ValidationError, match="nested"):
        loads("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValidationError, match="nested"):
        loads('{"t":1,"gpus":[],"events":[{"t":1,"kind":"m","data":' + "[" * 50 + "]" * 50 + "}]}")


@pytest.mark.parametrize("content,msg", [
    (header_line(interval_s="fast"), "interval_s is not a number"),
    (header_line(interval_s=-1), "interval_s is not a number"),
    (header_line(inventory={"host": "h", "devices": []}), "no GPUs"),
    (header_line(inventory={"host": "h", "devices": [{"index": 0, "name": "a", "uuid": "u", "bus_id": "b"}] * 2}),
     "listed twice"),
    (b"[" * 100_000 + b"]" * 100_000 + b"\n", "nested too deeply"),
], ids=["interval-fast", "interval-negative", "no-gpus", "duplicate-gpu", "deep-header"])
def test_crafted_recordings_are_one_line_errors(tmp_path, content, msg):
    p = tmp_path / "crafted.jsonl.gz"
    p.write_bytes(gzip.compress(content))
    for cmd in (["summary", str(p)], ["export", str(p), "--csv", str(tmp_path / "o.csv")],
                ["compare", str(p), str(p)], ["replay", str(p)]):
        out = run(*cmd)
        assert out.returncode == 1, (cmd, out)
        assert out.stderr.startswith("gpuscope: error:") and msg in out.stderr and out.stderr.count("\n") == 1, out.stderr


def test_a_deeply_nested_frame_is_a_counted_drop(tmp_path):
    p = tmp_path / "deep.jsonl.gz"
    good = json.dumps({"t": 2, "gpus": [{"index": 0}]}).encode() + b"\n"
    p.write_bytes(gzip.compress(header_line() + b'{"t":1,"gpus":' + b"[" * 100_000 + b"]" * 100_000 + b"}\n" + good))
    out = run("summary", str(p))
    assert out.returncode == 0 and "frame 0 is damaged (frame: nested too deeply)" in out.stdout, out
    assert "Traceback" not in out.stderr


def test_zero_devices_while_frames_carry_two(tmp_path):
    p = tmp_path / "zero.jsonl.gz"
    one = Inventory(host="h", devices=(DeviceInfo(index=0, name="G", uuid="u", bus_id="b"),))
    body = header_line(inventory=inventory_to_dict(one)) + json.dumps(
        {"t": 1, "gpus": [{"index": 0}, {"index": 1}]}).encode() + b"\n"
    p.write_bytes(gzip.compress(body))
    rec = open_recording(p)
    assert list(rec.frames()) == [] and "inventory lists 1" in rec.problems[-1]


# ------------------------------------------------------------------------------------------- sanitising
@pytest.mark.parametrize("raw,want", [
    ("\x1b[2J\x1b[31mEVIL\x07", "EVIL"),
    ("a\u202eb\u2066c", "abc"),
    ("\x1b]0;pwned\x07title", "title"),
    ("\x9b2Jx", "x"),
    ("line1\nline2\tend", "line1 line2 end"),
    ("NVIDIA H200 é 日本", "NVIDIA H200 é 日本"),
    (None, ""),
])
def test_clean(raw, want):
    assert clean(raw) == want


def test_escape_in_a_marker_never_reaches_the_terminal(tmp_path):
    r = Recorder(tmp_path / "m.jsonl.gz", inv(), interval_s=1.0, fsync=False)
    from gpuscope.core.model import Event
    r.write(Frame(t=1.0, gpus=frame(1.0).gpus, events=(Event(t=1.0, kind="marker", text="\x1b[2J\x1b[31mEVIL\x07"),)))
    r.write(frame(2.0))
    r.close()
    out = run("summary", str(tmp_path / "m.jsonl.gz"))
    assert out.returncode == 0 and "EVIL" in out.stdout
    assert "\x1b" not in out.stdout + out.stderr and "\x07" not in out.stdout + out.stderr


def test_output_json_never_holds_nan():
    assert dumps_out({"a": float("nan"), "b": [float("inf"), 1.5]}) == '{"a": null, "b": [null, 1.5]}'


# -------------------------------------------------------------------------------------- never overwrite
def test_record_and_export_refuse_an_existing_path(tmp_path):
    target = tmp_path / "precious.jsonl.gz"
    target.write_bytes(b"precious")
    out = run("record", "-o", str(target), "--simulate", "mixed-4", "--duration", "0.2", "--interval", "0.1")
    assert out.returncode == 1 and "exists; refusing to overwrite it (use --force)" in out.stderr
    assert target.read_bytes() == b"precious"
    src = write(tmp_path / "src.jsonl.gz", [frame(1.0), frame(2.0)])
    csv = tmp_path / "out.csv"
    csv.write_text("mine")
    out = run("export", str(src), "--csv", str(csv))
    assert out.returncode == 1 and "refusing to overwrite" in out.stderr and csv.read_text() == "mine"
    assert run("export", str(src), "--csv", str(csv), "--force").returncode == 0 and "t,gpu" in csv.read_text()
    out = run("record", "-o", str(target), "--force", "--simulate", "mixed-4", "--duration", "0.2",
              "--interval", "0.1")
    assert out.returncode == 0 and open_recording(target).n_frames >= 1


def test_fresh_name_never_exists(tmp_path):
    from gpuscope.tui.recording_controller import fresh_name
    now = time.time()
    a = fresh_name(str(tmp_path), now)
    Path(a).write_bytes(b"x")
    b = fresh_name(str(tmp_path), now)
    assert a != b and not os.path.exists(b) and b.endswith("-2.jsonl.gz")


# ------------------------------------------------------------------------------------ loud failures
@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
@pytest.mark.parametrize("cmd", [["summary", "{rec}"], ["summary", "--json", "{rec}"], ["scenarios"],
                                 ["topo", "--simulate", "mixed-4", "--json"]])
def test_full_stdout_is_an_error(tmp_path, cmd):
    rec = write(tmp_path / "r.jsonl.gz", [frame(1.0), frame(2.0)])
    with open("/dev/full", "w") as full:
        out = subprocess.run([*GPUSCOPE, *[c.format(rec=rec) for c in cmd]], stdout=full, stderr=subprocess.PIPE,
                             text=True, timeout=60)
    assert out.returncode == 1 and "cannot write the output" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize("argv", [["topo", "--simulate", "mixed-4", "--at", "nan"],
                                  ["topo", "--simulate", "mixed-4", "--at", "inf"],
                                  ["replay", "x", "--speed", "nan"], ["record", "-o", "x", "--duration", "-inf"]])
def test_cli_numbers_must_be_finite(argv):
    out = run(*argv)
    assert out.returncode == 2 and out.stderr.startswith("gpuscope: error: argument") and "Traceback" not in out.stderr


@pytest.mark.parametrize("cmd,status", [("/nonexistent/cmd", 127), ("{tmp}/not-executable.sh", 126)])
def test_failed_command_leaves_no_file(tmp_path, cmd, status):
    """A command that cannot start: the shell's status (127 not found, 126 not runnable), one line, no file."""
    (tmp_path / "not-executable.sh").write_text("echo hi\n")  # mode 644
    cmd = cmd.format(tmp=tmp_path)
    out = run("record", "-o", str(tmp_path / "c.jsonl.gz"), "--simulate", "mixed-4", "--", cmd)
    assert out.returncode == status and f"cannot run {cmd}" in out.stderr and out.stderr.count("\n") == 1
    assert not (tmp_path / "c.jsonl.gz").exists()


def _wait(cond, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_signals_reach_the_process_group_and_a_second_one_kills(tmp_path):
    marker = tmp_path / "grandchild.pid"
    # a shell that ignores SIGINT/SIGTERM and runs a grandchild: only its process group can reach both
    script = f"trap '' INT TERM; sleep 300 & echo $! > {marker}; wait; wait"
    proc = subprocess.Popen([*GPUSCOPE, "record", "-o", str(tmp_path / "g.jsonl.gz"), "--simulate", "mixed-4",
                             "--", "sh", "-c", script], stderr=subprocess.PIPE, text=True)
    try:
        assert _wait(lambda: marker.exists() and marker.read_text().strip(), 30)
        grandchild = int(marker.read_text())
        proc.send_signal(signal.SIGINT)
        time.sleep(0.5)  # let the first signal be handled before the second (the second escalates)
        assert proc.poll() is None  # the command ignores SIGINT: gpuscope keeps recording
        proc.send_signal(signal.SIGINT)
        assert proc.wait(10) == 137
        assert "killed it (SIGKILL, exit status 137)" in proc.stderr.read()
        assert _wait(lambda: not _alive(grandchild), 3)
    finally:
        if proc.poll() is None:
            proc.kill()


# --------------------------------------------------------------------------------------------- orphans
def tmux(*args: str, **kw):
    return subprocess.run(["tmux", "-L", f"gpuscope-orphans-{os.getpid()}", *args], **kw)


def _kill_terminal_and_expect_exit(name: str, argv: list[str], ready: str, keys: list[str] | None = None) -> None:
    cmd = " ".join(["exec", "env", "-u", "COLUMNS", "-u", "LINES", *GPUSCOPE, *argv])
    tmux("new-session", "-d", "-s", name, "-x", "120", "-y", "40", cmd, check=True)
    try:
        pid = int(tmux("list-panes", "-t", name, "-F", "#{pane_pid}", capture_output=True, text=True).stdout.split()[0])
        screen = ""

        def shows(text: str) -> bool:
            nonlocal screen
            screen = tmux("capture-pane", "-p", "-t", name, capture_output=True, text=True).stdout
            return text in screen

        assert _wait(lambda: shows(ready), 30), screen
        for k in keys or []:
            tmux("send-keys", "-t", name, k, check=True)
        if keys:
            assert _wait(lambda: shows("REMOTE"), 20), screen
        tmux("kill-session", "-t", name, check=True)
        t_kill = time.monotonic()
        gone = _wait(lambda: not _alive(pid), 3)
        assert gone, f"{argv}: pid {pid} still alive {time.monotonic() - t_kill:.1f} s after its terminal went away"
    finally:
        tmux("kill-session", "-t", name, capture_output=True)


TMUX = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")


@pytest.mark.slow
@TMUX
@pytest.mark.parametrize("argv,ready", [
    (["--simulate", "mixed-4"], "SIMULATED"),
    (["demo"], "REPLAY"),
])
def test_front_ends_exit_when_their_terminal_goes_away(argv, ready):
    _kill_terminal_and_expect_exit(f"o{os.getpid() % 10000}{len(argv)}", argv, ready)


@pytest.mark.slow
@TMUX
def test_replay_exits_when_its_terminal_goes_away(tmp_path):
    p = write(tmp_path / "r.jsonl.gz", [frame(1.7e9 + i) for i in range(30)])
    _kill_terminal_and_expect_exit(f"r{os.getpid() % 10000}", ["replay", str(p)], "REPLAY")


MOSQUITTO = shutil.which("mosquitto") or ("/usr/sbin/mosquitto" if os.path.exists("/usr/sbin/mosquitto") else None)


@pytest.mark.slow
@TMUX
@pytest.mark.skipif(MOSQUITTO is None, reason="mosquitto not installed")
@pytest.mark.parametrize("open_host", [False, True], ids=["fleet", "remote-from-fleet"])
def test_fleet_and_remote_exit_when_their_terminal_goes_away(tmp_path, open_host):
    from helpers import Broker

    b = Broker(tmp_path)
    agent = subprocess.Popen([*GPUSCOPE, "agent", "--simulate", "mixed-4", "--broker", b.url],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _kill_terminal_and_expect_exit(f"f{os.getpid() % 10000}{int(open_host)}", ["--broker", b.url],
                                       "sim-mixed-4", ["Enter"] if open_host else None)
    finally:
        agent.terminate()
        agent.wait(10)
        b.stop()


def test_fleet_survives_a_duplicate_gpu_inventory(tmp_path):
    """A retained inventory listing GPU 0 twice is dropped by the gate (counted), not a MountError."""
    from gpuscope.sources.mqtt import BrokerConfig, Subscriber

    sub = Subscriber(BrokerConfig(host="x", port=1, tls=False))
    d = inventory_to_dict(inv(1))
    d["devices"] = d["devices"] * 2
    assert sub.handle("gpuscope/v1/evil/inventory", json.dumps(d).encode()) is False and sub.dropped == 1
    assert sub.handle("gpuscope/v1/evil/frame", b"[" * 50_000 + b"]" * 50_000) is False and sub.dropped == 2


def test_export_never_overwrites_the_recording_it_reads(tmp_path):
    """`export X --csv X --force` (or through a symlink) must not destroy X: --force is for other files."""
    path = write(tmp_path / "x.jsonl.gz", [frame(1.7e9 + i) for i in range(5)])
    before = path.read_bytes()
    link = tmp_path / "link.csv"
    link.symlink_to(path)
    for out in (path, link):
        p = run("export", str(path), "--csv", str(out), "--force")
        assert p.returncode == 1 and "recording being read" in p.stderr and p.stderr.count("\n") == 1, p.stderr
    assert path.read_bytes() == before


@pytest.mark.slow
@pytest.mark.parametrize("what", ["device", "fifo"])
@pytest.mark.parametrize("argv", [["summary", "{p}"], ["export", "{p}", "--csv", "{out}"], ["replay", "{p}"],
                                  ["record", "-o", "{out}", "--simulate", "{p}", "--duration", "1"]])
def test_devices_and_fifos_are_refused_not_read_forever(tmp_path, what, argv):
    """`summary /dev/zero` grew to 4.8 GB and never ended; a FIFO blocked until someone wrote to it."""
    if what == "fifo":
        p = tmp_path / "pipe"
        os.mkfifo(p)
    else:
        p = Path("/dev/zero")
    out = tmp_path / "out.x"
    r = run(*[a.format(p=p, out=out) for a in argv], timeout=30)
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    assert ("is a device, not a file" if what == "device" else "is a named pipe (FIFO), not a file") in r.stderr
    assert not out.exists()


@pytest.mark.parametrize("problems,line", [
    ([], ""),
    (["frames 351 of ~401; 1 damaged member at byte 884"],
     "damaged or incomplete recording: frames 351 of ~401; 1 damaged member at byte 884"),
    (["a", "b", "c"], "damaged or incomplete recording: a (+2 more: gpuscope summary)"),
    (["\x1b[2Jcut\x07"], "damaged or incomplete recording: cut"),
])
def test_a_replay_says_on_screen_that_its_file_was_damaged(problems, line):
    from gpuscope.tui.run import damage_line

    assert damage_line(problems) == line
