"""Each command's options: a frozen dataclass with the flags that add it to a parser (``add_arguments``) and
the one place that turns the parsed ``argparse.Namespace`` into it (``from_namespace``), checking what
argparse cannot (flags that need another flag, endpoint URLs and headers). A check that fails raises a
:class:`GpuscopeError`: ``gpuscope: error: <message>``, exit 1.

Imports nothing heavy: building the parsers for ``--help`` must stay cheap, and no headless command may
load Textual (tests/test_layout.py)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from gpuscope.core.errors import GpuscopeError
from gpuscope.core.validate import finite_float
from gpuscope.core.vocab import SERVER_KINDS

if TYPE_CHECKING:
    from gpuscope.core.redact import Endpoint
    from gpuscope.sources.mqtt import BrokerConfig


def _out_path(s: str) -> str:
    """An output file's path: not empty (``-o ''`` would name the current directory)."""
    if not s.strip():
        raise argparse.ArgumentTypeError("an empty path names no file")
    return s


def _part(s: str) -> int:
    """``--part N``: which recording of a file that joins several (1-based, as ``summary`` lists them)."""
    if not s.isdigit() or int(s) < 1:
        raise argparse.ArgumentTypeError(f"not a part number (1, 2, …): {s[:40]!r}")
    return int(s)


def add_part(p: argparse.ArgumentParser, flag: str = "--part", whose: str = "") -> None:
    """The ``--part N`` flag of the commands that read a recording (docs/recording-format.md, joined files)."""
    p.add_argument(flag, type=_part, metavar="N", help=f"read only part N of {whose or 'a file'} that joins "
                   "recordings of different machines (`summary` lists them; `split` writes them out)")


def _interval(s: str) -> float:
    try:
        v = float(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {s!r}") from None
    if not 0.1 <= v <= 3600:
        raise argparse.ArgumentTypeError("must be between 0.1 and 3600 seconds")
    return v


def _hostname_label(s: str) -> str:
    """``--prometheus-hostname-label``: one or two label keys Prometheus would keep as they are (not job, instance, __*)."""
    from gpuscope.outputs.prometheus import PrometheusError, hostname_keys

    try:
        hostname_keys(s)
    except PrometheusError as e:  # argparse names the flag: the message keeps the key and why
        raise argparse.ArgumentTypeError(str(e).removeprefix("--prometheus-hostname-label ")) from None
    return s


def _dcgm_counters(s: str) -> tuple[str, ...]:
    """``--dcgm-counters NAME[,NAME…]``: dcgm-exporter's names of the opt-in series."""
    from gpuscope.outputs.prometheus import PrometheusError, parse_dcgm_counters

    try:
        return parse_dcgm_counters(s)
    except PrometheusError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("--dcgm-counters").lstrip(": ")) from None


def _agent_name(s: str) -> str:
    """``agent --name``: one MQTT topic level (cli/agent_id.py)."""
    from gpuscope.cli.agent_id import name_arg

    return name_arg(s)


