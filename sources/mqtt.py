"""Fleet transport over an MQTT broker (aiomqtt 2.x behind a small adapter). Topics: docs/mqtt.md.

Topic schema v1, under a prefix (default ``gpuscope``):

* ``{prefix}/v1/{host}/inventory`` retained: the inventory (core codec)
* ``{prefix}/v1/{host}/status`` retained: ``{"state": "online"|"offline", "t": …}``; the broker
  publishes the last will ``offline`` if the agent vanishes
* ``{prefix}/v1/{host}/frame``: each frame (core codec; findings raised/cleared travel as its events)

Every payload is validated with the codec; malformed, oversized or hostile messages are dropped and
counted. Queues are bounded: an agent whose broker is down keeps sampling and drops the oldest frames.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import ssl
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from gpuscope.core import validate
from gpuscope.core.codec import (
    CodecError,
    frame_from_dict,
    frame_to_dict,
    inventory_from_dict,
    inventory_to_dict,
)
from gpuscope.core.errors import GpuscopeError
from gpuscope.core.model import Frame, Inventory
from gpuscope.core.vocab import SEV_RANK, SEVERITIES

TOPIC_VERSION = "v1"
MAX_PAYLOAD = 1_000_000  # bytes; larger messages are dropped
MAX_HOSTS = 10_000
HOST_RE = re.compile(r"[A-Za-z0-9._-]{1,128}\Z")


class BrokerError(GpuscopeError, ValueError):
    """A broker URL or credentials that cannot be used (one line for the user)."""


@dataclass(frozen=True)
class BrokerConfig:
    host: str
    port: int
    tls: bool
    username: str | None = None
    password: str | None = None
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    prefix: str = "gpuscope"
    qos: int = 0


def parse_broker(url: str, *, username: str | None = None, password_file: str | None = None,
                 env: Mapping[str, str] | None = None, ca_file: str | None = None, cert_file: str | None = None,
                 key_file: str | None = None, prefix: str = "gpuscope", qos: int = 0) -> BrokerConfig:
    """``mqtt://host[:1883]`` or ``mqtts://host[:8883]``. The password comes from a file or the
    ``GPUSCOPE_MQTT_PASSWORD`` environment variable, never the command line; a password in the URL is
    refused."""
    env = os.environ if env is None else env
    parts = urlsplit(url)
    if parts.scheme not in ("mqtt", "mqtts") or not parts.hostname:
        raise BrokerError(f"--broker {url!r}: expected mqtt://HOST[:PORT] or mqtts://HOST[:PORT]")
    if parts.password:
        raise BrokerError("a password in the broker URL would show in the process list: use --password-file "
                          "or GPUSCOPE_MQTT_PASSWORD")
    tls = parts.scheme == "mqtts"
    try:
        port = parts.port or (8883 if tls else 1883)
    except ValueError:
        raise BrokerError(f"--broker {url!r}: bad port") from None
    password = None
    if password_file:
        try:
            with open(password_file, encoding="utf-8") as f:
                password = f.read().strip()
        except OSError as e:
            raise BrokerError(f"cannot read the password file {password_file}: {e.strerror or e}") from None
    elif env.get("GPUSCOPE_MQTT_PASSWORD"):
        password = env["GPUSCOPE_MQTT_PASSWORD"]
    if qos not in (0, 1, 2):
        raise BrokerError("--qos must be 0, 1 or 2")
    if not re.fullmatch(r"[A-Za-z0-9._/-]{1,64}", prefix) or "+" in prefix or "#" in prefix:
        raise BrokerError(f"--topic-prefix {prefix!r}: letters, digits, . _ - / only")
    return BrokerConfig(host=parts.hostname, port=port, tls=tls or bool(ca_file), username=username or parts.username,
                        password=password, ca_file=ca_file, cert_file=cert_file, key_file=key_file,
                        prefix=prefix.strip("/"), qos=qos)


def topic(cfg: BrokerConfig, host: str, kind: str) -> str:
    return f"{cfg.prefix}/{TOPIC_VERSION}/{host}/{kind}"


def _client(cfg: BrokerConfig, identifier: str, will: Any = None) -> Any:
    import aiomqtt

    ctx = None
    if cfg.tls:
        ctx = ssl.create_default_context(cafile=cfg.ca_file)
        if cfg.cert_file:
            ctx.load_cert_chain(cfg.cert_file, cfg.key_file)
    return aiomqtt.Client(cfg.host, cfg.port, username=cfg.username, password=cfg.password, identifier=identifier,
                          will=will, tls_context=ctx, timeout=5, keepalive=15, max_queued_incoming_messages=10_000)


def safe_host(name: str) -> str:
    """A host name usable as one topic level."""
    s = re.sub(r"[^A-Za-z0-9._-]", "_", name)[:128]
    return s or "unknown"


def describe_error(e: BaseException) -> str:
    """One line for a failed connection; for TLS, which check failed.

    aiomqtt re-raises connection errors as ``MqttError(str(exc))`` with the original kept as the
    context; an ``ssl.SSLCertVerificationError`` there gives e.g. ``TLS: certificate verify failed:
    Basic Constraints of CA cert not marked critical`` (Python 3.13 checks X.509 strictly).
    """
    seen: set[int] = set()
    cur: BaseException | None = e
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, ssl.SSLCertVerificationError):
            return f"TLS: certificate verify failed: {cur.verify_message or cur.reason or cur}"[:200]
        if isinstance(cur, ssl.SSLError):
            return f"TLS: {cur.reason or cur}"[:200]
        cur = cur.__cause__ or cur.__context__
    if isinstance(e, OSError) and e.strerror:
        return e.strerror[:200]
    return str(e)[:200] or type(e).__name__


class _LoopThread:
    """One daemon thread running one asyncio loop for :meth:`_main`; :meth:`_end` ends it and joins.

    Waits are asyncio events woken from other threads with ``call_soon_threadsafe`` (no executor
    threads), and stopping ends the loop and joins the thread, so nothing is left to schedule work on
    a shut-down executor at interpreter exit ("cannot schedule new futures after shutdown").
    """

    def __init__(self, name: str) -> None:
        self._stop = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._astop: asyncio.Event | None = None  # set with _stop, inside the loop
        self._nudge: asyncio.Event | None = None  # new work (a frame to publish) or stop
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    async def _main(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        try:
            self._astop, self._nudge = asyncio.Event(), asyncio.Event()
            self._task = loop.create_task(self._main())
            self._loop = loop
            if self._stop.is_set():  # stop() ran before the loop existed
                self._task.cancel()
            try:
                loop.run_until_complete(self._task)
            except asyncio.CancelledError:
                pass
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())  # aiomqtt connects in an executor
        finally:
            self._loop = None
            loop.close()

    def _call(self, fn: Any) -> None:
        """Run ``fn()`` in the loop's thread (nothing when the loop is not running)."""
        loop = self._loop
        if loop is not None:
            try:
                loop.call_soon_threadsafe(fn)
            except RuntimeError:  # the loop closed meanwhile
                pass

    def _wake(self) -> None:
        nudge = self._nudge
        if nudge is not None:
            self._call(nudge.set)

    async def _pause(self, seconds: float, event: asyncio.Event | None) -> None:
        """Sleep ``seconds`` or until ``event`` is set (then clear it)."""
        assert event is not None
        try:
            await asyncio.wait_for(event.wait(), seconds)
        except asyncio.TimeoutError:
            pass
        event.clear()

    def _end(self, grace_s: float) -> None:
        """Stop: let :meth:`_main` finish on its own for ``grace_s`` seconds, then cancel it; join."""
        self._stop.set()
        astop, nudge = self._astop, self._nudge
        if astop is not None and nudge is not None:
            self._call(astop.set)
            self._call(nudge.set)
        if not self._thread.is_alive():
            return
        if grace_s > 0:
            self._thread.join(grace_s)
        task = self._task
        if self._thread.is_alive() and task is not None:
            self._call(task.cancel)
        self._thread.join(10.0)  # a connect in progress ends within the client's 5 s timeout


