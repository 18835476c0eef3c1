"""A replay routes records in Python (`streaming.packed`); `run` routes them with Spark expressions.

Both must put a record in the same (cluster, shard) group, or a what-if replay would not predict
what the streaming job decides. Checked here against the real Spark expressions of `streaming.job`.
"""

import json

import pytest
from pyspark.sql import functions as F

from state.outputs import Output
from streaming.job import _shard_column, keyed_records, routing_fields, spread_shards
from streaming.packed import (
    PACK_SIZE,
    pack,
    pack_outputs,
    read_fields,
    route,
    routing_names,
    spark_xxhash64,
    summary_counts,
    top_level,
    unpack,
)

RECORDS = [
    '{"type":"ledger_create","cluster":"c1","ledger_id":12,"request_id":"r1"}',
    '{"type":"ledger_create","cluster":"c1","request_id":"r2"}',
    '{"type":"bookie_replace","cluster":"c1","ledger_id":"L-7","request_id":"r3"}',
    '{"type":"ensemble_check","cluster":"c1","ledger_id":123456789012345678901234567890}',
    '{"type":"ledger_create","cluster":"c1"}',
    '{"type":"bookie_writable","cluster":"c1","bookie":"b:1"}',
    '{"cluster":"a","cluster":"b","type":"ledger_create","ledger_id":1,"ledger_id":2}',
    '{"cluster":5,"type":"ledger_create"}',
    '{"cluster":1.50}', '{"cluster":1e3}', '{"cluster":true}', '{"cluster":null}', '{"cluster":[]}',
    '{"cluster":{"x": [1, 2.5, "s", null, false]}}', '{"cluster":"a",}', '{"cluster":"a"} trailing text',
    'not json', '', '   ', '["cluster"]', '{"x":{"cluster":"nested"}}', '{"clu\\u0073ter":"escaped key"}',
    '{"cluster":"t\\tab\\u00e9\\n"}', '{"cluster":"a","b":}', '{"cluster":"a"', '{"cluster":-0}',
    '{"cluster":"x","bad":NaN}', '  {"cluster":"spaces"}  ', '{"cluster":"é","type":"ledger_create","ledger_id":"ü"}',
    '{"type":"ledger_create","cluster":"c1","ledger_id":null,"request_id":7}',
    '{"type":"LEDGER_CREATE","cluster":"c1","ledger_id":3}',
    '{"type":"bookie_writable","cluster":"c1","type":"ledger_create","ledger_id":5,"ledger_id":null}',
    '{"type":"ledger_create","cluster":"c1","type":"bookie_lost","request_id":"a","request_id":"b"}',
    '{"cluster":"c1","cluster":null,"type":"ensemble_check","ledger_id":{"n":1},"ledger_id":"x"}',
    '{"cluster":"c\\ud800"}',
    '{"cluster":"\\ud83d\\ude00 pair","type":"ledger_create","ledger_id":"\\ud83d\\ude00"}',
    '{"cluster":"c","type":"ledger_create","request_id":"\\ud800x"}',
    '{"cluster":"c","type":"ledger_create","ledger_id":"\\udc00"}',
    '{"cluster":"c","type":"bookie_lost","ledger_id":{"k":["\\ud800"]},"time":"\\ud800"}',
    '{"cluster":"c","type":"ledger_create","ledger_id":{"\\udc00\\u00e9":["\\ud800", 1.5]}}',
    '{"cluster":"\\ud800","cluster":"c","type":"ledger_create"}',
    '{"cluster":{"\\ud83d\\ude00":"\\ud83d\\ude00 \\u2028"}}',
]


@pytest.mark.parametrize("shards", [1, 3, 7])
def test_python_routing_matches_the_run_jobs_spark_expressions(spark, shards):
    frame = routing_fields(spark.createDataFrame([(r,) for r in RECORDS], "value string"), routing_names(shards))
    frame = frame.select("value", F.coalesce("_cluster", F.lit("")).alias("cluster"),
                         _shard_column(shards).alias("shards"))
    for row in frame.collect():
        cluster, targets = route(top_level(row.value), shards)
        assert (cluster, sorted(targets)) == (row.cluster, sorted(row.shards)), row.value


def test_a_repeated_key_routes_by_its_last_value_that_is_not_null_as_the_parser_reads_it():
    assert route(top_level('{"cluster":"a","cluster":"b"}'), 1)[0] == "b"         # Python's json: "b" too
    assert route(top_level('{"cluster":"a","cluster":null}'), 1)[0] == "a"        # the parser: no cluster
    assert route(top_level('{"type":"bookie_lost","cluster":"c","type":"ledger_create","ledger_id":1}'), 3)[1] == \
        (spark_xxhash64(b"l:1") % 3,)


@pytest.mark.parametrize("shards", [1, 3])
def test_the_run_jobs_keyed_records_reach_the_cluster_and_shards_python_routes_to(spark, shards):
    """`keyed_records` (what `place` groups by) gives each record the cluster and shards `route` names,
    each shard once."""
    zero = F.lit(0).cast("long")
    frame = spark.createDataFrame([(r,) for r in RECORDS], "value string").select(
        "value", zero.alias("o1"), zero.alias("o2"), zero.alias("o3"), F.lit("t").alias("src_name"),
        F.lit(0).alias("src_part"), zero.alias("src_pos"))
    reached: dict[str, list[int]] = {}
    for row in keyed_records(frame, shards).collect():
        assert row.cluster == route(top_level(row.value), shards)[0], row.value
        reached.setdefault(row.value, []).append(row.shard % shards)
    for value in RECORDS:
        assert sorted(reached[value]) == sorted(route(top_level(value), shards)[1]), value


