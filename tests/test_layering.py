"""The data flows one way (STYLE R1): each package imports only what its layer allows.

The rule is an allow-list of top-level import roots per package. The standard library
(`sys.stdlib_module_names`) and the package itself are allowed everywhere; everything else,
project package or third-party distribution, must be listed. Every import statement counts,
at module level or inside a function (see `tests/import_scan.py`).
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest

from tests.import_scan import imports_of

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("events", "policies", "state", "streaming")

# Import name of every distribution in `[project] dependencies`. A dependency added to
# pyproject.toml without an entry here fails `test_every_dependency_has_an_import_root`.
IMPORT_ROOT_OF_DISTRIBUTION = {
    "pyspark": "pyspark",
    "pandas": "pandas",
    "pyarrow": "pyarrow",
    "confluent-kafka": "confluent_kafka",
    "kafka-python": "kafka",
    "orjson": "orjson",
    "numpy": "numpy",
    "matplotlib": "matplotlib",
    "prometheus_client": "prometheus_client",
    "tqdm": "tqdm",
}


def _declared_dependencies() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    names = set()
    for requirement in project["dependencies"]:
        name = requirement
        for separator in "<>=!~[; ":
            name = name.split(separator)[0]
        names.add(name.strip().lower())
    return names


def _dependency_roots() -> frozenset[str]:
    return frozenset(IMPORT_ROOT_OF_DISTRIBUTION[name] for name in _declared_dependencies())


# Non-stdlib import roots each package may use, besides itself.
ALLOWED = {
    "events": frozenset(),
    "policies": frozenset(),
    "state": frozenset({"events", "policies", "numpy", "orjson"}),
    "streaming": frozenset({"events", "policies", "state"}) | _dependency_roots(),
}


def forbidden_imports(package: str, allowed: frozenset[str], root: Path = ROOT) -> list[str]:
    """`file:line: statement (root 'x' not allowed)` for every import outside the allow-list."""
    permitted = allowed | {package}
    offenders = []
    for path in sorted((root / package).rglob("*.py")):
        for imp in imports_of(path, root):
            if imp.root in sys.stdlib_module_names or imp.root in permitted:
                continue
            offenders.append(f"{path.relative_to(root)}:{imp.line}: {imp.text!r} "
                             f"(import root {imp.root!r} is not allowed in {package}/)")
    return offenders


@pytest.mark.parametrize("package", PACKAGES)
def test_package_imports_only_its_allow_list(package):
    assert sorted((ROOT / package).rglob("*.py")), f"{package}/ has no modules"
    offenders = forbidden_imports(package, ALLOWED[package])
    assert not offenders, "imports outside the allow-list:\n" + "\n".join(offenders)


def test_every_dependency_has_an_import_root():
    """The streaming allow-list follows pyproject.toml; each dependency must map to its import name."""
    unmapped = _declared_dependencies() - IMPORT_ROOT_OF_DISTRIBUTION.keys()
    assert not unmapped, f"add the import root of {sorted(unmapped)} to IMPORT_ROOT_OF_DISTRIBUTION"


def test_the_allow_list_names_only_project_packages_and_dependencies():
    """Each allowed root is a project package or a declared dependency, so a misspelt root cannot hide."""
    known = set(PACKAGES) | _dependency_roots()
    for package, allowed in ALLOWED.items():
        assert allowed <= known, f"{package}: {sorted(allowed - known)} is neither a package nor a dependency"


def test_the_checker_sees_function_level_and_relative_imports(tmp_path):
    """The walk reaches imports inside functions and resolves `from .. import`."""
    package = tmp_path / "state"
    package.mkdir()
    (package / "__init__.py").write_text("from . import cluster\n", encoding="utf-8")
    (package / "cluster.py").write_text(
        "import json\n\n\ndef load():\n    import pandas as pd\n    from ..streaming import job\n"
        "    return pd, job\n", encoding="utf-8")
    with pytest.raises(AssertionError, match="beyond the top-level package"):
        forbidden_imports("state", ALLOWED["state"], tmp_path)
    (package / "cluster.py").write_text(
        "import json\n\n\ndef load():\n    import pandas as pd\n    from .registry import x\n"
        "    return pd, x\n", encoding="utf-8")
    offenders = forbidden_imports("state", ALLOWED["state"], tmp_path)
    assert offenders == ["state/cluster.py:5: 'import pandas as pd' (import root 'pandas' is not allowed in state/)"]


def test_core_reads_no_wall_clock_or_global_random():
    """Time and randomness are injected into policies/, events/ and state/ (STYLE R3, R4)."""
    bad = []
    for package in ("policies", "events", "state"):
        for module in (ROOT / package).rglob("*.py"):
            text = module.read_text(encoding="utf-8")
            for needle in ("time.time(", "datetime.now(", "datetime.utcnow(", "random.random(",
                           "random.choice(", "random.shuffle(", "random.randint(", "random.sample("):
                if needle in text.replace("rng.random(", ""):
                    bad.append(f"{module.relative_to(ROOT)}: {needle}")
    assert bad == []
