"""Reports of joined recordings and exports other tools read together.

`cat l40s.jsonl.gz a6000.jsonl.gz`: `summary` reports each machine apart, `export` and `compare` refuse
without `--part N`, `split` writes the parts out and never overwrites; Parquet files of any two
recordings share one schema (read together by duckdb and pyarrow.dataset); CSV text cells are escaped
against formula injection, numbers never."""

from __future__ import annotations

import csv
import gzip
import json
import resource
import signal
import subprocess
import sys

import pytest
from helpers import examples, record_sim
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuscope.cli.main import main
from gpuscope.cli.report import split_names
from gpuscope.cli.tables import FORMULA_START, column_types, column_unit, csv_cell
from gpuscope.core.model import DeviceInfo, EndpointReading, Frame, GpuReading, Inventory
from gpuscope.outputs.recorder import Recorder
from gpuscope.sources.recording import open_recording

NOTE = ("a second recording starts at frame 12 (different machine: sim-powercap 2× NVIDIA L40S → "
        "sim-a6000-tp2 2× NVIDIA RTX A6000)")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("joined")
    l40s = record_sim(d / "l40s.jsonl.gz", "power-capped", 12)
    a6000 = record_sim(d / "a6000.jsonl.gz", "a6000-tp2-pcie-gen1", 8)
    (d / "both.jsonl.gz").write_bytes(l40s.read_bytes() + a6000.read_bytes())
    return d


def run(capsys, *args):
    rc = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


def one_line_error(rc, err, *words):
    assert rc == 1 and "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    for w in words:
        assert w in lines[0], lines[0]


def test_summary_reports_each_machine_apart(files, capsys):
    rc, out, _ = run(capsys, "summary", files / "both.jsonl.gz")
    assert rc == 0
    assert out.splitlines()[0].endswith(f"2 parts, each summarised apart: {NOTE}")
    one, two = out.split("=== part 2 of 2 (--part 2): frames 12–19 ===")
    assert "=== part 1 of 2 (--part 1): frames 0–11 ===" in one
    assert "GPU0 NVIDIA L40S" in one and "RTX A6000" not in one.split("===")[-1] and "12 frames" in one
    assert "GPU0 NVIDIA RTX A6000" in two and "L40S" not in two.split("\n", 3)[-1] and "8 frames" in two
    # each part's numbers are the recording's own, never a mix
    _, alone, _ = run(capsys, "summary", files / "a6000.jsonl.gz")
    assert alone.split("GPU0", 1)[1] == two.split("GPU0", 1)[1]


def test_summary_json_parts(files, capsys):
    rc, out, _ = run(capsys, "summary", "--json", files / "both.jsonl.gz")
    doc = json.loads(out)
    assert rc == 0 and doc["schema"] == "gpuscope.summary-parts/1" and doc["notes"] == [NOTE]
    assert [p["frames"] for p in doc["parts"]] == [12, 8]
    assert [p["gpus"][0]["name"] for p in doc["parts"]] == ["NVIDIA L40S", "NVIDIA RTX A6000"]
    rc, out, _ = run(capsys, "summary", "--json", "--part", "2", files / "both.jsonl.gz")
    doc = json.loads(out)
    assert doc["schema"] == "gpuscope.summary/1" and doc["frames"] == 8 and doc["host"] == "sim-a6000-tp2"
    assert doc["notes"][0].startswith("part 2 of 2: frames 12–19 of the file (different machine")


@pytest.mark.parametrize("args", [["export", "{f}", "--csv", "{d}/x.csv"], ["compare", "{f}", "{a}"],
                                  ["compare", "{a}", "{f}", "--by-marker"], ["summary", "{f}", "--part", "3"]])
def test_commands_refuse_a_mix(files, capsys, args):
    f, a = files / "both.jsonl.gz", files / "a6000.jsonl.gz"
    rc, out, err = run(capsys, *[x.format(f=f, a=a, d=files) for x in args])
    # each command names its own option: compare has --part-a and --part-b, never --part
    option = {"compare": "--part-a" if args[1] == "{f}" else "--part-b"}.get(args[0], "--part")
    if "--part" in args:
        one_line_error(rc, err, "has 2 parts: no part 3")
    else:
        one_line_error(rc, err, NOTE, f"pick one with {option} N (1–2)", f"gpuscope split {f}")
    assert out == "" and not (files / "x.csv").exists()


