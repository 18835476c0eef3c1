"""The stateful function's one catch-all: a bug on one record neither crashes the job nor loses a record."""

import json

from events import Origin, parse_record
from state.settings import ModelSettings
from state.snapshot import dumps, loads
from state.step import step
from streaming.stateful import STATE_CODEC, guarded_step

CONF = {"ensemblePlacementPolicy": "rackaware", "engine.seed": "3"}
SETTINGS = ModelSettings.from_conf(CONF)


def _records():
    raw = [{"type": "bookie_writable", "cluster": "c1", "time": 1_000, "bookie": f"bk{i}:3181",
            "location": f"/r{i % 3}"} for i in range(6)]
    raw += [{"type": "ledger_create", "cluster": "c1", "time": 2_000 + n, "request_id": f"r{n}",
             "ensemble_size": 3, "write_quorum": 3, "ack_quorum": 2} for n in range(3)]
    return [parse_record(json.dumps(r), Origin.from_kafka("requests", 0, i)) for i, r in enumerate(raw)]


def test_without_a_bug_the_guard_is_the_plain_step():
    items = _records()
    state, produced, _ = guarded_step(None, "c1", items, SETTINGS)
    direct = step(None, "c1", items, SETTINGS)
    assert [o.to_json() for o in produced] == [o.to_json() for o in direct.outputs]
    assert loads(state, SETTINGS, codec=STATE_CODEC).writable == direct.model.writable


def test_a_record_the_engine_fails_on_becomes_a_dead_letter_and_a_failed_decision():
    items = _records()

    def buggy_step(model, cluster, batch, settings, **kwargs):
        if any(getattr(item, "request_id", None) == "r1" for item in batch):
            raise KeyError("boom")
        return step(model, cluster, batch, settings, **kwargs)

    state, produced, _ = guarded_step(None, "c1", items, SETTINGS, step_fn=buggy_step)
    decisions = {o.payload["request_id"]: o.payload for o in produced if o.kind == "decision"}
    assert decisions["r0"]["status"] == "ok" and decisions["r2"]["status"] == "ok"
    assert decisions["r1"]["status"] == "failed" and decisions["r1"]["error"]["code"] == "INTERNAL_ERROR"
    letters = [o.payload for o in produced if o.kind == "dead_letter"]
    assert [(d["code"], d["request_id"]) for d in letters] == [("INTERNAL_ERROR", "r1")]
    assert json.loads(letters[0]["raw"])["request_id"] == "r1"
    # The records around the failing one were applied: the state holds the six bookies.
    assert len(loads(state, SETTINGS, codec=STATE_CODEC).writable) == 6


def test_models_are_stored_with_zstd_and_a_zlib_model_of_an_earlier_engine_resumes():
    items = _records()
    state, _, _ = guarded_step(None, "c1", items[:7], SETTINGS)
    assert state.startswith(STATE_CODEC.magic)
    earlier = dumps(loads(state, SETTINGS, codec=STATE_CODEC))          # a zlib stream, as engines before wrote
    assert not earlier.startswith(STATE_CODEC.magic)
    resumed, produced, _ = guarded_step(earlier, "c1", items[7:], SETTINGS)
    straight, expected, _ = guarded_step(state, "c1", items[7:], SETTINGS)
    assert [o.to_json() for o in produced] == [o.to_json() for o in expected]
    assert resumed == straight


def test_without_zstd_in_pyarrow_the_state_function_stores_zlib_and_answers_alike(monkeypatch):
    """A pyarrow built without zstd (`STATE_CODEC` None): models are zlib streams, the outputs and the
    next batch's answers are those of the zstd engine."""
    import streaming.stateful as stateful
    from tests.streaming.test_model_cache import GroupState, _batches, _day, _run

    def run_day():
        monkeypatch.setattr(stateful, "MODEL_CACHE", stateful.ModelCache())   # every batch loads the blob
        function, state = stateful.make_state_function(SETTINGS, "kafka"), GroupState()
        rows = [row for lines, first in _batches(_day(), 25) for row in _run(function, state, lines, first)]
        return rows, state.value[0]

    with_zstd, zstd_blob = run_day()
    monkeypatch.setattr(stateful, "STATE_CODEC", None)
    with_zlib, zlib_blob = run_day()
    assert zstd_blob.startswith(STATE_CODEC.magic) and not zlib_blob.startswith(STATE_CODEC.magic)
    assert with_zlib == with_zstd
    assert loads(zlib_blob, SETTINGS).writable == loads(zstd_blob, SETTINGS, codec=STATE_CODEC).writable


