"""Fuzz suite: hostile input through every parser and command, deterministic and bounded.

The assertion everywhere: a one-line error (:class:`GpuscopeError`) or a counted drop, never another
exception. Seeds are fixed (``derandomize=True``) and example counts bounded so the suite runs in well
under a minute in CI.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import random
from pathlib import Path

import pytest
from helpers import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuscope.cli.main import build_parser
from gpuscope.cli.report import compare_docs, open_or_fail, render_summary
from gpuscope.core import recording_format
from gpuscope.core.codec import inventory_to_dict
from gpuscope.core.errors import GpuscopeError
from gpuscope.core.model import DeviceInfo, Frame, GpuReading, Inventory
from gpuscope.core.stats import export_rows, summarize
from gpuscope.core.validate import dumps_out
from gpuscope.outputs.recorder import Recorder
from gpuscope.sources import recording as recmod
from gpuscope.sources.mqtt import BrokerConfig, Subscriber
from gpuscope.sources.scenario import ScenarioError, load, shipped


def fuzz(n: int) -> settings:
    """Deterministic (fixed seed), bounded, no example database: the same run in CI and here (``n``
    examples; fewer, never under 50, on .ci/run's fast tiers: helpers.examples)."""
    return settings(derandomize=True, deadline=None, database=None, max_examples=examples(n),
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

# JSON-ish values, hostile numbers and text included
scalars = (st.none() | st.booleans() | st.integers(-2**70, 2**70)
           | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=12)
           | st.sampled_from(["\x1b[2J", "NaN", "\u202e", "gpu0", ""]))
json_values = st.recursive(scalars, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=5),
                           max_leaves=25)
FIELDS = ["index", "util_gpu_pct", "power_w", "sm_clock_mhz", "pcie_gen", "pcie_width", "pcie_rx_bytes_per_s",
          "temp_gpu_c", "processes", "lost", "mem_used_bytes", "mem_reserved_bytes", "ecc_uncorrected_volatile",
          "remapped_rows_uncorrectable", "remap_pending", "remap_failure", "xids", "gr_engine_active_pct"]
# Xid tallies: lists of objects with the XidCount keys, hostile values included
xid_lists = st.lists(st.dictionaries(st.sampled_from(["xid", "count", "last_t"]), json_values, max_size=3), max_size=3)
gpu_dicts = st.dictionaries(st.sampled_from(FIELDS), json_values | xid_lists, max_size=6)
frame_dicts = st.fixed_dictionaries({"t": json_values | st.floats(allow_nan=True, allow_infinity=True),
                                     "gpus": st.lists(gpu_dicts, max_size=4) | json_values},
                                    optional={"events": st.lists(st.dictionaries(
                                        st.sampled_from(["t", "kind", "text", "data"]), json_values), max_size=3),
                                              "endpoints": st.lists(st.dictionaries(
                                                  st.sampled_from(["url", "kv_cache_pct", "model", "up"]),
                                                  json_values), max_size=2)})


def _inv(n: int = 2) -> Inventory:
    return Inventory(host="fuzz", devices=tuple(DeviceInfo(index=i, name="G", uuid=f"u{i}", bus_id=f"b{i}")
                                                for i in range(n)))


def _through_every_command(path: Path) -> None:
    """What summary, export, compare and replay-open do with one file."""
    try:
        rec = open_or_fail(path)
    except GpuscopeError as e:
        assert "\n" not in str(e)
        return
    doc = summarize(rec)
    text = render_summary(doc)
    assert "\x1b" not in text and "\x07" not in text
    out = dumps_out(doc)
    assert "NaN" not in out and "Infinity" not in out
    json.loads(out)
    compare_docs(doc, doc)
    for row in export_rows(rec.frames()):
        assert all(not (isinstance(v, float) and not math.isfinite(v)) for v in row)


@pytest.fixture(scope="module")
def base_file(tmp_path_factory):
    p = tmp_path_factory.mktemp("fuzz") / "base.jsonl.gz"
    mp = pytest.MonkeyPatch()
    mp.setattr(recording_format, "MEMBER_BYTES", 2000)
    try:
        r = Recorder(p, _inv(2), interval_s=1.0, fsync=False)
        for i in range(60):
            r.write(Frame(t=1.7e9 + i, gpus=tuple(GpuReading(index=g, util_gpu_pct=float(i % 100), power_w=200.0 + g)
                                                  for g in range(2))), wait=True)
        r.close()
    finally:
        mp.undo()
    return p.read_bytes()


