"""Secrets never leave the process: the one place that decides what a secret is and how it is hidden.

Recordings are made to be shared, Prometheus labels are read by everyone with Grafana access and MQTT
frames go to every subscriber, so a password, token or key given to gpuscope (or seen in a GPU process's
command line) must never be shown, logged, stored or published. Two ways to make sure:

* **by construction** — an ``--endpoint`` URL is split once, at parse time (:func:`split_endpoint`): the
  public URL (``http://host:8000``, no ``user:password@``, secret-like query values ``<redacted>``) is all
  the rest of the program ever sees; the credentials only reach the HTTP request;
* **at the gates** — what is written as text (the recording header's ``command``, the ``start:`` marker of
  ``record -- CMD``, a process's command line, a log line, a reading decoded from an older recording or
  agent) goes through :func:`redact_argv`, :func:`redact_command`, :func:`redact_text` or :func:`public_url`.

What counts as secret goes by **name** and by **shape**, both declared as tables below and applied by one
small loop each:

* the name rule (:func:`name_rule`): a flag, variable, header or query key whose words say secret
  (``--api-key``, ``HF_TOKEN``, ``X-Amz-Signature``, ``?code=``) has its value hidden; for the words that
  also name harmless things (``--max-tokens 512``, ``-p 8000``, ``--ssh-key ~/.ssh/id``) only a value that
  is not plainly harmless (a number, a path, ``true``: :func:`plain`) is hidden;
* the shape rule (:func:`redact_shapes`): a value that looks like a key (``sk-…``, ``hf_…``, ``ghp_…``,
  ``AKIA…``, a JWT, a long random string) is hidden wherever it stands, under any flag or none;
* a URL's ``user:password@`` goes, whatever the password holds (spaces and ``@`` included).

Pure functions, no I/O.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from urllib.parse import unquote

REDACTED = "<redacted>"

ALWAYS = "always"  # the value is hidden, whatever it is
UNLESS_PLAIN = "unless plain"  # hidden unless it is plainly no secret (plain(): a number, a path, true …)
_STRENGTH = {None: 0, UNLESS_PLAIN: 1, ALWAYS: 2}

# ----------------------------------------------------------------------------------------- the name rule
# A name is split into words (at - _ . and case changes: X-Amz-Signature, apiKey, AZURE_OPENAI_KEY); each
# word, or a pair of neighbouring words, found here says how its value is hidden; the strongest wins.
_WORDS: dict[str, str] = {
    **dict.fromkeys(("password", "passwd", "passphrase", "passcode", "pass", "pw", "secret", "secrets", "token",
                     "apikey", "pat", "jwt", "sig", "signature", "credential", "credentials", "creds", "auth",
                     "authorization", "cookie", "cookies", "bearer", "session", "hmac", "otp",
                     "username"), ALWAYS),  # a login's user name: no secret alone, but half a credential
    # words that also name harmless things: --max-tokens 512, PWD=/home/x, --ssh-key ~/.ssh/id, --private
    **dict.fromkeys(("tokens", "key", "keys", "pwd", "private"), UNLESS_PLAIN),
}
_QUERY_WORDS: dict[str, str] = {"code": ALWAYS}  # ?code= (an OAuth code) in a URL only: --trust-remote-code is a switch
_PAIRS: dict[tuple[str, str], str | None] = {
    **dict.fromkeys((("api", "key"), ("access", "key"), ("secret", "key"), ("private", "key"),
                     ("encryption", "key"), ("license", "key"), ("master", "key"), ("signing", "key"),
                     ("hmac", "key"), ("session", "id"), ("client", "secret"),
                     ("endpoint", "user")), ALWAYS),  # --endpoint-user: Basic auth's user name (half of it)
    # a key that is no secret: a certificate's key file, a sort or cache key, a public key
    **dict.fromkeys((("tls", "key"), ("ssl", "key"), ("public", "key"), ("sort", "key"), ("cache", "key"),
                     ("primary", "key"), ("partition", "key")), None),
}
# A name whose last word is one of these names a file, a size, a kind … of the secret, not the secret
# (--password-file, TOKEN_PATH, --auth-type, --long-prefill-token-threshold, --password-stdin).
_DESCRIPTORS = frozenset({"file", "files", "path", "paths", "dir", "url", "uri", "env", "var", "type", "kind",
                          "header", "name", "len", "length", "ttl", "expiry", "expires", "endpoint", "method",
                          "threshold", "limit", "size", "count", "timeout", "budget", "ids", "mode", "format",
                          "dtype", "parser", "algorithm", "column", "field", "stdin"})
_FLAGS: dict[str, str] = {"-p": UNLESS_PLAIN}  # short flags: sshpass/mysql -p PASSWORD (but -p 8000:8000)
# Flags whose value has a form of its own: a whole 'Name: value' header, or curl's -u user:password.
_HEADER_FLAGS = frozenset({"--endpoint-header", "--header", "-H"})
_USER_FLAGS = frozenset({"-u", "--user", "--proxy-user", "-U"})

# Values plainly no secret, for UNLESS_PLAIN names: numbers and sizes, ports and port maps, switches, paths,
# file names, a flag standing where a value would.
_PLAIN = re.compile(r"""(?ix)
    [+-]?[0-9][0-9_,]*(\.[0-9]+)?(e[+-]?[0-9]+)?([kmgtp]i?b?|b)?%?     # 512, 0.9, 1e-4, 16GiB, 90%
  | ([0-9]{1,3}\.){3}[0-9]{1,3}(:[0-9]+)*(/(tcp|udp|sctp))?           # 127.0.0.1:8000:8000
  | [0-9]+(:[0-9]+)+(/(tcp|udp|sctp))?                                # 8000:8000/tcp
  | true|false|yes|no|on|off|none|null|auto|default
  | (~|\.{1,2})?/.*                                                   # /etc/x, ./x, ~/.ssh/id_ed25519
  | [\w.~-]+\.(pem|key|crt|cer|der|p12|pfx|pub|json|ya?ml|toml|txt|env|cfg|conf|ini|gpg|asc|jks)
  | -.*                                                                # a flag, not a value
  | """)

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_NAME = re.compile(r"-{0,2}[A-Za-z_][A-Za-z0-9_.\-]*")  # a flag's or a variable's name
_HEADER_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_\-]*")


def name_rule(name: str, *, query: bool = False) -> str | None:
    """How the value under a flag, variable, header or (``query=True``) URL query key called ``name`` is
    hidden: :data:`ALWAYS` (``--api-key``, ``HF_TOKEN``, ``X-Amz-Signature``), :data:`UNLESS_PLAIN`
    (``--max-tokens``, ``--ssh-key``, ``-p``) or None (``--model``, ``--password-file``, ``--tls-key``)."""
    if name in _FLAGS:
        return _FLAGS[name]
    words = [w.lower() for w in _WORD.findall(name)]
    if not words or words[-1] in _DESCRIPTORS:
        return None
    best: str | None = None
    for before, w in zip(["", *words], words):
        if (before, w) in _PAIRS:
            rule = _PAIRS[before, w]
        else:
            rule = _WORDS.get(w) or (_QUERY_WORDS.get(w) if query else None)
        if _STRENGTH[rule] > _STRENGTH[best]:
            best = rule
    return best


def secret_name(name: str) -> bool:
    """True when the name alone says its value may be secret (:func:`name_rule` is not None)."""
    return name_rule(name) is not None


def plain(value: str) -> bool:
    """True when ``value`` is plainly no secret: a number or size, a port map, a switch word, a path or a
    file name, a flag, nothing; a shell's ``;`` ``&`` ``|`` after it aside (``--max-tokens 512;``)."""
    return _PLAIN.fullmatch(value.strip().rstrip(";&|")) is not None


