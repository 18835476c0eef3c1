"""The session: checkpoints on the local file system are written through Hadoop's `FileSystem` API (no
`readlink` process per renamed file), checkpoints elsewhere and an operator's own choice are left to Spark;
a local master retries failed tasks; the master `spark-submit` gives wins over `engine.spark.master`."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from streaming.session import (
    CHECKPOINT_FILE_MANAGER,
    LOCAL_CHECKPOINT_FILE_MANAGER,
    LOCAL_TASK_ATTEMPTS,
    engine_session,
    use_local_checkpoint_writer,
    with_task_retries,
)
from streaming.settings import EngineSettings


@pytest.mark.parametrize("location", ["/var/lib/placement/checkpoint", "file:///tmp/checkpoint", "checkpoint"])
def test_a_local_checkpoint_is_written_through_the_file_system_api(unset_manager, location):
    assert use_local_checkpoint_writer(unset_manager, location)
    assert unset_manager.conf.get(CHECKPOINT_FILE_MANAGER) == LOCAL_CHECKPOINT_FILE_MANAGER


@pytest.mark.parametrize("location", ["hdfs://namenode:8020/placement/checkpoint", "s3a://bucket/checkpoint"])
def test_a_checkpoint_elsewhere_is_left_to_spark(unset_manager, location):
    assert not use_local_checkpoint_writer(unset_manager, location)
    assert unset_manager.conf.get(CHECKPOINT_FILE_MANAGER, None) is None


def test_an_operators_own_file_manager_is_kept(unset_manager):
    mine = "org.apache.spark.sql.execution.streaming.checkpointing.FileContextBasedCheckpointFileManager"
    unset_manager.conf.set(CHECKPOINT_FILE_MANAGER, mine)
    assert not use_local_checkpoint_writer(unset_manager, "/tmp/checkpoint")
    assert unset_manager.conf.get(CHECKPOINT_FILE_MANAGER) == mine


@pytest.mark.parametrize(("master", "expected"), [
    ("local", "local[1,4]"), ("local[2]", "local[2,4]"), ("local[*]", "local[*,4]"),
    ("local[2,1]", "local[2,1]"), ("local-cluster[2,1,1024]", "local-cluster[2,1,1024]"),
    ("spark://head:7077", "spark://head:7077"), ("yarn", "yarn"),
])
def test_a_local_master_retries_failed_tasks_and_other_masters_are_unchanged(master, expected):
    assert with_task_retries(master) == expected


def test_the_default_settings_give_a_local_master_with_task_retries(spark):
    session = engine_session(EngineSettings(), "placement-engine-tests")
    assert session.sparkContext.master == f"local[2,{LOCAL_TASK_ATTEMPTS}]"


def test_a_task_that_fails_once_succeeds_on_its_retry(spark, tmp_path):
    """Regression: under `local[2]` one failed task failed the whole job, with no retry."""
    marker = str(tmp_path / "failed-once")

    @F.udf("long")
    def fail_first_attempt(value):
        if not os.path.exists(marker):
            open(marker, "w").close()
            raise RuntimeError("first attempt fails")
        return value

    rows = spark.range(3).repartition(1).select(fail_first_attempt("id").alias("id")).collect()
    assert sorted(row.id for row in rows) == [0, 1, 2]
    assert os.path.exists(marker)


_PRINT_MASTER = """
from streaming.session import build_session
print("MASTER=" + build_session().sparkContext.master)
"""


def test_the_master_spark_submit_gives_wins(tmp_path):
    script = tmp_path / "print_master.py"
    script.write_text(_PRINT_MASTER)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1",
           "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run([str(Path(sys.executable).parent / "spark-submit"), "--master", "local[1]", str(script)],
                          capture_output=True, text=True, timeout=120, env=env, check=False)
    assert "MASTER=local[1]" in done.stdout.splitlines(), done.stderr[-2000:]