@dataclass(frozen=True)
class SourceOptions:
    """Where frames come from: NVML or a scenario (``--simulate``), sampled every ``interval`` seconds,
    plus the inference servers polled (``--endpoint``…) and the optional probe."""

    simulate: str | None
    interval: float  # seconds between samples
    pcie_source: str
    endpoint: tuple[str, ...]
    endpoint_kind: str | None
    endpoint_header: tuple[str, ...] = field(repr=False)  # values may be tokens: never in a repr
    endpoint_window: float  # seconds
    endpoint_timeout: float  # seconds
    endpoint_insecure: bool
    probe: float | None  # seconds between probes; None: no probe
    probe_model: str | None
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)  # --endpoint-header + environment
    # the --endpoint URLs split by checked(): ``endpoint`` then holds only their public form (core/redact.py)
    targets: tuple[Endpoint, ...] = field(default=(), repr=False)
    endpoint_user: str | None = None  # --endpoint-user: Basic auth's user name
    endpoint_password_file: str | None = None  # --endpoint-password-file: Basic auth's password, read by checked()
    notes: tuple[str, ...] = ()  # lines for stderr at start (checked(): credentials readable in the process list)

    @staticmethod
    def add_arguments(p: argparse.ArgumentParser) -> None:
        p.add_argument("--simulate", metavar="SCENARIO", help="a simulated machine: a shipped scenario name or a file")
        p.add_argument("--interval", type=_interval, default=1.0, metavar="SECONDS",
                       help="seconds between samples (default 1.0, down to 0.1)")
        p.add_argument("--pcie-source", choices=("auto", "gpm", "throughput"), default="auto",
                       help=argparse.SUPPRESS)
        p.add_argument("--endpoint", action="append", default=[], metavar="URL",
                       help="an inference server to poll (repeatable); its kind is detected from /metrics. "
                            "http://USER:PASSWORD@HOST works, but every local user can read the password in the "
                            "process list: prefer --endpoint-user with --endpoint-password-file")
        p.add_argument("--endpoint-kind", choices=SERVER_KINDS,
                       help="skip detection")
        p.add_argument("--endpoint-header", action="append", default=[], metavar="'NAME: VALUE'",
                       help="HTTP header for protected endpoints (repeatable; prefer GPUSCOPE_ENDPOINT_TOKEN / _HEADERS "
                            "in the environment: the command line is visible to other users; a header named twice, "
                            "here or there, is refused)")
        p.add_argument("--endpoint-user", metavar="NAME", help="Basic auth's user name for every --endpoint (or "
                       "http://NAME@HOST in the URL)")
        p.add_argument("--endpoint-password-file", metavar="FILE", help="Basic auth's password, read from FILE (or "
                       "GPUSCOPE_ENDPOINT_PASSWORD), for every --endpoint: kept out of the process list")
        p.add_argument("--endpoint-window", type=finite_float(0.1, 3600), default=10.0, metavar="SECONDS",
                       help="rate window (default 10)")
        p.add_argument("--endpoint-timeout", type=finite_float(0.01, 600), default=2.0, metavar="SECONDS")
        p.add_argument("--endpoint-insecure", action="store_true", help="do not verify TLS certificates")
        p.add_argument("--probe", type=finite_float(0.1, 86400), nargs="?", const=10.0, default=None,
                       metavar="SECONDS",
                       help="also send a small streamed chat completion every SECONDS (default 10) to measure TTFT "
                            "and decode tok/s (adds load; off by default; for Ollama and servers without metrics)")
        p.add_argument("--probe-model", metavar="NAME", help="model for the probe (default: the first of /v1/models)")

    @property
    def endpoint_targets(self) -> tuple[Endpoint, ...]:
        """Each ``--endpoint`` split into its public URL and credentials: as :meth:`checked` split them, or
        split now (options made without it, as tests do)."""
        from gpuscope.core.redact import split_endpoint

        return self.targets or tuple(split_endpoint(u) for u in self.endpoint)

    @classmethod
    def from_namespace(cls, ns: argparse.Namespace) -> SourceOptions:
        """The source flags as given, not checked (a command that does not sample, such as ``record
        --broker``, ignores them); :meth:`checked` checks them."""
        return cls(simulate=ns.simulate, interval=ns.interval, pcie_source=ns.pcie_source,
                   endpoint=tuple(ns.endpoint), endpoint_kind=ns.endpoint_kind,
                   endpoint_header=tuple(ns.endpoint_header), endpoint_window=ns.endpoint_window,
                   endpoint_timeout=ns.endpoint_timeout, endpoint_insecure=ns.endpoint_insecure, probe=ns.probe,
                   probe_model=ns.probe_model, endpoint_user=ns.endpoint_user,
                   endpoint_password_file=ns.endpoint_password_file)

    def checked(self, env: Mapping[str, str] | None = None) -> SourceOptions:
        """These options with ``headers`` parsed (from ``--endpoint-header`` and ``env``, by default the
        process environment), each endpoint URL split into its public form (``endpoint``, all the rest of
        the program sees) and its credentials (``targets``, for the HTTP requests only, with the Basic auth
        of ``--endpoint-user`` / ``--endpoint-password-file`` / ``GPUSCOPE_ENDPOINT_PASSWORD``) and ``notes``
        for stderr. A GpuscopeError (exit 2, one line, never a secret) for ``--probe`` or another endpoint flag
        without ``--endpoint``, an endpoint URL that is not http(s)://HOST[:PORT], one given twice (also when
        only their credentials differ), a malformed or unsendable header, and a header or password given in
        two places (cli/endpoint_url.py, sources/live.py: parse_headers). Options already checked are
        returned as they are."""
        from gpuscope.cli.endpoint_url import (
            duplicate_problem,
            endpoint_url_problem,
            shown_in_error,
            with_basic_auth,
        )
        from gpuscope.core.redact import split_endpoint
        from gpuscope.sources.live import parse_headers

        if self.probe is not None and not self.endpoint:
            raise GpuscopeError("--probe needs --endpoint URL", exit_status=2)
        for flag, given in (("--endpoint-header", self.endpoint_header), ("--endpoint-user", self.endpoint_user),
                            ("--endpoint-password-file", self.endpoint_password_file)):
            if given and not self.endpoint:  # for no server: a forgotten --endpoint
                raise GpuscopeError(f"{flag} needs --endpoint URL (it goes with its requests)", exit_status=2)
        if not self.endpoint or self.targets:
            return self
        originals = tuple(split_endpoint(u) for u in self.endpoint)
        for u, t in zip(self.endpoint, originals):
            problem = endpoint_url_problem(t.request_url)
            if problem is not None:
                raise GpuscopeError(f"--endpoint '{shown_in_error(u)}': {problem}", exit_status=2)
        problem = duplicate_problem(originals)
        if problem is not None:
            raise GpuscopeError(problem, exit_status=2)
        env = os.environ if env is None else env
        try:
            auth = with_basic_auth(originals, self.endpoint_user, self.endpoint_password_file, env)
            headers = parse_headers(list(self.endpoint_header), env, basic_auth_from=auth.source)
        except ValueError as e:
            raise GpuscopeError(str(e), exit_status=2) from None
        return replace(self, headers=headers, endpoint=tuple(t.url for t in auth.targets), targets=auth.targets,
                       notes=auth.notes)