@fuzz(80)
@given(st.lists(st.tuples(st.floats(0, 1), st.integers(0, 255), st.sampled_from(["flip", "del", "dup", "cut"])),
                min_size=1, max_size=5))
def test_mutated_recordings_through_every_command(base_file, tmp_path, muts):
    raw = bytearray(base_file)
    for f, b, kind in muts:
        pos = int(f * (len(raw) - 1)) if raw else 0
        if kind == "flip" and raw:
            raw[pos] ^= b or 1
        elif kind == "del":
            del raw[pos:pos + b]
        elif kind == "dup":
            raw[pos:pos] = raw[pos:pos + b]
        else:
            del raw[pos:]
    p = tmp_path / "m.jsonl.gz"
    p.write_bytes(bytes(raw))
    _through_every_command(p)


@fuzz(120)
@given(st.lists(frame_dicts, min_size=1, max_size=4), json_values, st.booleans())
def test_crafted_frame_lines_through_every_command(tmp_path, frames, header_extra, plain):
    header = {"type": "header", "format": "gpuscope-recording", "version": 1, "interval_s": 1.0,
              "inventory": inventory_to_dict(_inv(2))}
    if isinstance(header_extra, dict):
        header.update({k: v for k, v in header_extra.items() if k in ("interval_s", "simulated", "origin", "command")})
    body = json.dumps(header).encode() + b"\n" + b"".join(json.dumps(f).encode() + b"\n" for f in frames)
    p = tmp_path / "c.jsonl.gz"
    p.write_bytes(body if plain else gzip.compress(body))
    _through_every_command(p)


TOPICS = ["gpuscope/v1/h1/frame", "gpuscope/v1/h1/inventory", "gpuscope/v1/h1/status", "gpuscope/v1/h\x1b/frame",
          "gpuscope/v2/h1/frame", "x"]


@fuzz(200)
@given(st.lists(st.tuples(st.sampled_from(TOPICS), json_values | frame_dicts | st.binary(max_size=64)), max_size=6))
def test_mqtt_payloads_are_applied_or_counted(messages):
    sub = Subscriber(BrokerConfig(host="x", port=1, tls=False))
    good_inv = json.dumps(inventory_to_dict(_inv(2))).encode()
    assert sub.handle("gpuscope/v1/h1/inventory", good_inv)
    for topic, payload in messages:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        before = sub.dropped
        ok = sub.handle(topic, data)
        assert ok is True or sub.dropped == before + 1  # applied, or a counted drop
    for h in sub.snapshot():
        if h.frame is not None and h.inventory is not None:
            assert len(h.frame.gpus) <= len(h.inventory.devices)
            for g in h.frame.gpus:
                for v in (g.util_gpu_pct, g.power_w, g.pcie_rx_bytes_per_s):
                    assert v is None or (math.isfinite(v) and v >= 0)


def _toml_value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v == math.inf else ("-inf" if v == -math.inf else repr(v)))
    if isinstance(v, int):
        return str(v)
    return json.dumps(str(v))


@fuzz(120)
@given(st.sampled_from(sorted(shipped())), st.integers(0, 10**9),
       st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-2**40, 2**40), st.text(max_size=8),
                 st.booleans()))
def test_mutated_scenario_files_load_or_fail_in_one_line(tmp_path, name, seed, value):
    lines = shipped()[name].read_text().splitlines()
    rnd = random.Random(seed)
    assign = [i for i, ln in enumerate(lines) if "=" in ln and not ln.lstrip().startswith("#")]
    if assign:
        i = rnd.choice(assign)
        key = lines[i].split("=", 1)[0]
        lines[i] = f"{key}= {_toml_value(value)}"
    if rnd.random() < 0.2 and lines:
        del lines[rnd.randrange(len(lines))]
    p = tmp_path / "s.toml"
    p.write_text("\n".join(lines) + "\n")
    try:
        sc = load(str(p))
    except ScenarioError as e:
        assert "\n" not in str(e).strip() or "TOML" in str(e)
        return
    assert sc.gpus


@pytest.mark.parametrize("text", ["[" * 5000 + "]" * 5000, "a = " + "[" * 5000 + "]" * 5000, "\x00\x1b[2J"])
def test_hostile_scenario_text(tmp_path, text):
    p = tmp_path / "h.toml"
    p.write_text(text)
    with pytest.raises(ScenarioError):
        load(str(p))


