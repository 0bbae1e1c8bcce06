"""How long the session lock is held per frame while recording, and how long the UI waits for it.

    python benchmarks/bench_session_lock.py [--frames 300] [--gpus 8] [--stall-ms 0]

Frames come from the simulated `h200-nvswitch-8` scenario (SIMULATED data). Each frame is ingested
under the session lock twice over, with a recorder that fsyncs every frame (``flush_s=0``: the worst
case; the default flushes once a second):

* ``inline``: the disk work done by the caller under the lock, as before the recorder had a writer
  thread (the recorder's own encode + gzip + write + fsync, called directly);
* ``queued``: ``Recorder.write`` as it is now (the writer thread does the disk work).

``--stall-ms`` adds that much to every fsync (a slow or network disk). A "UI" thread takes the lock
every 5 ms meanwhile, as ``refresh_view`` does; its wait is what a user feels as a stutter.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import write_json  # noqa: E402


def _frames(n: int, n_gpus: int) -> tuple[object, list[object]]:
    from gpuscope.sources.live import open_source

    src = open_source("h200-nvswitch-8", virtual_at=0.0, pcie_block_s=0.0, wall0=1.8e9)
    out = []
    for k in range(n):
        src.nvml.clock.now = k
        f = src.sample()
        out.append(dataclasses.replace(f, gpus=f.gpus[:n_gpus]))
    inv = dataclasses.replace(src.inventory, devices=src.inventory.devices[:n_gpus])
    src.close()
    return inv, out


def run(mode: str, inv: object, frames: list[object], stall_s: float, d: str) -> dict[str, float]:
    from gpuscope.core.session import Session
    from gpuscope.sources import recording

    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        real_fsync(fd)
        if stall_s:
            time.sleep(stall_s)

    recording.os.fsync = fsync  # type: ignore[attr-defined]
    try:
        session = Session(inv)  # type: ignore[arg-type]
        rec = recording.Recorder(os.path.join(d, f"{mode}.jsonl.gz"), inv, flush_s=0.0)  # type: ignore[arg-type]
        held: list[float] = []
        waits: list[float] = []
        stop = threading.Event()

        def ui() -> None:
            while not stop.is_set():
                t0 = time.perf_counter()
                with session.lock:
                    waits.append(time.perf_counter() - t0)
                stop.wait(0.005)

        th = threading.Thread(target=ui)
        th.start()
        for f in frames:
            with session.lock:
                t0 = time.perf_counter()
                session.ingest(f)  # type: ignore[arg-type]
                if mode == "inline":
                    rec._emit(recording._dumps(recording.frame_to_dict(f)))  # the old write, under the lock
                else:
                    rec.write(f)  # type: ignore[arg-type]
                held.append(time.perf_counter() - t0)
            time.sleep(0.001)
        stop.set()
        th.join()
        rec.close()
    finally:
        recording.os.fsync = real_fsync  # type: ignore[attr-defined]
    held.sort()
    waits.sort()
    return {"held_ms_p50": 1000 * statistics.median(held), "held_ms_max": 1000 * held[-1],
            "ui_wait_ms_p99": 1000 * waits[int(0.99 * (len(waits) - 1))], "ui_wait_ms_max": 1000 * waits[-1],
            "dropped": rec.dropped}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--stall-ms", type=float, default=0.0)
    ap.add_argument("--json", metavar="FILE")
    a = ap.parse_args(argv)
    inv, frames = _frames(a.frames, a.gpus)
    res = {}
    with tempfile.TemporaryDirectory() as d:
        for mode in ("inline", "queued"):
            res[mode] = run(mode, inv, frames, a.stall_ms / 1000, d)
    print(f"{a.frames} SIMULATED {a.gpus}-GPU frames, fsync every frame" +
          (f" + {a.stall_ms:g} ms stall" if a.stall_ms else ""))
    print(f"{'recorder':<10} {'lock held p50 / max':<24} {'UI wait p99 / max':<24} dropped")
    for mode, r in res.items():
        print(f"{mode:<10} {r['held_ms_p50']:7.2f} / {r['held_ms_max']:7.2f} ms   "
              f"{r['ui_wait_ms_p99']:7.2f} / {r['ui_wait_ms_max']:7.2f} ms   {r['dropped']:.0f}")
    write_json(a.json, res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