@dataclass(frozen=True)
class BrokerOptions:
    """An MQTT broker (``--broker``) and how to reach it; ``broker`` None: no broker given."""

    broker: str | None
    topic_prefix: str
    qos: int
    username: str | None
    password_file: str | None
    tls_ca: str | None
    tls_cert: str | None
    tls_key: str | None

    @staticmethod
    def add_arguments(p: argparse.ArgumentParser, required: bool = False) -> None:
        p.add_argument("--broker", required=required, metavar="URL", help="mqtt://HOST[:PORT] or mqtts://HOST[:PORT]")
        p.add_argument("--topic-prefix", default="gpuscope", metavar="P")
        p.add_argument("--qos", type=int, default=0, choices=(0, 1, 2))
        p.add_argument("--username", metavar="NAME")
        p.add_argument("--password-file", metavar="FILE",
                       help="the broker password (or GPUSCOPE_MQTT_PASSWORD; never on the command line)")
        p.add_argument("--tls-ca", metavar="FILE", help="CA certificate to verify the broker (implies TLS)")
        p.add_argument("--tls-cert", metavar="FILE", help="client certificate")
        p.add_argument("--tls-key", metavar="FILE", help="client key")

    @classmethod
    def from_namespace(cls, ns: argparse.Namespace) -> BrokerOptions:
        return cls(broker=ns.broker, topic_prefix=ns.topic_prefix, qos=ns.qos, username=ns.username,
                   password_file=ns.password_file, tls_ca=ns.tls_ca, tls_cert=ns.tls_cert, tls_key=ns.tls_key)

    def config(self) -> BrokerConfig:
        """The broker to connect to (the password read from ``--password-file`` or the environment); a
        GpuscopeError (BrokerError) for a bad URL, prefix or password file."""
        from gpuscope.sources.mqtt import parse_broker

        if not self.broker:
            raise GpuscopeError("no --broker URL given")
        return parse_broker(self.broker, username=self.username, password_file=self.password_file,
                            ca_file=self.tls_ca, cert_file=self.tls_cert, key_file=self.tls_key,
                            prefix=self.topic_prefix, qos=self.qos)


