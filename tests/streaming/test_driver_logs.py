"""What an operator reads on the driver's console: `run` under `spark-submit` (Spark's own launcher, which
gives the driver's JVM Spark's default log profile, INFO) logs no Spark INFO lines, no "falling behind"
warning per micro-batch, and no "Failed to cancel job group" at its stop (streaming.session,
streaming/log4j2.properties). Local mode against the session's tansu broker."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.kafka_broker import consume_all, produce_records
from tests.spark_cluster import submitted_driver

ROOT = Path(__file__).resolve().parents[2]
SUBMIT_GUARD_S = 300
"""Hang guard for the job to answer, and then to stop, on a loaded machine; not a timing."""
SPARK_INFO = re.compile(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d INFO ", re.M)
"""A line of Spark's log4j2 layout (`%d{yy/MM/dd HH:mm:ss} %p %c{1}: %m`) at INFO."""


def _records(cluster: str, requests: int) -> list[tuple[str, str]]:
    bookies = [{"type": "bookie_writable", "cluster": cluster, "time": "2026-11-01T00:00:00.000Z",
                "bookie": f"bk{i}:3181", "location": f"/rack{i % 3}"} for i in range(6)]
    creates = [{"type": "ledger_create", "cluster": cluster, "time": f"2026-11-01T00:00:{10 + n:02d}.000Z",
                "request_id": f"{cluster}-r{n}", "ledger_id": n, "ensemble_size": 3, "write_quorum": 3,
                "ack_quorum": 2} for n in range(requests)]
    return [(r["cluster"], json.dumps(r)) for r in bookies + creates]


def test_run_under_spark_submit_logs_no_spark_info_no_falling_behind_and_no_cancel_warning(kafka_bootstrap,
                                                                                            kafka_topic, tmp_path):
    topics = {name: kafka_topic(partitions=2, prefix=name)
              for name in ("events", "requests", "decisions", "alerts", "dead", "status")}
    records = _records("c1", 20)
    produce_records(kafka_bootstrap, topics["events"], records[:6])
    produce_records(kafka_bootstrap, topics["requests"], records[6:])
    conf = tmp_path / "run.properties"
    conf.write_text("".join(f"{key}={value}\n" for key, value in {
        "ensemblePlacementPolicy": "rackaware",
        "engine.kafka.bootstrapServers": kafka_bootstrap,
        "engine.kafka.eventsTopic": topics["events"],
        "engine.kafka.requestsTopic": topics["requests"],
        "engine.kafka.decisionsTopic": topics["decisions"],
        "engine.kafka.alertsTopic": topics["alerts"],
        "engine.kafka.deadLettersTopic": topics["dead"],
        "engine.kafka.statusTopic": topics["status"],
        "engine.metrics.port": "0",
        "engine.checkpointLocation": str(tmp_path / "checkpoint"),
        "engine.trigger.seconds": "0.5",     # shorter than a micro-batch here: Spark would say "falling behind"
    }.items()), encoding="utf-8")
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONPATH": str(ROOT)}
    command = [str(Path(sys.executable).parent / "spark-submit"), "--master", "local[1]",
               str(ROOT / "streaming" / "driver.py"), "run", "--conf", str(conf)]
    output = tmp_path / "spark-submit.log"
    with open(output, "wb") as log:
        job = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True)
    try:
        deadline = time.monotonic() + SUBMIT_GUARD_S
        while len(consume_all(kafka_bootstrap, topics["decisions"])) < 20:
            assert job.poll() is None, output.read_text(errors="replace")[-5000:]
            assert time.monotonic() < deadline, "no decisions within the guard"
            time.sleep(0.5)    # poll interval of the condition above, not a wait for it
        driver = submitted_driver(job.pid)
        assert driver is not None, "no Python driver under spark-submit"
        os.kill(driver, signal.SIGTERM)
        code = job.wait(timeout=SUBMIT_GUARD_S)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait(timeout=30)
    text = output.read_text(errors="replace")
    assert code == 0, text[-5000:]
    assert "stopped on SIGTERM" in text, text[-5000:]
    assert not SPARK_INFO.findall(text), text[:5000]
    assert "Current batch is falling behind" not in text, text[-5000:]
    assert "Failed to cancel job group" not in text, text[-5000:]
