"""The engine on a Spark standalone cluster, submitted as the README's "Deploying on a Spark cluster" says.

Both tests run the README's commands: a wheel built with `pip wheel`, shipped to the executors with
`--py-files` (as a `.zip`) or inside a packed environment with `--archives`, and `spark-submit`
running the driver file shipped in the package, in client mode. The submit runs in a directory of its
own with no `PYTHONPATH`, and the nodes' Python (`node_python`) has the dependencies but not the
project, so the executors can only find the project in what was shipped: their import log shows where
they found it. The master's JSON and the workers' work directories show that the application
registered with the master and ran its tasks on the workers.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import zipfile
from collections.abc import Iterable
from pathlib import Path

import pytest

from tests.kafka_broker import TansuBroker, consume_all, create_topic, produce_records, unique_topic_name
from tests.spark_cluster import StandaloneCluster, clean_environment, pyspark_home, submitted_driver

from .conftest import PACKAGES, ROOT

SUBMIT_GUARD_S = 360
"""Hang guard for one `spark-submit` on a loaded machine; not a timing."""

STOP_GUARD_S = 120
"""Hang guard for `run` to exit after SIGTERM (the stop itself is `engine.stopGraceSeconds` and a few seconds)."""


def _spark_submit(*args: str) -> list[str]:
    return [str(pyspark_home() / "bin" / "spark-submit"), *args]


def _driver_file(python: Path | str, cwd: Path, env: dict[str, str]) -> str:
    """`$(python -m streaming.driver)`: the driver file's path, as the README's command computes it."""
    done = subprocess.run([str(python), "-m", "streaming.driver"], cwd=cwd, env=env, capture_output=True, text=True,
                          check=True, timeout=120)
    return done.stdout.strip()


def _import_log(path: Path) -> list[tuple[int, str, str, str]]:
    """(pid, working directory, package, file) per package import, from the nodes' import log; a file
    found through a relative path entry is made absolute against the working directory."""
    if not path.exists():
        return []
    rows = [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines() if line]
    return [(int(pid), cwd, package, os.path.normpath(os.path.join(cwd, origin))) for pid, cwd, package, origin in rows]


def _sorted_lines(directory: Path) -> list[str]:
    return sorted(line for path in sorted(directory.glob("*.jsonl"))
                  for line in path.read_text(encoding="utf-8").splitlines())


def _application(cluster: StandaloneCluster, name: str) -> dict:
    """The one finished application called `name` in the master's JSON."""
    apps = [app for app in cluster.state()["completedapps"] if app["name"] == name]
    assert len(apps) == 1, cluster.state()["completedapps"]
    return apps[0]


def _assert_ran_on_the_workers(cluster: StandaloneCluster, app: dict) -> list[Path]:
    """Both workers started an executor for `app`, and the executors ran its tasks; their directories."""
    executors = cluster.executor_dirs(app["id"])
    workers = {path.parent.parent.parent.name for path in executors}
    assert workers == {"worker-0", "worker-1"}, executors
    finished = sum((path / "stderr").read_text(errors="replace").count("Finished task") for path in executors)
    assert finished > 0, "no executor finished a task"
    return executors


def _assert_project_came_from(imports: Iterable[tuple[int, str, str, str]], executors: list[Path], submit: Path,
                              shipped: str) -> None:
    """The executors imported the project's packages from `shipped` (a path relative to an executor's
    directory of this application, where Spark put what was shipped); Python workers the driver's JVM
    started (their working directory is `submit`, they see the executors' environment) imported them
    from under `submit`. Nothing came from the checkout."""
    imports = list(imports)
    on_executors = {package for _, cwd, package, _ in imports if Path(cwd) in executors}
    assert on_executors >= set(PACKAGES), imports
    for _pid, cwd, package, origin in imports:
        assert not origin.startswith(f"{ROOT}/"), (package, origin)
        if Path(cwd) in executors:
            assert origin.startswith(f"{cwd}/{shipped}/"), (package, origin, cwd)
        else:
            assert Path(cwd) == submit and origin.startswith(f"{submit}/"), (package, origin, cwd)


def _events_log(path: Path) -> Path:
    """The demo's scenario for two clusters, `alpha` and `beta`, in one file: ~840 records of both."""
    from streaming.demo import generate, write_input

    records = []
    for cluster, seed in (("alpha", 3), ("beta", 4)):
        records += [{**record, "cluster": cluster} if "cluster" in record else record
                    for record in generate(300, seed)]
    write_input(records, path)
    return path


