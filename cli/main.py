"""The ``gpuscope`` command line. Every error is one line on stderr and a non-zero exit."""

from __future__ import annotations

import argparse
import difflib
import logging
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from gpuscope import __version__
from gpuscope.cli import logs
from gpuscope.core.errors import SHOWN, GpuscopeError, one_line
from gpuscope.core.text import clean
from gpuscope.core.validate import finite_float
from gpuscope.core.vocab import SERVER_KINDS

COMMANDS = ("topo", "scenarios", "record", "replay", "demo", "summary", "export", "compare", "agent")
TUI_COMMANDS = ("", "replay", "demo")  # these draw on the terminal: nothing else may write to it meanwhile
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


def _out_path(s: str) -> str:
    """An output file's path: not empty (``-o ''`` would name the current directory)."""
    if not s.strip():
        raise argparse.ArgumentTypeError("an empty path names no file")
    return s


def _interval(s: str) -> float:
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {s!r}") from None
    if not 0.1 <= v <= 3600:
        raise argparse.ArgumentTypeError("must be between 0.1 and 3600 seconds")
    return v


def _add_source(p: argparse.ArgumentParser) -> None:
    p.add_argument("--simulate", metavar="SCENARIO", help="a simulated machine: a shipped scenario name or a file")
    p.add_argument("--interval", type=_interval, default=1.0, metavar="SECONDS",
                   help="seconds between samples (default 1.0, down to 0.1)")
    p.add_argument("--pcie-source", choices=("auto", "gpm", "throughput"), default="auto",
                   help=argparse.SUPPRESS)
    p.add_argument("--endpoint", action="append", default=[], metavar="URL",
                   help="an inference server to poll (repeatable); its kind is detected from /metrics")
    p.add_argument("--endpoint-kind", choices=SERVER_KINDS,
                   help="skip detection")
    p.add_argument("--endpoint-header", action="append", default=[], metavar="'NAME: VALUE'",
                   help="HTTP header for protected endpoints (prefer GPUSCOPE_ENDPOINT_TOKEN / _HEADERS in the "
                        "environment: the command line is visible to other users)")
    p.add_argument("--endpoint-window", type=finite_float(0.1, 3600), default=10.0, metavar="SECONDS", help="rate window (default 10)")
    p.add_argument("--endpoint-timeout", type=finite_float(0.01, 600), default=2.0, metavar="SECONDS")
    p.add_argument("--endpoint-insecure", action="store_true", help="do not verify TLS certificates")
    p.add_argument("--probe", type=finite_float(0.1, 86400), nargs="?", const=10.0, default=None, metavar="SECONDS",
                   help="also send a small streamed chat completion every SECONDS (default 10) to measure TTFT "
                        "and decode tok/s (adds load; off by default; for Ollama and servers without metrics)")
    p.add_argument("--probe-model", metavar="NAME", help="model for the probe (default: the first of /v1/models)")


def _add_broker(p: argparse.ArgumentParser, required: bool = False) -> None:
    p.add_argument("--broker", required=required, metavar="URL", help="mqtt://HOST[:PORT] or mqtts://HOST[:PORT]")
    p.add_argument("--topic-prefix", default="gpuscope", metavar="P")
    p.add_argument("--qos", type=int, default=0, choices=(0, 1, 2))
    p.add_argument("--username", metavar="NAME")
    p.add_argument("--password-file", metavar="FILE",
                   help="the broker password (or GPUSCOPE_MQTT_PASSWORD; never on the command line)")
    p.add_argument("--tls-ca", metavar="FILE", help="CA certificate to verify the broker (implies TLS)")
    p.add_argument("--tls-cert", metavar="FILE", help="client certificate")
    p.add_argument("--tls-key", metavar="FILE", help="client key")


