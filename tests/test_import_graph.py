"""No import circle inside any package: the intra-package import graph, read from source, is acyclic.

Edges come from every import statement, at module level or inside a function, with relative
imports resolved (see `tests/import_scan.py`). `from pkg import name` is an edge to the submodule
`pkg.name` when one exists, else to `pkg` itself (its `__init__.py`). A package's `__init__.py`
being run before its submodules is not an edge; a module importing itself is not a circle.
"""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest

from tests.import_scan import imports_of, module_name

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("events", "policies", "state", "streaming")

Graph = dict[str, dict[str, str]]


def _target(imported: str, modules: set[str]) -> str | None:
    """The longest prefix of the dotted name `imported` that is a module of the package."""
    parts = imported.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in modules:
            return candidate
    return None


def import_graph(package: str, root: Path = ROOT) -> Graph:
    """module -> {imported module of the same package -> `file:line` of the first such import}."""
    paths = {module_name(path, root): path for path in sorted((root / package).rglob("*.py"))}
    modules = set(paths)
    graph: Graph = {module: {} for module in modules}
    for module, path in paths.items():
        where = str(path.relative_to(root))
        for imp in imports_of(path, root):
            targets = ([_target(f"{imp.module}.{name}", modules) for name in imp.names] if imp.names
                       else [_target(imp.module, modules)])
            for target in targets:
                if target is not None and target != module:
                    graph[module].setdefault(target, f"{where}:{imp.line}")
    return graph


def _strongly_connected(graph: Graph) -> list[list[str]]:
    """Tarjan's algorithm; components in a deterministic order, members sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for successor in sorted(graph[node]):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in on_stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(components)


def _shortest_cycle_through(start: str, members: set[str], graph: Graph) -> list[str]:
    """A shortest path start -> ... -> start inside one strongly connected component."""
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for successor in sorted(graph[node]):
                if successor not in members:
                    continue
                if successor == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parents[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if successor not in parents:
                    parents[successor] = node
                    following.append(successor)
        frontier = following
    raise AssertionError(f"{start} is on no cycle")


def find_cycles(graph: Graph) -> list[str]:
    """One readable cycle per strongly connected component of more than one module.

    Each is `a -> b (pkg/a.py:3) -> a (pkg/b.py:7)`: the module, then each import with where it is.
    """
    cycles = []
    for component in _strongly_connected(graph):
        if len(component) < 2:
            continue
        path = _shortest_cycle_through(component[0], set(component), graph)
        hops = [f"{after} ({graph[before][after]})" for before, after in pairwise(path)]
        members = f"  [circle among {len(component)} modules: {', '.join(component)}]"
        cycles.append(" -> ".join([path[0], *hops]) + members)
    return cycles


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_circle_inside_the_package(package):
    graph = import_graph(package)
    assert len(graph) > 1, f"{package}/ has no modules"
    cycles = find_cycles(graph)
    assert not cycles, f"import circles in {package}/:\n" + "\n".join(cycles)


def _write_package(root: Path, modules: dict[str, str]) -> None:
    for relative, text in modules.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_the_detector_finds_a_circle_through_a_function_level_relative_import(tmp_path):
    _write_package(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from .b import run\n",
        "pkg/b.py": "import json\n\n\ndef run():\n    from . import c\n    return c\n",
        "pkg/c.py": "from pkg.a import run\n",
        "pkg/d.py": "from .a import run\n",
    })
    cycles = find_cycles(import_graph("pkg", tmp_path))
    assert cycles == ["pkg.a -> pkg.b (pkg/a.py:1) -> pkg.c (pkg/b.py:5) -> pkg.a (pkg/c.py:1)"
                      "  [circle among 3 modules: pkg.a, pkg.b, pkg.c]"]


def test_the_detector_sees_a_circle_through_the_package_init(tmp_path):
    _write_package(tmp_path, {
        "pkg/__init__.py": "from .model import Event\n\nLIMIT = 3\n",
        "pkg/model.py": "from pkg import LIMIT\n\n\nclass Event:\n    pass\n",
    })
    assert find_cycles(import_graph("pkg", tmp_path)) == [
        "pkg -> pkg.model (pkg/__init__.py:1) -> pkg (pkg/model.py:1)  [circle among 2 modules: pkg, pkg.model]"]


def test_the_detector_passes_an_acyclic_package(tmp_path):
    _write_package(tmp_path, {
        "pkg/__init__.py": "from .a import x\nfrom . import b\n",
        "pkg/a.py": "from .b import y\nfrom . import a\nimport pkg.c\n\nx = y\n",
        "pkg/b.py": "import os\nfrom pkg.c import z\n\ny = z\n",
        "pkg/c.py": "z = 1\n",
    })
    graph = import_graph("pkg", tmp_path)
    assert graph == {
        "pkg": {"pkg.a": "pkg/__init__.py:1", "pkg.b": "pkg/__init__.py:2"},
        "pkg.a": {"pkg.b": "pkg/a.py:1", "pkg.c": "pkg/a.py:3"},
        "pkg.b": {"pkg.c": "pkg/b.py:2"},
        "pkg.c": {},
    }
    assert find_cycles(graph) == []
