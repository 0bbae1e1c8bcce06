"""Checking an ``--endpoint`` URL before any poller starts: one clear line, never a traceback.

httpx rejects some URLs only when the first request is built (``http://h:99999`` killed the
poller thread with an ``ExceptionGroup`` while recording went on and exited 0; ``http://[::1``
was an internal error; ``http://`` polled forever as "unreachable (missing protocol)").
"""

from __future__ import annotations

from urllib.parse import urlsplit


def endpoint_url_problem(url: str) -> str | None:
    """Why ``url`` cannot be an ``--endpoint``, in words, or None when it can.

    Accepted: ``http://`` or ``https://`` (any case), a host, an optional port 1–65535, any path.
    No I/O and no name lookup: a host that does not resolve is the poller's "unreachable".
    """
    if any(ch.isspace() or ord(ch) < 32 for ch in url):
        return "a URL cannot contain spaces or control characters"
    try:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https") or not url[len(parts.scheme):].startswith("://"):
            return "expected http://HOST:PORT or https://…"
        host = parts.hostname
    except ValueError as e:  # "Invalid IPv6 URL"
        return f"not a valid URL ({e})"
    try:
        port = parts.port
    except ValueError:  # "Port out of range 0-65535", "Port could not be cast to integer value as 'abc'"
        port = 0
    if not host:
        return "no host in it (expected http://HOST:PORT)"
    if port == 0 or (port is None and parts.netloc.endswith(":")):
        return "the port must be a number from 1 to 65535"
    return None
