"""The screen at every size: every shipped scenario and the bundled demo rendered with Pilot at six
terminal sizes; every GPU visible, no value cut at a panel edge, no line wrapped, header and footer whole.

The checks read the composed screen (what the terminal would show) and each panel's own lines
against its width, so a value cut by the panel edge (``of 450.``, ``of 45``, ``56-111,168-2``), a wrapped
matrix row, or a header that lost its clock fails here. Marked ``screen`` (about a minute): run with
``-m screen`` or leave it in the full suite.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest
from helpers import examples, run_frames, sim_source
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.cells import cell_len
from rich.text import Text

from gpuscope.core.session import Session
from gpuscope.sources.recording import open_recording
from gpuscope.tui.app import GpuscopeApp
from gpuscope.tui.feeders import ReplayFeeder
from gpuscope.tui.layout import plan_layout
from gpuscope.tui.run import demo_path
from gpuscope.widgets.fit import fit_segments, fit_words, key_names, short_affinity
from gpuscope.widgets.gpu_table import table_columns, table_name
from gpuscope.widgets.keybar import key_hints
from gpuscope.widgets.style import short_name

SCENARIOS = sorted(p.stem for p in (Path(__file__).parents[2] / "sources" / "scenarios").glob("*.toml"))
SIZES = [(80, 24), (100, 30), (120, 40), (160, 50), (200, 60), (60, 20)]
BORDER = "│╮╯┃"
# a value cut at the edge: a digit or unit glued to a border, or a number left ending in its decimal point
CUT = [re.compile(rf"[0-9A-Za-z%/][{BORDER}]"), re.compile(r"\b\d+\.(?![\d.])(?!\s*$)"),
       re.compile(r"\bof \d+\.?\s*[│]")]


def screen_lines(app: GpuscopeApp) -> list[str]:
    """The composed screen as text, one string per terminal row."""
    update = app.screen._compositor.render_full_update()
    return ["".join(seg.text for seg in strip) for strip in update.strips]


def gpu_shown(text: str, index: int, name: str) -> bool:
    """True when the screen ``text`` shows GPU ``index`` (model ``name``) itself: its row in the GPU table
    (``" 7 H200    94% …"``: the index then the model as the table writes it, at the start of a line) or its
    panel's title on a top border (``"╭─ GPU7 H200 ─"``). A GPU named elsewhere, in the topology (``GPU1 PCIe
    Gen1×16``), a finding, a graph's label (``1 util %``) or the legend (``PIX 1 bridge``), is not its row."""
    forms = {table_name(name, w).rstrip("…") for w in range(4, 41)}  # each width drops brand words or cuts
    names = "|".join(re.escape(f) for f in sorted(forms, key=len, reverse=True) if len(f) >= 3)
    row = rf"^[ │┃]{{0,2}}{index} ?(?:{names})(?:\s|$)"
    title = rf"[╭┏┌][─━]+ GPU{index} {re.escape(short_name(name))}(?:\s|$)"
    return re.search(f"{row}|{title}", text, re.M) is not None


def problems(app: GpuscopeApp, lines: list[str], w: int, h: int, mode: str) -> list[str]:
    out = []
    text = "\n".join(lines)
    for dev in app.session.inventory.devices:  # every GPU, by its table row or its panel's title
        if not gpu_shown(text, dev.index, dev.name):
            out.append(f"GPU{dev.index} not visible")
    for k, ln in enumerate(lines):
        if k == len(lines) - 1:
            continue  # the footer's key hints are checked below
        for rx in CUT:
            m = rx.search(ln)
            if m and "…" not in ln[max(0, m.start() - 2):m.end() + 1]:
                out.append(f"row {k}: cut value {m.group()!r}: {ln.rstrip()}")
    # every panel's own lines fit inside it: nothing wrapped (a matrix row in two), nothing clipped
    for wdg in app.screen.query("*"):
        content = getattr(wdg, "_gs_last", None)
        if not isinstance(content, Text) or not wdg.display or not wdg.size.width:
            continue
        if getattr(wdg, "has_focus", False) or wdg.id == "message":
            continue  # prose meant to wrap between words: a focused findings panel, the side message
        for ln in content.plain.split("\n"):
            if cell_len(ln) > wdg.size.width:
                out.append(f"{wdg.id or type(wdg).__name__}: line of {cell_len(ln)} cells in {wdg.size.width}: {ln!r}")
    out += blank_bands(app, lines)
    head = lines[0]
    if mode not in head or not re.search(r"\d\d:\d\d", head) or "window" not in head:
        out.append(f"header lacks mode/window/clock: {head!r}")
    foot = lines[-1]
    if "? help" not in foot or "q quit" not in foot:
        out.append(f"footer lacks ? help / q quit: {foot!r}")
    return out