@dataclass(frozen=True)
class LiveOptions:
    """``gpuscope`` with no command: the live view, or with ``--broker`` the fleet screen. ``source`` is as
    given: the live view checks it (``SourceOptions.checked``) after the terminal check, so that
    ``gpuscope --probe 3`` without a terminal says the live view needs one, as it did before these options;
    the fleet screen does not sample (only ``--interval`` is used)."""

    source: SourceOptions
    broker: BrokerOptions
    record: str | None
    force: bool
    history: str
    compact: bool
    host: str | None

    @staticmethod
    def add_arguments(p: argparse.ArgumentParser) -> None:
        SourceOptions.add_arguments(p)
        p.add_argument("--record", metavar="FILE", help="record while watching (.jsonl.gz)")
        p.add_argument("--force", action="store_true", help="with --record: overwrite an existing file")
        p.add_argument("--history", choices=("1m", "10m", "1h"), default="1m", help="graph window at start")
        p.add_argument("--compact", action="store_true", help="one line per GPU")
        BrokerOptions.add_arguments(p)
        p.add_argument("--host", metavar="HOST", help="with --broker: open this host directly")

    @classmethod
    def from_namespace(cls, ns: argparse.Namespace) -> LiveOptions:
        return cls(source=SourceOptions.from_namespace(ns), broker=BrokerOptions.from_namespace(ns), record=ns.record,
                   force=ns.force, history=ns.history, compact=ns.compact, host=ns.host)


