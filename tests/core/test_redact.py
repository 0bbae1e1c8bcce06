"""core/redact.py: what counts as a secret, and every form of hiding it (tables of cases)."""

from __future__ import annotations

import pytest
from helpers import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscope.core.redact import (
    REDACTED,
    public_url,
    redact_argv,
    redact_command,
    redact_header,
    redact_text,
    secret_name,
    split_endpoint,
)


@pytest.mark.parametrize("name,secret", [
    ("--password", True), ("--api-key", True), ("--apikey", True), ("--hf-token", True), ("HF_TOKEN", True),
    ("OPENAI_API_KEY", True), ("AWS_SECRET_ACCESS_KEY", True), ("Authorization", True), ("X-Api-Key", True),
    ("apiKey", True), ("--client-secret", True), ("Cookie", True), ("--use-auth-token", True), ("pw", True),
    ("--password-file", False), ("--tls-key", False), ("TOKEN_PATH", False), ("--max-tokens", False),
    ("--tokenizer", False), ("--model", False), ("--passthrough", False), ("--endpoint-header", False),
    ("--auth-type", False), ("--key", False), ("", False), ("--", False),
])
def test_secret_name(name, secret):
    assert secret_name(name) is secret


@pytest.mark.parametrize("url,public,request_url,auth", [
    ("http://alice:S3cretPW@host:8000", "http://host:8000", "http://host:8000", ("alice", "S3cretPW")),
    ("https://bob@h/metrics", "https://h/metrics", "https://h/metrics", ("bob", "")),
    ("http://u:p%40ss%3Aw@h:1/x", "http://h:1/x", "http://h:1/x", ("u", "p@ss:w")),  # escapes decoded
    ("http://u:p@ss@h:1", "http://h:1", "http://h:1", ("u", "p@ss")),  # the last @ ends it, as in urlsplit
    ("h:8000", "h:8000", "h:8000", None),  # no scheme: the check refuses it
    ("http://u:pw@h:1/m?token=t0k&x=1", f"http://h:1/m?token={REDACTED}&x=1", "http://h:1/m?token=t0k&x=1",
     ("u", "pw")),
    ("http://h:1/m?api_key=k", f"http://h:1/m?api_key={REDACTED}", "http://h:1/m?api_key=k", None),
    ("http://[::1]:8000", "http://[::1]:8000", "http://[::1]:8000", None),
    ("http://h:8000", "http://h:8000", "http://h:8000", None),
    ("http://u:pw@[::1", "http://[::1", "http://[::1", ("u", "pw")),  # a bad URL (the check says so): no pw
    # a URL inside the query is not the endpoint's user info (the first :// starts the host part)
    ("http://h:8000/m?target=http://a:b@c", "http://h:8000/m?target=http://c", "http://h:8000/m?target=http://a:b@c",
     None),
    ("http://alice:pw@h/?next=http://x", "http://h/?next=http://x", "http://h/?next=http://x", ("alice", "pw")),
])
def test_split_endpoint(url, public, request_url, auth):
    e = split_endpoint(url)
    assert (e.url, e.request_url, e.auth) == (public, request_url, auth)
    assert "pw" not in repr(e) and "S3cret" not in repr(e)


@pytest.mark.parametrize("argv,want", [
    (["gpuscope", "--endpoint", "http://alice:S3cretPW@h:8000", "--endpoint-header", "X-Api-Key: K"],
     ["gpuscope", "--endpoint", "http://h:8000", "--endpoint-header", f"X-Api-Key: {REDACTED}"]),
    (["--endpoint=http://a:b@h", "--endpoint-header=Authorization: Bearer x"],
     ["--endpoint=http://h", f"--endpoint-header=Authorization: {REDACTED}"]),
    (["vllm", "serve", "m", "--api-key", "sk-1", "--hf-token=hf_x", "--port", "8000"],
     ["vllm", "serve", "m", "--api-key", REDACTED, f"--hf-token={REDACTED}", "--port", "8000"]),
    (["env", "HF_TOKEN=abc", "OTHER=1", "python", "x.py"], ["env", f"HF_TOKEN={REDACTED}", "OTHER=1", "python", "x.py"]),
    (["--password-file", "/etc/pw", "--tls-key", "k.pem", "--max-tokens", "5"],
     ["--password-file", "/etc/pw", "--tls-key", "k.pem", "--max-tokens", "5"]),
    (["curl", "-H", "Authorization: Bearer abc", "http://h/x?token=1&a=2"],
     ["curl", "-H", f"Authorization: {REDACTED}", f"http://h/x?token={REDACTED}&a=2"]),
    (["curl", "Authorization:", "Bearer", "abc", "-s"], ["curl", f"Authorization: {REDACTED}", "-s"]),
    (["--token", "--verbose"], ["--token", "--verbose"]),  # a flag is not the token's value
    (["ls", "-H", "/dir"], ["ls", "-H", "/dir"]),  # -H of another program: not a header, kept
    (["--note", "a=b c"], ["--note", "a=b c"]),
    (["--endpoint", "http://u:p@ss@h:8000"], ["--endpoint", "http://h:8000"]),  # an @ in the password
    # a whole command line in one argument: its secrets too
    (["gpuscope", "record", "--", "bash", "-c", "vllm serve m --api-key sk-123 --port 8000"],
     ["gpuscope", "record", "--", "bash", "-c", f"vllm serve m --api-key {REDACTED} --port 8000"]),
    (["sh", "-c", 'curl -H "Authorization: Bearer abc" -s'], ["sh", "-c", f'curl -H "Authorization: {REDACTED} -s']),
    ([], []),
])
def test_redact_argv(argv, want):
    assert redact_argv(argv) == want