def build_parser() -> dict[str, argparse.ArgumentParser]:
    main = _Parser(prog="gpuscope", description="Terminal monitor for GPU servers running LLM inference. "
                   f"Commands: {', '.join(COMMANDS)} (each takes --help).")
    main.add_argument("--version", action="version", version=f"gpuscope {__version__}")
    _add_source(main)
    main.add_argument("--record", metavar="FILE", help="record while watching (.jsonl.gz)")
    main.add_argument("--force", action="store_true", help="with --record: overwrite an existing file")
    main.add_argument("--history", choices=("1m", "10m", "1h"), default="1m", help="graph window at start")
    main.add_argument("--compact", action="store_true", help="one line per GPU")
    _add_broker(main)
    main.add_argument("--host", metavar="HOST", help="with --broker: open this host directly")
    p: dict[str, argparse.ArgumentParser] = {"": main}

    ag = _Parser(prog="gpuscope agent", description="Publish this machine's frames, findings and inventory to an "
                 "MQTT broker (topics: docs/mqtt.md), serve them to Prometheus (docs/prometheus.md), or both.")
    _add_source(ag)
    _add_broker(ag)
    ag.add_argument("--prometheus", nargs="?", const="19400", metavar="[HOST:]PORT",
                    help="serve /metrics for Prometheus (default port 19400, bound to 127.0.0.1 unless a host is "
                         "given; 0.0.0.0:PORT or :PORT for every interface)")
    ag.add_argument("--prometheus-hostname-label", default="Hostname", metavar="NAME",
                    help="the hostname label's key on the DCGM-compatible series (default Hostname, as dcgm-exporter "
                         "releases write it)")
    p["agent"] = ag

    t = _Parser(prog="gpuscope topo", description="The nvidia-smi topo -m matrix, PCIe link table and topology "
                "findings.")
    t.add_argument("--json", action="store_true", help="machine-readable output (schema gpuscope.topo/1)")
    t.add_argument("--simulate", metavar="SCENARIO")
    t.add_argument("--at", type=finite_float(0, 10**7), default=None, metavar="SECONDS",
                   help="with --simulate: read the scenario this many seconds in (e.g. under load)")
    p["topo"] = t

    p["scenarios"] = _Parser(prog="gpuscope scenarios", description="List the shipped simulation scenarios.")

    r = _Parser(prog="gpuscope record", description="Record headless; with -- CMD, for exactly the command's life.")
    r.add_argument("-o", "--output", required=True, metavar="FILE", type=_out_path)
    r.add_argument("--force", action="store_true", help="overwrite FILE if it exists (refused by default)")
    _add_broker(r)
    r.add_argument("--host", metavar="HOST", help="with --broker: record this remote host")
    r.add_argument("--duration", type=finite_float(0.001, 10**8), metavar="SECONDS")
    r.add_argument("--note", metavar="TEXT", help="provenance to keep in the header (what ran, where)")
    _add_source(r)
    r.add_argument("cmd", nargs=argparse.REMAINDER, help="-- CMD ARGS…")
    p["record"] = r

    rp = _Parser(prog="gpuscope replay", description="Replay a recording in the TUI.")
    rp.add_argument("file")
    rp.add_argument("--speed", type=finite_float(0.01, 1000), default=1.0)
    rp.add_argument("--compact", action="store_true")
    p["replay"] = rp

    d = _Parser(prog="gpuscope demo", description="Replay the real H200 recording that ships with gpuscope.")
    d.add_argument("--speed", type=finite_float(0.01, 1000), default=1.0)
    d.add_argument("--compact", action="store_true")
    p["demo"] = d

    s = _Parser(prog="gpuscope summary", description="Statistics of a recording.")
    s.add_argument("file")
    s.add_argument("--json", action="store_true")
    s.add_argument("--by-marker", action="store_true",
                   help="one row per marker span (and per `record -- CMD` run): GPUs, serving, findings")
    p["summary"] = s

    e = _Parser(prog="gpuscope export", description="One row per GPU per frame.")
    e.add_argument("file")
    g = e.add_mutually_exclusive_group(required=True)
    g.add_argument("--csv", metavar="OUT", type=_out_path)
    g.add_argument("--parquet", metavar="OUT", type=_out_path)
    e.add_argument("--serving", metavar="OUT2", type=_out_path, help="also write the serving readings, one row per endpoint and "
                   "model per frame (same format as OUT)")
    e.add_argument("--force", action="store_true", help="overwrite OUT (and OUT2) if they exist (refused by default)")
    p["export"] = e

    c = _Parser(prog="gpuscope compare", description="Two recordings side by side.")
    c.add_argument("a")
    c.add_argument("b")
    c.add_argument("--json", action="store_true")
    c.add_argument("--by-marker", action="store_true", help="line the phases up by marker label")
    p["compare"] = c
    for parser in p.values():
        parser.add_argument("--log-file", metavar="PATH",
                            help="log to this file (or GPUSCOPE_LOG=PATH[:LEVEL]; level also GPUSCOPE_LOG_LEVEL)")
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
    """Run one command. A GpuscopeError is one line on stderr; any other exception is logged with its
    traceback (to the log file, if any) and shown as one ``internal error`` line; both exit 1."""
    argv = list(sys.argv[1:] if argv is None else argv)
    early_log = _global_log_file(argv)
    parsers = build_parser()
    cmd = argv[0] if argv and argv[0] in COMMANDS else ""
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


