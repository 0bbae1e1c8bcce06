"""What a Prometheus scrape of ``gpuscope agent --prometheus`` costs, for 8 GPUs and 2 endpoints.

    python benchmarks/bench_prometheus.py [--scrapes 300] [--seconds 3] [--json FILE]

The exporter runs in a child process (8 simulated H200s of the h200-nvswitch-8 scenario with their
findings, plus 2 inference endpoints of 2 models each, readings made up for the benchmark: all labelled
simulated); the child's CPU is read from /proc, so the client's own CPU is not counted. Cases:

* **render every scrape**: a new frame before each scrape (Prometheus scraping less often than the agent
  ticks: every scrape renders the text once) — the worst case;
* **cached**: several scrapes of one frame (the bytes rendered once are served again);
* **concurrent**: 16 client threads scraping as fast as they can, frames every second.

Also the tick side: the hand-over (``update``) per tick, in µs. Target: ≤ 2 ms CPU per scrape.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import replace

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import write_json  # noqa: E402

TICKS_PER_S = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def fixture():  # noqa: ANN201
    """(inventory, last frame with 2 endpoints × 2 models, active findings), from a simulated 8-GPU machine."""
    from gpuscope.core.model import EndpointReading
    from gpuscope.core.session import Session
    from gpuscope.sources.live import open_source

    src = open_source("h200-nvswitch-8", virtual_at=30.0, pcie_block_s=0.0, wall0=1_800_000_000.0)
    session = Session(src.inventory, interval_s=1.0, history_s=60)
    for k in range(8):
        src.nvml.clock.now = 30.0 + k
        session.ingest(src.sample())
    src.close()
    eps = tuple(EndpointReading(url=url, kind="vllm", model=model, gen_tokens_per_s=1234.5, prompt_tokens_per_s=4567.8,
                                requests_running=24, requests_waiting=3, kv_cache_pct=61.5, ttft_mean_s=0.21,
                                ttft_p50_s=0.18, ttft_p95_s=0.6, itl_mean_s=0.021, itl_p50_s=0.019, itl_p95_s=0.04)
                for url in ("http://127.0.0.1:8000", "http://127.0.0.1:8001")
                for model in ("meta-llama/Llama-3.1-70B-Instruct", "Qwen/Qwen2.5-7B-Instruct"))
    frame = replace(session.last_frame, endpoints=eps)  # type: ignore[arg-type]
    return src.inventory, frame, list(session.findings.active)


def child(mode: str) -> int:
    """Serve the fixture; ``fresh``: a new state before every scrape (a thread swaps it every 0.2 ms)."""
    from gpuscope.outputs.prometheus import PrometheusExporter, SamplerHealth

    inv, frame, findings = fixture()
    ex = PrometheusExporter(("127.0.0.1", 0), inv).start()
    ex.update(frame, findings, SamplerHealth(ticks=1))
    stop = threading.Event()
    period = 0.0002 if mode == "fresh" else 1.0

    def ticker() -> None:
        n = 1
        while not stop.wait(period):
            n += 1
            ex.update(frame, findings, SamplerHealth(ticks=n))

    threading.Thread(target=ticker, daemon=True).start()
    print(ex.url, flush=True)
    sys.stdin.read()  # until the parent closes it
    stop.set()
    print(ex.renders, ex.scrapes, flush=True)
    ex.stop()
    return 0


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS_PER_S


def scrape(url: str) -> int:
    with urllib.request.urlopen(url, timeout=10) as r:
        return len(r.read())


def measure(mode: str, scrapes: int, seconds: float) -> dict[str, float]:
    p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child", mode], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdin is not None
    url = p.stdout.readline().strip()
    size = scrape(url)
    time.sleep(0.5)
    # the child's CPU with nobody scraping (its ticker), over a measured second
    c0, t0 = cpu_s(p.pid), time.monotonic()
    time.sleep(1.0)
    idle_per_s = (cpu_s(p.pid) - c0) / (time.monotonic() - t0)
    out: dict[str, float] = {"bytes": size}
    c0, t0 = cpu_s(p.pid), time.monotonic()
    for _ in range(scrapes):
        scrape(url)
    wall = time.monotonic() - t0
    used = cpu_s(p.pid) - c0 - idle_per_s * wall
    out["cpu_ms_per_scrape"] = used / scrapes * 1000
    out["idle_cpu_pct"] = idle_per_s * 100
    if mode == "cached":
        count = [0]
        stop = threading.Event()

        def worker() -> None:
            while not stop.is_set():
                scrape(url)
                count[0] += 1

        threads = [threading.Thread(target=worker) for _ in range(16)]
        c0, t0 = cpu_s(p.pid), time.monotonic()
        for t in threads:
            t.start()
        time.sleep(seconds)
        stop.set()
        for t in threads:
            t.join()
        wall = time.monotonic() - t0
        out["concurrent_scrapes_per_s"] = count[0] / wall
        out["concurrent_cpu_ms_per_scrape"] = (cpu_s(p.pid) - c0 - idle_per_s * wall) / max(count[0], 1) * 1000
    p.stdin.close()
    renders, served = (int(x) for x in p.stdout.readline().split())
    p.wait(10)
    out["renders"], out["served"] = renders, served
    return out


def in_process(n: int) -> dict[str, float]:
    """Render cost and the tick-side hand-over, measured with process CPU time in this process."""
    from gpuscope.outputs.prometheus import PrometheusExporter, Renderer, SamplerHealth

    inv, frame, findings = fixture()
    r = Renderer(inv)
    h = SamplerHealth(ticks=1)
    r.render(frame, findings, h)
    c0 = time.process_time()
    for _ in range(n):
        r.render(frame, findings, h)
    render_ms = (time.process_time() - c0) / n * 1000
    ex = PrometheusExporter(("127.0.0.1", 0), inv)
    c0 = time.process_time()
    for _ in range(n * 100):
        ex.update(frame, findings, h)
    update_us = (time.process_time() - c0) / (n * 100) * 1e6
    lines = sum(1 for x in r.render(frame, findings, h).splitlines() if not x.startswith("#"))
    return {"render_ms": render_ms, "update_us": update_us, "samples": lines}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", choices=("fresh", "cached"), help=argparse.SUPPRESS)
    ap.add_argument("--scrapes", type=int, default=300)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--json", metavar="FILE")
    a = ap.parse_args(argv)
    if a.child:
        return child(a.child)
    ip = in_process(200)
    fresh = measure("fresh", a.scrapes, a.seconds)
    cached = measure("cached", a.scrapes, a.seconds)
    rows = [
        ("series in one scrape (8 GPUs, 2 endpoints × 2 models)", f"{ip['samples']:.0f} samples, "
         f"{cached['bytes'] / 1024:.0f} KiB", ""),
        ("render the text (in process)", f"{ip['render_ms']:.2f} ms CPU", ""),
        ("tick-side hand-over (update)", f"{ip['update_us']:.2f} µs CPU", "never delays a tick"),
        ("scrape, a new frame every scrape (server CPU)", f"{fresh['cpu_ms_per_scrape']:.2f} ms CPU "
         f"({fresh['renders']:.0f} renders / {fresh['served']:.0f} scrapes)", "≤ 2 ms"),
        ("scrape, cached frame (server CPU)", f"{cached['cpu_ms_per_scrape']:.2f} ms CPU", "≤ 2 ms"),
        ("16 concurrent scrapers, frames at 1 Hz", f"{cached['concurrent_scrapes_per_s']:.0f} scrapes/s, "
         f"{cached['concurrent_cpu_ms_per_scrape']:.2f} ms CPU each", "many concurrent scrapes fine"),
    ]
    w1 = max(len(x[0]) for x in rows)
    w2 = max(len(x[1]) for x in rows)
    print(f"{'case':<{w1}}  {'result':<{w2}}  target")
    print("-" * (w1 + w2 + 24))
    for name, res, tgt in rows:
        print(f"{name:<{w1}}  {res:<{w2}}  {tgt}")
    print(f"(cores: {os.cpu_count()}; the client runs on the same machine; simulated GPUs and made-up endpoint readings)")
    write_json(a.json, {"in_process": ip, "fresh": fresh, "cached": cached})
    return 0


if __name__ == "__main__":
    sys.exit(main())
