"""Fleet transport over an MQTT broker (aiomqtt 2.x behind a small adapter). Topics: docs/mqtt.md.

Topic schema v1, under a prefix (default ``gpuscope``):

* ``{prefix}/v1/{host}/inventory`` retained: the inventory (core codec)
* ``{prefix}/v1/{host}/status`` retained: ``{"state": "online"|"offline", "t": …}``; the broker
  publishes the last will ``offline`` if the agent vanishes
* ``{prefix}/v1/{host}/frame``: each frame (core codec; findings raised/cleared travel as its events)
* ``{prefix}/v1/{host}/summary`` retained: a few hundred bytes per host (:mod:`gpuscope.core.summary`),
  every few seconds and on change; the fleet screen subscribes to summaries and status only

Every payload is validated with the codec; malformed, oversized or hostile messages are dropped and
counted. Queues are bounded: an agent whose broker is down keeps sampling and drops the oldest frames.
"""

from __future__ import annotations

import asyncio
import logging
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
    inventory_from_dict,
)
from gpuscope.core.errors import GpuscopeError
from gpuscope.core.model import Frame, Inventory
from gpuscope.core.redact import public_url
from gpuscope.core.summary import HostSummary, SummaryError, summarise, summary_from_dict
from gpuscope.core.vocab import SEV_RANK, SEVERITIES

TOPIC_VERSION = "v1"
MAX_PAYLOAD = 1_000_000  # bytes; larger messages are dropped
MAX_HOSTS = 10_000
HOST_RE = re.compile(r"[A-Za-z0-9._-]{1,128}\Z")
LEGACY_EVERY_S = 5.0  # an older agent's frames (no summary stream) are decoded at most this often per host
BROKER_DROPPED_TOPIC = "$SYS/broker/publish/messages/dropped"  # Mosquitto's count, every client together
STATUS_SUMMARY_MARK = "summary"  # a status with this key: the agent publishes the summary stream
AUTH_REFUSED = frozenset({4, 5, 134, 135})  # CONNACK: bad user name or password, not authorized (MQTT 3.1.1, 5)
AUTH_FAILED = "authentication failed"
AUTH_HINT = "the broker refused the login: check --username and the password"
AUTH_TRIES = 3  # the agent exits after this many refused logins in a row
CLASH_WINDOW_S = 60.0  # two publishers of one host name interleaving within this: shown as a clash
MAX_STREAMS = 8  # publishers remembered per host name
CLOCK_SKEW_S = 5.0  # a host clock further off than this is shown as such ("clock 1h behind")
CLOCK_SAMPLES = 4  # live summaries that must agree on the offset (~20 s at one summary per 5 s)


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
        raise BrokerError(f"--broker {public_url(url)!r}: expected mqtt://HOST[:PORT] or mqtts://HOST[:PORT]")
    if parts.password:
        raise BrokerError("a password in the broker URL would show in the process list: use --password-file "
                          "or GPUSCOPE_MQTT_PASSWORD")
    tls = parts.scheme == "mqtts"
    try:
        port = parts.port or (8883 if tls else 1883)
    except ValueError:
        raise BrokerError(f"--broker {public_url(url)!r}: bad port") from None
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
    if tls or ca_file or cert_file or key_file:
        tls_context(ca_file, cert_file, key_file)  # a missing or wrong file is a start-up error, not a retry loop
    return BrokerConfig(host=parts.hostname, port=port, tls=tls or bool(ca_file), username=username or parts.username,
                        password=password, ca_file=ca_file, cert_file=cert_file, key_file=key_file,
                        prefix=prefix.strip("/"), qos=qos)


def _pem(flag: str, path: str) -> bytes:
    """The text of a ``--tls-*`` file; a BrokerError naming it when it cannot be read or holds no PEM block."""
    try:
        with open(path, "rb") as f:
            data = f.read(1_000_000)
    except OSError as e:
        raise BrokerError(f"{flag} {path}: {e.strerror or e}") from None
    if b"-----BEGIN " not in data:
        raise BrokerError(f"{flag} {path}: not a PEM file (no '-----BEGIN' line)")
    return data


def _no_passphrase() -> str:
    raise BrokerError("an encrypted key (it asks for a passphrase) is not supported")


