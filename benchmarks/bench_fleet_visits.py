"""Memory across host visits: the fleet screen, open a host's full view (REMOTE), close it, again and again.

    python benchmarks/bench_fleet_visits.py [--visits 50] [--frames 30] [--json FILE]

In one process per mode, as ``gpuscope --broker URL`` does (tui/fleet.py ``run_fleet``): a Subscriber
(fed by hand with a simulated ``h200-nvswitch-8`` host's status, inventory and summary, labelled
simulated; no broker) backs the fleet screen (FleetApp, headless Textual 160×50), which opens the host
(enter); the host is watched, a Session and the REMOTE app are built and fed ``--frames`` frames through
the RemoteFeeder, closed and unwatched. Between apps:

* ``release`` (what run_fleet does): ``tui.fleet.release_closed_app`` — Textual's method lru_cache that
  keeps closed widgets' rendered lines is cleared, then ``gc.collect()``;
* ``gc only`` (before): ``gc.collect()`` alone.

Prints a table: RSS after visits 1, 10, 20, 50 (and 100, … when asked), growth per visit over the
second half, and live Textual StylesCache objects at the end (one per widget of the open app when
nothing is kept).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import write_json  # noqa: E402

HOST = "sim-h200"


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        return [int(line.split()[1]) for line in f if line.startswith("VmRSS")][0] / 1024


async def visit(sub: object, host: str, frames: list[bytes], interval_s: float, release: bool) -> None:
    """One round of run_fleet: the fleet screen until enter, then the host's REMOTE view with ``frames``."""
    from gpuscope.core.session import Session
    from gpuscope.tui.app import GpuscopeApp
    from gpuscope.tui.fleet import RemoteFeeder, release_closed_app
    from gpuscope.tui.fleet_app import FleetApp

    def after() -> None:
        release_closed_app() if release else gc.collect()

    fleet = FleetApp(sub, sub.cfg, selected=host)  # type: ignore[attr-defined]
    async with fleet.run_test(size=(160, 50)) as pilot:
        await pilot.pause()
        await pilot.press("enter")
    assert fleet.return_value == host
    del fleet
    after()
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
    del app, feeder, session
    after()


def one_mode(visits: int, frames_n: int, release: bool) -> dict[str, object]:
    """Run ``visits`` visits in this process; RSS (MB) after each, live StylesCache objects at the end."""
    from textual._styles_cache import StylesCache

    from gpuscope.core.codec import frame_to_dict, inventory_to_dict
    from gpuscope.core.summary import summarise, summary_to_dict
    from gpuscope.sources.live import open_source
    from gpuscope.sources.mqtt import Subscriber, parse_broker

    src = open_source("h200-nvswitch-8", virtual_at=30.0, pcie_block_s=0.0)
    frames = []
    for k in range(frames_n):
        src.nvml.clock.now = 31 + k
        frames.append(json.dumps(frame_to_dict(src.sample())).encode())
    sub = Subscriber(parse_broker("mqtt://127.0.0.1:1", env={}))  # fed by hand
    sub.handle(f"gpuscope/v1/{HOST}/status", b'{"state": "online", "summary": 1}')
    sub.handle(f"gpuscope/v1/{HOST}/inventory", json.dumps(inventory_to_dict(src.inventory)).encode())
    s = summarise(src.inventory, src.sample(), seq=1, interval_s=1.0)
    sub.handle(f"gpuscope/v1/{HOST}/summary", json.dumps(summary_to_dict(s)).encode())
    rss = []
    for _ in range(visits):
        asyncio.run(visit(sub, HOST, frames, 1.0, release))
        rss.append(rss_mb())
    live = sum(isinstance(o, StylesCache) for o in gc.get_objects())
    return {"rss_mb": rss, "styles_caches_live": live}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--visits", type=int, default=50)
    ap.add_argument("--frames", type=int, default=30)
    ap.add_argument("--modes", default="release,gc", help="release, gc (comma-separated)")
    ap.add_argument("--json", metavar="FILE")
    ap.add_argument("--child", choices=["release", "gc"], help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        print(json.dumps(one_mode(a.visits, a.frames, a.child == "release")))
        return 0
    results = {}
    for mode in a.modes.split(","):  # each in its own process: a clean RSS
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--visits", str(a.visits), "--frames",
                              str(a.frames), "--child", mode], check=True, capture_output=True, text=True).stdout
        results[mode] = json.loads(out.strip().splitlines()[-1])
    marks = [k for k in (1, 10, 20, 50, 100, 200) if k <= a.visits]
    names = {"release": "release_closed_app (run_fleet now)", "gc": "gc.collect only (before)"}
    print(f"Fleet screen → host's REMOTE view ({a.frames} simulated 8-GPU frames) → back, {a.visits}× in one "
          "process; RSS after visit N")
    print("| between apps | " + " | ".join(f"#{k}" for k in marks) + " | growth, 2nd half | StylesCache live |")
    print("| --- |" + " --- |" * (len(marks) + 2))
    for mode, r in results.items():
        rss = r["rss_mb"]
        half = len(rss) // 2
        per = (rss[-1] - rss[half - 1]) / (len(rss) - half) if len(rss) > 1 else 0.0
        r["kb_per_visit_second_half"] = per * 1024
        print(f"| {names[mode]} | " + " | ".join(f"{rss[k - 1]:.1f} MB" for k in marks)
              + f" | {per * 1024:+.0f} KB/visit | {r['styles_caches_live']} |")
    write_json(a.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
