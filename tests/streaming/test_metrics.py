"""`run`'s metrics without a query: a recorded progress becomes metrics, the state function's metrics
row counts what it handed on, the endpoint serves over HTTP, and the dashboard names only exported metrics.

`metrics_progress.json` is the progress of a real `run` query (tansu, two clusters, a record that is not
JSON, `maxOffsetsPerTrigger=10`): nine micro-batches, the last three with nothing to read. Its topics
were renamed `placement-events` and `placement-requests`; rocksdb's custom metrics were trimmed.
"""

from __future__ import annotations

import json
import logging
import re
import socket
import urllib.request
from collections import Counter
from pathlib import Path

import promql_parser
import pytest
from prometheus_client.parser import text_string_to_metric_families

import streaming.stateful as stateful
from state.settings import ModelSettings
from state.snapshot import loads
from state.status import status_gauges
from streaming.config import ConfigError
from streaming.metrics import MetricsEndpointError, start_metrics
from streaming.metrics_progress import OTHER_CLUSTERS, EngineMetrics, source_lag
from streaming.metrics_rows import METRICS, OBSERVATION, ROWS, MetricsRow, OutputCounts
from streaming.settings import engine_settings
from tests.streaming.test_model_cache import CONF, GroupState, _batches, _day, _run

HERE = Path(__file__).parent
RECORDED = json.loads((HERE / "metrics_progress.json").read_text(encoding="utf-8"))
DASHBOARD = HERE.parents[1] / "conf" / "grafana-dashboard.json"


