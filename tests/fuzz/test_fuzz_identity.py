"""The agent identity's input paths, fuzzed: ``agent --name``, the ``--tls-*`` files, and the machine/run ids
in summaries. Each is accepted, or one line (a GpuscopeError or argparse's usage error), never a traceback."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
from helpers import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuscope.cli.agent_id import NAME_RE
from gpuscope.cli.main import build_parser
from gpuscope.cli.options import AgentOptions
from gpuscope.core.errors import GpuscopeError
from gpuscope.core.summary import AGENT_ID_RE, HostSummary, summary_to_dict
from gpuscope.sources.mqtt import BrokerConfig, BrokerError, Subscriber, parse_broker


def fuzz(n: int) -> settings:
    return settings(derandomize=True, deadline=None, database=None, max_examples=examples(n),
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@fuzz(200)
@given(st.text(max_size=140) | st.sampled_from(["a/b", "+", "#", "x" * 129, "gpu\x1b[31m", "é", "-n", " a"]))
def test_agent_name_is_a_topic_level_or_one_line(capsys, name):
    try:
        ns = build_parser()["agent"].parse_args(["--broker", "mqtt://127.0.0.1:1", "--simulate", "mixed-4",
                                                 f"--name={name}"])
    except SystemExit as e:
        assert e.code == 2
        err = capsys.readouterr().err
        assert err.startswith("gpuscope: error:") and err.count("\n") == 1
        return
    try:
        opts = AgentOptions.from_namespace(ns)
    except GpuscopeError as e:
        msg = str(e)
        assert not NAME_RE.match(name) and msg.startswith("--name ")
        assert msg.isprintable() and len(msg) < 200  # one line, no escape reaches the terminal
        return
    assert opts.name == name and NAME_RE.match(name)  # one topic level: no '/', '+', '#'


@pytest.fixture(scope="module")
def pem(tmp_path_factory):
    if shutil.which("openssl") is None:
        pytest.skip("openssl not installed")
    d = tmp_path_factory.mktemp("pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "k.pem", "-out", "c.pem",
                    "-days", "1", "-subj", "/CN=f"], check=True, capture_output=True, cwd=d)
    return d, (d / "c.pem").read_bytes(), (d / "k.pem").read_bytes()


@fuzz(150)
@given(st.sampled_from(["ca", "cert", "key"]), st.integers(0, 10**6), st.binary(max_size=8),
       st.sampled_from(["flip", "cut", "insert", "replace"]))
def test_tls_files_load_or_fail_in_one_line_naming_the_file(pem, role, pos, junk, how):
    d, cert, key = pem
    base = key if role == "key" else cert
    k = pos % (len(base) + 1)
    data = {"flip": base[:k] + bytes([base[k] ^ 0xFF]) + base[k + 1:] if k < len(base) else base,
            "cut": base[:k], "insert": base[:k] + junk + base[k:], "replace": junk}[how]
    f = d / f"fuzzed-{role}.pem"
    f.write_bytes(data)
    files = {"ca": None, "cert": None, "key": None, role: str(f)}
    if role == "key":
        files["cert"] = str(d / "c.pem")
    elif role == "cert":
        files["key"] = str(d / "k.pem")
    try:
        parse_broker("mqtts://h", ca_file=files["ca"], cert_file=files["cert"], key_file=files["key"], env={})
    except BrokerError as e:
        msg = str(e)
        assert "\n" not in msg and str(f) in msg, msg


ids = st.text(max_size=40) | st.integers() | st.none() | st.sampled_from(["ab" * 8, "0" * 32, "0" * 33, "AB"])


@fuzz(150)
@given(ids, ids)
def test_summary_ids_are_applied_or_counted(machine, run):
    sub = Subscriber(BrokerConfig(host="x", port=1, tls=False))
    d = summary_to_dict(HostSummary(host="h", t=1_800_000_000.0, seq=1))
    d.update(machine=machine, run=run)
    ok = sub.handle("gpuscope/v1/h/summary", json.dumps(d).encode())
    valid = all(isinstance(v, str) and AGENT_ID_RE.match(v) for v in (machine, run))
    assert ok is valid and sub.dropped == (0 if valid else 1)
