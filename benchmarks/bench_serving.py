"""Serving metrics under restarts and hostile endpoints; prints a table.

    python benchmarks/bench_serving.py [--duration 20] [--json FILE]

1. A restart that once gave wrong rates: 250 tok/s for t=0-10, failed() for t=11-61, the counter restarted
   at t=54; the rate error at each scrape after recovery (t=62 on).
2. The real vLLM 0.32 capture: exact TTFT/ITL means against the bucket-interpolated p50 the TUI
   used to show, and the bucket the p50 lies in.
3. A 1 Hz `gpuscope record` beside a 5,000-series endpoint and a slow-drip endpoint (real local HTTP
   servers, the same as tests/e2e/test_serving_hostile.py): frames kept of those expected.
4. Peak RSS of a poller process fed a 200 MB /metrics body.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "e2e"))
sys.path.insert(0, os.path.join(HERE, "..", "tests"))  # helpers.py, which the hostile servers use
from common import write_json  # noqa: E402
from test_serving_hostile import drip_server, huge_body_server, many_series_server  # noqa: E402

from gpuscope.sources.endpoint import (  # noqa: E402
    EndpointTracker,
    buckets,
    histogram_quantile,
    parse_metrics,
    quantile_with_bounds,
)

CAPTURE = os.path.join(HERE, "..", "tests", "fixtures", "inference", "vllm_0.32.0_v1_cpu_load.txt")


def restart_errors() -> list[tuple[int, float | None]]:
    def text(n: float, start: float) -> str:
        return (f"process_start_time_seconds {start}\n"
                f'vllm:generation_tokens_total{{model_name="m"}} {n}\n')

    tr = EndpointTracker(url="http://x", window_s=10.0)
    for t in range(0, 11):
        tr.feed(t, text(250.0 * t, 1000.0))
    for t in range(11, 62):
        tr.failed(t, "connection refused")
    out = []
    for t in range(62, 74):
        tr.feed(t, text(250.0 * (t - 54), 1054.0))
        r = tr.reading().gen_tokens_per_s
        out.append((t, None if r is None else 100.0 * (r - 250.0) / 250.0))
    return out


def capture_latency() -> list[dict[str, object]]:
    s = parse_metrics(open(CAPTURE).read())
    rows = []
    for key, name in (("ttft", "vllm:time_to_first_token_seconds"), ("itl", "vllm:inter_token_latency_seconds")):
        h = buckets(s, [name])
        assert h is not None
        b, total, n = h
        mean = total / n
        p50 = histogram_quantile(0.5, b)
        _v, bounds = quantile_with_bounds(0.5, b)
        rows.append({"metric": key, "mean_ms": 1000 * mean, "interp_p50_ms": 1000 * (p50 or 0),
                     "p50_vs_mean_pct": 100 * ((p50 or 0) - mean) / mean,
                     "p50_bucket_ms": [1000 * x for x in (bounds or ())]})
    return rows


def frames_beside_hostile(duration: int) -> tuple[int, int]:
    big, drip = many_series_server(), drip_server()
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.jsonl.gz")
        try:
            subprocess.run([sys.executable, "-m", "gpuscope", "record", "-o", out, "--simulate", "mixed-4",
                            "--interval", "1", "--duration", str(duration), "--endpoint", big.url,
                            "--endpoint", drip.url], capture_output=True, text=True, timeout=duration + 60, check=True)
        finally:
            big.close()
            drip.close()
        from gpuscope.sources.recording import open_recording

        return open_recording(out).n_frames, duration


def rss_for_huge_body(mb: int = 200) -> int:
    srv = huge_body_server(mb)
    script = textwrap.dedent(f"""
        import time
        from gpuscope.sources.endpoint import EndpointPoller
        def hwm():  # this process's peak RSS in MB (VmHWM: unlike ru_maxrss, not inherited from the forking parent)
            line = next(x for x in open("/proc/self/status") if x.startswith("VmHWM:"))
            return int(line.split()[1]) // 1024
        p = EndpointPoller([{srv.url!r}], interval_s=0.3, timeout_s=20).start()
        end = time.time() + 30
        while time.time() < end and p.trackers[0].garbage < 3:
            time.sleep(0.05)
        p.stop()
        print(hwm())
    """)
    try:
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    finally:
        srv.close()
    return int(out.stdout.split()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--duration", type=int, default=20)
    ap.add_argument("--json", metavar="FILE")
    a = ap.parse_args()
    res: dict[str, object] = {}
    print("restart at t=54 after an outage t=11-61 (truth 250 tok/s)")
    print(f"{'t':>4} {'error %':>9}")
    errs = restart_errors()
    for t, e in errs:
        print(f"{t:>4} {'–' if e is None else f'{e:+.2f}':>9}")
    res["restart_errors_pct"] = errs
    print("\nvLLM 0.32 capture: exact mean vs interpolated p50")
    print(f"{'metric':<6}{'mean ms':>10}{'interp p50':>12}{'p50-mean':>10}  p50 bucket")
    lat = capture_latency()
    for r in lat:
        bucket = "–".join(f"{x:g}" for x in r["p50_bucket_ms"])  # type: ignore[attr-defined]
        print(f"{r['metric']:<6}{r['mean_ms']:>10.1f}{r['interp_p50_ms']:>12.1f}{r['p50_vs_mean_pct']:>+9.0f}%  "
              f"{bucket} ms")
    res["capture_latency"] = lat
    t0 = time.time()
    kept, expected = frames_beside_hostile(a.duration)
    print(f"\n1 Hz record beside a 5,000-series and a slow-drip endpoint: {kept} frames of {expected} expected "
          f"({100 * kept / expected:.0f} %), {time.time() - t0:.0f} s")
    res["frames_kept"] = [kept, expected]
    rss = rss_for_huge_body()
    print(f"poller peak RSS with a 200 MB /metrics body: {rss} MB (refused at 8 MB)")
    res["rss_mb_200mb_body"] = rss
    write_json(a.json, res)


if __name__ == "__main__":
    main()
