"""Small helpers shared by the benchmark scripts."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from typing import Any


def measured_run_args(out_flag: str, out_help: str) -> tuple[argparse.Namespace, list[str]]:
    """The command line of a script that runs gpuscope in its own process and measures a stretch of it
    (thread_cpu.py, thread_profile.py): ``--after S --for S OUT_FLAG PATH -- [gpuscope's arguments]``; returns
    the options and gpuscope's arguments."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--after", type=float, required=True, help="seconds before measuring")
    ap.add_argument("--for", dest="for_s", type=float, required=True, help="seconds measured")
    ap.add_argument(out_flag, required=True, help=out_help)
    ap.add_argument("args", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    return a, a.args[1:] if a.args[:1] == ["--"] else a.args


def write_json(path: str | None, data: Any) -> None:
    """Write a benchmark's results as JSON when ``--json FILE`` was given."""
    if path:
        with open(path, "w") as f:
            json.dump(data, f, indent=2)


def load_average() -> str:
    """The 1, 5 and 15 minute load averages as ``"0.91 1.42 2.34"`` (``"?"`` where the OS has none)."""
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def start_mosquitto(extra_conf: str = "") -> tuple[subprocess.Popen[bytes], int, str]:
    """A private Mosquitto on a free local port, accepting connections when this returns:
    (process, port, its temporary folder). The caller terminates it and removes the folder."""
    mosq = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    d = tempfile.mkdtemp()
    conf = os.path.join(d, "m.conf")
    with open(conf, "w") as f:
        f.write(("user root\n" if os.geteuid() == 0 else "") + f"listener {port} 127.0.0.1\nallow_anonymous true\n"
                "max_queued_messages 1000\n" + extra_conf)
    broker = subprocess.Popen([mosq, "-c", conf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(50):
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    return broker, port, d
