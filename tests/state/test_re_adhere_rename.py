"""`placement.ledger.readhere_possible` is now `placement.ledger.re_adhere_possible`; the old name is an
alias for one release.

A model restored from a snapshot that an engine using the old name wrote keeps its open alerts and
resolves them under the new name, with `resolves` naming the id they were opened with. The fixtures of
`fixtures/snapshots_v4/` were written by such an engine (see test_snapshot_compat.py) and hold open
alerts under the old name. Alert ids do not change with the rename.
"""

from __future__ import annotations

import json
import zlib

import pytest

from state import outputs
from state.outputs import ALERT_LEDGER_RE_ADHERE, ALERT_LEDGER_RE_ADHERE_OLD_NAME, alert_id, current_alert_type
from state.registry import AuditEntry, LedgerRegistry
from state.settings import ModelSettings
from state.snapshot import dumps, loads
from state.step import step
from tests.state.helpers import format_1, v2_audit
from tests.state.test_snapshot_compat import CONFS, FIXTURES, _records

OLD, NEW = ALERT_LEDGER_RE_ADHERE_OLD_NAME, ALERT_LEDGER_RE_ADHERE
RESOLVED = outputs.RESOLVED_SUFFIX


def _old_open_alerts(policy: str) -> dict[str, str]:
    """opening id -> alert type, as the fixture's snapshot stores them (read without the engine)."""
    document = json.loads(zlib.decompress((FIXTURES / f"{policy}.snapshot").read_bytes()))
    opened = {}
    for text in document["audit"]["extra"]:
        opened.update({ident: alert_type for alert_type, ident in json.loads(text)[4].items()})
    return opened


@pytest.mark.parametrize("policy", ["isolated", "rackaware", "regionaware"])
def test_alerts_opened_under_the_old_name_stay_open_and_resolve_under_the_new_one(policy):
    stored = _old_open_alerts(policy)
    old_ids = {ident for ident, alert_type in stored.items() if alert_type == OLD}
    assert old_ids, "the fixture holds open alerts under the old name"
    settings = ModelSettings.from_conf(CONFS["confs"][policy])
    restored = loads((FIXTURES / f"{policy}.snapshot").read_bytes(), settings)

    assert OLD.encode() not in zlib.decompress(dumps(restored)), "stored again under the new name only"
    now_open = {ident: alert_type for types in restored.audit.open_alerts().values()
                for alert_type, ident in types.items()}
    assert now_open == {ident: current_alert_type(alert_type) for ident, alert_type in stored.items()}

    after = step(restored, "snap", _records()[CONFS["cut"]:], settings)
    alerts = [output.payload for output in after.outputs if output.kind == outputs.ALERT]
    resolving = [alert for alert in alerts if alert["data"].get("resolves") in old_ids]
    assert resolving, "the rest of the scenario resolves some of them"
    assert {alert["type"] for alert in resolving} == {NEW + RESOLVED}
    assert not any(alert["type"].startswith(OLD) for alert in alerts)
    still_open = {ident for types in after.model.audit.open_alerts().values() for ident in types.values()}
    assert old_ids - {alert["data"]["resolves"] for alert in resolving} <= still_open, "none is lost"


def test_an_alert_keeps_the_id_its_old_name_gave():
    common = {"cluster": "c1", "subject": "ledger/7", "time_ms": 1_000, "key": "v3:bookie_writable b1:3181"}
    for alert_type in (NEW, NEW + RESOLVED):
        made = outputs.alert(alert_type=alert_type, severity=outputs.INFO, data={}, **common)
        assert made.payload["type"] == alert_type
        assert made.id == alert_id(alert_type.replace(NEW, OLD), **common)
    other = outputs.alert(alert_type=outputs.ALERT_LEDGER_NOT_ADHERING, severity=outputs.INFO, data={}, **common)
    assert other.id == alert_id(outputs.ALERT_LEDGER_NOT_ADHERING, **common)


OPEN = [{NEW: "a1"}, {outputs.ALERT_LEDGER_NOT_ADHERING: "n2"}, {}, {NEW: "a4"}]


def _packed_with_open_alerts() -> dict:
    """A registry packed by today's engine: ledgers 0-3, with the open alerts of `OPEN`."""
    registry = LedgerRegistry()
    for number, open_alerts in enumerate(OPEN):
        registry.add(AuditEntry(f"ledger/{number}", number, f"r{number}", ("b1:3181", "b2:3181"), 2, 2, number,
                                adhering=not open_alerts, adherence="FAIL" if open_alerts else "MEETS_STRICT",
                                open=dict(open_alerts)))
    return registry.pack()


def _with_old_name(value):
    return json.loads(json.dumps(value).replace(NEW, OLD))


@pytest.mark.parametrize("form", ["format 2", "format 1", "list columns"])
def test_every_stored_form_of_the_registry_reads_old_names_as_new(form):
    packed = _packed_with_open_alerts()
    old = _with_old_name({"format 2": dict, "format 1": format_1, "list columns": v2_audit}[form](packed))
    assert OLD in json.dumps(old)
    registry = LedgerRegistry()
    registry.unpack(old)
    assert [entry.open for entry in registry.values()] == OPEN
    if form != "list columns":           # the packed forms read back as the current engine packs them
        fresh = LedgerRegistry()
        fresh.unpack(old)
        assert fresh.pack() == packed


def test_current_alert_type_renames_only_the_old_names():
    assert current_alert_type(OLD) == NEW
    assert current_alert_type(OLD + RESOLVED) == NEW + RESOLVED
    assert current_alert_type(NEW) == NEW
    assert current_alert_type(outputs.ALERT_LEDGER_NOT_ADHERING) == outputs.ALERT_LEDGER_NOT_ADHERING