def blank_bands(app: GpuscopeApp, lines: list[str]) -> list[str]:
    """Spare rows left blank where graphs could use them: two or more blank screen rows in a row (between
    panels, under the compact table), or a GPU panel or the compact table showing two or more rows fewer
    than it is tall (its spare rows go to graphs). Rows inside a graph are not blank bands: the top of a
    tall graph of a low reading is empty by design."""
    out = []
    run = 0
    for k, ln in enumerate(lines + ["x"]):
        if not ln.strip():
            run += 1
            continue
        if run >= 2:
            out.append(f"rows {k - run}-{k - 1}: a blank band of {run} rows")
        run = 0
    for wdg in app.screen.query("GpuPanel, GpuTable"):
        shown = len(getattr(wdg, "_lines", []))
        if wdg.display and wdg.size.height and wdg.size.height - shown >= 2:
            out.append(f"{wdg.id}: {shown} lines in {wdg.size.height} rows")
    return out


async def _check(app: GpuscopeApp, size: tuple[int, int], mode: str) -> None:
    async with app.run_test(size=size) as pilot:
        for _ in range(50):  # poll for a settled first frame (layout, then the panels' second pass)
            await pilot.pause()
            lines = screen_lines(app)
            if re.search(r"\d\d:\d\d", lines[0]) and not problems(app, lines, *size, mode):
                break
        found = problems(app, screen_lines(app), *size, mode)
        assert not found, f"{size}:\n" + "\n".join(found) + "\n\n" + "\n".join(screen_lines(app))


@pytest.mark.screen
@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
@pytest.mark.parametrize("scenario", SCENARIOS)
async def test_scenario_screen_fits(scenario: str, size: tuple[int, int]) -> None:
    src = sim_source(scenario)
    session = Session(src.inventory, interval_s=1.0)
    for f in run_frames(src, 0, 40):
        session.ingest(f)
    await _check(GpuscopeApp(session, None, label="SIMULATED", interval_s=1.0), size, "SIMULATED")


@pytest.mark.screen
@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
@pytest.mark.parametrize("moment", [0.1, 0.5, 0.9])
async def test_demo_screen_fits(moment: float, size: tuple[int, int]) -> None:
    rec = open_recording(demo_path())
    session = Session(rec.inventory, interval_s=1.0, history_s=3600.0)
    app = GpuscopeApp(session, None, label="REPLAY", interval_s=1.0, origin_note="demo (SIMULATED recording)")
    feeder = ReplayFeeder(rec, session, app.notify_update, window_s=lambda: app.window_s)
    feeder.seek(rec.times[0] + moment * rec.duration_s)
    feeder.playing = False
    feeder.start = lambda: None  # type: ignore[method-assign]  # a still picture at that moment
    feeder.stop = lambda: None  # type: ignore[method-assign]
    app.feeder = feeder
    await _check(app, size, "REPLAY")


# ------------------------------------------------------------------ the pure pieces, by table
@pytest.mark.parametrize("text,width,want", [
    ("NVL RX 0.0 TX 398.5 GB/s of 450.0", 30, "NVL RX 0.0 TX 398.5 GB/s of…"),
    ("PCIe TX 57.4 of 63.0 GB/s", 18, "PCIe TX 57.4 of…"),
    ("short", 10, "short"),
    ("averyveryverylongword", 5, "…"),
    ("GPU0 显存 满 of 80 GiB", 12, "GPU0 显存…"),  # wide characters: cut by cells, not by characters
    ("SM clock 1485 of 1980 MHz (−495 MHz)", 30, "SM clock 1485 of 1980 MHz…"),
])
def test_fit_words_drops_whole_words(text: str, width: int, want: str) -> None:
    out = fit_words(Text(text), width)
    assert out.plain == want and cell_len(out.plain) <= width


