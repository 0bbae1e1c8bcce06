"""The ``gpuscope`` command line. Every error is one line on stderr and a non-zero exit."""

from __future__ import annotations

import argparse
import codecs
import difflib
import importlib
import logging
import os
import sys
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, Generic, NoReturn, TypeVar, cast

from gpuscope import __version__
from gpuscope.cli import logs
from gpuscope.cli.options import (
    AgentOptions,
    CompareOptions,
    ExportOptions,
    LiveOptions,
    NoOptions,
    ProbeOptions,
    RecordOptions,
    ReplayOptions,
    SourceOptions,
    SplitOptions,
    SummaryOptions,
    TopoOptions,
)
from gpuscope.core.errors import SHOWN, GpuscopeError, one_line
from gpuscope.core.text import clean

log = logging.getLogger("gpuscope.cli")
EXIT_USAGE = 2
EXIT_FAIL = 1


class _Parser(argparse.ArgumentParser):
    """One-line errors; no abbreviated flags (a typo like --simulat is an error, not a guess)."""

    def __init__(self, *a: object, **kw: object) -> None:
        kw.setdefault("allow_abbrev", False)
        super().__init__(*a, **kw)  # type: ignore[arg-type]

    def parse_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                   namespace: argparse.Namespace | None = None) -> argparse.Namespace:
        """argparse's parse, except that an unknown flag is reported as unknown before any missing
        required one (``export FILE --json OUT`` is "unrecognized arguments: --json OUT", not "one of
        --csv --parquet is required", which sends the user looking for the wrong fix)."""
        if unknown := self.unknown_arguments(args):
            self.error(f"unrecognized arguments: {' '.join(unknown)}")
        return super().parse_args(args, namespace)

    def unknown_arguments(self, args: Sequence[str] | None) -> list[str]:
        """The arguments this parser does not know, found with every argument treated as optional."""
        actions = [(a, a.required) for a in self._actions]
        groups = [(g, g.required) for g in self._mutually_exclusive_groups]
        try:
            for a, _ in actions:
                a.required = False
            for g, _ in groups:
                g.required = False
            _ns, extras = super().parse_known_args(args, argparse.Namespace())
        finally:
            for a, req in actions:
                a.required = req
            for g, req in groups:
                g.required = req
        return extras

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"gpuscope: error: {message} (see `{self.prog} --help`)\n")
        raise SystemExit(EXIT_USAGE)


def unknown_command(word: str) -> str | None:
    """The error for a first argument that is neither a command nor a flag (``gpuscope summry F``), naming the
    nearest command when one is close; None when ``word`` is a command or a flag. argparse would say
    "unrecognized arguments: summry F", which does not say that the command was the problem."""
    if not word or word.startswith("-") or word in COMMANDS:
        return None
    near = difflib.get_close_matches(word, COMMANDS, n=1, cutoff=0.6)
    hint = f"did you mean '{near[0]}'? " if near else ""
    return f"unknown command '{clean(word, 40)}': {hint}commands are {', '.join(COMMANDS)}"


# ------------------------------------------------------------------ the commands
# Each runner imports what it needs when it runs, not at module level: `gpuscope topo` need not load NVML's
# pool, MQTT or HTTP, and no headless command may load Textual (tests/test_layout.py).

def lazy(module: str, name: str) -> Callable[[Any], int]:
    """The runner of a command that is one function of one module, imported only when the command runs:
    ``lazy("gpuscope.cli.report", "run_summary")`` calls ``run_summary(options)`` and returns its exit status."""

    def run(options: Any) -> int:
        return cast(int, getattr(importlib.import_module(module), name)(options))

    return run


def _run_live(o: LiveOptions) -> int:
    if o.broker.broker:
        from gpuscope.tui.fleet import run_fleet

        return run_fleet(o.broker.config, o.host, o.source.interval)
    if not o.source.endpoint:  # no server to poll: no TLS connection (tui/no_tls.py)
        from gpuscope.tui.no_tls import load_asyncio_without_tls

        load_asyncio_without_tls()
    from gpuscope.tui.run import run_live

    def open_checked() -> tuple[Any, float]:
        source = o.source.checked()
        return _open(source), source.interval

    return run_live(open_checked, record=o.record, force=o.force, history=o.history, compact=o.compact)


