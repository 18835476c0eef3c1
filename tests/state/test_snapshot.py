"""Snapshots: versioned, migrated, rejected when too new, bounded in size."""

import json
import zlib

import pytest

from state import ModelSettings, SnapshotError, dumps, loads
from state import snapshot as snapshot_module
from state.snapshot import VERSION, to_document
from tests.state.helpers import Runner, create, disk, lost, raw, writable

CONF = {"ensemblePlacementPolicy": "rackaware", "networkTopologyStabilizePeriodSeconds": "30",
        "diskWeightBasedPlacementEnabled": "true", "engine.bookieHistoryTtlSeconds": "600"}
SETTINGS = ModelSettings.from_conf(CONF)


def small_cluster():
    runner = Runner(CONF)
    runner.run(*[writable(0, f"b{i}:3181", f"/r{i % 3}") for i in range(6)], disk(1, "b0:3181", 10),
               lost(2, "b5:3181"))
    return runner


class Level9:
    """A `state.snapshot.Codec` for the tests (zlib at level 9 behind the frame)."""

    magic = snapshot_module.FRAMED + b"\x7f"

    def compress(self, data):
        return zlib.compress(data, 9)

    def decompress(self, data, size):
        try:
            text = zlib.decompress(data)
        except zlib.error as exc:
            raise ValueError(str(exc)) from exc
        assert len(text) == size
        return text


def json_of(blob, codec=None):
    return snapshot_module.decompress(blob, codec)


def test_the_snapshot_is_versioned_compressed_json():
    runner = small_cluster()
    document = json.loads(zlib.decompress(dumps(runner.model)))
    assert document["v"] == VERSION >= 1
    assert document["cluster"] == "c1" and document["policy"] == "rackaware"
    assert "policy_state" in document


def test_a_restored_model_answers_like_the_original():
    runner = small_cluster()
    restored = loads(dumps(runner.model), SETTINGS)
    restored.check_invariants()
    assert to_document(restored) == to_document(runner.model)
    assert restored.pending_leaves() == runner.model.pending_leaves()


def test_an_older_snapshot_is_migrated(monkeypatch):
    """A v0 document (hypothetical older layout without late_records) is brought to v1 by its migration."""
    runner = small_cluster()
    document = to_document(runner.model)
    old = dict(document, v=0)
    del old["late_records"]

    def v0_to_v1(doc):
        return dict(doc, v=1, late_records=0)

    monkeypatch.setitem(snapshot_module.MIGRATIONS, 0, v0_to_v1)
    blob = zlib.compress(json.dumps(old).encode())
    restored = loads(blob, SETTINGS)
    assert to_document(restored) == document


def test_an_older_snapshot_without_a_migration_is_refused():
    document = dict(to_document(small_cluster().model), v=0)
    with pytest.raises(SnapshotError, match="no migration from format v0"):
        loads(zlib.compress(json.dumps(document).encode()), SETTINGS)


def test_a_newer_snapshot_is_refused_with_advice():
    document = dict(to_document(small_cluster().model), v=VERSION + 1)
    with pytest.raises(SnapshotError, match="newer engine"):
        loads(zlib.compress(json.dumps(document).encode()), SETTINGS)


def test_a_restored_isolated_model_keeps_its_groups():
    # Rack info comes from the bookies' facts: the restored policy must see the groups the original saw.
    conf = {"ensemblePlacementPolicy": "isolated", "bookkeeperClientIsolationGroups": "g1",
            "bookkeeperClientSecondaryIsolationGroups": "g2"}
    runner = Runner(conf)
    runner.run(*[writable(0, f"b{i}:3181", f"/r{i % 3}", group="g1" if i < 4 else "g2") for i in range(8)],
               create(5, "first", 3, 3, 2))      # hands the rack info to the policy
    assert not runner.model.rack_info_stale
    restored = loads(dumps(runner.model), ModelSettings.from_conf(conf))
    restored.check_invariants()
    again = Runner(conf)
    again.model = restored
    requests = [create(10 + n, f"q{n}", 3, 3, 2) for n in range(20)] + [create(40, "big", 6, 3, 2)]
    runner.run(*requests)
    again.run(*requests)
    assert [o.to_json() for o in again.outputs] == [o.to_json() for o in runner.outputs[-len(again.outputs):]]
    placed = [runner.decision(f"q{n}")["ensemble"] for n in range(20)]
    assert all(bookie in {f"b{i}:3181" for i in range(4)} for ensemble in placed for bookie in ensemble)
    assert set(runner.decision("big")["ensemble"]) & {f"b{i}:3181" for i in range(4, 8)}