def _fit_words_by_rich(text: Text, width: int) -> Text:
    """fit_words as it was written first, measuring with Rich and slicing with Rich: the reference."""
    if width <= 0:
        return Text("")
    if cell_len(text.plain) <= width:
        return text
    plain = text.plain
    cut = width - 1
    while cut > 0 and cell_len(plain[:cut]) > width - 1:
        cut -= 1
    if cut < len(plain) and plain[cut] != " ":
        sp = plain.rfind(" ", 0, cut)
        cut = sp if sp > 0 else 0
    out = text[:cut]
    out.rstrip()
    out.append("…", style="bright_black")
    return out


@settings(max_examples=examples(300), deadline=None)
@given(st.text(alphabet=st.sampled_from("ab 1·−日本é…"), max_size=24), st.integers(0, 26), st.integers(0, 24))
def test_fit_words_is_the_rich_reference(plain: str, width: int, styled: int) -> None:
    """fit_words (one-cell lines measured by length, cut with text_head) gives what measuring and slicing with Rich
    gives, wide characters included, and never more than ``width`` cells."""
    text = Text(plain)
    text.stylize("bold", 0, styled)
    got, want = fit_words(text, width), _fit_words_by_rich(text, width)
    assert (got.plain, got.spans) == (want.plain, want.spans)
    assert cell_len(got.plain) <= max(width, 0) or width <= 0


@pytest.mark.parametrize("aff,width,want", [
    ("0-55,112-167", 13, "0-55,112-167"), ("56-111,168-223", 13, "56-111,+1"), ("0-3,8-11,16-19", 9, "0-3,+2"),
    (None, 5, "–"), ("0-1023", 4, "…"),
])
def test_short_affinity_keeps_whole_ranges(aff: str | None, width: int, want: str) -> None:
    assert short_affinity(aff, width) == want


@pytest.mark.parametrize("keys,want", [("question_mark,h", "? h"), ("plus,equals_sign", "+ ="),
                                       ("shift+right,L", "shift+→ L"), ("d,enter", "d enter")])
def test_key_names_are_readable(keys: str, want: str) -> None:
    assert key_names(keys) == want


def test_header_keeps_mode_window_clock_when_narrow() -> None:
    segs = [(Text("gpuscope"), 6), (Text("REPLAY"), 0), (Text("a-long-file-name.jsonl.gz (real recording)"), 3),
            (Text("window 1h00m"), 0), (Text("12:00:00"), 0)]
    assert fit_segments(segs, 38).plain == "REPLAY  window 1h00m  12:00:00"
    assert fit_segments(segs, 40).plain == "gpuscope  REPLAY  window 1h00m  12:00:00"  # the room left, filled
    assert fit_segments(segs, 200).plain.startswith("gpuscope  REPLAY  a-long")


@pytest.mark.parametrize("width,want", [
    (80, "gpuscope  REPLAY  h200-demo  2 GPU  window 1m00s  20:24:42"),  # the file dropped, not the host with it
    (40, "REPLAY  2 GPU  window 1m00s  20:24:42"),
    (200, "gpuscope  REPLAY  demo.jsonl.gz (a real recording of 2x H200, bundled)  h200-demo  2 GPU  window 1m00s  "
          "20:24:42"),
])
def test_a_dropped_long_segment_leaves_room_for_shorter_ones(width, want) -> None:
    segs = [(Text("gpuscope"), 6), (Text("REPLAY"), 0), (Text("demo.jsonl.gz (a real recording of 2x H200, bundled)"), 3),
            (Text("h200-demo"), 3), (Text("2 GPU"), 4), (Text("window 1m00s"), 0), (Text("20:24:42"), 0)]
    assert fit_segments(segs, width).plain == want


