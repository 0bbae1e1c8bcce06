"""core/redact.py: what counts as a secret, and every form of hiding it (tables of cases)."""

from __future__ import annotations

import shlex

import pytest
from helpers import examples
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscope.core.redact import (
    ALWAYS,
    REDACTED,
    UNLESS_PLAIN,
    looks_random,
    name_rule,
    plain,
    public_url,
    redact_argv,
    redact_command,
    redact_header,
    redact_text,
    secret_name,
    split_endpoint,
)

A, U = ALWAYS, UNLESS_PLAIN


@pytest.mark.parametrize("name,query,rule", [
    ("--password", False, A), ("--api-key", False, A), ("--apikey", False, A), ("--hf-token", False, A),
    ("HF_TOKEN", False, A), ("OPENAI_API_KEY", False, A), ("AWS_SECRET_ACCESS_KEY", False, A),
    ("Authorization", False, A), ("X-Api-Key", False, A), ("apiKey", False, A), ("--client-secret", False, A),
    ("Cookie", False, A), ("--use-auth-token", False, A), ("pw", False, A),
    # names that say secret without the old words
    ("--hmac-key", False, A), ("--encryption-key", False, A), ("--license-key", False, A),
    ("AZURE_OPENAI_KEY", False, U), ("GITHUB_PAT", False, A), ("--pwd", False, U), ("--jwt", False, A),
    ("--signature", False, A), ("X-Amz-Signature", True, A), ("X-Amz-Credential", True, A), ("sig", True, A),
    ("session", True, A), ("code", True, A), ("key", True, U), ("--key", False, U), ("--ssh-key", False, U),
    ("--wandb-key", False, U), ("-p", False, U), ("--tokens", False, U), ("PRIVATE_KEY", False, A),
    # a value that is a number, a path or a switch under these is kept (test_redact_argv)
    ("--max-tokens", False, U), ("--max-num-batched-tokens", False, U),
    # names that name a file, a size, a kind, or nothing secret
    ("--password-file", False, None), ("--tls-key", False, None), ("--ssl-keyfile", False, None),
    ("TOKEN_PATH", False, None), ("--tokenizer", False, None), ("--model", False, None),
    ("--passthrough", False, None), ("--endpoint-header", False, None), ("--auth-type", False, None),
    ("--tensor-parallel-size", False, None), ("--long-prefill-token-threshold", False, None),
    ("--password-stdin", False, None), ("--session-name", False, None), ("--public-key", False, None),
    ("--trust-remote-code", False, None),  # "code" says secret in a URL's query only
    # a login's user name: half a credential (Basic auth's, MQTT's), hidden as the password is
    ("--endpoint-user", False, A), ("--username", False, A), ("MQTT_USERNAME", False, A), ("username", True, A),
    ("--username-file", False, None), ("--endpoint-url", False, None), ("--user-agent", False, None),
    ("USER", False, None),
    ("--code-revision", False, None), ("page", True, None), ("", False, None), ("--", False, None),
])
def test_name_rule(name, query, rule):
    assert name_rule(name, query=query) == rule
    if not query:
        assert secret_name(name) is (rule is not None)


