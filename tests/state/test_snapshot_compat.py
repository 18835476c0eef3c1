"""Snapshots written by an earlier engine restore to the model today's engine builds from the same records.

The fixtures in `fixtures/snapshots_v4/` were written by the engine at commit bbc078e (format v4), one per
policy: the model of cluster `snap` after the first `cut` records of a demo scenario (`events.jsonl`),
stored as `state.snapshot.dumps` writes without a codec (zlib). `confs.json` holds each policy's
configuration. A checkpoint survives an upgrade when the restored model goes on exactly as a model
built by today's code from the same records: same outputs for the rest of the scenario, same snapshot,
except for what v4 did not keep (see `_kept_by_v4`): status records, which the restored model emits too.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from events import Origin, parse_record
from state.settings import ModelSettings
from state.snapshot import dumps, loads, to_document
from state.status import STATUS, status_gauges
from state.step import step

FIXTURES = Path(__file__).parent / "fixtures" / "snapshots_v4"
CONFS = json.loads((FIXTURES / "confs.json").read_text(encoding="utf-8"))


def _records() -> list:
    lines = (FIXTURES / "events.jsonl").read_text(encoding="utf-8").splitlines()
    return [parse_record(line, Origin.from_file("events.jsonl", i + 1)) for i, line in enumerate(lines)]


@pytest.mark.parametrize("policy", sorted(CONFS["confs"]))
def test_an_earlier_engines_snapshot_goes_on_as_todays_model(policy):
    settings = ModelSettings.from_conf(CONFS["confs"][policy])
    records, cut = _records(), CONFS["cut"]
    restored = loads((FIXTURES / f"{policy}.snapshot").read_bytes(), settings)
    restored.check_invariants()
    rebuilt = loads(dumps(step(None, "snap", records[:cut], settings).model), settings)

    assert restored.policy_name == settings.placement.policy
    assert _kept_by_v4(restored) == _kept_by_v4(rebuilt)
    assert status_gauges(restored) == status_gauges(rebuilt), "open ledger alerts are counted from the audit"
    after_restored = step(restored, "snap", records[cut:], settings)
    after_rebuilt = step(rebuilt, "snap", records[cut:], settings)

    texts = [output.to_json() for output in after_restored.outputs if output.kind != STATUS]
    assert len(texts) > 500
    assert texts == [output.to_json() for output in after_rebuilt.outputs if output.kind != STATUS]
    assert _kept_by_v4(after_restored.model) == _kept_by_v4(after_rebuilt.model)
    assert status_gauges(after_restored.model) == status_gauges(after_rebuilt.model)
    assert any(output.kind == STATUS for output in after_restored.outputs), "the restored model reports its status"
    after_restored.model.check_invariants()


def _kept_by_v4(model) -> dict:
    """The model's snapshot document without what a v4 engine did not keep: the status record's emission
    state and the skew windows (`state.status`, `state.skew`). A model restored from such a snapshot
    starts them afresh, so its status records differ (times, write shares) from a model that saw the
    records before the cut; every other output and the rest of the model are the same."""
    document = to_document(model)
    del document["status"], document["skew"]
    return document
