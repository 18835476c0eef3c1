"""The audit registry and the open health alerts travel through the model snapshot (v2), and a v1
snapshot (written before the audit existed) still loads."""

import pytest

from state import ModelSettings
from state.audit import ALERT_LEDGER_NOT_ADHERING
from state.health import ALERT_DEFAULT_RACK
from state.outputs import ALERT_FLAPPING
from state.snapshot import dumps, from_document, loads, to_document
from tests.state.helpers import Runner, create, format_1, lost, readonly, writable

CONF = {"ensemblePlacementPolicy": "rackaware", "enforceMinNumRacksPerWriteQuorum": "true",
        "engine.flapThreshold": "2"}
SETUP = [writable(0, "a:3181", "/a"), writable(0, "b:3181", "/b"), writable(0, "c:3181", "/c"),
         writable(0, "d:3181")]


def restored(runner):
    runner.model = loads(dumps(runner.model), runner.settings)
    runner.model.check_invariants()


def test_open_alerts_survive_a_snapshot_and_resolve_afterwards():
    runner = Runner(CONF)
    runner.run(*SETUP, create(1_000, "r", 3, 2, 2, ledger_id=1))
    victim = runner.decision("r")["ensemble"][0]
    runner.run(lost(2_000, victim))
    [opened] = runner.alerts(ALERT_LEDGER_NOT_ADHERING)
    before = to_document(runner.model)
    restored(runner)
    assert to_document(runner.model) == before
    assert runner.model.audit.open_alerts() == {"ledger/1": {ALERT_LEDGER_NOT_ADHERING: opened["id"]}}
    assert runner.model.health.default_rack == {"d:3181": "warning"}
    produced = runner.run(writable(3_000, victim))
    [resolved] = runner.alerts(produced=produced)
    assert resolved["type"] == ALERT_LEDGER_NOT_ADHERING + ".resolved"
    assert resolved["data"]["resolves"] == opened["id"]
    assert runner.run(writable(4_000, "d:3181")) == [], "the default-rack alert is not raised twice"


def test_a_v1_snapshot_loads_with_an_empty_audit_and_re_raises_nothing():
    runner = Runner(CONF)
    runner.run(*SETUP, lost(1_000, "a:3181"), writable(1_500, "a:3181"), lost(2_000, "a:3181"))
    assert len(runner.alerts(ALERT_FLAPPING)) == 1
    document = to_document(runner.model)
    document["v"] = 1
    del document["audit"], document["health"]
    model = from_document(document, runner.settings)
    model.check_invariants()
    assert len(model.audit) == 0
    assert model.health.flapping == {"a:3181"}, "flapping already reported by the v1 engine"
    runner.model = model
    assert runner.run(writable(2_500, "a:3181")) == [], "nothing is re-raised"
    produced = runner.run(lost(3_000, "d:3181"), writable(3_500, "d:3181"))
    assert [a["type"] for a in runner.alerts(produced=produced)] == [ALERT_DEFAULT_RACK], \
        "the default-rack bookie, never reported by v1, is reported at its next change"


def test_a_v3_snapshot_loads_its_full_width_registry_and_keeps_its_open_alerts():
    runner = Runner(CONF)
    runner.run(*SETUP, *[create(1_000 + n, f"r{n}", 3, 2, 2, ledger_id=n) for n in range(40)])
    victim = runner.decision("r1")["ensemble"][0]
    runner.run(lost(2_000, victim))
    opened = runner.model.audit.open_alerts()
    assert opened
    document = to_document(runner.model)
    older = dict(document, v=3, audit={**format_1(document["audit"]), "cursor": document["audit"]["cursor"]})
    assert older["audit"]["ledger_ids"].startswith("q:")
    model = from_document(older, runner.settings)
    model.check_invariants()
    assert to_document(model) == document
    assert model.audit.open_alerts() == opened


@pytest.mark.parametrize("bound", [0, 1])
def test_a_snapshot_restored_under_a_lower_max_ledgers_keeps_the_bound(bound):
    """Found with random seeds (a restart under another configuration): the registry was restored
    whole, so with `engine.audit.maxLedgers=0` ("turns the audit off") the restored ledgers kept
    raising alerts until their TTL, and with a lower bound it stayed above it until the next
    placement. The next step forgets the excess, least recently seen first, resolving its alerts."""
    runner = Runner(CONF)
    runner.run(*SETUP, create(1_000, "r1", 3, 2, 2, ledger_id=1), create(1_500, "r2", 3, 2, 2, ledger_id=2))
    victim = runner.decision("r1")["ensemble"][0]
    runner.run(lost(2_000, victim))
    opened = {a["subject"]: a["id"] for a in runner.alerts(ALERT_LEDGER_NOT_ADHERING)}
    assert opened.keys() == {"ledger/1", "ledger/2"}
    runner.conf = {**CONF, "engine.audit.maxLedgers": str(bound)}
    runner.settings = ModelSettings.from_conf(runner.conf)
    runner.model = loads(dumps(runner.model), runner.settings)
    produced = runner.run(writable(3_000, "e:3181", "/e"))
    kept = {"ledger/2"} if bound else set()
    assert set(runner.model.audit.entries.keys()) == kept
    resolved = runner.alerts(ALERT_LEDGER_NOT_ADHERING + ".resolved", produced=produced)
    assert {a["subject"]: a["data"]["resolves"] for a in resolved} == \
        {subject: opened_id for subject, opened_id in opened.items() if subject not in kept}
    after = runner.run(writable(4_000, victim))
    assert {a["subject"] for a in runner.alerts(produced=after)} == kept, "forgotten ledgers raise nothing"


def test_a_snapshot_of_the_stale_read_only_quirk_restored_without_it_reports_the_read_only_set():
    """Found with random seeds: written under `placement.compat.keepStaleReadOnlySet=true` (Java's
    never-cleared read-only set), restored without it, the policy kept the stale set until the next
    membership change."""
    quirk = {"ensemblePlacementPolicy": "rackaware", "networkTopologyStabilizePeriodSeconds": "5",
             "placement.compat.keepStaleReadOnlySet": "true"}
    runner = Runner(quirk)
    runner.run(writable(0, "a:3181", "/a"), readonly(0, "b:3181"), writable(0, "b:3181", "/b"))
    assert runner.model.policy.readonly == {"b:3181"}
    plain = {key: value for key, value in quirk.items() if not key.startswith("placement.compat")}
    model = loads(dumps(runner.model), ModelSettings.from_conf(plain))
    assert model.policy.readonly == set() and model.policy.secondary.readonly == set()
    model.check_invariants()
