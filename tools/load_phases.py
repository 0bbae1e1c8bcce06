"""Real GPU load in phases, for validating the NVML source and capturing the demo recording.

Run it under the recorder so the phases land as markers:

    gpuscope record -o h200.jsonl.gz --interval 0.5 -- python tools/load_phases.py --out phases.json

Phases: idle, bf16 matmul, pinned host→device copies, device→host copies, device→device copies
(GPU0→GPU1, NVLink where present), NCCL all-reduce (2+ GPUs), idle. Each phase measures what it
moved with CUDA events and writes it to ``--out`` for comparison with what gpuscope read.
Needs PyTorch with CUDA. Changes no GPU settings.
"""

from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # never NVLink multicast on shared hosts


def marker(text: str) -> None:
    path = os.environ.get("GPUSCOPE_MARKERS")
    print(f"[load] {time.strftime('%H:%M:%S')} {text}", flush=True)
    if path:
        with open(path, "w") as f:
            f.write(text + "\n")


def timed_loop(seconds: float, step, sync) -> tuple[int, float]:  # noqa: ANN001
    n = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        step()
        n += 1
        if n % 8 == 0:
            sync()
    sync()
    return n, time.perf_counter() - t0


def _allreduce_worker(rank: int, world: int, seconds: float, q) -> None:  # noqa: ANN001
    import torch
    import torch.distributed as dist

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    dist.init_process_group("nccl", rank=rank, world_size=world)
    torch.cuda.set_device(rank)
    x = torch.ones(64 * 1024 * 1024, dtype=torch.bfloat16, device="cuda")  # 128 MiB
    for _ in range(5):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    n, dt = timed_loop(seconds, lambda: dist.all_reduce(x), torch.cuda.synchronize)
    if rank == 0:
        # ring all-reduce: each GPU sends and receives 2(n-1)/n of the buffer per call
        bus = 2 * (world - 1) / world * x.numel() * x.element_size() * n / dt
        q.put({"phase": "nccl all-reduce", "calls": n, "seconds": dt, "bus_bytes_per_s": bus})
    dist.destroy_process_group()


def main() -> None:
    import torch

    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="phases.json")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every phase's length")
    a = ap.parse_args()
    s = a.scale
    n = torch.cuda.device_count()
    devs = [torch.device(f"cuda:{i}") for i in range(n)]
    results = []

    def sync_all() -> None:
        for d in devs:
            torch.cuda.synchronize(d)

    marker("phase: idle")
    time.sleep(8 * s)

    marker("phase: bf16 matmul 8192^3 on every GPU")
    mats = [(torch.randn(8192, 8192, dtype=torch.bfloat16, device=d), torch.randn(8192, 8192, dtype=torch.bfloat16,
                                                                                  device=d)) for d in devs]

    def mm() -> None:
        for x, y in mats:
            torch.matmul(x, y)

    k, dt = timed_loop(20 * s, mm, sync_all)
    results.append({"phase": "matmul", "tflops_per_gpu": 2 * 8192**3 * k / dt / 1e12})
    del mats

    size = 1 << 30  # 1 GiB
    host = torch.empty(size, dtype=torch.uint8, pin_memory=True)
    dev_bufs = [torch.empty(size, dtype=torch.uint8, device=d) for d in devs]
    marker("phase: pinned host->device copies (1 GiB) to every GPU")
    k, dt = timed_loop(15 * s, lambda: [b.copy_(host, non_blocking=True) for b in dev_bufs], sync_all)
    results.append({"phase": "h2d", "bytes_per_s_per_gpu": size * k / dt})

    marker("phase: device->host copies (1 GiB, pinned) from GPU0")
    k, dt = timed_loop(10 * s, lambda: host.copy_(dev_bufs[0], non_blocking=True), sync_all)
    results.append({"phase": "d2h", "bytes_per_s": size * k / dt})

    if n >= 2:
        marker("phase: device->device copies GPU0->GPU1 (1 GiB)")
        k, dt = timed_loop(15 * s, lambda: dev_bufs[1].copy_(dev_bufs[0], non_blocking=True), sync_all)
        results.append({"phase": "d2d", "bytes_per_s": size * k / dt,
                        "peer_access": bool(torch.cuda.can_device_access_peer(0, 1))})
    del dev_bufs, host
    torch.cuda.empty_cache()

    if n >= 2:
        import torch.multiprocessing as mp

        marker(f"phase: NCCL all-reduce 128 MiB bf16 over {n} GPUs")
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        procs = [ctx.Process(target=_allreduce_worker, args=(r, n, 20 * s, q)) for r in range(n)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        if not q.empty():
            results.append(q.get())

    marker("phase: idle (cool-down)")
    time.sleep(6 * s)
    with open(a.out, "w") as f:
        json.dump({"gpus": n, "torch": torch.__version__, "results": results}, f, indent=2)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
