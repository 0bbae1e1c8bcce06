"""No import circles inside the package, and the TUI leans on nothing of the command line.

Two modules that import each other (directly or round a longer loop) cannot be read, tested or moved
apart; a deferred import inside a function only hides the loop from Python's loader. So every ``import``
statement counts here: at module level, inside a function and under ``if TYPE_CHECKING:`` alike. What
both sides of a loop need moves down a layer or into a small module of its own.

The graph is built from the source with ``ast`` (nothing is imported): each file of the repository's
folders is the module the installed package names it (pyproject's ``package-dir``: ``core/x.py`` is
``gpuscope.core.x``, ``pkg/__init__.py`` is ``gpuscope``). ``from gpuscope.core import catalogue``
is an edge to ``gpuscope.core.catalogue`` (a module), ``from gpuscope.core.model import Frame`` one to
``gpuscope.core.model``; importing a module does not count as importing its package's ``__init__``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DIRS = {"pkg": "gpuscope", "core": "gpuscope.core", "cli": "gpuscope.cli", "sources": "gpuscope.sources",
                "outputs": "gpuscope.outputs", "tui": "gpuscope.tui", "widgets": "gpuscope.widgets"}

# Circles allowed to exist (each the set of modules on the loop): none. A circle not listed here, or a listed one
# that grows a module, fails the test; what two modules both need moves down a layer instead.
KNOWN_CIRCLES: tuple[frozenset[str], ...] = ()

# tui/ modules allowed to import cli/ (module, what it imports): none; the command line hands the screen plain values.
KNOWN_TUI_FROM_CLI: frozenset[tuple[str, str]] = frozenset()


def module_files(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the package → its file."""
    out: dict[str, Path] = {}
    for folder, package in PACKAGE_DIRS.items():
        for f in sorted((root / folder).rglob("*.py")):
            parts = list(f.relative_to(root / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join([package, *parts])] = f
    return out


def imported_names(source: str) -> list[str]:
    """The dotted names a module's source imports, every statement (module level, deferred, TYPE_CHECKING).
    ``from a.b import c`` gives both ``a.b`` and ``a.b.c`` (``c`` may be a submodule)."""
    out: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append(node.module)
            out += [f"{node.module}.{a.name}" for a in node.names if a.name != "*"]
    return out


def import_graph(files: Mapping[str, Path]) -> dict[str, set[str]]:
    """Module → the package's modules it imports (itself left out)."""
    graph: dict[str, set[str]] = {}
    for mod, path in files.items():
        names = imported_names(path.read_text())
        graph[mod] = {n for n in names if n in files and n != mod}
    return graph


def circles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Every import circle of ``graph``: its strongly connected parts of two or more modules (Tarjan), each
    as one loop through all of them, starting and ending at its first module by name
    (``[a, b, a]``); sorted. Edges to names outside the graph are ignored."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    parts: list[set[str]] = []

    def visit(v: str) -> None:  # recursion depth is the longest import chain: a few dozen
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part: set[str] = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                part.add(w)
                if w == v:
                    break
            if len(part) > 1:
                parts.append(part)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(_loop_through(graph, part) for part in parts)


def _loop_through(graph: Mapping[str, Iterable[str]], part: set[str]) -> list[str]:
    """A walk round the circle ``part`` visiting each module, from its first by name back to it."""
    start = min(part)
    path, todo = [start], sorted(part - {start})
    for target in [*todo, start]:
        if target != start and target in path:
            continue
        path += _shortest(graph, part, path[-1], target)[1:]
    return path


def _shortest(graph: Mapping[str, Iterable[str]], part: set[str], a: str, b: str) -> list[str]:
    """The shortest import path from ``a`` to ``b`` inside ``part`` (breadth first)."""
    prev: dict[str, str] = {}
    frontier, seen = [a], {a}
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph.get(v, ())):
                if w in part and (w == b or w not in seen):
                    if w == b:
                        path = [b]
                        while v != a:
                            path.append(v)
                            v = prev[v]
                        return [a, *reversed(path)]
                    seen.add(w)
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"{b} not reachable from {a} inside {sorted(part)}")


@pytest.mark.parametrize("graph, expected", [
    ({}, []),
    ({"a": {"b"}, "b": set()}, []),
    ({"a": {"b"}, "b": {"a"}}, [["a", "b", "a"]]),
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, [["a", "b", "c", "a"]]),
    ({"a": {"b"}, "b": {"c"}, "c": {"b"}, "d": {"a"}}, [["b", "c", "b"]]),
    ({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c"}}, [["a", "b", "a"], ["c", "d", "c"]]),
    ({"a": {"b", "c"}, "b": {"a"}, "c": {"a"}}, [["a", "b", "a", "c", "a"]]),
    ({"a": {"b", "x.y"}, "b": set()}, []),  # an import from outside the graph is no edge
    ({"a": {"b"}, "b": {"c"}, "c": set(), "d": {"c"}}, []),  # a diamond is no circle
], ids=["empty", "chain", "pair", "triangle", "tail-into-pair", "two-pairs", "figure-eight", "outside", "diamond"])
def test_circle_finder(graph, expected):
    assert circles(graph) == expected


def test_imported_names_counts_deferred_and_type_checking_imports():
    source = (
        "from typing import TYPE_CHECKING\n"
        "import gpuscope.core.model\n"
        "from gpuscope.core import catalogue\n"
        "if TYPE_CHECKING:\n"
        "    from gpuscope.sources.kubelet import PodLabels\n"
        "def f():\n"
        "    from gpuscope.core.findings import Candidate\n"
        "from . import relative\n"
    )
    names = imported_names(source)
    for name in ("gpuscope.core.model", "gpuscope.core.catalogue", "gpuscope.sources.kubelet",
                 "gpuscope.core.findings"):
        assert name in names


def test_module_files_follow_package_dir():
    files = module_files()
    assert files["gpuscope"] == ROOT / "pkg" / "__init__.py"
    assert files["gpuscope.core.findings"] == ROOT / "core" / "findings.py"
    assert "gpuscope.sources.scenarios" not in files  # data only


def test_no_import_circles():
    """A module that imports (directly or round a loop) a module that imports it back fails, with the loop."""
    found = circles(import_graph(module_files()))
    new = [loop for loop in found if frozenset(loop) not in KNOWN_CIRCLES]
    assert not new, "import circles:\n" + "\n".join(" -> ".join(loop) for loop in new)


def test_tui_imports_nothing_from_cli():
    """The Textual front end takes what the command line parsed as typed values, never cli/'s modules."""
    graph = import_graph(module_files())
    bad = sorted((mod, dep) for mod, deps in graph.items() if mod.startswith("gpuscope.tui")
                 for dep in deps if dep.startswith("gpuscope.cli") and (mod, dep) not in KNOWN_TUI_FROM_CLI)
    assert not bad, "tui/ imports cli/:\n" + "\n".join(f"{m} imports {d}" for m, d in bad)
