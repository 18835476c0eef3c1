"""`start_query`: a query whose driver-side Python worker did not connect back in time is started again
(fake queries; one check reads Spark's own jar for the message, so an upgrade that changes it is noticed)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pyspark
import pytest

from streaming.query_start import WORKER_START_FAILURE, start_query, worker_start_failed


class FakeQuery:
    def __init__(self, failure: str | None, *, active: bool = False, initializing_polls: int = 2) -> None:
        self._failure = failure
        self._active = active
        self._polls = initializing_polls

    @property
    def isActive(self) -> bool:
        return self._active or self._polls > 0

    @property
    def status(self) -> dict:
        if self._polls > 0:
            self._polls -= 1
            return {"message": "Initializing sources"}
        return {"message": "Waiting for data to arrive"}

    def exception(self) -> Exception | None:
        return None if self._failure is None else Exception(self._failure)


TIMED_OUT = f"[STREAM_FAILED] Query terminated with exception: {WORKER_START_FAILURE}. SQLSTATE: XXKST"


def _starter(queries: list[FakeQuery]):
    started: list[FakeQuery] = []

    def start() -> FakeQuery:
        started.append(queries[len(started)])
        return started[-1]

    return start, started


def test_a_query_whose_worker_did_not_connect_back_is_started_again(caplog):
    good = FakeQuery(None, active=True)
    start, started = _starter([FakeQuery(TIMED_OUT), good])
    assert start_query(start, sleep=lambda _s: None) is good
    assert len(started) == 2
    assert "did not connect back" in caplog.text and "start 2 of 3" in caplog.text


@pytest.mark.parametrize("failure", [None, "MissingTopicError: no such topic"])
def test_a_query_that_ended_for_another_reason_is_returned_as_it_is(failure):
    ended = FakeQuery(failure)
    start, started = _starter([ended, FakeQuery(None, active=True)])
    assert start_query(start, sleep=lambda _s: None) is ended and len(started) == 1


def test_after_the_last_attempt_the_failed_query_is_returned():
    queries = [FakeQuery(TIMED_OUT) for _ in range(3)]
    start, started = _starter(queries)
    last = start_query(start, attempts=3, sleep=lambda _s: None)
    assert last is queries[-1] and worker_start_failed(last.exception())


def test_spark_still_says_so():
    core = next((Path(pyspark.__file__).parent / "jars").glob("spark-core_*.jar"))
    with zipfile.ZipFile(core) as jar:
        factory = jar.read("org/apache/spark/api/python/PythonWorkerFactory.class")
    assert WORKER_START_FAILURE.encode() in factory
