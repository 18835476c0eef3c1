"""Checkpoints on the local file system are written through Hadoop's `FileSystem` API (no `readlink`
process per renamed file); checkpoints elsewhere, and an operator's own choice, are left to Spark."""

import pytest

from streaming.session import CHECKPOINT_FILE_MANAGER, LOCAL_CHECKPOINT_FILE_MANAGER, use_local_checkpoint_writer


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