@pytest.mark.parametrize("value,is_plain", [
    ("512", True), ("0.9", True), ("1e-4", True), ("16GiB", True), ("8000:8000", True), ("8000:80/tcp", True),
    ("127.0.0.1:8000:8000", True), ("true", True), ("None", True), ("/etc/pw", True), ("~/.ssh/id_ed25519", True),
    ("./k", True), ("k.pem", True), ("server.key", True), ("--verbose", True), ("", True), ("512;", True),
    ("S3cret;", False),
    ("S3cret", False), ("hunter2", False), ("abc123", False), ("sk-123", False), ("pass.word", False),
    ("1234abcd", False),
])
def test_plain(value, is_plain):
    assert plain(value) is is_plain


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
    # a line redacted before (a start: marker read back): the header's value is the one word, the rest stays
    (["curl", "-H", "Authorization:", REDACTED, "http://h/x"], ["curl", "-H", f"Authorization: {REDACTED}", "http://h/x"]),
    (["--token", "--verbose"], ["--token", "--verbose"]),  # a flag is not the token's value
    (["ls", "-H", "/dir"], ["ls", "-H", "/dir"]),  # -H of another program: not a header, kept
    (["--note", "a=b c"], ["--note", "a=b c"]),
    (["--endpoint", "http://u:p@ss@h:8000"], ["--endpoint", "http://h:8000"]),  # an @ in the password
    # a whole command line in one argument: its secrets too
    (["gpuscope", "record", "--", "bash", "-c", "vllm serve m --api-key sk-123 --port 8000"],
     ["gpuscope", "record", "--", "bash", "-c", f"vllm serve m --api-key {REDACTED} --port 8000"]),
    (["sh", "-c", 'curl -H "Authorization: Bearer abc" -s'], ["sh", "-c", f"curl -H Authorization: {REDACTED} -s"]),
    ([], []),
    # the child command of `record -- CMD` (its start: marker), as a shell gives it
    (["env", "HF_TOKEN=hf_x", "vllm", "serve", "--api-key", "K"], ["env", f"HF_TOKEN={REDACTED}", "vllm", "serve", "--api-key", REDACTED]),
    (["curl", "-H", "Authorization: Bearer T", "-u", "bob:S3cret", "http://h/x"],
     ["curl", "-H", f"Authorization: {REDACTED}", "-u", f"bob:{REDACTED}", "http://h/x"]),
    (["sh", "-c", 'curl -H "Authorization: Bearer T" -u bob:S3cret http://h'],
     ["sh", "-c", f"curl -H Authorization: {REDACTED} -u bob:{REDACTED} http://h"]),
    # secret-named query keys, in any URL argument
    (["http://h/x?key=k1&sig=s1&X-Amz-Signature=a1&code=c1&session=e1&page=2&max_tokens=5"],
     [f"http://h/x?key={REDACTED}&sig={REDACTED}&X-Amz-Signature={REDACTED}&code={REDACTED}&session={REDACTED}&page=2&max_tokens=5"]),
    (["--webhook", "https://h/x?sig=abc123&a=1"], ["--webhook", f"https://h/x?sig={REDACTED}&a=1"]),
    (["--webhook=https://h/x?sig=abc123"], [f"--webhook=https://h/x?sig={REDACTED}"]),
    # secret-named flags and variables
    *[([flag, "v4lue"], [flag, REDACTED]) for flag in (
        "--key", "--hmac-key", "--encryption-key", "--license-key", "--ssh-key", "--wandb-key", "-p", "--pwd",
        "--jwt", "--signature", "--tokens", "--private-key", "--session", "--auth", "--cookie")],
    *[([f"{name}=v4lue"], [f"{name}={REDACTED}"]) for name in ("AZURE_OPENAI_KEY", "GITHUB_PAT", "--key", "DB_PASSWORD")],
    (["--token=", "X1"], ["--token=", REDACTED]),  # the value after an = then a space
    # user names given to gpuscope: --endpoint-user (Basic auth) and --username (MQTT)
    (["gpuscope", "--endpoint", "http://h:8000", "--endpoint-user", "alice", "--endpoint-password-file", "/run/pw"],
     ["gpuscope", "--endpoint", "http://h:8000", "--endpoint-user", REDACTED, "--endpoint-password-file", "/run/pw"]),
    (["--endpoint-user=alice", "agent", "--username", "bob", "--password-file", "p.txt", "--username=carol"],
     [f"--endpoint-user={REDACTED}", "agent", "--username", REDACTED, "--password-file", "p.txt", f"--username={REDACTED}"]),
    (["--endpoint-user", "1000"], ["--endpoint-user", REDACTED]),  # a number too: a user name is never plain
    (["--tokens", "abc", "--max-tokens", "512", "--max-num-batched-tokens", "8192", "--tokens", "5"],
     ["--tokens", REDACTED, "--max-tokens", "512", "--max-num-batched-tokens", "8192", "--tokens", "5"]),
    # key-shaped values wherever they stand
    (["run", "sk-proj-abcdefgh12345678"], ["run", REDACTED]),
    (["--model=sk-abcdefgh12345678", "hf_abcdefghijklmnopqrstuv", "ghp_abcdefghijklmnop0123",
      "github_pat_11ABCDEFG0123456789_abc", "xoxb-1234567890-abcdef", "AKIAIOSFODNN7EXAMPLE",
      "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig_nature", "X-Key: aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW"],
     ["--model=" + REDACTED, REDACTED, REDACTED, REDACTED, REDACTED, REDACTED, REDACTED, f"X-Key: {REDACTED}"]),
    # a password with spaces stays one argument: all of it goes
    (["gpuscope", "--endpoint", "http://hank:SP ACE SEC@host:8000", "record"],
     ["gpuscope", "--endpoint", "http://host:8000", "record"]),
    (["--endpoint=http://hank:SP ACE@SEC@host:8000/m?x=1"], ["--endpoint=http://host:8000/m?x=1"]),
    (["sh", "-c", "gpuscope --endpoint 'http://hank:SP ACE SEC@host:8000'"],
     ["sh", "-c", "gpuscope --endpoint 'http://host:8000'"]),
    # what is no secret stays: numbers, paths, switches, model names, revisions, uid:gid, ports
    (["vllm", "serve", "--model", "meta-llama/Meta-Llama-3.1-70B-Instruct", "--tensor-parallel-size", "2",
      "--max-model-len", "8192", "--kv-cache-dtype", "fp8_e4m3", "--trust-remote-code", "Qwen2-VL-72B-Instruct",
      "--revision", "3f2a9c1d7e8b6a5f4c3d2e1f0a9b8c7d6e5f4a3b", "--long-prefill-token-threshold", "512"],
     ["vllm", "serve", "--model", "meta-llama/Meta-Llama-3.1-70B-Instruct", "--tensor-parallel-size", "2",
      "--max-model-len", "8192", "--kv-cache-dtype", "fp8_e4m3", "--trust-remote-code", "Qwen2-VL-72B-Instruct",
      "--revision", "3f2a9c1d7e8b6a5f4c3d2e1f0a9b8c7d6e5f4a3b", "--long-prefill-token-threshold", "512"]),
    (["docker", "run", "-p", "8000:8000", "-u", "1000:1000", "--ssh-key", "~/.ssh/id_ed25519", "-p", "-v"],
     ["docker", "run", "-p", "8000:8000", "-u", "1000:1000", "--ssh-key", "~/.ssh/id_ed25519", "-p", "-v"]),
    (["mkdir", "-p", "/tmp/x"], ["mkdir", "-p", "/tmp/x"]), (["python", "-u", "train.py"], ["python", "-u", "train.py"]),
    (["PWD=/home/x", "CUDA_VISIBLE_DEVICES=0,1", "--served-model-name", "VeryLongCamelCaseClassName22"],
     ["PWD=/home/x", "CUDA_VISIBLE_DEVICES=0,1", "--served-model-name", "VeryLongCamelCaseClassName22"]),
    (["--session-name", "run1", "--public-key", "abc", "--code-revision", "main", "--key", "k.pem"],
     ["--session-name", "run1", "--public-key", "abc", "--code-revision", "main", "--key", "k.pem"]),
])
def test_redact_argv(argv, want):
    assert redact_argv(argv) == want
    assert redact_argv(want) == want  # redacting twice changes nothing


