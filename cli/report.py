"""``gpuscope summary``, ``compare`` and ``export``."""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from gpuscope.cli.options import CompareOptions, ExportOptions, SplitOptions, SummaryOptions
from gpuscope.cli.tables import write_table
from gpuscope.core import catalogue
from gpuscope.core.errors import GpuscopeError
from gpuscope.core.health import health_lines
from gpuscope.core.probe import compare_probes
from gpuscope.core.probe import report_lines as probe_report_lines
from gpuscope.core.redact import public_url
from gpuscope.core.stats import (
    SERVING_EXPORT_COLUMNS,
    compare_phases,
    export_rows,
    export_serving_rows,
    summarize,
    summarize_by_marker,
)
from gpuscope.core.text import clean, count
from gpuscope.core.units import NONE, fmt_num
from gpuscope.core.units import duration as human_duration
from gpuscope.core.validate import dumps_out
from gpuscope.sources.files import not_writable_as_file
from gpuscope.sources.recording import (
    gpu_words,
    open_or_fail,
    open_recording,
    part_lines,
    write_lines,
)


def problems_line(problems: list[str], shown: int = 3) -> str:
    """A recording's problems as one readable line: the first ``shown`` in full, then how many more (a
    damaged file can list dozens: the line ran to 4,000 columns)."""
    more = len(problems) - shown
    return "; ".join(clean(p, 300) for p in problems[:shown]) + (f"; and {more} more" if more > 0 else "")


def refuse_existing(path: Any, force: bool, source: Any = None) -> None:
    """A one-line :class:`GpuscopeError` when ``path`` exists and ``force`` is not given (never overwrite
    user data by accident), and always when ``path`` is the file being read (``--force`` included: a
    symlink or hard link to it counts)."""
    if source is not None and _same_file(path, source):
        raise GpuscopeError(f"{path} is the recording being read; refusing to overwrite it (choose another name)")
    why = not_writable_as_file(path)  # --force replaces files: writing into a FIFO with no reader never ends
    if why is not None:
        raise GpuscopeError(f"{path} {why}; refusing to write there")
    if not force and os.path.lexists(path):
        raise GpuscopeError(f"{path} exists; refusing to overwrite it (use --force)")


def _same_file(a: Any, b: Any) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _fmt(v: float | None, scale: float = 1.0, digits: int = 0) -> str:
    return fmt_num(v, digits=digits, scale=scale)


def endpoint_line(e: dict[str, Any]) -> str:
    """One endpoint (and served model) of a summary in a line: every serving reading it had (means; generated
    tok/s also p50, p95, max), e.g. ``endpoint http://gpu1:8000 (triton) llama: KV cache % mean 41, TTFT mean
    ms mean 180``; a server whose readings are all unknown (unreachable, no rate yet) says so."""
    head = f"endpoint {clean(e['url'], 300)} ({clean(e['kind'] or '?', 40)})" + (
        f" {clean(e['model'], 100)}" if e.get("model") else "")
    parts = []
    for m in catalogue.metrics("endpoint", summary=True):
        s = e["stats"].get(m.name)
        if not s:
            continue
        if m.name == "gen_tokens_per_s":
            parts.append(f"{m.label} " + ", ".join(f"{k} {_fmt(s[k], m.scale, m.digits)}"
                                                    for k in ("mean", "p50", "p95", "max")))
        else:
            parts.append(f"{m.label} mean {_fmt(s['mean'], m.scale, m.digits)}")
    return f"{head}: " + ("; ".join(parts) if parts else "no readings (unreachable, or no rate yet)")


def probe_line(e: dict[str, Any], shown: int = 3) -> str | None:
    """Why an endpoint's load probe (``--probe``) failed, when it did: ``probe failed in 12 of 30 readings:
    HTTP 501``, several reasons most common first with their counts (``HTTP 401 (needs a token?) ×10, no
    answer in 2 s ×2``), the first ``shown`` of them; None when no reading says it failed (or the summary is
    from before ``probe_errors``)."""
    errors = e.get("probe_errors") or {}
    failed = e.get("probe_failed") or sum(errors.values())
    if not errors or not failed:
        return None
    whys = [clean(why, 120).removeprefix("probe: ") for why in list(errors)[:shown]]
    if len(errors) > 1:
        whys = [f"{why} ×{n}" for why, n in zip(whys, errors.values())]
    more = len(errors) - shown
    of = f" of {count(e['readings'], 'reading')}" if e.get("readings") else f" {'reading' if failed == 1 else 'readings'}"
    return (f"probe failed in {failed}{of}: " + ", ".join(whys) + (f" and {more} more" if more > 0 else ""))