@pytest.mark.parametrize("shards", [1, 3])
def test_with_a_watermark_time_is_read_in_the_same_parse_and_one_jackson_cannot_write_nulls_all(spark, shards):
    """`run` with idle ticks reads `time` too (`routing_names(..., with_time=True)`); the state function's
    shard guard reads records as that does (`read_fields`)."""
    records = RECORDS + ['{"cluster":"c","type":"ledger_create","ledger_id":1,"time":"\\ud800"}']
    frame = spark.createDataFrame([(r,) for r in records], "value string")
    names = routing_names(shards, with_time=True)
    rows = routing_fields(frame, names).collect()
    for row in rows:
        assert read_fields(top_level(row.value), names) == {name: row[f"_{name}"] for name in names}, row.value
    assert read_fields(top_level(records[-1]), names)["cluster"] is None


def test_xxhash64_is_sparks_for_every_length_and_for_non_ascii_text(spark):
    texts = ["", "a", "l:12", "r:", "é", "日本語のテキスト", "x" * 31, "y" * 32, "z" * 33,
             *("".join(chr(97 + (i * 7 + j) % 26) for j in range(n)) for i, n in enumerate(range(0, 80, 3)))]
    rows = spark.createDataFrame([(t,) for t in texts], "t string").select("t", F.xxhash64("t").alias("h")).collect()
    assert {row.t: row.h for row in rows} == {t: spark_xxhash64(t.encode("utf-8")) for t in texts}


def test_packed_entries_survive_any_text_and_carry_no_line_or_field_breaks():
    entries = [(0, 1, 2, 'plain {"json":1}'), (1, 0, 3, "tab\there and \x1e\x1f control"), (2, 1, 4, "é ☃ \ud800?")]
    value = pack(entries)
    assert "\n" not in value and "\t" not in value and value.isascii()
    assert list(unpack([value])) == [tuple(e) for e in entries]


def test_packed_outputs_keep_their_order_per_kind_and_count_what_the_summary_reports():
    produced = [
        Output("decision", "c1", "d1", {"status": "ok", "adherence": "MEETS_STRICT"}),
        Output("alert", "c1", "a1", {"type": "placement.decision.not_adhering"}),
        Output("decision", "c1", "d2", {"status": "failed", "adherence": None,
                                        "error": {"code": "NOT_ENOUGH_BOOKIES"}}),
        Output("dead_letter", "", "x1", {"code": "INVALID_JSON"}),
    ]
    columns = pack_outputs(produced)
    rows = list(zip(columns["kind"], columns["cluster"], columns["id"], columns["value"]))
    assert rows[:3] == [
        ("decision", "c1", "2", '{"adherence":"MEETS_STRICT","status":"ok"}\n'
                                '{"adherence":null,"error":{"code":"NOT_ENOUGH_BOOKIES"},"status":"failed"}'),
        ("alert", "c1", "1", '{"type":"placement.decision.not_adhering"}'),
        ("dead_letter", "", "1", '{"code":"INVALID_JSON"}'),
    ]
    assert [(kind, cluster, json.loads(value)) for kind, cluster, _, value in rows[3:]] == [
        ("summary", "c1", summary_counts(produced)["c1"]), ("summary", "", summary_counts(produced)[""])]
    assert summary_counts(produced)["c1"] == {
        "kind": {"decision": 2, "alert": 1}, "status": {"ok": 1, "failed": 1}, "adherence": {"MEETS_STRICT": 1},
        "error": {"NOT_ENOUGH_BOOKIES": 1}, "alert": {"placement.decision.not_adhering": 1}}


def test_many_outputs_are_split_into_rows_of_at_most_pack_size_in_order():
    produced = [Output("decision", "c1", f"d{n}", {"n": n}) for n in range(PACK_SIZE + 1)]
    columns = pack_outputs(produced)
    rows = [(kind, count, value) for kind, count, value in zip(columns["kind"], columns["id"], columns["value"])
            if kind == "decision"]
    assert [count for _, count, _ in rows] == [str(PACK_SIZE), "1"]
    assert [json.loads(line)["n"] for _, _, value in rows for line in value.split("\n")] == list(range(PACK_SIZE + 1))


@pytest.mark.parametrize("shards", [2, 3, 4])
def test_a_clusters_shards_are_spread_over_the_shuffle_partitions(spark, shards):
    """Plain shard numbers put all of "busy"'s shards in one of 2 partitions; the labels must not."""
    rows = spark.createDataFrame([(c, s) for c in ("busy", "c1", "x", "cluster-42") for s in range(shards)],
                                 "cluster string, shard int")
    labelled = rows.select("cluster", "shard",
                           spread_shards(F.col("cluster"), F.col("shard"), shards, 2).alias("label"))
    placed = labelled.repartition(2, "cluster", "label").select("*", F.spark_partition_id().alias("partition"))
    for row in placed.collect():
        assert row.label % shards == row.shard
        assert row.partition == row.shard % 2, row
