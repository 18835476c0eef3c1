"""Shared fixtures for the Spark tier (STYLE R14): one SparkSession and one Kafka broker per test session.

* ``kafka_bootstrap``: ``"127.0.0.1:PORT"`` of a tansu broker started for the session, or the broker named by
  ``PLACEMENT_TEST_KAFKA=host:port`` (then nothing is started).
* ``kafka_topic``: a factory ``kafka_topic(partitions=3, prefix="t") -> name`` creating a uniquely named topic.
* ``spark``: ``build_session("local[2]")``, stopped at the end of the session.
* ``unset_manager``: the session with no checkpoint file manager set (restored afterwards), so a test can
  see which code path sets it.

Tests take their checkpoint directories from ``tmp_path``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.kafka_broker import TansuBroker, create_topic, external_bootstrap, unique_topic_name


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    external = external_bootstrap()
    if external is not None:
        yield external
        return
    broker = TansuBroker().start()
    try:
        yield broker.bootstrap
    finally:
        broker.stop()


@pytest.fixture
def kafka_topic(kafka_bootstrap: str) -> Callable[..., str]:
    def make(partitions: int = 3, prefix: str = "t") -> str:
        return create_topic(kafka_bootstrap, unique_topic_name(prefix), partitions=partitions)

    return make


@pytest.fixture(scope="session")
def spark():
    from streaming.session import build_session

    session = build_session("local[2]", app_name="placement-engine-tests")
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture()
def unset_manager(spark):
    """`spark` without `spark.sql.streaming.checkpointFileManagerClass` for the test; the setting is put back."""
    from streaming.session import CHECKPOINT_FILE_MANAGER

    before = spark.conf.get(CHECKPOINT_FILE_MANAGER, None)
    spark.conf.unset(CHECKPOINT_FILE_MANAGER)
    yield spark
    if before is None:
        spark.conf.unset(CHECKPOINT_FILE_MANAGER)
    else:
        spark.conf.set(CHECKPOINT_FILE_MANAGER, before)
