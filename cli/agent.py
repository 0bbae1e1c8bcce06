"""``gpuscope agent`` (publish frames to MQTT) and ``gpuscope record --broker`` (record a remote host)."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from gpuscope.cli.record import human_bytes
from gpuscope.core.errors import GpuscopeError
from gpuscope.core.session import Session, run_ticks
from gpuscope.sources.mqtt import BrokerConfig, Publisher, Subscriber, parse_broker, safe_host
from gpuscope.sources.recording import Recorder


def broker_config(args: argparse.Namespace) -> BrokerConfig:

    return parse_broker(args.broker, username=args.username, password_file=args.password_file,
                            ca_file=args.tls_ca, cert_file=args.tls_cert, key_file=args.tls_key,
                        prefix=args.topic_prefix, qos=args.qos)


def run_agent(args: argparse.Namespace, open_source: Callable[..., Any]) -> int:
    cfg = broker_config(args)
    src = open_source(args.simulate, pcie_mode=args.pcie_source, args=args)
    session = Session(src.inventory, interval_s=args.interval, history_s=60)
    pub = Publisher(cfg, src.inventory).start()
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda *_: stop.set())
    sim = " (SIMULATED)" if src.inventory.simulated else ""
    sys.stderr.write(f"gpuscope agent: publishing {len(src.inventory.devices)} GPUs of {pub.host}{sim} to "
                     f"{'mqtts' if cfg.tls else 'mqtt'}://{cfg.host}:{cfg.port} under {cfg.prefix}/v1/{pub.host}/ "
                     f"every {args.interval:g} s\n")
    last_note = [0.0]

    def on_frame(frame: Any) -> None:
        pub.publish_frame(session.ingest(frame))
        if not pub.connected and time.monotonic() - last_note[0] > 30:
            last_note[0] = time.monotonic()
            sys.stderr.write(f"gpuscope agent: broker unreachable ({pub.last_error or 'connecting'}); sampling on, "
                             f"{pub.dropped} frames dropped so far\n")

    try:
        run_ticks(src.sample, on_frame, args.interval, stop, on_error=session.tick_failed)
    finally:
        pub.stop()
        src.close()
    errs = session.tick_errors
    sys.stderr.write(f"gpuscope agent: stopped; {pub.sent} frames sent, {pub.dropped} dropped"
                     f"{'; ' + errs.text() if errs.count else ''}\n")
    return 0


def run_remote_record(args: argparse.Namespace) -> int:
    cfg = broker_config(args)
    host = safe_host(args.host)
    sub = Subscriber(cfg, only_host=host).start()
    inv = sub.wait_inventory(host, 10.0)
    if inv is None:
        sub.stop()
        raise GpuscopeError(f"no inventory from host {host!r} on {args.broker} within 10 s (is its agent running?)")
    session = Session(inv, interval_s=args.interval, record_findings=False)  # the agent's findings travel in frames
    try:
        session.start_recording(Recorder(args.output, inv, command=sys.argv[:], interval_s=args.interval,
                                         origin={"remote": host, "broker": args.broker, "simulated": inv.simulated}))
    except GpuscopeError:
        sub.stop()
        raise
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    t0 = time.monotonic()
    seen = 0
    try:
        while not stop.is_set() and (args.duration is None or time.monotonic() - t0 < args.duration):
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
    size = os.path.getsize(args.output) if os.path.exists(args.output) else 0
    sys.stderr.write(f"gpuscope: recorded {rec.frames if rec else 0} frames of remote host {host} to {args.output} "
                     f"({human_bytes(size)}); {sub.dropped} bad messages dropped\n")
    return 0
