"""The command registry and each command's typed options (cli/options.py): built from the parsed flags in
one place, flag combinations argparse cannot check refused there with the user's one line."""

from __future__ import annotations

import dataclasses

import pytest

from gpuscope.cli import main as cli_main
from gpuscope.cli.options import LiveOptions, ReplayOptions
from gpuscope.core.errors import GpuscopeError


def _options(argv: list[str]):
    cmd = argv[0] if argv and argv[0] in cli_main.COMMANDS else ""
    ns = cli_main.build_parser()[cmd].parse_args(argv[1:] if cmd else argv)
    return cli_main._BY_NAME[cmd].options(ns)


def test_every_command_has_one_entry_and_a_parser():
    names = [c.name for c in cli_main.REGISTRY]
    assert len(names) == len(set(names)) and names[0] == ""
    assert cli_main.COMMANDS == ("topo", "scenarios", "record", "replay", "demo", "summary", "export", "compare",
                                 "split", "agent", "probe")
    assert cli_main.TUI_COMMANDS == ("", "replay", "demo")
    assert set(cli_main.build_parser()) == {"", *cli_main.COMMANDS}


@pytest.mark.parametrize("argv", [["topo"], ["scenarios"], ["record", "-o", "x", "--", "sleep", "1"],
                                  ["replay", "f"], ["demo"], ["summary", "f"], ["export", "f", "--csv", "o"],
                                  ["compare", "a", "b"], ["agent", "--prometheus"], ["--compact"]])
def test_options_are_frozen(argv):
    opts = _options(argv)
    assert dataclasses.is_dataclass(opts)
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.x = 1  # type: ignore[attr-defined]


@pytest.mark.parametrize(("argv", "message"), [
    (["topo", "--at", "5"], "--at needs --simulate"),
    (["record", "-o", "x", "--broker", "mqtt://h"], "record --broker needs --host HOST"),
    (["record", "-o", "x", "--probe", "5"], "--probe needs --endpoint URL"),
    (["record", "-o", "x", "--endpoint-header", "NoColon"], "--endpoint-header needs --endpoint URL"),
    (["record", "-o", "x", "--endpoint-header", "X-Key: k"], "--endpoint-header needs --endpoint URL"),
    (["record", "-o", "x", "--endpoint", "ftp://x"], "--endpoint 'ftp://x': expected"),
    (["record", "-o", "x", "--endpoint", "http://h:1", "--endpoint-header", "bad"], "bad header in --endpoint-header:"),
    (["agent"], "agent needs --broker URL, --prometheus [HOST:]PORT, or both"),
    (["agent", "--prometheus", "1.2.3"], "--prometheus '1.2.3': the port must be a number"),
    (["export", "f", "--csv", "o", "--serving", "o"], "--serving needs a path of its own"),
    (["export", "f", "--csv", "-", "--serving", "-"], "only one of the two tables can go to stdout"),
])
def test_flag_combinations_are_refused_in_one_line(argv, message):
    with pytest.raises(GpuscopeError) as e:
        _options(argv)
    assert str(e.value).startswith(message) and "\n" not in str(e.value)


def test_source_flags_are_not_checked_where_they_are_not_used():
    """``record --broker`` and the fleet screen sample nothing: their source flags are not refused."""
    assert _options(["record", "-o", "x", "--broker", "mqtt://h", "--host", "a", "--probe", "3"]).host == "a"
    assert _options(["--broker", "mqtt://h", "--probe", "3"]).source.probe == 3


def test_record_options_drop_the_separator_and_parse_headers(monkeypatch):
    monkeypatch.setenv("GPUSCOPE_ENDPOINT_TOKEN", "t0k")
    opts = _options(["record", "-o", "x", "--endpoint", "http://h:1", "--endpoint-header", "A: b", "--", "sleep", "1"])
    assert opts.cmd == ("sleep", "1")
    assert dict(opts.source.headers) == {"A": "b", "Authorization": "Bearer t0k"}
    assert "t0k" not in repr(opts)


def test_the_tui_takes_the_typed_options():
    """run_live / run_replay / run_fleet take the options themselves (no flat Namespace in between)."""
    live = _options(["--simulate", "mixed-4", "--interval", "0.5", "--compact", "--record", "r.jsonl.gz"])
    assert isinstance(live, LiveOptions)
    assert (live.source.simulate, live.source.interval, live.source.pcie_source, live.compact, live.record,
            live.force, live.history, live.broker.broker, live.host, live.broker.topic_prefix) == (
        "mixed-4", 0.5, "auto", True, "r.jsonl.gz", False, "1m", None, None, "gpuscope")
    demo = _options(["demo", "--speed", "2"])
    assert demo == ReplayOptions(file=None, speed=2.0, compact=False)


def test_the_live_view_checks_the_terminal_before_its_source_flags(monkeypatch, capsys):
    """``gpuscope --probe 3`` without a terminal: "the live view needs a terminal", as before the typed options
    (the source flags are checked by run_live after the terminal check); with one, the flags are refused."""
    assert _options(["--probe", "3"]).source.probe == 3  # built, not yet checked
    monkeypatch.setattr("sys.stdout.isatty", lambda: False)
    assert cli_main.main(["--probe", "3"]) == 1
    assert "the live view needs a terminal" in capsys.readouterr().err
    from gpuscope.tui import run

    monkeypatch.setattr(run, "check_terminal", lambda: None)
    assert cli_main.main(["--probe", "3"]) == 2  # refused before any source is opened
    assert "--probe needs --endpoint URL" in capsys.readouterr().err
