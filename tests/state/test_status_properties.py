"""Status records and skew alerts over random streams: like every output, they do not depend on
micro-batch boundaries, idle ticks or snapshot round trips (STYLE R14).

The keys are set so that both happen often in short streams: a status interval of seconds, skew windows
of a few decisions judged after each one, with a loose p-value and ratio (an alert opens and resolves
every few decisions on an 8-bookie cluster).
"""

from hypothesis import assume, given
from hypothesis import strategies as st

from state.skew import ALERT_SKEW
from state.status import STATUS
from tests.state.helpers import create, writable
from tests.state.strategies import CONFS, configured_streams
from tests.state.test_properties import run, split
from tests.state.test_ticks import assert_shards_match_one, run_with_ticks, ticked

EAGER = {"engine.statusIntervalSeconds": "7", "engine.skew.windowDecisions": "6", "engine.skew.minDecisions": "2",
         "engine.skew.checkEveryDecisions": "1", "engine.skew.pValue": "0.4", "engine.skew.minRatio": "1.0"}


def eager(name):
    return {**CONFS[name], **EAGER}


@given(case=configured_streams(metadata_groups=True), cuts=st.lists(st.integers(0, 40), max_size=4),
       snapshot=st.booleans())
def test_status_and_skew_do_not_depend_on_batch_boundaries_or_snapshots(case, cuts, snapshot):
    """Splitting the input at any cuts, with or without a snapshot round trip between batches, changes no
    output: status records and skew alerts included."""
    name, records = case
    _, whole = run(eager(name), [records])
    _, pieces = run(eager(name), split(records, cuts), snapshot=snapshot)
    assert pieces == whole


@given(case=configured_streams(metadata_groups=True), cuts=st.lists(st.integers(0, 40), max_size=4),
       fractions=st.lists(st.sampled_from((0.0, 0.3, 0.999, 1.0)), min_size=1, max_size=4))
def test_status_and_skew_do_not_depend_on_idle_ticks(case, cuts, fractions):
    """Ticks between batches bring a due status record forward to the time it was due, never another."""
    name, records = case
    end_ms = records[-1].time_ms + 500_000
    whole = run_with_ticks(eager(name), [records], [None], end_ms)
    batches, horizons = ticked(records, cuts, fractions)
    assert run_with_ticks(eager(name), batches, horizons, end_ms) == whole


@given(case=configured_streams(metadata_groups=True), shards=st.integers(2, 4),
       cuts=st.lists(st.integers(0, 40), max_size=3),
       fractions=st.lists(st.sampled_from((0.0, 0.5, 1.0)), min_size=1, max_size=3))
def test_per_shard_status_and_skew_leave_every_other_output_as_one_shard_gives_it(case, shards, cuts, fractions):
    """With eager status and skew keys, the outputs besides them are still the unsharded ones."""
    name, records = case
    assume(CONFS[name]["ensemblePlacementPolicy"] != "regionaware")   # round robin per shard (test_ticks.py)
    assert_shards_match_one(eager(name), records, shards, cuts, fractions)


def test_the_eager_keys_make_both_happen():
    """The properties above exercise what they claim: status records and skew alerts on a short stream."""
    records = [writable(0, f"bk{i}:3181", f"/r{i % 3}") for i in range(6)]
    records += [create(1_000 * i, f"req-{i}", 2, 2, 2, ledger_id=i, exclude=["bk0:3181", "bk1:3181", "bk2:3181"])
                for i in range(1, 30)]
    _, produced = run(eager("rackaware-enforced"), [records])
    assert any(kind == STATUS for kind, _, _ in produced)
    assert any(kind == "alert" and ALERT_SKEW in text for kind, _, text in produced)
