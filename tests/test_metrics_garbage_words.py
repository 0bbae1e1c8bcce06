"""A /metrics body that is not Prometheus text is said in words ("not Prometheus text: line 1 is binary
data, not text"), with at most a short sanitised excerpt of the line: it used to echo ``repr`` of 60
characters, a long run of ``\\x..`` escapes for a binary body (new-user trial)."""

from __future__ import annotations

import http.server
import os
import re
import threading

import pytest
from helpers import examples, wait_for
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuscope.sources.endpoint import EXCERPT, EndpointPoller, MetricsError, parse_metrics

BINARY = bytes(range(256)) * 4 + os.urandom(512)


@pytest.mark.parametrize(("text", "want"), [
    ("<html><body>502 Bad Gateway</body></html>",
     'not Prometheus text: line 1 looks like HTML or XML ("<html><body>502 Bad Gateway</body></htm…")'),
    ('{"error": "unauthorized"}', 'not Prometheus text: line 1 looks like JSON ("{"error": "unauthorized"}")'),
    ("[1, 2]", 'not Prometheus text: line 1 looks like JSON ("[1, 2]")'),
    ("\x00\x01\x02\x03 1", "not Prometheus text: line 1 is binary data, not text"),
    ("ok_metric 1\nbad\ufffd\ufffd 2", "not Prometheus text: line 2 is binary data, not text"),  # invalid UTF-8
    ("\x1b[2J\x1b]0;pwned\x07x 1 2 3", "not Prometheus text: line 1 is binary data, not text"),  # escapes
    ("# HELP x\nx 1\n\nx{a=b} 1", 'not Prometheus text: line 4 has labels that are not name="value" pairs '
                                  '("x{a=b} 1")'),
    ("metric{broken 1", "not Prometheus text: line 1 has a '{' with no '}' after it (\"metric{broken 1\")"),
    ("9lives 1", 'not Prometheus text: line 1 does not start with a metric name ("9lives 1")'),
    ("lonely_name", 'not Prometheus text: line 1 has no value ("lonely_name")'),
    ("a 1 2 3", 'not Prometheus text: line 1 has more than a value and a timestamp ("a 1 2 3")'),
    ("x one", 'not Prometheus text: line 1 has a value that is not a number ("x one")'),
    ("x_" + "y" * 200 + " one", "not Prometheus text: line 1 has a value that is not a number "
                                f'("x_{"y" * (EXCERPT - 3)}…")'),  # cut to EXCERPT characters
])
def test_garbage_is_said_in_words(text, want):
    with pytest.raises(MetricsError) as e:
        parse_metrics(text)
    assert str(e.value) == want


@settings(max_examples=examples(300), deadline=None)
@given(st.text(min_size=1, max_size=300) | st.binary(min_size=1, max_size=300).map(
    lambda b: b.decode("utf-8", "replace")))
def test_any_garbage_error_is_short_printable_and_escapes_nothing(text):
    try:
        parse_metrics(text)
    except MetricsError as e:
        msg = str(e)
        assert msg.startswith("not Prometheus text: line ")
        assert msg.isprintable() and "\ufffd" not in msg
        assert "\\x" not in msg or "\\x" in text  # no byte shown as an escape
        assert len(msg) <= len("not Prometheus text: line 300 ") + 60 + EXCERPT + 4, msg


class _Garbage(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(BINARY)))
        self.end_headers()
        self.wfile.write(BINARY)

    def log_message(self, *a: object) -> None:
        pass


def test_a_real_server_serving_binary_garbage_is_said_in_words():
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Garbage)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    p = EndpointPoller([f"http://127.0.0.1:{httpd.server_address[1]}"], interval_s=0.2).start()
    try:
        wait_for(lambda: p.trackers[0].garbage >= 1, 30, "a garbage answer")
        r = p.latest()[0]
        assert r.up is True
        assert r.error is not None and re.search(r"\d+ bad responses?: not Prometheus text: line 1 is binary data, "
                                                 r"not text$", r.error), r.error
        assert "\\x" not in r.error and len(r.error) < 80
    finally:
        p.stop()
        httpd.shutdown()
        httpd.server_close()