def test_names_orjson_refuses_still_round_trip():
    # A lone surrogate or a non-ASCII name: orjson refuses the first (state.snapshot falls back to json)
    # and writes the second as UTF-8; both must load back as they were.
    runner = Runner(CONF)
    runner.run(*[writable(0, name, f"/r{i % 3}") for i, name in enumerate(
        ["b0:3181", "b\u00e9:3181", "b\ud800:3181", "b3:3181"])])
    restored = loads(dumps(runner.model), SETTINGS)
    restored.check_invariants()
    assert to_document(restored) == to_document(runner.model)
    assert "b\ud800:3181" in restored.writable


def test_a_snapshot_framed_by_a_codec_loads_with_it_and_a_zlib_one_loads_too():
    runner = small_cluster()
    blob = dumps(runner.model, Level9())
    assert blob.startswith(Level9.magic) and json.loads(json_of(blob, Level9()))["v"] == VERSION
    assert to_document(loads(blob, SETTINGS, codec=Level9())) == to_document(runner.model)
    assert to_document(loads(dumps(runner.model), SETTINGS, codec=Level9())) == to_document(runner.model)


def test_a_framed_snapshot_without_its_codec_or_corrupt_is_refused_with_the_reason():
    blob = dumps(small_cluster().model, Level9())
    with pytest.raises(SnapshotError, match="which this loader was not given"):
        loads(blob, SETTINGS)
    with pytest.raises(SnapshotError, match="not a readable"):
        loads(blob[:12] + b"\x00" * (len(blob) - 12), SETTINGS, codec=Level9())


def test_garbage_is_refused():
    for blob in (zlib.compress(b"{not json"), zlib.compress(b"[1, 2")):
        with pytest.raises(SnapshotError, match="not a readable snapshot"):
            loads(blob, SETTINGS)
    with pytest.raises(SnapshotError, match="not a readable snapshot"):
        loads(b"not zlib", SETTINGS)


def test_a_changed_policy_rebuilds_from_membership():
    runner = small_cluster()
    other = {**CONF, "ensemblePlacementPolicy": "default"}
    restored = loads(dumps(runner.model), ModelSettings.from_conf(other))
    restored.check_invariants()
    assert restored.policy_name == "default"
    assert set(restored.policy.known) == runner.model.writable
    assert restored.pending == {}


def test_a_restore_under_a_shorter_stabilization_period_ends_the_overdue_delays_at_the_next_batch() -> None:
    """Found by fuzzing (a restart under another configuration): restored with a shorter
    `networkTopologyStabilizePeriodSeconds`, a departure whose new delay had already ended was dropped by
    the policy but still pending in the model, and a batch of dead letters only left the two disagreeing.
    The next batch, whatever it holds, ends the delay and reports it."""
    runner = Runner(CONF)
    runner.run(*[writable(0, f"b{i}:3181", f"/r{i % 3}") for i in range(6)], lost(2, "b5:3181"),
               writable(10_000, "b0:3181", "/r0"))
    assert set(runner.model.pending_leaves()) == {"b5:3181"}
    runner.conf = {**CONF, "networkTopologyStabilizePeriodSeconds": "5"}
    runner.settings = ModelSettings.from_conf(runner.conf)
    runner.model = loads(dumps(runner.model), runner.settings)
    produced = runner.run(raw('{"type": "bookie_lost", "cluster": "c1"}'))  # checks the invariants
    assert runner.model.pending == {}
    assert [(a["subject"], a["time"]) for a in runner.alerts("placement.bookie.departure_pending.resolved",
                                                              produced=produced)] == \
        [("b5:3181", "2023-11-14T22:13:30.000Z")]


def test_state_stays_bounded_under_churn():
    """Bookies that come and go are forgotten once their history TTL has passed: the snapshot of a
    cluster after heavy churn is no bigger than before it (the size is deterministic)."""
    runner = Runner(CONF)
    runner.run(*[writable(0, f"b{i}:3181", f"/r{i % 3}") for i in range(30)])
    runner.run(create(1, "warm", 3, 2, 2))
    baseline = len(json_of(dumps(runner.model)))
    for wave in range(20):
        t = 10_000 + wave * 1_000
        ephemeral = [f"tmp{wave}-{i}:3181" for i in range(50)]
        runner.run(*[writable(t, b, "/r9") for b in ephemeral], *[disk(t, b, 5) for b in ephemeral])
        runner.run(*[lost(t + 500, b) for b in ephemeral])
    assert len(runner.model.facts) > 30, "the departed are remembered inside the TTL"
    later = 10_000 + 20 * 1_000 + 600_000
    # Expiries are observed at the cluster's next event (every shard sees events, not every request),
    # so the churn is forgotten once any event arrives after the TTL.
    runner.run(writable(later, "b0:3181", "/r0"), create(later, "later", 3, 2, 2))
    model = runner.model
    assert set(model.facts) == {f"b{i}:3181" for i in range(30)}
    assert model.disk == {} and model.absent_since == {} and model.flaps == {}
    assert len(json_of(dumps(model))) <= baseline + 200, "only counters and the clock grew"
