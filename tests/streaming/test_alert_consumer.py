"""`placement-engine alerts` as a user sees it: one readable line per alert naming the cluster and the
problem, one line and exit code 2 for a broker it cannot reach or a missing topic, and a line on stderr
saying where reading starts. No Spark; the broker tests use the session's tansu broker."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

from streaming.alert_consumer import CONNECT_TIMEOUT_S, format_line, matches
from tests.kafka_broker import produce_records

ALERTS_MD = Path(__file__).resolve().parents[2] / "docs" / "alerts.md"
COMMAND = [sys.executable, "-c", "import sys; from streaming.cli import main; sys.exit(main())", "alerts"]


def _documented_alerts() -> list[dict]:
    text = ALERTS_MD.read_text(encoding="utf-8")
    return [json.loads(block) for block in re.findall(r"```json\n(\{.*?\})\n```", text, flags=re.S)]


def _documented(kind: str, subject: str) -> dict:
    [event] = [e for e in _documented_alerts() if e["type"] == kind and e["subject"] == subject]
    return event


def test_a_line_names_time_severity_cluster_type_subject_and_the_problem():
    assert format_line(_documented("placement.ledger.not_adhering", "ledger/4711")) == (
        "2023-11-14T22:14:00.000Z ERROR   prod placement.ledger.not_adhering ledger/4711: no longer adheres: "
        "bk5:3181 is not registered (lost) (+1 more); no fix possible now")
    assert format_line(_documented("placement.ledger.re_adhere_possible", "ledger/2")) == (
        "2023-11-14T22:13:24.000Z INFO    c1 placement.ledger.re_adhere_possible ledger/2: adheres but still on "
        "a fallback it no longer needs; fix: replace s1:3181 with p1:3181 (MEETS_STRICT)")
    assert format_line(_documented("placement.decision.not_adhering", "create-2")) == (
        "2023-11-14T22:14:00.000Z WARNING prod placement.decision.not_adhering create-2: ledger_create for "
        "ledger 4712 answered adherence FAIL on [bk2:3181, bk4:3181, bk3:3181]")
    assert format_line(_documented("placement.bookie.flapping", "bk5:3181")) == (
        "2023-11-14T22:13:24.000Z WARNING prod placement.bookie.flapping bk5:3181: left 2 times within 30 s "
        "(threshold 2) at /rack-c")
    assert format_line(_documented("placement.ledger.not_adhering.resolved", "ledger/4711")) == (
        "2023-11-14T22:14:01.000Z INFO    prod placement.ledger.not_adhering.resolved ledger/4711: resolved: "
        "the ensemble adheres again")


def test_every_documented_alert_reads_as_one_line_with_its_cluster_and_a_message():
    alerts = _documented_alerts()
    assert len({e["type"] for e in alerts}) >= 14
    for event in alerts:
        line = format_line(event)
        assert "\n" not in line
        head, _, message = line.partition(f" {event['subject']}: ")
        assert head.split()[2] == event["data"]["cluster"], line
        assert message and len(message) < 400, line


def test_a_failed_decision_quotes_the_first_clause_of_its_constraint_only():
    line = format_line(_documented("placement.decision.failed", "create-3"))
    assert "ledger_create for ledger 4713 failed with NOT_ENOUGH_BOOKIES: cannot place ensemble_size=7" in line
    assert "stabilized topology" not in line and line.endswith("...")


def test_an_alert_under_the_old_name_of_re_adhere_possible_reads_alike_and_either_name_filters_both():
    new = _documented("placement.ledger.re_adhere_possible", "ledger/2")
    old = {**new, "type": "placement.ledger.readhere_possible"}
    assert format_line(old) == format_line(new).replace("re_adhere_possible", "readhere_possible")
    resolved_new = _documented("placement.ledger.re_adhere_possible.resolved", "ledger/4712")
    resolved_old = {**resolved_new, "type": "placement.ledger.readhere_possible.resolved"}
    for prefix in ("placement.ledger.readhere_possible", "placement.ledger.re_adhere_possible"):
        assert all(matches(event, set(), [prefix], "info") for event in (new, old, resolved_new, resolved_old))
    not_adhering = _documented("placement.ledger.not_adhering", "ledger/4711")
    assert not matches(not_adhering, set(), ["placement.ledger.readhere_possible"], "info")
    assert not matches(new, set(), ["placement.ledger.not_adhering"], "info")


def test_a_skew_alert_names_its_scope_and_top_offenders_against_their_expected_share():
    offenders = [{"level": "rack", "name": "/rack-a", "placements": 520, "observed_share": 0.52,
                  "expected_share": 0.25, "z": 12.0},
                 {"level": "bookie", "name": "bk1:3181", "placements": 200, "observed_share": 0.2,
                  "expected_share": 1 / 12, "z": 13.2},
                 {"level": "bookie", "name": "bk2:3181", "placements": 180, "observed_share": 0.18,
                  "expected_share": 1 / 12, "z": 10.9}]
    event = {"id": "s1", "type": "placement.cluster.skew", "source": "placement-engine/prod",
             "subject": "cluster/prod", "time": "2023-11-14T22:14:00.000Z",
             "data": {"scope": "replace", "window_decisions": 1000, "placements": 1000, "statistic": "z",
                      "threshold": 5.3, "offenders": offenders, "message": "replacements concentrate",
                      "severity": "warning", "cluster": "prod", "state": "firing"}}
    assert format_line(event) == (
        "2023-11-14T22:14:00.000Z WARNING prod placement.cluster.skew cluster/prod: replacements skewed over 1000 "
        "placements: rack /rack-a takes 52.0% (expected 25.0%); bookie bk1:3181 takes 20.0% (expected 8.3%) "
        "(+1 more)")
    unreadable = {**event, "data": {**event["data"], "offenders": [{"level": "rack"}]}}
    assert format_line(unreadable).endswith("cluster/prod: replacements concentrate")


def test_the_cluster_comes_from_the_percent_encoded_source_when_data_has_none():
    event = {"id": "x", "type": "placement.custom", "source": "placement-engine/prod%20east", "subject": "s",
             "time": "t", "data": {"severity": "warning", "message": "something"}}
    assert format_line(event) == "t WARNING prod east placement.custom s: something"
    assert matches(event, {"prod east"}, [], "info")


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_an_unreachable_broker_is_one_line_and_exit_code_2_within_the_connect_timeout(tmp_path):
    conf = tmp_path / "alerts.properties"
    conf.write_text(f"engine.kafka.bootstrapServers=127.0.0.1:{_closed_port()}\n")
    started = time.monotonic()
    done = subprocess.run([*COMMAND, "--conf", str(conf)], capture_output=True, text=True, timeout=120, check=False)
    elapsed = time.monotonic() - started
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("placement-engine: configuration error: engine.kafka.bootstrapServers: cannot reach "
                           "127.0.0.1:"), line
    assert line.endswith("check the address and that the broker runs"), line
    assert elapsed < CONNECT_TIMEOUT_S + 15, elapsed


def test_a_missing_alert_topic_is_one_line_naming_the_key(kafka_bootstrap, tmp_path):
    conf = tmp_path / "alerts.properties"
    conf.write_text(f"engine.kafka.bootstrapServers={kafka_bootstrap}\nengine.kafka.alertsTopic=no-such-topic\n")
    done = subprocess.run([*COMMAND, "--conf", str(conf)], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        f"placement-engine: configuration error: engine.kafka.alertsTopic: topic 'no-such-topic' does not exist "
        f"on {kafka_bootstrap}; create it or name an existing topic"]


def test_the_command_prints_readable_lines_and_says_where_it_starts_reading(kafka_bootstrap, kafka_topic, tmp_path):
    topic = kafka_topic(partitions=1, prefix="alerts")
    event = _documented("placement.ledger.not_adhering", "ledger/4711")
    produce_records(kafka_bootstrap, topic, [("prod", json.dumps(event))])
    conf = tmp_path / "alerts.properties"
    conf.write_text(f"engine.kafka.bootstrapServers={kafka_bootstrap}\nengine.kafka.alertsTopic={topic}\n")

    old = subprocess.run([*COMMAND, "--conf", str(conf), "--from-beginning", "--idle-timeout", "3"],
                         capture_output=True, text=True, timeout=120, check=False)
    assert old.returncode == 0, old.stderr
    assert old.stdout.splitlines() == [format_line(event)]
    assert old.stderr == ""

    new = subprocess.run([*COMMAND, "--conf", str(conf), "--idle-timeout", "2"],
                         capture_output=True, text=True, timeout=120, check=False)
    assert new.returncode == 0, new.stderr
    assert new.stderr.splitlines() == [
        f"placement-engine alerts: waiting for new alerts on {topic} at {kafka_bootstrap} (from the end of the "
        "topic; --from-beginning shows the retained ones)"]
