"""Locations, rack info and isolation groups (CONTRACT §1 resolver/rack_info, §2 bookie_location;
spec bookkeeper-rackaware.md §1.4, §2.5)."""

from state.outputs import ALERT_JOIN_FAILED
from tests.state.helpers import T0, Runner, create, location, lost, readonly, writable

A, B, C = "a:3181", "b:3181", "c:3181"


def known(runner):
    return dict(runner.model.policy.known)


def test_writable_with_location_sets_it_and_without_keeps_it():
    runner = Runner()
    runner.run(writable(0, A, "/r1"), writable(0, B))
    assert known(runner) == {A: "/r1", B: "/default-rack"}, "no location of its own: the policy's default"
    runner.run(lost(1, A), writable(2, A))
    assert known(runner)[A] == "/r1", "rejoin without location keeps the earlier one"
    runner.run(lost(3, A), writable(4, A, "/r7"))
    assert known(runner)[A] == "/r7"


def test_writable_with_a_new_location_moves_an_already_writable_bookie():
    runner = Runner()
    runner.run(writable(0, A, "/r1"), writable(1, A, "/r2"))
    assert known(runner)[A] == "/r2"


def test_bookie_location_applies_at_once_to_a_writable_bookie():
    runner = Runner()
    runner.run(writable(0, A, "/r1"), writable(0, B, "/r2"))
    version = runner.model.version
    runner.run(location(5, A, "/r3"))
    assert known(runner)[A] == "/r3"
    assert runner.model.version == version + 1


def test_bookie_location_before_the_bookie_joins_is_used_when_it_joins():
    runner = Runner()
    runner.run(location(0, A, "/r4"), writable(1, A))
    assert known(runner)[A] == "/r4"


def test_deleting_the_rack_falls_back_to_the_default():
    runner = Runner()
    runner.run(writable(0, A, "/r1"), location(1, A, None))
    assert known(runner)[A] == "/default-rack"
    assert A not in runner.model.mapping and A not in runner.model.facts


def test_ungrouped_bookies_live_in_the_mapping_grouped_ones_in_rack_info():
    runner = Runner()
    runner.run(writable(0, A, "/r1"), writable(0, B, "/r2", group="g1", hostname="hb"))
    model = runner.model
    assert model.mapping == {A: "/r1", B: "/r2"}
    assert model.rack_info == {"g1": {B: {"rack": "/r2", "hostname": "hb"}}}
    runner.run(create(1, "r", 2, 2, 2))
    assert model.policy.resolver.group_members() == {"g1": (B,)}, "the policy sees the group at request time"


def test_a_bookie_is_in_one_group_and_keeps_it_unless_told_otherwise():
    runner = Runner()
    runner.run(writable(0, A, "/r1", group="g1"), writable(1, A, "/r2"))
    assert runner.model.rack_info == {"g1": {A: {"rack": "/r2", "hostname": None}}}
    runner.run(location(2, A, "/r3", group="g2"))
    assert runner.model.rack_info == {"g2": {A: {"rack": "/r3", "hostname": None}}}
    runner.run(location(3, A, None))
    assert runner.model.rack_info == {}
    assert known(runner)[A] == "/default-rack"


def test_a_grouped_bookie_at_root_joins_at_the_default_rack_as_pulsar_reads_racks():
    runner = Runner()
    runner.run(writable(0, A, "/", group="g1"))
    assert known(runner) == {A: "/default-rack"}
    assert runner.alerts(ALERT_JOIN_FAILED) == []


def test_an_ungrouped_bookie_at_root_fails_to_join_with_an_alert():
    runner = Runner()
    runner.run(writable(0, A, "/r1"), writable(5, B, "/"))
    assert B in runner.model.writable and B not in known(runner)
    [alert] = runner.alerts(ALERT_JOIN_FAILED)
    assert alert["subject"] == B and alert["data"]["severity"] == "error"
    assert alert["data"]["location"] == "/"
    assert alert["time"].startswith("2023-11-14T22:13:20.005")


