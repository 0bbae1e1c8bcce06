"""Fuzz the endpoint credentials' parsers: headers from ``--endpoint-header`` and the environment, the token, and
``--endpoint`` URLs with a password anywhere in them. Each gives a result httpx can send or one ValueError /
GpuscopeError line that never holds the secret (deterministic and bounded, as tests/fuzz/test_fuzz.py)."""

from __future__ import annotations

import httpx
from hypothesis import given
from hypothesis import strategies as st
from test_fuzz import fuzz

from gpuscope.core.errors import GpuscopeError
from gpuscope.sources.live import parse_headers

SECRET = "Z9SECRETZ9"
_PIECES = st.sampled_from(["Authorization", "Cookie", "X-Api-Key", ":", ": ", ";", "; ", "\n", "\r\n", "\r", " ", "\t",
                           "=", "a=1", "Bearer ", "é", "\x00", "\x1b[2J", "\x7f", "Name", "b:c", ",", '"', "Bad Name:"])
_TEXT = st.lists(st.one_of(_PIECES, st.just(SECRET), st.text(max_size=4)), max_size=10).map("".join)


@fuzz(400)
@given(st.lists(_TEXT, max_size=3), _TEXT, st.one_of(st.none(), _TEXT))
def test_headers_are_sendable_or_refused_without_the_secret(values, env_headers, token):
    """Whatever the flags and variables hold: headers httpx accepts and sends as they are (no value with a line
    break, a control character or non-ASCII; names that are tokens; no name twice), or one line that quotes
    no value."""
    env = {"GPUSCOPE_ENDPOINT_HEADERS": env_headers}
    if token is not None:
        env["GPUSCOPE_ENDPOINT_TOKEN"] = token
    try:
        headers = parse_headers(values, env)
    except ValueError as e:
        msg = str(e)
        assert SECRET not in msg and "\n" not in msg and "\r" not in msg and "\x1b" not in msg, msg
        return
    assert len({n.lower() for n in headers}) == len(headers)
    built = httpx.Request("GET", "http://h/", headers=headers)  # encodes them as they will be sent: no error
    for name, value in headers.items():
        assert value == value.strip() and value.isascii() and all(c == "\t" or 32 <= ord(c) < 127 for c in value)
        assert built.headers[name] == value


_URL = st.sampled_from(["http://", "https://", "", "eve", ":", "#", "?", "/", "@", "h", ":8000", ":99999", "[::1",
                        " ", "%23", "\x1b", "token=", "127.0.0.1"])


@fuzz(400)
@given(st.lists(_URL, max_size=6), st.lists(_URL, max_size=6))
def test_a_refused_endpoint_never_quotes_what_comes_before_its_last_at(head, tail):
    """A password anywhere before the URL's last '@' (where '#', '?', '/' in it break the URL's parse): a refusal
    never holds it, whatever a URL parser makes of the rest."""
    from gpuscope.cli.options import SourceOptions

    url = "".join(head) + SECRET + "@" + "".join(tail)
    opts = SourceOptions(simulate=None, interval=1.0, pcie_source="auto", endpoint=(url,), endpoint_kind=None,
                         endpoint_header=(), endpoint_window=10.0, endpoint_timeout=2.0, endpoint_insecure=False,
                         probe=None, probe_model=None)
    try:
        checked = opts.checked(env={})
    except GpuscopeError as e:
        assert SECRET not in str(e) and "\n" not in str(e) and e.exit_status == 2, str(e)
        return
    assert SECRET not in " ".join(checked.endpoint) + repr(checked) + " ".join(checked.notes)
