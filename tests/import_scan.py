"""Read the imports of a source tree with `ast`, for the layering and import-graph tests.

Every import statement counts, at module level or inside a function or `if` block, as does
`importlib.import_module("name")` / `__import__("name")` with a literal name. Relative imports
are resolved to absolute dotted names.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Import:
    """One import in a module.

    Attributes:
        module: the absolute dotted name imported from (`pkg.x` for `from .x import y`).
        names: the names a `from` import takes (`("y",)`); empty for `import x`.
        line: the line of the statement.
        text: the statement's source text.
    """

    module: str
    names: tuple[str, ...]
    line: int
    text: str

    @property
    def root(self) -> str:
        """The top-level package or module the import reaches."""
        return self.module.split(".")[0]


def module_name(path: Path, root: Path) -> str:
    """`root/pkg/sub/x.py` -> `pkg.sub.x`; a package's `__init__.py` -> the package name."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def resolve_relative(path: Path, root: Path, level: int, module: str | None) -> str:
    """`from ..x import y` written in `path` -> the absolute dotted name of `..x`.

    Raises:
        AssertionError: the import climbs above the top-level package.
    """
    package = module_name(path, root).split(".")
    if path.name != "__init__.py":
        package.pop()
    if level - 1 > len(package) - 1:
        raise AssertionError(f"{path.relative_to(root)}: relative import beyond the top-level package")
    base = package[: len(package) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def _is_dynamic_import(func: ast.expr) -> bool:
    if isinstance(func, ast.Name):
        return func.id in {"__import__", "import_module"}
    return isinstance(func, ast.Attribute) and func.attr == "import_module"


def imports_of(path: Path, root: Path) -> list[Import]:
    """Every import in `path`, at any nesting depth, with relative imports resolved against `root`."""
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source, filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            text = ast.get_source_segment(source, node) or ""
            found.extend(Import(alias.name, (), node.lineno, text) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            text = ast.get_source_segment(source, node) or ""
            names = tuple(alias.name for alias in node.names)
            module = (resolve_relative(path, root, node.level, node.module) if node.level
                      else node.module or "")
            found.append(Import(module, names, node.lineno, text))
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str) and _is_dynamic_import(node.func)):
            text = ast.get_source_segment(source, node) or ""
            found.append(Import(node.args[0].value, (), node.lineno, text))
    return found