def _value(metrics: EngineMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def _fed(progresses, **options) -> EngineMetrics:
    metrics = EngineMetrics(process=False, **options)
    for progress in progresses:
        metrics.on_progress(progress)
    return metrics


def _rows(progress) -> list[MetricsRow]:
    return [MetricsRow.from_json(text) for text in progress["observedMetrics"][OBSERVATION][ROWS]]


def _progress(batch: int, rows=(), *, duration_ms: int = 100, start=None, end=None, latest=None) -> dict:
    """A minimal progress: one source with the given offsets, the given metrics rows."""
    offsets = {"p:0": 0}
    return {"batchId": batch, "timestamp": "2026-01-01T00:00:00.000Z", "numInputRows": 0,
            "durationMs": {"addBatch": duration_ms, "triggerExecution": duration_ms},
            "sources": [{"description": "x", "startOffset": start or offsets, "endOffset": end or offsets,
                         "latestOffset": latest or offsets, "numInputRows": 0}],
            "observedMetrics": {OBSERVATION: {ROWS: [row.to_json() for row in rows]}}}


def _row(cluster: str, shard: int = 0, *, decisions: int = 0, **gauges: int):
    counts = OutputCounts()
    counts.decisions[("ok", "rackaware", "MEETS_STRICT")] = decisions
    return counts.to_output(cluster, shard, {"clock_ms": 0, "topology_version": 1, **gauges})


# --------------------------------------------------------------------------------------- stream health


def test_consumer_lag_is_what_was_waiting_at_the_batch_start_and_falls_to_0_when_caught_up():
    second = RECORDED[1]["sources"][0]
    assert source_lag(second).lag == {"placement-events:0": 0, "placement-events:1": 13 - 2,
                                      "placement-requests:0": 0, "placement-requests:1": 41 - 8}
    assert source_lag(second).left == (13 - 5) + (41 - 15)         # seen when planned, left for the next
    first = RECORDED[0]["sources"][0]                               # no start offset after a start
    assert source_lag(first).lag["placement-requests:1"] == 41 - 8

    metrics = _fed(RECORDED[:2])
    assert _value(metrics, "placement_kafka_lag_records", topic="placement-requests", partition="1") == 33
    metrics = _fed(RECORDED)
    for topic in ("placement-events", "placement-requests"):
        for partition in ("0", "1"):
            assert _value(metrics, "placement_kafka_lag_records", topic=topic, partition=partition) == 0


def test_a_recorded_progress_gives_rows_durations_state_and_watermark():
    metrics = _fed(RECORDED)
    source = "placement-events,placement-requests"
    assert _value(metrics, "placement_batches_total") == len(RECORDED)
    assert _value(metrics, "placement_input_rows_total", source=source) == sum(p["numInputRows"] for p in RECORDED)
    last = RECORDED[-1]
    assert _value(metrics, "placement_processed_rows_per_second", source=source) == \
        last["sources"][0]["processedRowsPerSecond"]
    assert _value(metrics, "placement_trigger_to_commit_seconds_count") == len(RECORDED)
    assert _value(metrics, "placement_trigger_to_commit_seconds_sum") == pytest.approx(
        sum(p["durationMs"]["triggerExecution"] for p in RECORDED) / 1000)
    assert _value(metrics, "placement_batch_duration_seconds_sum") == pytest.approx(
        sum(p["durationMs"]["addBatch"] for p in RECORDED) / 1000)
    assert _value(metrics, "placement_batch_phase_seconds", phase="queryPlanning") == \
        last["durationMs"]["queryPlanning"] / 1000
    operator = last["stateOperators"][0]
    assert _value(metrics, "placement_state_rows") == operator["numRowsTotal"]
    assert _value(metrics, "placement_state_memory_bytes") == operator["memoryUsedBytes"]
    # 2026-11-28T04:57:28.749Z (the last batch's start) minus the watermark 2026-09-21T14:13:15.000Z
    assert last["eventTime"]["watermark"] == "2026-09-21T14:13:15.000Z"
    assert _value(metrics, "placement_watermark_delay_seconds") == pytest.approx(
        _seconds(last["timestamp"]) - _seconds("2026-09-21T14:13:15.000Z"))
    first_only = _fed(RECORDED[:1])                                  # watermark 1970: none yet
    assert _value(first_only, "placement_watermark_delay_seconds") == 0


def _seconds(text: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


# ------------------------------------------------------------------------------------- engine counters


def test_engine_counters_are_the_sums_of_the_observed_rows():
    metrics = _fed(RECORDED)
    expected = Counter()
    for progress in RECORDED:
        for row in _rows(progress):
            for (status, _policy, _adherence), n in row.decisions:
                expected["decisions", row.cluster, status] += n
            for (alert_type, severity), n in row.alerts:
                expected["alerts", row.cluster, alert_type, severity] += n
            for (source, code), n in row.dead_letters:
                expected["dead", source, code] += n
    assert expected["decisions", "c1", "ok"] == 12 and expected["decisions", "c2", "failed"] == 3
    for key, n in expected.items():
        if key[0] == "decisions":
            adherence = "MEETS_STRICT" if key[2] == "ok" else "none"
            assert _value(metrics, "placement_decisions_total", cluster=key[1], status=key[2], policy="rackaware",
                          adherence=adherence) == n
        elif key[0] == "alerts":
            assert _value(metrics, "placement_alerts_total", cluster=key[1], type=key[2], severity=key[3]) == n
        else:
            assert _value(metrics, "placement_dead_letters_total", source=key[1], code=key[2]) == n
    assert expected["dead", "placement-events", "INVALID_JSON"] == 1


def test_clusters_past_max_clusters_share_the_other_label_and_their_gauges_are_summed():
    rows = [_row("a", decisions=1, writable=3, not_adhering=1), _row("b", decisions=2, writable=4, not_adhering=2),
            _row("c", decisions=5, writable=5, default_rack=1)]
    unreadable = OutputCounts()
    unreadable.dead_letters[("placement-events", "INVALID_JSON")] = 1
    metrics = _fed([_progress(0, [unreadable.to_output("", 0, None), *rows])], max_clusters=1)
    assert _value(metrics, "placement_decisions_total", cluster="a", status="ok", policy="rackaware",
                  adherence="MEETS_STRICT") == 1           # the unreadable-cluster group took no label
    assert _value(metrics, "placement_decisions_total", cluster=OTHER_CLUSTERS, status="ok", policy="rackaware",
                  adherence="MEETS_STRICT") == 7
    assert _value(metrics, "placement_bookies", cluster=OTHER_CLUSTERS, state="writable") == 9
    assert _value(metrics, "placement_default_rack_bookies", cluster=OTHER_CLUSTERS) == 1
    assert _value(metrics, "placement_open_ledger_alerts", cluster=OTHER_CLUSTERS,
                  type="placement.ledger.not_adhering") == 2
    assert _value(metrics, "placement_topology_version", cluster=OTHER_CLUSTERS) is None
    assert _value(metrics, "placement_clusters") == 3
    metrics.on_progress(_progress(1, [_row("b", decisions=1, writable=4)]))
    assert _value(metrics, "placement_decisions_total", cluster="b", status="ok", policy="rackaware",
                  adherence="MEETS_STRICT") is None         # first seen keeps the label: b never gets one


def test_a_shard_that_did_not_run_keeps_its_ledger_gauges_and_topology_comes_from_the_latest_row():
    metrics = _fed([_progress(0, [_row("c1", 0, remembered_ledgers=10, not_adhering=1, writable=6, topology_version=3,
                                       skew_open=1),
                                  _row("c1", 1, remembered_ledgers=20, not_adhering=2, writable=6,
                                       topology_version=3)]),
                    _progress(1, [_row("c1", 1, remembered_ledgers=25, not_adhering=0, writable=5, readonly=1,
                                       topology_version=4, clock_ms=90_000)])])
    assert _value(metrics, "placement_remembered_ledgers", cluster="c1") == 10 + 25
    assert _value(metrics, "placement_open_ledger_alerts", cluster="c1", type="placement.ledger.not_adhering") == 1
    assert _value(metrics, "placement_open_skew_alerts", cluster="c1") == 1, "shard 0's, kept"
    assert _value(metrics, "placement_bookies", cluster="c1", state="writable") == 5
    assert _value(metrics, "placement_bookies", cluster="c1", state="readonly") == 1
    assert _value(metrics, "placement_topology_version", cluster="c1") == 4
    assert _value(metrics, "placement_cluster_clock_seconds", cluster="c1") == 90


# ---------------------------------------------------------------------------------------------- behind


def test_behind_is_said_once_per_episode_with_the_lag_and_caught_up_once(caplog):
    waiting = {"start": {"p:0": 0}, "end": {"p:0": 100}, "latest": {"p:0": 100}}
    quiet = {"start": {"p:0": 100}, "end": {"p:0": 100}, "latest": {"p:0": 100}}
    metrics = EngineMetrics(process=False, trigger_seconds=1.0)
    with caplog.at_level(logging.INFO, logger="placement-engine"):
        metrics.on_progress(_progress(0, duration_ms=9000, **waiting))      # the first batch: not judged
        for batch in range(1, 5):
            metrics.on_progress(_progress(batch, duration_ms=3000, **waiting))
            assert _value(metrics, "placement_behind") == 1
        metrics.on_progress(_progress(5, duration_ms=200, **quiet))
        metrics.on_progress(_progress(6, duration_ms=200, **quiet))
        metrics.on_progress(_progress(7, duration_ms=3000, **waiting))
        metrics.on_idle()
    lines = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "placement-engine"]
    assert [level for level, _ in lines] == ["WARNING", "INFO", "WARNING", "INFO"], lines
    assert lines[0][1].startswith("behind: micro-batch 1 took 3.0 s (trigger 1 s) with 100 record(s) waiting")
    assert lines[1][1].startswith("caught up: micro-batch 5")
    assert lines[3][1] == "caught up: nothing left to read"
    assert _value(metrics, "placement_behind") == 0


# ------------------------------------------------------------------------------ the state function's row


def test_the_state_function_adds_one_metrics_row_per_call_counting_exactly_what_it_handed_on(monkeypatch):
    settings = ModelSettings.from_conf(CONF)
    lines = _day() + ["not json"]

    def run(metrics: bool):
        monkeypatch.setattr(stateful, "MODEL_CACHE", stateful.ModelCache())
        function, state = stateful.make_state_function(settings, "kafka", metrics=metrics), GroupState()
        return [_run(function, state, batch, first) for batch, first in _batches(lines, 25)], state

    plain, _ = run(False)
    with_metrics, state = run(True)
    assert all(kind != METRICS for batch in plain for kind, *_ in batch)
    for without, batch in zip(plain, with_metrics):
        assert [row for row in batch if row[0] != METRICS] == without      # the outputs are unchanged
        rows = [MetricsRow.from_json(value) for kind, _, _, value in batch if kind == METRICS]
        assert len(rows) == 1 and rows[0].cluster == "c1" and rows[0].shard == 0
        written = Counter()
        for kind, _, _, value in without:
            payload = json.loads(value)
            if kind == "decision":
                written["decision", payload["status"], payload["adherence"] or "none"] += 1
            elif kind == "alert":
                written["alert", payload["type"], payload["data"]["severity"]] += 1
            elif kind == "dead_letter":
                written["dead_letter", payload["source"]["topic"], payload["code"]] += 1
        counted = Counter()
        for (status, _policy, adherence), n in rows[0].decisions:
            counted["decision", status, adherence] += n
        for (alert_type, severity), n in rows[0].alerts:
            counted["alert", alert_type, severity] += n
        for (source, code), n in rows[0].dead_letters:
            counted["dead_letter", source, code] += n
        assert counted == written
    last = MetricsRow.from_json([value for kind, _, _, value in with_metrics[-1] if kind == METRICS][0])
    model = loads(state.value[0], settings, codec=stateful.STATE_CODEC)
    assert last.gauges == status_gauges(model) and last.gauges["writable"] == len(model.writable)
    assert any(row.dead_letters for batch in with_metrics for kind, _, _, value in batch if kind == METRICS
               for row in [MetricsRow.from_json(value)])


def test_a_metrics_row_that_is_not_one_is_a_value_error():
    with pytest.raises(ValueError, match="not a metrics row"):
        MetricsRow.from_json('{"cluster": "c1"}')


# ------------------------------------------------------------------------------------------- endpoint


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_the_endpoint_serves_the_registry_over_http_and_a_taken_port_is_a_configuration_error():
    port = _free_port()
    conf = {"engine.metrics.port": str(port), "engine.metrics.host": "127.0.0.1"}
    running = start_metrics(engine_settings(conf))
    try:
        running.metrics.on_progress(RECORDED[1])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
            text = answer.read().decode()
        families = {family.name: family for family in text_string_to_metric_families(text)}
        assert families["placement_decisions"].type == "counter"
        assert [s.value for s in families["placement_kafka_lag_records"].samples
                if s.labels == {"topic": "placement-requests", "partition": "1"}] == [33]
        assert not any(name.endswith("_created") for name in families)
        with pytest.raises(MetricsEndpointError) as refused:
            start_metrics(engine_settings(conf))
        assert isinstance(refused.value, ConfigError)              # `run` exits with 2 and this one line
        assert str(refused.value).startswith(f"engine.metrics.port: port {port} is in use on 127.0.0.1")
        assert "engine.metrics.port=0" in str(refused.value)
    finally:
        running.stop()
    assert start_metrics(engine_settings({"engine.metrics.port": "0"})).port is None


@pytest.mark.parametrize("value", ["-1", "65536", "http"])
def test_a_bad_port_names_the_key(value):
    with pytest.raises(ConfigError, match="engine.metrics.port: expected a TCP port"):
        engine_settings({"engine.metrics.port": value})


# ------------------------------------------------------------------------------------------- dashboard

GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h"}
"""Grafana's own variables, replaced by typical values so Prometheus' grammar applies."""


def _exported_names() -> set[str]:
    """Every series name the engine exports once it has seen a progress with metrics rows."""
    metrics = _fed(RECORDED)
    metrics.on_progress(_progress(len(RECORDED), [_row("c1", remembered_ledgers=1)]))
    return {sample.name for family in metrics.registry.collect() for sample in family.samples}


def _selectors(expr: str) -> list[str]:
    for variable, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    names: list[str] = []

    def visit(node) -> bool:
        if isinstance(node, promql_parser.VectorSelector):
            names.append(node.name)
        return True

    promql_parser.walk(promql_parser.parse(expr), visit)
    return names


def test_every_metric_the_dashboard_queries_is_one_the_engine_exports():
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    assert dashboard["schemaVersion"] >= 39
    assert [i["name"] for i in dashboard["__inputs"] if i["type"] == "datasource"] == ["DS_PROMETHEUS"]
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    assert len(exprs) >= 20
    exported = _exported_names()
    named = {name for expr in exprs for name in _selectors(expr)}
    for variable in dashboard["templating"]["list"]:            # Grafana's label_values(metric, label)
        named.add(re.fullmatch(r"label_values\((\w+), *\w+\)", variable["query"]["query"]).group(1))
    assert named - exported == set()
    for wanted in ("placement_kafka_lag_records", "placement_decisions_total", "placement_alerts_total",
                   "placement_dead_letters_total", "placement_open_ledger_alerts", "placement_bookies",
                   "placement_default_rack_bookies", "placement_batch_duration_seconds_bucket"):
        assert wanted in named, wanted
    for panel in dashboard["panels"]:
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${DS_PROMETHEUS}", panel["title"]


DOC = HERE.parents[1] / "docs" / "metrics.md"


def test_every_exported_metric_is_documented_and_every_documented_one_exported():
    documented = set(re.findall(r"^\| `(placement_\w+)` \|", DOC.read_text(encoding="utf-8"), flags=re.M))
    metrics = _fed(RECORDED)
    metrics.on_progress(_progress(len(RECORDED), [_row("c1")]))
    families = {family.name + ("_total" if family.type == "counter" else "")
                for family in metrics.registry.collect()}
    assert documented == families


def test_the_suggested_alert_rules_parse_and_name_exported_metrics():
    text = DOC.read_text(encoding="utf-8")
    exprs = re.findall(r"^ +expr: (.+)$", text, flags=re.M)
    assert len(exprs) >= 8
    named = {name for expr in exprs for name in _selectors(expr)}
    assert named - _exported_names() == {"up"}        # `up`: Prometheus' own, per scrape target
