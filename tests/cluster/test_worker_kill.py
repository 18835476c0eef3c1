"""kill -9 of a worker JVM on the standalone cluster while `run` decides a batch of requests, counted.

`run` is submitted to the cluster as test_standalone's `run` test submits it (a packed environment, client
mode), with the fault tests' input and job (:mod:`tests.streaming.test_fault_counts`: bookies of two
clusters, then 480 requests on one partition, 120 records per micro-batch, the checkpoint on the shared
local disk). The requests go out in two waves. While a batch of the first wave is in progress and an
executor's log shows one of its tasks inside the stateful operator (the state function's Python runner
started, the task's output not committed), that executor's worker is killed with everything below it (the
Worker JVM, the executor JVM, its Python workers), as a lost machine would be; the second wave follows, and
the other worker's executor reruns the lost task and does the rest. The decisions topic is counted against a
local `replay` of the same input: nothing missing, nothing decided differently, duplicates identical.

Every wait polls a condition with a deadline; the deadlines are hang guards, never timings.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.kafka_broker import TansuBroker, produce_records
from tests.spark_cluster import StandaloneCluster, clean_environment, submitted_driver
from tests.streaming.test_fault_counts import (
    BASE_CONF,
    REQUESTS,
    SCENARIO,
    DecisionsReader,
    Job,
    assert_counts,
    count_decisions,
)

from .test_standalone import (
    STOP_GUARD_S,
    SUBMIT_GUARD_S,
    _driver_file,
    _packed_environment,
    _spark_submit,
)

FIRST_WAVE = REQUESTS // 2
"""Requests sent before the kill: two micro-batches of them, so the kill finds one in progress."""

STEP_GUARD_S = 120
"""Hang guard for one step of the job on a loaded machine (a healthy step takes seconds)."""

_TASK = re.compile(r"Executor: (Running|Finished) task (\d+)\.(\d+) in stage (\d+)\.(\d+) \(TID (\d+)\)")
_STATEFUL = re.compile(r"ApplyInPandasWithStatePythonRunner: Starting Python task execution - task \S+ in stage \d+ "
                       r"\(TID (\d+)\)")
_COMMITTED = re.compile(r"DataWritingSparkTask: Committed partition \d+ \(task (\d+),")


@dataclass(frozen=True)
class Task:
    """One attempt of a task, as an executor's log names it: `task INDEX.ATTEMPT in stage STAGE.ATTEMPT`."""

    index: int
    attempt: int
    stage: int
    stage_attempt: int
    tid: int

    def __str__(self) -> str:
        return f"task {self.index}.{self.attempt} in stage {self.stage}.{self.stage_attempt} (TID {self.tid})"


@pytest.fixture
def broker() -> Iterator[TansuBroker]:
    with TansuBroker() as running:
        yield running


