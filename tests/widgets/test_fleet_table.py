"""The fleet table follows the user: the selection is a host, it stays in view, `/` filters (Pilot)."""

from __future__ import annotations

import json

import pytest
from rich.cells import cell_len

from gpuscope.core.summary import SCHEMA
from gpuscope.sources.mqtt import RemoteHost, Subscriber, parse_broker
from gpuscope.tui.fleet_app import FleetApp
from gpuscope.widgets.fleet_table import FleetTable, scroll_top, visible


@pytest.mark.parametrize("top,index,rows,total,want", [
    (0, 0, 10, 100, 0),  # in view
    (0, 9, 10, 100, 0),  # last row in view
    (0, 10, 10, 100, 1),  # one below: scroll one
    (50, 20, 10, 100, 20),  # above the view: it becomes the first row
    (0, 99, 10, 100, 90),  # the end
    (95, 99, 10, 100, 90),  # never past the end
    (5, 3, 10, 8, 0),  # fewer rows than fit
    (0, 0, 0, 0, 0),  # nothing
])
def test_scroll_top_keeps_the_selected_row_in_view(top, index, rows, total, want):
    assert scroll_top(top, index, rows, total) == want


@pytest.mark.parametrize("needle,want", [("", ["gpu-01", "gpu-02", "db-01"]), ("gpu", ["gpu-01", "gpu-02"]),
                                         ("-01", ["gpu-01", "db-01"]), ("GPU-02", ["gpu-02"]), ("x", [])])
def test_filter_by_name(needle, want):
    hosts = [RemoteHost(host=n) for n in ("gpu-01", "gpu-02", "db-01")]
    assert [h.host for h in visible(hosts, needle)] == want


def summary(host: str, seq: int, findings: list[dict] | None = None) -> bytes:
    d = {"schema": SCHEMA, "host": host, "t": 1_700_000_000.0 + seq, "seq": seq, "gpus": 8, "util_pct": 50.0,
         "power_w": 3000.0}
    if findings:
        d["findings"] = findings
    return json.dumps(d).encode()


def fed(n: int) -> Subscriber:
    sub = Subscriber(parse_broker("mqtt://127.0.0.1:1", env={}))  # fed by hand: no broker needed
    for k in range(n):
        sub.handle(f"gpuscope/v1/host-{k:04d}/status", b'{"state": "online", "summary": 1}')
        sub.handle(f"gpuscope/v1/host-{k:04d}/summary", summary(f"host-{k:04d}", 1))
    return sub


def rendered_rows(table: FleetTable) -> list[str]:
    return str(table.render()).splitlines()


def selected_line(table: FleetTable) -> str:
    """The line drawn in reverse video (the highlight), from the widget's rendered Text."""
    for line in table.lines():  # what the table shows now, line by line
        if any("reverse" in str(span.style) for span in line.spans):
            return line.plain
    return ""


async def test_selection_follows_the_host_scrolls_and_survives_a_resort():
    sub = fed(300)
    app = FleetApp(sub, sub.cfg)
    async with app.run_test(size=(150, 20)) as pilot:
        await pilot.pause()
        table = app.query_one(FleetTable)
        assert table.selected == "host-0000" and table.rows < 20
        for _ in range(40):
            await pilot.press("down")
        await pilot.pause()
        assert table.selected == "host-0040"
        assert table.top > 0 and "host-0040" in selected_line(table)  # scrolled: the highlight is on screen
        # another host gets a critical finding: it sorts first, every row below moves down by one
        sub.handle("gpuscope/v1/host-0200/summary", summary("host-0200", 2, [
            {"id": "gpu_lost:GPU3", "sev": "critical", "since": 1_700_000_000.0, "text": "GPU3 fell off the bus"}]))
        app.refresh_fleet()
        await pilot.pause()
        assert table.order[0] == "host-0200"
        assert table.selected == "host-0040" and "host-0040" in selected_line(table)
        await pilot.press("end")
        assert table.selected == "host-0299" and "host-0299" in selected_line(table)
        await pilot.press("enter")
    assert app.return_value == "host-0299"