def test_export_and_compare_take_a_part(files, capsys, tmp_path):
    rc, _, err = run(capsys, "export", files / "both.jsonl.gz", "--part", "2", "--csv", tmp_path / "p2.csv")
    assert rc == 0 and "wrote 16 rows (2 GPUs × 8 frames)" in err and "note:" in err and "part 2 of 2" in err
    rc, _, _ = run(capsys, "export", files / "a6000.jsonl.gz", "--csv", tmp_path / "alone.csv")
    assert (tmp_path / "p2.csv").read_text() == (tmp_path / "alone.csv").read_text()
    rc, out, _ = run(capsys, "compare", files / "both.jsonl.gz", files / "both.jsonl.gz", "--part-a", "1",
                     "--part-b", "2")
    assert rc == 0
    assert "note: GPU0 L40S vs RTX A6000" in out and "note: GPU1 L40S vs RTX A6000" in out
    rc, out, _ = run(capsys, "compare", files / "a6000.jsonl.gz", files / "a6000.jsonl.gz")
    assert "vs" not in out, "the same models: no note"


def test_split_writes_the_recordings_as_they_were_and_never_overwrites(files, capsys, tmp_path):
    rc, _, err = run(capsys, "split", files / "both.jsonl.gz", "--dir", tmp_path)
    assert rc == 0, err
    assert "wrote " + str(tmp_path / "both.part1.jsonl.gz") + ": part 1, 12 frames, sim-powercap 2× NVIDIA L40S" in err
    for k, name in ((1, "l40s"), (2, "a6000")):
        assert gzip.decompress((tmp_path / f"both.part{k}.jsonl.gz").read_bytes()) == \
            gzip.decompress((files / f"{name}.jsonl.gz").read_bytes())
    before = (tmp_path / "both.part2.jsonl.gz").read_bytes()
    (tmp_path / "both.part1.jsonl.gz").unlink()
    rc, _, err = run(capsys, "split", files / "both.jsonl.gz", "--dir", tmp_path)
    one_line_error(rc, err, "both.part2.jsonl.gz exists; split never overwrites")
    assert not (tmp_path / "both.part1.jsonl.gz").exists(), "nothing is written when any name is taken"
    assert (tmp_path / "both.part2.jsonl.gz").read_bytes() == before
    rc, _, err = run(capsys, "split", files / "a6000.jsonl.gz", "--dir", tmp_path)
    one_line_error(rc, err, "holds one machine's recording: nothing to split")


def test_split_of_an_uncompressed_file(files, capsys, tmp_path):
    src = tmp_path / "both.jsonl"
    src.write_bytes(gzip.decompress((files / "both.jsonl.gz").read_bytes()))
    rc, _, err = run(capsys, "split", src)
    assert rc == 0, err
    assert (tmp_path / "both.part2.jsonl").read_bytes() == gzip.decompress((files / "a6000.jsonl.gz").read_bytes())


def _file_size_limit(limit: int) -> None:  # as tests/sources/test_full_disk.py: the kernel cuts the write short
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # and the write fails (EFBIG), as on a full disk
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


