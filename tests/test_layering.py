"""The data flows one way (STYLE R1): each package imports only what its layer may."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = {
    "policies": {"events", "state", "streaming", "pyspark", "pandas", "pyarrow", "confluent_kafka", "kafka"},
    "events": {"policies", "state", "streaming", "pyspark", "pandas", "pyarrow", "confluent_kafka", "kafka"},
    "state": {"streaming", "pyspark", "pandas", "pyarrow", "confluent_kafka", "kafka"},
}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_only_its_layers(package):
    modules = sorted((ROOT / package).glob("*.py"))
    assert modules, f"{package}/ has no modules"
    offenders = {str(m.relative_to(ROOT)): sorted(_imports(m) & FORBIDDEN[package]) for m in modules}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_core_reads_no_wall_clock_or_global_random():
    """Time and randomness are injected into policies/, events/ and state/ (STYLE R3, R4)."""
    bad = []
    for package in ("policies", "events", "state"):
        for module in (ROOT / package).glob("*.py"):
            text = module.read_text(encoding="utf-8")
            for needle in ("time.time(", "datetime.now(", "datetime.utcnow(", "random.random(",
                           "random.choice(", "random.shuffle(", "random.randint(", "random.sample("):
                if needle in text.replace("rng.random(", ""):
                    bad.append(f"{module.relative_to(ROOT)}: {needle}")
    assert bad == []
