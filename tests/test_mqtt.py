"""The fleet over a real Mosquitto broker started by the tests."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest
from conftest import run_frames, sim_source

from gpuscope.sources.mqtt import BrokerError, Publisher, Subscriber, parse_broker

MOSQUITTO = shutil.which("mosquitto") or ("/usr/sbin/mosquitto" if os.path.exists("/usr/sbin/mosquitto") else None)
pytestmark = pytest.mark.skipif(MOSQUITTO is None, reason="mosquitto not installed (.ci/run installs it)")


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Broker:
    def __init__(self, tmp, extra: str = "", port: int | None = None):
        self.port = port or free_port()
        self.conf = tmp / f"mosquitto-{self.port}.conf"
        as_root = "user root\n" if os.geteuid() == 0 else ""  # else mosquitto drops to a user that can't read tmp
        self.conf.write_text(f"{as_root}listener {self.port} 127.0.0.1\n" + (extra or "allow_anonymous true\n"))
        self.proc = None
        self.start()

    def start(self):
        self.proc = subprocess.Popen([MOSQUITTO, "-c", str(self.conf)], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        for _ in range(50):
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("mosquitto did not start")

    def stop(self):
        self.proc.terminate()
        self.proc.wait(5)

    @property
    def url(self):
        return f"mqtt://127.0.0.1:{self.port}"


@pytest.fixture
def broker(tmp_path):
    b = Broker(tmp_path)
    yield b
    b.stop()


def until(cond, timeout=10.0):
    end = time.time() + timeout
    while time.time() < end:
        if cond():
            return True
        time.sleep(0.1)
    return False


def host_of(sub, name):
    return next((h for h in sub.snapshot() if h.host == name), None)


def test_round_trip_and_retained_inventory_for_a_late_viewer(broker):
    src = sim_source("a6000-tp2-pcie-gen1")
    cfg = parse_broker(broker.url, env={})
    pub = Publisher(cfg, src.inventory).start()
    frames = run_frames(src, 20, 24)
    try:
        assert until(lambda: pub.connected)
        for f in frames:
            pub.publish_frame(f)
        assert until(lambda: pub.sent == len(frames))
        late = Subscriber(cfg)  # joins after everything was published
        late.watch("sim-a6000-tp2")  # the open host: its inventory and frames (the fleet reads summaries only)
        late.start()
        try:
            assert until(lambda: host_of(late, "sim-a6000-tp2") is not None and
                         host_of(late, "sim-a6000-tp2").inventory is not None)
            h = host_of(late, "sim-a6000-tp2")
            assert h.inventory == src.inventory and h.online
            pub.publish_frame(frames[-1])
            assert until(lambda: host_of(late, "sim-a6000-tp2").frames >= 1)
            got = host_of(late, "sim-a6000-tp2").frame
            assert got.gpus[0].pcie_gen == 1 and got.t == pytest.approx(frames[-1].t)
        finally:
            late.stop()
    finally:
        pub.stop()


def test_last_will_marks_a_killed_agent_offline(broker, tmp_path):
    cfg = parse_broker(broker.url, env={})
    sub = Subscriber(cfg).start()
    agent = subprocess.Popen([sys.executable, "-m", "gpuscope", "agent", "--broker", broker.url, "--simulate",
                              "mixed-4", "--interval", "0.5"], stderr=subprocess.PIPE)
    try:
        assert until(lambda: host_of(sub, "sim-mixed-4") is not None and host_of(sub, "sim-mixed-4").summary
                     is not None, 20)
        assert host_of(sub, "sim-mixed-4").online
        agent.send_signal(signal.SIGKILL)
        agent.wait()
        assert until(lambda: not host_of(sub, "sim-mixed-4").online, 30)
    finally:
        if agent.poll() is None:
            agent.kill()
        sub.stop()


def test_malformed_and_oversized_messages_are_dropped_and_counted(broker):
    import asyncio

    import aiomqtt

    cfg = parse_broker(broker.url, env={})
    sub = Subscriber(cfg)
    sub.watch("evil")  # open hosts: their frames and inventory are subscribed too
    sub.watch("ok-host")
    sub.start()
    assert until(lambda: sub.connected)

    async def hostile():
        async with aiomqtt.Client("127.0.0.1", broker.port) as c:
            await c.publish("gpuscope/v1/evil/frame", b"not json", qos=1)
            await c.publish("gpuscope/v1/evil/frame", json.dumps({"t": "x", "gpus": 3}).encode(), qos=1)
            await c.publish("gpuscope/v1/evil/inventory", json.dumps([1, 2]).encode(), qos=1)
            await c.publish("gpuscope/v1/evil/frame", b"[" * 100_000 + b"]" * 100_000, qos=1)
            await c.publish("gpuscope/v1/evil/frame", b"x" * 1_200_000, qos=1)
            await c.publish("gpuscope/v1/evil/status", b'{"state": "pwned"}', qos=1)
            await c.publish("gpuscope/v1/evil/summary", b"{", qos=1)
            await c.publish("gpuscope/v1/evil/summary", json.dumps({"schema": 1, "host": "evil", "t": 1.0,
                                                                    "util_pct": 900}).encode(), qos=1)
            await c.publish("gpuscope/v1/ok-host/frame", json.dumps({"t": 1.0, "gpus": [{"index": 0}]}).encode(), qos=1)

    asyncio.run(hostile())  # QoS 1: every message reaches the broker before the client leaves
    assert until(lambda: sub.dropped >= 8, 20)
    assert host_of(sub, "ok-host") is not None and host_of(sub, "ok-host").frames == 1
    sub.stop()


def test_broker_restart_agent_and_viewer_reconnect(tmp_path):
    b = Broker(tmp_path)
    cfg = parse_broker(b.url, env={})
    src = sim_source("mixed-4")
    pub = Publisher(cfg, src.inventory).start()
    sub = Subscriber(cfg)
    sub.watch("sim-mixed-4")  # the open host: subscribed again after the reconnect
    sub.start()
    try:
        assert until(lambda: pub.connected and sub.connected)
        pub.publish_frame(run_frames(src, 1, 1)[0])
        assert until(lambda: host_of(sub, "sim-mixed-4") is not None and host_of(sub, "sim-mixed-4").frames == 1)
        b.stop()
        assert until(lambda: not sub.connected and not host_of(sub, "sim-mixed-4").online)
        for f in run_frames(src, 2, 400):  # the agent keeps sampling; its queue stays bounded
            pub.publish_frame(f)
        assert len(pub.queue) <= pub.queue.maxlen and pub.dropped > 0
        b.start()
        assert until(lambda: pub.connected and sub.connected, 40)
        pub.publish_frame(run_frames(src, 401, 401)[0])
        assert until(lambda: host_of(sub, "sim-mixed-4").online and host_of(sub, "sim-mixed-4").frames > 1, 20)
    finally:
        pub.stop()
        sub.stop()
        b.stop()


def test_password_auth(tmp_path):
    pw = tmp_path / "passwd"
    subprocess.run(["mosquitto_passwd", "-c", "-b", str(pw), "agent", "s3cret"], check=True, capture_output=True)
    os.chmod(pw, 0o600)
    b = Broker(tmp_path, extra=f"allow_anonymous false\npassword_file {pw}\n")
    src = sim_source("mixed-4")
    try:
        wrong = Publisher(parse_broker(b.url, username="agent", env={"GPUSCOPE_MQTT_PASSWORD": "nope"}),
                          src.inventory).start()
        time.sleep(2)
        assert not wrong.connected and wrong.last_error
        wrong.stop()
        pwfile = tmp_path / "pw.txt"
        pwfile.write_text("s3cret\n")
        good = Publisher(parse_broker(b.url, username="agent", password_file=str(pwfile)), src.inventory).start()
        assert until(lambda: good.connected)
        good.stop()
    finally:
        b.stop()


def test_tls_with_a_test_ca(tmp_path):
    if shutil.which("openssl") is None:
        pytest.skip("openssl not installed")

    def ssl_run(*a):
        subprocess.run(["openssl", *a], check=True, capture_output=True, cwd=tmp_path)

    ssl_run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt", "-days", "1",
            "-subj", "/CN=gpuscope test CA")
    ssl_run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr", "-subj",
            "/CN=127.0.0.1")
    (tmp_path / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    ssl_run("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-out",
            "server.crt", "-days", "1", "-extfile", "ext.cnf")
    b = Broker(tmp_path, extra=f"allow_anonymous true\ncafile {tmp_path}/ca.crt\ncertfile {tmp_path}/server.crt\n"
                               f"keyfile {tmp_path}/server.key\n")
    src = sim_source("mixed-4")
    try:
        url = f"mqtts://127.0.0.1:{b.port}"
        no_ca = Publisher(parse_broker(url, env={}), src.inventory).start()  # system CAs do not trust it
        ok = Publisher(parse_broker(url, ca_file=str(tmp_path / "ca.crt"), env={}), src.inventory).start()
        assert until(lambda: ok.connected)
        assert not no_ca.connected
        no_ca.stop()
        ok.stop()
    finally:
        b.stop()


@pytest.mark.parametrize("url,kw,msg", [
    ("http://h", {}, "expected mqtt://"), ("mqtt://u:pw@h", {}, "password in the broker URL"),
    ("mqtt://h", {"prefix": "a/+"}, "--topic-prefix"), ("mqtt://h:99999", {}, "bad port"),
    ("mqtt://h", {"password_file": "/no/such"}, "cannot read the password file"),
])
def test_bad_broker_settings(url, kw, msg):
    with pytest.raises(BrokerError, match=msg):
        parse_broker(url, env={}, **kw)


def test_remote_record_of_a_host(broker, tmp_path):
    agent = subprocess.Popen([sys.executable, "-m", "gpuscope", "agent", "--broker", broker.url, "--simulate",
                              "a6000-tp2-pcie-gen1", "--interval", "0.5"], stderr=subprocess.DEVNULL)
    out = tmp_path / "remote.jsonl.gz"
    try:
        p = subprocess.run([sys.executable, "-m", "gpuscope", "record", "--broker", broker.url, "--host",
                            "sim-a6000-tp2", "-o", str(out), "--duration", "4"], capture_output=True, text=True,
                           timeout=60)
        assert p.returncode == 0, p.stderr
    finally:
        agent.terminate()
        agent.wait(10)
    from gpuscope.sources.recording import open_recording

    rec = open_recording(out)
    assert rec.n_frames >= 4 and rec.simulated and rec.header["origin"]["remote"] == "sim-a6000-tp2"