def tls_context(ca_file: str | None, cert_file: str | None, key_file: str | None) -> ssl.SSLContext:
    """The TLS context for ``--tls-ca``/``--tls-cert``/``--tls-key`` (system CAs without ``ca_file``); a
    BrokerError (one line, naming the file) for a file that is missing, not PEM, a cert without its key, a key
    that is not the cert's, or an encrypted key (OpenSSL would ask for its passphrase on the terminal)."""
    if key_file and not cert_file:
        raise BrokerError(f"--tls-key {key_file} needs --tls-cert FILE (the certificate it belongs to)")
    cert = _pem("--tls-cert", cert_file) if cert_file else b""
    if cert_file and b"CERTIFICATE-----" not in cert:
        raise BrokerError(f"--tls-cert {cert_file} holds no certificate")
    if key_file:
        if b"PRIVATE KEY-----" not in _pem("--tls-key", key_file):
            raise BrokerError(f"--tls-key {key_file} holds no private key")
    elif cert_file and b"PRIVATE KEY-----" not in cert:
        raise BrokerError(f"--tls-cert {cert_file} holds no private key: give its key with --tls-key FILE")
    if ca_file:
        _pem("--tls-ca", ca_file)
    try:
        ctx = ssl.create_default_context(cafile=ca_file)
    except ssl.SSLError as e:
        raise BrokerError(f"--tls-ca {ca_file}: not a usable CA certificate ({_ssl_reason(e)})") from None
    if cert_file:
        try:
            ctx.load_cert_chain(cert_file, key_file, password=_no_passphrase)
        except BrokerError as e:
            raise BrokerError(f"--tls-key {key_file or cert_file}: {e}") from None
        except ssl.SSLError as e:
            if "KEY_VALUES_MISMATCH" in str(e) or "key values mismatch" in str(e):
                raise BrokerError(f"--tls-key {key_file} is not the key of --tls-cert {cert_file}") from None
            raise BrokerError(f"--tls-cert {cert_file}" + (f" / --tls-key {key_file}" if key_file else "")
                              + f": not a usable certificate and key ({_ssl_reason(e)})") from None
    return ctx


def _ssl_reason(e: ssl.SSLError) -> str:
    """OpenSSL's reason in words ("PEM lib": a PEM block that does not decode)."""
    reason = e.reason or re.sub(r"^\[\w+\] | \(_ssl\.c:\d+\)$", "", str(e))
    return "malformed PEM" if reason == "PEM lib" else reason.replace("_", " ").lower()


def topic(cfg: BrokerConfig, host: str, kind: str) -> str:
    return f"{cfg.prefix}/{TOPIC_VERSION}/{host}/{kind}"


