"""The fast paths of `state.outputs` give exactly what the plain formulas give: the same
JSON text, ids and times, so replays stay byte-identical."""

import json

from hypothesis import given
from hypothesis import strategies as st

from events.limits import MAX_TIME_MS
from events.times import format_time
from state import outputs
from state.outputs import Output, alert, alert_id, decision_id, iso_time, jsonable, stable_id

json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False),
              st.text(max_size=6),
              # where orjson's own text would differ (state.outputs._fast_json sends these to json)
              st.sampled_from([1e-05, 1.5e-07, -3e-300, 2**64, -2**63 - 1, "\x7f", "\u00e9", "\ud800", "1e-5"])),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=4), inner, max_size=4)),
    max_leaves=16)
names = st.text(max_size=8)


@given(json_values)
def test_to_json_is_json_dumps_with_sorted_keys(value):
    assert Output("decision", "c", "x", {"v": value}).to_json() == json.dumps(
        {"v": value}, sort_keys=True, separators=(",", ":"))


def test_to_json_writes_non_finite_floats_as_null_where_json_dumps_writes_invalid_json():
    # The one place the text differs from json.dumps (state.outputs._fast_json): NaN and Infinity are not
    # JSON; no output holds one, since records with floats are dead letters.
    for value in (float("nan"), float("inf"), float("-inf")):
        text = Output("decision", "c", "x", {"v": value, "w": [value]}).to_json()
        assert text == '{"v":null,"w":[null]}'
        assert json.loads(text) == {"v": None, "w": [None]}


def test_to_json_reports_cycles_and_bad_values_as_json_dumps_does():
    looped: dict = {}
    looped["self"] = looped
    for payload, error in (({"a": looped}, ValueError), ({"a": object()}, TypeError)):
        try:
            Output("decision", "c", "x", payload).to_json()
        except error as exc:
            caught = str(exc)
        else:
            raise AssertionError("expected an error")
        try:
            json.dumps(payload, sort_keys=True, separators=(",", ":"))
        except error as exc:
            assert caught == str(exc)


@given(names, names)
def test_decision_ids_are_the_stable_id_of_their_parts(cluster, request_id):
    assert decision_id(cluster, request_id) == stable_id(outputs.DECISION, cluster, request_id)


@given(names, names, names, st.integers(min_value=0, max_value=MAX_TIME_MS), names)
def test_alert_ids_are_the_stable_id_of_their_parts(alert_type, cluster, subject, time_ms, key):
    assert alert_id(alert_type, cluster, subject, time_ms, key) == stable_id(
        outputs.ALERT, alert_type, cluster, subject, str(time_ms), key)


@given(st.lists(st.integers(min_value=0, max_value=MAX_TIME_MS), min_size=1, max_size=5))
def test_iso_time_is_format_time_in_any_order(times):
    # Neighbouring milliseconds share the memoized second; jumps replace it.
    for ms in times + [t + 1 for t in times if t < MAX_TIME_MS] + times:
        assert iso_time(ms) == format_time(ms)


@given(st.dictionaries(st.text(max_size=4), json_values, max_size=5))
def test_an_alert_with_ready_data_equals_the_copied_one(data):
    common = {"alert_type": "t", "cluster": "c", "subject": "s", "time_ms": 5, "key": "k", "severity": "info"}
    copied = alert(data=data, **common)
    handed_over = alert(data=jsonable(data), ready=True, **common)
    assert handed_over == copied
    assert handed_over.to_json() == copied.to_json()


def test_outputs_built_fast_equal_the_dataclass_built_ones():
    made = outputs.decision(cluster="c", request_id="r", request_type="ledger_create", ledger_id=1, time_ms=5,
                            policy="rackaware", topology_version=3, ensemble=["a:1"], adherence="MEETS_STRICT",
                            explain={"steps": [{"step": "position 0", "candidates": 1}], "excluded": {}})
    assert made == Output(made.kind, made.cluster, made.id, dict(made.payload))
    assert type(made) is Output and hash(made.id)