@pytest.mark.parametrize("line,want", [
    ("python3 -m vllm.entrypoints.openai.api_server --api-key sk-123 --port 8000",
     f"python3 -m vllm.entrypoints.openai.api_server --api-key {REDACTED} --port 8000"),
    ("curl -H Authorization: Bearer abc -s", f"curl -H Authorization: {REDACTED} -s"),
    ("python train.py --lr 3e-4", "python train.py --lr 3e-4"),
    # joined by spaces, a password with spaces: to the last @ after user:, up to a -flag
    ("gpuscope --endpoint http://hank:SP ACE SEC@host:8000 record", "gpuscope --endpoint http://host:8000 record"),
    ("curl http://h:1 --mail-from bob@example.com", "curl http://h:1 --mail-from bob@example.com"),
    # a shell script: its quotes honoured
    ("gpuscope --endpoint 'http://hank:SP ACE SEC@host:8000'", "gpuscope --endpoint 'http://host:8000'"),
    ('curl -H "Authorization: Bearer T" -u bob:S3cret https://h/?sig=x',
     f"curl -H Authorization: {REDACTED} -u bob:{REDACTED} https://h/?sig={REDACTED}"),
    ("vllm serve m --api-key sk-1 --max-tokens 512 -p 8000", f"vllm serve m --api-key {REDACTED} --max-tokens 512 -p 8000"),
    ("python -c print('it\\'s') --tokens T", f"python -c print('it\\'s') --tokens {REDACTED}"),  # unbalanced: by spaces
    ("gpuscope --endpoint-user alice --endpoint http://h:1 record", f"gpuscope --endpoint-user {REDACTED} --endpoint http://h:1 record"),
    ("gpuscope agent --username bob --broker mqtt://h", f"gpuscope agent --username {REDACTED} --broker mqtt://h"),
    ("run sk-proj-abcdefgh12345678", f"run {REDACTED}"),
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
    ("GET 'http://a:b c@h/x' failed", "GET 'http://h/x' failed"),  # quoted: a space in the password
    ("https://s3/x?X-Amz-Credential=AK&X-Amz-Signature=ab12&X-Amz-Date=1",
     f"https://s3/x?X-Amz-Credential={REDACTED}&X-Amz-Signature={REDACTED}&X-Amz-Date=1"),
    ("token eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln expired", f"token {REDACTED} expired"),
])
def test_redact_text(text, want):
    assert redact_text(text) == want
    assert public_url(text) == want