@dataclass(frozen=True)
class AgentOptions:
    """``agent``: publish to ``broker`` (None: no broker), serve Prometheus on ``listen`` (None: not), or both."""

    source: SourceOptions
    broker: BrokerConfig | None = field(repr=False)  # holds the password
    listen: tuple[str, int] | None  # (host, port) for --prometheus
    prometheus_hostname_label: str | None  # NAME or NAME,NAME; None: the name set's own
    dcgm_names: str = "legacy"  # the DCGM name set (outputs/prometheus.py DCGM_NAME_SETS)
    dcgm_counters: tuple[str, ...] = ()  # opt-in series by dcgm-exporter's names (outputs/prometheus.py OPT_IN)
    kubelet_socket: str | None = None  # pod labels from the kubelet's pod-resources API (sources/kubelet.py)
    name: str | None = None  # --name: what it publishes as (None: the host name)
    web_config: str | None = None  # --web-config FILE (TLS, basic auth), read when the agent starts

    @staticmethod
    def add_arguments(p: argparse.ArgumentParser) -> None:
        SourceOptions.add_arguments(p)
        BrokerOptions.add_arguments(p)
        p.add_argument("--prometheus", nargs="?", const="19400", metavar="[HOST:]PORT",
                       help="serve /metrics for Prometheus (default port 19400, bound to 127.0.0.1 unless a host is "
                            "given; 0.0.0.0:PORT or :PORT for every interface)")
        p.add_argument("--prometheus-hostname-label", default=None, metavar="NAME[,NAME]", type=_hostname_label,
                       help="the hostname label's key on the DCGM-compatible series (default: the name set's, hostname "
                            "or Hostname); hostname,Hostname writes both while dashboards move")
        p.add_argument("--dcgm-names", default="legacy", metavar="SET",
                       help="DCGM series names: legacy (dcgm-exporter 4.6.0-4.8.3 and later, default), before-4.8.3 "
                            "(its Hostname label), dcgm-fields (experimental: DCGM's canonical field names) or both")
        p.add_argument("--dcgm-counters", type=_dcgm_counters, default=(), metavar="NAME[,NAME]",
                       help="opt-in series by dcgm-exporter's names: DCGM_EXP_XID_ERRORS_TOTAL, "
                            "DCGM_EXP_CLOCK_EVENTS_TOTAL, DCGM_FI_DEV_ENFORCED_POWER_LIMIT, "
                            "DCGM_FI_DEV_POWER_MGMT_LIMIT")
        p.add_argument("--kubelet-socket", nargs="?", const="/var/lib/kubelet/pod-resources/kubelet.sock",
                       metavar="PATH", help="Kubernetes: pod, namespace and container labels from the kubelet's "
                       "pod-resources socket (default path if none given; needs gpuscope-inference[kubernetes])")
        p.add_argument("--name", metavar="NAME", type=_agent_name, help="publish as NAME, on the broker and as the Prometheus hostname "
                       "label (default: the host name); give each agent its own where host names repeat (cloned VMs, "
                       "containers)")
        p.add_argument("--web-config", metavar="FILE", help="TLS, client certificates and basic auth for "
                       "--prometheus: an exporter-toolkit web config, as node_exporter's (docs/prometheus.md)")

    @classmethod
    def from_namespace(cls, ns: argparse.Namespace) -> AgentOptions:
        if not ns.broker and ns.prometheus is None:
            raise GpuscopeError("agent needs --broker URL, --prometheus [HOST:]PORT, or both")
        broker = BrokerOptions.from_namespace(ns).config() if ns.broker else None
        listen = None
        if ns.prometheus is not None:
            from gpuscope.outputs.prometheus import parse_listen

            listen = parse_listen(ns.prometheus)
        if ns.kubelet_socket is not None:
            from gpuscope.sources.kubelet import check_socket

            if listen is None:
                raise GpuscopeError("--kubelet-socket needs --prometheus (the pod labels go on its series)")
            check_socket(ns.kubelet_socket)
        if ns.web_config is not None and listen is None:
            raise GpuscopeError("--web-config needs --prometheus (it secures the exporter)")
        from gpuscope.cli.agent_id import check_name
        from gpuscope.outputs.prometheus import name_set

        name_set(ns.dcgm_names)  # an unknown set: one line now (the agent notes an old spelling when it starts)

        return cls(source=SourceOptions.from_namespace(ns).checked(), broker=broker, listen=listen,
                   prometheus_hostname_label=ns.prometheus_hostname_label, dcgm_names=ns.dcgm_names,
                   dcgm_counters=ns.dcgm_counters,
                   kubelet_socket=ns.kubelet_socket, name=None if ns.name is None else check_name(ns.name),
                   web_config=ns.web_config)


@dataclass(frozen=True)
class TopoOptions:
    json: bool
    simulate: str | None
    at: float | None  # seconds into the scenario

    @staticmethod
    def add_arguments(p: argparse.ArgumentParser) -> None:
        p.add_argument("--json", action="store_true", help="machine-readable output (schema gpuscope.topo/1)")
        p.add_argument("--simulate", metavar="SCENARIO")
        p.add_argument("--at", type=finite_float(0, 10**7), default=None, metavar="SECONDS",
                       help="with --simulate: read the scenario this many seconds in (e.g. under load)")

    @classmethod
    def from_namespace(cls, ns: argparse.Namespace) -> TopoOptions:
        if ns.at is not None and not ns.simulate:
            raise GpuscopeError("--at needs --simulate")
        return cls(json=ns.json, simulate=ns.simulate, at=ns.at)


@dataclass(frozen=True)
class NoOptions:
    """A command without options of its own (``scenarios``)."""

    @staticmethod
    def add_arguments(p: argparse.ArgumentParser) -> None:
        pass

    @classmethod
    def from_namespace(cls, ns: argparse.Namespace) -> NoOptions:
        return cls()


