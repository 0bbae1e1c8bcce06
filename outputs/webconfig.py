"""``--web-config FILE``: TLS, client certificates and basic auth for the Prometheus exporter.

The file is the Prometheus exporter-toolkit's web configuration (its docs/web-configuration.md), the one
node_exporter and dcgm-exporter read with ``--web.config.file``, so a site's existing file works here:

* ``tls_server_config``: ``cert_file``/``key_file`` (HTTPS), ``client_ca_file`` or an inline ``client_ca``
  with ``client_auth_type`` (``NoClientCert``, ``VerifyClientCertIfGiven``, ``RequireAndVerifyClientCert``),
  ``client_allowed_sans``, ``min_version``/``max_version`` and ``prefer_server_cipher_suites``;
* ``http_server_config``: ``headers`` (the five the toolkit allows) and ``http2`` (accepted; gpuscope
  speaks HTTP/1.1, as the toolkit does without TLS);
* ``basic_auth_users``: user → bcrypt hash.

Like the toolkit (which reads it with Go's strict YAML decoder), an unknown key, a duplicated key or a
value of the wrong type refuses the file. Keys the toolkit knows that gpuscope cannot honour with
Python's ``ssl`` (inline ``cert``/``key``, Go's ``cipher_suites`` and ``curve_preferences`` names,
``RequestClientCert``/``RequireAnyClientCert``, which accept a certificate nobody verified, and
``rate_limit``) are refused too, by name: ignoring a security setting silently would be worse. Relative
file names are relative to the config file's folder, as in the toolkit. The file is read once at start-up
(the toolkit re-reads it per request); a bad file is one :class:`WebConfigError` line naming the file and
the problem.

PyYAML and bcrypt are imported only here, only when ``--web-config`` is given (the ``web`` extra).
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import os
import re
import ssl
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuscope.core.errors import GpuscopeError
from gpuscope.core.text import clean
from gpuscope.sources.files import not_a_regular_file, read_error


class WebConfigError(GpuscopeError):
    """A ``--web-config`` file that cannot be used; the message names the file and the problem."""


MAX_FILE = 1 << 20  # a web config, a certificate or a key is a few KB: anything larger is refused whole

TLS_VERSIONS = {"TLS10": ssl.TLSVersion.TLSv1, "TLS11": ssl.TLSVersion.TLSv1_1,
                "TLS12": ssl.TLSVersion.TLSv1_2, "TLS13": ssl.TLSVersion.TLSv1_3}
CLIENT_AUTH = {"NoClientCert": ssl.CERT_NONE, "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
               "RequireAndVerifyClientCert": ssl.CERT_REQUIRED}
# The toolkit's allowed response headers, with the values it accepts (None: any).
HEADERS: dict[str, frozenset[str] | None] = {
    "Content-Security-Policy": None, "X-Frame-Options": frozenset({"deny", "sameorigin"}),
    "X-Content-Type-Options": frozenset({"nosniff"}), "X-XSS-Protection": None, "Strict-Transport-Security": None}

TOP_KEYS = frozenset({"tls_server_config", "http_server_config", "basic_auth_users", "rate_limit"})
TLS_KEYS = frozenset({"cert", "key", "client_ca", "cert_file", "key_file", "client_auth_type", "client_ca_file",
                      "client_allowed_sans", "min_version", "max_version", "cipher_suites",
                      "prefer_server_cipher_suites", "curve_preferences"})
HTTP_KEYS = frozenset({"http2", "headers"})
# Known to the toolkit, not honoured here: why, in the user's words.
UNSUPPORTED = {
    "rate_limit": "not supported by gpuscope (the exporter bounds concurrent connections instead)",
    "tls_server_config.cert": "inline certificates are not supported: use cert_file",
    "tls_server_config.key": "inline keys are not supported: use key_file",
    "tls_server_config.cipher_suites": "Go cipher-suite names are not supported: remove it (OpenSSL's "
                                       "defaults apply)",
    "tls_server_config.curve_preferences": "Go curve names are not supported: remove it (OpenSSL's defaults "
                                           "apply)",
}
# $2a$/$2b$/$2y$ (and the old $2$/$2x$), a two-digit cost, 22 characters of salt and 31 of hash
BCRYPT_HASH = re.compile(r"\$2[abxy]?\$(0[4-9]|[12]\d|3[01])\$[./A-Za-z0-9]{53}")


@dataclass(frozen=True)
class WebSpec:
    """What a web-config file asks for, checked for shape and consistency but not yet read from disk."""

    cert_file: str | None = None
    key_file: str | None = None
    client_ca_file: str | None = None
    client_ca: str | None = None  # inline PEM
    client_auth: str = "NoClientCert"
    allowed_sans: tuple[str, ...] = ()
    min_version: str = "TLS12"
    max_version: str = "TLS13"
    prefer_server_ciphers: bool = True
    headers: tuple[tuple[str, str], ...] = ()
    users: Mapping[str, bytes] = field(default_factory=dict)

    @property
    def tls(self) -> bool:
        return self.cert_file is not None


def _name(key: object) -> str:
    return repr(clean(key, 60))


@functools.cache
def _strict_loader() -> type:
    """A YAML SafeLoader that refuses duplicate keys (Go's strict decoder does; PyYAML keeps the last)."""
    import yaml

    class Loader(yaml.SafeLoader):  # type: ignore[misc]  # PyYAML ships no stubs: SafeLoader is Any
        pass

    def mapping(loader: Any, node: Any, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for k, _v in node.value:
            key = loader.construct_object(k, deep=deep)
            try:
                dup = key in seen
                seen.add(key)
            except TypeError:  # a list or mapping as a key
                raise yaml.constructor.ConstructorError(None, None, "a key must be a string", k.start_mark) from None
            if dup:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {_name(key)}", k.start_mark)
        return dict(loader.construct_pairs(node, deep=deep))

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
    return Loader


def _yaml(text: str) -> Any:
    """The document in ``text``; a YAML error is a one-line :class:`ValueError` with its line and column."""
    import yaml

    try:
        return yaml.load(text, Loader=_strict_loader())  # noqa: S506 (a SafeLoader subclass)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        raise ValueError(f"not valid YAML ({where}{clean(e.problem or e.context or 'syntax error', 80)})") from None
    except yaml.YAMLError as e:
        raise ValueError(f"not valid YAML ({clean(str(e).splitlines()[0] if str(e) else 'syntax error', 80)})") from None
    except RecursionError:
        raise ValueError("not valid YAML (nested too deeply)") from None


def _mapping(v: Any, where: str, keys: frozenset[str] | None) -> dict[str, Any]:
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise ValueError(f"{where}: expected a mapping, got {type(v).__name__}")
    for k in v:
        if not isinstance(k, str):
            raise ValueError(f"{where}: key {_name(k)} is not a string")
        if keys is not None and k not in keys:
            raise ValueError(f"{where}: unknown key {_name(k)}")
    return v


def _str(v: Any, where: str) -> str:
    if not isinstance(v, str) or not v:
        raise ValueError(f"{where}: expected a non-empty string")
    return v


def parse(text: str) -> WebSpec:
    """Check a web-config document; raises :class:`ValueError` with a one-line message (no file name)."""
    doc = _mapping(_yaml(text), "the file", None)
    for k in doc:
        if k not in TOP_KEYS:
            raise ValueError(f"unknown key {_name(k)} (expected tls_server_config, http_server_config, "
                             "basic_auth_users)")
    if doc.get("rate_limit") is not None:
        raise ValueError(f"rate_limit: {UNSUPPORTED['rate_limit']}")
    tls = _mapping(doc.get("tls_server_config"), "tls_server_config", TLS_KEYS)
    http = _mapping(doc.get("http_server_config"), "http_server_config", HTTP_KEYS)
    users_in = _mapping(doc.get("basic_auth_users"), "basic_auth_users", None)
    tls_fields = _tls_fields(tls)
    h2 = http.get("http2", True)
    if not isinstance(h2, bool):
        raise ValueError("http_server_config.http2: expected true or false")
    headers = _headers(_mapping(http.get("headers"), "http_server_config.headers", None))
    return WebSpec(**tls_fields, headers=headers, users=_users(users_in))


def _tls_fields(tls: dict[str, Any]) -> dict[str, Any]:
    """``tls_server_config`` checked, as :class:`WebSpec`'s TLS fields."""
    for k, v in tls.items():
        if v not in (None, "", []) and f"tls_server_config.{k}" in UNSUPPORTED:
            raise ValueError(f"tls_server_config.{k}: {UNSUPPORTED['tls_server_config.' + k]}")
    tls = {k: v for k, v in tls.items() if v is not None}
    cert, key = (_str(tls[k], f"tls_server_config.{k}") if k in tls else None for k in ("cert_file", "key_file"))
    ca_file = _str(tls["client_ca_file"], "tls_server_config.client_ca_file") if "client_ca_file" in tls else None
    ca = _str(tls["client_ca"], "tls_server_config.client_ca") if "client_ca" in tls else None
    auth = _client_auth(tls)
    versions = _tls_versions(tls)
    prefer = tls.get("prefer_server_cipher_suites", True)
    if not isinstance(prefer, bool):
        raise ValueError("tls_server_config.prefer_server_cipher_suites: expected true or false")
    sans = tls.get("client_allowed_sans", [])
    if not isinstance(sans, list) or not all(isinstance(s, str) and s for s in sans):
        raise ValueError("tls_server_config.client_allowed_sans: expected a list of strings")
    if tls and (cert is None or key is None):
        missing = "cert_file" if cert is None else "key_file"
        raise ValueError(f"tls_server_config: {missing} is missing (both cert_file and key_file are needed for TLS)")
    _check_client_ca(auth, ca_file, ca, sans)
    return {"cert_file": cert, "key_file": key, "client_ca_file": ca_file, "client_ca": ca, "client_auth": auth,
            "allowed_sans": tuple(sans), "min_version": versions[0], "max_version": versions[1],
            "prefer_server_ciphers": prefer}


def _client_auth(tls: dict[str, Any]) -> str:
    """``client_auth_type``: one of :data:`CLIENT_AUTH`, never one that takes unverified certificates."""
    auth = tls.get("client_auth_type", "NoClientCert")
    if auth in ("RequestClientCert", "RequireAnyClientCert"):
        raise ValueError(f"tls_server_config.client_auth_type {auth}: accepts certificates nobody verified; use "
                         "RequireAndVerifyClientCert with client_ca_file")
    if not isinstance(auth, str) or auth not in CLIENT_AUTH:
        raise ValueError(f"tls_server_config.client_auth_type {_name(auth)}: expected one of {', '.join(CLIENT_AUTH)}")
    return auth


def _tls_versions(tls: dict[str, Any]) -> list[str]:
    """[min_version, max_version], each one of :data:`TLS_VERSIONS`, the first not above the second."""
    versions = []
    for k, default in (("min_version", "TLS12"), ("max_version", "TLS13")):
        v = tls.get(k, default)
        if not isinstance(v, str) or v not in TLS_VERSIONS:
            raise ValueError(f"tls_server_config.{k} {_name(v)}: expected one of {', '.join(TLS_VERSIONS)}")
        versions.append(v)
    if TLS_VERSIONS[versions[0]] > TLS_VERSIONS[versions[1]]:
        raise ValueError(f"tls_server_config: min_version {versions[0]} is above max_version {versions[1]}")
    return versions


def _check_client_ca(auth: str, ca_file: str | None, ca: str | None, sans: list[str]) -> None:
    """A client CA exactly when client certificates are verified, from one place; SANs only then."""
    if auth != "NoClientCert" and ca_file is None and ca is None:
        raise ValueError(f"tls_server_config: client_auth_type {auth} needs client_ca_file")
    if (ca_file or ca) and auth == "NoClientCert":
        raise ValueError("tls_server_config: a client CA is set but client_auth_type is NoClientCert (set "
                         "RequireAndVerifyClientCert)")
    if ca_file and ca:
        raise ValueError("tls_server_config: client_ca and client_ca_file are both set (use one)")
    if sans and auth != "RequireAndVerifyClientCert":
        raise ValueError("tls_server_config: client_allowed_sans needs client_auth_type RequireAndVerifyClientCert")


def _headers(given: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """``http_server_config.headers``: the allowed ones (:data:`HEADERS`), one-line values; empty ones left out."""
    headers = []
    for name, value in given.items():
        if name not in HEADERS:
            raise ValueError(f"http_server_config.headers: {_name(name)} cannot be set (allowed: {', '.join(HEADERS)})")
        if value is None or value == "":
            continue
        if not isinstance(value, str) or any(c in value for c in "\r\n\0"):
            raise ValueError(f"http_server_config.headers.{name}: expected a one-line string")
        allowed = HEADERS[name]
        if allowed is not None and value.lower() not in allowed:
            raise ValueError(f"http_server_config.headers.{name} {_name(value)}: expected one of "
                             f"{', '.join(sorted(allowed))}")
        headers.append((name, value))
    return tuple(headers)


def _users(users_in: dict[str, Any]) -> dict[str, bytes]:
    """``basic_auth_users``: user → bcrypt hash (bytes); a plain password or a bad user name is refused."""
    users: dict[str, bytes] = {}
    for user, hashed in users_in.items():
        if not isinstance(hashed, str) or not BCRYPT_HASH.fullmatch(hashed):
            raise ValueError(f"basic_auth_users.{clean(user, 60)}: the password is not a bcrypt hash (make one with "
                             "htpasswd -nBC 10 \"\" | tr -d ':\\n')")
        if ":" in user or not user:
            raise ValueError(f"basic_auth_users: user name {_name(user)} is empty or contains ':'")
        users[user] = hashed.encode()
    return users


# ---- from a spec to what the server uses ----

@dataclass(frozen=True)
class WebConfig:
    """A loaded web config: the server's TLS context (None: plain HTTP), basic auth (None: none), the
    client SANs allowed (empty: any verified client) and extra response headers."""

    path: str
    tls: ssl.SSLContext | None
    auth: BasicAuth | None
    allowed_sans: frozenset[str]
    headers: tuple[tuple[str, str], ...]

    def describe(self) -> str:
        """``TLS, client certificates, basic auth`` (what is on), for the agent's start-up line."""
        on = []
        if self.tls is not None:
            on.append("TLS")
            if self.tls.verify_mode != ssl.CERT_NONE:
                on.append("client certificates")
        if self.auth is not None:
            on.append("basic auth")
        return ", ".join(on) or "no TLS, no auth"


def read_capped(path: str, label: str, kind: str) -> bytes:
    """``path``'s bytes, whole or not at all (never a prefix: a cut config could lose its TLS or auth section
    and serve in the open); ValueError ``"LABEL: no such file"`` (is a folder, a named pipe or a device, cannot
    read, larger than :data:`MAX_FILE`: not KIND) otherwise."""
    if (why := not_a_regular_file(path)) is not None:  # a named pipe would block the start forever
        raise ValueError(f"{label}: {why}")
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_FILE + 1)
    except OSError as e:
        raise ValueError(f"{label}: {read_error(e)}") from None
    if len(data) > MAX_FILE:
        raise ValueError(f"{label}: larger than {MAX_FILE >> 20} MiB (not {kind})")
    return data


def _read_pem(path: str, what: str, kind: str) -> str:
    """``path``'s text when it holds a PEM block of ``kind`` (CERTIFICATE, PRIVATE KEY); one line otherwise."""
    shown = repr(clean(path, 200))
    text = read_capped(path, f"{what} {shown}", "a PEM file").decode("ascii", "replace")
    if not re.search(rf"-----BEGIN [A-Z0-9 ]*{kind}-----", text):
        raise ValueError(f"{what} {shown}: not a PEM {kind.lower()} (no '-----BEGIN …{kind}-----' line)")
    return text


def _no_password() -> bytes:
    raise ValueError("is encrypted (gpuscope cannot ask for its passphrase: decrypt it with openssl)")


def tls_context(spec: WebSpec, base: str) -> ssl.SSLContext | None:
    """The server context for ``spec`` (file names relative to ``base``); ValueError with one line."""
    if spec.cert_file is None or spec.key_file is None:
        return None
    cert, key = (os.path.join(base, os.path.expanduser(p)) for p in (spec.cert_file, spec.key_file))
    _read_pem(cert, "tls_server_config.cert_file", "CERTIFICATE")
    _read_pem(key, "tls_server_config.key_file", "PRIVATE KEY")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = TLS_VERSIONS[spec.min_version]
    ctx.maximum_version = TLS_VERSIONS[spec.max_version]
    if spec.prefer_server_ciphers:
        ctx.options |= ssl.OP_CIPHER_SERVER_PREFERENCE
    try:
        ctx.load_cert_chain(cert, key, password=_no_password)
    except ValueError as e:
        raise ValueError(f"tls_server_config.key_file {_name(spec.key_file)}: {e}") from None
    except ssl.SSLError as e:
        reason = ("the key does not match the certificate" if "KEY_VALUES_MISMATCH" in str(e) else
                  "a PEM block is damaged (OpenSSL cannot decode it)" if "PEM lib" in str(e) else
                  f"OpenSSL cannot load them ({clean(e.reason or e, 60)})")
        raise ValueError(f"tls_server_config cert_file {_name(spec.cert_file)}, key_file {_name(spec.key_file)}: "
                         f"{reason}") from None
    ctx.verify_mode = CLIENT_AUTH[spec.client_auth]
    if spec.client_ca_file is not None or spec.client_ca is not None:
        if spec.client_ca_file is not None:
            path = os.path.join(base, os.path.expanduser(spec.client_ca_file))
            ca, what = _read_pem(path, "tls_server_config.client_ca_file", "CERTIFICATE"), "client_ca_file"
        else:
            ca, what = spec.client_ca or "", "client_ca"
            if "-----BEGIN CERTIFICATE-----" not in ca:
                raise ValueError("tls_server_config.client_ca: not a PEM certificate")
        try:
            ctx.load_verify_locations(cadata=ca)
        except (ssl.SSLError, ValueError):
            raise ValueError(f"tls_server_config.{what}: OpenSSL cannot load it (a damaged PEM block?)") from None
    return ctx


def load_web_config(path: str) -> WebConfig:
    """Read, check and load ``path``; raises :class:`WebConfigError` (``--web-config PATH: problem``)."""
    shown = clean(path, 120)
    try:
        raw = read_capped(path, f"--web-config {shown}", "a web config")
    except ValueError as e:
        raise WebConfigError(str(e)) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise WebConfigError(f"--web-config {shown}: not UTF-8 text") from None
    try:
        spec = parse(text)
        ctx = tls_context(spec, os.path.dirname(os.path.abspath(path)))
    except ValueError as e:
        raise WebConfigError(f"--web-config {shown}: {e}") from None
    except ImportError:
        raise WebConfigError(f"--web-config {shown}: reading it needs PyYAML (pip install 'gpuscope-inference[web]')") from None
    auth = None
    if spec.users:
        try:
            auth = BasicAuth(spec.users)
        except ImportError:
            raise WebConfigError(f"--web-config {shown}: basic_auth_users needs the bcrypt package "
                                 "(pip install 'gpuscope-inference[web]')") from None
    return WebConfig(path=path, tls=ctx, auth=auth, allowed_sans=frozenset(spec.allowed_sans), headers=spec.headers)


# ---- basic auth ----

def parse_basic(header: str | None) -> tuple[str, bytes] | None:
    """An ``Authorization: Basic …`` header → (user, password); None for anything else or malformed."""
    if not header:
        return None
    scheme, _, b64 = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        raw = base64.b64decode(b64.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    user, sep, password = raw.partition(b":")
    if not sep:
        return None
    try:
        return user.decode("utf-8"), password
    except UnicodeDecodeError:
        return None


# A bcrypt hash of a random password, checked for unknown users so they take as long as known ones.
_DUMMY = b"$2b$10$bus6fLdt1Jj3zoeRWGQBauzCMZVgpxtzJ4kXea96AdUuCTFq7lITm"


class BasicAuth:
    """Checks ``Authorization`` headers against bcrypt hashes; successful checks are cached (a bcrypt check
    costs tens of ms of CPU by design, a scrape should not), keyed by a SHA-256 of user, hash and password,
    so a changed password never matches an old entry. Failures are never cached (and cost a full check)."""

    CACHE = 64

    def __init__(self, users: Mapping[str, bytes]):
        import bcrypt  # the web extra; ImportError is turned into one line by load_web_config

        self._checkpw = bcrypt.checkpw
        self.users = dict(users)
        self._ok: OrderedDict[bytes, None] = OrderedDict()
        self._lock = threading.Lock()
        self.checks = 0  # bcrypt checks run (cache misses)

    def check(self, header: str | None) -> bool:
        creds = parse_basic(header)
        if creds is None:
            return False
        user, password = creds
        hashed = self.users.get(user)
        key = hashlib.sha256(b"\0".join((user.encode(), hashed or b"", password))).digest()
        with self._lock:
            if key in self._ok:
                self._ok.move_to_end(key)
                return True
        self.checks += 1
        try:
            ok = self._checkpw(password, hashed or _DUMMY) and hashed is not None
        except ValueError:  # a password bcrypt refuses (over 72 bytes with bcrypt ≥ 5)
            ok = False
        if ok:
            with self._lock:
                self._ok[key] = None
                while len(self._ok) > self.CACHE:
                    self._ok.popitem(last=False)
        return ok