@pytest.mark.parametrize("s,random", [
    ("aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW", True), ("Zx81kLmQ2vR7tYp0wN4sB6", True),
    ("q8Vx/3LmZt+Rk2Jw9PbN7sYc5", True), ("AbPhjFkQurWPVlBEuPHfmogoyQeiZNdP3", True),
    ("Meta-Llama-3.1-70B-Instruct", False), ("Meta-Llama-3-70B-Instruct-GPTQ-INT4", False),
    ("TheBloke/Mixtral-8x7B-Instruct-v0.1-GPTQ", False), ("VeryLongCamelCaseClassName22", False),
    ("Qwen2VLForConditionalGeneration", False), ("DeepSeekV3ForCausalLM", False),
    ("3f2a9c1d7e8b6a5f4c3d2e1f0a9b8c7d6e5f4a3b", False), ("550e8400-e29b-41d4-a716-446655440000", False),
    ("vllm.entrypoints.openai.api_server", False), ("--max-num-batched-tokens", False),
    ("models--meta-llama--Llama-2-7b-hf", False), ("short1Ab", False),
])
def test_looks_random(s, random):
    assert looks_random(s) is random


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


# A secret as a fuzzer writes it: "Zq" then printable ASCII that a shell, a URL's query and a value may all
# hold unquoted and that no rule reads as plainly harmless (no . / space quote \\ ? & # ; = %).
_VALUE = st.text(st.characters(min_codepoint=33, max_codepoint=126, exclude_characters="./'\"\\?&#;=% "),
                 min_size=4, max_size=24).map(lambda s: "Zq" + s)
