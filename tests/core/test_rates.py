"""One rule for a rate over a stretch of a recording (core/rates.py): the whole-file summary, its group lines and
``summary --by-marker`` give one figure for the same frames. A table for the pure function, then a simulated
recording whose server idles for its first seconds (the span rate once left those out: 54.4 against 39.8)."""

from __future__ import annotations

import json

import pytest
from helpers import run_frames, sim_source

from gpuscope.cli.main import main
from gpuscope.core.model import EndpointReading, Frame, GpuReading
from gpuscope.core.rates import rate_over, since_before
from gpuscope.core.session import Session
from gpuscope.core.stats import marker_spans, span_stats
from gpuscope.outputs.recorder import Recorder
from gpuscope.sources.groups import with_groups


@pytest.mark.parametrize("readings,want", [
    ([], None),
    ([(50.0, None, None)], 50.0),  # one reading, no frame before it: its own rate
    ([(0.0, None, 10.0), (60.0, 1.0, 10.0), (60.0, 1.0, 10.0)], 40.0),  # an idle first second counts
    ([(10.0, 1.0, 10.0), (40.0, 3.0, 10.0)], 32.5),  # each reading over the time since the frame before
    ([(10.0, None, None), (20.0, 2.0, None), (30.0, 2.0, None)], 20.0),  # no frame before: the usual interval
    ([(10.0, 1.0, 10.0), (90.0, 600.0, 10.0)], (10 + 900) / 11),  # a 10 min gap counts as the rate window
    ([(10.0, 1.0, None), (90.0, 600.0, None)], 50.0),  # … or as the usual interval when no window is known
    ([(10.0, 1.0, None), (float("nan"), 1.0, None), (30.0, 1.0, None)], 20.0),  # not finite: not a reading
    ([(10.0, 1.0, None), (30.0, -5.0, None)], 20.0),  # the clock went back: the usual interval
])
def test_rate_over(readings, want):
    got = rate_over(readings)
    assert got == (None if want is None else pytest.approx(want))


@pytest.mark.parametrize("t,before,want", [(10.0, None, None), (10.0, 9.0, 1.0), (10.0, 10.0, None), (10.0, 12.0, None)])
def test_since_before(t, before, want):
    assert since_before(t, before) == want


def _phased_frames():
    """1 Hz frames of a server idle for 4 s, then at 100 tok/s for 8 s, then at 40: each reading is its counter's
    change over the last 1 s window, as a poller reports it (none at the first frame: one scrape so far)."""
    def counter(t):
        return 100.0 * min(max(t - 4, 0), 8) + 40.0 * max(t - 12, 0)

    return [Frame(t=float(t), gpus=(GpuReading(index=0),), endpoints=(EndpointReading(
                url="u", kind="vllm", model="m", gen_tokens_per_s=counter(t) - counter(t - 1) if t else None,
                rate_window_s=1.0 if t else None),)) for t in range(20)]


def test_spans_take_the_readings_of_their_time_and_add_up_to_the_file():
    """Each span gets its phase's rate (a reading tells of its window's middle, not of its frame, so the first
    reading after a phase change is not the phase before's), and the spans' tokens add up to the file's."""
    spans = marker_spans([(0.0, "idle"), (4.0, "load"), (12.0, "tail")], 0.0, 19.0)
    rows = span_stats(_phased_frames(), spans, 1, 19.0)
    assert {r["label"]: r["endpoints"][0]["gen_tokens_per_s"] for r in rows} == {"idle": 0.0, "load": 100.0, "tail": 40.0}
    (whole,) = span_stats(_phased_frames(), marker_spans([], 0.0, 19.0), 1, 19.0)
    assert whole["endpoints"][0]["gen_tokens_per_s"] == pytest.approx((100 * 8 + 40 * 7) / 19)


def _record_with_servers(path, scenario: str, seconds: int, marker: str | None = None):
    """``seconds`` frames (1 Hz, virtual clock) of ``scenario`` with its simulated inference servers, as
    ``gpuscope record --simulate`` writes them, with a marker on the first frame when given."""
    src = with_groups(sim_source(scenario), simulate=scenario)
    s = Session(src.inventory, interval_s=1.0)
    s.start_recording(Recorder(str(path), src.inventory, command=["test"], interval_s=1.0, fsync=False))
    for k, f in enumerate(run_frames(src, 0.0, seconds - 1)):
        if marker and k == 0:
            s.add_marker(marker, t=f.t)
        s.ingest(f)
    s.stop_recording()
    return path


@pytest.mark.parametrize("marker", [None, "start: bench"])
def test_by_marker_gives_the_whole_files_tok_s(tmp_path, capsys, marker):
    """A span over the whole file: its tok/s is the whole-file summary's and its group line's (it printed 54.4
    where those said 39.8: the span kept only readings whose 10 s window lay inside it, dropping the idle start)."""
    path = _record_with_servers(tmp_path / "r.jsonl.gz", "a6000-tp2-pcie-gen1", 30, marker)
    assert main(["summary", str(path), "--json"]) == 0
    whole = json.loads(capsys.readouterr().out)
    (ep,) = whole["endpoints"]
    (group,) = whole["groups"]
    tok = ep["stats"]["gen_tokens_per_s"]["mean"]
    assert ep["stats"]["gen_tokens_per_s"]["p50"] > tok * 1.1, "the recording must start idle for this test"
    assert group["gen_tokens_per_s"] == pytest.approx(tok)
    assert main(["summary", str(path), "--by-marker", "--json"]) == 0
    (span,) = json.loads(capsys.readouterr().out)["spans"]
    assert span["frames"] == whole["frames"] == 30
    assert span["endpoints"][0]["gen_tokens_per_s"] == pytest.approx(tok)
    assert span["groups"][0]["gen_tokens_per_s"] == pytest.approx(tok)
    assert main(["summary", str(path), "--by-marker"]) == 0
    text = capsys.readouterr().out
    assert f"gen {tok:.1f} tok/s" in text and f": {tok:.1f} tok/s" in text
