"""Who an agent is on the broker: its name (``--name``, default the host name) and a stable machine id.

Two agents that publish under one name (cloned VMs, containers with one host name) would otherwise merge
into one flapping fleet row; with a machine id and a per-start run id in each summary the viewer tells
their streams apart.

The machine id is ``/etc/machine-id`` where present, else a random id kept in the agent's state file.
It is never published as read: machine-id(5) asks applications not to expose it on the network, so the
agent publishes a keyed hash of it (as ``sd_id128_get_machine_app_specific`` does), 16 hex digits.

The state file is ``$STATE_DIRECTORY/agent-id`` (systemd's ``StateDirectory=``), else
``$XDG_STATE_HOME/gpuscope/agent-id``, else ``~/.local/state/gpuscope/agent-id``. A state directory that
cannot be written is not fatal: the agent warns and uses an id for this run only.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Mapping
from pathlib import Path

from gpuscope.core.errors import GpuscopeError
from gpuscope.core.text import visible

MACHINE_ID_FILES = ("/etc/machine-id", "/var/lib/dbus/machine-id")
APP_KEY = b"gpuscope agent machine id v1"  # the hash's key: the id means nothing outside gpuscope
NAME_RE = re.compile(r"[A-Za-z0-9._-]{1,128}\Z")  # one MQTT topic level (sources/mqtt.py HOST_RE)
_HEX_RE = re.compile(r"[0-9a-fA-F]{32}\Z")


NAME_RULE = "ASCII letters, digits, '.', '_' and '-' only, at most 128 (it is one level of the MQTT topic)"


def name_problem(name: str) -> str | None:
    """What is wrong with ``name`` as an agent name, in one line that names the first character refused
    (shown, never obeyed: an escape sequence reads ``␛[…``); None when it is fine."""
    if not name:
        return f"empty: {NAME_RULE}"
    if len(name) > 128:
        return f"{len(name)} characters: {NAME_RULE}"
    bad = next((c for c in name if not NAME_RE.match(c)), None)
    if bad is None:
        return None
    what = "a space" if bad == " " else f"'{visible(bad, keep='')}'"
    return f"{what} is not allowed: {NAME_RULE}"


def _shown(name: str) -> str:
    return f"'{visible(name[:60], keep='')}{'…' if len(name) > 60 else ''}'"


def check_name(name: str) -> str:
    """``--name``: one topic level of ASCII letters, digits, ``.``, ``_``, ``-`` (at most 128); a GpuscopeError
    (one line, the name shown safely, exit status 2 as for any argument error) otherwise."""
    why = name_problem(name)
    if why is not None:
        raise GpuscopeError(f"--name {_shown(name)}: {why}", exit_status=2)
    return name


def name_arg(text: str) -> str:
    """``--name`` for argparse: the name, or an ``ArgumentTypeError`` (argparse's one line, exit status 2)."""
    why = name_problem(text)
    if why is not None:
        raise argparse.ArgumentTypeError(f"{_shown(text)}: {why}")
    return text


def state_file(env: Mapping[str, str] | None = None) -> Path:
    """Where the agent keeps its random id when the machine has no ``/etc/machine-id``."""
    env = os.environ if env is None else env
    systemd = env.get("STATE_DIRECTORY", "").split(":")[0]
    if systemd:
        return Path(systemd) / "agent-id"
    base = env.get("XDG_STATE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".local" / "state")
    return Path(base) / "gpuscope" / "agent-id"


def _read_id(path: str | Path) -> str | None:
    """The 32-hex-digit id in ``path``; None when it is missing, unreadable or not one."""
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            text = f.read(100).strip()
    except OSError:
        return None
    return text.lower() if _HEX_RE.match(text) else None


def machine_id(state: Path, id_files: tuple[str, ...] = MACHINE_ID_FILES) -> tuple[str, str | None]:
    """``(id, warning)``: the published machine id (16 hex digits) and a warning for the user, or None.

    From the first of ``id_files`` holding an id; else from ``state`` (created with a random id on the first
    start; an existing file that holds no id is left alone, never overwritten); else, when ``state`` cannot be
    written, an id for this run only, with a warning saying so."""
    raw = next((r for r in map(_read_id, id_files) if r is not None), None)
    warning = None
    if raw is None:
        raw = _read_id(state)
    if raw is None:
        raw = secrets.token_hex(16)
        try:
            if state.is_file():
                warning = f"{state} holds no agent id (left as it is): using one for this run only"
            else:
                state.parent.mkdir(parents=True, exist_ok=True)
                with open(state, "x", encoding="ascii") as f:  # "x": never overwrite what is there
                    f.write(raw + "\n")
        except OSError as e:
            warning = (f"cannot keep the agent's id in {state} ({e.strerror or e}): using one for this run "
                       "only, so the fleet may count a restart as another agent")
    return hmac.new(APP_KEY, raw.encode(), hashlib.sha256).hexdigest()[:16], warning


def run_id() -> str:
    """Random per agent start (8 hex digits): with the machine id, tells one run's summaries from another's."""
    return secrets.token_hex(4)