@pytest.mark.slow
@pytest.mark.parametrize("ext", [".jsonl", ".jsonl.gz"])
def test_split_on_a_full_disk_leaves_no_half_written_part(files, tmp_path, ext):
    """A real `gpuscope split` under a file-size limit: the part it could not finish is removed (the plain
    `.jsonl` path left it half-written), and the error is one line."""
    src = tmp_path / f"both{ext}"
    raw = (files / "both.jsonl.gz").read_bytes()
    src.write_bytes(raw if ext.endswith(".gz") else gzip.decompress(raw))
    out = tmp_path / "out"
    out.mkdir()
    r = subprocess.run([sys.executable, "-m", "gpuscope", "split", str(src), "--dir", str(out)],
                       preexec_fn=lambda: _file_size_limit(1500), capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip().splitlines() == [f"gpuscope: error: cannot write {out / f'both.part1{ext}'}: File too large"]
    assert list(out.iterdir()) == []


@pytest.mark.parametrize("path, folder, names", [
    ("run.jsonl.gz", None, ["run.part1.jsonl.gz", "run.part2.jsonl.gz"]),
    ("d/run.jsonl", None, ["d/run.part1.jsonl", "d/run.part2.jsonl"]),
    ("d/run.gz", "o", ["o/run.part1.jsonl.gz", "o/run.part2.jsonl.gz"]),
    ("weird", None, ["weird.part1.jsonl.gz", "weird.part2.jsonl.gz"]),
    (".jsonl.gz", None, [".jsonl.part1.jsonl.gz", ".jsonl.part2.jsonl.gz"]),  # never an empty stem
])
def test_split_names(path, folder, names):
    assert split_names(path, 2, folder) == names


def test_resumed_recordings_are_joined_and_said(files, capsys, tmp_path):
    later = record_sim(tmp_path / "later.jsonl.gz", "a6000-tp2-pcie-gen1", 5, start=100.0)
    both = tmp_path / "resumed.jsonl.gz"
    both.write_bytes((files / "a6000.jsonl.gz").read_bytes() + later.read_bytes())
    rc, out, _ = run(capsys, "summary", both)
    assert rc == 0 and "13 frames" in out.splitlines()[0]
    assert "note: a second recording starts at frame 8 (same machine and GPUs: resumed after 1m33s; joined)" in out
    assert "problems" not in out and "damaged" not in out
    rc, _, err = run(capsys, "export", both, "--csv", tmp_path / "r.csv")
    assert rc == 0 and "2 GPUs × 13 frames" in err


OVERLAP = ("part 2 overlaps part 1 in time (a second recording starts at frame 8, 7s before part 1's last frame; "
           "same machine and GPUs): kept apart")


def test_a_recording_joined_to_itself_is_reported_per_part(files, capsys, tmp_path):
    """`cat a a`: the same frames twice are two parts (never one mean over both), and every report says so."""
    twice = tmp_path / "twice.jsonl.gz"
    twice.write_bytes((files / "a6000.jsonl.gz").read_bytes() * 2)
    rc, out, _ = run(capsys, "summary", twice)
    assert rc == 0 and out.splitlines()[0] == f"{twice}: 2 parts, each summarised apart: {OVERLAP}"
    assert out.count(", 8 frames") == 2 and "16 frames" not in out
    rc, out, _ = run(capsys, "summary", twice, "--json")
    assert [p["frames"] for p in json.loads(out)["parts"]] == [8, 8]
    rc, _, err = run(capsys, "export", twice, "--csv", tmp_path / "x.csv")
    one_line_error(rc, err, OVERLAP, "pick one with --part N (1–2)")
    rc, _, err = run(capsys, "compare", files / "a6000.jsonl.gz", twice)
    one_line_error(rc, err, OVERLAP, "pick one with --part-b N (1–2)")
    rc, _, err = run(capsys, "export", twice, "--part", "2", "--csv", tmp_path / "p2.csv")
    assert rc == 0 and "2 GPUs × 8 frames" in err and OVERLAP in err


# ------------------------------------------------------------------ compare: a probe on one side
@pytest.mark.slow  # records for about a second
def test_compare_says_which_side_has_no_probe(tmp_path, capsys):
    probed, plain = tmp_path / "probed.jsonl.gz", tmp_path / "plain.jsonl.gz"
    for path, extra in ((probed, ["--probe-links"]), (plain, [])):
        assert main(["record", "-o", str(path), "--simulate", "a6000-tp2-pcie-gen1", *extra, "--duration", "0.3",
                     "--interval", "0.1"]) == 0
    capsys.readouterr()
    for a, b, missing in ((probed, plain, "B"), (plain, probed, "A")):
        rc, out, _ = run(capsys, "compare", a, b)
        assert rc == 0 and "probe (GB/s)" in out
        line = next(x for x in out.splitlines() if x.startswith("GPU0 host→device"))
        assert line.endswith(f"no probe in {missing}") and "–" in line
        rc, out, _ = run(capsys, "compare", a, b, "--json")
        doc = json.loads(out)
        assert doc["probe_missing"] == missing and doc["probes"]
        assert all(r[f"{missing.lower()}_gb_per_s"] is None for r in doc["probes"])
    rc, out, _ = run(capsys, "compare", plain, plain, "--json")
    assert json.loads(out)["probes"] == [] and json.loads(out)["probe_missing"] is None


# ------------------------------------------------------------------ an output that cannot hold every character
@pytest.mark.parametrize("args", [["summary", "{f}"], ["compare", "{f}", "{f}", "--part-a", "1", "--part-b", "2"],
                                  ["summary", "{f}", "--by-marker"], ["scenarios"], ["export", "{f}", "--csv", "{d}/x.csv"]])
def test_an_ascii_output_degrades_never_fails(files, tmp_path, args):
    """`PYTHONIOENCODING=ascii` (or a C locale): gpuscope's own symbols ("→", "–", "×", "°") come out as their
    ASCII look-alikes ("Gen4x16", not "Gen4\\xd716"), anything else as an escape; the report is all there."""
    import os

    f, a = files / "both.jsonl.gz", files / "a6000.jsonl.gz"
    argv = [x.format(f=f, a=a, d=tmp_path) for x in args]
    p = subprocess.run([sys.executable, "-m", "gpuscope", *argv], capture_output=True, timeout=120,
                       env={**os.environ, "PYTHONIOENCODING": "ascii"})
    out, err = p.stdout.decode("ascii"), p.stderr.decode("ascii")  # ASCII through and through
    assert "internal error" not in err and "Traceback" not in err
    if argv[0] == "export":  # a mixed file: refused in one line, its dash escaped
        one_line_error(p.returncode, err, "pick one with --part N (1-2)")
    else:
        assert p.returncode == 0, err
        assert "\\u2192" not in out and "\\u2013" not in out and "\\xd7" not in out and "\\xb0" not in out


@pytest.mark.parametrize("text,want", [
    ("Gen4×16", "Gen4x16"), ("1–2", "1-2"), ("a → b", "a -> b"), ("69 °C", "69  degC"), ("…", "..."),
    ("≤ 0.5×", "<= 0.5x"), ("naïve", "na\\xefve"), ("日本", "\\u65e5\\u672c"), ("plain", "plain"),
])
def test_ascii_fallback_table(text, want):
    """What each character becomes on an ASCII-only output: gpuscope's own symbols as look-alikes, others escaped."""
    import codecs

    from gpuscope.cli.main import ascii_fallback

    codecs.register_error("gpuscope-ascii-test", ascii_fallback)
    assert text.encode("ascii", "gpuscope-ascii-test").decode() == want


# ------------------------------------------------------------------ endpoints in the text summary
def _serving_recording(path):
    inv = Inventory(host="srv", devices=(DeviceInfo(index=0, name="NVIDIA L40S", uuid="u0", bus_id="b0"),))
    r = Recorder(path, inv, interval_s=1.0, fsync=False)
    for i in range(5):
        r.write(Frame(t=1.7e9 + i, gpus=(GpuReading(index=0, util_gpu_pct=50.0),), endpoints=(
            EndpointReading(url="http://gpu1:8000", kind="vllm", model="llama", gen_tokens_per_s=100.0 + i,
                            kv_cache_pct=40.0, ttft_mean_s=0.2, itl_mean_s=0.0125),
            EndpointReading(url="http://gpu1:8001", kind="triton", model="=HYPERLINK(\"http://x\")",
                            kv_cache_pct=70.0, ttft_mean_s=0.35),  # Triton: no generated tok/s
            EndpointReading(url="-http://down:9", kind="tgi", up=False),
        )), wait=True)
    r.close()
    return path


def test_summary_lists_every_endpoint_with_what_is_known(tmp_path, capsys):
    rc, out, _ = run(capsys, "summary", _serving_recording(tmp_path / "s.jsonl.gz"))
    lines = [x for x in out.splitlines() if x.startswith("endpoint ")]
    assert rc == 0 and len(lines) == 3
    assert lines[0] == ("endpoint http://gpu1:8000 (vllm) llama: gen tok/s mean 102.0, p50 102.0, p95 103.8, max 104.0; "
                        "KV cache % mean 40; TTFT mean ms mean 200; ITL mean ms mean 12.5")
    assert lines[1] == 'endpoint http://gpu1:8001 (triton) =HYPERLINK("http://x"): KV cache % mean 70; TTFT mean ms mean 350'
    assert lines[2] == "endpoint -http://down:9 (tgi): no readings (unreachable, or no rate yet)"


# ------------------------------------------------------------------ a load probe that failed, in the summary
@pytest.mark.parametrize("row,want", [
    ({"readings": 30, "probe_failed": 12, "probe_errors": {"probe: HTTP 501": 12}},
     "probe failed in 12 of 30 readings: HTTP 501"),
    ({"readings": 1, "probe_failed": 1, "probe_errors": {"probe: no answer in 2 s": 1}},
     "probe failed in 1 of 1 reading: no answer in 2 s"),
    ({"readings": 20, "probe_failed": 14, "probe_errors": {"probe: HTTP 401 (needs a token?)": 10, "probe: HTTP 501": 4}},
     "probe failed in 14 of 20 readings: HTTP 401 (needs a token?) ×10, HTTP 501 ×4"),
    ({"readings": 9, "probe_failed": 9, "probe_errors": {"probe: a": 3, "probe: b": 2, "probe: c": 2, "d": 1, "e": 1}},
     "probe failed in 9 of 9 readings: a ×3, b ×2, c ×2 and 2 more"),
    ({"readings": 5, "probe_failed": 2, "probe_errors": {"probe: HTTP 404\x1b[2J (no such path)": 2}},
     "probe failed in 2 of 5 readings: HTTP 404 (no such path)"),  # text from a file: cleaned
    ({"probe_errors": {"probe: HTTP 501": 2}}, "probe failed in 2 readings: HTTP 501"),  # no count of readings
    ({"readings": 30, "probe_failed": 0, "probe_errors": {}}, None),  # the probe worked, or there is none
    ({"stats": {}}, None),  # a summary from before probe_errors
])
def test_probe_line(row, want):
    from gpuscope.cli.report import probe_line

    assert probe_line(row) == want


def test_summary_says_why_the_probe_failed(tmp_path, capsys):
    """`summary` (text and --json) says, per endpoint, that its load probe failed, why and in how many readings;
    an endpoint whose probe never failed says nothing of it."""
    path = tmp_path / "p.jsonl.gz"
    inv = Inventory(host="srv", devices=(DeviceInfo(index=0, name="NVIDIA L40S", uuid="u0", bus_id="b0"),))
    r = Recorder(path, inv, interval_s=1.0, fsync=False)
    for i in range(10):
        why = "probe: HTTP 501" if i < 6 else "probe: no answer in 2 s" if i < 8 else None
        r.write(Frame(t=1.7e9 + i, gpus=(GpuReading(index=0, util_gpu_pct=50.0),), endpoints=(
            EndpointReading(url="http://gpu1:8000", kind="vllm", model="llama", gen_tokens_per_s=100.0,
                            probe_error=why),
            EndpointReading(url="http://gpu1:8001", kind="vllm", model="qwen", gen_tokens_per_s=50.0),
        )), wait=True)
    r.close()
    rc, out, _ = run(capsys, "summary", path)
    lines = out.splitlines()
    at = next(k for k, x in enumerate(lines) if x.startswith("endpoint http://gpu1:8000"))
    assert rc == 0 and lines[at + 1] == "  probe failed in 8 of 10 readings: HTTP 501 ×6, no answer in 2 s ×2", out
    assert out.count("probe failed") == 1
    rc, out, _ = run(capsys, "summary", "--json", path)
    eps = {e["model"]: e for e in json.loads(out)["endpoints"]}
    assert (eps["llama"]["readings"], eps["llama"]["probe_failed"], eps["llama"]["probe_errors"]) == (
        10, 8, {"probe: HTTP 501": 6, "probe: no answer in 2 s": 2})
    assert (eps["qwen"]["readings"], eps["qwen"]["probe_failed"], eps["qwen"]["probe_errors"]) == (10, 0, {})


# ------------------------------------------------------------------ exports
@pytest.mark.parametrize("value, cell", [
    ("=1+1", "'=1+1"), ("+SUM(A1)", "'+SUM(A1)"), ("-cmd", "'-cmd"), ("@x", "'@x"), ("\tx", "'\tx"), ("\rx", "'\rx"),
    ("llama", "llama"), ("", ""), (None, ""), (-3.5, -3.5), (-7, -7), (0.0, 0.0), (True, True),
])
def test_csv_cell(value, cell):
    assert csv_cell(value) == cell


def test_csv_escapes_text_never_numbers(tmp_path, capsys):
    rec = _serving_recording(tmp_path / "s.jsonl.gz")
    rc, _, err = run(capsys, "export", rec, "--csv", tmp_path / "g.csv", "--serving", tmp_path / "e.csv")
    assert rc == 0, err
    rows = list(csv.DictReader((tmp_path / "e.csv").open()))
    assert [r["model"] for r in rows[:3]] == ["llama", "'=HYPERLINK(\"http://x\")", ""]
    assert rows[2]["url"] == "'-http://down:9"
    assert rows[0]["gen_tokens_per_s"] == "100.0" and rows[0]["t"] == "1700000000.0"


def test_negative_numbers_stay_numbers(tmp_path):
    """No reading in a recording is negative (the gate makes it unknown), so the rule is checked where it
    applies: a number cell of any sign is written as the number."""
    out = tmp_path / "n.csv"
    from gpuscope.cli.tables import write_table

    write_table(str(out), ["t", "x", "model"], [[1.0, -2.5, "-2.5"]], parquet=False)
    assert out.read_text().splitlines()[1] == "1.0,-2.5,'-2.5"


@pytest.mark.parametrize("column, kind, unit", [
    ("t", "timestamp", "UTC timestamp"), ("gpu", "int64", ""), ("lost", "bool", ""),
    ("util_gpu_pct", "float64", "%"), ("pstate", "int64", ""), ("pcie_rx_bytes_per_s", "float64", "bytes/s"),
    ("mem_used_bytes", "int64", "bytes"), ("sm_clock_mhz", "int64", "MHz"), ("power_w", "float64", "W"),
    ("temp_gpu_c", "float64", "°C"), ("energy_j", "float64", "J"), ("remap_pending", "float64", ""),
    ("gen_tokens_per_s", "float64", "tokens/s"), ("url", "string", ""), ("up", "bool", ""),
    ("resets", "int64", ""), ("ttft_mean_s", "float64", "s"), ("preemptions_per_min", "float64", "1/min"),
])
def test_column_types_and_units(column, kind, unit):
    assert column_types([column]) == {column: kind} and column_unit(column) == unit


def test_parquet_of_two_machines_read_together(files, tmp_path, capsys):
    pq = pytest.importorskip("pyarrow.parquet")
    ds = pytest.importorskip("pyarrow.dataset")
    duckdb = pytest.importorskip("duckdb")
    serving = _serving_recording(tmp_path / "s.jsonl.gz")
    for name, src in (("l40s", files / "l40s.jsonl.gz"), ("srv", serving)):
        rc, _, err = run(capsys, "export", src, "--parquet", tmp_path / f"{name}.parquet", "--serving",
                         tmp_path / f"{name}-serving.parquet")
        assert rc == 0, err
    # the L40S recording has no endpoint: its serving table is empty, its endpoint columns all unknown
    for a, b in (("l40s", "srv"), ("l40s-serving", "srv-serving")):
        sa, sb = pq.read_schema(tmp_path / f"{a}.parquet"), pq.read_schema(tmp_path / f"{b}.parquet")
        assert sa.remove_metadata() == sb.remove_metadata()
        assert "null" not in {str(f.type) for f in sa}
    sch = pq.read_schema(tmp_path / "l40s.parquet")
    assert str(sch.field("t").type) == "timestamp[us, tz=UTC]"
    meta = {k.decode(): v.decode() for k, v in sch.metadata.items()}
    assert meta["gpuscope.host"] == "sim-powercap" and meta["gpuscope.simulated"] == "true"
    assert meta["gpuscope.version"] and json.loads(meta["gpuscope.units"])["pcie_rx_bytes_per_s"] == "bytes/s"
    both = ds.dataset([str(tmp_path / "l40s.parquet"), str(tmp_path / "srv.parquet")]).to_table()
    assert both.num_rows == 24 + 5
    files_ = [str(tmp_path / "l40s.parquet"), str(tmp_path / "srv.parquet")]
    n, gen = duckdb.sql(f"select count(*), max(gen_tokens_per_s) from read_parquet({files_})").fetchall()[0]
    assert (n, gen) == (29, 104.0)
    sfiles = [str(tmp_path / "l40s-serving.parquet"), str(tmp_path / "srv-serving.parquet")]
    rows = duckdb.sql(f"select kind, avg(kv_cache_pct) from read_parquet({sfiles}) group by kind order by kind").fetchall()
    assert rows == [("tgi", None), ("triton", 70.0), ("vllm", 40.0)]
    # a UTC timestamp to duckdb (read as numbers: turning it into a Python datetime needs pytz on Python 3.10)
    kind, first_us = duckdb.sql(f"select typeof(min(t)), epoch_us(min(t)) from read_parquet('{files_[0]}')").fetchall()[0]
    assert kind == "TIMESTAMP WITH TIME ZONE"
    assert first_us / 1e6 == pytest.approx(open_recording(files / "l40s.jsonl.gz").times.min(), abs=1e-6)


@settings(derandomize=True, deadline=None, database=None, max_examples=examples(60))
@given(st.text(max_size=20))
def test_no_text_cell_starts_like_a_formula(text):
    cell = csv_cell(text)
    assert not cell.startswith(FORMULA_START)
    assert cell == text or cell == "'" + text, "escaping only adds the quote"


@settings(derandomize=True, deadline=None, database=None, max_examples=examples(50),
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.fixed_dictionaries({}, optional={
    "util_gpu_pct": st.floats(0, 100), "pstate": st.integers(0, 15), "mem_used_bytes": st.integers(0, 2**40),
    "remap_pending": st.booleans(), "pcie_gen": st.integers(1, 5)}), min_size=0, max_size=3))
