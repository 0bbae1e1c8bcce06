"""Fuzz ``--web-config``: hostile text, hostile values in the right places and mutated good
files through :func:`load_web_config` give a loaded config or one :class:`WebConfigError` line, never a
traceback (deterministic and bounded, as tests/fuzz/test_fuzz.py)."""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import bcrypt
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from test_fuzz import fuzz, json_values

from gpuscope.outputs.webconfig import TLS_KEYS, WebConfig, WebConfigError, load_web_config


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Path:
    """A self-signed certificate and its key (openssl), a file that is not PEM and a folder, side by side."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl binary is not installed")
    d = tmp_path_factory.mktemp("webfuzz")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-keyout", "s.key", "-out", "s.crt", "-days", "2", "-subj", "/CN=localhost"], cwd=d, check=True,
                   capture_output=True, timeout=60)
    (d / "notpem").write_text("hello\n")
    (d / "dir").mkdir()
    return d


HASH = bcrypt.hashpw(b"pw", bcrypt.gensalt(4)).decode()
names = st.sampled_from(["s.crt", "s.key", "notpem", "dir", "missing", "", "../s.crt", "~/nope", "s.crt\x00"])
values = (names | st.sampled_from(["TLS10", "TLS12", "TLS13", "SSL3", "NoClientCert", "VerifyClientCertIfGiven",
                                   "RequireAndVerifyClientCert", "RequireAnyClientCert", HASH, HASH[:-1], "deny",
                                   "nosniff", "\x1b[2J"]) | json_values)
# mostly the right keys (so the checks past the key check run), sometimes a stray one
auth_types = st.sampled_from(["NoClientCert", "VerifyClientCertIfGiven", "RequireAndVerifyClientCert"])
tls = (st.fixed_dictionaries({"cert_file": names, "key_file": names},
                             optional={"client_ca_file": names, "client_auth_type": auth_types | values,
                                       "min_version": values, "max_version": values,
                                       "client_allowed_sans": st.lists(st.text(max_size=8), max_size=2) | values,
                                       "prefer_server_cipher_suites": values})
       | st.dictionaries(st.sampled_from(sorted(TLS_KEYS)) | st.text(max_size=6), values, max_size=4))
headers = st.dictionaries(st.sampled_from(["X-Frame-Options", "X-Content-Type-Options", "Content-Security-Policy",
                                           "Server"]), values, max_size=3)
http = st.fixed_dictionaries({}, optional={"http2": values, "headers": headers | values, "x": values})
users = st.dictionaries(st.text(max_size=6), values | st.just(HASH), max_size=3)
docs = (st.fixed_dictionaries({}, optional={"tls_server_config": tls | values, "http_server_config": http | values,
                                           "basic_auth_users": users | values})
       | st.dictionaries(st.sampled_from(["rate_limit", "tls", "basic_auth_users"]) | st.text(max_size=6), values,
                         max_size=2))


def _one_line_or_loaded(path: Path) -> None:
    try:
        web = load_web_config(str(path))
    except WebConfigError as e:
        line = str(e)
        assert line.startswith("--web-config ") and "\n" not in line and "\x1b" not in line, line
        return
    assert isinstance(web, WebConfig)


@fuzz(150)
@given(docs)
def test_hostile_values_in_the_right_places(files, doc):
    p = files / "web.yml"
    p.write_text(yaml.safe_dump(doc, allow_unicode=True))
    _one_line_or_loaded(p)


@fuzz(150)
@given(st.text(max_size=200) | st.binary(max_size=200).map(lambda b: b.decode("latin-1")))
def test_hostile_text(files, text):
    p = files / "web.yml"
    p.write_text(text, encoding="utf-8", errors="surrogateescape")
    _one_line_or_loaded(p)


GOOD = (f"tls_server_config:\n  cert_file: s.crt\n  key_file: s.key\n  client_auth_type: VerifyClientCertIfGiven\n"
        f"  client_ca_file: s.crt\n  min_version: TLS12\nhttp_server_config:\n  headers:\n"
        f"    X-Frame-Options: deny\nbasic_auth_users:\n  prom: '{HASH}'\n")


@fuzz(150)
@given(st.integers(0, 2**32), st.lists(st.sampled_from(["flip", "del", "dup", "cut"]), min_size=1, max_size=4))
def test_mutated_good_files(files, seed, muts):
    rnd = random.Random(seed)
    data = bytearray(GOOD.encode())
    for m in muts:
        i = rnd.randrange(len(data))
        if m == "flip":
            data[i] ^= 1 << rnd.randrange(8)
        elif m == "del":
            del data[i]
        elif m == "dup":
            data[i:i] = data[i:i + rnd.randrange(1, 20)]
        else:
            del data[i:]
        if not data:
            data = bytearray(b"x")
    p = files / "web.yml"
    p.write_bytes(bytes(data))
    _one_line_or_loaded(p)


def test_the_good_file_loads(files):
    p = files / "web.yml"
    p.write_text(GOOD)
    web = load_web_config(str(p))
    assert web.describe() == "TLS, client certificates, basic auth"
