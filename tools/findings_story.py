"""Findings over time: what the live engine showed vs what ``summary`` reports from the recording.

Runs a simulated scenario (virtual clock, 1 s steps) or a recording's frames (its own finding events
stripped, so today's engine decides) through a Session with a Recorder, then reads the recording back
through ``summary``. Prints the finding events, the live engine's findings at a few moments, and the
summary's findings, so before/after can be compared across gpuscope versions (it uses only
attributes that older versions have, falling back where newer ones are missing).

    python tools/findings_story.py a6000-tp2-pcie-gen1 --seconds 60
    python tools/findings_story.py --recording recordings/h200-2gpu-load-phases.jsonl.gz
"""

from __future__ import annotations

import argparse
import tempfile
from dataclasses import replace
from pathlib import Path

from gpuscope.core.session import Session
from gpuscope.core.stats import summarize
from gpuscope.sources.live import open_source
from gpuscope.sources.recording import Recorder, open_recording

WALL0 = 1_800_000_000.0


def _frames(args: argparse.Namespace):
    if args.recording:
        rec = open_recording(args.recording)
        inv = rec.inventory
        keep = [] if args.keep_events else ("finding_raised", "finding_changed", "finding_cleared")
        frames = [replace(f, events=tuple(e for e in f.events if e.kind not in keep)) for f in rec.frames()]
        return inv, frames
    src = open_source(args.scenario, virtual_at=0.0, pcie_block_s=0.0, wall0=WALL0)
    frames = []
    t = 0.0
    while t <= args.seconds + 1e-9:
        src.nvml.clock.now = t
        frames.append(src.sample())
        t += args.step
    return src.inventory, frames


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenario", nargs="?")
    ap.add_argument("--recording")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--step", type=float, default=1.0)
    ap.add_argument("--keep-events", action="store_true", help="keep the recording's own finding events")
    ap.add_argument("--moments", type=int, default=6, help="live snapshots to print")
    args = ap.parse_args()
    inv, frames = _frames(args)
    t0 = frames[0].t
    out = Path(tempfile.mkdtemp()) / "story.jsonl.gz"
    s = Session(inv, interval_s=args.step)
    s.start_recording(Recorder(out, inv, fsync=False))
    every = max(1, len(frames) // args.moments)
    live = []
    for k, f in enumerate(frames):
        f2 = s.ingest(f)
        for e in f2.events:
            if e.kind.startswith("finding_"):
                d = e.data
                extra = ""
                if e.kind == "finding_changed":
                    extra = f" {d.get('old_severity')}/{d.get('old_variant')} -> {d.get('severity')}/{d.get('variant')}"
                if e.kind == "finding_cleared":
                    extra = f" held_s={d.get('held_s')}"
                print(f"+{e.t - t0:6.1f}s {e.kind:<16} {d.get('severity'):<8} {d['id']:<28}{extra}  {e.text[:90]}")
        if k % every == every - 1 or k == len(frames) - 1:
            snap = []
            for fd in s.findings.active:
                since = getattr(fd, "since", None) or fd.started_at
                state = "clearing" if getattr(fd, "ended_at", None) is not None else "active"
                snap.append((fd.id, fd.severity, round(since - t0, 1), round(fd.started_at - t0, 1), state))
            live.append((f.t - t0, snap))
    s.stop_recording()
    print("\nlive engine at moments (id, severity, since +s, condition start +s, state):")
    for t, snap in live:
        print(f"  +{t:6.1f}s  {len(snap)} findings: " + "; ".join(f"{a} {b} since+{c} start+{d} {e}"
                                                               for a, b, c, d, e in snap))
    doc = summarize(open_recording(out))
    print(f"\nsummary ({doc['duration_s']:.0f} s, {doc['frames']} frames):")
    for f in doc["findings"]:
        eps = f.get("episodes")
        start = f.get("started_at", f.get("raised_at"))
        print(f"  {f['severity']:<8} {f['duration_s']:7.1f}s  from +{start - t0:6.1f}s  "
              f"{len(eps) if eps else 1} episode(s)  {f['id']}")
    print(f"\nstanding findings at the end: {len(s.findings.active)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
