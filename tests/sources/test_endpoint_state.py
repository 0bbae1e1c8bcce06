"""An endpoint reading's explicit state (EndpointReading.state): set by the tracker and the probe, carried
through the codec, derived for readings without it (old recordings), and what every reader decides on."""

from __future__ import annotations

import json

import pytest

from gpuscope.cli.record import endpoint_changes
from gpuscope.core.codec import CodecError, frame_from_dict, frame_to_dict, from_dict, to_dict
from gpuscope.core.model import EndpointReading, Frame
from gpuscope.core.vocab import EndpointState, endpoint_state, state_of
from gpuscope.sources.endpoint import EndpointPoller, EndpointTracker, ProbeResult
from gpuscope.widgets.inference_panel import endpoint_lines, header_line

UP, STARTING, BAD, DOWN = (EndpointState.UP, EndpointState.STARTING, EndpointState.BAD_RESPONSE,
                           EndpointState.UNREACHABLE)
GOOD = "vllm:generation_tokens_total {} \nvllm:num_requests_running 1\n"


@pytest.mark.parametrize("up,bad,gen,window,want", [
    (False, False, None, None, DOWN),
    (False, True, 12.0, 10.0, DOWN),  # down whatever else it knew
    (True, True, None, None, BAD),
    (True, True, None, 10.0, BAD),  # bad answers and still no gen rate
    (True, True, 5.0, 10.0, UP),  # a bad answer among good ones: the rate is shown
    (True, False, None, None, STARTING),
    (True, False, 5.0, None, UP),  # a gauge (SGLang) or the probe gives a rate before a window exists
    (True, False, None, 10.0, UP),  # a window, but the server has no gen counter
    (True, False, 0.0, 10.0, UP),
])
def test_state_of(up, bad, gen, window, want):
    assert state_of(up, bad, gen, window) is want


def _good(t: float) -> str:
    return GOOD.format(1000 + 100 * t)


# (what happens to a tracker, in order) → its reading's state, and endpoint_state's word
@pytest.mark.parametrize("steps,want,word", [
    ([], STARTING, "ok"),
    (["good"], STARTING, "ok"),
    (["good", "good"], UP, "ok"),
    (["garbage"], BAD, "bad"),
    (["garbage", "garbage"], BAD, "bad"),
    (["good", "garbage"], BAD, "bad"),  # one scrape, then junk: no rate, and junk counted
    (["good", "good", "garbage"], UP, "ok"),  # a rate despite the junk
    (["garbage", "good", "good"], UP, "ok"),
    (["http404"], DOWN, "down"),
    (["good", "good", "refused"], DOWN, "down"),
    (["good", "good", "refused", "good"], STARTING, "ok"),  # recovered: the window starts afresh
    (["good", "good", "refused", "good", "good"], UP, "ok"),
    (["empty"], BAD, "bad"),  # no known inference-server metrics
])
def test_tracker_states(steps, want, word):
    tr = EndpointTracker(url="http://x")
    for t, step in enumerate(steps):
        if step == "good":
            tr.feed(float(t), _good(t))
        elif step == "garbage":
            tr.feed(float(t), "<html><body>502 Bad Gateway</body></html>")
        elif step == "empty":
            tr.feed(float(t), "some_other_metric 1\n")
        elif step == "http404":
            tr.failed(float(t), "HTTP 404")
        else:
            tr.failed(float(t), "connection refused")
    rs = tr.readings()
    assert rs and all(r.state is want for r in rs)
    assert all(endpoint_state(r) == word for r in rs)
    assert all(r.up == (want is not DOWN if steps else None) for r in rs)  # no answer yet: not known


# readings as an older writer recorded them (no "state"): the state derived on decode
@pytest.mark.parametrize("d,want", [
    ({"url": "u", "up": False, "error": "unreachable since 10:00:00 (connection refused)"}, DOWN),
    ({"url": "u", "error": "3 bad responses: not Prometheus text: line 1 looks like HTML"}, BAD),
    ({"url": "u", "error": "1 bad response: response larger than 8 MB refused"}, BAD),
    ({"url": "u", "error": "2 bad responses", "gen_tokens_per_s": 10, "rate_window_s": 10}, UP),
    ({"url": "u", "error": "waiting for the first scrape"}, STARTING),
    ({"url": "u"}, STARTING),
    ({"url": "u", "gen_tokens_per_s": 812.5, "rate_window_s": 10}, UP),
    ({"url": "u", "gen_tokens_per_s": 812.5}, UP),  # before rate_window_s was recorded
    ({"url": "u", "state": "a_state_from_a_newer_writer", "up": False}, DOWN),
    ({"url": "u", "state": "up", "up": False}, DOWN),  # a state that contradicts up is derived again
    ({"url": "u", "state": "unreachable"}, STARTING),
    ({"url": "u", "state": "bad_response", "error": "whatever the words"}, BAD),  # the state, not the words
    ({"url": "u", "state": "up", "error": "5 bad responses"}, UP),
])
def test_state_on_decode(d, want):
    e = from_dict(EndpointReading, d)
    assert e.state is want
    frame = frame_from_dict({"t": 1.0, "gpus": [], "endpoints": [d]})
    assert frame.endpoints[0].state is want