@dataclass(frozen=True)
class RecordOptions:
    """``record``: headless to ``output``; from ``host`` through a broker when ``broker`` is given (then the
    source flags other than ``--interval`` are not used)."""

    output: str
    force: bool
    broker: str | None  # the --broker URL as given
    broker_config: BrokerConfig | None = field(repr=False)  # holds the password
    host: str | None
    duration: float | None  # seconds
    note: str | None
    source: SourceOptions
    cmd: tuple[str, ...]  # the command to record for (without the leading ``--``); () for none
    probe_links: bool = False  # --probe-links: run the link probe first and keep its results in the recording

    @staticmethod
    def add_arguments(p: argparse.ArgumentParser) -> None:
        p.add_argument("-o", "--output", required=True, metavar="FILE", type=_out_path)
        p.add_argument("--force", action="store_true", help="overwrite FILE if it exists (refused by default)")
        BrokerOptions.add_arguments(p)
        p.add_argument("--host", metavar="HOST", help="with --broker: record this remote host")
        p.add_argument("--duration", type=finite_float(0.001, 10**8), metavar="SECONDS")
        p.add_argument("--note", metavar="TEXT", help="provenance to keep in the header (what ran, where)")
        SourceOptions.add_arguments(p)
        p.add_argument("--probe-links", action="store_true",
                       help="run `gpuscope probe` first and keep its results in the recording (an event of kind "
                            "'probe'; summary and compare show them): a before/after of a BIOS or slot change")
        p.add_argument("cmd", nargs=argparse.REMAINDER, help="-- CMD ARGS…")

    @classmethod
    def from_namespace(cls, ns: argparse.Namespace) -> RecordOptions:
        source = SourceOptions.from_namespace(ns)
        broker = None
        if ns.broker:
            if not ns.host:
                raise GpuscopeError("record --broker needs --host HOST")
            broker = BrokerOptions.from_namespace(ns).config()
        else:  # --duration is positive: its type (finite_float(0.001, …)) says so
            source = source.checked()
        cmd = list(ns.cmd)
        if cmd and cmd[0] == "--":
            cmd = cmd[1:]
        return cls(output=ns.output, force=ns.force, broker=ns.broker, broker_config=broker, host=ns.host,
                   duration=ns.duration,
                   note=ns.note, source=source, cmd=tuple(cmd), probe_links=ns.probe_links)


@dataclass(frozen=True)
class ReplayOptions:
    """``replay FILE`` and ``demo`` (``file`` None: the recording shipped with gpuscope)."""

    file: str | None
    speed: float
    compact: bool
    part: int | None = None

    @staticmethod
    def add_arguments(p: argparse.ArgumentParser) -> None:
        p.add_argument("file")
        ReplayOptions.add_demo_arguments(p)
        add_part(p)

    @staticmethod
    def add_demo_arguments(p: argparse.ArgumentParser) -> None:
        p.add_argument("--speed", type=finite_float(0.01, 1000), default=1.0)
        p.add_argument("--compact", action="store_true")

    @classmethod
    def from_namespace(cls, ns: argparse.Namespace) -> ReplayOptions:
        return cls(file=getattr(ns, "file", None), speed=ns.speed, compact=ns.compact, part=getattr(ns, "part", None))


@dataclass(frozen=True)
class SummaryOptions:
    file: str
    json: bool
    by_marker: bool
    part: int | None = None

    @staticmethod
    def add_arguments(p: argparse.ArgumentParser) -> None:
        p.add_argument("file")
        p.add_argument("--json", action="store_true")
        p.add_argument("--by-marker", action="store_true",
                       help="one row per marker span (and per `record -- CMD` run): GPUs, serving, findings")
        add_part(p)

    @classmethod
    def from_namespace(cls, ns: argparse.Namespace) -> SummaryOptions:
        return cls(file=ns.file, json=ns.json, by_marker=ns.by_marker, part=ns.part)


