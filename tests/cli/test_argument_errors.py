"""Argument errors: one line that says what is wrong with the value given (not merely that it is wrong), and exit
status 2 as argparse gives for every other argument error. Tables of cases for the small functions, then the
command line itself."""

from __future__ import annotations

import argparse

import pytest

from gpuscope.cli import probe_args as cli_probe
from gpuscope.cli.agent_id import name_problem
from gpuscope.cli.main import main
from gpuscope.outputs.prometheus import hostname_label_problem

MiB = 1 << 20


# ---- probe --gpus ----

@pytest.mark.parametrize("text,want", [
    ("0", [0]), ("0,1", [0, 1]), (" 3 , 1 ", [3, 1]), ("0,,1", [0, 1]), ("4095", [4095]), ("007", [7]),
])
def test_gpu_list_accepts(text, want):
    assert cli_probe.gpu_list(text) == want


@pytest.mark.parametrize("text,msg", [
    ("0,0", "GPU 0 given twice"), ("1,2,1", "GPU 1 given twice"), ("0,00", "GPU 0 given twice"),
    ("", "no GPU given"), (",", "no GPU given"), ("x", "not a GPU index: 'x'"), ("-1", "not a GPU index: '-1'"),
    ("4096", "not a GPU index: '4096'"), ("1.5", "not a GPU index: '1.5'"), ("٣", "not a GPU index: '٣'"),
    ("GPU0", "not a GPU index: 'GPU0'"),
])
def test_gpu_list_says_what_is_wrong(text, msg):
    with pytest.raises(argparse.ArgumentTypeError) as e:
        cli_probe.gpu_list(text)
    assert str(e.value).startswith(msg) and "\n" not in str(e.value)


# ---- probe --max-memory ----

@pytest.mark.parametrize("text,want", [("8M", 8 * MiB), ("8388608", 8 * MiB), ("1G", 1 << 30), ("0.5G", 512 * MiB)])
def test_memory_size_accepts(text, want):
    assert cli_probe.memory_size(text) == want


@pytest.mark.parametrize("text,msg", [
    ("0", "'0' is below the minimum, 8M"), ("1", "'1' is below the minimum, 8M"),
    ("1K", "'1K' is below the minimum, 8M"), ("8388607", "is below the minimum, 8M"), ("7.9M", "below the minimum"),
    ("-1G", "'-1G' is below the minimum"), ("lots", "not a size: 'lots'"), ("1T", "not a size: '1T'"),
    ("nan", "not a size"), ("inf", "not a size"), ("", "not a size"), ("1e20", "more than 1 PiB"),
])
def test_memory_size_says_what_is_wrong(text, msg):
    with pytest.raises(argparse.ArgumentTypeError) as e:
        cli_probe.memory_size(text)
    assert msg in str(e.value) and "\n" not in str(e.value)


def test_the_minimum_is_what_the_probe_needs():
    """The smallest size the flag accepts is one the probe can plan with, and one below is not."""
    from gpuscope.core import probe as P

    assert P.copy_bytes_for(cli_probe.MIN_MAX_MEMORY) == P.MIN_COPY_BYTES
    with pytest.raises(P.ProbeError):
        P.copy_bytes_for(cli_probe.MIN_MAX_MEMORY - 1)


# ---- agent --name ----

@pytest.mark.parametrize("name,msg", [
    ("gpu-07", None), ("node_1.rack-2", None), ("x" * 128, None),
    ("héllo", "'é' is not allowed: ASCII letters, digits, '.', '_' and '-' only"),
    ("two words", "a space is not allowed"), ("a/b", "'/' is not allowed"), ("#", "'#' is not allowed"),
    ("gpu\x1b[2J", "'␛' is not allowed"), ("gpu\n07", "'␊' is not allowed"), ("", "empty: ASCII letters"),
    ("x" * 129, "129 characters: ASCII letters, digits, '.', '_' and '-' only, at most 128"),
])
def test_name_problem(name, msg):
    got = name_problem(name)
    assert got is None if msg is None else (got is not None and got.startswith(msg) and got.isprintable()), got


# ---- agent --prometheus-hostname-label ----

@pytest.mark.parametrize("key,msg", [
    ("Hostname", None), ("hostname", None), ("node", None), ("_host", None),
    ("instance", "Prometheus sets 'instance' itself"), ("job", "Prometheus sets 'job' itself"),
    ("__name__", "names starting with '__' are reserved"), ("__address__", "reserved"), ("__x", "reserved"),
    ("a-b", "not a valid Prometheus label name"), ("2x", "not a valid"), ("", "not a valid"), ("hôte", "not a valid"),
    ("gpu", "another DCGM label's key"), ("UUID", "another DCGM label's key"),
])
def test_hostname_label_problem(key, msg):
    got = hostname_label_problem(key)
    assert got is None if msg is None else (got is not None and msg in got), got


# ---- the command line: one line, exit status 2 ----

@pytest.mark.parametrize("argv,line", [
    (["probe", "--simulate", "mixed-4", "--gpus", "0,0"], "argument --gpus: GPU 0 given twice"),
    (["probe", "--simulate", "mixed-4", "--max-memory", "0"], "argument --max-memory: '0' is below the minimum, 8M"),
    (["probe", "--simulate", "mixed-4", "--max-memory", "1"], "argument --max-memory: '1' is below the minimum, 8M"),
    (["probe", "--simulate", "mixed-4", "--max-memory", "1K"], "argument --max-memory: '1K' is below the minimum"),
    (["agent", "--simulate", "mixed-4", "--prometheus", "0", "--name", "héllo"],
     "argument --name: 'héllo': 'é' is not allowed: ASCII letters, digits, '.', '_' and '-' only"),
    (["agent", "--simulate", "mixed-4", "--prometheus", "0", "--name", "rack/7"],
     "argument --name: 'rack/7': '/' is not allowed"),
    (["agent", "--simulate", "mixed-4", "--prometheus", "0", "--prometheus-hostname-label", "instance"],
     "argument --prometheus-hostname-label: 'instance': Prometheus sets 'instance' itself"),
    (["agent", "--simulate", "mixed-4", "--prometheus", "0", "--prometheus-hostname-label", "job"],
     "argument --prometheus-hostname-label: 'job': Prometheus sets 'job' itself"),
    (["agent", "--simulate", "mixed-4", "--prometheus", "0", "--prometheus-hostname-label", "__meta_x"],
     "argument --prometheus-hostname-label: '__meta_x': names starting with '__' are reserved"),
])
def test_argument_errors_are_one_line_exit_2(capsys, argv, line):
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.startswith(f"gpuscope: error: {line}"), err
    assert err.count("\n") == 1 and "Traceback" not in err
