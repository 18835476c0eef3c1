"""`streaming.checkpoint`: `run` refuses a damaged checkpoint at start with one line and the options."""

import pytest

from streaming.checkpoint import CheckpointError, check_checkpoint, problem
from streaming.cli import main
from tests.kafka_broker import produce_records
from tests.streaming.test_poison_records import _run_until_caught_up
from tests.streaming.test_run_kafka import _bookies, _conf, _creates, _keyed


def _layout(root, offsets, commits):
    for folder, batches in (("offsets", offsets), ("commits", commits)):
        (root / folder).mkdir(parents=True)
        for batch in batches:
            (root / folder / str(batch)).write_text("v1\n{}\n")
            (root / folder / f".{batch}.crc").write_text("crc")
    (root / "metadata").write_text('{"id":"q"}\n')
    return str(root)


@pytest.mark.parametrize(("offsets", "commits"), [
    ([], []), ([0], []), ([0], [0]), ([7, 8, 9], [7, 8]), ([7, 8, 9], [7, 8, 9]), ([100, 101, 102], [100, 101])])
def test_a_consistent_checkpoint_passes(tmp_path, offsets, commits):
    assert problem(_layout(tmp_path / "cp", offsets, commits)) is None


def test_a_missing_location_or_a_remote_one_passes(tmp_path):
    assert problem(str(tmp_path / "not-yet")) is None
    assert problem("hdfs://namenode/checkpoints/placement") is None


@pytest.mark.parametrize(("offsets", "commits", "says"), [
    ([7, 8], [7, 8, 9], "commits/ ends at batch 9 but offsets/ at batch 8 (offsets/9 missing)"),
    ([7, 9], [7, 8], "batch 8 is committed but offsets/8 is missing"),
    ([7, 8, 9], [7], "offsets/ ends at batch 9 but commits/ at batch 7 (commits/8 missing)"),
    ([3], [], "offsets/ ends at batch 3 but commits/ at no batch (commits/0 to commits/2 missing)"),
    ([], [4], "commits/ ends at batch 4 but offsets/ is empty"),
])
def test_a_damaged_log_is_named_with_the_options(tmp_path, offsets, commits, says):
    found = problem(_layout(tmp_path / "cp", offsets, commits))
    assert says in found
    assert "restore" in found and "new, empty location" in found and "\n" not in found


def test_an_empty_latest_file_is_damage(tmp_path):
    location = _layout(tmp_path / "cp", [0, 1], [0])
    (tmp_path / "cp" / "offsets" / "1").write_text("")
    with pytest.raises(CheckpointError, match="offsets/1 is empty or not a Spark log file"):
        check_checkpoint(location)


@pytest.fixture
def topics(kafka_topic):
    return {name: kafka_topic(partitions=1, prefix=name)
            for name in ("events", "requests", "decisions", "alerts", "dead", "status")}


def test_run_refuses_a_checkpoint_whose_latest_offsets_file_was_deleted(spark, kafka_bootstrap, topics, tmp_path,
                                                                        capsys):
    """Regression: deleting the latest offsets file gave Spark's "Multiple streaming jobs detected",
    though only one job ran."""
    checkpoint = tmp_path / "checkpoint"
    conf = _conf(kafka_bootstrap, topics, checkpoint)
    produce_records(kafka_bootstrap, topics["events"], _keyed(_bookies("c1")))
    produce_records(kafka_bootstrap, topics["requests"], _keyed(_creates("c1", 0, 5)))
    _run_until_caught_up(spark, conf, "checkpoint-damage")
    assert problem(str(checkpoint)) is None, "a checkpoint the job wrote and stopped is consistent"
    committed = max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    (checkpoint / "offsets" / str(committed)).unlink()

    conf_file = tmp_path / "engine.properties"
    conf_file.write_text("".join(f"{key}={value}\n" for key, value in conf.items()))
    assert main(["run", "--conf", str(conf_file)]) == 2
    [line] = [text for text in capsys.readouterr().err.splitlines() if text.startswith("placement-engine:")]
    assert f"offsets/{committed}" in line and "restore" in line and "engine.checkpointLocation" in line