def test_records_naming_their_type_twice_are_answered_once_in_the_shards_spark_routes_them_to(monkeypatch):
    """Spark routes by the last `type` that is not null, Python reads the last: with shards, a record is
    answered (or dead-lettered) exactly once, whichever shards `route` (tested equal to Spark's
    routing in test_packed) sends it to. Found by fuzzing when Spark read the first `type`."""
    import json

    import streaming.stateful as stateful
    from streaming.packed import route, top_level
    from tests.streaming.test_model_cache import GroupState, _frame

    monkeypatch.setattr(stateful, "MODEL_CACHE", stateful.ModelCache())
    bookies = [json.dumps({"type": "bookie_writable", "cluster": "c1", "time": 1000, "bookie": f"bk{i}:3181",
                           "location": f"/r{i}"}) for i in range(4)]
    create = '"cluster":"c1","time":5000,"ensemble_size":3,"write_quorum":2,"ack_quorum":2'
    records = {
        "request last": '{"type":"feature",' + create + ',"request_id":"a","type":"ledger_create"}',
        "request, then null": '{"type":"ledger_create",' + create + ',"request_id":"b","type":null}',
        "event, then null": '{"type":"bookie_lost",' + create + ',"request_id":"c","type":null}',
        "escaped second key": '{"type":"ledger_create",' + create + ',"request_id":"d","typ\\u0065":null}',
    }

    def answers(shards: int) -> dict[str, list[str]]:
        """Each record's output kinds, over every shard `route` sends it to."""
        function = stateful.make_state_function(ModelSettings(), "kafka", shards=shards)
        found: dict[str, list[str]] = {name: [] for name in records}
        for shard in range(shards):
            lines = bookies + [value for value in records.values() if shard in route(top_level(value), shards)[1]]
            for frame in function(("c1", shard), iter([_frame(lines, 0)]), GroupState()):
                for kind, _, _, value in frame.itertuples(index=False):
                    output = json.loads(value)
                    for name, raw in records.items():
                        if output.get("raw") == raw or output.get("request_id") == json.loads(raw)["request_id"]:
                            found[name].append(kind)
        return found

    assert answers(2) == answers(1) == {
        "request last": ["decision"],
        "request, then null": ["dead_letter", "decision"],    # a request's dead letter is also its failed decision
        "event, then null": ["dead_letter", "decision"],   # it names a request id
        "escaped second key": ["dead_letter", "decision"]}


def test_the_dead_letter_of_a_record_the_engine_fails_on_says_where_it_came_from(monkeypatch):
    """CONTRACT §2: a dead letter's `source` is the file and line, or topic, partition and offset (found by
    fuzzing: the catch-all's dead letters said only {"engine": "internal"})."""
    import importlib

    import streaming.stateful as stateful
    from tests.streaming.test_model_cache import GroupState, _frame

    state_step = importlib.import_module("state.step")
    answer = state_step.answer

    def buggy_answer(model, request):
        if request.request_id == "r1":
            raise KeyError("boom")
        return answer(model, request)

    monkeypatch.setattr(state_step, "answer", buggy_answer)
    monkeypatch.setattr(stateful, "MODEL_CACHE", stateful.ModelCache())
    raw = [{"type": "bookie_writable", "cluster": "c1", "time": 1_000, "bookie": f"bk{i}:3181",
            "location": f"/r{i % 3}"} for i in range(6)]
    raw += [{"type": "ledger_create", "cluster": "c1", "time": 2_000 + n, "request_id": f"r{n}",
             "ensemble_size": 3, "write_quorum": 3, "ack_quorum": 2} for n in range(3)]
    lines = [json.dumps(r) for r in raw]
    function = stateful.make_state_function(SETTINGS, "kafka")
    rows = [row for frame in function(("c1", 0), iter([_frame(lines, 40)]), GroupState())
            for row in frame.itertuples(index=False)]
    [letter] = [json.loads(value) for kind, _, _, value in rows if kind == "dead_letter"]
    assert letter["code"] == "INTERNAL_ERROR" and letter["request_id"] == "r1"
    assert letter["source"] == {"topic": "requests", "partition": 0, "offset": 47}   # its position in the frame