def test_replay_on_the_cluster_writes_what_local_mode_writes(cluster, wheel, node_python, tmp_path):
    from streaming.demo import write_conf
    from streaming.settings import DEMO_CONF

    events = _events_log(tmp_path / "input" / "events.jsonl")
    conf = tmp_path / "placement.properties"
    write_conf({**DEMO_CONF, "engine.replay.recordsPerTrigger": "200"}, conf)

    local = tmp_path / "out-local"
    done = subprocess.run([str(Path(sys.executable).with_name("placement-engine")), "replay", "--conf", str(conf),
                           "--events", str(events), "--out", str(local)],
                          capture_output=True, text=True, timeout=SUBMIT_GUARD_S)
    assert done.returncode == 0, done.stderr[-3000:]

    submit = tmp_path / "submit"
    submit.mkdir()
    shutil.copy(wheel, submit / "placement_engine.zip")   # the README: Spark puts .zip files on the workers' path
    env = clean_environment(PLACEMENT_IMPORT_LOG=str(tmp_path / "driver-imports.tsv"))
    executor_log = tmp_path / "executor-imports.tsv"
    done = subprocess.run(
        _spark_submit("--master", cluster.master_url,
                      "--conf", f"spark.pyspark.python={node_python}",
                      "--conf", f"spark.executorEnv.PLACEMENT_IMPORT_LOG={executor_log}",
                      "--py-files", "placement_engine.zip",
                      _driver_file(sys.executable, submit, env),
                      "replay", "--conf", str(conf), "--events", str(events), "--out", "out"),
        cwd=submit, env=env, capture_output=True, text=True, timeout=SUBMIT_GUARD_S)
    assert done.returncode == 0, done.stderr[-5000:]
    summary = json.loads((submit / "out" / "summary.json").read_text(encoding="utf-8"))
    assert summary["clusters"] == 2 and summary["records"] > 800, summary

    for kind in ("decisions", "alerts", "dead-letters"):
        expected = _sorted_lines(local / kind)
        assert expected, f"the local replay wrote no {kind}: the comparison would prove nothing"
        assert _sorted_lines(submit / "out" / kind) == expected, kind

    app = _application(cluster, "placement-engine-replay")
    assert app["state"] == "FINISHED", app
    executors = _assert_ran_on_the_workers(cluster, app)
    _assert_project_came_from(_import_log(executor_log), executors, submit, "placement_engine.zip")
    driver_imports = _import_log(tmp_path / "driver-imports.tsv")
    assert driver_imports and all(origin.startswith(f"{submit}/placement_engine.zip/")
                                  for _, _, _, origin in driver_imports), driver_imports


def _packed_environment(node_python: Path, wheel: Path, target: Path) -> Path:
    """`placement-env.tar.gz`: the nodes' environment with the wheel installed into it, packed the way
    venv-pack packs one (the environment's contents at the archive's root, its interpreter a symlink to
    the base interpreter, which exists at the same path on every node here)."""
    env = target.parent / "placement-env"
    shutil.copytree(node_python.parent.parent, env, symlinks=True)
    site = next((env / "lib").glob("python3*/site-packages"))
    with zipfile.ZipFile(wheel) as archive:   # a pure-Python wheel installs by unpacking into site-packages
        archive.extractall(site)
    with tarfile.open(target, "w:gz") as tar:
        for path in sorted(env.iterdir()):
            tar.add(path, arcname=path.name)
    return target


def _bookies(cluster: str) -> list[dict]:
    return [{"type": "bookie_writable", "cluster": cluster, "time": "2026-11-01T00:00:00.000Z",
             "bookie": f"bk{i}:3181", "location": f"/rack{i % 3}"} for i in range(6)]


def _creates(cluster: str, count: int) -> list[dict]:
    return [{"type": "ledger_create", "cluster": cluster, "time": f"2026-11-01T00:00:{10 + n:02d}.000Z",
             "request_id": f"{cluster}-r{n}", "ledger_id": n, "ensemble_size": 3, "write_quorum": 3,
             "ack_quorum": 2} for n in range(count)]


@pytest.fixture
def broker():
    with TansuBroker() as running:
        yield running