_BENIGN = st.lists(st.sampled_from(["vllm", "serve", "--model", "m/x-7B", "-v", "--port", "8000", "python", "x.py",
                                    "--max-tokens", "512", "-p", "8000:8000", "sh", "-c", "--"]), max_size=4)
_PLACES = (  # where a command line can hold a secret (v)
    lambda v: ["--api-key", v], lambda v: [f"--api-key={v}"], lambda v: ["--token=", v], lambda v: ["--key", v],
    lambda v: ["--hmac-key", v], lambda v: ["--encryption-key", v], lambda v: ["--license-key", v],
    lambda v: ["--ssh-key", v], lambda v: ["--wandb-key", v], lambda v: ["-p", v], lambda v: ["--pwd", v],
    lambda v: ["--jwt", v], lambda v: ["--signature", v], lambda v: ["--tokens", v], lambda v: [f"HF_TOKEN={v}"],
    lambda v: [f"AZURE_OPENAI_KEY={v}"], lambda v: [f"GITHUB_PAT={v}"], lambda v: ["-H", f"Authorization: Bearer {v}"],
    lambda v: [f"X-Api-Key: {v}"], lambda v: ["-u", f"bob:{v}"], lambda v: [f"http://alice:{v}@h:8000/m"],
    lambda v: ["--webhook", f"https://h/x?sig={v}"], lambda v: [f"https://h/x?a=1&X-Amz-Signature={v}"],
    lambda v: [f"https://h/cb?code={v}"], lambda v: [f"https://h/?session={v}&key={v}"],
    lambda v: ["--endpoint", f"http://hank:{v} {v}x SEC@host:8000"],  # spaces in the password
    lambda v: ["--endpoint-user", v], lambda v: [f"--endpoint-user={v}"], lambda v: ["--username", v],
)


def _outputs(argv: list[str]) -> list[str]:
    """Every form a command line is written in: the header's argv, the start: marker's joined line, and a
    joined line read back (a GPU process's, by spaces; a shell's, quoted)."""
    marker = " ".join(redact_argv(argv))
    return [*redact_argv(argv), marker, redact_command(" ".join(argv)), redact_command(shlex.join(argv)),
            redact_command(marker)]


@settings(max_examples=examples(400))
@given(v=_VALUE, place=st.sampled_from(range(len(_PLACES))), before=_BENIGN, after=_BENIGN,
       script=st.booleans())
def test_a_secret_never_survives_in_a_command_line(v, place, before, after, script):
    """Whatever the secret and wherever it is put, in an argument of its own or inside a `sh -c`
    script, none of the forms the command line is written in holds it."""
    argv = [*before, *_PLACES[place](v), *after]
    if script:
        argv = ["sh", "-c", shlex.join(argv)]
    for out in _outputs(argv):
        assert v not in out, (argv, out)


_KEYS = st.one_of(
    st.text("abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789", min_size=20, max_size=60).map(
        lambda s: "sk-proj-" + s),
    st.text("abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789", min_size=34, max_size=34).map(
        lambda s: "hf_" + s),
    st.text("abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789", min_size=36, max_size=36).map(
        lambda s: "ghp_" + s),
    st.text("ABCDEFGHJKLMNPQRSTUVWXYZ234567", min_size=16, max_size=16).map(lambda s: "AKIA" + s),
    st.tuples(*[st.text("abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789_-", min_size=8, max_size=40)] * 2)
    .map(lambda t: f"eyJ{t[0]}.eyJ{t[1]}.{t[0][::-1]}"),
)


@settings(max_examples=examples(200))
@given(key=_KEYS, before=_BENIGN, after=_BENIGN, flag=st.sampled_from(["", "--model", "--note=", "X="]))
def test_a_key_shaped_value_never_survives(key, before, after, flag):
    """A key is hidden by its look under any flag or none (a positional `sk-proj-…`, `--model hf_…`)."""
    here = [flag, key] if flag and not flag.endswith("=") else [flag + key]
    for out in _outputs([*before, *here, *after]):
        assert key not in out