def test_bookie_location_is_rack_info_read_as_pulsar_reads_it_grouped_or_not():
    """CONTRACT §1: `rack_info` racks are read as Pulsar reads them, and a `bookie_location` event is
    rack info (`update_rack_info`): `rack0` is `/rack0`; empty or `/` is the default rack and the bookie
    still joins (a `bookie_writable` location of `/` keeps BookKeeper's resolver rule, above)."""
    runner = Runner()
    runner.run(writable(0, A, "/r1"), writable(0, B, "/r2"), writable(0, C, "/r3"))
    runner.run(location(1, A, "rack0"), location(1, B, "/"), location(1, C, "", group="g1"))
    assert known(runner) == {A: "/rack0", B: "/default-rack", C: "/default-rack"}
    assert runner.model.join_failures == {} and runner.alerts(ALERT_JOIN_FAILED) == []
    runner.run(location(2, C, "rack9", group="g1"), create(3, "r", 3, 2, 2))
    assert known(runner)[C] == "/rack9"
    assert runner.model.rack_info == {"g1": {C: {"rack": "/rack9", "hostname": None}}}


def test_a_location_of_another_depth_fails_to_join_once_then_joins_when_fixed():
    runner = Runner()
    runner.run(writable(0, A, "/r1"), writable(1, B, "/region/r2"))
    assert len(runner.alerts(ALERT_JOIN_FAILED)) == 1
    runner.run(writable(2, C, "/r3"))
    assert len(runner.alerts(ALERT_JOIN_FAILED)) == 1, "a retried failure is not re-alerted"
    runner.run(location(3, B, "/r2"))
    assert known(runner)[B] == "/r2"
    assert runner.model.join_failures == {}


def test_an_unmapped_bookie_inherits_a_grouped_bookies_host_rack():
    """Pulsar resolves by host too: h1:3182 has no location of its own, h1:3181 is listed at /r9."""
    runner = Runner()
    runner.run(writable(0, "h1:3181", "/r9", group="g1"), writable(1, "h1:3182"))
    assert known(runner)["h1:3182"] == "/r9"


def test_a_bookie_inheriting_a_host_rack_moves_when_it_rejoins():
    """Pulsar notifies a rack-info change only to the bookies rack info lists (spec region-zone §4.3)."""
    runner = Runner()
    runner.run(writable(0, "h1:3182"))
    assert known(runner)["h1:3182"] == "/default-rack"
    runner.run(location(1, "h1:3181", "/r5", group="g1"), create(2, "r", 1, 1, 1))
    assert known(runner)["h1:3182"] == "/default-rack"
    runner.run(lost(3, "h1:3182"), writable(4, "h1:3182"))
    assert known(runner)["h1:3182"] == "/r5"


def test_history_of_a_departed_bookie_expires_after_the_ttl():
    runner = Runner({"ensemblePlacementPolicy": "rackaware", "engine.bookieHistoryTtlSeconds": "100"})
    runner.run(writable(0, A, "/r1"), writable(0, B, "/r2"), lost(1_000, A))
    runner.run(writable(100_999, C, "/r3"))
    assert A in runner.model.facts and A in runner.model.dead
    runner.run(writable(101_000, C))
    assert A not in runner.model.facts and A not in runner.model.mapping and A not in runner.model.dead
    runner.run(writable(102_000, A))
    assert known(runner)[A] == "/default-rack", "the forgotten location no longer applies"


def test_rack_info_set_by_bookie_location_does_not_expire():
    runner = Runner({"ensemblePlacementPolicy": "rackaware", "engine.bookieHistoryTtlSeconds": "100"})
    runner.run(writable(0, A, "/r1"), location(0, A, "/r1"), lost(1_000, A), writable(500_000, B, "/r2"))
    runner.run(writable(600_000, A))
    assert known(runner)[A] == "/r1"


def test_time_and_alert_helpers_agree():
    assert T0 == 1_700_000_000_000


ISOLATED = {"ensemblePlacementPolicy": "isolated", "bookkeeperClientIsolationGroups": "g1"}


def test_the_isolation_policy_places_only_on_grouped_members():
    """Grouped bookies (rack info) are group members; location-only bookies are in no group."""
    runner = Runner(ISOLATED)
    members = [writable(0, f"g{i}:3181", f"/r{i}", group="g1") for i in range(3)]
    others = [writable(0, f"u{i}:3181", f"/r{i}") for i in range(3)]
    runner.run(*members, *others)
    runner.run(*[create(1, f"r{i}", 3, 2, 2) for i in range(20)])
    placed = {b for i in range(20) for b in runner.decision(f"r{i}")["ensemble"]}
    assert placed == {"g0:3181", "g1:3181", "g2:3181"}


def test_moving_a_bookie_out_of_the_group_takes_effect_at_the_next_request():
    runner = Runner(ISOLATED)
    runner.run(*[writable(0, f"g{i}:3181", f"/r{i}", group="g1") for i in range(4)],
               *[writable(0, f"u{i}:3181", f"/r{i}") for i in range(3)])
    runner.run(location(1, "g3:3181", "/r3", group="other"))
    runner.run(*[create(2, f"r{i}", 3, 2, 2) for i in range(20)])
    placed = {b for i in range(20) for b in runner.decision(f"r{i}")["ensemble"]}
    assert placed == {"g0:3181", "g1:3181", "g2:3181"}


