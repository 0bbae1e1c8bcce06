"""The wheel installed as its users install a command-line tool: with pipx (Debian's package), into a fresh home,
run, then uninstalled without a trace in pipx's home.

The distribution is `gpuscope-inference` (the package index refuses `gpuscope`: README, *Set up and run*); the
import package and the one command it installs keep the name `gpuscope`. About 10-15 s: pipx makes a venv and pip
resolves the dependencies against the index (from pip's cache where it has them).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from helpers import ROOT

from gpuscope import __version__

DIST = "gpuscope-inference"  # pyproject's [project] name
COMMAND = "gpuscope"  # pyproject's [project.scripts]: the only command the distribution installs
PIPX = shutil.which("pipx")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(PIPX is None, reason="pipx is not installed (Debian's package: apt-get install pipx; "
                                            ".ci/run installs it, so CI always runs this test)"),
]


def build_wheel(out: Path) -> Path:
    """This tree's wheel, built as pip builds it (as tests/e2e/test_packaging.py does)."""
    p = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                        str(out), str(ROOT)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    (whl,) = out.glob("*.whl")
    return whl


def pipx_env(home: Path) -> dict[str, str]:
    """A fresh HOME with pipx's folders in it; pip keeps this user's download cache (no pipx state is in it)."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PIPX_", "VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PYTHONUSERBASE"))}
    env.setdefault("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip"))
    env.update(HOME=str(home), PIPX_HOME=str(home / ".local" / "pipx"), PIPX_BIN_DIR=str(home / ".local" / "bin"),
               PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


def run(args: list[str], env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def pipx_list(env: dict[str, str]) -> dict[str, object]:
    p = run([str(PIPX), "list", "--json"], env)
    assert p.returncode == 0, p.stderr
    venvs: dict[str, object] = json.loads(p.stdout)["venvs"]
    return venvs


def test_pipx_installs_the_wheel_runs_it_and_uninstalls_it_cleanly(tmp_path):
    whl = build_wheel(tmp_path / "wheel")
    with zipfile.ZipFile(whl) as z:
        (meta,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        assert f"Name: {DIST}\n" in z.read(meta).decode()
    home = tmp_path / "home"
    home.mkdir()
    env = pipx_env(home)
    pipx_home, bin_dir = Path(env["PIPX_HOME"]), Path(env["PIPX_BIN_DIR"])

    p = run([str(PIPX), "install", str(whl)], env, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    assert list(pipx_list(env)) == [DIST]
    assert sorted(e.name for e in bin_dir.iterdir()) == [COMMAND], "one command, named gpuscope"
    exe = bin_dir / COMMAND

    p = run([str(exe), "--version"], env)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == f"gpuscope {__version__}"
    p = run([str(exe), "demo", "--help"], env)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("usage: gpuscope demo"), p.stdout[:200]

    p = run([str(PIPX), "uninstall", DIST], env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert pipx_list(env) == {}
    assert list(bin_dir.iterdir()) == [], "no command left behind, not even a dangling link"
    # What stays in pipx's home is pipx's own: its shared pip (shared/), the empty venvs/ and the cache's tag, and
    # the logs of the commands it ran. Nothing of gpuscope's.
    assert {e.name for e in pipx_home.iterdir()} <= {"shared", "venvs", ".cache", "logs"}
    assert list((pipx_home / "venvs").iterdir()) == []
    cache = pipx_home / ".cache"
    assert not cache.exists() or [e.name for e in cache.iterdir()] == ["CACHEDIR.TAG"]
    left = [str(f.relative_to(pipx_home)) for f in pipx_home.rglob("*")
            if f.relative_to(pipx_home).parts[0] != "logs" and "gpuscope" in str(f.relative_to(pipx_home)).lower()]
    assert left == [], left