def test_parquet_schema_does_not_depend_on_the_values(tmp_path, readings):
    """Whatever is known or unknown in a recording (here: any subset of readings, or no frame at all), its
    Parquet export has the one schema."""
    pq = pytest.importorskip("pyarrow.parquet")
    from gpuscope.cli.tables import write_table
    from gpuscope.core import catalogue
    from gpuscope.core.stats import export_rows

    frames = [Frame(t=1.7e9 + i, gpus=(GpuReading(index=0, **r),)) for i, r in enumerate(readings)]
    out, empty = tmp_path / "x.parquet", tmp_path / "empty.parquet"
    for path, rows in ((out, frames), (empty, [])):
        path.unlink(missing_ok=True)
        write_table(str(path), catalogue.export_columns(), export_rows(rows), parquet=True)
    assert pq.read_schema(out).remove_metadata() == pq.read_schema(empty).remove_metadata()
    assert pq.read_table(out).num_rows == len(readings)


def test_an_empty_recording_joined_is_no_part(files, capsys, tmp_path):
    """A `record` killed at once (its header alone), joined with `cat`: `summary` printed a part 2 of
    "frames 12–11" dated 1970 that `--part 2` could not open, and `split` wrote a file of 0 frames. It is a
    note now; `split` of a file with a real second part keeps its lines with part 1, as stored."""
    header = gzip.decompress((files / "a6000.jsonl.gz").read_bytes()).split(b"\n", 1)[0] + b"\n"
    f = tmp_path / "l40s-empty.jsonl.gz"
    f.write_bytes((files / "l40s.jsonl.gz").read_bytes() + gzip.compress(header))
    rc, out, _ = run(capsys, "summary", f)
    assert rc == 0 and "=== part" not in out and "1970" not in out and "problems" not in out
    assert ("note: a second recording at frame 12 holds no frames (different machine: sim-powercap 2× NVIDIA L40S → "
            "sim-a6000-tp2 2× NVIDIA RTX A6000; it did not close cleanly): skipped") in out
    rc, _, err = run(capsys, "summary", "--part", "2", f)
    one_line_error(rc, err, "has 1 part: no part 2")
    rc, _, err = run(capsys, "split", f, "--dir", tmp_path)
    one_line_error(rc, err, "holds one machine's recording: nothing to split")
    assert not list(tmp_path.glob("*.part*"))
    g = tmp_path / "three.jsonl.gz"
    g.write_bytes(f.read_bytes() + (files / "a6000.jsonl.gz").read_bytes())
    rc, out, _ = run(capsys, "summary", g)
    assert rc == 0 and "=== part 2 of 2 (--part 2): frames 12–19 ===" in out and "part 3" not in out
    rc, _, err = run(capsys, "split", g, "--dir", tmp_path)
    assert rc == 0 and "part 1, 12 frames" in err and "part 2, 8 frames" in err, err
    assert gzip.decompress((tmp_path / "three.part1.jsonl.gz").read_bytes()) == \
        gzip.decompress((files / "l40s.jsonl.gz").read_bytes()) + header
    assert gzip.decompress((tmp_path / "three.part2.jsonl.gz").read_bytes()) == \
        gzip.decompress((files / "a6000.jsonl.gz").read_bytes())