def hides(rule: str | None, value: str) -> bool:
    """True when a value under a name of ``rule`` (:func:`name_rule`) is to be hidden."""
    return rule == ALWAYS or (rule == UNLESS_PLAIN and not plain(value))


# ---------------------------------------------------------------------------------------- the shape rule
# Values that are keys by their look, wherever they stand (not preceded by a letter, digit, _ or -).
_SHAPES = (
    r"sk-(?:proj-|ant-|svcacct-|admin-)?[A-Za-z0-9][A-Za-z0-9_\-]{7,}",  # OpenAI, Anthropic
    r"[sr]k_(?:live|test)_[A-Za-z0-9]{10,}",  # Stripe
    r"hf_[A-Za-z0-9]{16,}",  # Hugging Face
    r"gh[pousr]_[A-Za-z0-9]{16,}", r"github_pat_[A-Za-z0-9_]{16,}", r"glpat-[A-Za-z0-9_\-]{16,}",  # GitHub, GitLab
    r"xox[abeoprs]-[A-Za-z0-9\-]{10,}",  # Slack
    r"(?:AKIA|ASIA)[0-9A-Z]{16}",  # AWS access key id
    r"AIza[0-9A-Za-z_\-]{30,}",  # Google
    r"npm_[A-Za-z0-9]{30,}", r"pypi-[A-Za-z0-9_\-]{30,}",
    r"eyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]*",  # a JWT: header.payload.signature
    r"-----BEGIN[A-Z ]*PRIVATE KEY-----(?:[^-]|-(?!----END))*(?:-----END[A-Z ]*PRIVATE KEY-----)?",
)
_SHAPE = re.compile(r"(?<![A-Za-z0-9_\-])(?:" + "|".join(_SHAPES) + ")")
# A long random string (an unprefixed key, base64) by its look: 20+ characters with a run of 16 between
# separators, upper and lower case and digits (two under 32 characters), the kind of character changing
# often and high entropy. Model names (Meta-Llama-3.1-70B-Instruct), CamelCase class names, paths and hex
# digests (a git revision) are kept; a random string that does not look so is missed (about 1 in 10 of
# 16-byte ones): the name and prefix rules are the main ones, this is the net under them.
_RANDOM_CANDIDATE = re.compile(r"(?<![A-Za-z0-9+/_\-])[A-Za-z0-9+/_\-]{20,}")
_SEPARATORS = re.compile(r"[-_/]")


