"""``gpuscope agent`` (publish frames to MQTT) and ``gpuscope record --broker`` (record a remote host)."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from gpuscope.cli.agent_id import machine_id, run_id, state_file
from gpuscope.cli.gc_tune import settle_gc
from gpuscope.cli.options import AgentOptions, RecordOptions, SourceOptions
from gpuscope.core.errors import GpuscopeError
from gpuscope.core.session import Session, run_ticks
from gpuscope.core.summary import SummaryPacer, summarise
from gpuscope.core.text import count
from gpuscope.sources.mqtt import Publisher, Subscriber, safe_host
from gpuscope.sources.recording import Recorder

log = logging.getLogger(__name__)


def run_agent(opts: AgentOptions, open_source: Callable[[SourceOptions], Any]) -> int:
    """Sample every ``--interval``; publish to ``--broker``, serve ``--prometheus``, or both."""
    cfg, listen = opts.broker, opts.listen
    web = None
    if opts.web_config is not None:  # a bad file is one line before anything starts
        from gpuscope.sources.webconfig import load_web_config

        web = load_web_config(opts.web_config)
    src = open_source(opts.source)
    interval = opts.source.interval
    session = Session(src.inventory, interval_s=interval, history_s=60)
    pub = exporter = pods = None
    stop = threading.Event()
    try:
        if listen is not None:
            from gpuscope.sources.prometheus import PrometheusExporter

            if opts.kubelet_socket is not None:
                from gpuscope.sources.kubelet import PodLabels, PodMapper, mig_parents

                devices = src.inventory.devices
                pods = PodMapper(opts.kubelet_socket, devices, mig=mig_parents(getattr(src, "nvml", None), devices),
                                 note=lambda s: sys.stderr.write(f"gpuscope agent: {s}\n")).start()
            # --name (what this agent publishes as, here too), else NODE_NAME (a DaemonSet sets it from the
            # downward API): the node, as dcgm-exporter labels it; a container's own host name is its pod's name
            exporter = PrometheusExporter(listen, src.inventory, hostname_label=opts.prometheus_hostname_label,
                                          hostname=opts.name or os.environ.get("NODE_NAME") or None,
                                          dcgm_names=opts.dcgm_names,
                                          pods=PodLabels(pods.current) if pods is not None else None,
                                          web=web).start()
        if cfg is not None:
            machine, warning = machine_id(state_file())
            if warning:
                log.warning("%s", warning)  # one line on stderr ("gpuscope: warning: …") and in the log file
            pub = Publisher(cfg, src.inventory, name=opts.name, machine=machine, run=run_id(),
                            on_fatal=stop.set).start()  # a refused login ends the agent (exit 1)
    except BaseException:
        if exporter is not None:
            exporter.stop()
        if pods is not None:
            pods.stop()
        src.close()
        raise
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda *_: stop.set())
    sim = " (SIMULATED)" if src.inventory.simulated else ""
    what = []
    if pub is not None and cfg is not None:
        what.append(f"publishing to {'mqtts' if cfg.tls else 'mqtt'}://{cfg.host}:{cfg.port} under "
                    f"{cfg.prefix}/v1/{pub.host}/")
    if exporter is not None:
        what.append(f"serving {exporter.url}" + (f" ({web.describe()})" if web is not None else "")
                    + (f" with pod labels from {pods.path}" if pods is not None else ""))
    named = f" as {pub.host}" if pub is not None and pub.host != src.inventory.host else ""
    sys.stderr.write(f"gpuscope agent: {len(src.inventory.devices)} GPUs of {src.inventory.host}{named}{sim}: "
                     f"{'; '.join(what)}; every {interval:g} s\n")
    last_note = [0.0]
    tick = _TickClock(interval)
    pacer = SummaryPacer(every_s=max(5.0, interval))
    connects = [0]

    def sample() -> Any:
        tick.begin()
        return src.sample()

    def on_frame(frame: Any) -> None:
        frame = session.ingest(frame)
        if pub is not None and cfg is not None:
            pub.publish_frame(frame)
            s = summarise(src.inventory, frame, session.findings.active, interval_s=interval)
            if pacer.due(s.key(), frame.t):
                pub.publish_summary(replace(s, host=pub.host, seq=pacer.seq))
            note = connection_note(connects[0], pub.connects, pub.connected, pub.last_error,
                                   time.monotonic() - last_note[0], pub.dropped,
                                   f"{'mqtts' if cfg.tls else 'mqtt'}://{cfg.host}:{cfg.port}")
            connects[0] = pub.connects
            if note:
                if "unreachable" in note:
                    last_note[0] = time.monotonic()
                sys.stderr.write(f"gpuscope agent: {note}\n")
        if exporter is not None:
            exporter.update(frame, session.findings.active,
                            tick.end(mqtt_dropped=pub.dropped if pub is not None else None))

    try:
        settle_gc()  # started: the collector set for a long run
        run_ticks(sample, on_frame, interval, stop, on_error=session.tick_failed)
    finally:
        if pub is not None:
            pub.stop()
        if exporter is not None:
            exporter.stop()
        if pods is not None:
            pods.stop()
        src.close()
    sent = (f"; {count(session.frames_seen, 'frame')} sampled, {pub.sent} sent to the broker, {pub.dropped} dropped"
            if pub is not None else "")
    served = f"; {exporter.scrapes} scrapes served" if exporter is not None else ""
    errs = session.tick_errors
    trouble = f"; {errs.text()}" if errs.count else ""
    sys.stderr.write(f"gpuscope agent: stopped{sent}{served}{trouble}\n")
    if pub is not None and pub.fatal:  # not healthy under systemd while sending nothing: exit 1, one line
        raise GpuscopeError(pub.fatal)
    return 0


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
        from gpuscope.sources.prometheus import skipped_ticks

        now = self.clock()
        self.skipped += skipped_ticks(self._start, now, self.interval_s)
        self._start = now

    def end(self, mqtt_dropped: int | None = None) -> Any:
        from gpuscope.sources.prometheus import SamplerHealth

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
