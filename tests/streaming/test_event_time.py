"""The watermark column of `run` (`streaming.job.event_time`): what moves idle ticks."""

import datetime as dt

from pyspark.sql import functions as F

from streaming.job import event_time, routing_fields


def _times(spark, values):
    frame = routing_fields(spark.createDataFrame([(v,) for v in values], "value string"), ["time"])
    return [row[0] for row in frame.select(event_time(F.col("_time"))).collect()]


def test_iso_and_epoch_millisecond_times_are_read_and_unreadable_ones_are_null(spark):
    iso, millis, missing, garbage, not_json = _times(spark, [
        '{"time": "2026-09-21T10:00:00.250Z"}', '{"time": 1790000000000}', '{"cluster": "c1"}',
        '{"time": "yesterday"}', "not json"])
    utc = dt.UTC
    assert iso.astimezone(utc) == dt.datetime(2026, 9, 21, 10, 0, 0, 250000, tzinfo=utc)
    assert millis.astimezone(utc) == dt.datetime.fromtimestamp(1_790_000_000, utc)
    assert missing is None and garbage is None and not_json is None


def test_a_time_far_in_the_future_counts_as_the_wall_clock_plus_five_minutes(spark):
    before = dt.datetime.now(dt.UTC)
    (clamped,) = _times(spark, ['{"time": "9999-12-31T00:00:00Z"}'])
    after = dt.datetime.now(dt.UTC)
    clamped = clamped.astimezone(dt.UTC)
    assert before + dt.timedelta(minutes=5) - dt.timedelta(seconds=1) <= clamped
    assert clamped <= after + dt.timedelta(minutes=5, seconds=1)


def test_a_time_outside_pandas_nanosecond_range_is_null_not_a_failed_batch(spark):
    """Regression: `0001-01-01T00:00:00Z` reached the state function's Arrow-to-pandas conversion as a
    year-1 timestamp and failed every batch holding it (`ArrowInvalid: ... out of bounds timestamp`)."""
    ancient, before_epoch, huge_millis, negative_millis, epoch = _times(spark, [
        '{"time": "0001-01-01T00:00:00Z"}', '{"time": "1969-12-31T23:59:59Z"}',
        '{"time": 9223372036854775807}', '{"time": -5}', '{"time": 0}'])
    assert ancient is None and before_epoch is None and huge_millis is None and negative_millis is None
    assert epoch.astimezone(dt.UTC) == dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