@pytest.mark.parametrize("width,want", [
    (200, "gpuscope  REPLAY  demo.jsonl.gz (a real recording of 2x H200, bundled)  h200-demo  2 GPU  window 1m00s  "
          "20:24:42"),
    (80, "gpuscope  REPLAY  demo.jsonl.gz  h200-demo  2 GPU  window 1m00s  20:24:42"),  # the name without its note
    (60, "REPLAY  demo.jsonl.gz  h200-demo  window 1m00s  20:24:42"),
    (55, "REPLAY  demo.j…nl.gz  h200-demo  window 1m00s  20:24:42"),  # cut in the middle to fit
    (50, "REPLAY  h200-demo  2 GPU  window 1m00s  20:24:42"),  # 7 cells left for it: too few to say anything
])
def test_a_file_name_comes_back_without_its_note_when_narrow(width: int, want: str) -> None:
    segs = [(Text("gpuscope"), 6, None), (Text("REPLAY"), 0, None),
            (Text("demo.jsonl.gz (a real recording of 2x H200, bundled)"), 3, "demo.jsonl.gz"),
            (Text("h200-demo"), 3, None), (Text("2 GPU"), 4, None), (Text("window 1m00s"), 0, None),
            (Text("20:24:42"), 0, None)]
    got = fit_segments(segs, width).plain
    assert got == want
    assert len(got) <= width


@pytest.mark.parametrize("text,width,want", [
    ("h200-2gpu-load-phases.jsonl.gz", 40, "h200-2gpu-load-phases.jsonl.gz"),
    ("h200-2gpu-load-phases.jsonl.gz", 9, "h200…l.gz"),
    ("abc", 1, "…"),
    ("abc", 0, ""),
    ("h200-2gpu-load-phases.jsonl.gz", 20, "h200-2gpu-….jsonl.gz"),
    ("日本語のファイル.gz", 10, "日本…ル.gz"),  # wide characters kept whole
])
def test_middle_cut(text: str, width: int, want: str) -> None:
    from rich.cells import cell_len

    from gpuscope.widgets.fit import middle_cut

    got = middle_cut(text, width)
    assert got == want
    assert cell_len(got) <= width


@pytest.mark.parametrize("width", [30, 60, 80, 200])
def test_key_hints_fit_and_keep_help(width: int) -> None:
    t = key_hints([("?", "help"), ("q", "quit"), ("p", "pause"), ("f", "findings"), ("d", "detail")], width)
    assert t.cell_len <= width and "? help" in t.plain


@pytest.mark.parametrize("width,kept", [(200, 9), (78, 9), (58, 6)])
def test_table_drops_low_priority_columns(width: int, kept: int) -> None:
    assert len(table_columns(width)) == kept


@pytest.mark.parametrize("size,n,nf,topo,want", [
    # (size, GPUs, findings, topology lines per form) → (compact, findings lines, topology form)
    ((80, 24), 2, 6, (5, 2), (True, 6, 0)),
    ((80, 24), 8, 0, (11, 2), (True, 1, 1)),
    ((60, 20), 8, 6, (0, 2), (True, 3, 1)),
    ((120, 40), 2, 0, (5, 2), (False, 1, 0)),
    ((120, 40), 8, 3, (11, 2), (True, 3, 0)),
    ((200, 60), 8, 1, (11, 2), (False, 1, 0)),
    ((80, 12), 8, 4, (11, 2), (True, 0, -1)),  # GPU rows before findings
])
def test_plan_layout_priorities(size, n, nf, topo, want) -> None:
    w, h = size
    p = plan_layout(w, h, n, nf, topo_lines=topo)
    assert (p.compact, p.findings_lines, p.topology) == want
    used = 2 + n + 1 + p.findings_rows + (topo[p.topology] + 2 if p.topology >= 0 else 0)
    assert used <= h  # every GPU row and each panel fits


@pytest.mark.parametrize("label,val,cap", [("NV RX", 204.6e9, 450e9), ("NV TX", 450.0e9, 450e9), ("  RX", 63e9, 63e9),
                                           ("  TX", None, 63e9)])
def test_rate_line_never_glues_a_value_to_its_label(label: str, val: float | None, cap: float) -> None:
    from gpuscope.widgets.gpu_panel import rate_line

    text = rate_line(label, val, cap).plain
    assert text.startswith(label.rstrip().ljust(len(label)) + " ") and cell_len(text) <= 35, text
    assert re.search(r"[A-Z][0-9]", text) is None, text


@pytest.mark.screen
@pytest.mark.parametrize("first,then", [((120, 40), (80, 24)), ((80, 24), (200, 60)), ((200, 60), (60, 20))],
                         ids=["shrink", "grow", "shrink-far"])
