"""No secret from a command line reaches a recording: the command `record -- CMD` runs (its ``start:``
marker, the markers it writes), gpuscope's own command line (the header's ``command``, a password with
spaces in an ``--endpoint``) and the GPU processes' command lines, each holding the secrets an attacker's
trial put there. Real ``gpuscope record`` runs; the file (gzip JSONL), ``summary``, ``summary --by-marker``
and ``compare --by-marker`` are read as text, and none may hold any of :data:`SECRETS`; each still shows the
command around them (else the test would pass on an empty file).
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import free_port

SCENARIO = Path(__file__).parents[2] / "sources" / "scenarios" / "a6000-tp2-pcie-gen1.toml"
# one secret per place the trial found one unredacted
SECRETS = {
    "env": "hf_EnvT0kenSecretValue1234",  # env HF_TOKEN=…
    "api": "ApiK3ySecret",  # --api-key …
    "bearer": "B3arerSecret",  # curl -H "Authorization: Bearer …"
    "user": "CurlUs3rSecret",  # curl -u bob:…
    "key": "PlainK3ySecret", "hmac": "Hm4cSecret", "wandb": "W4ndbSecret", "license": "L1censeSecret",
    "azure": "Azur3Secret", "pat": "P4tSecret", "p": "Pw0rdSecret", "jwt": "Jw7Secret", "tokens": "T0kensSecret",
    "token_eq": "T0kenEqSecret",  # --token= X
    "sk": "sk-proj-Abc123Def456Ghi789Jkl0",  # a positional key
    "sig": "S1gSecret", "amz": "AmzS1gSecret", "code": "C0deSecret", "session": "Sess1onSecret",  # URL queries
    "space": "SP4CE",  # a word of an --endpoint password with spaces
}
S = SECRETS
SECRET_WORDS = (*SECRETS.values(), "hank", "SEC0ND")
CHILD = (f": env HF_TOKEN={S['env']} vllm serve --api-key {S['api']} --max-tokens 512; "  # ':' runs nothing
         f": curl -H 'Authorization: Bearer {S['bearer']}' -u bob:{S['user']} "
         f"'https://h/x?sig={S['sig']}&X-Amz-Signature={S['amz']}&code={S['code']}&session={S['session']}' "
         f"--key {S['key']} --hmac-key {S['hmac']} --wandb-key {S['wandb']} --license-key {S['license']} "
         f"AZURE_OPENAI_KEY={S['azure']} GITHUB_PAT={S['pat']} -p {S['p']} --jwt {S['jwt']} "
         f"--tokens {S['tokens']} --token= {S['token_eq']} {S['sk']}; "
         f"echo \"phase: decode --api-key {S['api']}\" > \"$GPUSCOPE_MARKERS\"; sleep 1.5")
# GPU processes' command lines (each cut at 120 characters once redacted: two of them, to hold every secret)
PROCESSES = (f"--max-num-batched-tokens 8192 --api-key {S['api']} --key {S['key']} -p {S['p']} {S['sk']}",
             f"--tokens {S['tokens']} --webhook https://h/x?sig={S['sig']} AZURE_OPENAI_KEY={S['azure']}")

pytestmark = pytest.mark.slow


def gpuscope(*args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuscope", *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "GPUSCOPE_LOG_LEVEL": "DEBUG"})


def no_secret(what: str, data: bytes | str) -> str:
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    for s in SECRET_WORDS:
        at = text.find(s)
        assert at < 0, f"{s!r} in {what}: …{text[max(0, at - 160):at + 40]}…"
    return text


@pytest.fixture
def scenario(tmp_path) -> Path:
    """The TP=2 vLLM scenario with its (simulated) server's command line, and one more process's, holding the
    trial's secrets."""
    text = SCENARIO.read_text()
    assert "api_server --model" in text
    p = tmp_path / "keyed.toml"
    text = text.replace("api_server --model", f"api_server {PROCESSES[0]} --model")
    p.write_text(text + f'''
[[processes]]
gpus = [1]
pid = 2999
user = "vllm"
name = "python3"
command = "python3 serve.py {PROCESSES[1]}"
''')
    return p


