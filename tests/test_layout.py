"""The folders tell the truth: each layer imports only what its layer may (harlequin-style boundary test).

* ``core/``: the domain. No Textual, Rich, NVML, HTTP, MQTT, sockets or processes; nothing from the other layers.
* ``sources/``: where frames come from and go to. No Textual or Rich; nothing from cli/tui/widgets.
* ``cli/``: headless commands. No Textual or Rich at import time, except the lines that hand over to the TUI.
* ``widgets/``: one panel each; they render what they are given and never fetch (no NVML, HTTP, MQTT).

Imports are read from the source (every ``import`` statement, including deferred ones inside functions),
and the headless commands are also run to prove that Textual is never loaded.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
UI = ("textual", "rich")
IO = ("pynvml", "httpx", "aiomqtt", "paho", "socket", "subprocess", "gzip", "zlib", "ssl", "http", "urllib.request")
LAYERS = {
    "core": {"forbid": UI + IO + ("gpuscope.sources", "gpuscope.cli", "gpuscope.tui", "gpuscope.widgets")},
    "sources": {"forbid": UI + ("gpuscope.cli", "gpuscope.tui", "gpuscope.widgets")},
    "cli": {"forbid": UI + ("gpuscope.widgets",), "allow_deferred": ("gpuscope.tui",)},
    "widgets": {"forbid": ("pynvml", "httpx", "aiomqtt", "gpuscope.cli", "gpuscope.tui", "gpuscope.sources.nvml",
                           "gpuscope.sources.endpoint", "gpuscope.sources.simnvml", "gpuscope.sources.live")},
}


def _imports(path: Path) -> list[tuple[str, bool]]:
    """Every module a file imports, with whether the import is at module level."""
    tree = ast.parse(path.read_text(), str(path))
    top = {id(n) for n in tree.body}
    out: list[tuple[str, bool]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, id(node) in top) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.module, id(node) in top))
    return out


def _hits(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_layer_imports_only_what_it_may(layer):
    rule = LAYERS[layer]
    files = sorted((ROOT / layer).rglob("*.py"))
    assert files, layer
    bad = []
    for f in files:
        for name, top_level in _imports(f):
            if _hits(name, rule["forbid"]):
                bad.append(f"{f.relative_to(ROOT)} imports {name}")
            elif top_level and _hits(name, rule.get("allow_deferred", ())):
                bad.append(f"{f.relative_to(ROOT)} imports {name} at module level")
    assert not bad, "\n".join(bad)


def test_no_relative_imports_across_layers():
    """Every gpuscope import is absolute (``gpuscope.core.model``), so a file's layer is visible at a glance."""
    bad = []
    for layer in ("core", "sources", "cli", "tui", "widgets"):
        for f in (ROOT / layer).rglob("*.py"):
            for node in ast.walk(ast.parse(f.read_text())):
                if isinstance(node, ast.ImportFrom) and node.level > 0:
                    bad.append(str(f.relative_to(ROOT)))
    assert not bad, bad


def test_the_catchall_pkg_folder_is_only_the_package_root():
    assert sorted(p.name for p in (ROOT / "pkg").glob("*.py")) == ["__init__.py", "__main__.py"]


HEADLESS = [
    ["topo", "--simulate", "mixed-4"],
    ["topo", "--simulate", "mixed-4", "--json"],
    ["scenarios"],
    ["summary", "{demo}"],
    ["summary", "{demo}", "--json"],
    ["export", "{demo}", "--csv", "{tmp}/out.csv"],
    ["compare", "{demo}", "{demo}"],
    ["record", "-o", "{tmp}/r.jsonl.gz", "--simulate", "mixed-4", "--interval", "0.1", "--duration", "0.3"],
]


@pytest.mark.parametrize("argv", HEADLESS, ids=lambda a: " ".join(a[:2]))
def test_headless_commands_never_load_textual(argv, tmp_path):
    from gpuscope.tui.app import demo_path

    args = [a.format(demo=demo_path(), tmp=tmp_path) for a in argv]
    code = (
        "import sys, io\n"
        "from gpuscope.cli.main import main\n"
        f"rc = main({args!r})\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich'))\n"
        "sys.stderr.write('LOADED ' + ' '.join(bad[:5]) + '\\n')\n"
        "raise SystemExit(rc or (3 if bad else 0))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "LOADED \n" in out.stderr