async def test_slash_filters_hosts_by_name_and_escape_clears():
    sub = fed(120)
    app = FleetApp(sub, sub.cfg)
    async with app.run_test(size=(150, 20)) as pilot:
        await pilot.pause()
        table = app.query_one(FleetTable)
        await pilot.press("slash", "0", "1", "1")
        await pilot.pause()
        assert table.order == ["host-0011", "host-0110", "host-0111", "host-0112", "host-0113", "host-0114",
                               "host-0115", "host-0116", "host-0117", "host-0118", "host-0119"]
        assert table.selected in table.order
        await pilot.press("enter")  # keep the filter, back to the table
        await pilot.press("down", "down")
        assert table.selected == table.order[2] and "3/11 of 120 matching /011" in table.lines()[0].plain
        await pilot.press("escape")
        await pilot.pause()
        assert len(table.order) == 120 and table.selected == "host-0111"  # the same host, unfiltered


async def test_a_retired_host_goes_away_and_is_not_a_bad_message():
    sub = fed(3)
    assert len(sub.hosts) == 3
    for kind in ("summary", "status", "inventory"):  # what an operator clears: mosquitto_pub -r -n -t …
        assert sub.handle(f"gpuscope/v1/host-0001/{kind}", b"")
    assert sorted(sub.hosts) == ["host-0000", "host-0002"] and sub.dropped == 0 and sub.removed == 1


# ------------------------------------------------------------------ serving groups on the host row
def _host_with(groups: list[str] | None) -> RemoteHost:
    from gpuscope.core.summary import summary_from_dict

    d = json.loads(summary("gpu-07", 3))
    if groups is not None:
        d["groups"] = groups
    return RemoteHost("gpu-07", online=True, summary=summary_from_dict(d), data_t=d["t"])


@pytest.mark.parametrize("width, shown", [(200, True), (180, True), (160, False), (120, False), (80, False)])
def test_host_row_names_its_serving_group_where_wide_and_drops_it_first(width, shown):
    """The fleet row says which server runs on which GPUs ("vLLM TP=2 GPU0+1 +1") on a wide screen; the
    column is the first to give way, so 80, 120 and 160 columns show what they showed before."""
    from gpuscope.widgets.fleet_table import COLUMNS, fit_columns, row

    cols = fit_columns(width)
    assert ("groups" in [c.key for c in cols]) is shown
    line = row(_host_with(["vLLM TP=2 GPU0+1", "python train.py GPU2–5"]), 1_700_000_010.0, cols).plain
    assert cell_len(line) <= width
    assert ("vLLM TP=2 GPU0+1 +1" in line) is shown
    without = [c for c in COLUMNS if c.key != "groups"]
    if not shown:  # nothing else moved for it
        assert row(_host_with(["vLLM TP=2 GPU0+1"]), 1_700_000_010.0, cols).plain == \
            row(_host_with(None), 1_700_000_010.0, fit_columns(width, without)).plain


def test_groups_cell_cuts_the_name_never_the_count():
    from gpuscope.widgets.fleet_table import Column, row

    cols = [Column("groups", "serving", 12)]
    line = row(_host_with(["vLLM TP=8 PP=2 GPU0–7", "SGLang TP=2 GPU8+9", "x GPU10"]), 0.0, cols).plain
    assert line.endswith(" +2") and "…" in line and cell_len(line) <= 12


def test_old_agent_without_groups_reads_and_shows_a_dash():
    from gpuscope.widgets.fleet_table import Column, row

    h = _host_with(None)
    assert h.summary is not None and h.summary.groups == ()
    assert row(h, 0.0, [Column("groups", "serving", 20)]).plain == "–"


@pytest.mark.parametrize("age_s,want", [
    (0.0, "0s ago"), (42.0, "42s ago"), (59.4, "59s ago"), (60.0, "1m00s ago"), (603.0, "10m03s ago"),
    (3599.0, "59m59s ago"), (3600.0, "1h00m ago"), (86_399.0, "23h59m ago"), (86_400.0, "1d00h ago"),
    (3 * 86_400 + 4 * 3600.0, "3d04h ago"), (99 * 86_400 + 23 * 3600.0, "99d23h ago"), (400 * 86_400.0, ">99d ago"),
    (-5.0, "0s ago"), (None, "never"),
])
def test_the_seen_column_holds_every_age_and_keeps_the_row_aligned(age_s, want):
    """At 80x24 a host seen 10m03s ago pushed its row one cell right (the age was wider than its column): the
    column holds every form (s, m s, h m, d h) and the finding starts in the same cell on every row."""
    from gpuscope.widgets.fleet_table import COLUMNS, fit_columns, row

    now = 1_800_000_000.0
    cols = fit_columns(76)  # 80 columns less the table's border and padding
    seen = next(c for c in COLUMNS if c.key == "seen")
    assert cell_len(want) <= seen.width
    text = row(RemoteHost(host="gpu-01", online=True, data_t=None if age_s is None else now - age_s), now, cols).plain
    assert want in text
    start = sum(c.width + 2 for c in cols[:-1])  # where the last column (the worst finding) starts
    assert text[:start - 2].endswith(want) and text.index("(no data yet)") == start, text


