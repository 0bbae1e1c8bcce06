"""Many agents through one local Mosquitto: does the fleet viewer keep up?

    python benchmarks/bench_fleet.py [--agents 200] [--gpus 8] [--seconds 60]

Starts a Mosquitto on a free port, a viewer (gpuscope's Subscriber, in its own process, the part of
the fleet view that receives and decodes) and N simulated agents in one publisher process, each
publishing an 8-GPU frame (simulated `h200-nvswitch-8` readings, labelled simulated) every second.
These agents publish frames only, as agents before the summary stream did: the viewer
shows them by decoding at most one frame per host per 5 s. Reports the viewer's CPU share of one
core, its memory at the start and end, and how many hosts have a row. The summary stream's own
benchmark, with the fleet screen: bench_fleet_summary.py.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import start_mosquitto, write_json  # noqa: E402

VIEWER = r"""
import json, sys, time, resource
from gpuscope.sources.mqtt import Subscriber, parse_broker
sub = Subscriber(parse_broker(sys.argv[1], env={})).start()
seconds = float(sys.argv[2])
while not sub.connected: time.sleep(0.1)
print("ready", flush=True)
t0, c0 = time.monotonic(), time.process_time()
rss0 = None
samples = []
while time.monotonic() - t0 < seconds:
    time.sleep(1)
    with open("/proc/self/status") as f:
        rss = [int(l.split()[1]) for l in f if l.startswith("VmRSS")][0] / 1024
    rss0 = rss0 or rss
    samples.append(rss)
cpu = (time.process_time() - c0) / (time.monotonic() - t0)
frames = sum(1 for h in sub.snapshot() if h.summary is not None)  # hosts with a fleet row (from their frames)
print(json.dumps({"cpu_pct": 100 * cpu, "frames": frames, "hosts": len(sub.hosts), "dropped": sub.dropped,
                  "rss_start_mb": samples[0], "rss_end_mb": samples[-1]}), flush=True)
"""

PUBLISHER = r"""
import asyncio, json, sys, time, dataclasses
import aiomqtt
from gpuscope.sources.live import open_source
from gpuscope.core.codec import frame_to_dict, inventory_to_dict
port, n, gpus, seconds = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
src = open_source("h200-nvswitch-8", virtual_at=30.0, pcie_block_s=0.0)
base = src.sample(); src.nvml.clock.now = 31; base = src.sample()
inv = inventory_to_dict(dataclasses.replace(src.inventory, devices=src.inventory.devices[:gpus]))
async def agent(k, counter):
    host = f"sim-agent-{k:03d}"
    async with aiomqtt.Client("127.0.0.1", port, identifier=host) as c:
        await c.publish(f"gpuscope/v1/{host}/inventory", json.dumps({**inv, "host": host}).encode(), retain=True)
        await c.publish(f"gpuscope/v1/{host}/status", b'{"state": "online"}', retain=True)
        t_end = time.monotonic() + seconds
        nxt = time.monotonic() + (k % 100) / 100
        while time.monotonic() < t_end:
            await asyncio.sleep(max(0, nxt - time.monotonic()))
            nxt += 1.0
            f = dataclasses.replace(base, t=time.time(), gpus=base.gpus[:gpus])
            await c.publish(f"gpuscope/v1/{host}/frame", json.dumps(frame_to_dict(f)).encode())
            counter[0] += 1
async def main():
    counter = [0]
    await asyncio.gather(*(agent(k, counter) for k in range(n)))
    print(json.dumps({"published": counter[0]}), flush=True)
asyncio.run(main())
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--agents", type=int, default=200)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--json", metavar="FILE")
    a = ap.parse_args(argv)
    broker, port, _d = start_mosquitto()
    viewer = subprocess.Popen([sys.executable, "-c", VIEWER, f"mqtt://127.0.0.1:{port}", str(a.seconds)],
                              stdout=subprocess.PIPE, text=True)
    viewer.stdout.readline()
    pub = subprocess.Popen([sys.executable, "-c", PUBLISHER, str(port), str(a.agents), str(a.gpus),
                            str(a.seconds + 3)], stdout=subprocess.PIPE, text=True)
    v = json.loads(viewer.stdout.readline())
    p = json.loads(pub.stdout.readline())
    broker.terminate()
    rows = {**v, **p, "agents": a.agents, "gpus": a.gpus, "seconds": a.seconds,
            "frames_per_s_decoded": v["frames"] / a.seconds}
    print(f"{a.agents} agents × {a.gpus} GPUs at 1 Hz for {a.seconds:.0f} s through one Mosquitto")
    print(f"  viewer CPU            {v['cpu_pct']:.1f} % of one core (target < 25 %)")
    print(f"  hosts with a row      {v['frames']} of {a.agents}; published {p['published']} frames (older agents: "
          f"no summary stream, so the viewer decodes at most one frame per host per 5 s)")
    print(f"  hosts seen            {v['hosts']}, bad messages {v['dropped']}")
    print(f"  viewer memory         {v['rss_start_mb']:.0f} MB → {v['rss_end_mb']:.0f} MB")
    write_json(a.json, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
