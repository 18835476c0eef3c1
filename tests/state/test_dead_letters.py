"""Every class of bad record becomes a dead letter with its reason; a malformed request that names
its cluster and request_id also gets a failed INVALID_REQUEST decision (CONTRACT §2)."""

import json

import pytest

from events.dead_letter import DeadLetter, Reason
from state.outputs import dead_letter
from tests.state.helpers import CLUSTER, Runner, raw, writable

TIME = "2026-01-01T00:00:00Z"


def request(**fields):
    base = {"type": "ledger_create", "cluster": CLUSTER, "time": TIME, "request_id": "bad-1",
            "ensemble_size": 3, "write_quorum": 2, "ack_quorum": 2}
    base.update(fields)
    return {k: v for k, v in base.items() if v is not None}


def event(kind, **fields):
    return {"type": kind, "cluster": CLUSTER, "time": TIME, **fields}


REPLACE = {"type": "bookie_replace", "cluster": CLUSTER, "time": TIME, "request_id": "bad-1",
           "ensemble": ["a:1", "b:1", "c:1"], "bookie": "a:1", "write_quorum": 2, "ack_quorum": 2}

# reason -> (raw input, whether the requester gets a failed decision)
CASES = {
    Reason.RECORD_TOO_LARGE: ("x" * 1_048_577, False),
    Reason.INVALID_ENCODING: (b"\xff\xfe{}", False),
    Reason.INVALID_JSON: ("{nope", False),
    Reason.NOT_AN_OBJECT: ("[1, 2]", False),
    Reason.MISSING_FIELD: (json.dumps(request(ensemble_size=None)), True),
    Reason.UNKNOWN_TYPE: (json.dumps(request(type="ledger_craete")), True),
    Reason.UNKNOWN_FIELD: (json.dumps(request(ensemble_szie=3)), True),
    Reason.WRONG_TYPE: (json.dumps(request(ensemble_size="3")), True),
    Reason.EMPTY_FIELD: (json.dumps({"type": "ensemble_check", "cluster": CLUSTER, "time": TIME, "request_id": "bad-1",
                                     "ledger_id": 1, "ensemble": [], "write_quorum": 2, "ack_quorum": 2}), True),
    Reason.FIELD_TOO_LARGE: (json.dumps(request(request_id="r" * 5000)), False),
    Reason.INVALID_TIME: (json.dumps(request(time="2026-01-01T00:00:00")), True),
    Reason.INVALID_BOOKIE_ID: (json.dumps(event("bookie_lost", bookie="bad/id")), False),
    Reason.INVALID_LOCATION: (json.dumps(event("bookie_writable", bookie="a:1", location="rack1")), False),
    Reason.INVALID_LEDGER_ID: (json.dumps(request(ledger_id=-1)), True),
    Reason.NEGATIVE_DISK: (json.dumps(event("bookie_disk", bookie="a:1", free_disk=-1, total_disk=5)), False),
    Reason.INVALID_DISK: (json.dumps(event("bookie_disk", bookie="a:1", free_disk=6, total_disk=5)), False),
    Reason.INVALID_QUORUM: (json.dumps(request(ensemble_size=2, write_quorum=3)), True),
    Reason.BOOKIE_NOT_IN_ENSEMBLE: (json.dumps({**REPLACE, "bookie": "z:1"}), True),
    Reason.DUPLICATE_BOOKIE: (json.dumps({**REPLACE, "ensemble": ["a:1", "a:1", "c:1"]}), True),
}


# INTERNAL_ERROR is set by the streaming job's guard around the step, TIME_TOO_FAR_AHEAD by the step
# (tests/state/test_future_skew.py), never by the parser.
PARSER_REASONS = [reason for reason in Reason if reason not in (Reason.INTERNAL_ERROR, Reason.TIME_TOO_FAR_AHEAD)]


def test_every_parser_reason_has_a_case():
    assert set(CASES) == set(PARSER_REASONS)


@pytest.mark.parametrize("reason", PARSER_REASONS, ids=lambda r: r.name)
def test_bad_record_is_dead_lettered_with_its_reason(reason):
    text, answered = CASES[reason]
    item = raw(text, line=7)
    assert isinstance(item, DeadLetter) and item.reason is reason, item
    runner = Runner()
    produced = runner.run(writable(0, "a:3181", "/r1"), item)
    [letter] = runner.dead_letters(produced)
    assert letter["code"] == reason.name
    assert letter["source"] == {"file": "events.jsonl", "line": 7}
    assert letter["reason"], "a human message"
    assert letter["raw"] and letter["id"]
    decisions = runner.decisions(produced)
    if answered:
        [decision] = decisions
        assert decision["status"] == "failed"
        assert decision["error"]["code"] == "INVALID_REQUEST"
        assert reason.name in decision["error"]["message"]
        assert decision["request_id"] == "bad-1" and decision["cluster"] == CLUSTER
        assert decision["adherence"] is None and decision["ensemble"] == []
    else:
        assert decisions == []


def test_dead_letters_of_unreadable_clusters_need_no_model():
    from state import ModelSettings, step

    settings = ModelSettings.from_conf({})
    result = step(None, "", [raw("{nope")], settings)
    assert result.model is None
    assert [o.kind for o in result.outputs] == ["dead_letter"]
    assert result.outputs[0].cluster == ""


def test_dead_letter_ids_are_stable_and_tell_sources_apart():
    first = dead_letter(raw("{nope", line=1), CLUSTER)
    again = dead_letter(raw("{nope", line=1), CLUSTER)
    other_line = dead_letter(raw("{nope", line=2), CLUSTER)
    assert first.id == again.id
    assert first.id != other_line.id


def test_the_failed_decision_of_a_malformed_request_does_not_depend_on_the_batch():
    text = json.dumps(request(ensemble_size=2, write_quorum=3))
    one = Runner()
    one.run(writable(0, "a:3181", "/r1"), raw(text))
    two = Runner()
    two.run(writable(0, "a:3181", "/r1"))
    two.run(raw(text))
    assert one.decisions() == two.decisions()


def test_the_failed_decision_of_a_malformed_request_carries_its_time_when_that_is_valid():
    """CONTRACT §2: a decision's `time` is the request's; a malformed request's own valid time is kept."""
    runner = Runner()
    runner.run(raw(request(request_id="late", write_quorum=4)),             # quorums break the rule
               raw(request(request_id="timeless", time="soon", write_quorum=4)))
    assert runner.decision("late")["time"] == "2026-01-01T00:00:00.000Z"
    assert runner.decision("late")["error"]["code"] == "INVALID_REQUEST"
    assert runner.decision("timeless")["time"] is None                      # nothing valid to report
    # The keys every explanation has (README), empty: no policy ran; and the reason code.
    assert runner.decision("late")["explain"] == {"policy": "rackaware", "steps": [], "fallbacks": [],
                                                  "excluded": {}, "dead_letter": "INVALID_QUORUM",
                                                  "topology_version": None}
