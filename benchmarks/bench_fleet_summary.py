"""The fleet screen at 50 … 10,000 hosts on the summary stream: CPU, publish → screen, key → screen.

    python benchmarks/bench_fleet_summary.py [--hosts 50,200,1000,2000,10000] [--seconds 30] [--json FILE]

For each fleet size it starts a Mosquitto on a free port, one publisher process that impersonates N
agents' summary streams, and the fleet viewer (gpuscope's Subscriber + FleetApp, headless Textual via
``App.run_test``, 160×50) in its own process:

* the publisher publishes each host's retained status (with the summary mark) and retained summary,
  then a new summary per host every 5 s (the agents' period; staggered) with ``t`` = publish time and
  the next ``seq``; 1 % of hosts carry a critical finding, 5 % a warning. Payloads are real summaries
  (``core.summary.summarise`` of a simulated ``h200-nvswitch-8`` frame, labelled simulated). One MQTT
  connection publishes for all N hosts (N connections with last wills would make the *publisher* the
  bottleneck on this 2-core machine; the viewer's work is the same: one message per host per 5 s).
* the probe host ``0-probe`` (critical, so it is the first row) publishes every 2 s a finding whose text
  carries its publish time; the viewer notes when that text is first in the table's rendered rows:
  publish → on screen.
* the viewer sends a down/up key every 0.5 s through the driver (as a terminal's key arrives) and times
  it to the first paint of the screen after the table moved its highlight: key → screen.

Reports per size: the viewer's CPU (% of one core: process time / wall, MQTT thread and Textual
together), publish → screen (median, max), key → screen (median, p95), what was dropped (the status
line's "behind" text), the viewer's memory, and Mosquitto's CPU. Goals: at 2,000 hosts
≤ 30 % of a core, publish → screen ≤ 2 s, key → screen ≤ 100 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import start_mosquitto, write_json  # noqa: E402

VIEWER = r"""
import asyncio, json, sys, time
from textual import events
from gpuscope.sources.mqtt import Subscriber, parse_broker
from gpuscope.tui.fleet_app import FleetApp, status_line
from gpuscope.widgets.fleet_table import FleetTable

url, n, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
cfg = parse_broker(url, env={})
sub = Subscriber(cfg).start()

def rss():
    with open("/proc/self/status") as f:
        return [int(l.split()[1]) for l in f if l.startswith("VmRSS")][0] / 1024