# ------------------------------------------------------------------ compare: each tok/s row names its endpoint
def _ep(url, model, mean):
    return {"url": url, "model": model, "stats": {"gen_tokens_per_s": {"mean": mean}} if mean is not None else {}}


@pytest.mark.parametrize("a,b,want", [
    ([_ep("http://h:8000", "m", 10.0)], [_ep("http://h:8000", "m", 20.0)], [("http://h:8000", "m", 10.0, 20.0)]),
    # the same servers in another order are still paired by URL and model (positions paired the wrong ones)
    ([_ep("http://h:8000", "m", 10.0), _ep("http://h:8001", "n", 5.0)],
     [_ep("http://h:8001", "n", 6.0), _ep("http://h:8000", "m", 11.0)],
     [("http://h:8000", "m", 10.0, 11.0), ("http://h:8001", "n", 5.0, 6.0)]),
    # one side only: the other side is unknown, never 0
    ([_ep("http://h:8000", "m", 10.0)], [_ep("http://h:9000", "x", 3.0)],
     [("http://h:8000", "m", 10.0, None), ("http://h:9000", "x", None, 3.0)]),
    ([], [], []),
])
def test_compare_pairs_endpoints_by_url_and_model(a, b, want):
    from gpuscope.cli.report import compare_endpoints

    got = [(r["url"], r["model"], r["a"], r["b"]) for r in compare_endpoints(a, b)]
    assert got == want


def test_split_makes_the_folder_it_is_asked_to_write_into(files, tmp_path, capsys):
    """`split FILE --dir DIR` with DIR not there yet said "No such file or directory"; it is made, as `mkdir -p`."""
    where = tmp_path / "new" / "parts"
    rc, _, err = run(capsys, "split", str(files / "both.jsonl.gz"), "--dir", str(where))
    assert rc == 0, err
    assert sorted(p.name for p in where.iterdir()) == ["both.part1.jsonl.gz", "both.part2.jsonl.gz"]