class Publisher(_LoopThread):
    """The agent's side: publishes inventory (retained), status (retained, last will offline), frames.

    :meth:`publish_frame` never blocks: frames wait in a bounded queue (oldest dropped) while the
    broker is away; a background thread reconnects with backoff and resumes.
    """

    def __init__(self, cfg: BrokerConfig, inventory: Inventory, queue_max: int = 120):
        super().__init__("gpuscope-mqtt")
        self.cfg = cfg
        self.host = safe_host(inventory.host)
        self.inventory = inventory
        self.queue: deque[bytes] = deque(maxlen=queue_max)
        self.dropped = 0
        self.sent = 0
        self.connected = False
        self.last_error: str | None = None

    def start(self) -> Publisher:
        self._thread.start()
        return self

    def publish_frame(self, frame: Frame) -> None:
        if len(self.queue) == self.queue.maxlen:
            self.dropped += 1
        self.queue.append(json.dumps(frame_to_dict(frame), separators=(",", ":")).encode())
        self._wake()

    def stop(self) -> None:
        """Publish ``offline`` (reason ``stopped``) if connected, end the thread and its loop, join."""
        self._end(grace_s=3.0)

    async def _main(self) -> None:
        import aiomqtt

        status_t = topic(self.cfg, self.host, "status")
        will = aiomqtt.Will(status_t, json.dumps({"state": "offline", "reason": "lost"}).encode(), qos=1, retain=True)
        backoff = 0.5
        while not self._stop.is_set():
            try:
                async with _client(self.cfg, f"gpuscope-agent-{self.host}-{os.getpid()}", will) as c:
                    self.connected, backoff, self.last_error = True, 0.5, None
                    await c.publish(topic(self.cfg, self.host, "inventory"),
                                    json.dumps(inventory_to_dict(self.inventory)).encode(), qos=1, retain=True)
                    await c.publish(status_t, json.dumps({"state": "online", "t": time.time()}).encode(), qos=1,
                                    retain=True)
                    frame_t = topic(self.cfg, self.host, "frame")
                    while not self._stop.is_set():
                        while self.queue:
                            payload = self.queue[0]
                            await c.publish(frame_t, payload, qos=self.cfg.qos)
                            self.queue.popleft()
                            self.sent += 1
                        await self._pause(1.0, self._nudge)  # until the next frame (or stop)
                    await c.publish(status_t, json.dumps({"state": "offline", "reason": "stopped",
                                                          "t": time.time()}).encode(), qos=1, retain=True)
                    return
            except (aiomqtt.MqttError, OSError) as e:
                self.connected, self.last_error = False, describe_error(e)
            await self._pause(backoff, self._astop)
            backoff = min(backoff * 2, 30.0)