@pytest.mark.parametrize("line,want", [
    ("python3 -m vllm.entrypoints.openai.api_server --api-key sk-123 --port 8000",
     f"python3 -m vllm.entrypoints.openai.api_server --api-key {REDACTED} --port 8000"),
    ("curl -H Authorization: Bearer abc -s", f"curl -H Authorization: {REDACTED} -s"),
    ("python train.py --lr 3e-4", "python train.py --lr 3e-4"),
])
def test_redact_command(line, want):
    assert redact_command(line) == want


@pytest.mark.parametrize("text,want", [
    ("GET http://a:b@h:1/metrics failed", "GET http://h:1/metrics failed"),
    ("see https://x.y/?access_token=zz&q=1", f"see https://x.y/?access_token={REDACTED}&q=1"),
    ("mail alice@example.com", "mail alice@example.com"),  # not a URL's user info
    ("GET http://alice:p@ss@host:8000/x", "GET http://host:8000/x"),  # to the last @ of the host part
    ("http://h/p@x and http://a:b@h2", "http://h/p@x and http://h2"),  # an @ in a path is no user info
    ("plain text", "plain text"),
])
def test_redact_text(text, want):
    assert redact_text(text) == want
    assert public_url(text) == want


@pytest.mark.parametrize("item,want", [("X-Api-Key: k", f"X-Api-Key: {REDACTED}"), ("no colon", REDACTED)])
def test_redact_header(item, want):
    assert redact_header(item) == want


# printable ASCII that may stand in user info unescaped; "Zq" first, so that it is no part of the text around it
_SECRET = st.text(st.characters(min_codepoint=33, max_codepoint=126, exclude_characters="/?#:%\\"), min_size=4,
                  max_size=30).map(lambda s: "Zq" + s)


@settings(max_examples=examples(200))
@given(pw=_SECRET, user=_SECRET, path=st.sampled_from(["", "/", "/metrics", "/m?x=1"]))
def test_a_password_never_reaches_the_public_url(pw, user, path):
    """Whatever the password, the public URL and the redacted command line hold neither it nor the user,
    and the request carries exactly them."""
    user = user.replace("@", "")  # a password may hold an @ (the last one ends the user info); a user name not
    url = f"http://{user}:{pw}@127.0.0.1:8000{path}"
    e = split_endpoint(url)
    assert e.auth == (user, pw)
    assert pw not in e.url and pw not in e.request_url and user not in e.url
    assert not any(pw in a for a in redact_argv(["--endpoint", url, "--endpoint-header", f"X-Api-Key: {pw}"]))
    assert pw not in redact_text(f"GET {url} failed") and pw not in public_url(url)


def test_the_log_file_and_stderr_lines_are_redacted(tmp_path):
    """A message, or a traceback, that quotes a URL with a password: neither the log file nor the
    headless stderr line holds the password (cli/logs.py formatters)."""
    import io
    import logging

    from gpuscope.cli import logs

    path, err = tmp_path / "g.log", io.StringIO()
    logs.configure(logs.LogConfig(str(path), logging.DEBUG), terminal=True, stderr=err)
    try:
        log = logging.getLogger("gpuscope.test")
        log.warning("cannot reach %s", "http://alice:S3cretPW@h:8000/metrics?token=T0k")
        try:
            raise ValueError("GET http://alice:S3cretPW@h:8000 failed")
        except ValueError:
            log.exception("poll")
    finally:
        logs.reset()
    text = path.read_text()
    assert "http://h:8000/metrics?token=<redacted>" in text and "Traceback" in text
    assert "GET http://h:8000 failed" in text
    for out in (text, err.getvalue()):
        assert "S3cretPW" not in out and "T0k" not in out and "alice" not in out
    assert "gpuscope: warning: cannot reach http://h:8000/metrics?token=<redacted>" in err.getvalue()