NUMBER_FLAGS = [("topo", ["--simulate", "mixed-4", "--at"]), ("replay", ["f", "--speed"]),
                ("record", ["-o", "f", "--duration"]), ("", ["--interval"]), ("", ["--endpoint-timeout"])]


@fuzz(150)
@given(st.sampled_from(NUMBER_FLAGS), st.one_of(st.text(max_size=10), st.floats(allow_nan=True).map(repr),
                                                st.sampled_from(["nan", "inf", "-inf", "1e309", "-0", "0x10", " 1"])))
def test_cli_numbers_are_finite_or_a_usage_error(capsys, flag, value):
    cmd, argv = flag
    parser = build_parser()[cmd]
    try:
        ns = parser.parse_args([*argv, value])
    except SystemExit as e:
        assert e.code == 2
        err = capsys.readouterr().err
        assert err.startswith("gpuscope: error:") and err.count("\n") == 1
        return
    for v in vars(ns).values():
        if isinstance(v, float):
            assert math.isfinite(v)


def test_the_parsers_use_finite_types():
    """Every float option of every command goes through a finite-number type, not bare float()."""
    for name, p in build_parser().items():
        for a in p._actions:
            if isinstance(a, argparse._StoreAction) and a.type is float:
                pytest.fail(f"gpuscope {name} {a.option_strings}: type=float accepts nan/inf")


async def test_mutated_recordings_replay_in_the_tui(base_file, tmp_path):
    """The replay TUI (Pilot) over damaged files: a file opens with what it salvaged or is a one-line
    error; once open, playing, seeking, marks, detail and windows never crash the app."""
    from gpuscope.core.session import Session
    from gpuscope.tui.app import GpuscopeApp
    from gpuscope.tui.feeders import ReplayFeeder

    rng = random.Random(11)  # deterministic: the same twelve files on every run
    opened = 0
    for case in range(12):
        raw = bytearray(base_file)
        for _ in range(rng.randint(1, 4)):
            pos = rng.randrange(len(raw))
            kind = rng.choice(["flip", "del", "cut"])
            if kind == "flip":
                raw[pos] ^= rng.randint(1, 255)
            elif kind == "del":
                del raw[pos:pos + rng.randint(1, 64)]
            else:
                del raw[max(pos, 200):]
        p = tmp_path / f"t{case}.jsonl.gz"
        p.write_bytes(bytes(raw))
        try:
            rec = open_or_fail(p)
        except GpuscopeError as e:
            assert "\n" not in str(e)
            continue
        opened += 1
        session = Session(rec.inventory, interval_s=1.0, history_s=3600.0)
        app = GpuscopeApp(session, None, label="REPLAY", interval_s=1.0)
        app.feeder = ReplayFeeder(rec, session, app.notify_update, speed=64.0, window_s=lambda a=app: a.window_s)
        async with app.run_test(size=(80, 24)) as pilot:
            for key in ("space", "right", "n", "end", "home", "N", "d", "escape", "w", "f", "escape", "c"):
                await pilot.press(key)
            await pilot.pause()
            assert app.crash is None, app.crash
    assert opened >= 6  # most damaged files still replay what survived


# ------------------------------------------------------------------ hostile /metrics text → the inference panel
_HOSTILE = st.text(alphabet=st.characters(codec="utf-8"), max_size=40) | st.sampled_from([
    "\x1b]52;c;ZXZpbA==\x07", "\x1b[2J\x1b[H", "\x9b31m", "\r\x1b[1A", "model\u202eevil", "x" * 500,
    "NaN", "+Inf", "-Inf", "1e309", "-1", "\x00"])
_NUMBERS = st.sampled_from(["NaN", "+Inf", "-Inf", "1e309", "-1e309", "-5", "0", "1e300", "abc", "", "0x10"])
_FIXTURES = ["vllm_v1.txt", "vllm_v0.txt", "sglang.txt", "tgi.txt", "llamacpp_b10452.txt", "triton_tensorrtllm.txt"]