def test_a_record_whose_cluster_spark_read_otherwise_is_one_dead_letter_not_a_decision_elsewhere(monkeypatch):
    """Spark and the parser read a record's cluster alike (json_tuple and json both keep the last of a
    repeated key), but should they ever differ, the group Spark chose must not apply the record as
    another cluster's: it is a dead letter naming both readings."""
    import streaming.stateful as stateful
    from tests.streaming.test_model_cache import GroupState, _frame

    monkeypatch.setattr(stateful, "MODEL_CACHE", stateful.ModelCache())
    record = '{"type":"ledger_create","cluster":"c2","time":5000,"request_id":"x","ensemble_size":1,' \
             '"write_quorum":1,"ack_quorum":1}'
    function = stateful.make_state_function(ModelSettings(), "kafka")
    rows = [row for frame in function(("c1", 0), iter([_frame([record], 0)]), GroupState())
            for row in frame.itertuples(index=False)]
    assert [kind for kind, *_ in rows if kind != "decision"] == ["dead_letter"]
    letter = json.loads(next(value for kind, _, _, value in rows if kind == "dead_letter"))
    assert letter["code"] == "INVALID_JSON" and letter["raw"] == record
    assert "'c1'" in letter["reason"] and "'c2'" in letter["reason"]
    assert all(json.loads(value).get("status") != "ok" for kind, _, _, value in rows if kind == "decision")


def test_a_record_too_far_ahead_is_a_dead_letter_that_names_its_topic_partition_and_offset():
    items = _records()
    ahead = parse_record(json.dumps({"type": "bookie_lost", "cluster": "c1", "time": 3_000 + 10 * 86_400_000,
                                     "bookie": "bk0:3181"}), Origin.from_kafka("events", 2, 41))
    origins = {id(item): Origin.from_kafka("requests", 0, i) for i, item in enumerate(items)}
    origins[id(ahead)] = Origin.from_kafka("events", 2, 41)

    _, produced, _ = guarded_step(None, "c1", [*items, ahead], SETTINGS, origins=origins)

    letters = [o.payload for o in produced if o.kind == "dead_letter"]
    assert [letter["code"] for letter in letters] == ["TIME_TOO_FAR_AHEAD"]
    assert letters[0]["source"] == Origin.from_kafka("events", 2, 41).to_record()


def test_two_requests_the_engine_fails_on_with_one_request_id_get_different_decision_ids():
    first, second = (parse_record(json.dumps({"type": "ledger_create", "cluster": "c1", "time": 2_000,
                                              "request_id": "same", "ensemble_size": size, "write_quorum": 2,
                                              "ack_quorum": 2}), Origin.from_kafka("requests", 0, size))
                     for size in (2, 3))

    def failing_step(model, cluster, batch, settings, **kwargs):
        raise KeyError("boom")

    ids = []
    for item in (first, second, first):
        _, produced, _ = guarded_step(None, "c1", [item], SETTINGS, step_fn=failing_step)
        [decision] = [o.payload for o in produced if o.kind == "decision"]
        assert decision["error"]["code"] == "INTERNAL_ERROR"
        ids.append(decision["id"])
    assert ids[0] != ids[1] and ids[0] == ids[2]


def test_a_changed_status_waiting_for_its_interval_arms_the_idle_tick_that_writes_it():
    """In `run`, an idle cluster's changed status is written when the watermark passes the interval's
    end, not only at the cluster's next record: the group arms its tick for it."""
    items = _records()
    state, produced, due = guarded_step(None, "c1", items[:6], SETTINGS)
    [first] = [o.payload for o in produced if o.kind == "status"]
    assert first["bookies"]["writable"] == 1, "the first record's status is written at once"
    assert due == first["time_ms"] + 60_000, "the five later joins wait for the interval's end"
    state, produced, due = guarded_step(state, "c1", items[6:], SETTINGS)
    assert not [o for o in produced if o.kind == "status"] and due == first["time_ms"] + 60_000
    _, ticked, after = guarded_step(state, "c1", [], SETTINGS, horizon_ms=due)
    [status] = [o.payload for o in ticked if o.kind == "status"]
    assert status["time_ms"] == due and status["bookies"]["writable"] == 6
    assert status["write_share"]["decisions"] == 3
    assert after is None