def test_a_grouped_bookies_rack_change_hands_the_policy_that_bookie_alone():
    """Regression: after a `bookie_location` for a grouped bookie, the next request handed the whole
    rack info to the policy, which re-read it and notified every listed bookie (O(bookies) per rack
    change). Now the policy gets the changed listing alone, and the
    group analysis, which a rack change does not affect, is kept."""
    from unittest import mock

    from policies.resolver import LocationResolver
    from state import step

    runner = Runner({**ISOLATED, "networkTopologyStabilizePeriodSeconds": "30"})
    runner.run(*[writable(0, f"g{i:03d}:3181", f"/r{i % 5}", group=("g1", "g2")[i % 2]) for i in range(200)])
    runner.run(create(1, "warm", 3, 2, 2))
    policy = runner.model.policy
    notified = []
    on_rack_change = type(policy).on_bookie_rack_change

    def counting(self, bookies):
        bookies = list(bookies)
        notified.extend(bookies)
        return on_rack_change(self, bookies)

    with mock.patch.object(type(policy), "on_bookie_rack_change", counting), \
            mock.patch.object(LocationResolver, "update_rack_info", side_effect=AssertionError("whole rack info")), \
            mock.patch.object(LocationResolver, "group_members", wraps=policy.resolver.group_members) as members:
        produced = step(runner.model, runner.cluster, [location(2, "g007:3181", "/r9"), create(3, "after", 3, 2, 2)],
                        runner.settings).outputs
    runner.model.check_invariants()
    assert notified == ["g007:3181", "g007:3181"], "at the event (mapping), then at the request (rack info)"
    assert members.call_count == 0, "the group analysis was rebuilt for a rack change"
    assert runner.model.policy.known["g007:3181"] == "/r9"
    [after] = runner.decisions(produced)
    assert after["error"] is None and after["request_id"] == "after"


def test_a_listed_bookie_whose_move_failed_is_retried_when_rack_info_is_handed_over():
    """Handing rack info over notifies a rack change to every listed bookie (Pulsar); only those whose
    last move failed can react, so handing over the changed listings alone must still retry them:
    here X's move to a location of another depth succeeds once Y, the last bookie of the old
    depth, has left, at the event that changed Y's listing (Pulsar's watch fires then), not at the
    next request: a shard that gets no request must retry at the same point as one that does."""
    X, Y = "x:3181", "y:3181"
    runner = Runner(ISOLATED)
    runner.run(writable(0, X, "/r1", group="g1"), writable(0, Y, "/r2", group="g1"))
    runner.run(location(1, X, "/region/r9"))
    assert known(runner)[X] == "/r1" and X in runner.model.policy.join_failures
    runner.run(lost(3, Y))
    assert known(runner)[X] == "/r1", "a departure hands no rack info over"
    produced = runner.run(location(4, Y, "/r5"))
    assert known(runner)[X] == "/region/r9"
    assert [a["type"] for a in runner.alerts(produced=produced)] == ["placement.bookie.join_failed.resolved"]
    runner.run(create(5, "r2", 1, 1, 1))
    assert runner.decision("r2")["ensemble"] == [X]


def test_a_failed_move_is_retried_at_the_same_event_with_and_without_requests_in_between():
    """Found with random seeds (shards of one cluster disagreed): bk1's move to a deeper location
    fails while bk0 is there; bk0 leaves and comes back. Handing rack info over retries the move, and it
    succeeds only while bk0 is away; it used to be handed over at the next request, so a stream with a
    request before the departure and the same stream without it (another shard's share) placed
    differently. Now it is handed over at the location event, whatever requests follow."""
    conf = {"ensemblePlacementPolicy": "rackaware", "networkTopologyStabilizePeriodSeconds": "30"}
    events = [writable(0, "bk1:3181"), writable(0, "bk0:3181"), writable(1, "bk1:3181", "/region/r9", group="g1")]
    later = [readonly(3, "bk0:3181"), writable(4, "bk0:3181")]
    with_request, without = Runner(conf), Runner(conf)
    with_request.run(*events, create(2, "r", 1, 1, 1), *later)
    without.run(*events, *later)
    assert known(with_request) == known(without) == {"bk0:3181": "/default-rack", "bk1:3181": "/default-rack"}
