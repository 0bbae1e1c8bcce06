"""The fleet over a real Mosquitto broker started by the tests."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest
from helpers import Broker, free_port, host_of, needs_mosquitto, run_frames, sim_source, wait_for

from gpuscope.outputs.mqtt_publish import Publisher
from gpuscope.sources.mqtt import AUTH_TRIES, BrokerError, Subscriber, parse_broker
from gpuscope.widgets.fleet_table import fit_columns, row

pytestmark = needs_mosquitto


def test_round_trip_and_retained_inventory_for_a_late_viewer(broker):
    src = sim_source("a6000-tp2-pcie-gen1")
    cfg = parse_broker(broker.url, env={})
    pub = Publisher(cfg, src.inventory).start()
    frames = run_frames(src, 20, 24)
    try:
        wait_for(lambda: pub.connected, what="the publisher to connect")
        for f in frames:
            pub.publish_frame(f)
        wait_for(lambda: pub.sent == len(frames), what="every frame sent")
        late = Subscriber(cfg)  # joins after everything was published
        late.watch("sim-a6000-tp2")  # the open host: its inventory and frames (the fleet reads summaries only)
        late.start()
        try:
            wait_for(lambda: host_of(late, "sim-a6000-tp2") is not None and
                     host_of(late, "sim-a6000-tp2").inventory is not None, what="the retained inventory")
            h = host_of(late, "sim-a6000-tp2")
            assert h.inventory == src.inventory and h.online
            pub.publish_frame(frames[-1])
            wait_for(lambda: host_of(late, "sim-a6000-tp2").frames >= 1, what="a live frame")
            got = host_of(late, "sim-a6000-tp2").frame
            assert got.gpus[0].pcie_gen == 1 and got.t == pytest.approx(frames[-1].t)
        finally:
            late.stop()
    finally:
        pub.stop()


@pytest.mark.slow
def test_last_will_marks_a_killed_agent_offline(broker, tmp_path):
    cfg = parse_broker(broker.url, env={})
    sub = Subscriber(cfg).start()
    agent = subprocess.Popen([sys.executable, "-m", "gpuscope", "agent", "--broker", broker.url, "--simulate",
                              "mixed-4", "--interval", "0.5"], stderr=subprocess.PIPE)
    try:
        wait_for(lambda: host_of(sub, "sim-mixed-4") is not None and host_of(sub, "sim-mixed-4").summary
                 is not None, 30, "the agent's summary")
        assert host_of(sub, "sim-mixed-4").online
        agent.send_signal(signal.SIGKILL)
        agent.wait()
        wait_for(lambda: not host_of(sub, "sim-mixed-4").online, 30, "the last will")
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

    try:
        wait_for(lambda: sub.connected, what="the subscriber to connect")
        asyncio.run(hostile())  # QoS 1: every message reaches the broker before the client leaves
        wait_for(lambda: sub.dropped >= 8, 20, "8 hostile messages dropped")
        # the good frame was published last, but is handled after the 8th drop: wait for it, not race it
        wait_for(lambda: host_of(sub, "ok-host") is not None and host_of(sub, "ok-host").frames >= 1, 20,
                 "the good host's frame")
        assert host_of(sub, "ok-host").frames == 1
        assert sub.dropped == 8
    finally:
        sub.stop()


@pytest.mark.slow
def test_broker_restart_agent_and_viewer_reconnect(tmp_path):
    b = Broker(tmp_path)
    cfg = parse_broker(b.url, env={})
    src = sim_source("mixed-4")
    pub = Publisher(cfg, src.inventory).start()
    sub = Subscriber(cfg)
    sub.watch("sim-mixed-4")  # the open host: subscribed again after the reconnect
    sub.start()
    try:
        wait_for(lambda: pub.connected and sub.connected, what="both to connect")
        pub.publish_frame(run_frames(src, 1, 1)[0])
        wait_for(lambda: host_of(sub, "sim-mixed-4") is not None and host_of(sub, "sim-mixed-4").frames == 1,
                 what="the first frame")
        b.stop()
        wait_for(lambda: not sub.connected, what="the broker to be gone")
        # nobody can say whether the host is up: its fleet row is unknown (broker down), not OFFLINE
        line = row(host_of(sub, "sim-mixed-4"), time.time(), fit_columns(76), broker_up=not sub.broker_down).plain
        assert re.match(r"sim-mixed-4 \(sim\) +unknown .*\(broker down\)$", line), line
        for f in run_frames(src, 2, 400):  # the agent keeps sampling; its queue stays bounded
            pub.publish_frame(f)
        assert len(pub.queue) <= pub.queue.maxlen and pub.dropped > 0
        b.start()
        wait_for(lambda: pub.connected and sub.connected, 60, "both to reconnect")
        pub.publish_frame(run_frames(src, 401, 401)[0])
        wait_for(lambda: host_of(sub, "sim-mixed-4").online and host_of(sub, "sim-mixed-4").frames > 1, 30,
                 "a frame after the restart")
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
        gave_up = threading.Event()
        wrong = Publisher(parse_broker(b.url, username="agent", env={"GPUSCOPE_MQTT_PASSWORD": "nope"}),
                          src.inventory, on_fatal=gave_up.set).start()
        try:
            error = wait_for(lambda: wrong.last_error, what="the broker to refuse the wrong password")
            assert not wrong.connected and error.startswith("authentication failed ("), error
            # a refused login does not fix itself: after AUTH_TRIES refusals in a row it gives up and says why
            assert gave_up.wait(30), wrong.last_error
            assert wrong.fatal == (f"authentication failed {AUTH_TRIES} times at 127.0.0.1:{b.port} (the broker "
                                   "refused the login: check --username and the password)")
            wait_for(lambda: not wrong._thread.is_alive(), what="the publisher's thread to end")
        finally:
            wrong.stop()
        pwfile = tmp_path / "pw.txt"
        pwfile.write_text("s3cret\n")
        good = Publisher(parse_broker(b.url, username="agent", password_file=str(pwfile)), src.inventory).start()
        try:
            wait_for(lambda: good.connected, what="the right password to connect")
        finally:
            good.stop()
    finally:
        b.stop()


# A CA and server certificate that pass Python 3.13's strict X.509 checks (ssl.VERIFY_X509_STRICT):
# the CA's basicConstraints is critical and it has keyUsage and a subject key identifier; the server
# certificate names its address in subjectAltName and its issuer's key in authorityKeyIdentifier.
STRICT_CA_EXT = ("basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n"
                 "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid:always\n")
LAX_CA_EXT = "basicConstraints=CA:TRUE\nsubjectKeyIdentifier=hash\n"  # what 3.13 refuses: not critical
SERVER_EXT = ("basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
              "extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n"
              "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid,issuer\n")


def make_pki(d, ca_ext: str) -> None:
    """``ca.crt``/``ca.key`` and ``server.crt``/``server.key`` (for 127.0.0.1) in ``d``, by openssl."""
    def ssl_run(*a):
        subprocess.run(["openssl", *a], check=True, capture_output=True, cwd=d)

    (d / "ca.cnf").write_text("[req]\ndistinguished_name=dn\nx509_extensions=v3_ca\nprompt=no\n[dn]\n"
                              "CN=gpuscope test CA\n[v3_ca]\n" + ca_ext)
    (d / "server.cnf").write_text(SERVER_EXT)
    ssl_run("req", "-x509", "-config", "ca.cnf", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
            "ca.crt", "-days", "1")
    ssl_run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr", "-subj",
            "/CN=127.0.0.1")
    ssl_run("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial", "-out",
            "server.crt", "-days", "1", "-extfile", "server.cnf")


def tls_broker(d) -> Broker:
    return Broker(d, extra=f"allow_anonymous true\ncafile {d}/ca.crt\ncertfile {d}/server.crt\n"
                           f"keyfile {d}/server.key\n")


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl not installed")
def test_tls_with_a_test_ca(tmp_path):
    make_pki(tmp_path, STRICT_CA_EXT)
    b = tls_broker(tmp_path)
    src = sim_source("mixed-4")
    try:
        url = f"mqtts://127.0.0.1:{b.port}"
        no_ca = Publisher(parse_broker(url, env={}), src.inventory).start()  # system CAs do not trust it
        ok = Publisher(parse_broker(url, ca_file=str(tmp_path / "ca.crt"), env={}), src.inventory).start()
        try:
            wait_for(lambda: ok.connected, what="the TLS connection with the test CA")
            error = wait_for(lambda: no_ca.last_error, what="the untrusted connection to fail")
            assert not no_ca.connected
            # which check failed, in words: the broker's chain does not lead to a trusted CA
            assert re.fullmatch(r"TLS: certificate verify failed: (self.signed certificate in certificate chain|"
                                r"unable to get local issuer certificate)", error), error
        finally:
            no_ca.stop()
            ok.stop()
    finally:
        b.stop()


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl not installed")
def test_tls_error_says_which_check_failed(tmp_path):
    """A CA without critical basicConstraints: refused where Python checks X.509 strictly (3.13+)."""
    import ssl

    make_pki(tmp_path, LAX_CA_EXT)
    b = tls_broker(tmp_path)
    strict = bool(ssl.create_default_context().verify_flags & getattr(ssl, "VERIFY_X509_STRICT", 0))
    pub = Publisher(parse_broker(f"mqtts://127.0.0.1:{b.port}", ca_file=str(tmp_path / "ca.crt"), env={}),
                    sim_source("mixed-4").inventory).start()
    try:
        if strict:
            error = wait_for(lambda: pub.last_error, what="the lax CA to be refused")
            assert not pub.connected
            assert error == "TLS: certificate verify failed: Basic Constraints of CA cert not marked critical"
        else:
            wait_for(lambda: pub.connected, what=f"the lax CA accepted without strict checks ({pub.last_error})")
    finally:
        pub.stop()
        b.stop()


@pytest.mark.parametrize("url,kw,msg", [
    ("http://h", {}, "expected mqtt://"), ("mqtt://u:pw@h", {}, "password in the broker URL"),
    ("mqtt://h", {"prefix": "a/+"}, "--topic-prefix"), ("mqtt://h:99999", {}, "bad port"),
    ("mqtt://h", {"password_file": "/no/such"}, "cannot read the password file"),
])
def test_bad_broker_settings(url, kw, msg):
    with pytest.raises(BrokerError, match=msg):
        parse_broker(url, env={}, **kw)


@pytest.mark.slow
def test_remote_record_of_a_host(broker, tmp_path):
    agent = subprocess.Popen([sys.executable, "-m", "gpuscope", "agent", "--broker", broker.url, "--simulate",
                              "a6000-tp2-pcie-gen1", "--interval", "0.5"], stderr=subprocess.DEVNULL)
    out = tmp_path / "remote.jsonl.gz"
    try:
        p = subprocess.run([sys.executable, "-m", "gpuscope", "record", "--broker", broker.url, "--host",
                            "sim-a6000-tp2", "-o", str(out), "--duration", "4"], capture_output=True, text=True,
                           timeout=60)
        assert p.returncode == 0, p.stderr
        assert "Traceback" not in p.stderr and "cannot schedule" not in p.stderr, p.stderr
    finally:
        agent.terminate()
        agent.wait(10)
    from gpuscope.sources.recording import open_recording

    rec = open_recording(out)
    assert rec.n_frames >= 4 and rec.simulated and rec.header["origin"]["remote"] == "sim-a6000-tp2"


@pytest.mark.slow
def test_agent_stops_cleanly_and_says_offline(broker):
    """SIGTERM: the agent publishes status offline (stopped), ends its MQTT thread, no traceback."""
    cfg = parse_broker(broker.url, env={})
    sub = Subscriber(cfg).start()
    agent = subprocess.Popen([sys.executable, "-m", "gpuscope", "agent", "--broker", broker.url, "--simulate",
                              "mixed-4", "--interval", "0.5"], stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: (h := host_of(sub, "sim-mixed-4")) is not None and h.summary is not None, 30,
                 "a summary from the agent")
        agent.send_signal(signal.SIGTERM)
        _, err = agent.communicate(timeout=30)
        assert agent.returncode == 0, err
        assert "gpuscope agent: stopped;" in err
        assert "Traceback" not in err and "cannot schedule" not in err, err
        wait_for(lambda: not host_of(sub, "sim-mixed-4").online, 10, "the agent's own offline status")
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()
        sub.stop()


def test_stop_ends_the_threads_promptly(broker):
    """stop() ends each asyncio thread (a subscriber waiting for a message, a publisher in backoff) and joins it."""
    import time

    cfg = parse_broker(broker.url, env={})
    sub = Subscriber(cfg).start()
    pub = Publisher(cfg, sim_source("mixed-4").inventory).start()
    down = Publisher(parse_broker(f"mqtt://127.0.0.1:{free_port()}", env={}),
                     sim_source("mixed-4").inventory).start()  # nobody listens there: it backs off
    wait_for(lambda: sub.connected and pub.connected and down.last_error, what="two connected, one refused")
    for w in (sub, pub, down):
        t0 = time.monotonic()
        w.stop()
        assert not w._thread.is_alive() and time.monotonic() - t0 < 3.0


def test_an_unretrieved_client_future_error_is_logged_not_printed(capfd, caplog):
    """The broker and the agent stopping together left aiomqtt futures holding MqttCodeError that nobody read:
    asyncio printed "Future exception was never retrieved" and a traceback on stderr. The clients' loops log it."""
    import asyncio
    import gc
    import logging

    from gpuscope.sources.mqtt import _quiet_loop_errors

    loop = asyncio.new_event_loop()
    loop.set_exception_handler(_quiet_loop_errors)
    fut = loop.create_future()
    fut.set_exception(RuntimeError("Unexpected disconnection"))
    with caplog.at_level(logging.DEBUG, logger="gpuscope.mqtt"):
        del fut
        gc.collect()
    loop.close()
    assert capfd.readouterr().err == ""
    assert "Future exception was never retrieved (RuntimeError: Unexpected disconnection)" in caplog.text
