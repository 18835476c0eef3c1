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


class _Unwalkable(set):
    """A membership set that may be asked about members but not walked."""

    def __iter__(self):
        raise AssertionError("the policy walked the whole membership set")


@pytest.mark.parametrize("conf", [
    {"ensemblePlacementPolicy": "default", "diskWeightBasedPlacementEnabled": "true"},
    {"ensemblePlacementPolicy": "rackaware", "networkTopologyStabilizePeriodSeconds": "30"},
    {"ensemblePlacementPolicy": "regionaware", "networkTopologyStabilizePeriodSeconds": "30"},
    {"ensemblePlacementPolicy": "zoneaware"},
    {"ensemblePlacementPolicy": "isolated", "bookkeeperClientIsolationGroups": "g1"},
], ids=lambda conf: conf["ensemblePlacementPolicy"])
def test_membership_changes_named_by_the_caller_are_applied_without_walking_the_cluster(conf):
    """`on_cluster_changed(..., changed=...)` finds who left and who joined among the named bookies (and
    earlier join failures), O(changed) per event instead of comparing the whole sets, with the same
    answers as the whole comparison."""
    zone = conf["ensemblePlacementPolicy"] == "zoneaware"
    region = conf["ensemblePlacementPolicy"] == "regionaware"
    locations = {f"b{i}:3181": f"/z{i % 3}/ud{i % 2}" if zone else f"/g{i % 2}/r{i % 3}" if region else f"/r{i % 3}"
                 for i in range(12)}
    named, whole = (create_policy(conf, resolver=dict(locations), clock=lambda: 0.0) for _ in range(2))
    everyone = sorted(locations)
    for policy in (named, whole):
        policy.on_cluster_changed(everyone, [])
    writable = set(everyone)
    for bookie, becomes in [("b1:3181", "readonly"), ("b2:3181", "lost"), ("b1:3181", "writable"),
                            ("b5:3181", "readonly"), ("b2:3181", "writable")]:
        writable.discard(bookie)
        readonly = {"b5:3181"} if becomes == "readonly" and bookie == "b5:3181" else set()
        if becomes == "readonly":
            readonly.add(bookie)
        if becomes == "writable":
            writable.add(bookie)
        got = named.on_cluster_changed(_Unwalkable(writable), readonly, changed={bookie})
        assert got == whole.on_cluster_changed(sorted(writable), sorted(readonly))
        assert named.export_state() == whole.export_state()
