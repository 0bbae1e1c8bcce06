"""The inference panel's head line does not promise rates that cannot come: with every endpoint down or
answering something that is not metrics, it said "waiting for two scrapes" for ever (tmux, 120×40,
`gpuscope --simulate healthy-gen4 --endpoint http://127.0.0.1:PORT` on `python -m http.server` serving
a binary `metrics` file, plus `--endpoint http://127.0.0.1:1`; trial2)."""

from __future__ import annotations

import pytest

from gpuscope.core.model import EndpointReading
from gpuscope.widgets.inference_panel import header_line

GARBAGE = dict(gen_tokens_per_s=None, rate_window_s=None, error="8 bad responses: not Prometheus text: line 1 is "
               "binary data, not text")
DOWN = dict(up=False, gen_tokens_per_s=None, rate_window_s=None, error="connection refused")
EARLY = dict(gen_tokens_per_s=None, rate_window_s=None)
RATE = dict(gen_tokens_per_s=357.0, rate_window_s=10.0)


@pytest.mark.parametrize(("eps", "expect"), [
    ([GARBAGE], ("– tok/s", "  no endpoint answers with metrics")),
    ([GARBAGE, DOWN], ("– tok/s", "  no endpoint answers with metrics")),
    ([DOWN, DOWN], ("– tok/s", "  unreachable")),
    ([GARBAGE, EARLY], ("– tok/s", "  waiting for two scrapes")),  # one good endpoint: its rate is coming
    ([EARLY], ("– tok/s", "  waiting for two scrapes")),
    ([GARBAGE, RATE], ("357 tok/s", "  10 s rate")),
])
def test_header_line_with_failing_endpoints(eps, expect):
    readings = [EndpointReading(url=f"http://h:{8000 + i}", **kw) for i, kw in enumerate(eps)]
    assert header_line(readings) == expect