def _kind(c: str) -> int:
    return 0 if c.isdigit() else 1 if c.isupper() else 2 if c.islower() else 3


def looks_random(s: str) -> bool:
    """True when ``s`` looks like a random key (see :data:`_RANDOM_CANDIDATE`)."""
    n = len(s)
    if n < 20 or max(len(p) for p in _SEPARATORS.split(s)) < 16:
        return False
    kinds = [_kind(c) for c in s]
    if not {0, 1, 2} <= set(kinds) or (n < 32 and kinds.count(0) < 2):
        return False
    if sum(a != b for a, b in zip(kinds, kinds[1:])) < 0.4 * (n - 1):
        return False
    bits = -sum(k / n * math.log2(k / n) for k in (s.count(c) for c in set(s)))
    return bits >= min(4.0, math.log2(n) - 0.6)


def _random(m: re.Match[str]) -> str:
    return REDACTED if looks_random(m.group(0)) else m.group(0)


def redact_shapes(text: str) -> str:
    """``text`` with every key-shaped string (:data:`_SHAPES`, :func:`looks_random`) replaced by
    :data:`REDACTED`."""
    text = _SHAPE.sub(REDACTED, text)
    return _RANDOM_CANDIDATE.sub(_random, text) if len(text) >= 20 else text


# -------------------------------------------------------------------------------------------------- URLs
_SCHEME = r"\b([A-Za-z][A-Za-z0-9+.\-]*://)"
# user info, in this order: quoted, to the last @ before the quote; unquoted with spaces in the password (a
# command line joined by spaces) after user: and up to a -flag; else to the last @ before / ? # or a space.
_USERINFO = (re.compile(r"(?<=['\"])" + _SCHEME + r"[^'\"/?#\n]*@"),
             re.compile(_SCHEME + r"[^\s/?#@'\"]*:(?:[^\s/?#'\"]|[ \t](?!-))*@(?=[A-Za-z0-9\[])"),
             re.compile(_SCHEME + r"[^/\s?#]*@"))
