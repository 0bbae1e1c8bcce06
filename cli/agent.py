"""``gpuscope agent`` (publish frames to MQTT) and ``gpuscope record --broker`` (record a remote host)."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from gpuscope.cli.agent_id import machine_id, run_id, state_file
from gpuscope.cli.options import AgentOptions, RecordOptions, SourceOptions
from gpuscope.core.errors import GpuscopeError
from gpuscope.core.gc_tune import settle_gc
from gpuscope.core.model import Inventory
from gpuscope.core.session import Session, run_ticks
from gpuscope.core.summary import SummaryPacer, summarise
from gpuscope.core.text import count
from gpuscope.outputs.mqtt_publish import Publisher
from gpuscope.outputs.recorder import Recorder
from gpuscope.sources.mqtt import Subscriber, safe_host

if TYPE_CHECKING:
    from gpuscope.outputs.prometheus import PrometheusExporter
    from gpuscope.outputs.webconfig import WebConfig
    from gpuscope.sources.kubelet import PodMapper
    from gpuscope.sources.mqtt import BrokerConfig

log = logging.getLogger(__name__)


def run_agent(opts: AgentOptions, open_source: Callable[[SourceOptions], Any]) -> int:
    """Sample every ``--interval``; publish to ``--broker``, serve ``--prometheus``, or both."""
    web = None
    if opts.web_config is not None:  # a bad file is one line before anything starts
        from gpuscope.outputs.webconfig import load_web_config

        web = load_web_config(opts.web_config)
    src = open_source(opts.source)
    interval = opts.source.interval
    session = Session(src.inventory, interval_s=interval, history_s=60)
    stop = threading.Event()
    outs = _start_outputs(opts, src, web, stop)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda *_: stop.set())
    sys.stderr.write(f"gpuscope agent: {_started(src.inventory, outs, opts.broker, web)}; every {interval:g} s\n")
    loop = _AgentLoop(src, session, outs, opts.broker, interval)
    try:
        settle_gc()  # started: the collector set for a long run
        run_ticks(loop.sample, loop.on_frame, interval, stop, on_error=session.tick_failed)
    finally:
        outs.stop()
        src.close()
    pub, exporter = outs.pub, outs.exporter
    sent = (f"; {count(session.frames_seen, 'frame')} sampled, {pub.sent} sent to the broker, {pub.dropped} dropped"
            if pub is not None else "")
    served = f"; {exporter.scrapes} scrapes served" if exporter is not None else ""
    errs = session.tick_errors
    trouble = f"; {errs.text()}" if errs.count else ""
    sys.stderr.write(f"gpuscope agent: stopped{sent}{served}{trouble}\n")
    if pub is not None and pub.fatal:  # not healthy under systemd while sending nothing: exit 1, one line
        raise GpuscopeError(pub.fatal)
    return 0


@dataclass
class _Outputs:
    """Where the agent's frames go: the MQTT publisher, the Prometheus exporter and the kubelet's pod labels
    it adds (each None when not asked for)."""

    pub: Publisher | None = None
    exporter: PrometheusExporter | None = None
    pods: PodMapper | None = None

    def stop(self) -> None:
        if self.pub is not None:
            self.pub.stop()
        if self.exporter is not None:
            self.exporter.stop()
        if self.pods is not None:
            self.pods.stop()


def _start_outputs(opts: AgentOptions, src: Any, web: WebConfig | None, stop: threading.Event) -> _Outputs:
    """Start what ``opts`` asks for (``--prometheus``, ``--broker``); on any failure, stop what started and
    close the source."""
    outs = _Outputs()
    try:
        if opts.listen is not None:
            _start_exporter(outs, opts, opts.listen, src, web)
        if opts.broker is not None:
            machine, warning = machine_id(state_file())
            if warning:
                log.warning("%s", warning)  # one line on stderr ("gpuscope: warning: …") and in the log file
            outs.pub = Publisher(opts.broker, src.inventory, name=opts.name, machine=machine, run=run_id(),
                                 on_fatal=stop.set).start()  # a refused login ends the agent (exit 1)
    except BaseException:
        outs.stop()
        src.close()
        raise
    return outs


def _start_exporter(outs: _Outputs, opts: AgentOptions, listen: tuple[str, int], src: Any,
                    web: WebConfig | None) -> None:
    """The Prometheus exporter in ``outs`` (with the pods of ``--kubelet-socket`` first, when given)."""
    from gpuscope.outputs.prometheus import PrometheusExporter, name_set

    names, note = name_set(opts.dcgm_names)
    if note is not None:
        log.warning("%s", note)  # one line on stderr ("gpuscope: warning: …")
    labels = None
    if opts.kubelet_socket is not None:
        from gpuscope.sources.kubelet import PodLabels, PodMapper, mig_parents

        devices = src.inventory.devices
        outs.pods = PodMapper(opts.kubelet_socket, devices, mig=mig_parents(getattr(src, "nvml", None), devices),
                              note=lambda s: sys.stderr.write(f"gpuscope agent: {s}\n")).start()
        labels = PodLabels(outs.pods.current)
    # --name (what this agent publishes as, here too), else NODE_NAME (a DaemonSet sets it from the
    # downward API): the node, as dcgm-exporter labels it; a container's own host name is its pod's name
    outs.exporter = PrometheusExporter(listen, src.inventory, hostname_label=opts.prometheus_hostname_label,
                                       hostname=opts.name or os.environ.get("NODE_NAME") or None,
                                       dcgm_names=names, pods=labels, web=web,
                                       counters=opts.dcgm_counters).start()


def _started(inv: Inventory, outs: _Outputs, cfg: BrokerConfig | None, web: WebConfig | None) -> str:
    """What the agent says once started: the GPUs it samples and where their frames go."""
    what = []
    if outs.pub is not None and cfg is not None:
        what.append(f"publishing to {_broker_url(cfg)} under {cfg.prefix}/v1/{outs.pub.host}/")
    if outs.exporter is not None:
        what.append(f"serving {outs.exporter.url}" + (f" ({web.describe()})" if web is not None else "")
                    + (f" with pod labels from {outs.pods.path}" if outs.pods is not None else ""))
    named = f" as {outs.pub.host}" if outs.pub is not None and outs.pub.host != inv.host else ""
    sim = " (SIMULATED)" if inv.simulated else ""
    return f"{len(inv.devices)} GPUs of {inv.host}{named}{sim}: {'; '.join(what)}"


def _broker_url(cfg: BrokerConfig) -> str:
    return f"{'mqtts' if cfg.tls else 'mqtt'}://{cfg.host}:{cfg.port}"


class _AgentLoop:
    """One tick of the agent: sample, then hand the frame to the publisher (with a summary when due, and a
    line about the broker connection when it changes) and the exporter."""

    def __init__(self, src: Any, session: Session, outs: _Outputs, cfg: BrokerConfig | None, interval: float):
        self.src, self.session, self.outs, self.cfg, self.interval = src, session, outs, cfg, interval
        self.tick = _TickClock(interval)
        self.pacer = SummaryPacer(every_s=max(5.0, interval))
        self.connects = 0  # the publisher's connections already told
        self.last_note = 0.0  # monotonic time of the last "broker unreachable"

    def sample(self) -> Any:
        self.tick.begin()
        return self.src.sample()

    def on_frame(self, frame: Any) -> None:
        frame = self.session.ingest(frame)
        pub, exporter = self.outs.pub, self.outs.exporter
        if pub is not None and self.cfg is not None:
            self._publish(pub, self.cfg, frame)
        if exporter is not None:
            exporter.update(frame, self.session.findings.active,
                            self.tick.end(mqtt_dropped=pub.dropped if pub is not None else None))

    def _publish(self, pub: Publisher, cfg: BrokerConfig, frame: Any) -> None:
        pub.publish_frame(frame)
        s = summarise(self.src.inventory, frame, self.session.findings.active, interval_s=self.interval)
        if self.pacer.due(s.key(), frame.t):
            pub.publish_summary(replace(s, host=pub.host, seq=self.pacer.seq))
        note = connection_note(self.connects, pub.connects, pub.connected, pub.last_error,
                               time.monotonic() - self.last_note, pub.dropped, _broker_url(cfg))
        self.connects = pub.connects
        if note:
            if "unreachable" in note:
                self.last_note = time.monotonic()
            sys.stderr.write(f"gpuscope agent: {note}\n")


def connection_note(seen_connects: int, connects: int, connected: bool, last_error: str | None,
                    since_note_s: float, dropped: int, url: str) -> str:
    """What the agent says about its broker connection this tick ('' for nothing).

    ``connected to URL`` on the first connection, ``reconnected to URL`` on later ones; ``broker
    unreachable`` only after an attempt failed (never while the first connection is still being made),
    at most every 30 s.
    """
    if connects > seen_connects:
        return f"{'connected to' if seen_connects == 0 and connects == 1 else 'reconnected to'} {url}"
    if not connected and last_error and since_note_s > 30:
        return (f"broker unreachable ({last_error}); sampling on, {dropped} frames dropped so far"
                + ("" if connects else "; still trying"))
    return ""


class _TickClock:
    """Times each tick (sample to hand-over) and counts ticks skipped by overruns, for the exporter."""

    def __init__(self, interval_s: float, clock: Callable[[], float] = time.monotonic):
        self.interval_s = interval_s
        self.clock = clock
        self.ticks = 0
        self.skipped = 0
        self._start: float | None = None

    def begin(self) -> None:
        from gpuscope.outputs.prometheus import skipped_ticks

        now = self.clock()
        self.skipped += skipped_ticks(self._start, now, self.interval_s)
        self._start = now

    def end(self, mqtt_dropped: int | None = None) -> Any:
        from gpuscope.outputs.prometheus import SamplerHealth

        self.ticks += 1
        took = self.clock() - self._start if self._start is not None else None
        return SamplerHealth(ticks=self.ticks, skipped=self.skipped, last_tick_s=took, interval_s=self.interval_s,
                             mqtt_dropped=mqtt_dropped)


def _wait_inventory(sub: Subscriber, host: str, broker: str, timeout_s: float) -> Any:
    """``host``'s inventory from the broker, or None: after ``timeout_s``, or at once when the broker cannot be
    reached (the caller says why). After the first second it says on stderr what it waits for."""
    t0 = time.monotonic()
    said = False
    while (left := timeout_s - (time.monotonic() - t0)) > 0:
        inv = sub.wait_inventory(host, min(0.25, left))
        if inv is not None or sub.broker_down:
            return inv
        if not said and time.monotonic() - t0 >= 1.0:  # not 10 s of silence
            sys.stderr.write(f"gpuscope: waiting up to {timeout_s:.0f} s for the inventory of host {host!r} on {broker}…\n")
            sys.stderr.flush()
            said = True
    return None


def run_remote_record(opts: RecordOptions) -> int:
    """``record --broker URL --host HOST``: record what that host's agent publishes to ``opts.output``."""
    from gpuscope.core.units import human_bytes

    cfg = opts.broker_config
    assert cfg is not None, "record --broker without a broker"
    host = safe_host(opts.host or "")
    sub = Subscriber(cfg, only_host=host).start()
    inv = _wait_inventory(sub, host, opts.broker or "", 10.0)
    if inv is None:
        sub.stop()
        if sub.broker_down:  # the broker, not the agent: say what is wrong (a refused login, TLS, unreachable)
            raise GpuscopeError(f"cannot read host {host!r} from {opts.broker}: {sub.last_error}")
        raise GpuscopeError(f"no inventory from host {host!r} on {opts.broker} within 10 s (is its agent running?)")
    session = Session(inv, interval_s=opts.source.interval, record_findings=False)  # the agent's findings travel in frames
    try:
        session.start_recording(Recorder(opts.output, inv, command=sys.argv[:], interval_s=opts.source.interval,
                                         origin={"remote": host, "broker": opts.broker, "simulated": inv.simulated}))
    except GpuscopeError:
        sub.stop()
        raise
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    t0 = time.monotonic()
    seen = 0
    try:
        while not stop.is_set() and (opts.duration is None or time.monotonic() - t0 < opts.duration):
            f = sub.wait_frame(host, seen, 1.0)
            if f is not None:
                seen = next(x.frames for x in sub.snapshot() if x.host == host)
                try:
                    session.ingest(f)
                except Exception as e:  # noqa: BLE001 - logged and counted; recording goes on
                    session.tick_failed(e)
    finally:
        rec = session.stop_recording()
        sub.stop()
    size = os.path.getsize(opts.output) if os.path.exists(opts.output) else 0
    sys.stderr.write(f"gpuscope: recorded {count(rec.frames if rec else 0, 'frame')} of remote host {host} to {opts.output} "
                     f"({human_bytes(size)}); {sub.dropped} bad messages dropped\n")
    return 0
