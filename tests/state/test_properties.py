"""Properties of the pure step over random time-ordered streams (STYLE R14):

* outputs do not depend on micro-batch boundaries;
* a snapshot round trip between batches changes no output;
* shards=N gives the same decisions and alerts as shards=1 once every shard is settled to the same
  end (tests/state/test_ticks.py: a shard reports an expiry when its own records or ticks reach it);
* the model's invariants hold after every step.
"""

import copy
from unittest import mock

from hypothesis import given
from hypothesis import strategies as st

from state import ClusterModel, ModelSettings, dumps, loads, step
from state.health import TopologyHealth
from state.snapshot import to_document
from tests.state.helpers import CLUSTER
from tests.state.strategies import CONFS, configured_streams


def run(conf, batches, *, snapshot=False, shard=0, shards=1):
    """Feed batches through `step` (optionally via dumps/loads between them); check invariants."""
    settings = ModelSettings.from_conf(conf)
    model = None
    produced = []
    for batch in batches:
        result = step(model, CLUSTER, batch, settings, shard=shard, shards=shards)
        model = result.model
        model.check_invariants()
        produced.extend((o.kind, o.id, o.to_json()) for o in result.outputs)
        if snapshot:
            model = loads(dumps(model), settings)
            model.check_invariants()
    return model, produced


def split(records, cuts):
    points = sorted({min(c, len(records)) for c in cuts})
    batches, start = [], 0
    for point in points + [len(records)]:
        batches.append(records[start:point])
        start = point
    return batches


@given(case=configured_streams(metadata_groups=True), cuts=st.lists(st.integers(0, 40), max_size=4))
def test_outputs_do_not_depend_on_batch_boundaries(case, cuts):
    """Splitting the input into micro-batches at any cuts changes no output."""
    name, records = case
    conf = CONFS[name]
    _, whole = run(conf, [records])
    _, pieces = run(conf, split(records, cuts))
    assert pieces == whole


@given(case=configured_streams(metadata_groups=True), cuts=st.lists(st.integers(0, 40), min_size=1, max_size=3))
def test_snapshot_round_trips_change_no_output(case, cuts):
    """Restoring the model from its snapshot between batches gives the same decisions and alerts."""
    name, records = case
    conf = CONFS[name]
    _, whole = run(conf, [records])
    _, restored = run(conf, split(records, cuts), snapshot=True)
    assert restored == whole


@given(case=configured_streams(requests=False, max_size=30))
def test_snapshot_document_round_trips(case):
    """loads(dumps(model)) is the same model, document for document."""
    name, records = case
    conf = CONFS[name]
    model, _ = run(conf, [records])
    again = loads(dumps(model), ModelSettings.from_conf(conf))
    assert to_document(again) == to_document(model)


@given(case=configured_streams(metadata_groups=True), cuts=st.lists(st.integers(0, 40), max_size=3),
       snapshot=st.booleans())
def test_pending_leaves_read_from_the_change_log_match_a_whole_comparison(case, cuts, snapshot):
    """At every observation, the health checks reading the model's log of pending changes produce
    what comparing the whole pending leaves (as before the log, O(pending)) produces."""
    compared = []
    observe = TopologyHealth.observe

    def checked(health, model, touched, time_ms):
        reference = copy.deepcopy(health)
        reference.pending_serial = None        # no log: compare the whole dicts
        expected = observe(reference, model, touched, time_ms)
        produced = observe(health, model, touched, time_ms)
        assert [o.to_json() for o in produced] == [o.to_json() for o in expected]
        assert (health.pending, health.settled) == (reference.pending, reference.settled)
        compared.append(len(produced))
        return produced

    name, records = case
    with mock.patch.object(TopologyHealth, "observe", checked):
        run(CONFS[name], split(records, cuts), snapshot=snapshot)
    assert len(compared) >= sum(1 for r in records if not hasattr(r, "request_id"))


@given(case=configured_streams(metadata_groups=True), cuts=st.lists(st.integers(0, 40), max_size=3),
       snapshot=st.booleans())
def test_rack_info_handed_over_by_bookie_matches_the_whole_hand_over(case, cuts, snapshot):
    """Handing the policy only the rack-info listings that changed (`update_rack_entries`) gives the
    outputs and the final model that handing it the whole rack info (as before) gives."""
    flush = ClusterModel.flush_rack_info

    def whole(self):
        self.rack_info_dirty = None            # unknown changes: the whole rack info
        flush(self)

    assert_same_as_reference(case, cuts, snapshot, mock.patch.object(ClusterModel, "flush_rack_info", whole))


@given(case=configured_streams(metadata_groups=True), cuts=st.lists(st.integers(0, 40), max_size=3),
       snapshot=st.booleans())
def test_membership_handed_over_as_changes_matches_the_whole_snapshot(case, cuts, snapshot):
    """Telling the policy which bookies' membership changed (`on_cluster_changed(changed=...)`, O(changed)
    per event) gives the outputs and the final model that comparing the whole sets (as before) gives."""
    changed = ClusterModel._cluster_changed

    def whole(self, joined, **kwargs):
        self.membership_changed = None         # unknown changes: the policy compares the whole sets
        return changed(self, joined, **kwargs)

    assert_same_as_reference(case, cuts, snapshot, mock.patch.object(ClusterModel, "_cluster_changed", whole))


@given(case=configured_streams(metadata_groups=True), cuts=st.lists(st.integers(0, 40), max_size=3),
       snapshot=st.booleans())
def test_shared_verdicts_match_evaluating_every_ledger(case, cuts, snapshot):
    """The audit shares one verdict among the ledgers of a re-check pass that hold the same ensemble
    and quorums (`state.audit._verdicts`); outputs and the final model are those of evaluating each."""
    assert_same_as_reference(case, cuts, snapshot, mock.patch("state.audit._verdicts", lambda view: None))


def assert_same_as_reference(case, cuts, snapshot, reference_patch):
    """The outputs and the final model of `case` equal those of a run under `reference_patch` (the
    slower path a faster one replaced)."""
    name, records = case
    conf = CONFS[name]
    batches = split(records, cuts)
    model, produced = run(conf, batches, snapshot=snapshot)
    with reference_patch:
        reference, expected = run(conf, batches, snapshot=snapshot)
    assert produced == expected
    assert to_document(model) == to_document(reference)


def shard_of(record, shards):
    """As streaming/job.py routes: by ledger id when the request has one (the audit keys ledgers), else request id."""
    if not hasattr(record, "request_id"):
        return None
    if record.ledger_id is not None:
        return record.ledger_id % shards
    return int(record.request_id.split("-")[1]) % shards
