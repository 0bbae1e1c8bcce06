"""Memory across host visits: open a remote host's full view (REMOTE) and close it, again and again.

    python benchmarks/bench_fleet_visits.py [--visits 40] [--frames 30]

In one process, as ``gpuscope --broker URL`` does between the fleet screen and a host: a Subscriber
(fed by hand with a simulated ``h200-nvswitch-8`` host's inventory and frames, labelled simulated; no
broker) watches the host, a Session and the REMOTE app (headless Textual, 160×50) are built, fed
``--frames`` frames through the RemoteFeeder, closed, unwatched and collected. Prints the process's
RSS after visits 1, 5, 10, 20, … and the growth per visit over the second half (flat: ≈ 0).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import write_json  # noqa: E402


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        return [int(line.split()[1]) for line in f if line.startswith("VmRSS")][0] / 1024


async def visit(sub: object, host: str, frames: list[bytes], interval_s: float) -> None:
    from gpuscope.core.session import Session
    from gpuscope.tui.app import GpuscopeApp
    from gpuscope.tui.fleet import RemoteFeeder

    sub.watch(host)  # type: ignore[attr-defined]
    try:
        inv = sub.wait_inventory(host, 1.0)  # type: ignore[attr-defined]
        session = Session(inv, interval_s=interval_s)
        app = GpuscopeApp(session, None, label="REMOTE", interval_s=interval_s)
        feeder = RemoteFeeder(sub, host, session, app.notify_update)  # type: ignore[arg-type]
        app.feeder = feeder
        async with app.run_test(size=(160, 50)) as pilot:
            for p in frames:
                sub.handle(f"gpuscope/v1/{host}/frame", p)  # type: ignore[attr-defined]
                await pilot.pause(0.01)
            await pilot.pause(0.1)
        feeder.stop()
    finally:
        sub.unwatch(host)  # type: ignore[attr-defined]
    gc.collect()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--visits", type=int, default=40)
    ap.add_argument("--frames", type=int, default=30)
    ap.add_argument("--json", metavar="FILE")
    a = ap.parse_args(argv)
    from gpuscope.core.codec import frame_to_dict, inventory_to_dict
    from gpuscope.sources.live import open_source
    from gpuscope.sources.mqtt import Subscriber, parse_broker

    src = open_source("h200-nvswitch-8", virtual_at=30.0, pcie_block_s=0.0)
    host = "sim-h200"
    frames = []
    for k in range(a.frames):
        src.nvml.clock.now = 31 + k
        frames.append(json.dumps(frame_to_dict(src.sample())).encode())
    sub = Subscriber(parse_broker("mqtt://127.0.0.1:1", env={}))  # fed by hand
    sub.handle(f"gpuscope/v1/{host}/status", b'{"state": "online", "summary": 1}')
    sub.handle(f"gpuscope/v1/{host}/inventory", json.dumps(inventory_to_dict(src.inventory)).encode())
    rss = []
    for _ in range(a.visits):
        asyncio.run(visit(sub, host, frames, 1.0))
        rss.append(rss_mb())
    half = len(rss) // 2
    per = (rss[-1] - rss[half - 1]) / (len(rss) - half) if len(rss) > 1 else 0.0
    marks = [k for k in (1, 5, 10, 20, 30, 40, 60, 80, 100) if k <= len(rss)]
    print(f"REMOTE view opened and closed {a.visits}× ({a.frames} simulated 8-GPU frames each), RSS after visit:")
    print("  " + "  ".join(f"#{k}: {rss[k - 1]:.1f} MB" for k in marks))
    print(f"  growth over the second half: {per * 1024:+.0f} KB per visit")
    write_json(a.json, {"rss_mb": rss, "kb_per_visit_second_half": per * 1024})
    return 0


if __name__ == "__main__":
    sys.exit(main())
