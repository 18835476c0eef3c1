"""`run` on SIGINT/SIGTERM: the signal is recorded, the micro-batch in progress may finish (bounded), the
query stops, and the sink reports a batch cut short by the stop as part of it, not as a failure."""

import logging
import os
import signal

import pytest

from streaming import shutdown
from streaming.shutdown import StopSignals, serve_until_stopped


class FakeQuery:
    """A StreamingQuery whose micro-batch stays active for `active_polls` status polls; with
    `batch_polls`, micro-batches run back to back, one completing every `batch_polls` status polls."""

    def __init__(self, signals, *, active_polls=0, ends_by_itself_after=None, signal_at_wait=1, batch_polls=None):
        self.signals = signals
        self.active_polls = active_polls
        self.batch_polls = batch_polls
        self.ends_by_itself_after = ends_by_itself_after
        self.signal_at_wait = signal_at_wait
        self.waits = 0
        self.polls = 0
        self.stopped = False

    def awaitTermination(self, timeout):  # noqa: N802 - Spark's name
        self.waits += 1
        if self.ends_by_itself_after is not None and self.waits >= self.ends_by_itself_after:
            return True
        if self.waits == self.signal_at_wait:
            self.signals.received.append("SIGTERM")
        return False

    @property
    def isActive(self):  # noqa: N802 - Spark's name
        return not self.stopped

    @property
    def status(self):
        self.polls += 1
        return {"isTriggerActive": self.polls <= self.active_polls, "message": "", "isDataAvailable": True}

    @property
    def lastProgress(self):  # noqa: N802 - Spark's name
        if self.batch_polls is None:
            return {"batchId": 41}
        return {"batchId": 41 + self.polls // self.batch_polls}

    def stop(self):
        self.stopped = True


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


@pytest.fixture(autouse=True)
def not_stopping():
    shutdown.STOPPING.clear()
    yield
    shutdown.STOPPING.clear()


def test_a_query_that_ends_by_itself_is_not_stopped():
    signals = StopSignals(())
    query = FakeQuery(signals, ends_by_itself_after=3, signal_at_wait=None)
    assert serve_until_stopped(query, signals, 20) is None
    assert not query.stopped and not shutdown.STOPPING.is_set()


def test_a_stop_request_waits_for_the_micro_batch_in_progress_then_stops(caplog):
    signals, clock = StopSignals(()), FakeClock()
    query = FakeQuery(signals, active_polls=5, signal_at_wait=2)
    with caplog.at_level(logging.INFO, logger="placement-engine"):
        assert serve_until_stopped(query, signals, 20, clock=clock, sleep=clock.sleep) == "SIGTERM"
    assert query.stopped and query.polls == 6            # stopped at the first poll that saw no batch running
    assert shutdown.STOPPING.is_set()                    # the sink now reports an abort as part of the stop
    assert "SIGTERM received: stopping after the micro-batch in progress" in caplog.text
    assert "stopped on SIGTERM" in caplog.text


def test_micro_batches_running_past_the_grace_period_are_cut_short_at_its_end(caplog):
    signals, clock = StopSignals(()), FakeClock()
    query = FakeQuery(signals, active_polls=10_000)
    with caplog.at_level(logging.INFO, logger="placement-engine"):
        serve_until_stopped(query, signals, 2, clock=clock, sleep=clock.sleep)
    assert query.stopped and 2 <= clock.now < 2.1
    assert "did not finish within engine.stopGraceSeconds=2" in caplog.text


def test_a_job_that_is_behind_stops_once_the_micro_batch_in_progress_completes(caplog):
    """Micro-batches run back to back (never a moment without one): the query stops right after the
    one running at the request completes, not at the end of the grace period."""
    signals, clock = StopSignals(()), FakeClock()
    query = FakeQuery(signals, active_polls=10_000, batch_polls=7)
    with caplog.at_level(logging.INFO, logger="placement-engine"):
        serve_until_stopped(query, signals, 20, clock=clock, sleep=clock.sleep)
    assert query.stopped and query.polls == 7 and clock.now < 1
    assert "did not finish" not in caplog.text


def test_a_second_signal_stops_at_once():
    signals, clock = StopSignals(()), FakeClock()
    query = FakeQuery(signals, active_polls=10_000)
    signals.received += ["SIGTERM", "SIGINT"]            # asked twice before the wait began
    serve_until_stopped(query, signals, 20, clock=clock, sleep=clock.sleep)
    assert query.stopped and clock.now == 0


def test_signals_are_recorded_instead_of_raised_and_the_old_handlers_come_back():
    before = signal.getsignal(signal.SIGTERM)
    with StopSignals() as signals:
        os.kill(os.getpid(), signal.SIGTERM)             # would end the test run without the handler
        os.kill(os.getpid(), signal.SIGINT)              # would raise KeyboardInterrupt
        assert signals.received == ["SIGTERM", "SIGINT"]
        assert signals.requested and signals.hurried
    assert signal.getsignal(signal.SIGTERM) is before


def test_the_sink_reports_a_batch_aborted_by_the_stop_as_information_not_a_warning(caplog):
    from pyspark.sql.types import StringType, StructField, StructType

    from streaming.kafka_options import KafkaSinkSettings
    from streaming.kafka_sink import KafkaStreamWriter

    writer = KafkaStreamWriter(KafkaSinkSettings.from_options(
        {"kafka.bootstrap.servers": "127.0.0.1:1", "topic": "t"}, StructType([StructField("value", StringType())])))
    with caplog.at_level(logging.INFO, logger="streaming.kafka_sink"):
        writer.abort([], 7)
        shutdown.STOPPING.set()
        writer.abort([], 8)
    levels = {record.getMessage().split(";")[0]: record.levelname for record in caplog.records}
    assert levels == {"placement-kafka sink: batch 7 aborted": "WARNING",
                      "placement-kafka sink: batch 8 stopped with the job": "INFO"}


class FakeSpark:
    def __init__(self, release) -> None:
        self.release = release
        self.stops = 0

    def stop(self) -> None:
        self.stops += 1
        self.release.wait()


def test_stop_spark_returns_once_spark_has_stopped():
    import threading

    released = threading.Event()
    released.set()
    exits: list[int] = []
    spark = FakeSpark(released)
    assert shutdown.stop_spark(spark, 30, exit_now=exits.append) is True
    assert spark.stops == 1 and exits == []


def test_a_spark_stop_that_hangs_is_abandoned_and_the_process_exits_with_0(caplog):
    import threading

    hanging = threading.Event()
    exits: list[int] = []
    try:
        assert shutdown.stop_spark(FakeSpark(hanging), 0.2, exit_now=exits.append) is False
    finally:
        hanging.set()
    assert exits == [0]
    assert "Spark did not stop within 0.2 s" in caplog.text