def _run_topo(o: TopoOptions) -> int:
    from gpuscope.cli.topo import run_topo
    from gpuscope.sources.live import open_source

    src = open_source(o.simulate, virtual_at=(o.at or 0.0) if o.simulate else None)
    try:
        return run_topo(src, o.json)
    finally:
        src.close()


def _run_scenarios(_: NoOptions) -> int:
    from gpuscope.sources.scenario import load, shipped

    names = sorted(shipped())
    width = max((len(n) for n in names), default=0)  # the longest name sets the column: descriptions align
    for name in names:
        sc = load(name)
        print(f"{name:<{width}}  {len(sc.gpus)} GPU{'s' if len(sc.gpus) > 1 else ' '}  {clean(sc.description, 200)}")
    return 0


def _run_record(o: RecordOptions) -> int:
    if o.broker_config is not None:
        from gpuscope.cli.agent import run_remote_record

        return run_remote_record(o)
    from gpuscope.cli.record import run_record

    return run_record(o, _open)


def _run_replay(o: ReplayOptions) -> int:
    from gpuscope.tui.no_tls import load_asyncio_without_tls

    load_asyncio_without_tls()  # a replay opens no connection (tui/no_tls.py)
    from gpuscope.tui.run import run_replay

    return run_replay(o.file, part=o.part, speed=o.speed, compact=o.compact)


def _run_agent(o: AgentOptions) -> int:
    from gpuscope.cli.agent import run_agent

    return run_agent(o, _open)


OptionsT = TypeVar("OptionsT")


@dataclass(frozen=True)
class Command(Generic[OptionsT]):
    """One command of the command line: a new command is one entry in :data:`REGISTRY`."""

    name: str  # the word after `gpuscope`; "" for the live view (no command word)
    description: str  # the description in its --help
    arguments: Callable[[argparse.ArgumentParser], None]  # adds its flags (--log-file is added to every one)
    options: Callable[[argparse.Namespace], OptionsT]  # the typed options from the parsed flags, checked
    run: Callable[[OptionsT], int]  # runs it; returns the exit status
    draws: bool = False  # a TUI: draws on the terminal, so nothing else may write to it meanwhile


# The order is the order of the command list in `gpuscope --help` and in the unknown-command error.
REGISTRY: tuple[Command[Any], ...] = (
    Command("", "Terminal monitor for GPU servers running LLM inference.",
            LiveOptions.add_arguments, LiveOptions.from_namespace, _run_live, draws=True),
    Command("topo", "The nvidia-smi topo -m matrix, PCIe link table and topology findings.",
            TopoOptions.add_arguments, TopoOptions.from_namespace, _run_topo),
    Command("scenarios", "List the shipped simulation scenarios.",
            NoOptions.add_arguments, NoOptions.from_namespace, _run_scenarios),
    Command("record", "Record headless; with -- CMD, for exactly the command's life.",
            RecordOptions.add_arguments, RecordOptions.from_namespace, _run_record),
    Command("replay", "Replay a recording in the TUI.",
            ReplayOptions.add_arguments, ReplayOptions.from_namespace, _run_replay, draws=True),
    Command("demo", "Replay the real H200 recording that ships with gpuscope.",
            ReplayOptions.add_demo_arguments, ReplayOptions.from_namespace, _run_replay, draws=True),
    Command("summary", "Statistics of a recording.",
            SummaryOptions.add_arguments, SummaryOptions.from_namespace, lazy("gpuscope.cli.report", "run_summary")),
    Command("export", "One row per GPU per frame.",
            ExportOptions.add_arguments, ExportOptions.from_namespace, lazy("gpuscope.cli.report", "run_export")),
    Command("compare", "Two recordings side by side.",
            CompareOptions.add_arguments, CompareOptions.from_namespace, lazy("gpuscope.cli.report", "run_compare")),
    Command("split", "Write each recording of a file that joins several (cat a b) to a file of its own.",
            SplitOptions.add_arguments, SplitOptions.from_namespace, lazy("gpuscope.cli.report", "run_split")),
    Command("agent", "Publish this machine's frames, findings and inventory to an MQTT broker (topics: "
            "docs/mqtt.md), serve them to Prometheus (docs/prometheus.md), or both.",
            AgentOptions.add_arguments, AgentOptions.from_namespace, _run_agent),
    Command("probe", "Measure what each link delivers beside its ceiling.",
            ProbeOptions.add_arguments, ProbeOptions.from_namespace, lazy("gpuscope.cli.probe", "run_probe")),
)
_BY_NAME = {c.name: c for c in REGISTRY}
COMMANDS = tuple(c.name for c in REGISTRY if c.name)
TUI_COMMANDS = tuple(c.name for c in REGISTRY if c.draws)  # these draw on the terminal: nothing else may write to it meanwhile