def test_run_on_the_cluster_answers_every_request(cluster, wheel, node_python, broker, tmp_path):
    topics = {name: create_topic(broker.bootstrap, unique_topic_name(name), partitions=2)
              for name in ("events", "requests", "decisions", "alerts", "dead-letters", "status")}
    requests = _creates("alpha", 25) + _creates("beta", 15)
    produce_records(broker.bootstrap, topics["events"],
                    [(r["cluster"], json.dumps(r)) for r in _bookies("alpha") + _bookies("beta")])
    produce_records(broker.bootstrap, topics["requests"], [(r["cluster"], json.dumps(r)) for r in requests])
    conf = tmp_path / "placement.properties"
    conf.write_text("\n".join([
        "ensemblePlacementPolicy=rackaware",
        "minNumRacksPerWriteQuorum=2",
        f"engine.kafka.bootstrapServers={broker.bootstrap}",
        f"engine.kafka.eventsTopic={topics['events']}",
        f"engine.kafka.requestsTopic={topics['requests']}",
        f"engine.kafka.decisionsTopic={topics['decisions']}",
        f"engine.kafka.alertsTopic={topics['alerts']}",
        f"engine.kafka.deadLettersTopic={topics['dead-letters']}",
        f"engine.kafka.statusTopic={topics['status']}",
        "engine.metrics.port=0",
        f"engine.checkpointLocation={tmp_path / 'checkpoint'}",
        "",
    ]), encoding="utf-8")

    submit = tmp_path / "submit"
    submit.mkdir()
    archive = _packed_environment(node_python, wheel, submit / "placement-env.tar.gz")
    (submit / "venv").mkdir()
    subprocess.run(["tar", "-xzf", archive.name, "-C", "venv"], cwd=submit, check=True, timeout=120)
    env = clean_environment(PLACEMENT_IMPORT_LOG=str(tmp_path / "driver-imports.tsv"))
    executor_log = tmp_path / "executor-imports.tsv"
    command = _spark_submit("--master", cluster.master_url,
                            "--archives", "placement-env.tar.gz#venv",
                            "--conf", "spark.pyspark.python=./venv/bin/python",
                            "--conf", f"spark.executorEnv.PLACEMENT_IMPORT_LOG={executor_log}",
                            _driver_file("./venv/bin/python", submit, env),
                            "run", "--conf", str(conf))
    output = tmp_path / "spark-submit.log"
    with open(output, "wb") as log:
        job = subprocess.Popen(command, cwd=submit, env=env, stdin=subprocess.DEVNULL, stdout=log,
                               stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wanted = {r["request_id"] for r in requests}
        deadline = time.monotonic() + SUBMIT_GUARD_S
        answered: set[str] = set()
        while not wanted <= answered:
            assert job.poll() is None, output.read_text(errors="replace")[-5000:]
            assert time.monotonic() < deadline, f"unanswered after {SUBMIT_GUARD_S} s: {sorted(wanted - answered)}"
            time.sleep(1.0)   # poll interval of the condition below, not a wait for it
            answered = {json.loads(r.value)["request_id"] for r in consume_all(broker.bootstrap, topics["decisions"])}
        driver = submitted_driver(job.pid)
        assert driver is not None, "no Python driver under spark-submit"
        stop_started = time.monotonic()
        os.kill(driver, signal.SIGTERM)
        code = job.wait(timeout=STOP_GUARD_S)
        stopped_in = time.monotonic() - stop_started
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait(timeout=30)
    log_text = output.read_text(errors="replace")
    assert code == 0, log_text[-5000:]
    print(f"run stopped {stopped_in:.1f} s after SIGTERM")

    decisions = [json.loads(r.value) for r in consume_all(broker.bootstrap, topics["decisions"])]
    assert {d["request_id"] for d in decisions} == wanted
    assert all(d["status"] == "ok" for d in decisions), [d for d in decisions if d["status"] != "ok"][:3]

    app = _application(cluster, "placement-engine")
    executors = _assert_ran_on_the_workers(cluster, app)
    _assert_project_came_from(_import_log(executor_log), executors, submit, "venv/lib")
    driver_imports = _import_log(tmp_path / "driver-imports.tsv")
    assert driver_imports and all(origin.startswith(f"{submit}/venv/lib/") for _, _, _, origin in driver_imports), \
        driver_imports
    assert set(PACKAGES) <= {package for _, _, package, _ in driver_imports}


def test_the_readme_installs_every_runtime_dependency_but_pyspark_on_the_nodes():
    import re
    import tomllib

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Deploying on a Spark cluster", 1)[1].split("\n## ", 1)[0]
    command = next(line for line in section.splitlines() if "pip install '" in line)
    assert sorted(re.findall(r"'([^']+)'", command)) == sorted(d for d in declared if not d.startswith("pyspark"))
