"""The agent's MQTT publisher: inventory and status (retained, with a last will) and frames and summaries, through a
bounded queue that never blocks the sampler (docs/mqtt.md). The broker connection and the subscriber are
sources/mqtt.py."""

from __future__ import annotations

import json
import os
import time
from collections import deque
from dataclasses import replace
from typing import Any

from gpuscope.core.codec import (
    frame_to_dict,
    inventory_to_dict,
)
from gpuscope.core.model import Frame, Inventory
from gpuscope.core.summary import HostSummary, summary_to_dict
from gpuscope.sources.mqtt import (
    AUTH_FAILED,
    AUTH_HINT,
    AUTH_TRIES,
    STATUS_SUMMARY_MARK,
    BrokerConfig,
    _client,
    _LoopThread,
    auth_refused,
    describe_error,
    safe_host,
    topic,
)


class Publisher(_LoopThread):
    """The agent's side: publishes inventory (retained), status (retained, last will offline), frames.

    :meth:`publish_frame` never blocks: frames wait in a bounded queue (oldest dropped) while the
    broker is away; a background thread reconnects with backoff and resumes.
    """

    def __init__(self, cfg: BrokerConfig, inventory: Inventory, queue_max: int = 120, *, name: str | None = None,
                 machine: str = "", run: str = "", on_fatal: Any = None):
        super().__init__("gpuscope-mqtt")
        self.cfg = cfg
        self.host = name or safe_host(inventory.host)  # ``agent --name`` (checked by cli/agent_id.check_name)
        self.inventory = inventory if self.host == inventory.host else replace(inventory, host=self.host)
        self.ids = {k: v for k, v in (("machine", machine), ("run", run)) if v}  # in status and will (docs/mqtt.md)
        self.on_fatal = on_fatal  # called (in the loop's thread) when it gives up: :attr:`fatal` says why
        self.fatal: str | None = None
        self.refused = 0  # logins the broker refused in a row
        self.queue: deque[bytes] = deque(maxlen=queue_max)
        self.dropped = 0
        self.sent = 0
        self.connected = False
        self.connects = 0  # successful connections so far (1: connected, more: reconnected)
        self.last_error: str | None = None
        self.summary_payload: bytes | None = None  # the latest summary not yet published (one slot)
        self.summaries_sent = 0

    def start(self) -> Publisher:
        self._thread.start()
        return self

    def publish_frame(self, frame: Frame) -> None:
        if len(self.queue) == self.queue.maxlen:
            self.dropped += 1
        self.queue.append(json.dumps(frame_to_dict(frame), separators=(",", ":")).encode())
        self._wake()

    def publish_summary(self, summary: HostSummary) -> None:
        """Publish ``summary`` (retained) at the next chance, with this agent's machine and run ids; a newer one
        replaces one not yet sent."""
        summary = replace(summary, machine=self.ids.get("machine", ""), run=self.ids.get("run", ""))
        self.summary_payload = json.dumps(summary_to_dict(summary), separators=(",", ":")).encode()
        self._wake()

    def stop(self) -> None:
        """Publish ``offline`` (reason ``stopped``) if connected, end the thread and its loop, join."""
        self._end(grace_s=3.0)

    async def _main(self) -> None:
        import aiomqtt

        status_t = topic(self.cfg, self.host, "status")
        mark = {STATUS_SUMMARY_MARK: 1, **self.ids}  # tells viewers this agent publishes summaries
        will = aiomqtt.Will(status_t, json.dumps({"state": "offline", "reason": "lost", **mark}).encode(), qos=1,
                            retain=True)
        backoff = 0.5
        while not self._stop.is_set():
            try:
                async with _client(self.cfg, f"gpuscope-agent-{self.host}-{os.getpid()}", will) as c:
                    await c.publish(topic(self.cfg, self.host, "inventory"),
                                    json.dumps(inventory_to_dict(self.inventory)).encode(), qos=1, retain=True)
                    await c.publish(status_t, json.dumps({"state": "online", "t": time.time(), **mark}).encode(),
                                    qos=1, retain=True)
                    self.connected, backoff, self.last_error, self.refused = True, 0.5, None, 0
                    self.connects += 1
                    frame_t = topic(self.cfg, self.host, "frame")
                    summary_t = topic(self.cfg, self.host, "summary")
                    while not self._stop.is_set():
                        summary = self.summary_payload
                        if summary is not None:
                            await c.publish(summary_t, summary, qos=1, retain=True)
                            if self.summary_payload is summary:
                                self.summary_payload = None
                            self.summaries_sent += 1
                        while self.queue:
                            payload = self.queue[0]
                            await c.publish(frame_t, payload, qos=self.cfg.qos)
                            self.queue.popleft()
                            self.sent += 1
                        await self._pause(1.0, self._nudge)  # until the next frame (or stop)
                    await c.publish(status_t, json.dumps({"state": "offline", "reason": "stopped", "t": time.time(),
                                                          **mark}).encode(), qos=1, retain=True)
                    return
            except (aiomqtt.MqttError, OSError) as e:
                self.connected, self.last_error = False, describe_error(e)
                self.refused = self.refused + 1 if auth_refused(e) else 0
                if self.refused >= AUTH_TRIES:  # credentials do not fix themselves: say so and stop
                    self.fatal = (f"{AUTH_FAILED} {self.refused} times at {self.cfg.host}:{self.cfg.port} "
                                  f"({AUTH_HINT})")
                    if self.on_fatal is not None:
                        self.on_fatal()
                    return
            await self._pause(backoff, self._astop)
            backoff = min(backoff * 2, 30.0)