def render_summary(doc: dict[str, Any]) -> str:
    """The text summary of a recording: its head line, each GPU, each endpoint, the serving groups, the
    findings, the markers and any link probe, in that order."""
    out = _summary_head(doc)
    for g in doc["gpus"]:
        out += _summary_gpu(g, doc["start"])
    for e in doc["endpoints"]:
        out += ["", endpoint_line(e)]
        probe = probe_line(e)
        if probe is not None:
            out.append("  " + probe)
    if doc.get("groups"):
        from gpuscope.core import group_stats

        out.append("")
        out.append("serving groups (traffic both ways, summed over each group's GPUs; means over the recording):")
        out.extend("  " + group_stats.group_text(r) for r in doc["groups"])
    out.append("")
    out += _summary_findings(doc["findings"], doc["start"])
    if doc["markers"]:
        out.append("markers: " + "; ".join(f"+{human_duration(m['t'] - doc['start'])} {clean(m['text'], 200)}"
                                          for m in doc["markers"][:20]))
    for data in doc.get("probes", []):  # `record --probe-links`
        out += [clean(x, 300) for x in probe_report_lines(data, doc["start"])]
    return "\n".join(out)


def _summary_head(doc: dict[str, Any]) -> list[str]:
    """The file, host, start, length and frames; the file's problems and notes."""
    sim = "  SIMULATED" if doc["simulated"] else ""
    start = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(doc["start"]))
    out = [f"{clean(doc['file'], 300)}: {clean(doc['host'])}{sim}, {start}, {human_duration(doc['duration_s'])}, "
           f"{count(doc['frames'], 'frame')}"]
    if doc["problems"]:
        out.append("problems: " + problems_line(doc["problems"]))
    return out + [f"note: {clean(n, 300)}" for n in doc.get("notes", [])]


def _summary_gpu(g: dict[str, Any], t0: float) -> list[str]:
    """One GPU's block: its name (LOST when it fell off), a table of its summary metrics, its PCIe links while
    busy, its health lines."""
    lost = f"  LOST at +{human_duration(g['lost_at'] - t0)}" if g["lost_at"] else ""
    out = ["", f"GPU{g['index']} {clean(g['name'], 100)}{lost}", f"  {'':<16}{'mean':>9}{'p50':>9}{'p95':>9}{'max':>9}"]
    for m in catalogue.metrics("gpu", summary=True):
        s = g["stats"].get(m.name)
        if s is not None:
            out.append(f"  {m.label:<16}" + "".join(f"{_fmt(s[k], m.scale, m.digits):>9}"
                                                    for k in ("mean", "p50", "p95", "max")))
    links = g["pcie_links_while_busy"]
    if links:
        total = sum(links.values())
        seen = ", ".join(f"{k} {100 * v / total:.0f}%" for k, v in sorted(links.items()))
        out.append(f"  PCIe link while busy: {seen} (GPU max Gen{g['pcie_gen_max']})")
    out += [f"  {clean(line, 300)}" for line in health_lines(g.get("health") or {})]
    if g.get("memory_info_version") == 1:
        out.append("  memory info v1 (used includes driver-reserved)")
    return out


def _summary_findings(findings: list[dict[str, Any]], t0: float) -> list[str]:
    """Each finding with its time active, its episodes and each change of severity or variant."""
    if not findings:
        return ["findings: none"]
    out = ["findings:"]
    for f in findings:
        eps = f.get("episodes") or []
        state = "until the end" if f["cleared_at"] is None else "then cleared"
        if len(eps) > 1:
            state = f"{len(eps)} episodes, " + state
        out.append(f"  {f['severity']:<8} {human_duration(f['duration_s']):>7} ({state})  {clean(f['message'], 300)}")
        for ep in eps:
            for ch in ep.get("changes", []):
                what = (f"{ch['old_severity']} → {ch['severity']}" if ch["old_severity"] != ch["severity"]
                        else f"{ch['old_variant'] or '-'} → {ch['variant'] or '-'}")
                out.append(f"  {'':<8} {'':>7}   at +{human_duration(ch['t'] - t0)}: {clean(what, 200)}")
    return out


