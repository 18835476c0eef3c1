"""Membership events -> writable, read-only and dead sets, one policy call per change (spec §2)."""

from tests.state.helpers import (
    RACKAWARE,
    Runner,
    create,
    lost,
    readonly,
    view,
    writable,
)

A, B, C, D = "a:3181", "b:3181", "c:3181", "d:3181"


def spy_on_cluster_changed(model):
    """Record every on_cluster_changed call (its arguments as sets, and the dead set it returned)."""
    calls = []
    original = model.policy.on_cluster_changed

    def recording(writable_bookies, readonly_bookies, **changes):
        dead = original(writable_bookies, readonly_bookies, **changes)
        calls.append((set(writable_bookies), set(readonly_bookies), set(dead)))
        return dead

    model.policy.on_cluster_changed = recording
    return calls


def test_joins_read_only_and_losses_give_the_expected_sets():
    runner = Runner()
    runner.run(writable(0, A, "/r1"), writable(1, B, "/r2"), writable(2, C, "/r1"), readonly(3, C), lost(4, B))
    model = runner.model
    assert model.writable == {A}
    assert model.readonly == {C}
    assert model.dead == {B}
    assert set(model.policy.known) == {A}


def test_writable_to_read_only_is_one_change_and_never_dead():
    runner = Runner()
    runner.run(writable(0, A, "/r1"), writable(0, B, "/r2"))
    calls = spy_on_cluster_changed(runner.model)
    runner.run(readonly(5, B))
    assert calls == [({A}, {B}, set())], "one call, B moved to read-only, nobody reported dead"
    assert runner.model.dead == set()


def test_read_only_back_to_writable_is_one_change():
    runner = Runner()
    runner.run(writable(0, A, "/r1"), readonly(1, B))
    calls = spy_on_cluster_changed(runner.model)
    runner.run(writable(2, B, "/r2"))
    assert calls == [({A, B}, set(), set())]
    assert runner.model.readonly == set()


def test_losing_a_read_only_bookie_makes_it_dead():
    runner = Runner()
    runner.run(writable(0, A, "/r1"), readonly(1, B))
    calls = spy_on_cluster_changed(runner.model)
    runner.run(lost(2, B))
    assert calls == [({A}, set(), set())]
    assert runner.model.dead == {B}


def test_the_policy_reports_a_lost_writable_bookie_dead():
    runner = Runner()
    runner.run(writable(0, A, "/r1"), writable(0, B, "/r2"))
    calls = spy_on_cluster_changed(runner.model)
    runner.run(lost(1, B))
    assert calls == [({A}, set(), {B})]


def test_repeated_and_unknown_events_change_nothing():
    runner = Runner()
    runner.run(writable(0, A, "/r1"), readonly(1, B))
    version = runner.model.version
    calls = spy_on_cluster_changed(runner.model)
    runner.run(writable(2, A), readonly(3, B), lost(4, D))
    assert calls == []
    assert runner.model.version == version


def test_a_rejoining_dead_bookie_is_no_longer_dead():
    runner = Runner()
    runner.run(writable(0, A, "/r1"), lost(1, A), writable(2, A))
    assert runner.model.dead == set()
    assert runner.model.writable == {A}
    assert runner.model.policy.known[A] == "/r1", "the location from the earlier event is kept"


def test_cluster_view_replaces_the_snapshot_in_one_call():
    runner = Runner()
    runner.run(writable(0, A, "/r1"), writable(0, B, "/r2"), readonly(0, C))
    calls = spy_on_cluster_changed(runner.model)
    runner.run(view(5, [B, D], [A]))
    assert calls == [({B, D}, {A}, set())]
    model = runner.model
    assert (model.writable, model.readonly, model.dead) == ({B, D}, {A}, {C})


def test_an_identical_cluster_view_is_not_a_change():
    runner = Runner()
    runner.run(view(0, [A, B], [C]))
    version = runner.model.version
    calls = spy_on_cluster_changed(runner.model)
    runner.run(view(1, [B, A], [C]))
    assert calls == [] and runner.model.version == version


def test_topology_version_counts_changes_and_appears_in_decisions():
    runner = Runner()
    runner.run(writable(0, A, "/r1"), writable(1, B, "/r2"), writable(2, C, "/r3"))
    assert runner.model.version == 3, "one version per event that changed something"
    runner.run(create(3, "req-1"))
    decision = runner.decision("req-1")
    assert decision["topology_version"] == 3
    assert decision["explain"]["topology_version"] == 3
    runner.run(readonly(4, C), create(5, "req-2", ensemble_size=2))
    assert runner.decision("req-2")["topology_version"] == 4


def test_requests_see_the_cluster_at_their_time():
    """A request between two events sees the first and not the second, whatever their batch."""
    runner = Runner(RACKAWARE)
    runner.run(writable(0, A, "/r1"), writable(0, B, "/r2"), create(10, "before", 2, 2, 2), lost(20, B),
               create(30, "after", 2, 2, 2))
    assert runner.decision("before")["status"] == "ok"
    after = runner.decision("after")
    assert after["status"] == "failed" and after["error"]["code"] == "NOT_ENOUGH_BOOKIES"