def build_parser(names: Collection[str] | None = None) -> dict[str, argparse.ArgumentParser]:
    """One parser per command, keyed by its name ("" for the live view); only those in ``names`` when given
    (``main`` builds the one it runs and the live view's, for its errors: building ``probe``'s loads
    ``cli/probe.py``, which the live screen would otherwise carry)."""
    p: dict[str, argparse.ArgumentParser] = {}
    for c in REGISTRY:
        if names is not None and c.name not in names:
            continue
        if c.name:
            parser = _Parser(prog=f"gpuscope {c.name}", description=c.description)
        else:
            parser = _Parser(prog="gpuscope", description=f"{c.description} Commands: {', '.join(COMMANDS)} "
                             "(each takes --help).")
            parser.add_argument("--version", action="version", version=f"gpuscope {__version__}")
        c.arguments(parser)
        parser.add_argument("--log-file", metavar="PATH",
                            help="log to this file (or GPUSCOPE_LOG=PATH[:LEVEL]; level also GPUSCOPE_LOG_LEVEL)")
        p[c.name] = parser
    return p


def _global_log_file(argv: list[str]) -> str | None:
    """Take a ``--log-file PATH`` given before the command word (``gpuscope --log-file x record …``)."""
    path = None
    while argv and (argv[0] == "--log-file" or argv[0].startswith("--log-file=")):
        if argv[0] == "--log-file":
            if len(argv) < 2:
                return path
            path = argv[1]
            del argv[:2]
        else:
            path = argv.pop(0).split("=", 1)[1]
    return path


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command. A GpuscopeError is one line on stderr (exit 2 for a refused command line, else its
    ``exit_status``, 1 by default); any other exception is logged with its traceback (to the log file, if any)
    and shown as one ``internal error`` line, exit 1."""
    _degrade_encoding()
    argv = list(sys.argv[1:] if argv is None else argv)
    early_log = _global_log_file(argv)
    cmd = argv[0] if argv and argv[0] in COMMANDS else ""
    parsers = build_parser({"", cmd})
    if argv and (unknown := unknown_command(argv[0])):
        parsers[""].error(unknown)
    args = parsers[cmd].parse_args(argv[1:] if cmd else argv)
    try:
        logs.configure(logs.env_config(args.log_file or early_log), terminal=cmd not in TUI_COMMANDS)
        log.info("gpuscope %s: %s", __version__, cmd or "live view")  # not argv: it may hold a header's token
        rc = _dispatch(cmd, args)
        sys.stdout.flush()  # a full or closed stdout is an error now, not a silent loss at exit
        return rc
    except GpuscopeError as e:
        log.info("error: %s", e)
        _stderr(f"gpuscope: error: {e}\n")
        return e.exit_status if e.exit_status != 1 else EXIT_FAIL
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `gpuscope summary X | head`: the reader is done, that is fine
        _silence_stdout()
        return 0
    except OSError as e:
        if e.filename is not None:
            _stderr(f"gpuscope: error: {e.filename}: {e.strerror or e}\n")
            return EXIT_FAIL
        _silence_stdout()
        _stderr(f"gpuscope: error: cannot write the output: {e.strerror or e}\n")
        return EXIT_FAIL
    except Exception as e:  # noqa: BLE001 - a bug: one line for the user, the traceback for the log
        log.error("internal error: %s", one_line(e), exc_info=e, extra=SHOWN)
        path = logs.file_of()
        where = f"details in {path}" if path else "rerun with --log-file PATH for details"
        _stderr(f"gpuscope: internal error: {one_line(e)} ({where})\n")
        return EXIT_FAIL


# what gpuscope's own text uses beyond ASCII, in ASCII (a terminal or pipe that cannot take UTF-8)
ASCII_FOR = {"×": "x", "–": "-", "—": "-", "…": "...", "·": ".", "→": "->", "←": "<-", "↔": "<->", "↓": "v",
             "↑": "^", "°": " deg", "±": "+/-", "≤": "<=", "≥": ">=", "≈": "~", "µ": "u", "»": ">>", "«": "<<",
             "✖": "x", "▲": "^", "●": "*", "│": "|", "─": "-", "‘": "'", "’": "'", "“": '"', "”": '"', "▼": "v"}


def ascii_fallback(e: UnicodeError) -> tuple[str, int]:
    """A codec error handler: gpuscope's own symbols as their ASCII look-alikes (``Gen4×16`` → ``Gen4x16``),
    anything else as a ``\\u2192`` escape."""
    if not isinstance(e, UnicodeEncodeError):
        raise e
    bad = e.object[e.start:e.end]
    return "".join(ASCII_FOR.get(c) or c.encode("ascii", "backslashreplace").decode() for c in bad), e.end


def _degrade_encoding() -> None:
    """Let stdout and stderr write what their encoding cannot hold as an ASCII look-alike or an escape rather
    than fail (``PYTHONIOENCODING=ascii``, a C locale): the report, not an internal error."""
    codecs.register_error("gpuscope-ascii", ascii_fallback)
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and getattr(stream, "errors", None) in ("strict", "backslashreplace"):
            try:
                reconfigure(errors="gpuscope-ascii")
            except (ValueError, OSError):  # a closed or detached stream: nothing to write to anyway
                pass


def _stderr(text: str) -> None:
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
    try:
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115
    except OSError:
        pass


def _open(source: SourceOptions) -> Any:
    """The source that ``source`` names (NVML or a scenario), with its endpoints polled when it has any."""
    from gpuscope.sources.groups import with_groups
    from gpuscope.sources.live import WithEndpoints, open_source

    poller = None
    if source.endpoint:
        from gpuscope.sources.endpoint import EndpointPoller

        targets = source.endpoint_targets
        for note in source.notes:  # once per URL with credentials in it, before any request (cli/endpoint_url.py)
            _stderr(f"gpuscope: note: {note}\n")
        poller = EndpointPoller(list(targets), kind=source.endpoint_kind,
                                interval_s=min(source.interval, 1.0) if source.interval >= 0.5 else 1.0,
                                timeout_s=source.endpoint_timeout, window_s=source.endpoint_window,
                                headers=dict(source.headers), verify=not source.endpoint_insecure,
                                probe_every_s=source.probe, probe_model=source.probe_model)
    src = open_source(source.simulate, pcie_mode=source.pcie_source)
    return with_groups(WithEndpoints(src, poller.start()) if poller is not None else src, source.simulate)


def _dispatch(cmd: str, args: argparse.Namespace) -> int:
    """Build the command's options from the parsed flags (checking them) and run it. A flag, a value or a
    combination the options refuse is a usage error: exit 2, as argparse's own refusals."""
    command = _BY_NAME[cmd]
    try:
        opts = command.options(args)
    except GpuscopeError as e:
        e.exit_status = EXIT_USAGE
        raise
    return command.run(opts)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
