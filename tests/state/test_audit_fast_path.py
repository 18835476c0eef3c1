"""`LedgerAudit.remember`'s fast path (a placement that needed no fallback) leaves the registry as
the general path does, for new and already remembered ledgers, and resolves open alerts the same way."""

from state.audit import ALERT_LEDGER_NOT_ADHERING, LedgerAudit
from tests.state.helpers import CLUSTER, T0, Runner, lost, writable

A1, A2, B1, B2, C1, C2 = "a1:3181", "a2:3181", "b1:3181", "b2:3181", "c1:3181", "c2:3181"
RACKS = [writable(0, A1, "/a"), writable(0, A2, "/a"), writable(0, B1, "/b"), writable(0, B2, "/b"),
         writable(0, C1, "/c"), writable(0, C2, "/c")]
STRICT = {"policy": "rackaware", "steps": [], "fallbacks": [], "excluded": {}}


class GeneralPathOnly(LedgerAudit):
    """The audit with its fast path turned off: every registration takes the general path."""

    @staticmethod
    def _plainly_placed(view, members):
        return False


def _state(audit):
    rows = {key: (e.ledger_id, e.request_id, e.ensemble, e.write_quorum, e.ack_quorum, e.seen_ms, e.relaxed, e.rules,
                  e.adhering, e.adherence, e.fix_known, dict(e.open)) for key, e in audit.entries.items()}
    return list(audit.entries), rows, audit.entries.bookie_index(), audit.waiting


def _script(audit_class):
    runner = Runner({"ensemblePlacementPolicy": "rackaware", "minNumRacksPerWriteQuorum": "2"})
    runner.run(*RACKS)
    audit = audit_class(CLUSTER)
    produced = []

    def remember(ledger_id, ensemble, t, adherence="MEETS_STRICT", explain=STRICT):
        produced.extend(audit.remember(runner.model, ledger_id=ledger_id, request_id=f"req-{ledger_id}-{t}",
                                       ensemble=ensemble, write_quorum=2, ack_quorum=2, time_ms=T0 + t,
                                       adherence=adherence, explain=explain))

    remember(1, [A1, B1, C1], 1)
    remember(2, [A2, B2, C2], 2)
    remember(3, [A1, A2], 3, adherence="FAIL")                  # general path in both: waits for a fix
    remember(3, [A1, B2], 4)                                    # re-placed adhering: no longer waits
    runner.run(lost(10_000, B1))
    produced.extend(audit.on_topology_change(runner.model, {B1}, runner.model.clock_ms, trigger="lost"))
    remember(1, [A1, C2, C1], 20_000)                           # re-placed: resolves the open alert
    remember(2, [A2, B2, C2], 20_001)                           # refreshed, same ensemble
    audit.check_invariants()
    return [o.to_json() for o in produced], _state(audit)


def test_the_fast_path_gives_what_the_general_path_gives():
    fast, general = _script(LedgerAudit), _script(GeneralPathOnly)
    assert fast == general
    texts, (order, rows, _, waiting) = fast
    assert order == ["ledger/3", "ledger/1", "ledger/2"] and waiting == set()
    assert any(f'"type":"{ALERT_LEDGER_NOT_ADHERING}.resolved"' in text for text in texts)
    assert rows["ledger/1"][8:] == (True, "MEETS_STRICT", False, {})
