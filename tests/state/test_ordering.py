"""Event-time order inside a batch, and the late-record rule across batches."""

from events.times import format_time
from state.ordering import effective_time, in_time_order
from tests.state.helpers import T0, Runner, create, lost, writable

A, B = "a:3181", "b:3181"
STABILIZED = {"ensemblePlacementPolicy": "rackaware", "networkTopologyStabilizePeriodSeconds": "30"}


def test_records_sort_by_time_then_arrival():
    records = [lost(20, A), writable(10, A, "/r1"), writable(10, B, "/r2"), lost(5, B)]
    assert in_time_order(records) == [records[3], records[1], records[2], records[0]]


def test_effective_time_never_rewinds():
    assert effective_time(10, 5) == (10, False)
    assert effective_time(5, 5) == (5, False)
    assert effective_time(4, 5) == (5, True)


def test_out_of_order_events_in_one_batch_are_applied_in_time_order():
    runner = Runner()
    runner.run(lost(20, B), writable(10, B, "/r2"), writable(0, A, "/r1"))
    assert runner.model.writable == {A} and runner.model.dead == {B}
    assert runner.model.late_records == 0


def test_equal_times_keep_arrival_order():
    first = Runner()
    first.run(writable(10, B, "/r2"), lost(10, B))
    assert first.model.writable == set()
    second = Runner()
    second.run(lost(10, B), writable(10, B, "/r2"))
    assert second.model.writable == {B}


def test_a_request_is_answered_after_the_batch_events_up_to_its_time():
    runner = Runner()
    runner.run(create(15, "r", 2, 2, 2), writable(10, A, "/r1"), writable(12, B, "/r2"), lost(20, A))
    assert runner.decision("r")["status"] == "ok"


def test_a_late_event_is_applied_at_the_clock_and_counted():
    runner = Runner(STABILIZED)
    runner.run(writable(0, A, "/r1"), writable(20_000, B, "/r2"))
    runner.run(lost(10_000, A))
    model = runner.model
    assert model.late_records == 1
    assert model.clock_ms == T0 + 20_000, "the clock never goes back"
    assert model.dead == {A}
    assert model.absent_since[A] == T0 + 20_000
    assert model.pending_leaves() == {A: (T0 + 20_000) / 1000 + 30}, "the delay runs from the clock"


def test_a_late_request_is_answered_now_but_keeps_its_own_time():
    runner = Runner()
    runner.run(writable(0, A, "/r1"), writable(0, B, "/r2"), lost(50, B))
    runner.run(create(10, "late", 2, 2, 2))
    decision = runner.decision("late")
    assert decision["status"] == "failed", "answered against the cluster as it stands"
    assert decision["time"] == format_time(T0 + 10)
    assert runner.model.late_records == 1