@settings(max_examples=examples(300))
@given(argv=st.lists(st.text(max_size=40), max_size=8))
def test_redaction_never_raises_and_is_stable(argv):
    """Any argv, any text: strings back, never an exception, and redacting again changes nothing."""
    once = redact_argv(argv)
    assert all(isinstance(a, str) for a in once)
    line = " ".join(argv)
    for f in (redact_command, redact_text, public_url):
        assert isinstance(f(line), str)
    assert redact_text(redact_text(line)) == redact_text(line)


# ------------------------------------------------------------------ a start: marker read back (core/validate.py)
@pytest.mark.parametrize("kind,text,want", [
    # a recording made before the child command was redacted at the source: hidden when read back
    ("marker", "start: env HF_TOKEN=hf_abcdefghijklmnopqrstuv vllm serve --api-key sk-proj-abcdefgh12345678 --port 8000",
     f"start: env HF_TOKEN={REDACTED} vllm serve --api-key {REDACTED} --port 8000"),
    ("marker", "start: vllm serve m --api-key K3y --max-tokens 512", f"start: vllm serve m --api-key {REDACTED} --max-tokens 512"),
    ("marker", "start:vllm --api-key K3y", f"start:vllm --api-key {REDACTED}"),  # no space after the colon
    ("marker", "start: sh -c curl -H 'Authorization: Bearer T0k' -u bob:S3cret http://h",
     f"start: sh -c curl -H Authorization: {REDACTED} -u bob:{REDACTED} http://h"),
    ("marker", "start: gpuscope --endpoint-user alice --endpoint http://a:b@h:1",
     f"start: gpuscope --endpoint-user {REDACTED} --endpoint http://h:1"),
    ("marker", "start: x\x1b[2J --api-key K3y", f"start: x --api-key {REDACTED}"),  # cleaned, then redacted
    # what the recorder writes now comes back as it is
    ("marker", f"start: sh -c : env HF_TOKEN={REDACTED} vllm serve --api-key {REDACTED} --max-tokens 512; sleep 1",
     f"start: sh -c : env HF_TOKEN={REDACTED} vllm serve --api-key {REDACTED} --max-tokens 512; sleep 1"),
    ("marker", "start: python -c print('it') --lr 3e-4", "start: python -c print('it') --lr 3e-4"),
    # other markers and events are the user's words: cleaned only
    ("marker", "phase: decode --api-key K3y", "phase: decode --api-key K3y"),
    ("marker", "restart: --api-key K3y", "restart: --api-key K3y"),
    ("finding_raised", "start: --api-key K3y", "start: --api-key K3y"),
    ("marker", "start:", "start:"), ("marker", "", ""),
])
def test_a_start_marker_is_redacted_when_read(kind, text, want):
    from gpuscope.core.model import Event
    from gpuscope.core.validate import check_event, event_text

    assert event_text(kind, text) == want
    assert check_event(Event(t=1.0, kind=kind, text=text)).text == want
    assert event_text(kind, want) == want  # reading it again changes nothing


@settings(max_examples=examples(300))
@given(v=_VALUE, place=st.sampled_from(range(len(_PLACES))), before=_BENIGN, after=_BENIGN)
def test_a_start_marker_read_back_holds_no_secret_and_a_redacted_one_is_kept(v, place, before, after):
    """A start: marker of any child command: written raw (an old recording), read back without the secret;
    written as the recorder writes it now (cli/record.py), read back unchanged."""
    from gpuscope.core.text import clean
    from gpuscope.core.validate import event_text

    argv = [*before, *_PLACES[place](v), *after]
    assert v not in event_text("marker", clean("start: " + " ".join(argv), 200))
    now = clean("start: " + " ".join(redact_argv(argv)), 200)
    assert event_text("marker", now) == now