def _open(simulate: str | None, pcie_mode: str = "auto", virtual_at: float | None = None,
          args: argparse.Namespace | None = None):  # noqa: ANN202
    from gpuscope.sources.live import WithEndpoints, open_source, parse_headers

    poller = None
    if args is not None and getattr(args, "probe", None) is not None and not getattr(args, "endpoint", None):
        raise GpuscopeError("--probe needs --endpoint URL")
    if args is not None and getattr(args, "endpoint", None):
        from gpuscope.sources.endpoint import EndpointPoller

        try:
            headers = parse_headers(args.endpoint_header, dict(os.environ))
        except ValueError as e:
            raise GpuscopeError(str(e)) from None
        from gpuscope.cli.endpoint_url import endpoint_url_problem

        for u in args.endpoint:
            problem = endpoint_url_problem(u)
            if problem is not None:
                raise GpuscopeError(f"--endpoint {u!r}: {problem}")
        poller = EndpointPoller(args.endpoint, kind=args.endpoint_kind, interval_s=min(args.interval, 1.0) if
                                args.interval >= 0.5 else 1.0, timeout_s=args.endpoint_timeout,
                                window_s=args.endpoint_window, headers=headers, verify=not args.endpoint_insecure,
                                probe_every_s=args.probe, probe_model=args.probe_model)
    src = open_source(simulate, pcie_mode=pcie_mode, virtual_at=virtual_at)
    from gpuscope.sources.groups import with_groups  # serving groups (issue 29)

    return with_groups(WithEndpoints(src, poller.start()) if poller is not None else src, simulate)


def _dispatch(cmd: str, args: argparse.Namespace) -> int:
    # Each command imports what it needs here, not at module level: `gpuscope topo` need not load NVML's
    # pool, MQTT or HTTP, and no headless command may load Textual (tests/test_layout.py).
    if cmd == "scenarios":
        from gpuscope.sources.scenario import load, shipped

        names = sorted(shipped())
        width = max((len(n) for n in names), default=0)  # the longest name sets the column: descriptions align
        for name in names:
            sc = load(name)
            print(f"{name:<{width}}  {len(sc.gpus)} GPU{'s' if len(sc.gpus) > 1 else ' '}  {clean(sc.description, 200)}")
        return 0
    if cmd == "topo":
        from gpuscope.cli.topo import run_topo

        if args.at is not None and not args.simulate:
            raise GpuscopeError("--at needs --simulate")
        src = _open(args.simulate, virtual_at=(args.at or 0.0) if args.simulate else None)
        try:
            return run_topo(src, args.json)
        finally:
            src.close()
    if cmd == "record":
        if args.broker:
            from gpuscope.cli.agent import run_remote_record

            if not args.host:
                raise GpuscopeError("record --broker needs --host HOST")
            return run_remote_record(args)
        from gpuscope.cli.record import run_record

        return run_record(args, _open)
    if cmd == "agent":
        from gpuscope.cli.agent import run_agent

        return run_agent(args, _open)
    if cmd in ("summary", "compare", "export"):
        from gpuscope.cli import report as report_cmd

        return getattr(report_cmd, f"run_{cmd}")(args)
    if cmd in ("replay", "demo"):
        from gpuscope.tui.app import run_replay

        return run_replay(args)
    if args.broker:
        from gpuscope.tui.fleet import run_fleet

        return run_fleet(args)
    from gpuscope.tui.app import run_live

    return run_live(args, _open)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