SERVING_TEXT = (("gen_tokens_per_s", "gen {} tok/s", 1, 1), ("prompt_tokens_per_s", "prompt {} tok/s", 1, 1),
                ("prompt_computed_tokens_per_s", "computed {} tok/s", 1, 1),
                ("prompt_cached_tokens_per_s", "cached {} tok/s", 1, 1), ("prefix_cache_hit_pct", "cache hit {} %", 1, 0),
                ("requests_running", "running {}", 1, 1), ("requests_waiting", "waiting {}", 1, 1),
                ("kv_cache_pct", "KV {} %", 1, 0), ("ttft_mean_s", "TTFT mean {} ms", 1e-3, 0),
                ("queue_mean_s", "queue mean {} ms", 1e-3, 0), ("prefill_mean_s", "prefill mean {} ms", 1e-3, 0),
                ("itl_mean_s", "ITL mean {} ms", 1e-3, 1), ("preemptions_per_min", "preemptions {}/min", 1, 1))


def _serving_parts(e: dict[str, Any]) -> list[str]:
    """The known serving numbers of one endpoint/model in a span (unknown ones left out, never 0)."""
    parts = [fmt.format(_fmt(e[key], scale, digits)) for key, fmt, scale, digits in SERVING_TEXT if e.get(key) is not None]
    return parts or ["no readings (unreachable or no rate yet)"]


def render_phases(doc: dict[str, Any]) -> str:
    """The per-phase report: a block per marker span with its GPUs, endpoints/models and findings."""
    out = []
    sim = "  SIMULATED" if doc["simulated"] else ""
    out.append(f"{doc['file']}: {doc['host']}{sim}, {count(len(doc['spans']), 'phase')} by marker")
    for s in doc["spans"]:
        out.append("")
        kind = "" if s["kind"] == "phase" else f"  [{s['kind']}]"
        out.append(f"{clean(s['label'], 70)}{kind}  +{human_duration(s['start'] - doc['start'])}, "
                   f"{human_duration(s['duration_s'])}, {count(s['frames'], 'frame')}")
        if not s["frames"]:
            continue
        out.append(f"  {'GPU':<4}{'util %':>7}{'power W':>9}{'SM MHz':>8}{'PCIe RX':>9}{'PCIe TX':>9}"
                   f"{'NVL RX':>8}{'NVL TX':>8}  (GB/s)")
        for g in s["gpus"]:
            out.append(f"  {g['index']:<4}{_fmt(g['util_gpu_pct']):>7}{_fmt(g['power_w']):>9}{_fmt(g['sm_clock_mhz']):>8}"
                       f"{_fmt(g['pcie_rx_bytes_per_s'], 1e9, 2):>9}{_fmt(g['pcie_tx_bytes_per_s'], 1e9, 2):>9}"
                       f"{_fmt(g['nvlink_rx_bytes_per_s'], 1e9, 1):>8}{_fmt(g['nvlink_tx_bytes_per_s'], 1e9, 1):>8}")
        for e in s["endpoints"]:
            name = e["model"] or e["url"]
            out.append(f"  {e['kind'] or '?'} {name[:50]}: " + ", ".join(_serving_parts(e)))
        for r in s.get("groups", []):
            from gpuscope.core import group_stats

            out.append("  group " + group_stats.group_text(r))
        for f in s["findings"]:
            out.append(f"  {f['severity']:<8} {clean(f['message'], 300)}")
    out.append("")
    out.append("means over each span's frames; tok/s and latency means over the readings whose rate window's middle "
               "lies in the span, tok/s weighted by time (the whole-file summary's rule)")
    return "\n".join(out)


PARTS_SCHEMA = "gpuscope.summary-parts/1"


