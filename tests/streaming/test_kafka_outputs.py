"""`streaming.job.kafka_outputs`: the Kafka rows of the engine's outputs, alerts in CloudEvents binary mode."""

import json

from pyspark.sql import functions as F

from state.outputs import alert
from streaming.job import CLOUDEVENT_HEADERS, kafka_outputs
from streaming.settings import EngineSettings

ALERTS = [
    alert(alert_type="placement.bookie.flapping", cluster="c1", subject="bk1:3181", time_ms=1_790_000_000_250,
          key="bk1:3181", severity="warning", data={"bookie": "bk1:3181", "flaps": 3, "window_s": 60.5}),
    alert(alert_type="placement.decision.not_adhering", cluster="clü/ster \"q\"", subject="ledger/7",
          time_ms=0, key="r7", severity="error",
          data={"ensemble": ["a:1", "b:2"], "nested": {"x": [1, 2.5, None, True, "é\\n\u2028"]}, "none": None}),
]


def test_binary_alerts_carry_each_attribute_as_get_json_object_read_it_and_their_data_as_the_value(spark):
    """One json_tuple per alert gives the headers and value the seven get_json_object calls gave,
    byte for byte; a decision keeps its value and plain header."""
    rows = [(o.kind, o.cluster, o.id, o.to_json()) for o in ALERTS]
    rows.append(("decision", "c1", "d1", '{"cluster":"c1","request_id":"r1","status":"ok","ensemble":["a:1"]}'))
    frame = spark.createDataFrame(rows, "kind string, cluster string, id string, value string").coalesce(1)
    settings = EngineSettings(alerts_kafka_mode="binary")
    got = kafka_outputs(frame, settings).collect()
    expected = frame.select(
        "kind", "value", F.get_json_object("value", "$.data").alias("data"),
        *[F.get_json_object("value", path).alias(name) for name, path in CLOUDEVENT_HEADERS]).collect()
    assert [r.key for r in got] == [cluster for _, cluster, _, _ in rows]
    for out, row in zip(got, expected, strict=True):
        headers = {h.key: h.value for h in out.headers}
        if row.kind == "alert":
            assert out.topic == settings.alerts_topic and out.value == row.data
            assert json.loads(row.data)["cluster"] == out.key
            assert headers == {**{name: getattr(row, name).encode() for name, _ in CLOUDEVENT_HEADERS
                                  if getattr(row, name) is not None},
                               "content-type": b"application/json"}
        else:
            assert out.topic == settings.decisions_topic and out.value == row.value
            assert headers == {"content-type": b"application/json"}
