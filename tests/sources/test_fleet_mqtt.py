"""The fleet's summary stream and narrow subscriptions over a real Mosquitto (started by the tests)."""

from __future__ import annotations

import json
import time

import pytest
from helpers import host_of, needs_mosquitto, publish, run_frames, sim_source, until

from gpuscope.core.session import Session
from gpuscope.core.summary import SCHEMA, SummaryPacer, summarise
from gpuscope.outputs.mqtt_publish import Publisher
from gpuscope.sources.mqtt import Subscriber, parse_broker

pytestmark = needs_mosquitto

def summary(host: str, seq: int, t: float | None = None, **kw: object) -> bytes:
    return json.dumps({"schema": SCHEMA, "host": host, "t": time.time() if t is None else t, "seq": seq, "gpus": 8,
                       **kw}).encode()


def lost_gpu_session():
    """A simulated A100 host whose GPU2 falls off the bus: a critical finding is active after the run."""
    src = sim_source("gpu-lost")
    s = Session(src.inventory)
    frames = [s.ingest(f) for f in run_frames(src, 0, 20)]
    assert s.findings.active, "the scenario raises its finding by t=20"
    return src, s, frames


def test_summary_round_trip_and_a_late_viewer_sees_active_findings_at_once(broker):
    src, s, frames = lost_gpu_session()
    cfg = parse_broker(broker.url, env={})
    pub = Publisher(cfg, src.inventory).start()
    try:
        assert until(lambda: pub.connected)
        want = summarise(src.inventory, frames[-1], s.findings.active, seq=1, interval_s=1.0)
        pub.publish_summary(want)
        assert until(lambda: pub.summaries_sent == 1)
        late = Subscriber(cfg).start()  # joins after the summary was published: the retained one arrives
        try:
            host = pub.host
            assert until(lambda: host_of(late, host) is not None and host_of(late, host).summary is not None)
            h = host_of(late, host)
            got = h.summary
            assert got.findings and got.findings[0].severity == "critical"
            assert [f.id for f in got.findings] == [f.id for f in s.findings.active]
            assert got.findings[0].since == pytest.approx(s.findings.active[0].since or
                                                          s.findings.active[0].started_at, abs=0.1)
            assert got.lost == want.lost and got.lost  # the lost GPU
            assert got.gpus == len(src.inventory.devices) and got.simulated
            assert h.worst()[0] == 0 and h.frames == 0 and h.frame is None  # no frame was needed, none decoded
            assert h.data_t == pytest.approx(frames[-1].t, abs=0.01)  # "seen" is the age of the sample
            assert late.dropped == 0
        finally:
            late.stop()
    finally:
        pub.stop()


def test_summary_payload_is_a_few_hundred_bytes():
    src, s, frames = lost_gpu_session()
    from gpuscope.core.summary import summary_to_dict

    size = len(json.dumps(summary_to_dict(summarise(src.inventory, frames[-1], s.findings.active, seq=7)),
                          separators=(",", ":")))
    assert 100 < size < 1000, size


@pytest.mark.parametrize("steps,want", [
    ([(0.0, "a"), (1.0, "a"), (4.9, "a"), (5.0, "a")], [True, False, False, True]),  # every 5 s
    ([(0.0, "a"), (1.0, "b"), (2.0, "b")], [True, True, False]),  # at once on change
    ([(10.0, "a"), (3.0, "a")], [True, True]),  # time went backwards: publish
])
def test_summary_pacer(steps, want):
    p = SummaryPacer(every_s=5.0)
    assert [p.due((k,), t) for t, k in steps] == want
    assert p.seq == sum(want)


