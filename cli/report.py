"""``gpuscope summary``, ``compare`` and ``export``."""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time
from typing import Any

from gpuscope.core import catalogue
from gpuscope.core.errors import GpuscopeError
from gpuscope.core.stats import export_rows, summarize
from gpuscope.core.units import duration as human_duration
from gpuscope.core.units import fmt_num
from gpuscope.sources.recording import open_recording


def open_or_fail(path: Any) -> Any:
    """Open a recording for a command; a bad or empty file is a one-line GpuscopeError (RecordingError)."""
    rec = open_recording(path)
    if rec.n_frames == 0:
        raise GpuscopeError(f"{path}: the recording holds no frames" + (f" ({'; '.join(rec.problems)})" if rec.problems
                                                                    else ""))
    return rec


def _fmt(v: float | None, scale: float = 1.0, digits: int = 0) -> str:
    return fmt_num(v, digits=digits, scale=scale)


def render_summary(doc: dict[str, Any]) -> str:
    out = []
    sim = "  SIMULATED" if doc["simulated"] else ""
    start = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(doc["start"]))
    out.append(f"{doc['file']}: {doc['host']}{sim}, {start}, {human_duration(doc['duration_s'])}, "
               f"{doc['frames']} frames")
    if doc["problems"]:
        out.append("problems: " + "; ".join(doc["problems"]))
    for g in doc["gpus"]:
        out.append("")
        lost = f"  LOST at +{human_duration(g['lost_at'] - doc['start'])}" if g["lost_at"] else ""
        out.append(f"GPU{g['index']} {g['name']}{lost}")
        out.append(f"  {'':<16}{'mean':>9}{'p50':>9}{'p95':>9}{'max':>9}")
        for m in catalogue.metrics("gpu", summary=True):
            s = g["stats"].get(m.name)
            if s is None:
                continue
            out.append(f"  {m.label:<16}" + "".join(f"{_fmt(s[k], m.scale, m.digits):>9}"
                                                    for k in ("mean", "p50", "p95", "max")))
        links = g["pcie_links_while_busy"]
        if links:
            total = sum(links.values())
            seen = ", ".join(f"{k} {100 * v / total:.0f}%" for k, v in sorted(links.items()))
            out.append(f"  PCIe link while busy: {seen} (GPU max Gen{g['pcie_gen_max']})")
    for e in doc["endpoints"]:
        s = e["stats"].get("gen_tokens_per_s")
        if s:
            out.append("")
            out.append(f"endpoint {e['url']} ({e['kind'] or '?'}): gen tok/s mean {s['mean']:.1f}, p50 {s['p50']:.1f}, "
                       f"p95 {s['p95']:.1f}, max {s['max']:.1f}")
    out.append("")
    if doc["findings"]:
        out.append("findings:")
        for f in doc["findings"]:
            eps = f.get("episodes") or []
            state = "until the end" if f["cleared_at"] is None else "then cleared"
            if len(eps) > 1:
                state = f"{len(eps)} episodes, " + state
            out.append(f"  {f['severity']:<8} {human_duration(f['duration_s']):>7} ({state})  {f['message']}")
            for ep in eps:
                for ch in ep.get("changes", []):
                    what = (f"{ch['old_severity']} → {ch['severity']}" if ch["old_severity"] != ch["severity"]
                            else f"{ch['old_variant'] or '-'} → {ch['variant'] or '-'}")
                    out.append(f"  {'':<8} {'':>7}   at +{human_duration(ch['t'] - doc['start'])}: {what}")
    else:
        out.append("findings: none")
    if doc["markers"]:
        out.append("markers: " + "; ".join(f"+{human_duration(m['t'] - doc['start'])} {m['text']}"
                                          for m in doc["markers"][:20]))
    return "\n".join(out)


def run_summary(args: argparse.Namespace) -> int:
    doc = summarize(open_or_fail(args.file))
    print(json.dumps(doc, indent=2, ensure_ascii=False) if args.json else render_summary(doc))
    return 0


