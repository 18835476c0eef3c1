"""Decision and alert formats (CONTRACT §2), stable ids, and how policy errors become decisions."""

import json
import re

from events.times import format_time
from state.outputs import ALERT_DECISION_FAILED, ALERT_NOT_ADHERING, Output, jsonable, stable_id
from tests.state.helpers import CLUSTER, T0, Runner, check, create, replace, writable

A, B, C, D = "a:3181", "b:3181", "c:3181", "d:3181"
DECISION_KEYS = {"id", "request_id", "cluster", "ledger_id", "type", "status", "ensemble", "bookie", "adherence",
                 "error", "policy", "time", "topology_version", "explain"}
CLOUDEVENT_KEYS = {"specversion", "id", "source", "type", "subject", "time", "datacontenttype", "data"}


def four_bookies(runner):
    runner.run(writable(0, A, "/r1"), writable(0, B, "/r1"), writable(0, C, "/r2"), writable(0, D, "/r2"))


def test_a_decision_has_every_contract_field():
    runner = Runner()
    four_bookies(runner)
    runner.run(create(5, "req-1", 4, 2, 2, ledger_id=42))
    decision = runner.decision("req-1")
    assert set(decision) == DECISION_KEYS
    assert decision["status"] == "ok" and decision["error"] is None
    assert decision["type"] == "ledger_create" and decision["ledger_id"] == 42
    assert decision["policy"] == "rackaware"
    assert decision["time"] == format_time(T0 + 5)
    assert len(decision["ensemble"]) == 4 and decision["adherence"] == "MEETS_STRICT"
    assert decision["explain"]["topology_version"] == decision["topology_version"]


def test_to_json_is_compact_with_sorted_keys():
    output = Output("decision", "c", "x", {"b": [1, {"z": 1, "a": None}], "a": "é"})
    assert output.to_json() == '{"a":"\\u00e9","b":[1,{"a":null,"z":1}]}'
    assert json.loads(output.to_json()) == output.payload


def test_decision_ids_are_stable_and_depend_on_cluster_and_request():
    one, two = Runner(), Runner()
    for runner in (one, two):
        four_bookies(runner)
        runner.run(create(5, "req-1"))
    assert one.decision("req-1")["id"] == two.decision("req-1")["id"]
    assert stable_id("decision", "c1", "r") != stable_id("decision", "c2", "r")
    assert stable_id("ab", "c") != stable_id("a", "bc"), "parts are length-prefixed"


def test_replacement_decision_names_the_new_bookie():
    runner = Runner()
    four_bookies(runner)
    runner.run(replace(5, "rep", [A, C], A, 2, 2))
    decision = runner.decision("rep")
    assert decision["status"] == "ok"
    assert decision["bookie"] == B, "the only other bookie in A's rack"
    assert decision["ensemble"] == [B, C]


def test_ensemble_check_echoes_the_ensemble_with_its_adherence():
    runner = Runner()
    four_bookies(runner)
    runner.run(check(5, "chk-ok", [A, C, B, D], 2, 2), check(6, "chk-bad", [A, B, C, D], 2, 2))
    good = runner.decision("chk-ok")
    assert (good["status"], good["ensemble"], good["adherence"]) == ("ok", [A, C, B, D], "MEETS_STRICT")
    bad = runner.decision("chk-bad")
    assert bad["adherence"] == "FAIL", "write set A,B lies in one rack"
    [alert] = runner.alerts(ALERT_NOT_ADHERING)
    assert set(alert) == CLOUDEVENT_KEYS
    assert alert["specversion"] == "1.0" and alert["datacontenttype"] == "application/json"
    assert alert["source"] == f"placement-engine/{CLUSTER}"
    assert alert["subject"] == "chk-bad"
    assert alert["data"]["severity"] == "warning" and alert["data"]["adherence"] == "FAIL"
    assert alert["data"]["decision_id"] == bad["id"]


def test_not_enough_bookies_is_a_failed_decision_with_an_alert_naming_the_constraint():
    runner = Runner()
    four_bookies(runner)
    runner.run(create(5, "big", 5, 2, 2))
    decision = runner.decision("big")
    assert decision["status"] == "failed" and decision["adherence"] is None and decision["ensemble"] == []
    assert decision["error"]["code"] == "NOT_ENOUGH_BOOKIES" and decision["error"]["message"]
    [alert] = runner.alerts(ALERT_DECISION_FAILED)
    assert alert["data"]["code"] == "NOT_ENOUGH_BOOKIES"
    assert alert["data"]["constraint"] == decision["error"]["message"]
    assert alert["data"]["severity"] == "error"
    assert alert["time"] == format_time(T0 + 5)


def test_a_value_error_from_the_policy_is_an_invalid_request():
    """Zone-aware strict placement with E % W != 0 is BookKeeper's IllegalArgumentException."""
    runner = Runner({"ensemblePlacementPolicy": "zoneaware"})
    runner.run(*[writable(0, f"z{i}:3181", f"/zone{i % 3}/ud{i}") for i in range(6)])
    runner.run(create(5, "odd", 5, 2, 2))
    decision = runner.decision("odd")
    assert decision["status"] == "failed"
    assert decision["error"]["code"] == "INVALID_REQUEST"
    assert decision["policy"] == "zoneaware"
    [alert] = runner.alerts(ALERT_DECISION_FAILED)
    assert alert["data"]["severity"] == "warning"


def test_alert_ids_are_stable_across_replays():
    runs = []
    for _ in range(2):
        runner = Runner()
        four_bookies(runner)
        runner.run(create(5, "big", 5, 2, 2))
        runs.append(runner.alerts())
    assert runs[0] == runs[1]


def test_jsonable_makes_explanations_json_ready():
    from policies import Adherence

    value = {"s": {"b", "a"}, "t": (1, 2), "e": Adherence.FAIL, "raw": b"x", 3: None}
    assert jsonable(value) == {"s": ["a", "b"], "t": [1, 2], "e": "FAIL", "raw": "x", "3": None}


def test_iso_time_matches_the_events_formatter():
    from events.limits import MAX_TIME_MS
    from state.outputs import iso_time

    for ms in (0, 1, 999, 86_399_999, 86_400_000, T0, T0 + 123_456_789, MAX_TIME_MS):
        assert iso_time(ms) == format_time(ms)


def test_an_alert_source_is_a_uri_reference_whatever_the_cluster_name():
    """CloudEvents 1.0: `source` is a non-empty URI-reference (RFC 3986); a cluster name may hold spaces,
    slashes or any Unicode letter (CONTRACT §2 allows any string)."""
    from urllib.parse import unquote

    from state.outputs import alert

    def source(cluster):
        return alert(alert_type="placement.bookie.flapping", cluster=cluster, subject="b:1", time_ms=0, key="b:1",
                     severity="warning", data={}).payload["source"]

    assert source("prod-east_1.a~") == "placement-engine/prod-east_1.a~"       # names in use are unchanged
    uri_chars = re.compile(r"[A-Za-z0-9\-._~!$&'()*+,;=:@/%]+")
    for cluster in ("prod east", "prød", "a/b", "100%", "x?y#z"):
        text = source(cluster)
        assert uri_chars.fullmatch(text), text
        assert unquote(text.removeprefix("placement-engine/")) == cluster         # nothing is lost
