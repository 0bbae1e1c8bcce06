"""The folders tell the truth: each layer imports only what its layer may (harlequin-style boundary test).

* ``core/``: the domain. No Textual, Rich, NVML, HTTP, MQTT, sockets or processes; nothing from the other layers.
* ``sources/``: where frames come from (NVML, simulation, endpoints, recordings read back, MQTT subscribed).
  No Textual or Rich; nothing from outputs/cli/tui/widgets.
* ``outputs/``: where frames go (the recording writer, the MQTT publisher, the Prometheus exporter and its HTTP
  server). No Textual or Rich; nothing from cli/tui/widgets. Outputs may use sources (a format's constants, the
  broker connection); sources never use outputs.
* ``cli/``: headless commands. No Textual or Rich at import time, except the lines that hand over to the TUI.
* ``widgets/``: one panel each; they render what they are given and never fetch (no NVML, HTTP, MQTT).
* Textual's private internals (``textual._*`` modules, a Textual class's ``_private`` attributes and methods)
  are used in ONE module, ``widgets/textual_private.py`` (in widgets/ so that both widgets/ and tui/ may
  import it), nowhere else in the package.

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
    "core": {"forbid": UI + IO + ("gpuscope.sources", "gpuscope.outputs", "gpuscope.cli", "gpuscope.tui", "gpuscope.widgets")},
    "sources": {"forbid": UI + ("gpuscope.outputs", "gpuscope.cli", "gpuscope.tui", "gpuscope.widgets")},
    "outputs": {"forbid": UI + ("gpuscope.cli", "gpuscope.tui", "gpuscope.widgets")},
    "cli": {"forbid": UI + ("gpuscope.widgets",), "allow_deferred": ("gpuscope.tui",)},
    "widgets": {"forbid": ("pynvml", "httpx", "aiomqtt", "gpuscope.cli", "gpuscope.tui", "gpuscope.outputs", "gpuscope.sources.nvml",
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
    for layer in ("core", "sources", "outputs", "cli", "tui", "widgets"):
        for f in (ROOT / layer).rglob("*.py"):
            for node in ast.walk(ast.parse(f.read_text())):
                if isinstance(node, ast.ImportFrom) and node.level > 0:
                    bad.append(str(f.relative_to(ROOT)))
    assert not bad, bad


def test_the_catchall_pkg_folder_is_only_the_package_root():
    assert sorted(p.name for p in (ROOT / "pkg").glob("*.py")) == ["__init__.py", "__main__.py"]


PACKAGE = ("core", "sources", "outputs", "cli", "tui", "widgets", "pkg")
TEXTUAL_PRIVATE = ROOT / "widgets" / "textual_private.py"
NOT_TEXTUAL = ("os", "sys")  # os._exit: a private-looking name on a module that is not Textual's
# Rich's private names the package once used (Console._color_system: its public color_system names the same), banned
# as Textual's are, unless widgets/textual_private.py owns them
RICH_PRIVATE = ("_color_system",)


def _textual_private_names() -> set[str]:
    """The private names of the Textual classes the package subclasses or calls: their methods and class
    attributes, and what an instance sets in ``__init__``; with the ones widgets/textual_private.py lists
    (compositor, style cache, parser: classes of Textual's private modules)."""
    from textual.app import App
    from textual.containers import Vertical
    from textual.driver import Driver
    from textual.drivers.linux_driver import LinuxDriver
    from textual.screen import ModalScreen, Screen
    from textual.strip import Strip
    from textual.widget import Widget
    from textual.widgets import Input, Static

    from gpuscope.widgets import textual_private

    names = {n for n in textual_private.OWNED if not n.startswith("textual.")} | set(RICH_PRIVATE)
    for obj in (App(), Widget(), Static(), Vertical(), Strip([]), App, Screen, ModalScreen, Input, Driver, LinuxDriver):
        names |= {n for n in [*dir(obj), *getattr(obj, "__dict__", {})] if n.startswith("_") and not n.startswith("__")}
    return names


def _private_textual_import(name: str) -> bool:
    parts = name.split(".")
    return parts[0] == "textual" and any(p.startswith("_") for p in parts[1:])


def test_textuals_private_internals_are_used_in_one_module_only():
    """No ``textual._*`` import, and no use (call, override, assignment) of a Textual class's (or Rich's, RICH_PRIVATE) private name,
    outside widgets/textual_private.py: a new Textual can break one module, which applies only on the
    version it was written for and has Textual's public path for every caller."""
    private = _textual_private_names()
    bad = []
    for layer in PACKAGE:
        for f in sorted((ROOT / layer).rglob("*.py")):
            if f == TEXTUAL_PRIVATE:
                continue
            where = f.relative_to(ROOT)
            for node in ast.walk(ast.parse(f.read_text(), str(f))):
                if isinstance(node, ast.Import):
                    bad += [f"{where}:{node.lineno} imports {a.name}" for a in node.names if _private_textual_import(a.name)]
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    hit = next((n for n in [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
                                if _private_textual_import(n)), None)
                    if hit is not None:
                        bad.append(f"{where}:{node.lineno} imports {hit}")
                if layer not in ("tui", "widgets"):  # the layers that may use Textual at all (see LAYERS)
                    continue
                if (isinstance(node, ast.Attribute) and node.attr in private
                        and not (isinstance(node.value, ast.Name) and node.value.id in NOT_TEXTUAL)):
                    bad.append(f"{where}:{node.lineno} uses Textual's private {node.attr}")
                elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in private:
                    bad.append(f"{where}:{node.lineno} defines Textual's private {node.name}")
    assert not bad, "\n".join(bad) + "\n(use or extend widgets/textual_private.py)"


def test_the_private_module_uses_what_it_owns():
    """Each name widgets/textual_private.py claims (OWNED) is used there: the list the rule above enforces
    stays the list of what the module really touches."""
    from gpuscope.widgets import textual_private

    source = TEXTUAL_PRIVATE.read_text()
    assert [n for n in textual_private.OWNED if n not in source] == []


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
    from gpuscope.tui.run import demo_path

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


# modules the live screen does not use: each is imported where it is used (docs/performance.md, *Memory at one GPU*)
NOT_LIVE = ("importlib.metadata", "gpuscope.cli.report", "gpuscope.cli.probe", "gpuscope.cli.probe_args",
            "gpuscope.core.probe", "gpuscope.core.probe_plan",
            "gpuscope.core.stats", "gpuscope.sources.recording", "gpuscope.sources.replay_index",
            "gpuscope.sources.scenario", "gpuscope.sources.simnvml", "gpuscope.sources.endpoint",
            "gpuscope.sources.mqtt", "gpuscope.outputs.prometheus", "gpuscope.outputs.exporter_http",
            "gpuscope.outputs.webconfig", "httpx", "aiomqtt", "pyarrow", "yaml", "bcrypt",
            "numpy",  # numpy: ~20 MB of RSS; the history rings and graphs are stdlib arrays (core/history.py)
            "ssl")  # OpenSSL: 4.2 MB; asyncio loads without it when no --endpoint is polled (tui/no_tls.py)


def test_the_live_screen_loads_only_what_it_uses():
    """On one H200 the live screen's peak RSS was 76 MB against nvitop's 43: `gpuscope` (no command, real
    GPUs) loaded the reports, the probe, the replay index, the scenario reader and importlib.metadata,
    none of which it uses. Its command line and hand-over (here stopped at the terminal check) and the
    modules that open its source load none of them."""
    code = (
        "import sys\n"
        "from gpuscope.cli.main import main\n"
        "rc = main([])\n"  # no terminal: the live view says so after loading its screen
        "import gpuscope.sources.groups, gpuscope.sources.live\n"  # what cli/main.py _open imports
        f"bad = sorted(m for m in {NOT_LIVE!r} if m in sys.modules)\n"
        "sys.stderr.write('LOADED ' + ' '.join(bad) + '\\n')\n"
        "raise SystemExit(0 if 'gpuscope.tui.app' in sys.modules and rc == 1 else 3)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "LOADED \n" in out.stderr, out.stderr[-2000:]
