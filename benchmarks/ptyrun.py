"""Run a command under a real pseudo-terminal and measure what it costs.

Used by the TUI benchmark and the peer comparison: CPU seconds (user+system of the process and its
threads, from /proc), peak RSS (VmHWM), bytes written to the terminal. Linux only.
"""

from __future__ import annotations

import fcntl
import os
import select
import signal
import struct
import subprocess
import termios
import time
from dataclasses import dataclass


@dataclass
class RunCost:
    seconds: float
    cpu_s: float
    peak_rss_mb: float
    bytes_out: int
    rss_start_mb: float
    rss_end_mb: float

    @property
    def cpu_pct(self) -> float:
        return 100.0 * self.cpu_s / self.seconds

    @property
    def bytes_per_s(self) -> float:
        return self.bytes_out / self.seconds


def _proc_cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])) / tick  # utime stime cutime cstime


def _status_kb(pid: int, key: str) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return float(line.split()[1])
    return 0.0


def run_under_pty(cmd: list[str], seconds: float, cols: int = 120, rows: int = 40, quit_keys: bytes = b"q",
                  warmup_s: float = 3.0, env: dict[str, str] | None = None, use_pty: bool = True,
                  pid_file: str | None = None) -> RunCost:
    """Start ``cmd`` on a pty of ``cols``×``rows``, let it warm up, then measure for ``seconds``. ``pid_file``: where
    to write its pid once started (for a profiler to attach)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    e = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(cols), "LINES": str(rows), **(env or {})}
    if use_pty:
        p = subprocess.Popen(cmd, stdin=slave, stdout=slave, stderr=slave, env=e, start_new_session=True,
                             close_fds=True)
    else:
        p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=e,
                             start_new_session=True)
    os.close(slave)
    if pid_file:
        with open(pid_file, "w") as f:
            f.write(f"{p.pid}\n")
    total = 0

    def drain(until: float) -> int:
        n = 0
        while True:
            left = until - time.monotonic()
            if left <= 0:
                return n
            r, _, _ = select.select([master], [], [], min(left, 0.2))
            if r:
                try:
                    data = os.read(master, 65536)
                except OSError:
                    return n
                if not data:
                    return n
                n += len(data)
                if b"\x1b[6n" in data:  # answer a cursor-position query as a terminal would
                    os.write(master, b"\x1b[1;1R")

    drain(time.monotonic() + warmup_s)
    rss0 = _status_kb(p.pid, "VmRSS") / 1024
    cpu0 = _proc_cpu_s(p.pid)
    t0 = time.monotonic()
    total = drain(t0 + seconds)
    dt = time.monotonic() - t0
    cpu1 = _proc_cpu_s(p.pid)
    peak = _status_kb(p.pid, "VmHWM") / 1024
    rss1 = _status_kb(p.pid, "VmRSS") / 1024
    if quit_keys and use_pty:
        os.write(master, quit_keys)
        drain(time.monotonic() + 1.5)
    if p.poll() is None:
        os.killpg(p.pid, signal.SIGTERM)
        try:
            p.wait(3)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    os.close(master)
    return RunCost(seconds=dt, cpu_s=cpu1 - cpu0, peak_rss_mb=peak, bytes_out=total, rss_start_mb=rss0,
                   rss_end_mb=rss1)


def main() -> None:
    """``python benchmarks/ptyrun.py --size 120x40 --seconds 150 [--pid-file F] -- CMD...``: run CMD under a pty,
    drained like a terminal, and print what it cost (`tools/gpu_machine.sh profile` samples it meanwhile)."""
    import argparse
    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--size", default="120x40")
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--pid-file")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cols, rows = (int(x) for x in a.size.split("x"))
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    if not cmd:
        ap.error("a command to run is needed after --")
    c = run_under_pty(cmd, a.seconds, cols, rows, pid_file=a.pid_file)
    print(f"{a.size}: {c.cpu_s:.2f} CPU s over {c.seconds:.0f} s, peak RSS {c.peak_rss_mb:.1f} MB, "
          f"{c.bytes_per_s:.0f} B/s")


if __name__ == "__main__":
    main()
