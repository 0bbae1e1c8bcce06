"""asyncio loaded without its TLS support, for a screen that opens no TLS connection.

asyncio imports ``ssl`` when it loads (for ``ssl=`` connections and ``start_tls``), and ``ssl`` maps OpenSSL
(libssl, libcrypto): 4.2 MB of the live screen's peak RSS at one GPU, a tenth of it (docs/performance.md,
*Memory at one GPU*). The live view without ``--endpoint`` and a replay open no network connection, so they
import asyncio through :func:`load_asyncio_without_tls` first: ``ssl`` cannot be imported meanwhile, and
asyncio's modules hold ``ssl = None``, as on a Python built without OpenSSL (each of them catches the
ImportError for that). Afterwards ``ssl`` is importable again for anything that imports it itself; only
asyncio's own TLS stays off in that process. Tests: tests/test_layout.py (``ssl`` is not loaded by the live
screen) and tests/tui/test_no_tls.py.
"""

from __future__ import annotations

import sys


def load_asyncio_without_tls() -> bool:
    """Import asyncio while ``import ssl`` fails. True when this loaded it; False (nothing done) when asyncio or
    ``ssl`` was already loaded."""
    if "asyncio" in sys.modules or "ssl" in sys.modules:
        return False
    sys.modules["ssl"] = None  # type: ignore[assignment]  # the import system's "not importable" mark
    try:
        import asyncio  # noqa: F401
    finally:
        if "ssl" in sys.modules and sys.modules["ssl"] is None:
            del sys.modules["ssl"]
    return True
