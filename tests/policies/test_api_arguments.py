"""Arguments every policy accepts as BookKeeper's callers pass them (CONTRACT §1).

Pulsar passes `null` for "no exclusions" (`IsolatedBookieEnsemblePlacementPolicyTest.testBasic`,
`testNoIsolationGroup`, `testTheIsolationPolicyUsingCustomMetadata`), and BookKeeper treats it as an
empty set: `exclude=None` answers exactly what `exclude=()` answers.
"""

from __future__ import annotations

import random

import pytest

from policies import create_policy
from policies.errors import UnsupportedOperationError

LOCATIONS = {f"b{i}:3181": f"/r{i % 3}/rack{i % 2}" for i in range(12)}
CONFS = {
    "default": {},
    "rackaware": {},
    "rackaware stabilized": {"networkTopologyStabilizePeriodSeconds": "30"},
    "regionaware": {"reppRegionsToWrite": "r0;r1;r2", "reppMinimumRegionsForDurability": "2"},
    "zoneaware": {"desiredNumZonesPerWriteQuorum": "3", "minNumZonesPerWriteQuorum": "2"},
    "isolated": {"isolationBookieGroups": "g"},
}
RACK_INFO = {"g": {bookie: {"rack": "/rack0"} for bookie in LOCATIONS}}


def _policy(name: str):
    conf = {"ensemblePlacementPolicy": name.split()[0], **CONFS[name]}
    policy = create_policy(conf, resolver=dict(LOCATIONS), clock=lambda: 0.0)
    if name == "isolated":
        policy.update_rack_info(RACK_INFO)
    policy.on_cluster_changed(sorted(LOCATIONS), [])
    return policy


def _answer(call):
    try:
        result = call()
    except UnsupportedOperationError as exc:
        return ("unsupported", str(exc))
    return (list(result.ensemble), int(result.adherence), getattr(result, "bookie", None))


@pytest.mark.parametrize("name", sorted(CONFS))
def test_a_null_exclusion_is_no_exclusion(name):
    policy = _policy(name)
    ensemble = policy.new_ensemble(3, 3, 3, None, None, rng=random.Random(1)).ensemble
    assert ensemble == policy.new_ensemble(3, 3, 3, None, (), rng=random.Random(1)).ensemble
    assert _answer(lambda: policy.replace_bookie(3, 3, 3, None, ensemble, ensemble[0], None, rng=random.Random(2))) \
        == _answer(lambda: policy.replace_bookie(3, 3, 3, None, ensemble, ensemble[0], (), rng=random.Random(2)))
    assert _answer(lambda: policy.replace_to_adhere(3, 3, 3, None, ensemble, rng=random.Random(3))) \
        == _answer(lambda: policy.replace_to_adhere(3, 3, 3, (), ensemble, rng=random.Random(3)))