def _mutate_metrics(text: str, rnd: random.Random, hostile: list[str], numbers: list[str]) -> str:
    """Real /metrics text with label values, sample values and whole lines replaced by hostile ones."""
    lines = text.splitlines()
    for _ in range(rnd.randint(1, 8)):
        if not lines:
            break
        k = rnd.randrange(len(lines))
        line, how = lines[k], rnd.choice(["label", "value", "line", "dup", "cut"])
        if how == "label" and '="' in line:
            a = line.index('="') + 2
            b = line.find('"', a)
            lines[k] = line[:a] + rnd.choice(hostile).replace('"', '\\"') + line[b if b >= 0 else len(line):]
        elif how == "value" and " " in line and not line.startswith("#"):
            lines[k] = line.rsplit(" ", 1)[0] + " " + rnd.choice(numbers)
        elif how == "line":
            lines.insert(k, rnd.choice(hostile))
        elif how == "dup":
            lines.insert(k, line)
        else:
            lines = lines[:k]
    return "\n".join(lines) + "\n"


@settings(max_examples=examples(60), deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(_FIXTURES), st.integers(0, 2**32), st.lists(_HOSTILE, min_size=1, max_size=5), st.lists(_NUMBERS, min_size=1, max_size=3))
def test_hostile_metrics_reach_the_inference_panel_clean(name, seed, hostile, numbers):
    """Any /metrics body: counted as garbage or read; what the panel and header draw has no control characters
    (no escape sequence reaches the terminal), no 'nan'/'inf', and nothing raises."""
    import unicodedata

    from gpuscope.sources.endpoint import EndpointTracker
    from gpuscope.widgets.inference_panel import endpoint_lines, header_line

    rnd = random.Random(seed)
    base = (Path(__file__).parents[1] / "fixtures" / "inference" / name).read_text()
    tr = EndpointTracker("http://127.0.0.1:1/metrics")
    for t in (0.0, 1.0, 2.0):  # three scrapes: rates exist from the second
        tr.feed(t, _mutate_metrics(base, rnd, hostile, numbers))
    readings = tr.readings()
    drawn = [str(x) for r in readings for x in endpoint_lines(r)] + list(header_line(readings))
    for line in drawn:
        bad = [c for c in line if unicodedata.category(c) in ("Cc", "Cf") and c != "\t"]
        assert not bad, (line, bad)
        assert "nan" not in line.lower().split() and "inf" not in line.lower().split(), line


# ------------------------------------------------------------------ GPU health fields
health_values = (json_values
                 | st.lists(st.dictionaries(st.sampled_from(["xid", "count", "last_t"]), json_values, max_size=3),
                            max_size=3)
                 | st.lists(st.fixed_dictionaries({"pid": st.integers(0, 2**31)},  # processes in MIG instances
                                                  optional={"gpu_instance": json_values}), max_size=2))
health_gpus = st.dictionaries(st.sampled_from(["index", "lost", "xids", "mem_reserved_bytes", "ecc_corrected_volatile",
                                               "ecc_uncorrected_volatile", "ecc_corrected_aggregate",
                                               "ecc_uncorrected_aggregate", "remapped_rows_correctable",
                                               "remapped_rows_uncorrectable", "remap_pending", "remap_failure",
                                               "processes"]),
                              health_values, max_size=6)


@fuzz(100)
@given(st.lists(st.lists(health_gpus, max_size=3), min_size=1, max_size=4), json_values, json_values)
def test_hostile_health_fields_through_every_command(tmp_path, gpus_per_frame, version, mig):
    """Recordings whose health fields (and the inventory's memory info version and MIG instances, the
    processes' MIG instance) are hostile: a one-line error or counted drops, never another exception, through
    summary, export and compare."""
    head_inv = inventory_to_dict(_inv(2))
    head_inv["devices"][0]["memory_info_version"] = version
    head_inv["devices"][1]["mig_instances"] = mig
    header = {"type": "header", "format": "gpuscope-recording", "version": 1, "interval_s": 1.0, "inventory": head_inv}
    lines = [json.dumps(header)] + [json.dumps({"t": 1.7e9 + k, "gpus": gs}) for k, gs in enumerate(gpus_per_frame)]
    p = tmp_path / "h.jsonl"
    p.write_text("\n".join(lines) + "\n")
    _through_every_command(p)


# ------------------------------------------------------------------ joined recordings, rewritten keys
def _header_line(host: str, names: list[str], extra: object, spaced: bool) -> bytes:
    inv = Inventory(host=host, devices=tuple(DeviceInfo(index=i, name=n, uuid=f"{host}-u{i}", bus_id=f"b{i}")
                                             for i, n in enumerate(names)))
    h: dict[str, object] = {"type": "header", "format": "gpuscope-recording", "version": 1, "interval_s": 1.0,
                            "inventory": inventory_to_dict(inv)}
    if isinstance(extra, dict):
        h.update({k: v for k, v in extra.items() if k in ("interval_s", "simulated", "origin", "version", "inventory")})
    return json.dumps(h, sort_keys=spaced, separators=(", ", ": ") if spaced else (",", ":")).encode()