def test_fleet_viewer_subscribes_to_summaries_and_status_only(broker):
    cfg = parse_broker(broker.url, env={})
    sub = Subscriber(cfg).start()
    try:
        assert until(lambda: sub.connected)
        frame = json.dumps({"t": time.time(), "gpus": [{"index": 0}]}).encode()
        publish(broker.port, [("gpuscope/v1/new/status", b'{"state": "online", "summary": 1}', True),
                              ("gpuscope/v1/new/summary", summary("new", 1), True),
                              *[("gpuscope/v1/new/frame", frame, False)] * 5])
        assert until(lambda: host_of(sub, "new") is not None and host_of(sub, "new").summary is not None)
        time.sleep(0.5)  # frames, were they subscribed, would have arrived with the summary
        h = host_of(sub, "new")
        assert h.frames == 0 and h.frame is None and sub.dropped == 0
        sub.watch("new")  # the host is opened: its frames now flow
        assert until(lambda: "gpuscope/v1/new/frame" in sub.topics())
        time.sleep(0.3)  # the subscription is asynchronous
        publish(broker.port, [("gpuscope/v1/new/frame", frame, False)] * 3)
        assert until(lambda: host_of(sub, "new").frames == 3)
        sub.unwatch("new")
        assert "gpuscope/v1/new/frame" not in sub.topics() and host_of(sub, "new").frame is None
    finally:
        sub.stop()


def test_an_older_agent_without_summaries_still_appears_at_a_bounded_rate(broker):
    src = sim_source("mixed-4")
    cfg = parse_broker(broker.url, env={})
    from gpuscope.core.codec import frame_to_dict, inventory_to_dict

    inv = json.dumps(inventory_to_dict(src.inventory)).encode()
    frames = [json.dumps(frame_to_dict(f)).encode() for f in run_frames(src, 0, 19)]
    sub = Subscriber(cfg).start()
    try:
        assert until(lambda: sub.connected)
        publish(broker.port, [("gpuscope/v1/old/inventory", inv, True),
                              ("gpuscope/v1/old/status", b'{"state": "online", "t": 1}', True)])  # no summary mark
        assert until(lambda: "gpuscope/v1/old/frame" in sub.topics())
        time.sleep(0.3)
        publish(broker.port, [("gpuscope/v1/old/frame", f, False) for f in frames])  # 20 frames at once
        assert until(lambda: host_of(sub, "old").summary is not None)
        time.sleep(0.5)
        h = host_of(sub, "old")
        assert h.legacy and h.summary.from_frame and h.summary.gpus == len(src.inventory.devices)
        assert h.summary.t < run_frames(src, 19, 19)[0].t  # not every frame was decoded: at most one per 5 s
        assert sub.dropped == 0
    finally:
        sub.stop()


def test_host_subscribes_to_that_host_only(broker):
    cfg = parse_broker(broker.url, env={})
    publish(broker.port, [(f"gpuscope/v1/h{k}/status", b'{"state": "online", "summary": 1}', True) for k in range(5)]
            + [(f"gpuscope/v1/h{k}/summary", summary(f"h{k}", 1), True) for k in range(5)])
    sub = Subscriber(cfg, only_host="h3").start()
    try:
        assert sub.topics() == {"gpuscope/v1/h3/+"}
        assert until(lambda: host_of(sub, "h3") is not None and host_of(sub, "h3").summary is not None)
        frame = json.dumps({"t": time.time(), "gpus": [{"index": 0}]}).encode()
        publish(broker.port, [(f"gpuscope/v1/h{k}/frame", frame, False) for k in range(5)])
        assert until(lambda: host_of(sub, "h3").frames == 1)
        assert sorted(sub.hosts) == ["h3"] and sub.dropped == 0  # other hosts' messages never arrive, none is "bad"
    finally:
        sub.stop()


def test_a_retired_host_is_removed_by_clearing_its_retained_messages(broker):
    cfg = parse_broker(broker.url, env={})
    publish(broker.port, [("gpuscope/v1/old-box/status", b'{"state": "offline", "summary": 1}', True),
                          ("gpuscope/v1/old-box/summary", summary("old-box", 3), True)])
    sub = Subscriber(cfg).start()
    try:
        assert until(lambda: host_of(sub, "old-box") is not None)
        # what `mosquitto_pub -r -n -t gpuscope/v1/old-box/summary` (and /status, /inventory) does
        publish(broker.port, [(f"gpuscope/v1/old-box/{k}", b"", True) for k in ("summary", "status", "inventory")])
        assert until(lambda: host_of(sub, "old-box") is None)
        assert sub.dropped == 0 and sub.removed == 1
    finally:
        sub.stop()
    late = Subscriber(cfg).start()  # a later viewer never sees it
    try:
        assert until(lambda: late.connected)
        time.sleep(0.5)
        assert host_of(late, "old-box") is None
    finally:
        late.stop()


