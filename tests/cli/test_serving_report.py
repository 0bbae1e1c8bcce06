"""Per-phase benchmark reports: marker spans (pure, tables), and a real `record -- CMD`
beside a real HTTP server whose token rate changes per phase, through summary/compare/export."""

from __future__ import annotations

import csv
import http.server
import json
import subprocess
import sys
import threading
import time

import pytest
from helpers import HttpServer

from gpuscope.core.model import EndpointReading, Frame, GpuReading
from gpuscope.core.stats import compare_phases, export_serving_rows, marker_spans, span_stats

pytestmark = pytest.mark.slow  # real servers and real seconds: .ci/run runs these on one Python


def _labels(spans):
    return [(s["label"], s["kind"], s["start"], s["end"]) for s in spans]


@pytest.mark.parametrize("markers,expect", [
    ([], [("(whole recording)", "lead-in", 0, 100)]),
    ([(0, "a"), (40, "b")], [("a", "phase", 0, 40), ("b", "phase", 40, 100)]),
    ([(10, "a")], [("(before the first marker)", "lead-in", 0, 10), ("a", "phase", 10, 100)]),
    ([(40, "b"), (0, "a")], [("a", "phase", 0, 40), ("b", "phase", 40, 100)]),  # time order, not file order
    ([(0, "start: bench"), (90, "end: exit status 0")], [("start: bench", "phase", 0, 90)]),  # run = one phase
    ([(0, "start: bench"), (10, "p1"), (50, "p2"), (90, "end: exit status 0")],
     [("start: bench", "phase", 0, 10), ("p1", "phase", 10, 50), ("p2", "phase", 50, 90),
      ("run: bench", "run", 0, 90)]),
    ([(0, "x"), (float("nan"), "bad")], [("x", "phase", 0, 100)]),
])
def test_marker_spans(markers, expect):
    assert _labels(marker_spans(markers, 0.0, 100.0)) == expect


def test_span_stats_keep_unknown_as_none_and_endpoints_per_model():
    spans = marker_spans([(0.0, "a"), (2.0, "b")], 0.0, 3.0)
    ep = lambda t, g: EndpointReading(url="u", kind="vllm", model="m", gen_tokens_per_s=g, ttft_mean_s=None)  # noqa: E731
    frames = [Frame(t=float(t), gpus=(GpuReading(index=0, util_gpu_pct=50.0 + t),), endpoints=(ep(t, 100.0 * t),))
              for t in range(4)]
    rows = span_stats(frames, spans, 1, 3.0)
    assert [r["frames"] for r in rows] == [2, 2]
    assert rows[0]["gpus"][0]["util_gpu_pct"] == 50.5 and rows[0]["gpus"][0]["power_w"] is None
    (e,) = rows[1]["endpoints"]
    assert e["gen_tokens_per_s"] == 250.0 and e["ttft_mean_s"] is None  # unknown stays unknown


def test_a_phase_rate_takes_the_readings_of_its_time():
    """tok/s at a phase change: the first readings after the marker are the server's rate over a window that
    still holds the previous phase (CI measured 197 for a 241 tok/s phase read at the frames' times). A reading
    counts in the phase holding its window's middle, and a phase's rate is the tokens its readings account for
    over its time, the whole-file summary's rule (core/rates.py). Gauges (waiting) are read at their frame."""
    spans = marker_spans([(0.0, "slow"), (10.0, "fast")], 0.0, 13.5)

    def counter(t):
        return 68.0 * min(t, 10.0) + 241.0 * max(t - 10.0, 0.0)

    def ep(t):
        w = min(t, 1.0)  # a 1 s window, as the poller reports it (none at the first scrape)
        return EndpointReading(url="u", kind="vllm", model="m", gen_tokens_per_s=(counter(t) - counter(t - w)) / w
                               if w else None, rate_window_s=w or None, requests_waiting=3.5)

    frames = [Frame(t=t, gpus=(GpuReading(index=0),), endpoints=(ep(t),)) for t in [0.5 * i for i in range(28)]]
    slow, fast = span_stats(frames, spans, 1, 13.5)
    assert slow["endpoints"][0]["gen_tokens_per_s"] == pytest.approx(68.0)
    (e,) = fast["endpoints"]
    assert e["gen_tokens_per_s"] == pytest.approx(241.0, rel=0.06) and e["requests_waiting"] == 3.5


def test_serving_export_is_long_not_per_gpu():
    frames = [Frame(t=1.0, gpus=(GpuReading(index=0), GpuReading(index=1)),
                    endpoints=(EndpointReading(url="u", model="a", gen_tokens_per_s=1.0),
                               EndpointReading(url="u", model="b", itl_mean_s=0.0137)))]
    rows = list(export_serving_rows(frames))
    assert len(rows) == 2 and rows[0][3] == "a" and rows[1][3] == "b"


def test_compare_phases_lines_up_by_label():
    def doc(spans):
        return {"spans": [{"label": lab, "gpus": [], "endpoints": [
            {"gen_tokens_per_s": g, "prompt_tokens_per_s": None, "requests_waiting": None, "ttft_mean_s": None,
             "itl_mean_s": None}]} for lab, g in spans]}

    rows = compare_phases(doc([("warm", 1.0), ("load", 2.0), ("load", 3.0)]), doc([("load", 20.0), ("cool", 5.0)]))
    assert [(r["label"], r["a"] and r["a"]["gen_tokens_per_s"], r["b"] and r["b"]["gen_tokens_per_s"])
            for r in rows] == [("warm", 1.0, None), ("load", 2.0, 20.0), ("load #2", 3.0, None), ("cool", None, 5.0)]


