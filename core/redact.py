"""Secrets never leave the process: the one place that decides what a secret is and how it is hidden.

Recordings are made to be shared, Prometheus labels are read by everyone with Grafana access and MQTT
frames go to every subscriber, so a password, token or key given to gpuscope (or seen in a GPU process's
command line) must never be shown, logged, stored or published. Two ways to make sure:

* **by construction** — an ``--endpoint`` URL is split once, at parse time (:func:`split_endpoint`): the
  public URL (``http://host:8000``, no ``user:password@``, secret-like query values ``<redacted>``) is all
  the rest of the program ever sees; the credentials only reach the HTTP request;
* **at the gates** — what is written as text (the recording header's ``command``, a process's command
  line, a log line, a reading decoded from an older recording or agent) goes through :func:`redact_argv`,
  :func:`redact_command`, :func:`redact_text` or :func:`public_url`.

Pure functions, no I/O. What counts as secret-like: :func:`secret_name` (README, *Security*).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from urllib.parse import unquote

REDACTED = "<redacted>"

# A name is secret-like when one of its words (split at - _ . and case changes) is one of these, or two
# neighbouring words make one of the pairs; a name ending in a path-like word names a file, not a secret
# (--password-file, --tls-key, TOKEN_PATH are fine to record).
_SECRET_WORDS = frozenset({"password", "passwd", "passphrase", "pass", "pw", "secret", "token", "apikey",
                           "auth", "authorization", "credential", "credentials", "cookie", "bearer"})
_SECRET_PAIRS = frozenset({("api", "key"), ("access", "key"), ("secret", "key"), ("private", "key"),
                           ("client", "secret"), ("session", "id")})
_PATH_WORDS = frozenset({"file", "path", "dir", "url", "uri", "env", "var", "type", "kind", "header", "name",
                         "len", "length", "ttl", "expiry", "expires", "endpoint", "method"})
_HEADER_FLAGS = frozenset({"--endpoint-header", "--header", "-H"})  # their value is a whole 'Name: value' header

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_NAME = re.compile(r"-{0,2}[A-Za-z_][A-Za-z0-9_.\-]*")  # a flag's or a variable's name
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/\s?#]*@")  # scheme://user:p@ss@ → scheme:// (to the last @)
_QUERY_ITEM = re.compile(r"([?&;])([^=&#\s?;]+)=([^&#\s;]*)")
_SECRET_HINT = re.compile(r"(?i)pass|pw|secret|token|key|auth|cred|cookie|bearer|session|@")  # a quick first look


def secret_name(name: str) -> bool:
    """True when a flag, variable, header or query parameter called ``name`` holds a secret: ``--api-key``,
    ``HF_TOKEN``, ``Authorization``, ``X-Api-Key``, ``password``; False for ``--password-file``,
    ``--tls-key``, ``--model``."""
    words = [w.lower() for w in _WORD.findall(name.lstrip("-"))]
    if not words or words[-1] in _PATH_WORDS:
        return False
    return any(w in _SECRET_WORDS for w in words) or any(p in _SECRET_PAIRS for p in zip(words, words[1:]))


@dataclass(frozen=True)
class Endpoint:
    """An ``--endpoint`` URL split at parse time: ``url`` is the only form shown, stored or published;
    ``request_url`` (no ``user:password@``) and ``auth`` (Basic auth, from that user info) only reach the
    HTTP request. Neither secret appears in the repr."""

    url: str
    request_url: str = field(repr=False)
    auth: tuple[str, str] | None = field(default=None, repr=False)


def split_endpoint(url: str) -> Endpoint:
    """``http://alice:S3cret@host:8000/m?token=t`` → url ``http://host:8000/m?token=<redacted>``,
    request_url ``http://host:8000/m?token=t``, auth ``("alice", "S3cret")`` (percent-escapes decoded,
    as a browser does). A URL without user info keeps its query in ``request_url`` and has no auth."""
    scheme, sep, rest = url.partition("://") if "://" in url else ("", "", url)  # no scheme: refused later,
    end = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))  # quoted without it
    userinfo, at, host = rest[:end].rpartition("@")  # where urlsplit's netloc ends, and its user info
    if not at:
        return Endpoint(url=redact_text(url), request_url=url)
    user, _, password = userinfo.partition(":")
    request_url = f"{scheme}{sep}{host}{rest[end:]}"
    return Endpoint(url=redact_text(request_url), request_url=request_url, auth=(unquote(user), unquote(password)))


def public_url(url: str) -> str:
    """``url`` as it may be shown, stored and published: no user info, secret-like query values hidden."""
    return redact_text(url) if "@" in url or "=" in url else url


def _query_item(m: re.Match[str]) -> str:
    sep, name, _value = m.groups()
    return f"{sep}{name}={REDACTED}" if secret_name(unquote(name)) else m.group(0)


def redact_text(text: str) -> str:
    """Free text (a log line, an error message) with every URL's ``user:password@`` removed and secret-like
    query values (``?token=…``, ``&api_key=…``) replaced by :data:`REDACTED`."""
    if "@" in text:
        text = _USERINFO.sub(r"\1", text)
    if "=" in text:
        text = _QUERY_ITEM.sub(_query_item, text)
    return text


def redact_header(item: str) -> str:
    """``'X-Api-Key: k'`` → ``'X-Api-Key: <redacted>'``: a header given to gpuscope keeps its name only."""
    name, sep, _value = item.partition(":")
    return f"{name.strip()}: {REDACTED}" if sep else REDACTED


def _assignment(arg: str) -> str | None:
    """``HF_TOKEN=x`` / ``--api-key=x`` with a secret-like name → its value redacted; None otherwise."""
    name, sep, _value = arg.partition("=")
    if sep and _NAME.fullmatch(name) and secret_name(name):
        return f"{name}={REDACTED}"
    return None


def _header_arg(arg: str) -> str | None:
    """``'Authorization: Bearer x'`` standing alone with a secret-like header name → redacted; else None."""
    name, sep, _value = arg.partition(":")
    if sep and name and not name.startswith("-") and " " not in name.strip() and "/" not in name \
            and secret_name(name.strip()):
        return redact_header(arg)
    return None


def redact_argv(argv: Sequence[str]) -> list[str]:
    """A command line as it may be recorded: the value after ``--endpoint-header``/``--header``/``-H`` (a
    ``Name: value`` header) and after any secret-like flag (``--api-key K``, ``--token=T``) is
    :data:`REDACTED`, as is a secret-like ``NAME=value`` or ``Authorization: …`` argument; URLs lose their
    ``user:password@``. Flags naming files (``--password-file``, ``--tls-key``) are kept, as is a value that
    is itself a ``--flag``. A header split over several arguments (``Authorization:`` ``Bearer`` ``x``, as
    a command line joined by spaces gives it) is hidden up to the next ``-flag``."""
    out: list[str] = []
    hide_next: str | None = None  # "header" or "value": what the previous flag said the next argument is
    hiding_rest = False  # after a bare 'Name:' header: its value's words, up to the next -flag
    for arg in argv:
        if hiding_rest and not arg.startswith("-"):
            continue
        hiding_rest = False
        if hide_next == "value" and not arg.startswith("--"):
            out.append(REDACTED)
            hide_next = None
            continue
        if hide_next == "header" and ":" in arg and not arg.startswith("-"):
            out.append(redact_header(arg))
            hiding_rest = arg.rstrip().endswith(":")
            hide_next = None
            continue
        hide_next = None
        flag, eq, value = arg.partition("=")
        if arg.startswith("-") and flag in _HEADER_FLAGS:
            out.append(f"{flag}={redact_header(value)}" if eq else arg)
            hide_next = None if eq else "header"
        elif arg.startswith("-") and secret_name(flag):
            out.append(f"{flag}={REDACTED}" if eq else arg)
            hide_next = None if eq else "value"
        elif (header := _header_arg(arg)) is not None:
            out.append(header)
            hiding_rest = arg.rstrip().endswith(":")
        elif " " in arg:  # a whole command line in one argument (`sh -c 'vllm serve … --api-key K'`)
            out.append(redact_command(arg))
        else:
            out.append(_assignment(arg) or public_url(arg))
    return out


@lru_cache(maxsize=4096)
def redact_command(line: str) -> str:
    """One command line as text (a GPU process's ``/proc/PID/cmdline`` joined by spaces) with
    :func:`redact_argv`'s rules; unchanged when nothing in it looks secret. Cached: the same few command
    lines come in every frame of a recording (20–45 µs each uncached, 0.1 µs from the cache)."""
    if not _SECRET_HINT.search(line):
        return line
    return " ".join(redact_argv(line.split(" ")))
