"""--endpoint URLs that httpx only rejects at the first request are refused up front, in one line."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gpuscope.cli.endpoint_url import endpoint_url_problem


@pytest.mark.parametrize(("url", "problem"), [
    ("http://127.0.0.1:8000", None),
    ("https://[::1]:8000/metrics", None),
    ("HTTP://gpu-host", None),                      # schemes are case-insensitive
    ("http://user@h:80/x?y=1", None),
    ("http://[::1", "not a valid URL"),             # was: internal error: ValueError
    ("http://h:99999", "port must be a number"),    # was: poller thread died, exit 0
    ("http://h:abc", "port must be a number"),      # was: poller thread died, exit 0
    ("http://h:0", "port must be a number"),
    ("http://h:", "port must be a number"),
    ("http://", "no host"),                         # was: polled forever, "missing protocol"
    ("http:///metrics", "no host"),
    ("http://a b", "spaces"),
    ("http://a\tb", "spaces"),
    ("ftp://x", "expected http://HOST:PORT"),
    ("localhost:8000", "expected http://HOST:PORT"),
    ("http:/x", "expected http://HOST:PORT"),
])
def test_endpoint_url_problem(url: str, problem: str | None) -> None:
    got = endpoint_url_problem(url)
    if problem is None:
        assert got is None
    else:
        assert got is not None and problem in got


@pytest.mark.slow
@pytest.mark.parametrize("url", ["http://127.0.0.1:99999", "http://[::1", "http://"])
def test_record_refuses_bad_endpoint_url(url: str, tmp_path) -> None:
    out = tmp_path / "r.jsonl.gz"
    p = subprocess.run([sys.executable, "-m", "gpuscope", "record", "-o", str(out), "--simulate", "healthy-gen4",
                        "--duration", "2", "--endpoint", url], capture_output=True, text=True, timeout=120)
    assert p.returncode == 1, p.stderr
    assert p.stderr.count("\n") == 1 and p.stderr.startswith("gpuscope: error: --endpoint"), p.stderr
    assert "Traceback" not in p.stderr and "internal error" not in p.stderr
    assert not out.exists()
