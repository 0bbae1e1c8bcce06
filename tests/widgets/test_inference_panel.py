"""The inference panel (widgets/inference_panel.py): its head line, and why an endpoint is down or gives no
rate, said within the room its line has."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from helpers import run_frames, sim_source

from gpuscope.cli.record import endpoint_changes
from gpuscope.core.model import EndpointReading
from gpuscope.core.session import Session
from gpuscope.sources.endpoint import REASON_MAX, EndpointTracker, connect_reason
from gpuscope.widgets.inference_panel import endpoint_lines, header_line

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
    """The inference panel's head line does not promise rates that cannot come: with every endpoint down or
    answering something that is not metrics, it said "waiting for two scrapes" for ever (tmux, 120×40,
    `gpuscope --simulate healthy-gen4 --endpoint http://127.0.0.1:PORT` on `python -m http.server` serving a
    binary `metrics` file, plus `--endpoint http://127.0.0.1:1`; trial2)."""
    readings = [EndpointReading(url=f"http://h:{8000 + i}", **kw) for i, kw in enumerate(eps)]
    assert header_line(readings) == expect


# a real-looking long reason: what an SSL failure behind a proxy says
LONG = ("cannot connect: [SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: unable to get local "
        "issuer certificate (_ssl.c:1006)")
HEAD = 19  # kind (8) + space + "gpu2:8000" + space


def down(reason: str) -> EndpointReading:
    return EndpointReading(url="http://gpu2:8000", up=False, error=reason)


@pytest.mark.parametrize(("width", "reason", "whole"), [
    (76, "connection refused", True),  # 80 columns: a short reason fits
    (76, LONG, False),  # 80 columns: cut to the 57 cells left, with …
    (200, LONG, True),  # a wide terminal: the whole reason (it was cut at 40 whatever the width)
    (HEAD + len(LONG), LONG, True),  # exactly the room it needs
    (HEAD + len(LONG) - 1, LONG, False),  # one cell less
    (20, LONG, False),  # a panel narrower than the head: still some of the reason (10 characters)
])
def test_a_down_endpoints_reason_fills_the_room_its_line_has(width, reason, whole):
    """Why an endpoint is down (or gives no rate) is cut to the room its line has, not to a fixed length: the
    source cut a connection error at 60 characters and the panel cut the reason at 40 however wide the
    terminal; headless output (`record`'s lines) gives it whole. Always one line."""
    (line,) = [t.plain for t in endpoint_lines(down(reason), width)]
    assert "\n" not in line
    assert line.endswith(reason) == whole, line
    if not whole:
        assert line.endswith("…") and len(line) == max(width, HEAD + 10), (len(line), line)


@pytest.mark.parametrize("width", [76, 120, 200])
def test_a_bad_endpoints_reason_on_its_state_line_fills_the_room(width):
    """Why an endpoint is down (or gives no rate) is cut to the room its line has, not to a fixed length: the
    source cut a connection error at 60 characters and the panel cut the reason at 40 however wide the
    terminal; headless output (`record`'s lines) gives it whole. Always one line."""
    reason = "3 bad responses: " + LONG
    lines = [t.plain for t in endpoint_lines(EndpointReading(url="http://h:8000", up=True, error=reason), width)]
    state = next(ln for ln in lines if "run " in ln)
    assert len(state) <= width
    assert state.endswith(reason) if width == 200 else state.endswith("…"), state


def test_the_reason_of_a_failed_connection_is_not_cut_at_60():
    """Why an endpoint is down (or gives no rate) is cut to the room its line has, not to a fixed length: the
    source cut a connection error at 60 characters and the panel cut the reason at 40 however wide the
    terminal; headless output (`record`'s lines) gives it whole. Always one line."""
    try:
        try:
            raise OSError(LONG.removeprefix("cannot connect: "))
        except OSError as inner:
            raise RuntimeError("wrapper") from inner
    except RuntimeError as e:
        assert connect_reason(e) == "cannot connect"  # a fixed phrase: an exception's text may quote a secret
    assert len(connect_reason(OSError("x" * 1000 + "\x1b[2J"))) <= REASON_MAX
    assert connect_reason(ConnectionRefusedError("[Errno 111] Connection refused")) == "connection refused"


def test_record_says_the_whole_reason_headless():
    """Why an endpoint is down (or gives no rate) is cut to the room its line has, not to a fixed length: the
    source cut a connection error at 60 characters and the panel cut the reason at 40 however wide the
    terminal; headless output (`record`'s lines) gives it whole. Always one line."""
    tr = EndpointTracker(url="http://gpu2:8000")
    tr.failed(1_800_000_000.0, LONG)
    (line,) = endpoint_changes([tr.reading()], {})
    assert line.endswith(f"({LONG}); recording goes on") and "\n" not in line


async def panel_text(session: Session, size: tuple[int, int]) -> tuple[int, str]:
    """The inference panel of the app on ``session`` in a terminal of ``size``: its room (columns) and
    its text, plain."""
    from gpuscope.tui.app import GpuscopeApp
    from gpuscope.widgets.inference_panel import InferencePanel

    app = GpuscopeApp(session, None, label="SIMULATED", interval_s=1.0, compact=False)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        panel = app.query_one(InferencePanel)
        text = panel.render()
        return panel.content_region.width, getattr(text, "plain", str(text))


async def test_the_panel_on_a_wide_terminal_shows_the_whole_reason():
    """Why an endpoint is down (or gives no rate) is cut to the room its line has, not to a fixed length: the
    source cut a connection error at 60 characters and the panel cut the reason at 40 however wide the
    terminal; headless output (`record`'s lines) gives it whole. Always one line."""
    tr = EndpointTracker(url="http://gpu2:8000")
    tr.failed(1_800_000_000.0, LONG)
    src = sim_source("healthy-gen4")
    session = Session(src.inventory, interval_s=1.0)
    for f in run_frames(src, 0, 5):
        session.ingest(replace(f, endpoints=(tr.reading(),)))
    for size, whole in (((220, 50), True), ((80, 50), False)):
        room, plain = await panel_text(session, size)
        line = next(ln for ln in plain.split("\n") if "gpu2:8000" in ln)
        assert len(line) <= room, (room, line)
        assert (f"({LONG})" in line) == whole, (size, room, line)


def _many_models(n: int, t: float) -> str:
    """A vLLM page serving ``n`` models: model k generating 10·k tok/s, running k requests."""
    lines = ["# TYPE vllm:generation_tokens_total counter"]
    lines += [f'vllm:generation_tokens_total{{model_name="model-{k:02d}"}} {10.0 * k * t}' for k in range(n)]
    lines += ["# TYPE vllm:num_requests_running gauge"]
    lines += [f'vllm:num_requests_running{{model_name="model-{k:02d}"}} {k}' for k in range(n)]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("size", [(80, 24), (160, 50)])
async def test_the_panel_with_more_models_than_it_shows(size):
    """Eleven served models: the eight busiest shown, "+3 models" once with their summed rate, the header the
    endpoint's true total (0+10+…+100 = 550 tok/s, not the 8 shown's 520), every line within the panel."""
    tr = EndpointTracker(url="http://gpu2:8000", window_s=30)
    src = sim_source("healthy-gen4")
    session = Session(src.inventory, interval_s=1.0)
    for f in run_frames(src, 0, 5):
        tr.feed(f.t, _many_models(11, f.t))
        session.ingest(replace(f, endpoints=tuple(tr.readings())))
    room, plain = await panel_text(session, size)
    lines = plain.split("\n")
    assert lines[0].startswith("550 tok/s"), lines[0]
    rest = [ln for ln in lines if "+3 models" in ln]
    if size[1] >= 50:
        assert len(rest) == 1 and "gen 30 " in rest[0], plain  # models 0, 1 and 2: 0 + 10 + 20 tok/s
    else:  # at 80×24 the panel keeps to its share of the rows (GPUs first): it says how many lines it left out
        assert len(rest) <= 1 and lines[-1].startswith("… ") and "more lines" in lines[-1], plain
    shown = {m for ln in lines for m in re.findall(r"model-\d\d", ln)}
    assert shown <= {f"model-{k:02d}" for k in range(3, 11)}  # the busiest; at 80x24 some may be off the panel
    assert all(len(ln) <= room for ln in lines), [ln for ln in lines if len(ln) > room]


@pytest.mark.parametrize("url,want", [
    ("http://h:8000", "h:8000"),
    ("http://alice:S3cret@gpu-1:8001/metrics?token=abc", "gpu-1:8001"),  # no user info, path or query
    ("https://vllm.example.com/v1", "vllm.example.com:443"),  # the scheme's port
    ("http://localhost", "localhost:80"),
    ("http://[::1]:8000", "[::1]:8000"),
    ("http://h\x1b[2J:8000", "h:8000"),  # sanitised: no escape reaches the screen
    ("http://h:notaport/", "http://h:notaport/"),  # cannot be split: shown whole, redacted, cleaned
    ("h:9000", "h:9000"),
])
def test_endpoint_where(url, want):
    from gpuscope.widgets.inference_panel import endpoint_where

    got = endpoint_where(url)
    assert got == want
    assert "\x1b" not in got and "S3cret" not in got and "alice" not in got


@pytest.mark.parametrize("width", [40, 56, 76, 116, 200])
def test_two_servers_on_one_host_say_which_is_which(width):
    """`gpuscope --endpoint http://h:8000 --endpoint http://h:8001` (or the mixed-4 scenario) showed two identical
    inference blocks with no URL: each first line names its host:port, never a password, and fits its line."""
    a, b = (EndpointReading(url=f"http://bob:pw@h:{p}/metrics", kind="vllm", model="Qwen/Qwen2.5-32B-Instruct",
                            gen_tokens_per_s=1418.0, rate_window_s=10.0) for p in (8000, 8001))
    la, lb = endpoint_lines(a, width)[0].plain, endpoint_lines(b, width)[0].plain
    assert "h:8000" in la and "h:8001" in lb and la != lb
    assert "pw" not in la + lb and "bob" not in la + lb
    assert len(la) <= width and len(lb) <= width, (la, lb)
    assert la.index("gen ") == lb.index("gen ")  # the rates line up


def test_a_long_model_name_never_wraps_the_first_line():
    """At 60x20 an endpoint's first line was 59 cells in a 56-cell panel and wrapped to a second row, which the
    GPU table then lost (GPU1's row went)."""
    from gpuscope.widgets.inference_panel import name_width

    e = EndpointReading(url="http://localhost:8000", kind="vllm", model="google/gemma-2-27b-it",
                        gen_tokens_per_s=55.0, rate_window_s=10.0)
    for width in (40, 56, 76):
        line = endpoint_lines(e, width)[0].plain
        assert len(line) <= width, (width, line)
        assert line.startswith("vllm     localhost:8000 ") and line[9 + name_width(width):].startswith(" gen 55")
        assert width < 56 or line.endswith(" tok/s")


def test_a_failing_probe_says_so_in_its_block():
    """`--probe` against a server that refuses it showed nothing anywhere: the block says why, in one short line
    under the server's line, cleaned."""
    e = EndpointReading(url="http://h:8000", kind="vllm", model="m", gen_tokens_per_s=10.0, rate_window_s=10.0,
                        probe_error="probe: HTTP 401 (needs a token?)\x1b[2J")
    lines = [t.plain for t in endpoint_lines(e, 76)]
    assert "         probe: HTTP 401 (needs a token?)" in lines
    ok = [t.plain for t in endpoint_lines(replace(e, probe_error=None), 76)]
    assert not any("probe" in ln for ln in ok)