SLOW_RANK = {"id": "slow-rank:http://localhost:8001:gpu5:power_limit", "sev": "warning", "since": 1_700_000_000.0,
             "variant": "power_limit",
             "text": "vLLM :8001 TP=4: GPU5 held at its 550 W power limit while GPU4, GPU6, GPU7 draw 640 W (limit 700 W); "
                     "SM clock 1,590 vs 1,980 MHz; the group runs at GPU5's pace"}
CLOCKS = {"id": "clocks:gpu5", "sev": "warning", "since": 1_700_000_000.0,
          "text": "GPU5 power capped: 548 of 550 W, SM clock 1593 of 1980 MHz (−387 MHz)"}


@pytest.mark.parametrize("width,want", [
    (80, "GPU5 lags: power limit · vLLM… +1"),  # the "for" suffix gives way to the lead words
    (120, "GPU5 lags: power limit · vLLM… (for 5m00s) +1"),
    (160, "GPU5 lags: power limit · vLLM :8001 TP=4: GPU5 held… (for 5m00s) +1"),
])
def test_a_slow_rank_leads_its_row_with_the_gpu_and_cause(width, want):
    """A slow rank's message starts with its group; at 80 columns the cell holds ~25 cells: the row leads with
    "GPU5 lags: power limit" so the host's problem reads at any width."""
    from gpuscope.core.summary import summary_from_dict
    from gpuscope.widgets.fleet_table import fit_columns, row

    d = json.loads(summary("gpu-07", 3, [SLOW_RANK, CLOCKS]))
    h = RemoteHost("gpu-07", online=True, summary=summary_from_dict(d), data_t=d["t"])
    line = row(h, 1_700_000_300.0, fit_columns(width)).plain
    assert want in line and cell_len(line) <= width
    assert line.endswith(" +1")  # the other finding is counted, never cut


@pytest.mark.parametrize("fid,text,want", [
    (SLOW_RANK["id"], "x", "GPU5 lags: power limit · x"),
    ("slow-rank:SGLang:gpu0:sw_thermal", "y", "GPU0 lags: thermal · y"),
    ("clocks:gpu5", "GPU5 power capped", "GPU5 power capped"),
    ("", "no id known", "no id known"),
])
def test_lead_words(fid, text, want):
    from gpuscope.core.slow_rank import slow_rank_brief
    from gpuscope.widgets.fleet_table import lead_words

    assert lead_words(slow_rank_brief(fid), text) == want


def test_an_older_agents_frame_findings_lead_with_the_slow_rank_too():
    from gpuscope.widgets.fleet_table import Column, row

    h = RemoteHost("gpu-07", online=True)
    h.findings = {SLOW_RANK["id"]: ("warning", SLOW_RANK["text"], 1_700_000_000.0)}
    assert row(h, 1_700_000_060.0, [Column("finding", "worst finding", 48)]).plain == (
        "GPU5 lags: power limit · vLLM :8001… (for 1m00s)")


def test_a_slow_rank_beside_a_worse_finding_still_leads_the_row():
    """Its GPU's own finding (power cap, thermal, link) usually comes first or worse: the row shows that one, led
    by the slow rank in a few words; a host without a slow rank shows its worst finding as before."""
    from gpuscope.core.summary import summary_from_dict
    from gpuscope.widgets.fleet_table import fit_columns, row

    worse = {**CLOCKS, "sev": "critical"}
    d = json.loads(summary("gpu-07", 3, [worse, SLOW_RANK]))
    h = RemoteHost("gpu-07", online=True, summary=summary_from_dict(d), data_t=d["t"])
    assert row(h, 1_700_000_300.0, fit_columns(80)).plain.endswith("GPU5 lags: power limit · GPU5… +1")
    assert row(h, 1_700_000_300.0, fit_columns(160)).plain.endswith(
        "GPU5 lags: power limit · GPU5 power capped: 548 of… (for 5m00s) +1")
    d = json.loads(summary("gpu-07", 3, [worse]))
    h = RemoteHost("gpu-07", online=True, summary=summary_from_dict(d), data_t=d["t"])
    assert row(h, 1_700_000_300.0, fit_columns(80)).plain.endswith("GPU5 power capped: 548… (for 5m00s)")
