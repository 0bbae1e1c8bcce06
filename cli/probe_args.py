"""The flags of ``gpuscope probe`` and their parsers: each wrong value is an ``argparse.ArgumentTypeError`` that
says what is wrong (exit 2, one line)."""

from __future__ import annotations

import argparse
import math
import re

from gpuscope.core import probe as P
from gpuscope.core.text import clean

_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "KIB": 1 << 10, "M": 1 << 20, "MB": 1 << 20, "MIB": 1 << 20,
          "G": 1 << 30, "GB": 1 << 30, "GIB": 1 << 30}


MIN_MAX_MEMORY = 2 * P.MIN_COPY_BYTES  # two copy buffers (one each way) of the smallest size
_INDEX = re.compile(r"[0-9]{1,6}")
MAX_GPU_INDEX = 4095


def memory_size(text: str) -> int:
    """``--max-memory``: bytes, or a number with K/M/G (binary: 512M = 512 MiB), at least
    :data:`MIN_MAX_MEMORY`; an ``argparse.ArgumentTypeError`` saying what is wrong otherwise."""
    s = text.strip().upper().replace(" ", "")
    num = s.rstrip("KMGIB")
    unit = s[len(num):]
    try:
        value = float(num)
    except ValueError:
        value = math.nan
    if unit not in _UNITS or not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"not a size: {clean(text, 40)!r} (bytes, or with K, M, G: 512M)")
    size = value * _UNITS[unit]
    if size < MIN_MAX_MEMORY:
        raise argparse.ArgumentTypeError(f"{clean(text, 40)!r} is below the minimum, {MIN_MAX_MEMORY >> 20}M (the "
                                         f"probe copies through two buffers of {P.MIN_COPY_BYTES >> 20} MiB at least)")
    if size > 1 << 50:
        raise argparse.ArgumentTypeError(f"{clean(text, 40)!r} is more than 1 PiB: no GPU has that much memory")
    return int(size)


def gpu_list(text: str) -> list[int]:
    """``--gpus 0,1``: GPU indices as gpuscope and nvidia-smi number them, each once; an
    ``argparse.ArgumentTypeError`` naming the first wrong one otherwise."""
    out: list[int] = []
    for part in (x.strip() for x in text.split(",")):
        if not part:
            continue
        if not _INDEX.fullmatch(part) or int(part) > MAX_GPU_INDEX:
            raise argparse.ArgumentTypeError(f"not a GPU index: {clean(part, 40)!r} (indices are 0 to "
                                             f"{MAX_GPU_INDEX}, as nvidia-smi numbers them; e.g. 0,1)")
        if int(part) in out:
            raise argparse.ArgumentTypeError(f"GPU {int(part)} given twice")
        out.append(int(part))
    if not out:
        raise argparse.ArgumentTypeError("no GPU given (e.g. 0,1)")
    return out


MAX_GROUP_NAME = 200


def group_name(text: str) -> str:
    """``--group NAME``: a serving group as the user sees it (its endpoint URL, ``:PORT``, its server name or the
    inference panel's label), stripped; an ``argparse.ArgumentTypeError`` for an empty or unprintable name. Which
    group it names is decided once the groups are found (core/probe_plan.py ``match_group``)."""
    name = " ".join(text.split())
    if not name:
        raise argparse.ArgumentTypeError("no group given (e.g. :8000, or the label the inference panel shows)")
    if len(name) > MAX_GROUP_NAME:
        raise argparse.ArgumentTypeError(f"a group name is at most {MAX_GROUP_NAME} characters")
    if clean(name, MAX_GROUP_NAME) != name:
        raise argparse.ArgumentTypeError(f"not a group name: {clean(name, 40)!r} (control characters in it)")
    return name


def trials_count(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if not 1 <= n <= 100:
        raise argparse.ArgumentTypeError("must be between 1 and 100")
    return n


def add_probe_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of ``gpuscope probe``."""
    p.add_argument("--json", action="store_true", help=f"machine-readable output (schema {P.PROBE_SCHEMA}, "
                   "docs/probe-json.md)")
    p.add_argument("--simulate", metavar="SCENARIO", help="figures derived from a scenario's links (no GPU; "
                   "labelled SIMULATED)")
    p.add_argument("--yes", action="store_true", help="run even where other processes use the GPUs (else asked)")
    p.add_argument("--max-memory", type=memory_size, default=P.DEFAULT_MAX_MEMORY, metavar="BYTES",
                   help="device memory per GPU at most (default 1G; also 512M, 268435456)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--gpus", type=gpu_list, metavar="0,1", help="the GPUs to probe (default all; pairs among them)")
    which.add_argument("--group", type=group_name, metavar="NAME",
                       help="one serving group's links: its GPUs' host links and the pairs among them (NAME: its "
                            "endpoint URL, :PORT, server name or the label the inference panel shows)")
    p.add_argument("--trials", type=trials_count, default=P.DEFAULT_TRIALS, metavar="N",
                   help=f"timed trials per figure, the median is shown (default {P.DEFAULT_TRIALS})")
