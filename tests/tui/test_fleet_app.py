"""The fleet screen at any width (fit_columns, finding_cell, fit_status, Pilot at 80/120/200 columns), no ghost
rows from bad messages, the REMOTE view opened from the fleet (esc/q back, agent's findings from the first frame)."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from helpers import needs_mosquitto, publish, run_frames, sim_source, wait_for
from rich.cells import cell_len

from gpuscope.core.session import Session
from gpuscope.core.summary import SCHEMA, finding_hints, summarise, summary_from_dict, summary_to_dict
from gpuscope.outputs.mqtt_publish import Publisher
from gpuscope.sources.mqtt import RemoteHost, Subscriber, parse_broker
from gpuscope.tui.fleet import FleetHostApp, prime_from_agent
from gpuscope.tui.fleet_app import FleetApp, fit_status
from gpuscope.widgets.fleet_table import (
    COLUMNS,
    HEADER_GAP,
    FleetTable,
    finding_cell,
    finding_min,
    fit_columns,
    row,
)

GEN1 = ("GPU0 PCIe Gen1×16 under load, GPU supports Gen4×16: 4.0 of 31.5 GB/s available (trained low: GPU and "
        "slot both support Gen4)")


@pytest.mark.parametrize("width,shown", [
    (300, "host state gpus util power tok groups link seen finding"),
    (196, "host state gpus util power tok groups link seen finding"),
    (170, "host state gpus util power tok link seen finding"),  # the serving groups go first
    (116, "host state util tok link seen finding"),  # power, then GPUs give way first
    (96, "host state tok link seen finding"),
    (76, "host state seen finding"),  # 80 columns: the age of the data stays longest
    (50, "host state finding"),
    (20, "host state finding"),  # nothing left to drop: the host column shrinks
])
def test_fit_columns_drops_the_least_useful_first_and_fits(width, shown):
    cols = fit_columns(width)
    assert " ".join(c.key for c in cols) == shown
    total = sum(c.width for c in cols) + HEADER_GAP * (len(cols) - 1)
    assert total <= width or width < 40  # at 20 cells even the minimum host + state do not fit
    fin = cols[-1]
    assert fin.key == "finding"
    if len(cols) < len(COLUMNS) and width >= 40:
        assert fin.width >= finding_min(width)  # dropped only to give the finding its room


@pytest.mark.parametrize("width,since,more,want", [
    (200, "51s", 5, GEN1 + " (for 51s) +5"),
    (60, "51s", 5, "GPU0 PCIe Gen1×16 under load, GPU supports… (for 51s) +5"),
    (40, "51s", 5, "GPU0 PCIe Gen1×16 under… (for 51s) +5"),
    (30, "51s", 5, "GPU0 PCIe Gen1×16 under… +5"),  # "for" gives way before the text goes below 20 cells
    (22, "51s", 5, "GPU0 PCIe Gen1×16…"),
    (100, "", 0, "GPU0 PCIe Gen1×16 under load, GPU supports Gen4×16: 4.0 of 31.5 GB/s available…"),  # no stray "("
    (41, "51s", 0, "GPU0 PCIe Gen1×16 under load… (for 51s)"),  # no dangling comma before the …
])
def test_finding_cell_cuts_words_with_an_ellipsis_and_keeps_numbers_whole(width, since, more, want):
    got = "".join(t for t, _ in finding_cell(GEN1, since, more, width))
    assert got == want
    assert cell_len(got) <= width
    assert "( (" not in got and got.count("(") == got.count(")")


@pytest.mark.parametrize("width,want", [
    (None, " gpuscope  FLEET  mqtt://127.0.0.1:45591  connected  2 hosts  5 bad messages dropped"),
    (120, " gpuscope  FLEET  mqtt://127.0.0.1:45591  connected  2 hosts  5 bad messages dropped"),
    (80, " FLEET  127.0.0.1:45591  connected  2 hosts  5 bad"),
    (40, " FLEET  connected  2 hosts  5 bad"),
    (30, " FLEET  connected  2 hosts"),
])
def test_fit_status_shortens_then_drops_whole_parts(width, want):
    parts = [("gpuscope  FLEET", "FLEET", 0), ("mqtt://127.0.0.1:45591", "127.0.0.1:45591", 3),
             ("connected", "connected", 0), ("2 hosts", "2 hosts", 0), ("5 bad messages dropped", "5 bad", 1)]
    got = fit_status(parts, width)
    assert got == want
    assert width is None or cell_len(got) <= width


def host_with(findings: int = 6, lost: tuple[int, ...] = (), power: float = 326.0) -> RemoteHost:
    fs = [{"id": f"f{k}", "sev": "critical" if k == 0 else "warning", "since": 1_800_000_000.0 - 51,
           "text": GEN1 if k == 0 else f"finding {k}"} for k in range(findings)]
    s = summary_from_dict({"schema": SCHEMA, "host": "sim-a6000-tp2", "t": 1_800_000_000.0, "seq": 1, "sim": True,
                           "gpus": 2, "lost": list(lost), "util_pct": 96.0, "power_w": power,
                           "link": {"state": "below_max_busy", "gpu": 0, "label": "Gen1×16"}, "findings": fs})
    return RemoteHost(host="sim-a6000-tp2", online=True, summary=s, data_t=s.t, rank=0)


@pytest.mark.parametrize("width", [20, 40, 76, 80, 116, 120, 196, 200, 300])
@pytest.mark.parametrize("h", [host_with(), host_with(1, lost=(0, 1), power=9_999_999.0), RemoteHost(host="x" * 128)])
def test_a_row_fits_its_width_and_keeps_numbers_whole(width, h):
    t = row(h, 1_800_000_003.0, fit_columns(width))
    assert cell_len(t.plain) <= width
    cols = [c.key for c in fit_columns(width)]
    if h.summary is not None and "power" in cols:
        assert f"{h.summary.power_w:.0f} W" in t.plain  # a number is never cut, even wider than its column
    if "seen" in cols:
        assert "3s ago" in t.plain or "never" in t.plain


def fed_gen1(n_other: int = 1) -> Subscriber:
    sub = Subscriber(parse_broker("mqtt://127.0.0.1:1", env={}))  # fed by hand: no broker needed
    h = host_with()
    sub.handle("gpuscope/v1/sim-a6000-tp2/status", b'{"state": "online", "summary": 1}')
    sub.handle("gpuscope/v1/sim-a6000-tp2/summary", json.dumps(summary_to_dict(h.summary)).encode())
    for k in range(n_other):
        sub.handle(f"gpuscope/v1/sim-h200-{k}/status", b'{"state": "online", "summary": 1}')
    for bad in (b"nan", b"-1", b"garbage"):  # counted on the status line
        sub.handle("gpuscope/v1/neg/summary", bad)
    return sub


@pytest.mark.slow
@pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 60)])
def test_fleet_screen_fits_80_120_200_columns(size):
    sub = fed_gen1()
    app = FleetApp(sub, parse_broker("mqtt://127.0.0.1:45591", env={}))

    async def go() -> None:
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            table = app.query_one(FleetTable)
            width = table.size.width
            lines = [t.plain for t in table.lines()]
            assert lines[0].startswith("host") and lines[0].rstrip().endswith("1/2")  # the header: one line
            assert "worst finding" in lines[0]
            assert lines[1].startswith("sim-a6000-tp2 (sim)")  # the next line is a row, not the header's rest
            assert all(cell_len(ln) <= width for ln in lines), [ln for ln in lines if cell_len(ln) > width]
            assert "GPU0 PCIe" in lines[1] and "( (" not in lines[1]
            cut = lines[1].split("GPU0 PCIe", 1)[1]
            assert "…" in cut or GEN1.split("GPU0 PCIe", 1)[1] in cut  # cut text ends with an ellipsis
            status = app._status_shown
            assert cell_len(status) <= size[0] and "3 bad" in status
            assert app.query_one("#fleet-status").size.height == 1

    asyncio.run(go())


@pytest.mark.parametrize("topic_kind,payload", [
    ("summary", b"nan"), ("summary", b"-1"), ("summary", b"garbage"), ("summary", b'{"schema": 1}'),
    ("status", b"nan"), ("status", b"-1"), ("status", b'{"state": "maybe"}'), ("frame", b"-1"),
    ("frame", b"[1, 2]"), ("inventory", b"{}"), ("bogus", b"{}"),
])
def test_bad_messages_are_counted_never_shown_as_hosts(topic_kind, payload):
    sub = Subscriber(parse_broker("mqtt://127.0.0.1:1", env={}))
    gen = sub.order_gen
    assert sub.handle(f"gpuscope/v1/neg/{topic_kind}", payload) is False
    assert sub.hosts == {} and sub.dropped == 1 and sub.order_gen == gen
    assert sub.handle("gpuscope/v1/neg/status", b'{"state": "online", "summary": 1}')  # a valid one: the row
    assert list(sub.hosts) == ["neg"] and sub.order_gen > gen


def remote_session() -> tuple[Session, object]:
    src = sim_source("a6000-tp2-pcie-gen1")
    return Session(src.inventory), src


@pytest.mark.slow
def test_remote_view_from_the_fleet_esc_goes_back_and_says_so():
    session, _ = remote_session()
    app = FleetHostApp(session, None, label="REMOTE", interval_s=1.0)
    assert ("q", "back to fleet") in app._hints() and ("q", "quit") not in app._hints()
    quit_b = [b for b in app.BINDINGS if getattr(b, "id", None) == "quit"]
    assert quit_b and "escape" in quit_b[0].key and quit_b[0].description == "back to fleet"

    async def go() -> None:
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            assert not app._exit
            await pilot.press("escape")
            await pilot.pause()
            assert app._exit  # esc closed the view (back to the fleet)

    asyncio.run(go())


@pytest.mark.slow
@needs_mosquitto
def test_host_view_starts_with_the_agents_findings_and_since_times(broker):
    src = sim_source("a6000-tp2-pcie-gen1")
    agent = Session(src.inventory)
    frames = [agent.ingest(f) for f in run_frames(src, 0, 40)]
    active = agent.findings.active
    assert any(f.severity == "critical" for f in active)
    cfg = parse_broker(broker.url, env={})
    pub = Publisher(cfg, src.inventory).start()
    sub = Subscriber(cfg).start()
    try:
        wait_for(lambda: pub.connected, what="the agent connected")
        pub.publish_summary(summarise(src.inventory, frames[-1], active, seq=1, interval_s=1.0))
        wait_for(lambda: (h := sub.hosts.get(pub.host)) is not None and h.summary is not None
                 and h.summary.findings, what="the retained summary at the viewer")
        assert {f.id: f.variant for f in sub.hosts[pub.host].summary.findings} == {f.id: f.variant for f in active}
        view = Session(src.inventory)
        assert prime_from_agent(sub, pub.host, view) == len(active)
        nxt = run_frames(src, 41, 41)[0]  # the first frame the view sees
        view.ingest(nxt)
        got = {f.id: (f.severity, f.since) for f in view.findings.active}
        want = {f.id: (f.severity, pytest.approx(f.since or f.started_at, abs=0.1)) for f in active}
        assert got == want  # from the first frame: the agent's findings and since-times, not the view's start
        fresh = Session(src.inventory)  # without the agent's findings: the view's own 5 s hold
        fresh.ingest(nxt)
        assert not any(f.severity == "critical" for f in fresh.findings.active)
    finally:
        sub.stop()
        pub.stop()


def test_finding_hints_round_trip_through_the_wire():
    src = sim_source("a6000-tp2-pcie-gen1")
    s = Session(src.inventory)
    frames = [s.ingest(f) for f in run_frames(src, 0, 30)]
    wire = summary_from_dict(json.loads(json.dumps(summary_to_dict(
        summarise(src.inventory, frames[-1], s.findings.active)))))
    evs = finding_hints(wire)
    assert [e.data["id"] for e in evs] == [f.id for f in s.findings.active]
    for e, f in zip(evs, s.findings.active):
        assert e.t - e.data["since_s"] == pytest.approx(f.since or f.started_at, abs=0.1)
        assert e.t - e.data["started_s"] == pytest.approx(f.started_at, abs=0.1)
        assert e.data["variant"] == f.variant
    old = summary_from_dict({"schema": 1, "host": "h", "t": 100.0, "findings": [
        {"id": "x", "sev": "warning", "since": 90.0, "text": "an older agent's finding"}]})  # no variant/started
    assert finding_hints(old)[0].data == {"id": "x", "severity": "warning", "variant": "", "started_s": 10.0,
                                          "since_s": 10.0}
    _ = time, publish  # shared helpers (kept imported for the real-broker tests)


@pytest.mark.parametrize("width,want", [
    (200, " gpuscope  FLEET  mqtt://127.0.0.1:1  connecting…  0 hosts  [Errno 111] Connection refused"),
    (100, " gpuscope  FLEET  mqtt://127.0.0.1:1  connecting…  0 hosts  [Errno 111] Connection refused"),
    (60, " FLEET  connecting…  0 hosts  [Errno 111] Connection refused"),
    (40, " FLEET  connecting…  0 hosts  [Errno 11…"),
])
def test_the_status_line_says_why_it_cannot_connect_at_any_width(width, want):
    """The short forms once dropped the broker's error: at 100 columns a refused connection read "connecting…"
    for ever; the error now comes last and is cut, never dropped."""
    from gpuscope.sources.mqtt import Subscriber, parse_broker
    from gpuscope.tui.fleet_app import status_line

    cfg = parse_broker("mqtt://127.0.0.1:1", env={})
    sub = Subscriber(cfg)  # never started: its state set as a refused connection leaves it
    sub.last_error = "[Errno 111] Connection refused"
    got = status_line(sub, cfg, 0, width)
    assert got == want and cell_len(got) <= width


@pytest.mark.parametrize("bad,lost,queue,broker,behind_s,want", [
    (0, 0, 0, None, 0.0, ""),  # nothing dropped, fresh: nothing said (never "0 bad messages dropped")
    (0, 10, 0, None, 0.0, "10 messages dropped"),
    (1, 0, 0, None, 0.0, "1 bad message dropped"),
    (5, 0, 0, 0, 0.0, "5 bad messages dropped"),
    (3, 6, 4, None, 0.0, "13 messages dropped (3 bad)"),  # one count, one phrase
    (0, 1, 0, None, 0.0, "1 message dropped"),
    (0, 0, 0, 7, 27.0, "broker lost 7 (all clients); data up to 27 s old"),
    (0, 2, 0, None, 6.0, "2 messages dropped; data up to 6 s old"),
])
def test_what_was_dropped_is_one_phrase_without_zero_counts(bad, lost, queue, broker, behind_s, want):
    """The fleet header read "0 bad messages dropped  behind: 10 messages dropped": a zero count, and
    "dropped" twice in two phrasings."""
    from gpuscope.sources.mqtt import Health

    got = Health(bad=bad, lost=lost, queue_dropped=queue, broker_dropped=broker, behind_s=behind_s).line()
    assert got == want
    assert got.count("dropped") <= 1 and " 0 " not in f" {got} "


@pytest.mark.parametrize("width,bad,lost,want", [
    (None, 0, 0, " gpuscope  FLEET  mqtt://127.0.0.1:1  connected  2 hosts"),
    (None, 0, 10, " gpuscope  FLEET  mqtt://127.0.0.1:1  connected  2 hosts  10 messages dropped"),
    (None, 3, 10, " gpuscope  FLEET  mqtt://127.0.0.1:1  connected  2 hosts  13 messages dropped (3 bad)"),
    (50, 3, 10, " FLEET  connected  2 hosts  13 dropped (3 bad)"),
])
def test_the_fleet_header_says_dropped_once(width, bad, lost, want):
    """The fleet header read "0 bad messages dropped  behind: 10 messages dropped" (80x24, a broker that lost
    messages): now one count and one phrase, and nothing when nothing was dropped."""
    from gpuscope.sources.mqtt import Subscriber, parse_broker
    from gpuscope.tui.fleet_app import status_line

    cfg = parse_broker("mqtt://127.0.0.1:1", env={})
    sub = Subscriber(cfg)
    sub.connected = True
    sub.dropped, sub.lost = bad, lost
    got = status_line(sub, cfg, 2, width)
    assert got == want
    assert got.count("dropped") <= 1