class _DropCounter(logging.Handler):
    """Counts the messages the client library discards (its log line "Message queue is full")."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "queue is full" in record.getMessage():
            self.count += 1


class _DirectQueue(asyncio.Queue[Any]):
    """An incoming "queue" that hands each message to :attr:`sink` as the client library reads it.

    The viewer's handler is quick (~30 µs a summary) and runs in the same event-loop thread, so there is
    no queue to overflow and no task per message (aiomqtt's iterator costs more than the handling). When
    the viewer cannot keep up, the socket fills and the broker drops (counted via ``$SYS``).
    """

    sink: Any = None

    def put_nowait(self, item: Any) -> None:
        type(self).sink(item)


def _client(cfg: BrokerConfig, identifier: str, will: Any = None, logger: logging.Logger | None = None,
            queue_max: int = 10_000, queue_type: Any = None) -> Any:
    import aiomqtt

    ctx = tls_context(cfg.ca_file, cfg.cert_file, cfg.key_file) if cfg.tls else None
    return aiomqtt.Client(cfg.host, cfg.port, username=cfg.username, password=cfg.password, identifier=identifier,
                          will=will, tls_context=ctx, timeout=5, keepalive=15, max_queued_incoming_messages=queue_max,
                          logger=logger, queue_type=queue_type)


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
    if auth_refused(e):
        return f"{AUTH_FAILED} ({AUTH_HINT})"
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


def auth_refused(e: BaseException) -> bool:
    """Whether ``e`` is the broker refusing the login (CONNACK 4/5, or 134/135 in MQTT 5's codes)."""
    from aiomqtt.exceptions import MqttConnectError  # not other MqttCodeErrors: their 4 means not connected

    if not isinstance(e, MqttConnectError):
        return False
    rc = getattr(e, "rc", None)
    rc = getattr(rc, "value", rc)
    return isinstance(rc, int) and rc in AUTH_REFUSED


def _quiet_loop_errors(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """What asyncio would print on stderr from a client's loop (a future aiomqtt left with an exception nobody
    retrieved, as when the broker and the agent stop together: "Future exception was never retrieved …
    Unexpected disconnection"): logged, never printed over a terminal or into a systemd journal as a traceback."""
    exc = context.get("exception")
    logging.getLogger("gpuscope.mqtt").debug("MQTT client loop: %s%s", context.get("message", ""),
                                             f" ({type(exc).__name__}: {exc})" if exc else "")


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
        loop.set_exception_handler(_quiet_loop_errors)
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


@dataclass
class RemoteHost:
    host: str
    inventory: Inventory | None = None
    frame: Frame | None = None
    online: bool = False
    frames: int = 0  # frames decoded in full (the open host, ``--host``)
    recent: deque[Frame] = field(default_factory=lambda: deque(maxlen=2))  # bounded: flat memory with many hosts
    findings: dict[str, tuple[str, str, float]] = field(default_factory=dict)  # from frames: id → (sev, text, since)
    summary: HostSummary | None = None  # what the fleet row shows (the agent's, or built from an older agent's frame)
    data_t: float | None = None  # sample time (epoch s) of the newest data: "seen Ns ago" is now - data_t
    legacy: bool | None = None  # True: an older agent (frames only); False: publishes summaries; None: not known yet
    # per publisher of this name (HostSummary.stream(): machine/run) → [last seq, its t, monotonic time seen];
    # sequence gaps are counted per publisher, so two agents under one name never count each other as loss
    streams: dict[str, list[float]] = field(default_factory=dict)
    last_stream: str | None = None
    clash_until: float = 0.0  # monotonic: until then two or more agents publish under this name (see clash())
    # live summaries' (arrival - sample time) on the viewer's clock: the host clock's offset (clock_offset())
    offsets: deque[float] = field(default_factory=lambda: deque(maxlen=CLOCK_SAMPLES))
    last_decode: float = 0.0  # monotonic time of the last legacy frame decoded for the fleet row
    rank: int = len(SEVERITIES)  # worst()[0], kept up to date by the subscriber (the fleet sorts by it)

    def clash(self, mono: float) -> int:
        """How many agents publish under this name now (monotonic time ``mono``): 0 when only one does. Two
        publishers are seen when their summaries interleave (A, B, A) within :data:`CLASH_WINDOW_S`; an agent
        that restarts (A, then B for good) or a name moved to another machine is not a clash."""
        if mono >= self.clash_until:
            return 0
        # the UI thread asks while the subscriber's thread may add or drop a stream: tuple() copies the values
        # in one C call (no bytecode runs between, so no other thread can change the dict mid-way); each entry is
        # replaced whole, never changed in place
        return max(2, sum(1 for st in tuple(self.streams.values()) if mono - st[2] < CLASH_WINDOW_S))

    def clock_offset(self) -> float | None:
        """How far this host's clock is behind the viewer's (s; negative: ahead), when its last
        :data:`CLOCK_SAMPLES` live summaries all arrived more than :data:`CLOCK_SKEW_S` off and within 2 s of
        each other (a constant offset is a clock; a delay varies); None otherwise."""
        o = self.offsets
        if len(o) < (o.maxlen or 0) or max(o) - min(o) > 2.0:
            return None
        best = min(o, key=abs)  # the least delayed message
        return best if abs(best) > CLOCK_SKEW_S and (min(o) > 0 or max(o) < 0) else None

    def worst(self) -> tuple[int, str]:
        """(severity rank 0 critical … 3 none, message) of the worst active finding (ranks: core/vocab.py)."""
        if self.summary is not None and not self.summary.from_frame:
            return self.summary.worst()
        none = len(SEVERITIES)
        best = (none, "")
        for sev, msg, _ in self.findings.values():
            r = SEV_RANK.get(sev, none)
            if r < best[0]:
                best = (r, msg)
        return best


@dataclass(frozen=True)
class Health:
    """What the viewer did not get, for the status line: nothing is dropped silently."""

    bad: int  # malformed / wrong-shape messages
    lost: int  # summaries that never arrived (gaps in the per-host sequence numbers)
    queue_dropped: int  # discarded by the client library's full incoming queue
    broker_dropped: int | None  # Mosquitto's own count ($SYS, every client together), when the broker publishes it
    behind_s: float  # the oldest live data (publish → arrival) in the last ~10 s

    def line(self) -> str:
        """'' when nothing was dropped and the data is fresh, else one phrase, no count of zero: e.g. '6,513
        messages dropped (3 bad); data up to 27 s old' (bad: malformed; the others never arrived or overflowed
        the client's queue)."""
        parts = []
        missed = self.lost + self.queue_dropped
        if missed or self.bad:
            n = missed + self.bad
            noun = ("" if missed else "bad ") + ("message" if n == 1 else "messages")
            parts.append(f"{n:,} {noun} dropped" + (f" ({self.bad:,} bad)" if missed and self.bad else ""))
        if self.broker_dropped:
            parts.append(f"broker lost {self.broker_dropped:,} (all clients)")
        if self.behind_s >= 5.0:
            parts.append(f"data up to {self.behind_s:.0f} s old")
        return "; ".join(parts)


def _note_findings(h: RemoteHost, f: Frame) -> None:
    """A frame's finding events on the host's open findings: raised or changed (at most 1000) and cleared."""
    for ev in f.events:
        fid = ev.data.get("id") if isinstance(ev.data, dict) else None
        if not isinstance(fid, str):
            continue
        if ev.kind in ("finding_raised", "finding_changed") and len(h.findings) < 1000:
            ago = ev.data.get("since_s")
            ok = isinstance(ago, (int, float)) and not isinstance(ago, bool) and 0 <= ago < 1e9
            h.findings[fid] = (str(ev.data.get("severity")), ev.text[:300],
                               ev.t - float(ago) if ok and ago is not None else ev.t)
        elif ev.kind == "finding_cleared":
            h.findings.pop(fid, None)


class Subscriber(_LoopThread):
    """The viewer's side: one state per host.

    Fleet mode (``only_host`` None) subscribes to the retained ``summary`` and ``status`` of every host;
    full frames only for hosts opened with :meth:`watch`, and, for older agents that publish no
    summaries, their frames, decoded at most every :data:`LEGACY_EVERY_S` per host. With ``only_host``
    it subscribes to that host's topics alone. Malformed payloads are dropped and counted in
    :attr:`dropped`; lost summaries, library queue overflows and the broker's drops in :meth:`health`.
    A cleared retained message (empty payload) of a host's summary, status or inventory removes it.
    """

    def __init__(self, cfg: BrokerConfig, only_host: str | None = None, legacy_every_s: float = LEGACY_EVERY_S,
                 queue_max: int = 0):
        super().__init__("gpuscope-mqtt-sub")
        self.cfg = cfg
        # 0: each message is handled as it is read (no queue); N: the client library queues up to N messages
        # and discards (counted) beyond
        self.queue_max = queue_max
        self.only_host = only_host
        self.legacy_every_s = legacy_every_s
        self.hosts: dict[str, RemoteHost] = {}
        # bumped whenever the fleet's order may change (a host added or removed, online or worst finding changed):
        # the fleet screen re-sorts only then
        self.order_gen = 0
        self.dropped = 0
        self.lost = 0
        self.removed = 0
        self.broker_dropped: int | None = None
        self._broker_dropped0: int | None = None
        self.tally = validate.Tally()  # readings the validation gate turned into unknown
        self.connected = False
        self.last_error: str | None = None
        self.watched: set[str] = set()
        self._lag = [0.0, 0.0]  # max lag (s) in the current and previous 10 s window
        self._lag_host: list[str | None] = [None, None]  # whose message set each window's max
        self._lag_window = 0
        self._lib = _DropCounter()
        self._logger = logging.getLogger(f"gpuscope.mqtt.sub{id(self)}")
        self._logger.propagate = False
        self._logger.setLevel(logging.WARNING)  # its own level: cli/logs.py may set "gpuscope" to CRITICAL (a TUI)
        self._logger.addHandler(self._lib)
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._resub: asyncio.Event | None = None  # set (in the loop) when the wanted topics changed

    def start(self) -> Subscriber:
        self._thread.start()
        return self

    def stop(self) -> None:
        """End the thread and its loop (it may be waiting for the next message: cancelled) and join."""
        self._end(grace_s=0.0)

    @property
    def broker_down(self) -> bool:
        """The broker cannot be reached now (a connection lost or an attempt failed): no host's state is known."""
        return not self.connected and self.last_error is not None

    def snapshot(self) -> list[RemoteHost]:
        with self._lock:
            return list(self.hosts.values())

    # ------------------------------------------------------------------ subscriptions
    def _base(self, host: str = "+") -> str:
        return f"{self.cfg.prefix}/{TOPIC_VERSION}/{host}"

    def topics(self) -> set[str]:
        """The topic filters this viewer wants now."""
        if self.only_host:
            return {f"{self._base(self.only_host)}/+"}
        want = {f"{self._base()}/summary", f"{self._base()}/status", BROKER_DROPPED_TOPIC}
        with self._lock:
            full = set(self.watched) | {h.host for h in self.hosts.values() if h.legacy}
        for host in full:
            want |= {f"{self._base(host)}/frame", f"{self._base(host)}/inventory"}
        return want

    def watch(self, host: str) -> None:
        """Subscribe to ``host``'s frames and inventory (the open host) until :meth:`unwatch`."""
        with self._lock:
            self.watched.add(host)
        self._resync()

    def unwatch(self, host: str) -> None:
        """Stop decoding ``host``'s frames; drop the per-host frame state the fleet row does not need."""
        with self._lock:
            self.watched.discard(host)
            h = self.hosts.get(host)
            if h is not None and not h.legacy:
                h.frame, h.frames = None, 0
                h.recent.clear()
                h.findings.clear()
        self._resync()

    def _resync(self) -> None:
        ev = self._resub
        if ev is not None:
            self._call(ev.set)  # in the loop's thread

    async def _sync(self, c: Any, subscribed: set[str]) -> None:
        want = self.topics()
        for t in sorted(want - subscribed):
            await c.subscribe(t, qos=self.cfg.qos)
            subscribed.add(t)
        for t in sorted(subscribed - want):
            await c.unsubscribe(t)
            subscribed.discard(t)

    async def _sync_loop(self, c: Any, subscribed: set[str]) -> None:
        assert self._resub is not None
        while True:
            await self._resub.wait()
            self._resub.clear()
            await self._sync(c, subscribed)

    # ------------------------------------------------------------------ health
    def health(self) -> Health:
        with self._lock:
            self._roll_lag(time.monotonic())
            bd = None
            if self.broker_dropped is not None and self._broker_dropped0 is not None:
                bd = self.broker_dropped - self._broker_dropped0
            return Health(bad=self.dropped, lost=self.lost, queue_dropped=self._lib.count, broker_dropped=bd,
                          behind_s=max(self._lag))

    def _roll_lag(self, mono: float) -> None:
        w = int(mono // 10)
        if w != self._lag_window:
            self._lag = [0.0, self._lag[0]] if w == self._lag_window + 1 else [0.0, 0.0]
            self._lag_host = [None, self._lag_host[0]] if w == self._lag_window + 1 else [None, None]
            self._lag_window = w

    def _note_lag(self, data_t: float, now: float, host: str | None = None) -> None:
        self._roll_lag(time.monotonic())
        lag = now - data_t
        if lag > self._lag[0]:
            self._lag[0], self._lag_host[0] = lag, host

    def _forget_lag(self, host: str) -> None:
        """``host``'s clock turned out to be off: its earlier messages' "lag" was its clock, not delay."""
        for k in (0, 1):
            if self._lag_host[k] == host:
                self._lag[k], self._lag_host[k] = 0.0, None

    # ------------------------------------------------------------------ messages
    def handle(self, topic_name: str, payload: bytes | bytearray | str | None, retained: bool = False) -> bool:
        """Apply one message. True: applied, or left aside on purpose (another host's, an older agent's frame
        within its 5 s, a duplicate, a cleared message); False: dropped and counted in :attr:`dropped`."""
        if topic_name == BROKER_DROPPED_TOPIC:
            return self._broker_count(payload)
        route = self._route(topic_name)
        if route is None:
            return self._drop()
        host, kind = route
        if self.only_host and host != self.only_host:
            return True  # not this viewer's host (not bad: another host's message), left aside
        if payload is None or isinstance(payload, (int, float)) or len(payload) > MAX_PAYLOAD:
            return self._drop()
        if len(payload) == 0:
            return self._cleared(host, kind)
        now = time.time()
        if kind == "frame" and not self.only_host and self._frame_not_needed(host, payload):
            return True
        try:  # the validation gate: size, depth, valid JSON (a one-line ValidationError, counted as a drop)
            doc = validate.loads(payload, "payload", max_bytes=MAX_PAYLOAD)
        except validate.ValidationError:
            return self._drop()
        with self._lock:
            return self._apply(host, kind, doc, retained, now)

    def _broker_count(self, payload: bytes | bytearray | str | None) -> bool:
        """The broker's count of messages it dropped (all clients), counted from this viewer's start."""
        try:
            n = int(payload or b"")
        except ValueError:
            return self._drop()
        with self._lock:
            if self._broker_dropped0 is None:
                self._broker_dropped0 = n  # count from when this viewer started
            self.broker_dropped = n
        return True

    def _route(self, topic_name: str) -> tuple[str, str] | None:
        """(host, kind) of a topic under this viewer's prefix and version; None for any other topic."""
        parts = topic_name.split("/")
        plen = len(self.cfg.prefix.split("/"))
        if len(parts) != plen + 3 or parts[plen] != TOPIC_VERSION:
            return None
        host, kind = parts[plen + 1], parts[plen + 2]
        if not HOST_RE.match(host):
            return None
        return host, kind

    def _frame_not_needed(self, host: str, payload: bytes | bytearray | str) -> bool:
        """A frame of a host not watched that is not decoded: its agent sends summaries, or it is an older
        agent's within :attr:`legacy_every_s` of the last one decoded (frames with finding events always are)."""
        with self._lock:
            h0 = self.hosts.get(host)
            if host not in self.watched and h0 is not None and h0.legacy is False:
                return True  # a late frame after unwatch, or an agent with a summary stream: not needed
            mono = time.monotonic()
            return (host not in self.watched and h0 is not None
                    and mono - h0.last_decode < self.legacy_every_s
                    and (b"finding_" not in payload if isinstance(payload, (bytes, bytearray))
                         else "finding_" not in payload))  # bounded rate for an older agent

    def _apply(self, host: str, kind: str, doc: Any, retained: bool, now: float) -> bool:
        """Apply a valid message of ``kind`` to ``host``'s row (made with its first valid message). Under the lock."""
        h = self.hosts.get(host)
        new = h is None  # a host's row appears with its first valid message, never with a bad one
        if h is None:
            if len(self.hosts) >= MAX_HOSTS:
                return self._drop_locked()
            h = RemoteHost(host=host)
        was = (h.online, h.rank)
        apply = {"summary": self._on_summary, "inventory": self._on_inventory, "status": self._on_status,
                 "frame": self._on_frame}.get(kind)
        try:
            if apply is None:
                return self._drop_locked()
            early = apply(h, host, doc, retained, now)
            if early is not None:
                return early
        except (CodecError, SummaryError, RecursionError, ValueError):
            return self._drop_locked()
        finally:
            if (h.online, h.rank) != was:
                self.order_gen += 1
        if new:
            self.hosts[host] = h
            self.order_gen += 1
            self._cond.notify_all()
        return True

    # Each ``_on_KIND`` applies one valid message under the lock: None when applied, else what handle returns
    # at once (True: left aside, e.g. a duplicate; False: dropped).
    def _on_summary(self, h: RemoteHost, host: str, doc: Any, retained: bool, now: float) -> bool | None:
        s = summary_from_dict(doc)
        if not self._stream(h, s, retained, time.monotonic()):
            return True  # a duplicate (overlapping subscriptions, a resent retained message)
        if h.legacy:
            h.legacy = False
            self._resync()
        h.legacy = False
        h.summary = s
        h.rank = s.worst()[0]
        if h.clash(time.monotonic()):
            h.rank = min(h.rank, SEV_RANK["warning"])  # sorted with the warnings: it needs a fix
        h.data_t = s.t
        if not retained:
            h.online = True
            h.offsets.append(now - s.t)
            offset = h.clock_offset()
            if offset is not None:  # a skewed clock is not lag
                self._forget_lag(host)
            self._note_lag(s.t + (offset or 0.0), now, host)
        return None

    def _on_inventory(self, h: RemoteHost, host: str, doc: Any, retained: bool, now: float) -> bool | None:
        h.inventory = inventory_from_dict(doc)
        if h.legacy and h.frame is not None:
            self._legacy_summary(h, h.frame)
        self._cond.notify_all()
        return None

    def _on_status(self, h: RemoteHost, host: str, doc: Any, retained: bool, now: float) -> bool | None:
        if not isinstance(doc, dict) or doc.get("state") not in ("online", "offline"):
            return self._drop_locked()
        h.online = doc["state"] == "online"
        legacy = STATUS_SUMMARY_MARK not in doc and h.summary is None
        if legacy != h.legacy:
            h.legacy = legacy
            self._resync()
        return None

    def _on_frame(self, h: RemoteHost, host: str, doc: Any, retained: bool, now: float) -> bool | None:
        f = frame_from_dict(doc, h.inventory, self.tally)  # rejects GPUs the inventory lacks
        _note_findings(h, f)
        if f.events:
            h.rank = h.worst()[0]
        if h.legacy is None:
            h.legacy = True  # frames, and neither a summary nor a status with the mark
        full = host in self.watched or bool(self.only_host)
        if full or h.legacy:
            h.frame = f  # one frame per host at most: flat memory
        if full:
            h.recent.append(f)
            h.frames += 1
        if h.legacy:
            h.last_decode = time.monotonic()
            self._legacy_summary(h, f)
            h.data_t = f.t
        h.online = True
        if not retained:
            self._note_lag(f.t, now)
        self._cond.notify_all()
        return None

    def _stream(self, h: RemoteHost, s: HostSummary, retained: bool, mono: float) -> bool:
        """Count ``s`` against its publisher's sequence (lost summaries: gaps in it) and note a clash (two
        publishers interleaving); False for a duplicate. Under the subscriber's lock."""
        key = s.stream()
        st = h.streams.get(key)
        if st is not None and s.seq <= st[0] and s.t <= st[1]:
            return False
        if not retained and st is not None and s.seq > st[0] + 1:
            self.lost += int(s.seq - st[0] - 1)
        if st is not None and h.last_stream not in (None, key) and mono - st[2] < CLASH_WINDOW_S:
            h.clash_until = mono + CLASH_WINDOW_S  # back to a publisher seen a moment ago: two are live
        h.streams[key] = [s.seq, s.t, mono]
        h.last_stream = key
        if len(h.streams) > MAX_STREAMS:
            del h.streams[min(h.streams, key=lambda k: h.streams[k][2])]
        return True

    @staticmethod
    def _legacy_summary(h: RemoteHost, f: Frame) -> None:
        """The fleet row of an older agent (no summary stream), from its frame and the findings its events
        raised."""
        if h.inventory is None:
            return
        fs = [_F(k, sev, since, text) for k, (sev, text, since) in h.findings.items()]
        fs.sort(key=lambda x: SEV_RANK.get(x.severity, len(SEVERITIES)))
        h.summary = summarise(h.inventory, f, fs, from_frame=True)

    def _on_message(self, msg: Any) -> None:
        self.handle(msg.topic.value, msg.payload, retained=bool(msg.retain))

    def _cleared(self, host: str, kind: str) -> bool:
        """An empty payload: a retained message cleared. Summary, status or inventory: the host is retired."""
        if kind not in ("summary", "status", "inventory"):
            return True  # nothing to clear (frames are not retained)
        with self._lock:
            if self.hosts.pop(host, None) is not None:
                self.removed += 1
                self.order_gen += 1
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
        self._resub = asyncio.Event()
        while not self._stop.is_set():
            try:
                direct = None if self.queue_max else type("_Q", (_DirectQueue,), {"sink": self._on_message})
                async with _client(self.cfg, f"gpuscope-view-{os.getpid()}-{id(self)}", logger=self._logger,
                                   queue_max=self.queue_max, queue_type=direct) as c:
                    subscribed: set[str] = set()
                    await self._sync(c, subscribed)
                    self.connected, backoff, self.last_error = True, 0.5, None
                    syncer = asyncio.create_task(self._sync_loop(c, subscribed))
                    try:
                        async for msg in c.messages:  # with the direct queue: only ends on a disconnection
                            self._on_message(msg)
                            if self._stop.is_set():
                                return
                    finally:
                        syncer.cancel()
            except (aiomqtt.MqttError, OSError) as e:
                self.last_error = describe_error(e)
            self.connected = False  # the broker is gone: every host is unknown (the fleet says so), not offline
            with self._lock:
                self.order_gen += 1
            await self._pause(backoff, self._astop)
            backoff = min(backoff * 2, 30.0)


@dataclass(frozen=True)
class _F:
    """A finding as :func:`summarise` reads it (from an older agent's frame events)."""

    id: str
    severity: str
    started_at: float
    message: str