_USERINFO_WHOLE = re.compile(r"^" + _SCHEME + r"[^/?#]*@")  # one argument that is a URL: all of it is one unit
_QUERY_ITEM = re.compile(r"([?&;])([^=&#\s?;'\"]+)=([^&#\s;'\"]*)")


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


@lru_cache(maxsize=1024)
def public_url(url: str) -> str:
    """``url`` as it may be shown, stored and published: no user info (whatever it holds), secret-like query
    values and key-shaped strings hidden."""
    return redact_text(_USERINFO_WHOLE.sub(r"\1", url))


def _strip_userinfo(text: str) -> str:
    if "@" in text:
        for userinfo in _USERINFO:
            text = userinfo.sub(r"\1", text)
    return text


def _query_item(m: re.Match[str]) -> str:
    sep, name, value = m.groups()
    return f"{sep}{name}={REDACTED}" if hides(name_rule(unquote(name), query=True), unquote(value)) else m.group(0)


def redact_text(text: str) -> str:
    """Free text (a log line, an error message) with every URL's ``user:password@`` removed (quoted, or
    with spaces in the password after ``user:``), secret-like query values (``?token=…``, ``&sig=…``) and
    key-shaped strings (``sk-…``, a JWT) replaced by :data:`REDACTED`."""
    text = _strip_userinfo(text)
    if "=" in text:
        text = _QUERY_ITEM.sub(_query_item, text)
    return redact_shapes(text)


# ------------------------------------------------------------------------------------------ command lines
def redact_header(item: str) -> str:
    """``'X-Api-Key: k'`` → ``'X-Api-Key: <redacted>'``: a header given to gpuscope keeps its name only."""
    name, sep, _value = item.partition(":")
    return f"{name.strip()}: {REDACTED}" if sep else REDACTED


def _userpass(item: str) -> str:
    """``bob:pw`` (curl's ``-u``) → ``bob:<redacted>``; ``1000:1000`` (a uid:gid) and ``bob`` as they are."""
    user, sep, password = item.partition(":")
    return f"{user}:{REDACTED}" if sep and not plain(password) else redact_text(item)


def _header_arg(arg: str) -> str | None:
    """``'Authorization: Bearer x'`` standing alone with a secret-like header name → redacted; else None."""
    name, sep, value = arg.partition(":")
    name = name.strip().strip("'\"")
    if sep and _HEADER_NAME.fullmatch(name) and hides(name_rule(name), value.strip().strip("'\"") or "x"):
        return redact_header(arg)
    return None


def _flag_kind(flag: str) -> str | None:
    """What the value after ``flag`` is: "header", "user", or a :func:`name_rule` (None: nothing secret)."""
    words = _WORD.findall(flag)
    if flag in _HEADER_FLAGS or (flag.startswith("--") and words and words[-1].lower() in ("header", "headers")):
        return "header"
    if flag in _USER_FLAGS:
        return "user"
    return name_rule(flag)


def _hidden_value(kind: str | None, value: str) -> str | None:
    """The value after a flag of ``kind`` (:func:`_flag_kind`) as it may be recorded; None: no rule for it."""
    if kind == "header":
        return redact_header(value) if ":" in value else None
    if kind == "user":
        return _userpass(value)
    return REDACTED if hides(kind, value) else None


