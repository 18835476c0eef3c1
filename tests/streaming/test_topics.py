"""`placement-engine topics`: list the configured topics, create the missing ones, idempotently (tansu, no Spark)."""

from __future__ import annotations

import subprocess
import sys

from streaming.topics import main
from tests.kafka_broker import create_topic, unique_topic_name

KEYS = ("eventsTopic", "requestsTopic", "decisionsTopic", "alertsTopic", "deadLettersTopic", "statusTopic")


def _conf(tmp_path, bootstrap: str) -> tuple[str, dict[str, str]]:
    names = {key: unique_topic_name(key.removesuffix("Topic")) for key in KEYS}
    path = tmp_path / "kafka.properties"
    path.write_text(f"engine.kafka.bootstrapServers={bootstrap}\n"
                    + "".join(f"engine.kafka.{key}={name}\n" for key, name in names.items()), encoding="utf-8")
    return str(path), names


def test_create_makes_the_missing_topics_and_leaves_an_existing_one_alone(kafka_bootstrap, tmp_path, capsys):
    conf, names = _conf(tmp_path, kafka_bootstrap)
    create_topic(kafka_bootstrap, names["eventsTopic"], partitions=1)

    assert main(["--conf", conf]) == 1                       # listing only: five are missing
    listed = capsys.readouterr().out.splitlines()
    assert listed[0] == f"{names['eventsTopic']}  (engine.kafka.eventsTopic): 1 partition, exists"
    assert all(line.endswith(": missing") for line in listed[1:]) and len(listed) == len(KEYS)

    assert main(["--conf", conf, "--create", "--partitions", "2"]) == 0
    created = capsys.readouterr().out.splitlines()
    assert created[0].endswith("1 partition, exists")       # never changed
    assert all(line.endswith("2 partitions, created") for line in created[1:]), created

    assert main(["--conf", conf, "--create"]) == 0           # idempotent
    again = capsys.readouterr().out.splitlines()
    assert [line.rsplit(", ", 1)[1] for line in again] == ["exists"] * len(KEYS)


def test_an_unreachable_broker_is_one_line_and_exit_2(tmp_path):
    conf, _names = _conf(tmp_path, "127.0.0.1:1")
    done = subprocess.run([sys.executable, "-m", "streaming.topics", "--conf", conf, "--create"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    assert "engine.kafka.bootstrapServers" in done.stderr and "Traceback" not in done.stderr
    # librdkafka's own "Connection refused" lines go through Python logging, not onto stderr.
    assert len(done.stderr.splitlines()) == 1, done.stderr