def run_summary(opts: SummaryOptions) -> int:
    """``summary FILE``: of a file that joins recordings of different machines, each part apart (text: a
    block per part under a ``part N of M`` line; JSON: ``{"schema": "gpuscope.summary-parts/1", "parts":
    [summary, …]}``), never statistics over both inventories."""
    rec = open_or_fail(opts.file, opts.part, mixed=True)
    how, text = (summarize_by_marker, render_phases) if opts.by_marker else (summarize, render_summary)
    if not rec.mixed:
        doc = how(rec)
        print(dumps_out(doc, indent=2) if opts.json else text(doc))
        return 0
    docs = [how(rec.part(p.number)) for p in rec.parts]
    if opts.json:
        print(dumps_out({"schema": PARTS_SCHEMA, "file": str(rec.path), "notes": rec.notes, "parts": docs}, indent=2))
        return 0
    out = [clean(f"{opts.file}: {count(len(rec.parts), 'part')}, each summarised apart: "
                 + "; ".join(p.note for p in rec.parts[1:]), 600)]
    for p, doc in zip(rec.parts, docs):
        out += ["", f"=== part {p.number} of {len(rec.parts)} (--part {p.number}): frames {p.start:,}–{p.stop - 1:,} ===",
                text(doc)]
    print("\n".join(out))
    return 0


def _points(a: float | None, b: float | None) -> str:
    """The change of a percentage in percentage points (72 % → 76 % is +4 pt, not +6 %)."""
    if a is None or b is None:
        return ""
    return "" if a == b else f"{b - a:+.0f} pt"


def _pct(a: float | None, b: float | None) -> str:
    """The relative change of a quantity, in per cent of A."""
    if a is None or b is None:
        return ""
    if a == 0:
        return "" if b == 0 else "new"
    return f"{100 * (b - a) / abs(a):+.0f} %"


def print_group_compare(gr: dict[str, Any]) -> None:
    """A serving group in A and B: its path, tok/s, traffic and bytes per token side by side."""
    from gpuscope.core import group_stats
    ra, rb = gr["a"], gr["b"]
    print(f"group {clean(gr['name'], 100)}" + (" (only in A)" if rb is None else " (only in B)" if ra is None else ""))
    for side, r in (("A", ra), ("B", rb)):
        if r is not None:
            print(f"  {side}: {group_stats.group_text(r)}")
    if ra is not None and rb is not None:
        for key, label in (("gen_tokens_per_s", "tok/s"), ("bytes_per_token", "bytes/token")):
            change = _pct(ra[key], rb[key])
            if change:
                print(f"  {label} {change}")
        busy_a, busy_b = ((r.get("link_cost") or {}).get("link_busy_share") for r in (ra, rb))
        if busy_a is not None and busy_b is not None:
            print(f"  link busy {busy_a * 100:.1f} % → {busy_b * 100:.1f} % of the time (estimates)")