async def test_the_layout_follows_a_resize(first: tuple[int, int], then: tuple[int, int]) -> None:
    """Compact table or panels, findings and topology are decided again at the new size (a terminal that
    shrinks must not keep two empty GPU cards; one that grows must not keep the compact table)."""
    src = sim_source("a6000-tp2-pcie-gen1")
    session = Session(src.inventory, interval_s=1.0)
    for f in run_frames(src, 0, 40):
        session.ingest(f)
    app = GpuscopeApp(session, None, label="SIMULATED", interval_s=1.0)
    async with app.run_test(size=first) as pilot:
        await pilot.pause()
        await pilot.resize_terminal(*then)
        deadline = time.monotonic() + 15  # a condition with a deadline, not a count of pauses (a busy machine)
        while time.monotonic() < deadline:
            await pilot.pause(0.02)
            lines = screen_lines(app)
            if app.layout_control.plan is not None and not problems(app, lines, *then, "SIMULATED"):
                break
        found = problems(app, screen_lines(app), *then, "SIMULATED")
        assert not found, "\n".join(found) + "\n\n" + "\n".join(screen_lines(app))
        assert app.layout_control.plan.compact is (then[0] < 100 or then[1] < 30), app.layout_control.plan


@pytest.mark.parametrize("name,want", [("NVIDIA RTX A6000", "A6000"), ("NVIDIA H200", "H200"),
                                       ("NVIDIA A100 80GB PCIe", "A100 80…"), ("NVIDIA GeForce RTX 4090", "RTX 4090"),
                                       ("NVIDIA L40S", "L40S")])
def test_table_name_never_cuts_a_model_number_silently(name: str, want: str) -> None:
    from gpuscope.widgets.gpu_table import table_name

    assert table_name(name, 8) == want


# a 60x20 screen where GPU1's table row is missing while the findings, the graphs and the topology name it
_NO_ROW_1 = """\
 SIMULATED   a6000-tp2-pcie-gen1  2 GPU  window 1m00s  11:48
╭─ Findings ───────────────────────────────────────────────╮
│ » looks interconnect-bound: GPU1 PCIe RX…  +5 more — f   │
╰──────────────────────────── 3 critical 2 warning 1 info ─╯
 GPU           util        W    link PCIe↓ ↑GB/s    NV
 0 RTX A6000    96% 168/300  G1×16▼    3.8   3.8     –
 1 util %                                    ▁▁▁▁▁▁██████
╭─ Topology ───────────────────────────────────────────╮
│       GPU0 GPU1  CPU affinity  NUMA                  │
│ GPU1   SYS    X  32-63            1                  │
│ GPU1 PCIe Gen1×16 < Gen4×16                          │
│ GPU0↔GPU1 SYS: up to 4.0 GB/s each way, across NUMA… │
│ NV# NVLink  PIX 1 bridge  PXB bridges  PHB host bridge │
╰──────────────────────────────────────────────────────╯
 ? help  q quit  p pause  f findings  d detail  t topology"""


@pytest.mark.parametrize("text,index,name,shown", [
    (_NO_ROW_1, 0, "NVIDIA RTX A6000", True),
    (_NO_ROW_1, 1, "NVIDIA RTX A6000", False),  # named by findings, graphs and topology: no row of its own
    (" 1 RTX A6000    98% 161/300  G1×16▼    3.9   3.8     –", 1, "NVIDIA RTX A6000", True),
    (" 1 A6000    98% 161/300", 1, "NVIDIA RTX A6000", True),  # the brand word dropped where narrow
    (" 3 A100 80…  94%", 3, "NVIDIA A100 80GB PCIe", True),  # the model cut with …
    ("10H200       94% 526/700", 10, "NVIDIA H200", True),  # a two-digit index leaves no space
    ("10H200       94% 526/700", 1, "NVIDIA H200", False),
    ("11 H200      94% 526/700", 1, "NVIDIA H200", False),
    ("╭─ GPU0 RTX A6000 ────╮ ╭─ GPU1 RTX A6000 ────╮", 1, "NVIDIA RTX A6000", True),  # panels side by side
    ("╭─ Topology ──╮\n│ GPU1 PCIe Gen1×16 < Gen4×16 │", 1, "NVIDIA RTX A6000", False),
    ("│ ✖ GPU1 PCIe Gen1×16 under load │", 1, "NVIDIA RTX A6000", False),
    (" 1 power      ▁▁▂▂▅▅", 1, "NVIDIA RTX A6000", False),  # a graph's label
    ("│ NV# NVLink  PIX 1 bridge │", 1, "NVIDIA H200", False),
    ("", 0, "NVIDIA H200", False),
])
def test_a_gpu_is_visible_only_by_its_own_row_or_panel(text: str, index: int, name: str, shown: bool) -> None:
    """The screen check's "every GPU visible" reads the GPU's table row or panel title, nothing that merely
    names it: a 60x20 screen once lost a GPU's row while the topology panel's "GPU1 PCIe …" passed for it."""
    assert gpu_shown(text, index, name) is shown