def _redact_arg(arg: str, scripts: bool) -> tuple[str, str | None]:
    """One argument (never split: it is one unit whatever it holds) as it may be recorded, and what the next
    argument is when this one is a flag whose value follows it (``--api-key``, ``--token=`` then a space).
    With ``scripts``, an argument with spaces or quotes is a shell script (``sh -c '…'``), redacted as one."""
    name, eq, value = arg.partition("=")
    if eq and _NAME.fullmatch(name):  # --flag=value or NAME=value
        kind = _flag_kind(name) if name.startswith("-") else name_rule(name)
        if not value:
            return arg, kind  # --token= X: the value is the next argument
        hidden = _hidden_value(kind, value)
        return f"{name}={hidden if hidden is not None else _redact_arg(value, scripts)[0]}", None
    if (header := _header_arg(arg)) is not None:
        return header, None
    if _USERINFO_WHOLE.match(arg):  # a URL: a space in its password stays in it
        return public_url(arg), None
    if scripts and any(c in " \t\r\n'\"\\" for c in arg):  # what a shell splits at or unquotes
        return redact_command(arg), None
    return redact_text(arg), _flag_kind(arg) if arg.startswith("-") else None


def redact_argv(argv: Sequence[str]) -> list[str]:
    """A command line as it may be recorded, each argument taken whole (never split at its spaces): the
    value after a secret-like flag (``--api-key K``, ``--token=T``, ``--token= T``, :func:`name_rule`), after
    ``--endpoint-header``/``--header``/``-H`` (a ``Name: value`` header: the value) and curl's ``-u user:pw``
    (the password) is :data:`REDACTED`, as is a secret-like ``NAME=value`` or ``Authorization: …``
    argument and any key-shaped string (:func:`redact_shapes`); URLs lose their ``user:password@`` and
    secret-like query values. Flags naming files (``--password-file``, ``--tls-key``) are kept, as is a
    value that is itself a ``--flag``. A header split over several arguments (``Authorization:`` ``Bearer``
    ``x``, as a command line joined by spaces gives it) is hidden up to the next ``-flag``."""
    return _redact_argv(argv, scripts=True)


def _redact_argv(argv: Sequence[str], scripts: bool) -> list[str]:
    out: list[str] = []
    kind: str | None = None  # what the previous flag said this argument is (_flag_kind)
    hiding_rest = False  # after a bare 'Name:' header: its value's words, up to the next -flag
    for arg in argv:
        if hiding_rest and not arg.startswith("-"):
            hiding_rest = arg != REDACTED  # a value hidden already (a line redacted before) is all of it
            continue
        redacted: str | None = None
        if kind is not None and not arg.startswith("--") and (kind == ALWAYS or not arg.startswith("-")):
            redacted = _hidden_value(kind, arg)  # the flag's value (a -x after --api-key is hidden too)
            kind = None
        if redacted is None:
            redacted, kind = _redact_arg(arg, scripts)
        hiding_rest = arg.rstrip().endswith(":") and (redacted.endswith(f": {REDACTED}") or (
            redacted == REDACTED and _header_arg(arg) is not None))  # a secret header's name, its value next
        out.append(redacted)
    return out


def _shell_words(line: str) -> tuple[list[str], bool]:
    """``line`` split as a shell would (quotes honoured) when it parses so, else at its spaces; and which."""
    try:
        return shlex.split(line), True
    except ValueError:  # an unbalanced quote: a command line joined by spaces, not a shell's
        return line.split(), False


def _quoted(word: str) -> str:
    """A word of a redacted line, quoted for the shell where it needs it; one with :data:`REDACTED` in it as
    it is (for a person to read: ``Authorization: <redacted>``)."""
    if REDACTED in word or (word and not any(c.isspace() or c in "'\"\\" for c in word)):
        return word
    return shlex.quote(word)


@lru_cache(maxsize=4096)
def redact_command(line: str) -> str:
    """One command line as text (a GPU process's ``/proc/PID/cmdline`` joined by spaces, a ``sh -c`` script)
    with :func:`redact_argv`'s rules, its words taken as a shell would (quotes honoured) and a URL's user
    info removed even with spaces in the password; unchanged when nothing in it looks secret. Cached: the
    same few command lines come in every frame of a recording."""
    text = _strip_userinfo(line)
    words, shell = _shell_words(text)
    # a word a shell's quotes made may hold a script, one level down (each level shorter: it ends)
    out = _redact_argv(words, scripts=shell and words != [text])
    if out == words:
        return text
    return " ".join(_quoted(w) for w in out) if shell else " ".join(out)
