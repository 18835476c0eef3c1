"""A decision's id identifies its content: the cluster, the request_id and what the request asks.

An unchanged request sent again keeps its id (consumers drop it as a duplicate); a different request
that reuses a request_id gets another id, so dropping duplicates by id never loses an answer. Ids do
not depend on how the input is cut into micro-batches.
"""

from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from state import outputs
from state.outputs import ALERT_DECISION_FAILED, decision_id, request_content, stable_id
from tests.state.helpers import Runner, check, create, raw, replace, writable

A, B, C, D = "a:3181", "b:3181", "c:3181", "d:3181"


def four_bookies(runner: Runner) -> None:
    runner.run(writable(0, A, "/r1"), writable(0, B, "/r1"), writable(0, C, "/r2"), writable(0, D, "/r2"))


def _ids(items_per_batch: list[list]) -> list[tuple[str, str]]:
    runner = Runner()
    four_bookies(runner)
    for batch in items_per_batch:
        runner.run(*batch)
    return [(d["request_id"], d["id"]) for d in runner.decisions()]


def test_the_same_request_sent_twice_gets_the_same_id_and_the_same_answer():
    runner = Runner()
    four_bookies(runner)
    runner.run(create(5, "req-1", 3, 2, 2), create(5, "req-1", 3, 2, 2))
    first, second = runner.decisions()
    assert first == second, "an unchanged duplicate is answered identically, id included"


def test_a_reused_request_id_with_other_content_gets_another_id():
    runner = Runner()
    four_bookies(runner)
    runner.run(create(5, "req-1", 3, 2, 2), create(5, "req-1", 4, 2, 2))
    three, four = runner.decisions()
    assert (len(three["ensemble"]), len(four["ensemble"])) == (3, 4)
    assert three["id"] != four["id"]


def test_every_field_of_a_request_is_part_of_its_content():
    base = create(5, "r", 3, 2, 2, exclude=[A], metadata=[("k", b"v")], ledger_id=7)
    changed = [dataclasses.replace(base, time_ms=base.time_ms + 1), dataclasses.replace(base, ledger_id=8),
               dataclasses.replace(base, ensemble_size=4), dataclasses.replace(base, write_quorum=3),
               dataclasses.replace(base, ack_quorum=1), dataclasses.replace(base, exclude=frozenset({B})),
               dataclasses.replace(base, custom_metadata=(("k", b"w"),))]
    contents = {request_content(request) for request in [base, *changed]}
    assert len(contents) == 1 + len(changed)
    assert request_content(dataclasses.replace(base, cluster="other", request_id="other")) == request_content(base)
    swap = replace(5, "r", [A, C], A)
    assert request_content(swap) != request_content(dataclasses.replace(swap, ensemble=(C, A), bookie=A))
    probe = check(5, "r", [A, C], ledger_id=1)
    assert len({request_content(probe), request_content(swap), request_content(base)}) == 3


def test_exclude_order_and_origin_do_not_change_the_content():
    one = raw({"type": "ledger_create", "cluster": "c1", "time": "2026-01-01T00:00:00Z", "request_id": "r",
               "ensemble_size": 3, "write_quorum": 2, "ack_quorum": 2, "exclude": [A, B]}, line=1)
    two = raw({"exclude": [B, A], "ack_quorum": 2, "write_quorum": 2, "ensemble_size": 3, "request_id": "r",
               "time": "2026-01-01T01:00:00+01:00", "cluster": "c1", "type": "ledger_create"}, line=9)
    assert request_content(one) == request_content(two)


def test_the_id_is_the_stable_id_of_cluster_request_and_content():
    request = create(5, "req-1")
    content = request_content(request)
    assert decision_id("c1", "req-1", content) == stable_id(outputs.DECISION, "c1", "req-1", content)
    assert decision_id("c1", "req-1", content) != decision_id("c2", "req-1", content)


@given(cut=st.integers(0, 4))
def test_ids_do_not_depend_on_batch_boundaries(cut):
    items = [create(5, "r", 3, 2, 2), create(5, "r", 3, 2, 2), create(6, "r", 4, 2, 2), create(7, "s", 2, 2, 1)]
    assert _ids([items[:cut], items[cut:]]) == _ids([items])


def test_invalid_requests_reusing_a_request_id_get_their_own_ids():
    runner = Runner()
    four_bookies(runner)
    good = create(5, "req-1")
    bad = {"type": "ledger_create", "cluster": "c1", "time": "2026-01-01T00:00:00Z", "request_id": "req-1",
           "ensemble_size": 2, "write_quorum": 3, "ack_quorum": 2}
    other_bad = dict(bad, ensemble_size=1)
    runner.run(good, raw(bad, line=1), raw(bad, line=2), raw(other_bad, line=3))
    failed, [placed] = runner.decisions()[:3], runner.decisions()[3:]   # dead letters are reported first
    assert [d["error"]["code"] for d in failed] == ["INVALID_REQUEST"] * 3
    assert failed[0]["id"] == failed[1]["id"], "the same invalid request, sent again"
    assert len({placed["id"], failed[0]["id"], failed[2]["id"]}) == 3


def test_the_failure_alerts_of_two_requests_sharing_a_request_id_have_their_own_ids():
    runner = Runner()
    four_bookies(runner)
    runner.run(create(5, "big", 5, 2, 2), create(5, "big", 6, 2, 2))
    one, two = runner.alerts(ALERT_DECISION_FAILED)
    assert one["id"] != two["id"]
    assert [one["data"]["decision_id"], two["data"]["decision_id"]] == [d["id"] for d in runner.decisions()]
