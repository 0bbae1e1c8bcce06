"""Agent identity: agents that share a host name, TLS files and logins that are wrong, a skewed clock, a broker down.

Two publishers of one name are told apart by the machine and run ids in their summaries (a clash, and neither's
``seq`` is loss for the other); bad ``--tls-*`` files and refused logins are one line and a non-zero exit; a host
whose clock is off shows "clock 1h behind", not old data. Real Mosquitto and openssl where users have them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections import deque

import pytest
from helpers import MOSQUITTO, Broker, host_of, needs_mosquitto, publish, wait_for
from rich.cells import cell_len

from gpuscope.core.summary import HostSummary, summary_from_dict, summary_to_dict
from gpuscope.sources.mqtt import CLASH_WINDOW_S, BrokerError, RemoteHost, Subscriber, parse_broker
from gpuscope.widgets.fleet_table import clash_text, fit_columns, row, seen_cell

A, B = "aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb"  # two machines' ids


def summary(machine: str, run: str, seq: int, t: float, host: str = "twin") -> bytes:
    return json.dumps(summary_to_dict(HostSummary(host=host, t=t, seq=seq, gpus=8, machine=machine,
                                                  run=run))).encode()


def feed(sub: Subscriber, msgs: list[tuple[str, str, int]], t0: float = 1_800_000_000.0) -> None:
    """Hand ``(machine, run, seq)`` summaries to ``sub`` one after the other, as live messages."""
    for k, (m, r, seq) in enumerate(msgs):
        assert sub.handle("gpuscope/v1/twin/summary", summary(m, r, seq, t0 + k))


def offline_sub() -> Subscriber:
    return Subscriber(parse_broker("mqtt://127.0.0.1:1", env={}))  # fed by hand: no broker needed


@pytest.mark.parametrize("msgs,clash,lost", [
    ([(A, "1", 1), (B, "2", 1), (A, "1", 2), (B, "2", 2), (A, "1", 3)], 2, 0),  # cloned VMs: interleaved, no loss
    ([(A, "1", 40), (A, "2", 7), (A, "1", 41), (A, "2", 8)], 2, 0),  # one machine-id (a cloned image): the run ids
    ([(A, "1", 1), (A, "1", 2), (A, "2", 1), (A, "2", 2)], 0, 0),  # a restart: a new run, never back to the old one
    ([(A, "1", 1), (A, "1", 2), (B, "3", 1), (B, "3", 2)], 0, 0),  # the name moved to another machine
    ([(A, "1", 1), (A, "1", 4), (B, "2", 1), (A, "1", 5), (B, "2", 3)], 2, 3),  # real gaps still count, per agent
    ([("", "", 1), ("", "", 3)], 0, 1),  # an older agent (no ids): as before
])
def test_publishers_of_one_name_are_told_apart(msgs, clash, lost):
    sub = offline_sub()
    feed(sub, msgs)
    h = host_of(sub, "twin")
    assert h.clash(time.monotonic()) == clash and sub.lost == lost
    assert (h.rank <= 1) == bool(clash)  # a clash sorts with the warnings: it needs a fix


def test_a_clash_ends_when_one_agent_stops():
    sub = offline_sub()
    feed(sub, [(A, "1", 1), (B, "2", 1), (A, "1", 2)])
    h = host_of(sub, "twin")
    now = time.monotonic()
    assert h.clash(now) == 2
    assert h.clash(now + CLASH_WINDOW_S + 1) == 0  # nothing interleaved for a minute: one agent again


@pytest.mark.parametrize("width", [76, 80, 116, 200])
def test_the_clash_row_fits_and_says_how_to_fix_it(width):
    sub = offline_sub()
    feed(sub, [(A, "1", 1), (B, "2", 1), (A, "1", 2)])
    line = row(host_of(sub, "twin"), 1_800_000_003.0, fit_columns(width)).plain
    assert cell_len(line) <= width, line
    fin = fit_columns(width)[-1].width
    assert line.endswith(clash_text(2, "twin", fin)) and "give each" in line and "--name" in line


@pytest.mark.parametrize("width,want", [
    (60, "2 agents publish as gpu-07: give each agent --name"),
    (46, "2 agents share this name: give each --name"),
    (42, "2 agents share this name: give each --name"),  # exactly
    (32, "2 agents: give each --name"),  # 80 columns: the host column names the host
    (10, "2 agents: give each --name"),  # never shorter than this (the row cuts it)
])
def test_clash_text(width, want):
    assert clash_text(2, "gpu-07", width) == want


@pytest.mark.parametrize("offsets,want", [
    ([3600.02, 3600.01, 3600.3, 3600.05], 3600.01),  # the least delayed message: the clock's offset
    ([-7.2, -7.0, -7.1, -7.05], -7.0),  # ahead
    ([3.0, 3.1, 3.0, 3.2], None),  # within a few seconds: not flagged
    ([0.1, 30.0, 60.0, 90.0], None),  # growing: a viewer falling behind, not a clock
    ([3600.0, 3600.0, 3600.0], None),  # too few to say
    ([-6.0, 6.0, -6.0, 6.0], None),  # two clocks under one name: no one offset
])
def test_clock_offset(offsets, want):
    h = RemoteHost(host="h")
    h.offsets = deque(offsets, maxlen=4)
    assert h.clock_offset() == want


@pytest.mark.parametrize("age,offset,want", [
    (3600.5, 3600.0, "clock 1h behind"),
    (3602.0, 3661.0, "clock 1h01m behind"),
    (-9.5, -10.0, "clock 10s ahead"),
    (3640.0, 3600.0, "clock 1h behind"),  # 40 s old on the viewer's clock: fresh, so the clock is the news
    (3700.0, 3600.0, "1m40s ago"),  # stale on the viewer's clock: its real age
    (42.0, None, "42s ago"),
])
def test_seen_cell(age, offset, want):
    now = 1_800_000_000.0
    assert seen_cell(now, now - age, offset)[0] == want


@needs_mosquitto
def test_a_skewed_clock_is_shown_as_such_not_as_old_data(broker):
    sub = Subscriber(parse_broker(broker.url, env={})).start()
    try:
        wait_for(lambda: sub.connected, what="the viewer to connect")
        for k in range(4):  # a host whose clock is an hour slow, publishing every so often
            publish(broker.port, [("gpuscope/v1/slow/summary", summary(A, "1", k + 1, time.time() - 3600,
                                                                        host="slow"), False)])
        wait_for(lambda: host_of(sub, "slow") is not None and len(host_of(sub, "slow").offsets) == 4,
                 what="four live summaries")
        line = row(host_of(sub, "slow"), time.time(), fit_columns(76)).plain
        assert "clock 1h behind" in line and "ago" not in line, line
        assert sub.health().line() == ""  # not "data up to 3600 s old": the clock, not the data
    finally:
        sub.stop()


# ---------------------------------------------------------------- the agent end to end


def agent(url: str, *extra: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "gpuscope", "agent", "--broker", url, "--simulate", "mixed-4",
                             "--interval", "0.5", *extra], stderr=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})


@pytest.mark.slow
@needs_mosquitto
def test_two_real_agents_under_one_name_show_as_a_clash(broker, tmp_path):
    sub = Subscriber(parse_broker(broker.url, env={})).start()
    agents = [agent(broker.url, "--name", "twin", env={"XDG_STATE_HOME": str(tmp_path / f"s{k}")}) for k in (0, 1)]
    try:
        h = wait_for(lambda: (x := host_of(sub, "twin")) is not None and x.clash(time.monotonic()) and x, 60,
                     "the two agents' summaries to interleave")
        assert host_of(sub, "sim-mixed-4") is None  # published as --name, not the host name
        machines = {k.split("/")[0] for k in h.streams}
        runs = {k.split("/")[1] for k in h.streams}
        assert len(runs) == 2 and all(len(m) == 16 for m in machines)  # one machine here: the runs tell them apart
        assert sub.lost == 0 and sub.health().line() == ""  # neither agent's seq is loss for the other
        line = row(h, time.time(), fit_columns(200)).plain
        assert "2 agents publish as twin: give each agent --name" in line, line
    finally:
        for a in agents:
            a.terminate()
        errs = [a.communicate(timeout=20)[1] for a in agents]
        sub.stop()
    assert all("GPUs of sim-mixed-4 as twin" in e for e in errs), errs


@pytest.mark.slow
@pytest.mark.skipif(MOSQUITTO is None or shutil.which("mosquitto_passwd") is None, reason="needs mosquitto")
def test_agent_with_a_refused_login_exits_non_zero(tmp_path):
    pw = tmp_path / "passwd"
    subprocess.run(["mosquitto_passwd", "-c", "-b", str(pw), "agent", "s3cret"], check=True, capture_output=True)
    os.chmod(pw, 0o600)
    b = Broker(tmp_path, extra=f"allow_anonymous false\npassword_file {pw}\n")
    wrong = {**os.environ, "GPUSCOPE_MQTT_PASSWORD": "wrong"}
    try:
        rec = subprocess.Popen([sys.executable, "-m", "gpuscope", "record", "--broker", b.url, "--username", "agent",
                                "--host", "gpu-07", "-o", str(tmp_path / "r.jsonl.gz")], stderr=subprocess.PIPE,
                               text=True, env=wrong)
        a = agent(b.url, "--username", "agent", env=wrong)
        _, err = a.communicate(timeout=60)  # it ends by itself: not healthy under systemd while sending nothing
        _, rec_err = rec.communicate(timeout=60)
    finally:
        b.stop()
    assert a.returncode == 1, err
    last = err.strip().splitlines()[-1]
    assert last == (f"gpuscope: error: authentication failed 3 times at 127.0.0.1:{b.port} (the broker refused "
                    "the login: check --username and the password)"), err
    assert "Traceback" not in err
    # a viewer says what is wrong too, not "is its agent running?"
    # (at once: the broker said no; a "waiting up to 10 s" line first only when the refusal took over a second)
    lines = rec_err.splitlines()
    assert rec.returncode == 1 and lines[-1] == (f"gpuscope: error: cannot read host 'gpu-07' from {b.url}: "
                                                 "authentication failed (the broker refused the login: check "
                                                 "--username and the password)"), rec_err
    assert lines[:-1] in ([], [f"gpuscope: waiting up to 10 s for the inventory of host 'gpu-07' on {b.url}…"]), rec_err
    assert not (tmp_path / "r.jsonl.gz").exists()


# ---------------------------------------------------------------- TLS files


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    if shutil.which("openssl") is None:
        pytest.skip("openssl not installed")
    d = tmp_path_factory.mktemp("pki")

    def ssl_run(*a: str) -> None:
        subprocess.run(["openssl", *a], check=True, capture_output=True, cwd=d)

    for n in ("a", "b"):
        ssl_run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{n}.key", "-out", f"{n}.crt",
                "-days", "1", "-subj", f"/CN={n}")
    ssl_run("genrsa", "-aes256", "-passout", "pass:x", "-out", "enc.key", "2048")
    ssl_run("req", "-x509", "-key", "enc.key", "-passin", "pass:x", "-out", "enc.crt", "-days", "1", "-subj", "/CN=e")
    (d / "junk.pem").write_text("-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----\n")
    (d / "notes.txt").write_text("hello\n")
    (d / "both.pem").write_text((d / "a.crt").read_text() + (d / "a.key").read_text())
    return d


@pytest.mark.parametrize("ca,cert,key,want", [
    ("none.pem", None, None, "--tls-ca {d}/none.pem: No such file or directory"),
    ("notes.txt", None, None, "--tls-ca {d}/notes.txt: not a PEM file (no '-----BEGIN' line)"),
    ("junk.pem", None, None, "--tls-ca {d}/junk.pem: not a usable CA certificate (malformed PEM)"),
    (None, "a.crt", None, "--tls-cert {d}/a.crt holds no private key: give its key with --tls-key FILE"),
    (None, None, "a.key", "--tls-key {d}/a.key needs --tls-cert FILE (the certificate it belongs to)"),
    (None, "a.crt", "b.key", "--tls-key {d}/b.key is not the key of --tls-cert {d}/a.crt"),
    (None, "a.crt", "a.crt", "--tls-key {d}/a.crt holds no private key"),
    (None, "a.key", "a.key", "--tls-cert {d}/a.key holds no certificate"),
    (None, "a.crt", "none.key", "--tls-key {d}/none.key: No such file or directory"),
    (None, "enc.crt", "enc.key", "--tls-key {d}/enc.key: an encrypted key (it asks for a passphrase) is not "
                                 "supported"),
    ("a.crt", "a.crt", "a.key", None),
    (None, "both.pem", None, None),  # a cert with its key in one file
])
def test_tls_files_are_checked_at_start_up(pki, ca, cert, key, want):
    def f(n):
        return None if n is None else str(pki / n)

    if want is None:
        assert parse_broker("mqtts://h", ca_file=f(ca), cert_file=f(cert), key_file=f(key), env={}).tls
        return
    with pytest.raises(BrokerError) as e:
        parse_broker("mqtt://h", ca_file=f(ca), cert_file=f(cert), key_file=f(key), env={})
    assert str(e.value) == want.format(d=pki)


@pytest.mark.slow
def test_agent_with_a_missing_ca_file_says_so_in_one_line(tmp_path):
    r = subprocess.run([sys.executable, "-m", "gpuscope", "agent", "--broker", "mqtts://127.0.0.1:1", "--tls-ca",
                        str(tmp_path / "ca.pem"), "--simulate", "mixed-4"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr == f"gpuscope: error: --tls-ca {tmp_path}/ca.pem: No such file or directory\n"


def test_summary_ids_round_trip_and_bad_ones_are_refused():
    s = HostSummary(host="h", t=1.0, seq=3, machine=A, run="0c1d")
    assert summary_from_dict(summary_to_dict(s)) == s
    old = summary_to_dict(HostSummary(host="h", t=1.0))
    assert "machine" not in old and summary_from_dict(old).stream() == "/"
    for bad in ("x" * 8, "AB", 7, None, "a" * 33, "a\n"):
        with pytest.raises(ValueError, match="hex id"):
            summary_from_dict({**old, "machine": bad})


# a machine without /etc/machine-id (many containers): the agent keeps its own id in its state file
NO_MACHINE_ID = ("import sys, gpuscope.cli.agent_id as a; a.machine_id.__defaults__ = ((),); "
                 "from gpuscope.cli.main import main; sys.exit(main(sys.argv[1:]))")


@pytest.mark.slow
@needs_mosquitto
def test_the_machine_id_outlives_an_agent_restart(broker, tmp_path):
    sub = Subscriber(parse_broker(broker.url, env={})).start()

    def one_run(state_home: str) -> tuple[str, str]:
        p = subprocess.Popen([sys.executable, "-c", NO_MACHINE_ID, "agent", "--broker", broker.url, "--simulate",
                              "mixed-4", "--interval", "0.5", "--name", "kept"], stderr=subprocess.PIPE, text=True,
                             env={**os.environ, "XDG_STATE_HOME": state_home})
        try:
            seen = {k for k in (host_of(sub, "kept").streams if host_of(sub, "kept") else {})}
            key = wait_for(lambda: (h := host_of(sub, "kept")) is not None and (set(h.streams) - seen), 30,
                           "a summary from this run").pop()
        finally:
            p.terminate()
            err = p.communicate(timeout=20)[1]
        return key.split("/")[0], err

    try:
        first, err1 = one_run(str(tmp_path))
        again, err2 = one_run(str(tmp_path))  # a restart: the same state file
        other, err3 = one_run("/proc/gpuscope-no-such")  # nowhere to keep it: a warning, and it runs
    finally:
        sub.stop()
    assert first == again and len(first) == 16 and other != first
    assert (tmp_path / "gpuscope" / "agent-id").is_file()
    assert "warning" not in err1 + err2
    assert ("gpuscope: warning: cannot keep the agent's id in /proc/gpuscope-no-such/gpuscope/agent-id (No such "
            "file or directory): using one for this run only") in err3, err3
