"""An unknown flag is reported as unknown (argparse's "unrecognized arguments", exit 2, one line), before
any required argument it may have stood in for: ``export FILE --json OUT`` must not say that one of
--csv --parquet is required."""

from __future__ import annotations

import pytest

from gpuscope.cli.main import EXIT_USAGE, build_parser, main


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
    with pytest.raises(SystemExit) as e:
        main(argv)
    err = capsys.readouterr().err
    assert e.value.code == EXIT_USAGE
    assert err.count("\n") == 1 and err.startswith(f"gpuscope: error: {want} (see `gpuscope"), err


def test_the_unknown_flag_check_puts_required_back(capsys):
    """The check relaxes 'required' for a moment: the same parser must require it again afterwards."""
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
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == EXIT_USAGE
    err = capsys.readouterr().err
    assert want in err and err.count("\n") == 1 and "\x1b" not in err and "unrecognized" not in err


@pytest.mark.parametrize("word", ["", "--simulate", "-h", "summary", "record", "agent"])
def test_commands_and_flags_are_not_unknown_commands(word):
    from gpuscope.cli.main import unknown_command

    assert unknown_command(word) is None