async def main():
    app = FleetApp(sub, cfg)
    seen_probe = {}
    lat = []
    orig = app.refresh_fleet
    def refresh():
        orig()
        table = app.query_one(FleetTable)
        text = table.plain()  # the lines the table shows now
        now = time.time()
        i = text.find("probe@")
        if i >= 0:
            stamp = text[i + 6:i + 23].split()[0]
            if stamp not in seen_probe:
                seen_probe[stamp] = now
                if warm[0]:
                    lat.append(now - float(stamp))
    app.refresh_fleet = refresh
    painted = []
    show = app._display
    def display(screen, renderable):  # the compositor's update for the terminal: "on screen"
        if renderable is not None:
            painted.append(time.perf_counter())
            del painted[:-50]
        return show(screen, renderable)
    app._display = display
    warm = [False]
    keys = []
    async with app.run_test(size=(160, 50)) as pilot:
        t_load = time.monotonic()
        while len(sub.hosts) < n and time.monotonic() - t_load < 120:
            await asyncio.sleep(0.2)
        load_s = time.monotonic() - t_load
        await asyncio.sleep(3)  # the retained burst settles
        warm[0] = True
        table = app.query_one(FleetTable)
        drawn = []  # when the table asked for the moved highlight to be painted (polling for the change would
        # miss a paint that came before the poll and wait for the next one, up to the 1 s refresh)
        move = table.move
        def timed_move(d):
            move(d)
            drawn.append(time.perf_counter())
        table.move = timed_move
        t0, c0, rss0 = time.monotonic(), time.process_time(), rss()
        k = 0
        while time.monotonic() - t0 < seconds:
            await asyncio.sleep(0.5)
            before = table.selected
            key = "down" if (k // 10) % 2 == 0 else "up"
            k += 1
            s = time.perf_counter()
            ev = events.Key(key, None)  # as a terminal's key press arrives: through the driver
            ev.set_sender(app)
            app._driver.send_message(ev)
            drawn.clear()
            while time.perf_counter() - s < 5:
                await asyncio.sleep(0.001)
                moved = drawn[0] if drawn and table.selected != before else None
                if moved is not None and painted and painted[-1] >= moved:
                    keys.append(min(p for p in painted if p >= moved) - s)  # the first paint with it
                    break
        cpu = (time.process_time() - c0) / (time.monotonic() - t0)
        h = sub.health()
        print(json.dumps({"cpu_pct": 100 * cpu, "hosts": len(sub.hosts), "load_s": load_s,
                          "probe_s": lat, "key_s": keys, "bad": h.bad, "lost": h.lost,
                          "queue_dropped": h.queue_dropped, "broker_dropped": h.broker_dropped,
                          "behind_s": h.behind_s, "line": h.line(), "status": status_line(sub, cfg, len(sub.hosts)),
                          "rss_start_mb": rss0, "rss_end_mb": rss()}), flush=True)
    sub.stop()

asyncio.run(main())
"""

PUBLISHER = r"""
import asyncio, json, random, sys, time, dataclasses
import aiomqtt
from gpuscope.sources.live import open_source
from gpuscope.core.summary import SummaryFinding, summarise, summary_to_dict
port, n, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
src = open_source("h200-nvswitch-8", virtual_at=30.0, pcie_block_s=0.0)
src.sample(); src.nvml.clock.now = 31
base = summarise(src.inventory, src.sample(), seq=0, interval_s=1.0)
rnd = random.Random(7)
hosts = [f"sim-host-{k:05d}" for k in range(n - 1)]  # and the probe: n in all (the viewer's cap is 10,000)
crit = SummaryFinding("gpu_lost:GPU3", "critical", time.time() - 600, "GPU3 fell off the bus (simulated)")
warn = SummaryFinding("pcie_below_max:GPU5", "warning", time.time() - 300,
                      "GPU5 PCIe Gen4×16 of Gen5×16 while busy (simulated)")
kinds = {h: (crit,) if k % 100 == 0 else (warn,) if k % 20 == 1 else () for k, h in enumerate(hosts)}
seq = {h: 0 for h in hosts}
def payload(h, findings=None):
    seq[h] += 1
    s = dataclasses.replace(base, host=h, t=time.time(), seq=seq[h], util_pct=rnd.uniform(20, 95),
                            power_w=rnd.uniform(2000, 5600), findings=kinds.get(h, ()) if findings is None else findings)
    return json.dumps(summary_to_dict(s), separators=(",", ":")).encode()
async def main():
    sent = 0
    async with aiomqtt.Client("127.0.0.1", port, identifier="bench-agents", max_queued_outgoing_messages=0) as c:
        for h in hosts + ["0-probe"]:
            await c.publish(f"gpuscope/v1/{h}/status", b'{"state": "online", "summary": 1}', retain=True)
        for h in hosts:
            await c.publish(f"gpuscope/v1/{h}/summary", payload(h), retain=True)
        print("ready", flush=True)
        t0 = time.monotonic()
        nxt_probe = t0
        k = 0
        per_tick = max(1, n // 50)  # all N hosts every 5 s, in 50 slices of 0.1 s
        tick = t0
        while time.monotonic() - t0 < seconds:
            now = time.monotonic()
            if now >= nxt_probe:
                f = SummaryFinding("probe", "critical", time.time(), f"probe@{time.time():.3f} (simulated)")
                seq.setdefault("0-probe", 0)
                await c.publish("gpuscope/v1/0-probe/summary", payload("0-probe", (f,)), retain=True)
                nxt_probe += 2.0
            for _ in range(per_tick):
                h = hosts[k % len(hosts)]
                k += 1
                await c.publish(f"gpuscope/v1/{h}/summary", payload(h), retain=True)
                sent += 1
            tick += 0.1
            await asyncio.sleep(max(0, tick - time.monotonic()))
    print(json.dumps({"published": sent, "payload_bytes": len(payload(hosts[0]))}), flush=True)
asyncio.run(main())
"""


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


def run_one(n: int, seconds: float) -> dict[str, object]:
    broker, port, d = start_mosquitto("sys_interval 2\n")
    try:
        pub = subprocess.Popen([sys.executable, "-c", PUBLISHER, str(port), str(n), str(seconds + 140)],
                               stdout=subprocess.PIPE, text=True)
        assert pub.stdout is not None
        pub.stdout.readline()  # the retained state is on the broker
        b0 = _cpu_s(broker.pid)
        viewer = subprocess.Popen([sys.executable, "-c", VIEWER, f"mqtt://127.0.0.1:{port}", str(n), str(seconds)],
                                  stdout=subprocess.PIPE, text=True)
        assert viewer.stdout is not None
        t0 = time.monotonic()
        v = json.loads(viewer.stdout.readline())
        broker_pct = 100 * (_cpu_s(broker.pid) - b0) / (time.monotonic() - t0)
        viewer.wait(30)
        pub.terminate()
        pub.wait(10)
    finally:
        broker.terminate()
        broker.wait(10)
        shutil.rmtree(d, ignore_errors=True)
    probe, keys = sorted(v["probe_s"]), sorted(v["key_s"])
    return {**v, "hosts": n, "hosts_seen": v["hosts"], "broker_cpu_pct": broker_pct,
            "probe_median_s": statistics.median(probe) if probe else None, "probe_max_s": max(probe) if probe else None,
            "key_median_ms": 1000 * statistics.median(keys) if keys else None,
            "key_p95_ms": 1000 * keys[int(0.95 * (len(keys) - 1))] if keys else None}


def _f(x: object, fmt: str) -> str:
    return "–" if x is None else format(x, fmt)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", default="50,200,1000,2000,10000")
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--json", metavar="FILE")
    a = ap.parse_args(argv)
    rows = []
    for n in [int(x) for x in a.hosts.split(",")]:
        r = run_one(n, a.seconds)
        rows.append(r)
        print(f"  {n} hosts: {json.dumps({k: r[k] for k in ('cpu_pct', 'probe_median_s', 'key_median_ms', 'line')})}",
              file=sys.stderr, flush=True)
    cols = [str(r["hosts"]) for r in rows]
    print(f"Fleet screen on the summary stream: N simulated hosts, one summary per host every 5 s, one Mosquitto, "
          f"{a.seconds:.0f} s per size, headless Textual 160×50")
    print("| hosts | " + " | ".join(f"{int(c):,}" for c in cols) + " |")
    print("| --- |" + " --- |" * len(cols))
    table = [
        ("fleet viewer CPU (one core)", [f"{_f(r['cpu_pct'], '.1f')} %" for r in rows]),
        ("publish → on screen (median / max)",
         [f"{_f(r['probe_median_s'], '.2f')} / {_f(r['probe_max_s'], '.2f')} s" for r in rows]),
        ("key → screen (median / p95)",
         [f"{_f(r['key_median_ms'], '.0f')} / {_f(r['key_p95_ms'], '.0f')} ms" for r in rows]),
        ("dropped (status line)", [str(r["line"] or "none") for r in rows]),
        ("viewer memory", [f"{r['rss_start_mb']:.0f} → {r['rss_end_mb']:.0f} MB" for r in rows]),
        ("retained load (all hosts shown)", [f"{r['load_s']:.1f} s" for r in rows]),
        ("broker CPU", [f"{r['broker_cpu_pct']:.1f} %" for r in rows]),
    ]
    for name, vals in table:
        print(f"| {name} | " + " | ".join(vals) + " |")
    write_json(a.json, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
