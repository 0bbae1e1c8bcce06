"""The command line as a user meets it: output, exit codes, one-line errors without tracebacks."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT

from gpuscope.cli.main import EXIT_USAGE, build_parser, main


def gs(*args, env=None, input=None, timeout=60):
    e = {**os.environ, "NO_COLOR": "1", **(env or {})}
    return subprocess.run([sys.executable, "-m", "gpuscope", *args], capture_output=True, text=True, env=e,
                          input=input, timeout=timeout)


def one_line_error(p, *words):
    assert p.returncode != 0
    assert "Traceback" not in p.stderr
    lines = [x for x in p.stderr.splitlines() if x.strip()]
    assert len(lines) == 1, p.stderr
    for w in words:
        assert w in lines[0]


def test_scenarios_lists_the_shipped_ones():
    p = gs("scenarios")
    assert p.returncode == 0
    for name in ("a6000-tp2-pcie-gen1", "h200-nvswitch-8", "idle-downshift", "pcie-riser-errors", "gpu-lost",
                 "mixed-4"):
        assert name in p.stdout
    lines = p.stdout.splitlines()
    assert len({line.index(" GPU") for line in lines}) == 1, "the GPU-count column is aligned for every name"


def test_topo_design_story_text():
    p = gs("topo", "--simulate", "a6000-tp2-pcie-gen1", "--at", "30")
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert "SIMULATED" in out and "\x1b[" not in out  # plain when piped
    assert "SYS" in out and "Gen1×16" in out and "4.0 / 31.5 GB/s" in out
    assert "GPU0 PCIe Gen1×16 under load, GPU supports Gen4×16" in out


def test_topo_json_schema():
    p = gs("topo", "--json", "--simulate", "h200-nvswitch-8")
    doc = json.loads(p.stdout)
    assert doc["schema"] == "gpuscope.topo/1" and doc["simulated"] is True
    assert doc["matrix"][0][1] == "NV18" and doc["matrix"][3][3] == "X"
    g = doc["gpus"][0]
    assert g["pcie"]["gen_current"] == 5 and g["pcie"]["capacity_max_gb_per_s"] == pytest.approx(63.02)
    assert g["numa_node"] == 0 and g["nvlinks_active"] == 18
    assert doc["pairs"][0]["expected_gb_per_s"] == 450.0
    assert doc["findings"] == []


def test_topo_idle_downshift_is_only_info():
    doc = json.loads(gs("topo", "--json", "--simulate", "idle-downshift").stdout)
    assert [f["severity"] for f in doc["findings"]] == ["info"]
    assert "power-saving" in doc["findings"][0]["message"]


@pytest.mark.parametrize("args,words", [
    (["--bogus"], ["unrecognized arguments: --bogus"]),
    (["--simulat", "mixed-4"], ["unrecognized arguments: --simulat"]),  # no guessing from abbreviations
    (["topo", "--simulate", "nope"], ["unknown scenario 'nope'"]),
    (["--interval", "0.01", "--simulate", "mixed-4"], ["--interval", "between 0.1 and 3600"]),
    (["summary", "/no/such/file.jsonl.gz"], ["no such file"]),
    (["replay", "/no/such/file.jsonl.gz"], ["no such file"]),
    (["export", "/no/such.gz"], ["one of the arguments --csv --parquet is required"]),
    (["topo", "--at", "5"], ["--at needs --simulate"]),
    (["record", "--simulate", "mixed-4"], ["-o/--output"]),
])
def test_bad_input_is_one_line(args, words):
    one_line_error(gs(*args), *words)


def test_malformed_scenario_file_names_file_and_field(tmp_path):
    p = tmp_path / "mine.toml"
    p.write_text("[[gpus]]\ncount = 2\npcie_gen_gpu_max = 12\n")
    one_line_error(gs("topo", "--simulate", str(p)), "mine.toml", "gpus[0].pcie_gen_gpu_max")


def test_no_driver_suggests_simulate_or_demo():
    # CI machines have no NVIDIA driver; on a GPU machine this check is meaningless, so skip there
    try:
        import pynvml

        pynvml.nvmlInit()
        pytest.skip("this machine has an NVIDIA driver")
    except Exception:
        pass
    p = gs("topo")
    one_line_error(p, "no NVIDIA driver", "--simulate", "gpuscope demo")


def test_live_view_needs_a_terminal():
    one_line_error(gs("--simulate", "mixed-4"), "needs a terminal")


@pytest.mark.slow
def test_record_wraps_a_command_and_returns_its_status(tmp_path):
    out = tmp_path / "r.jsonl.gz"
    p = gs("record", "-o", str(out), "--simulate", "mixed-4", "--interval", "0.2", "--", sys.executable, "-c",
           "import os,time; time.sleep(0.6); open(os.environ['GPUSCOPE_MARKERS'],'w').write('phase: x\\n');"
           "time.sleep(0.6); raise SystemExit(7)")
    assert p.returncode == 7, p.stderr
    assert "recorded" in p.stderr and "SIMULATED" in p.stderr
    s = json.loads(gs("summary", str(out), "--json").stdout)
    texts = [m["text"] for m in s["markers"]]
    assert texts[0].startswith("start: ") and "phase: x" in texts and texts[-1] == "end: exit status 7"
    assert s["simulated"] is True and s["duration_s"] >= 1.0


@pytest.mark.slow
def test_record_duration_summary_export_compare(tmp_path):
    a, b = tmp_path / "a.jsonl.gz", tmp_path / "b.jsonl.gz"
    assert gs("record", "-o", str(a), "--simulate", "a6000-tp2-pcie-gen1", "--interval", "0.5", "--duration",
              "12").returncode == 0
    assert gs("record", "-o", str(b), "--simulate", "healthy-gen4", "--interval", "0.5", "--duration",
              "4").returncode == 0
    s = gs("summary", str(a))
    assert s.returncode == 0 and "GPU0 NVIDIA RTX A6000" in s.stdout and "PCIe link while busy: Gen1×16" in s.stdout
    c = gs("compare", str(a), str(b))
    assert c.returncode == 0 and "Gen1×16 → Gen4×16" in c.stdout
    csv_out = tmp_path / "a.csv"
    e = gs("export", str(a), "--csv", str(csv_out))
    assert e.returncode == 0
    rows = csv_out.read_text().splitlines()
    assert rows[0].startswith("t,gpu,lost,util_gpu_pct")
    assert len(rows) - 1 == 2 * json.loads(gs("summary", str(a), "--json").stdout)["frames"]


def test_record_to_unwritable_place_is_one_line():
    one_line_error(gs("record", "-o", "/proc/nope/x.gz", "--simulate", "mixed-4", "--duration", "1"), "cannot write")


@pytest.mark.slow
def test_export_parquet(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    rec = tmp_path / "r.jsonl.gz"
    assert gs("record", "-o", str(rec), "--simulate", "mixed-4", "--interval", "0.5", "--duration", "2").returncode == 0
    out = tmp_path / "r.parquet"
    p = gs("export", str(rec), "--parquet", str(out))
    assert p.returncode == 0, p.stderr
    t = pq.read_table(out)
    assert t.num_rows % 4 == 0 and t.num_rows >= 8 and "pcie_rx_bytes_per_s" in t.column_names


@pytest.mark.parametrize("a,b,unit,change", [
    (72.0, 76.0, "%", "+4 pt"), (50.0, 25.0, "%", "-25 pt"), (40.0, 40.0, "%", ""), (None, 3.0, "%", ""),
    (1500.0, 1980.0, "MHz", "+32 %"), (0.0, 5.0, "W", "new"), (0.0, 0.0, "W", ""), (200.0, 100.0, "GB/s", "-50 %"),
])
def test_compare_says_points_for_percentages_and_per_cent_for_quantities(a, b, unit, change):
    from gpuscope.cli.report import _pct, _points

    assert (_points(a, b) if unit == "%" else _pct(a, b)) == change


@pytest.mark.parametrize(("argv", "want"), [
    (["export", "r.jsonl.gz", "--json", "out.json"], "unrecognized arguments: --json out.json"),
    (["export", "r.jsonl.gz", "--csv", "a.csv", "--json", "b"], "unrecognized arguments: --json b"),
    (["export", "r.jsonl.gz", "--xlsx=out.xlsx"], "unrecognized arguments: --xlsx=out.xlsx"),
    (["summary", "--bogus"], "unrecognized arguments: --bogus"),
    (["compare", "a", "--csv", "x"], "unrecognized arguments: --csv"),  # x is taken as B
    (["record", "--bogus"], "unrecognized arguments: --bogus"),
    (["replay", "--nope"], "unrecognized arguments: --nope"),
    (["agent", "--x"], "unrecognized arguments: --x"),
    (["topo", "--x"], "unrecognized arguments: --x"),
    (["--x"], "unrecognized arguments: --x"),
    # what is missing is still said when nothing is unknown
    (["export", "r.jsonl.gz"], "one of the arguments --csv --parquet is required"),
    (["summary"], "the following arguments are required: file"),
    (["compare", "a", "--json"], "the following arguments are required: b"),
    (["record"], "the following arguments are required: -o/--output"),
    (["export", "r.jsonl.gz", "--csv"], "argument --csv: expected one argument"),
    (["record", "-o", ""], "argument -o/--output: an empty path names no file"),  # was ". is a directory"
    (["export", "r.jsonl.gz", "--csv", " "], "argument --csv: an empty path names no file"),
])
def test_unknown_flags_are_called_unknown(capsys, argv, want):
    """An unknown flag is reported as unknown (argparse's "unrecognized arguments", exit 2, one line), before any
    required argument it may have stood in for: ``export FILE --json OUT`` must not say that one of --csv
    --parquet is required."""
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err
    assert e.value.code == EXIT_USAGE
    assert err.count("\n") == 1 and err.startswith(f"gpuscope: error: {want} (see `gpuscope"), err


def test_the_unknown_flag_check_puts_required_back(capsys):
    """An unknown flag is reported as unknown (argparse's "unrecognized arguments", exit 2, one line), before any
    required argument it may have stood in for: ``export FILE --json OUT`` must not say that one of --csv
    --parquet is required.

    The check relaxes 'required' for a moment: the same parser must require it again afterwards."""
    export = build_parser()["export"]
    assert export.unknown_arguments(["r.jsonl.gz", "--json", "x"]) == ["--json", "x"]
    with pytest.raises(SystemExit):
        export.parse_args(["r.jsonl.gz"])
    assert "one of the arguments --csv --parquet is required" in capsys.readouterr().err
    assert export.parse_args(["r.jsonl.gz", "--csv", "o.csv"]).csv == "o.csv"


@pytest.mark.parametrize(("argv", "want"), [
    (["summry", "r.jsonl.gz"], "unknown command 'summry': did you mean 'summary'?"),
    (["bogus"], "unknown command 'bogus': commands are topo, scenarios, record"),
    (["reccord", "-o", "x"], "did you mean 'record'?"),
    (["\x1b]0;title\x07top"], "unknown command 'top'"),  # cleaned before it reaches the terminal
])
def test_an_unknown_command_is_called_a_command(capsys, argv, want):
    """An unknown command is called an unknown command (with the nearest one, or the list), never an unknown
    flag, in one line with its escape sequences cleaned."""
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == EXIT_USAGE
    err = capsys.readouterr().err
    assert want in err and err.count("\n") == 1 and "\x1b" not in err and "unrecognized" not in err


@pytest.mark.parametrize("word", ["", "--simulate", "-h", "summary", "record", "agent"])
def test_commands_and_flags_are_not_unknown_commands(word):
    """A command, a flag or nothing at all is never taken for an unknown command."""
    from gpuscope.cli.main import unknown_command

    assert unknown_command(word) is None


DEMO = next((ROOT / "recordings").glob("*.jsonl.gz"))


def damaged_copy(tmp_path: Path, every: int) -> Path:
    """The demo with every ``every``-th frame's GPU list replaced by a number (the validation gate fails)."""
    out, k = [], 0
    for ln in gzip.open(DEMO, "rt").read().splitlines():
        if '"gpus":[' in ln:
            if k % every == 0:
                ln = ln.replace('"gpus":[', '"gpus":7,"g":[', 1)
            k += 1
        out.append(ln)
    p = tmp_path / f"damaged-{every}.jsonl.gz"
    with gzip.open(p, "wt") as f:
        f.write("\n".join(out) + "\n")
    return p


def gpuscope(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuscope", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("command", [["summary", "{f}"], ["export", "{f}", "--csv", "{out}"],
                                     ["compare", str(DEMO), "{f}"]])
def test_every_frame_damaged_is_one_error(tmp_path, command):
    """A recording whose every frame is damaged (valid JSON, wrong types) is one error for summary, export and
    compare (it said "0 frames" and exited 0); one with some damaged frames still opens and says
    how many, in one readable line."""
    f = damaged_copy(tmp_path, 1)
    out = gpuscope(*[a.replace("{f}", str(f)).replace("{out}", str(tmp_path / "o.csv")) for a in command])
    assert out.returncode == 1, out
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "no frame can be read" in lines[0] and "frame.gpus" in lines[0], out.stderr
    assert not (tmp_path / "o.csv").exists()


def test_some_damaged_frames_still_open_in_one_line(tmp_path):
    """A recording whose every frame is damaged (valid JSON, wrong types) is one error for summary, export and
    compare (it said "0 frames" and exited 0); one with some damaged frames still opens and says
    how many, in one readable line."""
    f = damaged_copy(tmp_path, 3)  # a third of the frames
    out = gpuscope("summary", str(f))
    assert out.returncode == 0, out.stderr
    problems = [ln for ln in out.stdout.splitlines() if ln.startswith("problems:")]
    assert len(problems) == 1 and "more" in problems[0] and len(problems[0]) < 1200, problems


def test_export_and_compare_say_an_input_was_cut_off(tmp_path):
    """A recording whose every frame is damaged (valid JSON, wrong types) is one error for summary, export and
    compare (it said "0 frames" and exited 0); one with some damaged frames still opens and says
    how many, in one readable line.

    `summary` said a file was cut off; export and compare said nothing (their means are of what survived)."""
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(DEMO.read_bytes()[:5000])
    out = gpuscope("export", str(cut), "--csv", str(tmp_path / "o.csv"))
    assert out.returncode == 0 and "cut off" in out.stderr and out.stderr.count("\n") == 2, out.stderr
    out = gpuscope("compare", str(DEMO), str(cut))
    assert out.returncode == 0 and any(ln.startswith("note: B:") and "cut off" in ln for ln in out.stdout.splitlines())


def test_settle_gc_freezes_the_survivors_and_raises_the_thresholds():
    """core/gc_tune.py: after start-up the collector passes every ~20 s instead of every second (0.35 → 0.1 ms
    of CPU a second on the live screen); what was alive then is never traversed again."""
    import gc

    from gpuscope.core.gc_tune import GC_THRESHOLD, settle_gc

    assert gc.get_freeze_count() == 0
    settle_gc()
    assert gc.get_threshold() == GC_THRESHOLD and gc.get_freeze_count() > 1000
    cycle: list[object] = []
    cycle.append(cycle)
    del cycle
    assert gc.collect() >= 1  # what becomes garbage after the freeze is still collected


def test_what_was_frozen_goes_once_the_screen_is_over(monkeypatch):
    """Frozen objects are never collected: run_app unfreezes when its App ends, so the fleet's next visit (a new
    App each time) can collect the one before (an App and its feeder hold each other: a cycle)."""
    import gc
    import weakref

    from gpuscope.tui import base

    class App:
        crash = None
        return_code = 0

        def run(self):
            assert gc.get_freeze_count() > 0  # frozen while it runs
            return "done"

    app = App()
    app.me = app  # the cycle
    ref = weakref.ref(app)
    assert base.run_app(app) == "done" and gc.get_freeze_count() == 0
    del app
    gc.collect()
    assert ref() is None
