"""What the agent says about its broker connection, and that it publishes its summary stream."""

from __future__ import annotations

import subprocess
import sys

import pytest
from helpers import MOSQUITTO, Broker, host_of, until

from gpuscope.cli.agent import connection_note
from gpuscope.sources.mqtt import Subscriber, parse_broker

URL = "mqtt://b:1883"


@pytest.mark.parametrize("seen,connects,connected,err,since,want", [
    (0, 0, False, None, 99.0, ""),  # still making the first connection: nothing, never "unreachable"
    (0, 1, True, None, 99.0, "connected to mqtt://b:1883"),
    (1, 1, True, None, 99.0, ""),  # nothing new
    (1, 1, False, "Connection refused", 99.0, "broker unreachable (Connection refused); sampling on, 3 frames "
                                              "dropped so far"),
    (1, 1, False, "Connection refused", 10.0, ""),  # said less than 30 s ago
    (1, 2, True, None, 5.0, "reconnected to mqtt://b:1883"),
    (0, 0, False, "Connection refused", 99.0, "broker unreachable (Connection refused); sampling on, 3 frames "
                                              "dropped so far; still trying"),  # a first attempt failed
])
def test_connection_note(seen, connects, connected, err, since, want):
    assert connection_note(seen, connects, connected, err, since, 3, URL) == want


@pytest.mark.skipif(MOSQUITTO is None, reason="mosquitto not installed (.ci/run installs it)")
def test_agent_says_connected_and_publishes_its_summary(tmp_path):
    b = Broker(tmp_path)
    sub = Subscriber(parse_broker(b.url, env={}))
    sub.watch("sim-a100-4")  # its frames too: three of them mean the agent ticked after connecting
    sub.start()
    agent = subprocess.Popen([sys.executable, "-m", "gpuscope", "agent", "--broker", b.url, "--simulate", "gpu-lost",
                              "--interval", "0.5"], stderr=subprocess.PIPE, text=True)
    try:
        assert until(lambda: host_of(sub, "sim-a100-4") is not None and host_of(sub, "sim-a100-4").summary
                     is not None, 30)
        assert until(lambda: host_of(sub, "sim-a100-4").frames >= 3, 30)
        s = host_of(sub, "sim-a100-4").summary
        assert s.gpus == 4 and s.simulated and s.seq >= 1 and not host_of(sub, "sim-a100-4").legacy
    finally:
        agent.terminate()
        _, err = agent.communicate(timeout=20)
        sub.stop()
        b.stop()
    assert "connected to mqtt://127.0.0.1" in err and "unreachable" not in err, err
