"""The installed distribution adds only `gpuscope` (the layering rules are in test_layout.py)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from importlib import metadata

import pytest
from helpers import ROOT


@pytest.mark.slow
def test_wheel_adds_only_the_gpuscope_package(tmp_path):
    """Build the wheel as pip would and look inside: nothing generic lands in site-packages."""
    root = ROOT
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                          str(tmp_path), str(root)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    (whl,) = tmp_path.glob("gpuscope_inference-*.whl")
    names = zipfile.ZipFile(whl).namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top == {"gpuscope"}, top
    for must in ("gpuscope/sources/nvml.py", "gpuscope/widgets/gpu_panel.py", "gpuscope/tui/app.py",
                 "gpuscope/tui/gpuscope.tcss", "gpuscope/sources/scenarios/a6000-tp2-pcie-gen1.toml",
                 "gpuscope/recordings/h200-2gpu-load-phases.jsonl.gz",
                 "gpuscope/py.typed"):  # PEP 561: mypy, pyright and editors read the installed package's hints
        assert must in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), "the Apache-2.0 text ships in the wheel"
    assert not any(n.startswith("gpuscope/tests") for n in names)


def test_console_script_is_declared():
    eps = [e for e in metadata.entry_points(group="console_scripts") if e.name == "gpuscope"]
    assert eps and eps[0].value == "gpuscope.cli.main:main"


def test_test_only_packages_are_not_imported_at_run_time():
    """prometheus-client is in the `test` extra only: no runtime module may import it (the exporter writes the
    text format itself, outputs/prometheus.py)."""
    import ast

    root = ROOT
    for layer in ("pkg", "core", "cli", "sources", "widgets", "tui"):
        for path in (root / layer).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
                assert not any(n.split(".")[0] == "prometheus_client" for n in names), path
