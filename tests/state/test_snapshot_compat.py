"""Snapshots written by an earlier engine restore and go on deciding exactly as that engine did.

The fixtures in `fixtures/snapshots_v4/` were written by the engine at commit bbc078e (format v4), one per
policy: the model of cluster `snap` after the first 793 records of a demo scenario (`*.snapshot`, zlib
framing as `state.snapshot.dumps` writes without a codec). `expected.json` holds, per policy, the
configuration and the SHA-256 of the outputs that engine produced when it restored the snapshot and
stepped the rest of the scenario (`after.jsonl`) in one batch.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from events import Origin, parse_record
from state.settings import ModelSettings
from state.snapshot import loads
from state.step import step

FIXTURES = Path(__file__).parent / "fixtures" / "snapshots_v4"
EXPECTED = json.loads((FIXTURES / "expected.json").read_text(encoding="utf-8"))
POLICIES = sorted(name for name in EXPECTED if name != "first_line")


def _records() -> list:
    lines = (FIXTURES / "after.jsonl").read_text(encoding="utf-8").splitlines()
    first = EXPECTED["first_line"]
    return [parse_record(line, Origin.from_file("events.jsonl", first + i)) for i, line in enumerate(lines)]


@pytest.mark.parametrize("policy", POLICIES)
def test_an_earlier_engines_snapshot_restores_and_decides_the_same(policy):
    expected = EXPECTED[policy]
    settings = ModelSettings.from_conf(expected["conf"])
    model = loads((FIXTURES / f"{policy}.snapshot").read_bytes(), settings)
    model.check_invariants()
    assert model.policy_name == settings.placement.policy

    result = step(model, "snap", _records(), settings)

    texts = [output.to_json() for output in result.outputs]
    assert len(texts) == expected["outputs"]
    assert hashlib.sha256("\n".join(texts).encode()).hexdigest() == expected["sha256"]
    result.model.check_invariants()