def test_lost_summaries_and_old_data_are_counted_and_said(broker):
    cfg = parse_broker(broker.url, env={})
    sub = Subscriber(cfg).start()
    try:
        assert until(lambda: sub.connected)
        now = time.time()
        publish(broker.port, [("gpuscope/v1/gap/summary", summary("gap", 1), False),
                              ("gpuscope/v1/gap/summary", summary("gap", 2), False),
                              ("gpuscope/v1/gap/summary", summary("gap", 6), False),  # 3, 4, 5 never came
                              ("gpuscope/v1/slow/summary", summary("slow", 1, t=now - 30), False)])
        assert until(lambda: host_of(sub, "slow") is not None)
        h = sub.health()
        assert h.lost == 3 and h.behind_s >= 29
        assert "3 messages dropped" in h.line() and "data up to 3" in h.line()
        assert host_of(sub, "gap").summary.seq == 6 and sub.dropped == 0
    finally:
        sub.stop()


def test_client_queue_overflow_is_counted(broker):
    cfg = parse_broker(broker.url, env={})
    sub = Subscriber(cfg, queue_max=20)
    real = sub.handle

    def slow(*a, **kw):  # a busy viewer: the client library reads faster than this consumes, its queue fills
        time.sleep(0.005)
        return real(*a, **kw)

    sub.handle = slow  # type: ignore[method-assign]
    sub.start()
    try:
        assert until(lambda: sub.connected)
        publish(broker.port, [(f"gpuscope/v1/q{k}/summary", summary(f"q{k}", 1), False) for k in range(400)])
        assert until(lambda: len(sub.hosts) + sub.health().queue_dropped >= 400, 20)
        h = sub.health()
        assert h.queue_dropped > 0 and len(sub.hosts) + h.queue_dropped == 400  # every message: shown or counted
        assert f"{h.queue_dropped:,} messages dropped" in h.line()
    finally:
        sub.stop()


def test_a_slow_rank_travels_in_the_summary_and_leads_the_host_row_at_80_columns(broker):
    """An agent on a host whose TP=4 group waits for GPU5 (its power limit is 550 W, its peers' 700 W) publishes
    the slow rank among its findings; the fleet row, 80 columns wide, says "GPU5 lags: power limit" first, beside
    the worst finding (GPU5's own power-cap line, which sorts first)."""
    from gpuscope.sources.groups import with_groups
    from gpuscope.sources.live import open_source
    from gpuscope.widgets.fleet_table import fit_columns, row

    name = "slow-rank-power-limit"
    src = with_groups(open_source(name, virtual_at=0.0), name)
    try:
        s = Session(src.inventory)
        for t in range(21):
            src.nvml.clock.now = float(t)
            frame = s.ingest(src.sample())
    finally:
        src.close()
    ids = [f.id for f in s.findings.active]
    assert "slow-rank:http://localhost:8001:gpu5:power_limit" in ids
    cfg = parse_broker(broker.url, env={})
    pub = Publisher(cfg, src.inventory).start()
    sub = Subscriber(cfg).start()
    try:
        assert until(lambda: pub.connected)
        pub.publish_summary(summarise(src.inventory, frame, s.findings.active, seq=1, interval_s=1.0))
        assert until(lambda: host_of(sub, pub.host) is not None and host_of(sub, pub.host).summary is not None)
        h = host_of(sub, pub.host)
        got = {f.id: f for f in h.summary.findings}
        f = got["slow-rank:http://localhost:8001:gpu5:power_limit"]
        assert (f.severity, f.variant) == ("warning", "power_limit")
        assert f.text.startswith("vLLM :8001 TP=4: GPU5 held at its 550 W power limit while GPU4, GPU6, GPU7 draw")
        line = row(h, frame.t + 1.0, fit_columns(80)).plain
        assert len(line) <= 80 and "  GPU5 lags: power limit" in line, line
    finally:
        sub.stop()
        pub.stop()