# ------------------------------------------------------------------ end to end, real server, real record
class PhasedServer(HttpServer):
    """A vLLM-looking /metrics whose generation counter runs at the rate last set by GET /phase/RATE."""

    def __init__(self):
        self.rate, self.n, self.t = 0.0, 0.0, time.time()
        lock = threading.Lock()
        owner = self

        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                with lock:
                    now = time.time()
                    owner.n += owner.rate * (now - owner.t)
                    owner.t = now
                    if self.path.startswith("/phase/"):
                        owner.rate = float(self.path.rsplit("/", 1)[1])
                    n = owner.n
                body = ("# TYPE vllm:generation_tokens_total counter\n"
                        f'vllm:generation_tokens_total{{model_name="tiny"}} {n}\n'
                        f'vllm:num_requests_waiting{{model_name="tiny"}} {owner.rate / 100}\n').encode()
                self.send_response(200)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        HttpServer.__init__(self, H)


def gs(*args):
    return subprocess.run([sys.executable, "-m", "gpuscope", *args], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def phased(tmp_path_factory):
    srv = PhasedServer()
    out = tmp_path_factory.mktemp("ph") / "r.jsonl.gz"
    child = ("import os, time, urllib.request\n"
             f"for n, rate in ((1, 68), (4, 241), (16, 354)):\n"
             f"    urllib.request.urlopen('{srv.url}/phase/%d' % rate).read()\n"
             "    open(os.environ['GPUSCOPE_MARKERS'], 'w').write('phase: %d streams\\n' % n)\n"
             "    time.sleep(4)\n")
    try:
        p = gs("record", "-o", str(out), "--simulate", "mixed-4", "--interval", "0.5", "--endpoint", srv.url,
               "--endpoint-window", "1", "--", sys.executable, "-c", child)
    finally:
        srv.close()
    assert p.returncode == 0, p.stderr
    return out


def test_summary_by_marker_gives_each_phase_its_own_rate(phased):
    doc = json.loads(gs("summary", str(phased), "--by-marker", "--json").stdout)
    assert doc["schema"] == "gpuscope.phases/1"
    by = {s["label"]: s for s in doc["spans"]}
    for label, rate in (("phase: 1 streams", 68), ("phase: 4 streams", 241), ("phase: 16 streams", 354)):
        (e,) = by[label]["endpoints"]
        assert e["model"] == "tiny" and e["gen_tokens_per_s"] == pytest.approx(rate, rel=0.15), label
        assert len(by[label]["gpus"]) == 4 and by[label]["gpus"][0]["util_gpu_pct"] is not None
    assert any(s["kind"] == "run" for s in doc["spans"])
    text = gs("summary", str(phased), "--by-marker").stdout
    assert "phase: 16 streams" in text and "gen 3" in text and "waiting" in text


def test_compare_by_marker_and_serving_export(phased, tmp_path):
    doc = json.loads(gs("compare", str(phased), str(phased), "--by-marker", "--json").stdout)
    labels = [r["label"] for r in doc["phases"]]
    assert "phase: 4 streams" in labels
    assert all(r["a"] == r["b"] for r in doc["phases"])
    text = gs("compare", str(phased), str(phased), "--by-marker").stdout
    assert "power W (all GPUs)" in text and "GPU util % (mean)" in text  # power is the GPUs' sum: said so
    gpu_csv, serving_csv = tmp_path / "g.csv", tmp_path / "s.csv"
    p = gs("export", str(phased), "--csv", str(gpu_csv), "--serving", str(serving_csv))
    assert p.returncode == 0, p.stderr
    rows = list(csv.DictReader(serving_csv.open()))
    gpu_rows = list(csv.DictReader(gpu_csv.open()))
    assert rows and len(gpu_rows) == 4 * len(rows)  # one serving row per frame (one model), four GPU rows
    assert {"requests_waiting", "ttft_mean_s", "prefix_cache_hit_pct", "rate_window_s"} <= set(rows[0])
    again = gs("export", str(phased), "--csv", str(tmp_path / "g2.csv"), "--serving", str(serving_csv))
    assert again.returncode == 1 and "refusing to overwrite" in again.stderr and "Traceback" not in again.stderr


@pytest.mark.slow  # records for 2 s
def test_serving_export_of_a_recording_without_endpoints_says_why(tmp_path, capsys):
    """export --serving of a recording made without --endpoint wrote an empty table and 'wrote 0 serving
    rows', as if something had gone wrong: it says the recording has no inference endpoint."""
    from gpuscope.cli.main import main

    rec = tmp_path / "r.jsonl.gz"
    assert main(["record", "-o", str(rec), "--simulate", "healthy-gen4", "--duration", "2"]) == 0
    capsys.readouterr()
    assert main(["export", str(rec), "--csv", str(tmp_path / "g.csv"), "--serving", str(tmp_path / "s.csv")]) == 0
    err = capsys.readouterr().err
    assert "wrote 0 serving rows" in err and "the recording has no inference endpoint" in err
