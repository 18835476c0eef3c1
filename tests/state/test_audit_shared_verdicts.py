"""One re-check pass evaluates each (ensemble, write quorum, ack quorum) once and shares the verdict
among the ledgers that hold it; outputs and registry are those of evaluating every ledger."""

import random

import pytest

import state.audit as audit_module
from state.audit import ALERT_LEDGER_NOT_ADHERING, LedgerAudit
from tests.state.helpers import CLUSTER, T0, Runner, location, lost, readonly, writable

BOOKIES = [f"b{i}:3181" for i in range(8)]
RACKS = [writable(0, bookie, f"/r{i % 3}") for i, bookie in enumerate(BOOKIES)]
CONF = {"ensemblePlacementPolicy": "rackaware", "minNumRacksPerWriteQuorum": "2"}


class CountingAudit(LedgerAudit):
    """Counts the ledgers it evaluates."""

    evaluated = 0

    def evaluate(self, view, entry, adherence=None):
        if adherence is None:
            self.evaluated += 1
        return super().evaluate(view, entry, adherence)


def _script(seed):
    """Ledgers on a few repeated ensembles (different quorums too), then a series of changes."""
    rng = random.Random(seed)
    runner = Runner(CONF)
    runner.run(*RACKS)
    audit = CountingAudit(CLUSTER)
    shapes = [(tuple(rng.sample(BOOKIES, 3)), rng.choice([(2, 2), (3, 2), (2, 1)])) for _ in range(6)]
    for ledger_id in range(120):
        ensemble, (write_quorum, ack_quorum) = rng.choice(shapes)
        audit.remember(runner.model, ledger_id=ledger_id, request_id=f"req-{ledger_id}", ensemble=list(ensemble),
                       write_quorum=write_quorum, ack_quorum=ack_quorum, time_ms=T0 + ledger_id)
    produced = []
    t = 1_000
    for _ in range(12):
        t += 1_000
        bookie = rng.choice(BOOKIES)
        record = rng.choice([lost(t, bookie), readonly(t, bookie), writable(t, bookie),
                             location(t, bookie, f"/r{rng.randrange(3)}")])
        runner.run(record)
        produced += audit.on_topology_change(runner.model, {bookie}, runner.model.clock_ms,
                                             improving=record.type != "bookie_lost", trigger=record.type)
        audit.check_invariants()
    rows = {key: (e.ensemble, e.adhering, e.adherence, e.fix_known, dict(e.open)) for key, e in audit.entries.items()}
    return [o.to_json() for o in produced], rows, audit.waiting, audit.evaluated


@pytest.mark.parametrize("seed", range(8))
def test_shared_verdicts_give_what_evaluating_every_ledger_gives(seed, monkeypatch):
    shared = _script(seed)
    monkeypatch.setattr(audit_module, "_verdicts", lambda view: None)
    each = _script(seed)
    assert shared[:3] == each[:3]
    assert shared[3] < each[3]                                     # fewer evaluations, same outputs


def test_a_lost_bookie_is_judged_once_per_distinct_ensemble_not_once_per_ledger():
    runner = Runner(CONF)
    runner.run(*RACKS)
    audit = CountingAudit(CLUSTER)
    for ledger_id in range(300):
        quorums = (2, 2) if ledger_id % 2 else (3, 2)
        audit.remember(runner.model, ledger_id=ledger_id, request_id=f"req-{ledger_id}",
                       ensemble=[BOOKIES[0], BOOKIES[1 + 3 * (ledger_id % 2)], BOOKIES[5]],
                       write_quorum=quorums[0], ack_quorum=quorums[1], time_ms=T0 + ledger_id)
    audit.evaluated = 0
    runner.run(lost(10_000, BOOKIES[0]))
    alerts = audit.on_topology_change(runner.model, {BOOKIES[0]}, runner.model.clock_ms, trigger="bookie_lost")
    assert len(alerts) == 300                                      # still one alert per ledger, each its own fix
    assert {a.payload["type"] for a in alerts} == {ALERT_LEDGER_NOT_ADHERING}
    assert audit.evaluated == 2                                    # two (ensemble, quorums) shapes
    fixes = {tuple(a.payload["data"]["fix"]["ensemble"]) for a in alerts}
    assert len(fixes) > 1                                          # fixes are drawn per ledger, not shared


def test_no_shared_verdicts_while_rack_info_is_deferred():
    runner = Runner(CONF)
    runner.run(*RACKS)
    runner.model.rack_info_stale = True
    assert audit_module._verdicts(runner.model) is None
    runner.model.rack_info_stale = False
    assert audit_module._verdicts(runner.model) == {}


def test_ledgers_on_the_same_bookies_with_other_quorums_are_judged_apart():
    """[b0, b1, b2] on racks r0, r1, r2; b2 moves to r0. Every write set of 3 still spans two racks,
    but the write set (b2, b0) of 2 does not."""
    runner = Runner(CONF)
    runner.run(*RACKS)
    audit = CountingAudit(CLUSTER)
    ensemble = BOOKIES[:3]
    for ledger_id, write_quorum in ((1, 3), (2, 2)):
        audit.remember(runner.model, ledger_id=ledger_id, request_id=f"req-{ledger_id}", ensemble=ensemble,
                       write_quorum=write_quorum, ack_quorum=2, time_ms=T0 + ledger_id)
    audit.evaluated = 0
    runner.run(location(10_000, BOOKIES[2], "/r0"))
    alerts = audit.on_topology_change(runner.model, {BOOKIES[2]}, runner.model.clock_ms, trigger="bookie_location")
    assert audit.evaluated == 2
    assert audit.entries["ledger/1"].adherence == "MEETS_STRICT"
    assert audit.entries["ledger/2"].adherence == "FAIL"
    assert [a.payload["subject"] for a in alerts] == ["ledger/2"]
