"""tui/no_tls.py: asyncio loaded without OpenSSL for the screens that open no TLS connection."""

from __future__ import annotations

import subprocess
import sys

import pytest

CHECK = """
import sys
from gpuscope.tui.no_tls import load_asyncio_without_tls
assert load_asyncio_without_tls() is True
assert "ssl" not in sys.modules and "_ssl" not in sys.modules
import asyncio, asyncio.sslproto
assert asyncio.sslproto.ssl is None
assert load_asyncio_without_tls() is False  # already loaded: nothing done

async def echo():
    server = await asyncio.start_server(lambda r, w: (w.write(b"ok"), w.close()), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    got = await reader.read()
    writer.close()
    server.close()
    return got

assert asyncio.run(echo()) == b"ok"  # plain connections as before
import textual.app  # the screens' framework loads no ssl of its own
assert "ssl" not in sys.modules
import ssl  # importable again for whatever imports it itself
assert ssl.OPENSSL_VERSION
print("OK")
"""


def test_asyncio_loads_and_runs_without_ssl():
    out = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "OK", out.stderr[-2000:]


@pytest.mark.parametrize("first", ["asyncio", "ssl"])
def test_nothing_is_done_where_asyncio_or_ssl_is_loaded(first: str):
    code = (f"import sys, {first}\nfrom gpuscope.tui.no_tls import load_asyncio_without_tls\n"
            "assert load_asyncio_without_tls() is False\nimport asyncio, asyncio.sslproto\n"
            "assert asyncio.sslproto.ssl is sys.modules['ssl']\nprint('OK')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "OK", out.stderr[-2000:]
