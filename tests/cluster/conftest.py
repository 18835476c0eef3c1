"""Fixtures of the cluster tier: a Spark standalone cluster, and the engine packaged as a user ships it.

* ``cluster``: a :class:`tests.spark_cluster.StandaloneCluster` (one master, two workers of one core
  each) for the module, stopped at its end.
* ``wheel``: ``pip wheel --no-deps`` of a copy of the checkout's sources (so no ``build/`` directory is
  left in the checkout and none of its leftovers reach the wheel), once per test session.
* ``node_python``: a Python standing for what every node has installed: the runtime dependencies, and
  not the project. It is a virtual environment of the base interpreter whose ``.pth`` file names this
  environment's site-packages (where pandas, pyarrow, pyspark, ... are; a path listed in a ``.pth`` file
  gets no ``.pth`` processing of its own, so the project's editable install there stays inactive). It
  also records, when ``PLACEMENT_IMPORT_LOG`` names a file, from which file each process imported the
  project's packages: the tests read it to see where executors found the code.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.spark_cluster import StandaloneCluster

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("policies", "events", "state", "streaming")

IMPORT_LOG_MODULE = '''\
"""Test instrumentation: with PLACEMENT_IMPORT_LOG set, append `pid, cwd, package, origin` for each of
the project's packages this process imports."""
import os
import sys

_LOG = os.environ.get("PLACEMENT_IMPORT_LOG")
_PACKAGES = {PACKAGES!r}


class _ImportLog:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name not in _PACKAGES:
            return None
        for finder in sys.meta_path:
            if finder is _ImportLog or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                with open(_LOG, "a", encoding="utf-8") as log:
                    log.write(f"{{os.getpid()}}\\t{{os.getcwd()}}\\t{{name}}\\t{{spec.origin}}\\n")
                return spec
        return None


if _LOG:
    sys.meta_path.insert(0, _ImportLog)
'''


@pytest.fixture(scope="module")
def cluster() -> Iterator[StandaloneCluster]:
    with StandaloneCluster(workers=2, cores=1, memory="1g") as running:
        yield running


@pytest.fixture(scope="session")
def wheel(tmp_path_factory) -> Path:
    source = tmp_path_factory.mktemp("source")
    for name in PACKAGES:
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    dist = tmp_path_factory.mktemp("dist")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(source)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"pip wheel failed:\n{done.stdout}\n{done.stderr}"
    (built,) = dist.glob("placement_engine-*.whl")
    return built


@pytest.fixture(scope="session")
def node_python(tmp_path_factory) -> Path:
    env = tmp_path_factory.mktemp("node") / "env"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(env)], check=True, timeout=120)
    purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = Path(subprocess.run([str(env / "bin" / "python"), "-c", purelib], check=True, capture_output=True,
                               text=True, timeout=120).stdout.strip())
    (site / "placement_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    (site / "placement_import_log.py").write_text(IMPORT_LOG_MODULE.format(PACKAGES=set(PACKAGES)), encoding="utf-8")
    (site / "placement_import_log.pth").write_text("import placement_import_log\n", encoding="utf-8")
    return env / "bin" / "python"
