"""Serving groups on a real GPU machine: a tiny vLLM-like server holds GPUs, and gpuscope finds its group.

How to run (on the GPU machine; python3 with torch (CUDA) and nvidia-ml-py; no network needed)::

    python3 -m pip install --no-deps --no-build-isolation .     # gpuscope from this checkout
    python3 tools/groups_check.py                               # one GPU: GPU0, TP=1
    python3 tools/groups_check.py --gpus 0,1 --nccl             # TP=2: a worker per GPU, NCCL all-reduce
    python3 tools/groups_check.py --gpus 0,1 --seconds 30 --port 8123

It starts a server process (this file with ``--serve``) that listens on 127.0.0.1 (``--port``, default: a
free one) and answers ``/metrics`` in vLLM's format (``vllm:generation_tokens_total`` counting the workers'
matmul steps as tokens, ``vllm:num_requests_running``, ``vllm:kv_cache_usage_perc``), with
``--tensor-parallel-size N`` on its command line as vLLM has it. It starts one worker process per GPU (its
children), each running a bf16 matmul loop on its GPU (and an NCCL all-reduce per step with ``--nccl``).
When NVML lists every worker, gpuscope's own code runs as it does live: the NVML source, the endpoint poller
on ``http://127.0.0.1:PORT/metrics`` and the group finder over /proc, for ``--seconds`` seconds; then it
prints what it found (the group's PIDs next to the real ones, GPUs, port, TP, path, tok/s, traffic, the
group_path finding if any) and stops the server (closing its stdin: the workers end with it).

Exit status: 0 when the group names the server's PID, its port and exactly its GPUs (and TP when given);
1 when it does not; 2 when the machine cannot run the check (no torch/CUDA, no GPUs, the server failed).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

MODEL = "groups-check"


# ------------------------------------------------------------------ the worker (one per GPU)
def worker(rank: int, world: int, gpu: int, counts: str, nccl: bool, master_port: int) -> int:
    for k, v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1")):
        os.environ.setdefault(k, v)  # NVLink multicast off (shared machines refuse it)
    import torch

    torch.cuda.set_device(gpu)
    dist = None
    if nccl and world > 1:
        import torch.distributed as dist

        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(master_port))
        dist.init_process_group("nccl", rank=rank, world_size=world)
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    grad = torch.randn(64 * 1024 * 1024 // 2, device="cuda", dtype=torch.bfloat16)  # 64 MiB all-reduced per step
    steps = 0
    path = Path(counts) / f"rank{rank}"
    stop = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    last = time.monotonic()
    while not stop.is_set():
        for _ in range(8):
            a = (a @ b).clamp_(-1, 1)
        if dist is not None:
            dist.all_reduce(grad)
        torch.cuda.synchronize()
        steps += 1
        if time.monotonic() - last > 0.2:
            path.write_text(str(steps))
            last = time.monotonic()
    if dist is not None:
        dist.destroy_process_group()
    return 0


# ------------------------------------------------------------------ the server (listens, starts workers)
def serve(port: int, gpus: list[int], tp: int, nccl: bool) -> int:
    counts = tempfile.mkdtemp(prefix="groups-check-")
    import socket

    with socket.socket() as s:  # a free port for NCCL's rendezvous
        s.bind(("127.0.0.1", 0))
        master_port = s.getsockname()[1]
    workers = [subprocess.Popen([sys.executable, __file__, "--worker", str(rank), "--world", str(len(gpus)),
                                 "--gpu", str(g), "--counts", counts, "--master-port", str(master_port)]
                                + (["--nccl"] if nccl else []), stdin=subprocess.PIPE)
               for rank, g in enumerate(gpus)]

    def tokens() -> int:
        total = 0
        for f in Path(counts).glob("rank*"):
            try:
                total += int(f.read_text() or 0)
            except (OSError, ValueError):
                pass
        return total

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404)
                return
            lab = f'model_name="{MODEL}",engine="0"'
            body = (
                "# HELP vllm:generation_tokens_total Number of generation tokens processed.\n"
                "# TYPE vllm:generation_tokens_total counter\n"
                f"vllm:generation_tokens_total{{{lab}}} {float(tokens())}\n"
                "# TYPE vllm:prompt_tokens_total counter\n"
                f"vllm:prompt_tokens_total{{{lab}}} 0.0\n"
                "# TYPE vllm:num_requests_running gauge\n"
                f"vllm:num_requests_running{{{lab}}} {float(len(gpus))}\n"
                "# TYPE vllm:num_requests_waiting gauge\n"
                f"vllm:num_requests_waiting{{{lab}}} 0.0\n"
                "# TYPE vllm:kv_cache_usage_perc gauge\n"
                f"vllm:kv_cache_usage_perc{{{lab}}} 0.1\n").encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    print(json.dumps({"port": httpd.server_address[1], "pid": os.getpid(), "workers": [w.pid for w in workers],
                      "tp": tp}), flush=True)
    try:
        sys.stdin.read()  # until the checker closes our stdin
    finally:
        httpd.shutdown()
        for w in workers:
            if w.stdin:
                w.stdin.close()
        for w in workers:
            try:
                w.wait(30)
            except subprocess.TimeoutExpired:
                w.kill()
    return 0


# ------------------------------------------------------------------ the check (gpuscope's code, live)
def nvml_pids() -> dict[int, set[int]]:
    import pynvml

    out: dict[int, set[int]] = {}
    for i in range(pynvml.nvmlDeviceGetCount()):
        h = pynvml.nvmlDeviceGetHandleByIndex(i)
        for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h):
            out.setdefault(int(p.pid), set()).add(i)
    return out


def check(args: argparse.Namespace) -> int:
    try:
        import pynvml
        import torch

        if not torch.cuda.is_available():
            print("groups_check: torch sees no CUDA device", file=sys.stderr)
            return 2
        pynvml.nvmlInit()
    except Exception as e:  # noqa: BLE001 - a missing piece of the machine: say which, exit 2
        print(f"groups_check: cannot run here: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    gpus = [int(x) for x in args.gpus.split(",")]
    if max(gpus) >= pynvml.nvmlDeviceGetCount():
        print(f"groups_check: GPU{max(gpus)} does not exist here", file=sys.stderr)
        return 2
    tp = len(gpus)
    cmd = [sys.executable, __file__, "--serve", "--port", str(args.port), "--gpus", args.gpus,
           "--tensor-parallel-size", str(tp)] + (["--nccl"] if args.nccl else [])
    server = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        if not line:
            print("groups_check: the server did not start", file=sys.stderr)
            return 2
        info = json.loads(line)
        print(f"server: pid {info['pid']} on 127.0.0.1:{info['port']}, workers {info['workers']} on GPUs {gpus}, TP={tp}")
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # until NVML lists every worker (CUDA start-up takes a few seconds)
            held = nvml_pids()
            if all(w in held for w in info["workers"]):
                break
            if server.poll() is not None:
                print("groups_check: the server exited", file=sys.stderr)
                return 2
            time.sleep(0.5)
        else:
            print("groups_check: NVML never listed the workers", file=sys.stderr)
            return 2
        print("NVML compute processes:", {p: sorted(g) for p, g in nvml_pids().items()})
        return detect(info, gpus, tp, args.seconds)
    finally:
        if server.stdin:
            server.stdin.close()
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()


def detect(info: dict[str, Any], gpus: list[int], tp: int, seconds: float) -> int:
    from gpuscope.core.findings import evaluate
    from gpuscope.core.group_paths import group_line
    from gpuscope.core.group_traffic import group_traffic, traffic_line
    from gpuscope.sources.endpoint import EndpointPoller
    from gpuscope.sources.groups import with_groups
    from gpuscope.sources.live import WithEndpoints, open_source

    url = f"http://127.0.0.1:{info['port']}/metrics"
    src = with_groups(WithEndpoints(open_source(None), EndpointPoller([url], interval_s=1.0).start()))
    frames = []
    try:
        t_end = time.monotonic() + seconds
        while time.monotonic() < t_end:
            t0 = time.perf_counter()
            frames.append(src.sample())
            time.sleep(max(0.0, 1.0 - (time.perf_counter() - t0)))
        finder = getattr(src, "finder", None)
        t0 = time.perf_counter()
        if finder is not None:
            finder.build(frames[-1].endpoints, {p.pid: {g.index} for g in frames[-1].gpus for p in g.processes or ()})
        build_ms = (time.perf_counter() - t0) * 1000
    finally:
        src.close()
    inv = src.inventory
    last = frames[-1]
    print(f"\ngpuscope found {len(last.groups)} group(s) after {seconds:.0f} s ({len(frames)} frames; one /proc build "
          f"{build_ms:.1f} ms):")
    ok = False
    for g in last.groups:
        print("  " + group_line(g, inv, last))
        print(f"    pids {list(g.pids)}  gpus {list(g.gpus)}  port {g.port}  tp {g.tp}  pp {g.pp}  "
              f"container {g.container}  note {g.note}")
        if g.gpus:
            print("    " + traffic_line(group_traffic(g, last, inv)))
        if g.endpoint == url:
            ok = (bool(g.pids) and g.pids[0] == info["pid"] and g.port == info["port"]
                  and list(g.gpus) == sorted(gpus) and g.tp == tp and set(info["workers"]) <= set(g.pids))
    for c in evaluate(inv, frames[-10:]):
        if c.rule in ("group_path", "slow_path"):
            print(f"  finding {c.severity}: {c.message}")
    print(f"\nexpected: pid {info['pid']} (workers {info['workers']}), port {info['port']}, GPUs {sorted(gpus)}, TP={tp}")
    print("RESULT:", "OK, the group matches" if ok else "MISMATCH")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpus", default="0", help="GPU indices of the server, e.g. 0 or 0,1 (default 0)")
    ap.add_argument("--port", type=int, default=0, help="the server's port (default: a free one)")
    ap.add_argument("--seconds", type=float, default=15.0, help="how long gpuscope samples (default 15)")
    ap.add_argument("--nccl", action="store_true", help="workers all-reduce with NCCL each step (TP>1)")
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--tensor-parallel-size", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--world", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--gpu", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--counts", default="", help=argparse.SUPPRESS)
    ap.add_argument("--master-port", type=int, default=29500, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker is not None:
        return worker(args.worker, args.world, args.gpu, args.counts, args.nccl, args.master_port)
    if args.serve:
        return serve(args.port, [int(x) for x in args.gpus.split(",")], args.tensor_parallel_size, args.nccl)
    return check(args)


if __name__ == "__main__":
    sys.exit(main())
