"""Checking the ``--endpoint`` flags before any poller starts: one clear line, never a traceback, never a secret.

httpx rejects some URLs only when the first request is built (``http://h:99999`` killed the
poller thread with an ``ExceptionGroup`` while recording went on and exited 0; ``http://[::1``
was an internal error; ``http://`` polled forever as "unreachable (missing protocol)"). An error quotes a
URL as :func:`shown_in_error` gives it: a password with ``#``, ``?`` or ``/`` in it breaks URL parsing, so
what a parser calls user info is no guide to where the secret is.

Basic auth: from the URL (``http://user:password@host``, visible in the process list), or a user name (URL
or ``--endpoint-user``) with the password from ``--endpoint-password-file`` or ``GPUSCOPE_ENDPOINT_PASSWORD``
(:func:`with_basic_auth`). Nothing given twice silently wins: a clash is refused.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from urllib.parse import urlsplit

from gpuscope.core.redact import Endpoint
from gpuscope.core.text import clean

PASSWORD_VAR = "GPUSCOPE_ENDPOINT_PASSWORD"
PASSWORD_FILE_FLAG = "--endpoint-password-file"
USER_FLAG = "--endpoint-user"
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]{0,15}://")
ESCAPES_HINT = "a '/', '?', '#' or '@' in a user name or password must be written %2F, %3F, %23, %40"


def shown_in_error(url: str) -> str:
    """``url`` as an error message may quote it: everything up to its last ``@`` is ``…`` and the query and
    fragment are ``?…`` (``http://eve:#S3c@h:8000/m?t=x`` → ``http://…@h:8000/m?…``), control characters
    escaped, at most 80 characters. Never a password, however broken the URL."""
    m = _SCHEME.match(url)
    scheme, rest = (m.group(0), url[m.end():]) if m else ("", url)
    if "@" in url:
        rest = "…@" + url.rsplit("@", 1)[1]
    cut = min((i for i in (rest.find("?"), rest.find("#")) if i >= 0), default=-1)
    if cut >= 0:
        rest = rest[:cut] + "?…"
    return clean(scheme + rest, 80)


def endpoint_url_problem(url: str) -> str | None:
    """Why ``url`` cannot be an ``--endpoint``, in words (never quoting it), or None when it can.

    Accepted: ``http://`` or ``https://`` (any case), optional ``user:password@``, a host, an optional port
    1–65535, any path and query. Refused besides: a fragment (``#``: never sent, and in user info it hides
    the host) and an ``@`` in the path (user info with a ``/`` in it). No I/O and no name lookup: a host that
    does not resolve is the poller's "unreachable".
    """
    if any(ch.isspace() or ord(ch) < 32 for ch in url):
        return "a URL cannot contain spaces or control characters"
    try:
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https") or not url[len(parts.scheme):].startswith("://"):
            return "expected http://HOST:PORT or https://…"
        host = parts.hostname
    except ValueError:  # "Invalid IPv6 URL"
        return "not a valid URL (an unclosed '[' of an IPv6 address?)"
    hint = f" ({ESCAPES_HINT})" if "@" in url[len(parts.scheme) + 3 + len(parts.netloc):] else ""
    if "#" in url:
        return f"a URL to poll has no '#' part ({ESCAPES_HINT})"
    if "@" in parts.path:
        return "an '@' after the host" + hint
    try:
        port = parts.port
    except ValueError:  # "Port out of range 0-65535", "Port could not be cast to integer value as 'abc'"
        port = 0
    if not host:
        return "no host in it (expected http://HOST:PORT)" + hint
    if port == 0 or (port is None and parts.netloc.endswith(":")):
        return "the port must be a number from 1 to 65535" + hint
    return None


def read_password_file(path: str) -> str:
    """The password in ``path`` (``--endpoint-password-file``): surrounding whitespace dropped (a file-made
    Kubernetes Secret ends in a newline); a ValueError naming the file, never its content, when it cannot
    be read or holds nothing."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read(65536)
    except OSError as e:
        raise ValueError(f"{PASSWORD_FILE_FLAG} {clean(path, 200)}: {e.strerror or type(e).__name__}") from None
    except UnicodeDecodeError:
        raise ValueError(f"{PASSWORD_FILE_FLAG} {clean(path, 200)}: not UTF-8 text") from None
    password = text.strip()
    if not password:
        raise ValueError(f"{PASSWORD_FILE_FLAG} {clean(path, 200)} holds no password")
    return password


@dataclass(frozen=True)
class BasicAuth:
    """The Basic auth of every ``--endpoint``: ``targets`` with their ``auth`` set, ``source`` (where it
    came from, for a clash with an Authorization header: None without Basic auth) and ``notes`` (one line
    each, for stderr: the URLs whose credentials every local user can read in the process list)."""

    targets: tuple[Endpoint, ...]
    source: str | None
    notes: tuple[str, ...]


def with_basic_auth(targets: Sequence[Endpoint], user: str | None, password_file: str | None,
                    env: Mapping[str, str]) -> BasicAuth:
    """Each endpoint's Basic auth from its URL, or from ``user`` (``--endpoint-user``, else the URL's user
    name) and the password of ``password_file`` or ``GPUSCOPE_ENDPOINT_PASSWORD`` (which applies to every
    endpoint). A ValueError, one line without any secret, for a password or user name given twice (the URL
    and a flag or the environment, the file and the environment), a password without a user name, or a
    user name with ``:`` or a control character in it."""
    _check_user(user)
    pw_from, password = _flag_password(password_file, env)
    out: list[Endpoint] = []
    sources: set[str] = set()
    notes: list[str] = []
    for t in targets:
        if t.auth is not None:
            notes.append(_process_list_note(t.url, "password" if t.auth[1] else "user name"))
        target, source = _authed(t, user, password, pw_from)
        out.append(target)
        if source is not None:
            sources.add(source)
    return BasicAuth(targets=tuple(out), source=", ".join(sorted(sources)) or None, notes=tuple(notes))


def _authed(t: Endpoint, user: str | None, password: str | None, pw_from: str | None) -> tuple[Endpoint, str | None]:
    """(``t`` with its Basic auth, where that came from: None without auth)."""
    url_user, url_password = t.auth or ("", "")
    _refuse_twice(t.url, url_user, url_password, user, pw_from)
    if t.auth is None and user is None and pw_from is None:
        return t, None
    from_url = bool(url_password) or (pw_from is None and user is None)
    source = "the --endpoint URL" if from_url else pw_from or USER_FLAG
    return replace(t, auth=(url_user or user or "", url_password or password or "")), source


def _check_user(user: str | None) -> None:
    """Refuse an ``--endpoint-user`` that is empty or holds ``:`` or a control character."""
    if user is not None and (":" in user or not user or any(ord(c) < 32 or ord(c) == 127 for c in user)):
        raise ValueError(f"{USER_FLAG}: a user name cannot be empty or hold ':' or control characters")


def _flag_password(password_file: str | None, env: Mapping[str, str]) -> tuple[str | None, str | None]:
    """(where it came from, the password) of ``--endpoint-password-file`` or ``GPUSCOPE_ENDPOINT_PASSWORD``;
    (None, None) without either. Both at once, or the variable holding only spaces, is refused."""
    if password_file is not None and env.get(PASSWORD_VAR):
        raise ValueError(f"the endpoint password given twice ({PASSWORD_FILE_FLAG} and {PASSWORD_VAR}): give it once")
    if password_file is not None:
        return PASSWORD_FILE_FLAG, read_password_file(password_file)
    if not env.get(PASSWORD_VAR):
        return None, None
    password = env[PASSWORD_VAR].strip()
    if not password:
        raise ValueError(f"{PASSWORD_VAR} is set but holds no password")
    return PASSWORD_VAR, password


def _process_list_note(url: str, what: str) -> str:
    """The note for a URL with a user name or password (``what``) in it."""
    return (f"the {what} in --endpoint {url} can be read by every local user in the process list "
            f"(ps): give it with {USER_FLAG} and {PASSWORD_FILE_FLAG} FILE or {PASSWORD_VAR} instead; "
            "gpuscope never logs, records or publishes it")


def _refuse_twice(url: str, url_user: str, url_password: str, user: str | None, pw_from: str | None) -> None:
    """Refuse a password or user name that both the URL and a flag (or the environment) give, and a password
    from a flag with no user name anywhere."""
    if url_password and pw_from is not None:
        raise ValueError(f"--endpoint {url} has a password in it and {pw_from} gives one: give it once")
    if url_user and user is not None:
        raise ValueError(f"--endpoint {url} has a user name in it and {USER_FLAG} gives one: give it once")
    if pw_from is not None and not (url_user or user):
        raise ValueError(f"{pw_from} needs a user name: {USER_FLAG} NAME, or http://NAME@HOST in --endpoint {url}")


def duplicate_problem(originals: Sequence[Endpoint]) -> str | None:
    """The error for two ``--endpoint`` URLs that are one endpoint once their credentials are hidden (their
    readings and Prometheus series would be one), or None. Names the public URL only."""
    seen: dict[str, Endpoint] = {}
    for t in originals:
        old = seen.get(t.url)
        if old is not None:
            why = "" if (old.request_url, old.auth) == (t.request_url, t.auth) else " (they differ only in credentials)"
            return f"--endpoint given twice for {t.url}{why}"
        seen[t.url] = t
    return None