def compare_endpoints(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Generated tok/s (mean) of each endpoint and model, A beside B, paired by URL and model (one only on a side
    has None on the other), in A's order then B's: each row names what it compares."""
    def key(e: dict[str, Any]) -> tuple[str, str]:
        return e["url"], e.get("model") or ""

    def mean(e: dict[str, Any] | None) -> float | None:
        return None if e is None else (e["stats"].get("gen_tokens_per_s") or {}).get("mean")

    by_a, by_b = {key(e): e for e in a}, {key(e): e for e in b}
    out = []
    for k in [*by_a, *(k for k in by_b if k not in by_a)]:
        ma, mb = mean(by_a.get(k)), mean(by_b.get(k))
        out.append({"url": k[0], "model": k[1], "a": ma, "b": mb, "change": _pct(ma, mb),
                    "url_a": k[0] if k in by_a else None, "url_b": k[0] if k in by_b else None})
    return out


def compare_docs(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Side-by-side means and their differences, GPU by GPU (and endpoints)."""
    rows = []
    for ga, gb in zip(a["gpus"], b["gpus"]):
        for m in catalogue.metrics("gpu", summary=True):
            sa, sb = ga["stats"].get(m.name), gb["stats"].get(m.name)
            if sa is None and sb is None:
                continue
            ma = sa["mean"] if sa else None
            mb = sb["mean"] if sb else None
            rows.append({"gpu": ga["index"], "metric": m.name, "label": m.label, "a": ma, "b": mb,
                         "change": _points(ma, mb) if m.unit == "%" else _pct(ma, mb), "scale": m.scale,
                         "digits": m.digits})
        la = max(ga["pcie_links_while_busy"], key=ga["pcie_links_while_busy"].get, default=None)
        lb = max(gb["pcie_links_while_busy"], key=gb["pcie_links_while_busy"].get, default=None)
        if la or lb:
            rows.append({"gpu": ga["index"], "metric": "pcie_link_busy", "label": "PCIe link busy", "a": la, "b": lb,
                         "change": "" if la == lb else f"{la} → {lb}"})
    eps = compare_endpoints(a["endpoints"], b["endpoints"])
    from gpuscope.core import group_stats  # serving groups (docs/groups.md)

    groups = group_stats.compare_groups(a.get("groups", []), b.get("groups", []))
    fa = {f["id"]: f["message"] for f in a["findings"]}
    fb = {f["id"]: f["message"] for f in b["findings"]}
    return {"schema": "gpuscope.compare/1", "groups": groups, "a": a["file"], "b": b["file"], "duration_s": [a["duration_s"],
            b["duration_s"]], "rows": rows, "endpoints_tok_s": eps,
            "findings_only_in_a": sorted(fa.keys() - fb.keys()), "findings_only_in_b": sorted(fb.keys() - fa.keys()),
            "findings_only_in_a_text": [fa[k] for k in sorted(fa.keys() - fb.keys())],
            "findings_only_in_b_text": [fb[k] for k in sorted(fb.keys() - fa.keys())],
            "gpu_count": [len(a["gpus"]), len(b["gpus"])],
            "gpu_models_differ": [{"gpu": ga["index"], "a": ga["name"], "b": gb["name"]}
                                  for ga, gb in zip(a["gpus"], b["gpus"]) if ga["name"] != gb["name"]],
            **probe_rows(a.get("probes"), b.get("probes"))}


def probe_rows(pa: Any, pb: Any) -> dict[str, Any]:
    """``probes``: the two recordings' last probes figure by figure; where only one has a probe (`record
    --probe-links`), its figures with the other side None and the change ``no probe in B`` (or A), and
    ``probe_missing`` "B" (or "A"): a probe on one side is never left out without a word."""
    rows = compare_probes(pa, pb)
    if rows:
        return {"probes": rows, "probe_missing": None}
    own_a, own_b = compare_probes(pa, pa), compare_probes(pb, pb)  # each side's figures alone (empty: none)
    if bool(own_a) == bool(own_b):
        return {"probes": [], "probe_missing": None}
    missing, have = ("B", own_a) if own_a else ("A", own_b)
    side = missing.lower()
    return {"probes": [{**r, f"{side}_gb_per_s": None, f"{side}_level": None, f"{side}_link": None,
                        "change": f"no probe in {missing}"} for r in have], "probe_missing": missing}


PHASE_ROWS = (("gen_tokens_per_s", "gen tok/s", 1, 1), ("prompt_tokens_per_s", "prompt tok/s", 1, 1),
              ("requests_waiting", "waiting", 1, 1), ("ttft_mean_s", "TTFT mean ms", 1e-3, 0),
              ("itl_mean_s", "ITL mean ms", 1e-3, 1), ("util_gpu_pct", "GPU util % (mean)", 1, 0),
              ("power_w", "power W (all GPUs)", 1, 0), ("bytes_per_token", "MB/token (groups)", 1e6, 1))


def _short(name: str) -> str:
    """A GPU model without its vendor's prefix: ``NVIDIA L40S`` → ``L40S``."""
    return name.removeprefix("NVIDIA ")


def run_compare_phases(opts: CompareOptions) -> int:
    a = summarize_by_marker(open_or_fail(opts.a, opts.part_a, option="--part-a"))
    b = summarize_by_marker(open_or_fail(opts.b, opts.part_b, option="--part-b"))
    rows = compare_phases(a, b)
    if opts.json:
        print(dumps_out({"schema": "gpuscope.compare-phases/1", "a": a["file"], "b": b["file"], "phases": rows},
                        indent=2))
        return 0
    print(f"A: {a['file']}\nB: {b['file']}")
    for r in rows:
        print("")
        missing = " (only in A)" if r["b"] is None else " (only in B)" if r["a"] is None else ""
        print(f"{clean(r['label'], 70)}{missing}")
        for key, label, scale, digits in PHASE_ROWS:
            va = r["a"][key] if r["a"] else None
            vb = r["b"][key] if r["b"] else None
            if va is None and vb is None:
                continue
            print(f"  {label:<18}{_fmt(va, scale, digits):>10}{_fmt(vb, scale, digits):>10}  {_pct(va, vb)}")
    return 0


def run_compare(opts: CompareOptions) -> int:
    if opts.by_marker:
        return run_compare_phases(opts)
    a, b = summarize(open_or_fail(opts.a, opts.part_a, option="--part-a")), summarize(open_or_fail(opts.b, opts.part_b, option="--part-b"))
    doc = compare_docs(a, b)
    if opts.json:
        print(dumps_out(doc, indent=2))
        return 0
    print(f"A: {clean(a['file'], 300)} ({clean(a['host'])}{', SIMULATED' if a['simulated'] else ''}, {human_duration(a['duration_s'])})")
    print(f"B: {clean(b['file'], 300)} ({clean(b['host'])}{', SIMULATED' if b['simulated'] else ''}, {human_duration(b['duration_s'])})")
    for side, d in (("A", a), ("B", b)):  # a cut-off or damaged input changes what its means mean: say so
        if d.get("problems"):
            print(f"note: {side}: {problems_line(d['problems'])}")
        for n in d.get("notes", []):  # a part of a joined file, or recordings joined (resumed)
            print(f"note: {side}: {clean(n, 300)}")
    if doc["gpu_count"][0] != doc["gpu_count"][1]:
        print(f"note: A has {doc['gpu_count'][0]} GPUs, B has {doc['gpu_count'][1]}; compared by index")
    for d in doc["gpu_models_differ"]:  # the same index is another model: differences are the hardware's too
        print(f"note: GPU{d['gpu']} {clean(_short(d['a']), 60)} vs {clean(_short(d['b']), 60)}")
    for e in doc["endpoints_tok_s"]:
        what = clean(public_url(e["url"]) + (f" {e['model']}" if e.get("model") else ""), 120)
        print(f"tok/s (mean)         {_fmt(e['a'], 1, 1):>10} {_fmt(e['b'], 1, 1):>10}  {e['change']}  {what}")
    for gr in doc["groups"]:
        print_group_compare(gr)
    print(f"{'GPU':<4}{'metric (mean)':<18}{'A':>10}{'B':>10}  change")
    for r in doc["rows"]:
        if r["metric"] == "pcie_link_busy":
            print(f"{r['gpu']:<4}{r['label']:<18}{str(r['a'] or NONE):>10}{str(r['b'] or NONE):>10}  {r['change']}")
        else:
            print(f"{r['gpu']:<4}{r['label']:<18}{_fmt(r['a'], r['scale'], r['digits']):>10}"
                  f"{_fmt(r['b'], r['scale'], r['digits']):>10}  {r['change']}")
    for side in ("a", "b"):
        texts = doc[f"findings_only_in_{side}_text"]
        if texts:
            print(f"findings only in {side.upper()}:")
            for t in texts:
                print("  " + clean(t, 300))
    if doc["probes"]:  # a recording carries a probe (`record --probe-links`): figure by figure
        print(f"{'probe (GB/s)':<32}{'A':>8}{'B':>8}  change")
        for r in doc["probes"]:
            moved = r["a_link"] != r["b_link"] and not doc["probe_missing"]
            print(f"{clean(r['figure'], 60):<32}{_fmt(r['a_gb_per_s'], 1, 1):>8}{_fmt(r['b_gb_per_s'], 1, 1):>8}  "
                  f"{r['change']}" + (f"  ({r['a_link']} → {r['b_link']})" if moved else ""))
    return 0


def table_meta(rec: Any, path: Any) -> dict[str, Any]:
    """The Parquet file metadata of an export of ``rec`` (cli/tables.py adds version and units)."""
    meta = {"host": rec.inventory.host, "recording": str(path), "simulated": rec.simulated,
            "gpus": gpu_words(rec.inventory)}
    if rec.notes:
        meta["notes"] = rec.notes
    return meta


def run_export_serving(out: str, parquet: bool, rec: Any) -> None:
    """``export --serving OUT2``: the serving readings, one row per endpoint and model per frame."""
    try:
        n = write_table(out, SERVING_EXPORT_COLUMNS, export_serving_rows(rec.frames()), parquet,
                        meta=table_meta(rec, rec.path))
    except OSError as e:
        raise GpuscopeError(f"cannot write {out}: {e.strerror or e}") from None
    if out != "-":
        why = "" if n else ": the recording has no inference endpoint (record with --endpoint URL)"
        sys.stderr.write(f"gpuscope: wrote {n} serving rows (endpoint × model × frame) to {out}{why}\n")


def run_export(opts: ExportOptions) -> int:
    """``export FILE --csv|--parquet OUT [--serving OUT2]``; an existing OUT or OUT2 is never overwritten
    without ``--force``."""
    if opts.serving and opts.serving != "-":
        refuse_existing(opts.serving, opts.force, opts.file)
    rec = open_or_fail(opts.file, opts.part)
    out = opts.output
    force = opts.force
    if out != "-":
        refuse_existing(out, force, opts.file)
    columns = catalogue.export_columns()
    rows = export_rows(rec.frames())
    try:
        n = write_table(out, columns, rows, bool(opts.parquet), force, meta=table_meta(rec, opts.file))
    except FileExistsError:
        raise GpuscopeError(f"{out} exists; refusing to overwrite it (use --force)") from None
    except BrokenPipeError:
        raise  # `export F --csv - | head`: the reader is done (main says nothing)
    except OSError as e:
        raise GpuscopeError(f"cannot write {out}: {e.strerror or e}") from None
    if out != "-":
        sys.stderr.write(f"gpuscope: wrote {n} rows ({len(rec.inventory.devices)} GPUs × {rec.n_frames} frames) "
                         f"to {out} ({os.path.getsize(out)} bytes)\n")
    if rec.problems:  # the rows are what survived: say what did not
        sys.stderr.write(f"gpuscope: note: {clean(opts.file, 200)}: {problems_line(rec.problems)}\n")
    for note in rec.notes:  # which part, or recordings joined
        sys.stderr.write(f"gpuscope: note: {clean(opts.file, 200)}: {clean(note, 300)}\n")
    if opts.serving:
        run_export_serving(opts.serving, bool(opts.parquet), rec)
    return 0


def split_names(path: str, parts: int, folder: str | None) -> list[str]:
    """Where ``split`` writes each part of ``path``: ``run.jsonl.gz`` → ``run.part1.jsonl.gz``, … (in
    ``folder`` when given, else beside it)."""
    base = os.path.basename(path)
    for ext in (".jsonl.gz", ".jsonl", ".gz"):
        if base.endswith(ext) and len(base) > len(ext):
            stem = base[:-len(ext)]
            break
    else:
        stem, ext = base, ".jsonl.gz"
    ext = ".jsonl" if ext == ".jsonl" else ".jsonl.gz"
    where = folder if folder is not None else os.path.dirname(path)
    return [os.path.join(where, f"{stem}.part{k}{ext}") for k in range(1, parts + 1)]


def run_split(opts: SplitOptions) -> int:
    """``split FILE [--dir DIR]``: each part of a file that joins recordings of different machines to a
    file of its own, lines as stored (the parts read as the recordings they were). Every output path is
    checked before anything is written, and none that exists is ever overwritten (there is no --force)."""
    rec = open_recording(opts.file)
    if not rec.mixed:
        joined = f" ({len(rec.parts[0].marks)} joined: resumed on the same machine)" if len(rec.parts[0].marks) > 1 else ""
        raise GpuscopeError(clean(f"{opts.file} holds one machine's recording{joined}: nothing to split", 400))
    names = split_names(opts.file, len(rec.parts), opts.dir)
    if opts.dir:
        try:  # the folder asked for is made (as `mkdir -p`): nothing in it is overwritten (checked below)
            os.makedirs(opts.dir, exist_ok=True)
        except OSError as e:
            raise GpuscopeError(clean(f"cannot make {opts.dir}: {e.strerror or e}", 400)) from None
    for name in names:
        if os.path.lexists(name):
            raise GpuscopeError(f"{name} exists; split never overwrites a file (move it, or write elsewhere with --dir DIR)")
        refuse_existing(name, False, opts.file)
    for p, name in zip(rec.parts, names):
        try:  # an uncompressed input gives uncompressed parts
            size = write_lines(name, part_lines(rec, p), compress=not name.endswith(".jsonl"))
        except FileExistsError:
            raise GpuscopeError(f"{name} exists; refusing to overwrite it") from None
        except OSError as e:
            raise GpuscopeError(f"cannot write {name}: {e.strerror or e}") from None
        sys.stderr.write(clean(f"gpuscope: wrote {name}: part {p.number}, {count(p.n_frames, 'frame')}, "
                               f"{p.inventory.host} {gpu_words(p.inventory)} ({size:,} bytes)", 400) + "\n")
    if rec.problems:
        sys.stderr.write(f"gpuscope: note: {clean(opts.file, 200)}: {problems_line(rec.problems)}\n")
    return 0