def test_record_a_command_keeps_no_secret(tmp_path, scenario):
    rec, log = tmp_path / "r.jsonl.gz", tmp_path / "gpuscope.log"
    endpoint = f"http://hank:{S['space']} SEC0ND@127.0.0.1:{free_port()}"  # nothing listens: the URL is what counts
    r = gpuscope("--log-file", str(log), "record", "-o", str(rec), "--simulate", str(scenario), "--interval", "0.3",
                 "--endpoint", endpoint, "--", "sh", "-c", CHILD)
    assert r.returncode == 0, r.stderr
    no_secret("record's stderr", r.stdout + r.stderr)
    no_secret("the log", log.read_bytes())
    raw = no_secret("the recording", gzip.decompress(rec.read_bytes()))
    lines = [json.loads(ln) for ln in raw.splitlines()]
    header = " ".join(lines[0]["command"])
    assert "--endpoint http://127.0.0.1:" in header and "HF_TOKEN=<redacted>" in header, header
    markers = [e["text"] for f in lines[1:] for e in f.get("events", ()) if e.get("kind") == "marker"]
    start = next(m for m in markers if m.startswith("start: "))
    for kept in ("HF_TOKEN=<redacted>", "--api-key <redacted>", "--max-tokens 512"):
        assert kept in start, start  # the command is shown (its first 200 characters), its secrets are not
    assert any(m.startswith("phase: decode --api-key <redacted>") for m in markers), markers
    # the GPU processes' command lines are kept, their secrets are not
    assert "--max-num-batched-tokens 8192 --api-key <redacted>" in raw and "--tokens <redacted>" in raw
    for args in (["summary", str(rec)], ["summary", "--json", str(rec)], ["summary", "--by-marker", str(rec)],
                 ["compare", "--by-marker", str(rec), str(rec)], ["compare", "--json", "--by-marker", str(rec), str(rec)]):
        out = gpuscope(*args)
        assert out.returncode == 0, out.stderr
        text = no_secret(" ".join(args[:-1]), out.stdout + out.stderr)
        if "--by-marker" in args:
            assert "start: sh -c" in text, text  # the phase of the command is there, by its redacted name


def test_a_command_that_cannot_run_is_named_without_its_secret(tmp_path):
    """`record -- HF_TOKEN=… cmd` (a variable written where a program goes): the error names it redacted."""
    rec = tmp_path / "r.jsonl.gz"
    r = gpuscope("record", "-o", str(rec), "--simulate", "mixed-4", "--", f"HF_TOKEN={S['env']}", "true")
    assert r.returncode == 127
    assert "cannot run HF_TOKEN=<redacted>" in no_secret("the error", r.stdout + r.stderr), r.stderr


def test_the_endpoint_user_name_is_not_recorded(tmp_path):
    """`--endpoint-user NAME` (Basic auth's user name, half a credential) is hidden in the header's ``command``
    as the password is; neither reaches the file, the log, stderr or a summary. Nothing listens: the command
    line is what counts."""
    rec, log, pw = tmp_path / "r.jsonl.gz", tmp_path / "gpuscope.log", tmp_path / "pw"
    user, password = "Us3rNameSecret", "Passw0rdSecret"
    pw.write_text(password + "\n")
    r = gpuscope("--log-file", str(log), "record", "-o", str(rec), "--simulate", "a6000-tp2-pcie-gen1",
                 "--interval", "0.3", "--duration", "1", "--endpoint", f"http://127.0.0.1:{free_port()}",
                 "--endpoint-user", user, "--endpoint-password-file", str(pw))
    assert r.returncode == 0, r.stderr
    outs = [("record's stderr", r.stdout + r.stderr), ("the log", log.read_bytes()),
            ("the recording", gzip.decompress(rec.read_bytes()))]
    for args in (["summary", str(rec)], ["summary", "--json", str(rec)], ["summary", "--by-marker", str(rec)]):
        out = gpuscope(*args)
        assert out.returncode == 0, out.stderr
        outs.append((" ".join(args[:-1]), out.stdout + out.stderr))
    for what, data in outs:
        text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
        for s in (user, password):
            assert s not in text, f"{s!r} in {what}"
    header = json.loads(gzip.decompress(rec.read_bytes()).splitlines()[0])
    command = " ".join(header["command"])
    assert "--endpoint-user <redacted>" in command and f"--endpoint-password-file {pw}" in command, command


OLD_START = (f"start: env HF_TOKEN={S['env']} vllm serve --api-key {S['sk']} --port 8000 "
             f"-H 'Authorization: Bearer {S['bearer']}' --max-tokens 512")


def test_a_start_marker_of_an_older_recording_is_redacted_when_read(tmp_path):
    """A recording made before `record -- CMD` redacted its child's command (written here as it was: the
    marker raw, through the session's marker door, which only cleans): summary, summary --by-marker, compare
    --by-marker and replay show the start: phase by its name, never its secrets."""
    from helpers import record_sim

    from gpuscope.sources.recording import open_recording

    rec = record_sim(tmp_path / "old.jsonl.gz", "a6000-tp2-pcie-gen1", 12, marker=OLD_START)
    raw = gzip.decompress(rec.read_bytes()).decode()
    assert S["sk"] in raw and S["env"] in raw  # the file holds them, as an older one does
    (start,) = [e.text for e in open_recording(str(rec)).events if e.kind == "marker"]  # what replay shows
    assert start == ("start: env HF_TOKEN=<redacted> vllm serve --api-key <redacted> --port 8000 -H "
                     "Authorization: <redacted> --max-tokens 512"), start
    for args in (["summary", str(rec)], ["summary", "--json", str(rec)], ["summary", "--by-marker", str(rec)],
                 ["compare", "--by-marker", str(rec), str(rec)], ["compare", "--json", "--by-marker", str(rec), str(rec)]):
        out = gpuscope(*args)
        assert out.returncode == 0, out.stderr
        text = no_secret(" ".join(args[:-1]), out.stdout + out.stderr)
        assert "start: env HF_TOKEN=<redacted> vllm serve" in text, text
