"""``gpuscope agent`` (publish to MQTT), ``gpuscope --broker`` (fleet view), ``record --broker``."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from gpuscope.sources.mqtt import BrokerConfig, BrokerError, Publisher, Subscriber, parse_broker, safe_host
from gpuscope.sources.session import Session, run_ticks


def broker_config(args: argparse.Namespace) -> BrokerConfig:
    from .cli import UserError

    try:
        return parse_broker(args.broker, username=args.username, password_file=args.password_file,
                            ca_file=args.tls_ca, cert_file=args.tls_cert, key_file=args.tls_key,
                            prefix=args.topic_prefix, qos=args.qos)
    except BrokerError as e:
        raise UserError(str(e)) from None


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
        run_ticks(src.sample, on_frame, args.interval, stop)
    finally:
        pub.stop()
        src.close()
    sys.stderr.write(f"gpuscope agent: stopped; {pub.sent} frames sent, {pub.dropped} dropped\n")
    return 0


class RemoteFeeder:
    """Feeds one remote host's frames (from the subscriber) into a Session, like live sampling."""

    label = "REMOTE"

    def __init__(self, sub: Subscriber, host: str, session: Session, on_update: Callable[[], None]):
        self.sub, self.host, self.session, self.on_update = sub, host, session, on_update
        self.error: str | None = None
        self.session_lock = threading.RLock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="gpuscope-remote")

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        seen = 0
        while not self._stop.is_set():
            f = self.sub.wait_frame(self.host, seen, 1.0)
            h = next((x for x in self.sub.snapshot() if x.host == self.host), None)
            if f is not None and h is not None:
                seen = h.frames
                with self.session_lock:
                    self.session.ingest(f)
                self.error = None
            elif h is not None and not h.online:
                self.error = f"{self.host} is offline" + (f" (broker: {self.sub.last_error})" if self.sub.last_error
                                                          else "")
            self.on_update()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)


def _wait_inventory(sub: Subscriber, host: str, timeout: float) -> Any:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        h = next((x for x in sub.snapshot() if x.host == host), None)
        if h is not None and h.inventory is not None:
            return h.inventory
        time.sleep(0.1)
    return None


def run_fleet(args: argparse.Namespace) -> int:
    from .app import GpuscopeApp, _check_terminal
    from .cli import UserError
    from .fleet_app import FleetApp

    _check_terminal()
    cfg = broker_config(args)
    sub = Subscriber(cfg).start()
    try:
        host = args.host
        while True:
            if host is None:
                host = FleetApp(sub, cfg).run()
                if not host:
                    return 0
            inv = _wait_inventory(sub, host, 5.0)
            if inv is None:
                raise UserError(f"no inventory from host {host!r} on the broker (is its agent running?)")
            session = Session(inv, interval_s=args.interval)
            app = GpuscopeApp(session, None, label="REMOTE", interval_s=args.interval)
            app.feeder = RemoteFeeder(sub, host, session, app.notify_update)
            app.run()
            if args.host:
                return 0
            host = None
    finally:
        sub.stop()


def run_remote_record(args: argparse.Namespace) -> int:
    from gpuscope.sources.recording import RecordingError

    from .cli import UserError
    from .record_cmd import human_bytes

    cfg = broker_config(args)
    host = safe_host(args.host)
    sub = Subscriber(cfg, only_host=host).start()
    inv = _wait_inventory(sub, host, 10.0)
    if inv is None:
        sub.stop()
        raise UserError(f"no inventory from host {host!r} on {args.broker} within 10 s (is its agent running?)")
    session = Session(inv, interval_s=args.interval, record_findings=False)  # the agent's findings travel in frames
    try:
        session.start_recording(args.output, command=sys.argv[:], origin={"remote": host, "broker": args.broker,
                                                                          "simulated": inv.simulated})
    except RecordingError as e:
        sub.stop()
        raise UserError(str(e)) from None
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
                session.ingest(f)
    finally:
        rec = session.stop_recording()
        sub.stop()
    size = os.path.getsize(args.output) if os.path.exists(args.output) else 0
    sys.stderr.write(f"gpuscope: recorded {rec.frames if rec else 0} frames of remote host {host} to {args.output} "
                     f"({human_bytes(size)}); {sub.dropped} bad messages dropped\n")
    return 0