@dataclass(frozen=True)
class ExportOptions:
    file: str
    csv: str | None  # exactly one of csv and parquet is set (argparse checks it)
    parquet: str | None
    serving: str | None
    force: bool
    part: int | None = None

    @property
    def output(self) -> str:
        """The main output's path (``--csv`` or ``--parquet``)."""
        out = self.csv or self.parquet
        assert out is not None
        return out

    @staticmethod
    def add_arguments(p: argparse.ArgumentParser) -> None:
        p.add_argument("file")
        g = p.add_mutually_exclusive_group(required=True)
        g.add_argument("--csv", metavar="OUT", type=_out_path)
        g.add_argument("--parquet", metavar="OUT", type=_out_path)
        p.add_argument("--serving", metavar="OUT2", type=_out_path, help="also write the serving readings, one row "
                       "per endpoint and model per frame (same format as OUT)")
        p.add_argument("--force", action="store_true", help="overwrite OUT (and OUT2) if they exist (refused by default)")
        add_part(p)

    @classmethod
    def from_namespace(cls, ns: argparse.Namespace) -> ExportOptions:
        """A GpuscopeError when ``--serving OUT2`` is not a path of its own (or both tables go to stdout)."""
        out, main_out = ns.serving, ns.csv or ns.parquet
        if out and out == main_out and out != "-":
            raise GpuscopeError("--serving needs a path of its own (not the same as the GPU table's)")
        if out == "-" and main_out == "-":
            raise GpuscopeError("only one of the two tables can go to stdout")
        return cls(file=ns.file, csv=ns.csv, parquet=ns.parquet, serving=ns.serving, force=ns.force, part=ns.part)


@dataclass(frozen=True)
class CompareOptions:
    a: str
    b: str
    json: bool
    by_marker: bool
    part_a: int | None = None
    part_b: int | None = None

    @staticmethod
    def add_arguments(p: argparse.ArgumentParser) -> None:
        p.add_argument("a")
        p.add_argument("b")
        p.add_argument("--json", action="store_true")
        p.add_argument("--by-marker", action="store_true", help="line the phases up by marker label")
        add_part(p, "--part-a", "A")
        add_part(p, "--part-b", "B")

    @classmethod
    def from_namespace(cls, ns: argparse.Namespace) -> CompareOptions:
        return cls(a=ns.a, b=ns.b, json=ns.json, by_marker=ns.by_marker, part_a=ns.part_a, part_b=ns.part_b)


@dataclass(frozen=True)
class SplitOptions:
    """``split FILE [--dir DIR]``: each recording of a file that joins several, to a file of its own."""

    file: str
    dir: str | None  # None: beside FILE

    @staticmethod
    def add_arguments(p: argparse.ArgumentParser) -> None:
        p.add_argument("file")
        p.add_argument("--dir", type=_out_path, help="write the parts here (default: beside FILE); existing files "
                       "are never overwritten")

    @classmethod
    def from_namespace(cls, ns: argparse.Namespace) -> SplitOptions:
        return cls(file=ns.file, dir=ns.dir)


@dataclass(frozen=True)
class ProbeOptions:
    """``probe``: measure what each link delivers (``simulate``: figures derived from a scenario's links)."""

    json: bool
    simulate: str | None
    yes: bool  # run where other processes use the GPUs without asking
    max_memory: int  # device bytes per GPU at most
    gpus: tuple[int, ...] | None  # None: every GPU
    trials: int
    group: str | None = None  # --group NAME: one serving group's GPUs and the pairs among them

    @staticmethod
    def add_arguments(p: argparse.ArgumentParser) -> None:
        from gpuscope.cli.probe_args import add_probe_arguments  # here: the live screen loads no probe code

        add_probe_arguments(p)

    @classmethod
    def from_namespace(cls, ns: argparse.Namespace) -> ProbeOptions:
        return cls(json=ns.json, simulate=ns.simulate, yes=ns.yes, max_memory=ns.max_memory,
                   gpus=None if ns.gpus is None else tuple(ns.gpus), trials=ns.trials, group=ns.group)

    @classmethod
    def for_record(cls, source: SourceOptions) -> ProbeOptions:
        """The probe ``record --probe-links`` runs: every GPU of the recorded source, the defaults."""
        from gpuscope.core.probe import DEFAULT_MAX_MEMORY, DEFAULT_TRIALS

        return cls(json=False, simulate=source.simulate, yes=False, max_memory=DEFAULT_MAX_MEMORY, gpus=None,
                   trials=DEFAULT_TRIALS)