@dataclass
class RemoteHost:
    host: str
    inventory: Inventory | None = None
    frame: Frame | None = None
    online: bool = False
    last_seen: float | None = None
    frames: int = 0
    recent: deque[Frame] = field(default_factory=lambda: deque(maxlen=2))  # bounded: flat memory with many hosts
    findings: dict[str, tuple[str, str]] = field(default_factory=dict)  # id → (severity, message)

    def worst(self) -> tuple[int, str]:
        """(severity rank 0 critical … 3 none, message) of the worst active finding (ranks: core/vocab.py)."""
        none = len(SEVERITIES)
        best = (none, "")
        for sev, msg in self.findings.values():
            r = SEV_RANK.get(sev, none)
            if r < best[0]:
                best = (r, msg)
        return best


class Subscriber(_LoopThread):
    """The viewer's side: one state per host from retained inventory/status and live frames.

    Malformed, oversized or hostile payloads are dropped and counted in :attr:`dropped`.
    """

    def __init__(self, cfg: BrokerConfig, only_host: str | None = None):
        super().__init__("gpuscope-mqtt-sub")
        self.cfg = cfg
        self.only_host = only_host
        self.hosts: dict[str, RemoteHost] = {}
        self.dropped = 0
        self.tally = validate.Tally()  # readings the validation gate turned into unknown
        self.connected = False
        self.last_error: str | None = None
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)

    def start(self) -> Subscriber:
        self._thread.start()
        return self

    def stop(self) -> None:
        """End the thread and its loop (it may be waiting for the next message: cancelled) and join."""
        self._end(grace_s=0.0)

    def snapshot(self) -> list[RemoteHost]:
        with self._lock:
            return list(self.hosts.values())

    def handle(self, topic_name: str, payload: bytes | bytearray | str | None) -> bool:
        """Apply one message; False (and counted) when it was dropped."""
        parts = topic_name.split("/")
        plen = len(self.cfg.prefix.split("/"))
        if len(parts) != plen + 3 or parts[plen] != TOPIC_VERSION:
            return self._drop()
        host, kind = parts[plen + 1], parts[plen + 2]
        if not HOST_RE.match(host) or (self.only_host and host != self.only_host):
            return self._drop()
        if payload is None or isinstance(payload, (int, float)) or len(payload) > MAX_PAYLOAD:
            return self._drop()
        try:  # the validation gate: size, depth, valid JSON (a one-line ValidationError, counted as a drop)
            doc = validate.loads(payload, "payload", max_bytes=MAX_PAYLOAD)
        except validate.ValidationError:
            return self._drop()
        with self._lock:
            h = self.hosts.get(host)
            if h is None:
                if len(self.hosts) >= MAX_HOSTS:
                    return self._drop_locked()
                h = self.hosts[host] = RemoteHost(host=host)
            try:
                if kind == "inventory":
                    h.inventory = inventory_from_dict(doc)
                    self._cond.notify_all()
                elif kind == "status":
                    if not isinstance(doc, dict) or doc.get("state") not in ("online", "offline"):
                        return self._drop_locked()
                    h.online = doc["state"] == "online"
                elif kind == "frame":
                    f = frame_from_dict(doc, h.inventory, self.tally)  # rejects GPUs the inventory lacks
                    h.frame = f
                    h.recent.append(f)
                    for ev in f.events:
                        fid = ev.data.get("id") if isinstance(ev.data, dict) else None
                        if not isinstance(fid, str):
                            continue
                        if ev.kind == "finding_raised" and len(h.findings) < 1000:
                            h.findings[fid] = (str(ev.data.get("severity")), ev.text[:300])
                        elif ev.kind == "finding_cleared":
                            h.findings.pop(fid, None)
                    h.frames += 1
                    h.online = True
                    h.last_seen = time.time()
                    self._cond.notify_all()
                else:
                    return self._drop_locked()
            except (CodecError, RecursionError, ValueError):
                return self._drop_locked()
        return True

    def _drop(self) -> bool:
        with self._lock:
            return self._drop_locked()

    def _drop_locked(self) -> bool:
        self.dropped += 1
        return False

    def wait_frame(self, host: str, after: int, timeout: float) -> Frame | None:
        """Block until ``host`` has more than ``after`` frames (for the remote recorder)."""
        with self._cond:
            self._cond.wait_for(lambda: self.hosts.get(host) is not None and self.hosts[host].frames > after,
                                timeout=timeout)
            h = self.hosts.get(host)
            return h.frame if h is not None and h.frames > after else None

    def wait_inventory(self, host: str, timeout: float) -> Inventory | None:
        """Block until ``host``'s retained inventory has arrived; None after ``timeout`` seconds."""
        with self._cond:
            self._cond.wait_for(lambda: self.hosts.get(host) is not None and self.hosts[host].inventory is not None,
                                timeout=timeout)
            h = self.hosts.get(host)
            return h.inventory if h is not None else None

    async def _main(self) -> None:
        import aiomqtt

        backoff = 0.5
        while not self._stop.is_set():
            try:
                async with _client(self.cfg, f"gpuscope-view-{os.getpid()}-{id(self)}") as c:
                    await c.subscribe(f"{self.cfg.prefix}/{TOPIC_VERSION}/+/+", qos=self.cfg.qos)
                    self.connected, backoff, self.last_error = True, 0.5, None
                    async for msg in c.messages:
                        self.handle(msg.topic.value, msg.payload)
                        if self._stop.is_set():
                            return
            except (aiomqtt.MqttError, OSError) as e:
                self.last_error = describe_error(e)
            self.connected = False
            with self._lock:  # the broker is gone: nobody can be confirmed online
                for h in self.hosts.values():
                    h.online = False
            await self._pause(backoff, self._astop)
            backoff = min(backoff * 2, 30.0)