@pytest.mark.parametrize("size,n,compact,want", [
    ((120, 40), 8, False, True),  # panels asked for (c) that do not fit: the table stays, every GPU on screen
    ((80, 24), 2, False, True),
    ((200, 60), 2, False, False),  # they fit: the panels
    ((120, 40), 2, True, True),  # the table asked for: the table
])
def test_panels_asked_for_never_push_gpus_off(size, n, compact, want) -> None:
    w, h = size
    assert plan_layout(w, h, n, 0, topo_lines=(5, 2), compact=compact).compact is want


async def test_c_says_when_the_panels_do_not_fit():
    """c at 120x40 with 8 GPUs asked for a panel per GPU, and the panels were drawn cut (GPU2's a top border
    only): the table stays and the note says why."""
    from test_tui import make_app

    app = make_app("h200-nvswitch-8", 0, 10)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert app.query_one("#table").display
        await pilot.press("c")
        await pilot.pause()
        assert app.query_one("#table").display
        assert "no room for GPU panels" in app.message_line


@pytest.mark.parametrize("size,n,want,topo", [((80, 24), 2, 7, (5, 2)), ((80, 24), 4, 16, (7, 2)),
                                              ((80, 24), 8, 16, (11, 2)), ((100, 24), 4, 16, (7, 2)),
                                              ((120, 40), 2, 7, (5, 2)), ((200, 60), 8, 30, (11, 2)),
                                              ((80, 14), 8, 16, (11, 2)), ((80, 50), 4, 16, (7, 2))])
def test_plan_gives_the_inference_panel_rows_never_at_the_gpus_cost(size, n, want, topo) -> None:
    """The inference panel (the lines it wants: ``want``) takes at most a third of the rows left after the
    GPUs' rows and the first findings line, and more only from rows left at the end: every GPU row stays
    (it once took all it wanted and pushed them off at 80×24)."""
    w, h = size
    p = plan_layout(w, h, n, 3, topo_lines=topo, inference_lines=want)
    used = 2 + n + 1 + p.findings_rows + (p.inference_lines + 2 if p.inference_lines else 0) + \
        (topo[p.topology] + 2 if p.topology >= 0 else 0)
    assert used <= h
    assert p.inference_lines <= want
    if h - 2 - (n + 1) - 3 >= 3:
        assert p.inference_lines >= 1 and p.findings_lines >= 1  # its tok/s line, and the first findings line
    if h >= 40 and want <= 16:
        assert p.inference_lines == want  # a tall terminal shows a usual server whole
    assert plan_layout(w, h, n, 3, topo_lines=topo).inference_lines == 0


def _t(s):
    from rich.text import Text

    return Text(s)


@pytest.mark.parametrize("ranks,budget,want", [
    ([0, 1, 2, 2, 1, 2], None, ["0", "1", "2", "3", "4", "5"]),
    ([0, 1, 2, 2, 1, 2], 6, ["0", "1", "2", "3", "4", "5"]),
    ([0, 1, 2, 2, 1, 2], 4, ["0", "1", "4", "… 3 more lines"]),  # each block's first line before details
    ([0, 1, 2, 2, 1, 2], 5, ["0", "1", "2", "4", "… 2 more lines"]),
    ([0, 1, 2, 2, 1, 2], 2, ["0", "… 5 more lines"]),
    ([0, 1, 2], 1, ["0"]),
])
def test_fit_budget_keeps_the_best_ranked_lines_in_order(ranks, budget, want) -> None:
    from gpuscope.widgets.inference_panel import fit_budget

    got = [t.plain.split(":")[0] for t in fit_budget([(r, _t(str(k))) for k, r in enumerate(ranks)], budget)]
    assert got == want