def _replay(tmp_path: Path) -> subprocess.Popen:
    """`placement-engine replay` of the scenario in local mode, started in the background: the reference."""
    from streaming.demo import write_conf

    work = tmp_path / "replay"
    work.mkdir()
    events, requests = SCENARIO
    (work / "input.jsonl").write_text("".join(json.dumps(r) + "\n" for r in events + requests), encoding="utf-8")
    write_conf(BASE_CONF, work / "replay.properties")
    return subprocess.Popen([str(Path(sys.executable).with_name("placement-engine")), "replay",
                             "--conf", str(work / "replay.properties"), "--events", str(work / "input.jsonl"),
                             "--out", str(work / "out")],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _replay_decisions(replay: subprocess.Popen, tmp_path: Path) -> dict[str, dict]:
    output, _ = replay.communicate(timeout=SUBMIT_GUARD_S)
    assert replay.returncode == 0, output[-3000:]
    decisions = [json.loads(line) for path in sorted((tmp_path / "replay" / "out" / "decisions").glob("*.jsonl"))
                 for line in path.read_text(encoding="utf-8").splitlines()]
    by_request = {d["request_id"]: d for d in decisions}
    assert len(by_request) == len(decisions) == REQUESTS
    return by_request


def _log(stderr: Path) -> str:
    try:
        return stderr.read_text(errors="replace")
    except OSError:
        return ""


def _started_tasks(log: str) -> list[Task]:
    return [Task(*map(int, found[1:])) for found in _TASK.findall(log) if found[0] == "Running"]


def _stateful_tasks_running(log: str) -> list[Task]:
    """The tasks an executor's log shows inside the stateful operator: started, running the state function's
    Python runner, their output not committed, not finished."""
    finished = {int(found[5]) for found in _TASK.findall(log) if found[0] == "Finished"}
    committed = set(map(int, _COMMITTED.findall(log)))
    stateful = set(map(int, _STATEFUL.findall(log)))
    return [task for task in _started_tasks(log)
            if task.tid in stateful and task.tid not in committed and task.tid not in finished]


def _app_id(cluster: StandaloneCluster, name: str) -> str | None:
    try:
        apps = [app["id"] for app in cluster.state()["activeapps"] if app["name"] == name]
    except (OSError, ValueError):
        return None
    return apps[0] if apps else None


class _Submitted:
    """`run` submitted to the cluster in its own session; its output goes to a file."""

    def __init__(self, command: list[str], cwd: Path, log: Path) -> None:
        self.log = log
        with open(log, "wb") as out:
            self.process = subprocess.Popen(command, cwd=cwd, env=clean_environment(), stdin=subprocess.DEVNULL,
                                            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def summary(self) -> str:
        text = self.text()
        errors = [line for line in text.splitlines() if "Error" in line or "Exception" in line][:20]
        return "\n".join(errors) + "\n...\n" + text[-3000:]

    def wait_until(self, condition: Callable[[], object], what: str, timeout_s: float = STEP_GUARD_S) -> None:
        deadline = time.monotonic() + timeout_s
        while not condition():
            assert self.process.poll() is None, f"the job ended while waiting for {what}:\n{self.summary()}"
            assert time.monotonic() < deadline, f"no {what} within {timeout_s} s:\n{self.summary()}"
            time.sleep(0.05)   # poll interval of the condition check

    def stop(self) -> int:
        """SIGTERM the Python driver (the job stops after its micro-batch) and wait for spark-submit."""
        driver = submitted_driver(self.process.pid)
        assert driver is not None, "no Python driver under spark-submit"
        os.kill(driver, signal.SIGTERM)
        return self.process.wait(timeout=STOP_GUARD_S)

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=STOP_GUARD_S)


def test_kill_9_of_a_worker_jvm_mid_batch_loses_no_request(cluster, wheel, node_python, broker, tmp_path):
    replay = _replay(tmp_path)
    job = Job.create(broker.bootstrap, tmp_path)
    submit = tmp_path / "submit"
    submit.mkdir()
    archive = _packed_environment(node_python, wheel, submit / "placement-env.tar.gz")
    (submit / "venv").mkdir()
    subprocess.run(["tar", "-xzf", archive.name, "-C", "venv"], cwd=submit, check=True, timeout=120)
    command = _spark_submit("--master", cluster.master_url,
                            "--archives", "placement-env.tar.gz#venv",
                            "--conf", "spark.pyspark.python=./venv/bin/python",
                            _driver_file("./venv/bin/python", submit, clean_environment()),
                            "run", "--conf", str(job.properties))
    reader = DecisionsReader(broker.bootstrap, job.topics["decisions"])
    requests = [(r["cluster"], json.dumps(r)) for r in SCENARIO[1]]
    waves = [requests[:FIRST_WAVE], requests[FIRST_WAVE:]]
    sent = 0

    def send_wave() -> None:
        nonlocal sent
        wave = waves.pop(0)
        produce_records(broker.bootstrap, job.topics["requests"], wave)
        sent += len(wave)

    job.send_events()
    started = time.monotonic()
    run = _Submitted(command, submit, tmp_path / "spark-submit.log")
    try:
        run.wait_until(job.events_read, "batch reading the events", SUBMIT_GUARD_S)
        send_wave()
        victim: list[tuple[Path, list[Task], int]] = []

        def stateful_task_mid_batch() -> bool:
            """A batch of requests planned and not committed, and an executor inside its stateful operator.
            Should every request sent be decided first (the tasks were too quick to be seen), the next wave
            goes out."""
            planned, app = job.batch_of_requests(), _app_id(cluster, "placement-engine")
            if planned is not None and app is not None:
                for executor in cluster.executor_dirs(app):
                    tasks = _stateful_tasks_running(_log(executor / "stderr"))
                    if tasks and job.batch_of_requests() == planned:
                        victim.append((executor, tasks, planned[0]))
                        return True
            if waves and reader.distinct() >= sent:
                send_wave()
            return False

        run.wait_until(stateful_task_mid_batch, "executor inside the stateful operator in a batch of requests")
        executor, tasks, batch = victim[0]
        worker = int(executor.parent.parent.parent.name.removeprefix("worker-"))
        decided_at_kill = reader.distinct()
        killed = cluster.kill_worker(worker)
        committed_at_kill = batch in job.committed()
        while waves:
            send_wave()
        run.wait_until(lambda: reader.distinct() >= REQUESTS, "decision for every request")
        code = run.stop()
        elapsed = time.monotonic() - started
        survivors = [path for path in cluster.executor_dirs(executor.parent.name) if path != executor]
        retried = [task for path in survivors for task in _started_tasks(_log(path / "stderr"))
                   if any(task.stage == lost.stage and task.index == lost.index and task != lost for lost in tasks)]
    finally:
        run.kill()
        reader.close()
    assert code == 0, run.summary()
    counts = count_decisions(_replay_decisions(replay, tmp_path), reader.decisions)
    lost_executor = [line for line in run.text().splitlines() if "Lost executor" in line]
    print(f"\nkill -9 of worker-{worker} and the {len(killed) - 1} processes below it, in batch {batch} "
          f"({'committed' if committed_at_kill else 'not committed'} at the kill, {decided_at_kill} requests "
          f"decided) inside the stateful operator: {', '.join(map(str, tasks))}; rerun on the other executor: "
          f"{', '.join(map(str, retried)) or 'none'}; run took {elapsed:.0f} s: {counts}")
    assert lost_executor and not committed_at_kill, run.summary()
    assert_counts(counts)