@pytest.mark.parametrize("state", list(EndpointState))
def test_state_round_trips_as_its_value(state):
    e = EndpointReading(url="u", up=state is not DOWN, state=state)
    assert e.state is state
    d = to_dict(e)
    assert d["state"] == state.value and type(d["state"]) is str
    text = json.dumps(frame_to_dict(Frame(t=1.0, gpus=(), endpoints=(e,))))
    assert frame_from_dict(json.loads(text)).endpoints[0] == e


@pytest.mark.parametrize("bad", [3, True, ["up"], {"v": "up"}])
def test_a_state_that_is_not_a_string_is_a_codec_error(bad):
    with pytest.raises(CodecError, match="state"):
        from_dict(EndpointReading, {"url": "u", "state": bad})


def test_readers_decide_on_the_state_not_the_words():
    # words that used to decide, with a state that says otherwise
    ok_words_bad = EndpointReading(url="http://a", error="the server said something odd", state=BAD)
    bad_words_ok = EndpointReading(url="http://b", error="7 bad responses: earlier", state=STARTING)
    assert endpoint_state(ok_words_bad) == "bad" and endpoint_state(bad_words_ok) == "ok"
    assert header_line([ok_words_bad]) == ("– tok/s", "  no endpoint answers with metrics")
    assert header_line([bad_words_ok]) == ("– tok/s", "  waiting for two scrapes")
    assert "the server said something odd" in endpoint_lines(ok_words_bad)[1].plain
    assert "rates: waiting for two scrapes" in endpoint_lines(bad_words_ok)[1].plain
    seen: dict[str, str] = {}
    assert endpoint_changes([ok_words_bad, bad_words_ok], seen) == [
        "endpoint http://a: the server said something odd; recording goes on"]
    assert seen == {"http://a": "bad", "http://b": "ok"}


@pytest.mark.parametrize("reading,probe,want", [
    (EndpointReading(url="u", up=False, error="unreachable since 10:00:00 (HTTP 404)"),
     ProbeResult(ttft_s=0.05, decode_tokens_per_s=40.0), UP),  # no metrics, the probe answers: up
    (EndpointReading(url="u", up=False, error="unreachable since 10:00:00 (HTTP 404)"),
     ProbeResult(ttft_s=0.05), STARTING),  # the probe answers, no decode rate yet
    (EndpointReading(url="u", error="2 bad responses: no known inference-server metrics in the response"),
     ProbeResult(ttft_s=0.05, decode_tokens_per_s=40.0), UP),
    (EndpointReading(url="u", kind="vllm", error="waiting for the first scrape"),
     ProbeResult(ttft_s=0.05, decode_tokens_per_s=40.0), STARTING),  # metrics come: the server's state
    (EndpointReading(url="u", up=False, error="unreachable since 10:00:00 (HTTP 404)"),
     ProbeResult(error="probe: HTTP 404"), DOWN),
    (EndpointReading(url="u", error="2 bad responses: no known inference-server metrics in the response"),
     ProbeResult(error="probe failed: ConnectError"), BAD),  # the text is the probe's, the state the server's
])
def test_probe_state(reading, probe, want):
    r = EndpointPoller._with_probe(reading, probe)
    assert r.state is want
    assert r.up == (want is not DOWN)


@pytest.mark.parametrize("ep,want", [
    ({"url": "http://x", "error": "2 bad responses: not Prometheus text"}, BAD),  # an old recording: derived
    ({"url": "http://x", "up": False, "error": "unreachable since 10:00:00 (HTTP 503)"}, DOWN),
    ({"url": "http://x", "gen_tokens_per_s": 5, "rate_window_s": 10, "state": "up"}, UP),
    ({"url": "http://x", "state": "starting", "error": "3 bad responses"}, STARTING),
    ({"url": "http://x", "state": "from_the_future"}, STARTING),
    ({"url": "http://x", "state": 7}, None),  # not a string: the frame is refused, as the checked decode does
])
def test_replays_fast_decode_agrees_with_the_checked_one(tmp_path, ep, want):
    import gzip

    from helpers import sim_source

    from gpuscope.core.codec import inventory_to_dict
    from gpuscope.sources.recording import open_recording
    from gpuscope.tui.feeders import _trusted_frame

    inv = sim_source("a6000-tp2-pcie-gen1").inventory
    path = tmp_path / "r.jsonl.gz"
    header = {"type": "header", "format": "gpuscope-recording", "version": 1, "inventory": inventory_to_dict(inv)}
    with gzip.open(path, "wt") as f:
        f.write(json.dumps(header) + "\n" + json.dumps({"t": 1000.0, "gpus": [], "endpoints": [ep]}) + "\n")
    rec = open_recording(path)
    fast, checked = _trusted_frame(rec, 0), next(rec.frames(0, 1), None)
    if want is None:
        assert fast is None and checked is None
        return
    assert fast is not None and checked is not None
    assert fast.endpoints[0].state is want and checked.endpoints[0].state is want