def _pct(a: float | None, b: float | None) -> str:
    if a is None or b is None:
        return ""
    if a == 0:
        return "" if b == 0 else "new"
    return f"{100 * (b - a) / abs(a):+.0f} %"


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
                         "change": _pct(ma, mb), "scale": m.scale, "digits": m.digits})
        la = max(ga["pcie_links_while_busy"], key=ga["pcie_links_while_busy"].get, default=None)
        lb = max(gb["pcie_links_while_busy"], key=gb["pcie_links_while_busy"].get, default=None)
        if la or lb:
            rows.append({"gpu": ga["index"], "metric": "pcie_link_busy", "label": "PCIe link busy", "a": la, "b": lb,
                         "change": "" if la == lb else f"{la} → {lb}"})
    eps = []
    for ea, eb in zip(a["endpoints"], b["endpoints"]):
        sa, sb = ea["stats"].get("gen_tokens_per_s"), eb["stats"].get("gen_tokens_per_s")
        ma, mb = (sa or {}).get("mean"), (sb or {}).get("mean")
        eps.append({"a": ma, "b": mb, "change": _pct(ma, mb), "url_a": ea["url"], "url_b": eb["url"]})
    fa = {f["id"] for f in a["findings"]}
    fb = {f["id"] for f in b["findings"]}
    return {"schema": "gpuscope.compare/1", "a": a["file"], "b": b["file"], "duration_s": [a["duration_s"],
            b["duration_s"]], "rows": rows, "endpoints_tok_s": eps,
            "findings_only_in_a": sorted(fa - fb), "findings_only_in_b": sorted(fb - fa),
            "gpu_count": [len(a["gpus"]), len(b["gpus"])]}


def run_compare(args: argparse.Namespace) -> int:
    a, b = summarize(open_or_fail(args.a)), summarize(open_or_fail(args.b))
    doc = compare_docs(a, b)
    if args.json:
        print(json.dumps(doc, indent=2, ensure_ascii=False))
        return 0
    print(f"A: {a['file']} ({a['host']}{', SIMULATED' if a['simulated'] else ''}, {human_duration(a['duration_s'])})")
    print(f"B: {b['file']} ({b['host']}{', SIMULATED' if b['simulated'] else ''}, {human_duration(b['duration_s'])})")
    if doc["gpu_count"][0] != doc["gpu_count"][1]:
        print(f"note: A has {doc['gpu_count'][0]} GPUs, B has {doc['gpu_count'][1]}; compared by index")
    for e in doc["endpoints_tok_s"]:
        print(f"tok/s (mean)         {_fmt(e['a'], 1, 1):>10} {_fmt(e['b'], 1, 1):>10}  {e['change']}")
    print(f"{'GPU':<4}{'metric (mean)':<18}{'A':>10}{'B':>10}  change")
    for r in doc["rows"]:
        if r["metric"] == "pcie_link_busy":
            print(f"{r['gpu']:<4}{r['label']:<18}{str(r['a'] or '–'):>10}{str(r['b'] or '–'):>10}  {r['change']}")
        else:
            print(f"{r['gpu']:<4}{r['label']:<18}{_fmt(r['a'], r['scale'], r['digits']):>10}"
                  f"{_fmt(r['b'], r['scale'], r['digits']):>10}  {r['change']}")
    if doc["findings_only_in_a"]:
        print("findings only in A: " + ", ".join(doc["findings_only_in_a"]))
    if doc["findings_only_in_b"]:
        print("findings only in B: " + ", ".join(doc["findings_only_in_b"]))
    return 0


def run_export(args: argparse.Namespace) -> int:

    rec = open_or_fail(args.file)
    out = args.csv or args.parquet
    columns = catalogue.export_columns()
    rows = export_rows(rec.frames())
    n = 0
    try:
        if args.csv:
            f = sys.stdout if out == "-" else open(out, "w", newline="")  # noqa: SIM115
            try:
                w = csv.writer(f)
                w.writerow(columns)
                for row in rows:
                    w.writerow(["" if v is None else v for v in row])
                    n += 1
            finally:
                if f is not sys.stdout:
                    f.close()
        else:
            try:
                import pyarrow as pa
                import pyarrow.parquet as pq
            except ImportError:
                raise GpuscopeError("--parquet needs pyarrow: pip install 'gpuscope[parquet]'") from None
            data = list(rows)
            n = len(data)
            table = pa.table({c: [r[k] for r in data] for k, c in enumerate(columns)})
            pq.write_table(table, out)
    except OSError as e:
        raise GpuscopeError(f"cannot write {out}: {e.strerror or e}") from None
    if out != "-":
        sys.stderr.write(f"gpuscope: wrote {n} rows ({len(rec.inventory.devices)} GPUs × {rec.n_frames} frames) "
                         f"to {out} ({os.path.getsize(out)} bytes)\n")
    return 0