recordings_parts = st.lists(st.tuples(
    st.sampled_from(["a", "b", "\x1b]0;x\x07"]), st.lists(st.sampled_from(["L40S", "RTX A6000", "=x"]), min_size=1,
                                                         max_size=3),
    json_values, st.booleans(), st.lists(frame_dicts, max_size=3), st.booleans()), min_size=1, max_size=4)


@fuzz(120)
@given(recordings_parts, st.sampled_from(["members", "one member", "plain"]), st.integers(0, 2**16))
def test_joined_recordings_through_every_command(tmp_path, parts, how, cut):
    """Recordings of random machines joined every way `cat` and `zcat` join them, their keys re-ordered or
    spaced as JSON tools write them, odd second headers and frames included, some cut short: summary
    (each part), export (each part), split and the split files' summaries give output or one line."""
    from gpuscope.cli.main import main

    texts = []
    for host, names, extra, spaced, frames, ended in parts:
        lines = [_header_line(host, names, extra, spaced)]
        lines += [json.dumps(f, sort_keys=spaced).encode() for f in frames]
        if ended:
            lines.append(b'{"type":"end","frames":%d}' % len(frames))
        texts.append(b"\n".join(lines) + b"\n")
    if how == "members":
        raw = b"".join(gzip.compress(t) for t in texts)
    else:
        raw = b"".join(texts)
        raw = gzip.compress(raw) if how == "one member" else raw
    raw = raw[:len(raw) - cut % 7] if cut % 3 == 0 else raw  # now and then a file cut short
    p = tmp_path / ("j.jsonl" if how == "plain" else "j.jsonl.gz")
    p.write_bytes(raw)
    try:
        rec = open_or_fail(p, mixed=True)
    except GpuscopeError as e:
        assert "\n" not in str(e)
        return
    for part in rec.parts:
        view = rec.part(part.number)
        assert view.n_frames == part.n_frames
        doc = summarize(view)
        assert "\x1b" not in render_summary(doc)
        json.loads(dumps_out(doc))
        list(export_rows(view.frames()))
    if rec.mixed:
        with pytest.raises(GpuscopeError) as e:
            open_or_fail(p)
        assert "\n" not in str(e.value) and "\x1b" not in str(e.value) and "--part N" in str(e.value)
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    for f in out.iterdir():
        f.unlink()
    assert main(["split", str(p), "--dir", str(out)]) == (0 if rec.mixed else 1)
    for f in sorted(out.iterdir()):
        assert not recmod.open_recording(f).mixed, "a part written out is one machine's recording"


_URL_PARTS = st.sampled_from(["http://", "https://", "HTTP://", "ftp://", "", "h", "127.0.0.1", ":8000", ":99999",
                              "/metrics", "?x=1", "@", ":", "[::1", "]", "%40", " ", "#frag", "/", "bob"])


@fuzz(300)
@given(st.lists(_URL_PARTS, max_size=8), st.lists(_URL_PARTS, max_size=4))
def test_endpoint_urls_never_show_their_secrets(head, tail):
    """Any --endpoint text with ``alice:S3cretPW@`` in it: the check either refuses it in one line or keeps
    it; where that is user info (any parser would send it as a password), neither the error, the public URL
    nor the options' repr holds it; the header's value is never in either."""
    from gpuscope.cli.options import SourceOptions
    from gpuscope.core.redact import split_endpoint

    url = "".join(head) + "alice:S3cretPW@" + "".join(tail)
    opts = SourceOptions(simulate=None, interval=1.0, pcie_source="auto", endpoint=(url,), endpoint_kind=None,
                         endpoint_header=("X-Api-Key: T0k3nV",), endpoint_window=10.0, endpoint_timeout=2.0,
                         endpoint_insecure=False, probe=None, probe_model=None)
    try:
        checked = opts.checked(env={})
        shown = " ".join(checked.endpoint) + repr(checked)
    except GpuscopeError as e:
        shown = str(e)
        assert "\n" not in shown
    assert "T0k3nV" not in shown
    auth = split_endpoint(url).auth
    if auth is not None and "S3cretPW" in auth[0] + auth[1]:
        assert "S3cretPW" not in shown, shown
