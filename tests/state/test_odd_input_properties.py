"""The step over odd but valid input, and over dead letters (STYLE R14: nothing raises for bad data).

The streams of `tests.state.strategies` use tidy values. Here every field a record may carry is drawn
from what the parser accepts (any bookie id of BookKeeper's alphabet, any location, group, hostname,
feature name, custom metadata, quorums up to the limits), mixed with corrupted records that become dead
letters, so the policies see what a confused producer can send. For every configuration:

* `step` never raises and every model invariant holds after every batch;
* every output serialises;
* micro-batch boundaries and snapshot round trips between batches change no output.
"""

from __future__ import annotations

import dataclasses
import json

from hypothesis import given
from hypothesis import strategies as st

from events import DeadLetter, parse_record, to_json
from events.model import Origin
from state import ModelSettings, dumps, loads, step
from tests.events import strategies as ev
from tests.state.helpers import CLUSTER, T0
from tests.state.strategies import BOOKIES, CONFS, GROUPS, LOCATIONS, streams

ORIGIN = Origin.from_file("/odd.jsonl", 1)
# The property tests' configurations, and some that they leave out.
ODD_CONFS = {
    **CONFS,
    "isolated-fail-closed-weighted": {
        "ensemblePlacementPolicy": "isolated", "bookkeeperClientIsolationGroups": "g1,g3",
        "placement.isolation.failClosed": "true", "diskWeightBasedPlacementEnabled": "true",
        "enforceMinNumRacksPerWriteQuorum": "true", "engine.audit.maxLedgers": "3"},
    "regionaware-local-enforced": {
        "ensemblePlacementPolicy": "regionaware", "localNodeLocation": "/r1/a",
        "reppRegionsToWrite": "r0;r1", "reppMinimumRegionsForDurability": "2",
        "enforceMinNumRacksPerWriteQuorum": "true", "diskWeightBasedPlacementEnabled": "true",
        "reppDisallowBookiePlacementInRegionFeatureName": "disallowBookies"},
    "regionaware-plain-stabilized": {
        "ensemblePlacementPolicy": "regionaware", "networkTopologyStabilizePeriodSeconds": "5",
        "reppRegionsToWrite": "r0;r1;r2", "reppMinimumRegionsForDurability": "0"},
    "zoneaware-relaxed": {"ensemblePlacementPolicy": "zoneaware", "enforceStrictZoneawarePlacement": "false",
                          "minNumZonesPerWriteQuorum": "1", "desiredNumZonesPerWriteQuorum": "2"},
    "zoneaware-strict": {"ensemblePlacementPolicy": "zoneaware", "minNumZonesPerWriteQuorum": "1",
                         "desiredNumZonesPerWriteQuorum": "3", "networkTopologyStabilizePeriodSeconds": "5"},
    "rackaware-local-stabilized": {"ensemblePlacementPolicy": "rackaware", "localNodeLocation": "/r1",
                                   "minNumRacksPerWriteQuorum": "3", "networkTopologyStabilizePeriodSeconds": "5",
                                   "placement.compat.keepStaleReadOnlySet": "true", "engine.flapThreshold": "1"},
}
ISOLATION_CONFIG = "org.apache.pulsar.bookie.rackawareness.IsolatedBookieEnsemblePlacementPolicy"

# Bookies: the tidy pool (so records meet again) and any valid id.
bookies = st.sampled_from(BOOKIES) | ev.bookie_ids
groups = st.sampled_from(GROUPS) | ev.unicode_text | st.sampled_from(("g1,g2", " g2 ", "*", ""))
locations = st.sampled_from(LOCATIONS + ("/z0/u0", "/r0/a", "/default-rack", "/a/b/c", "/r0/")) | ev.locations


@st.composite
def policy_configs(draw):
    """`EnsemblePlacementPolicyConfig` metadata: the isolation class with odd groups, another class, junk."""
    kind = draw(st.sampled_from(("isolation", "isolation", "other", "junk")))
    if kind == "junk":
        return draw(ev.metadata_values)
    properties = draw(st.dictionaries(st.sampled_from(("isolationBookieGroups", "secondaryIsolationBookieGroups")),
                                      groups | st.integers() | st.none() | st.lists(groups, max_size=2), max_size=2))
    policy = ISOLATION_CONFIG if kind == "isolation" else "org.example.Other"
    return json.dumps({"policyClass": policy, "properties": properties}).encode()


@st.composite
def odd_records(draw, time_ms):
    """A valid record of any type with odd values, at `time_ms`, of cluster `CLUSTER`."""
    record = draw(ev.records)
    changes = {"cluster": CLUSTER, "time_ms": time_ms}
    names = {field.name for field in dataclasses.fields(record)}
    if "bookie" in names and "ensemble" not in names:
        changes["bookie"] = draw(bookies)
    if "location" in names:
        changes["location"] = draw(st.none() | locations)
    if "group" in names:
        changes["group"] = draw(st.none() | groups)
    if "writable" in names:
        members = draw(st.lists(bookies, unique=True, max_size=10))
        cut = draw(st.integers(0, len(members)))
        changes["writable"], changes["readonly"] = tuple(members[:cut]), tuple(members[cut:])
    if "ensemble" in names:
        ensemble = tuple(draw(st.lists(bookies, unique=True, min_size=1, max_size=8)))
        write = draw(st.integers(1, len(ensemble)))
        changes.update(ensemble=ensemble, write_quorum=write, ack_quorum=draw(st.integers(1, write)))
        if "bookie" in names:
            changes["bookie"] = draw(st.sampled_from(ensemble))
    if "exclude" in names:
        changes["exclude"] = frozenset(draw(st.lists(bookies, max_size=3)))
    if "custom_metadata" in names and draw(st.booleans()):
        changes["custom_metadata"] = (("EnsemblePlacementPolicyConfig", draw(policy_configs())),)
    if "name" in names and draw(st.booleans()):
        changes["name"] = draw(st.sampled_from(("r0.disallowBookies", "r1.disallowBookies",
                                                "repp_disable_durability_enforcement", "disallowBookies")))
    if "request_id" in names:
        changes["request_id"] = f"req-{time_ms}-{draw(st.integers(0, 10**6))}"
    return dataclasses.replace(record, **changes)


@st.composite
def corrupted(draw, time_ms):
    """A record of `CLUSTER` with one field replaced by junk or removed: parsed, so often a dead letter."""
    obj = to_json(draw(odd_records(time_ms)))
    key = draw(st.sampled_from(sorted(k for k in obj if k not in ("cluster", "type", "time"))))
    if draw(st.booleans()):
        obj[key] = draw(ev.json_values)
    else:
        del obj[key]
    return parse_record(json.dumps(obj), ORIGIN)


@st.composite
def odd_streams(draw):
    count = draw(st.integers(1, 30))
    t = T0
    items = []
    for _ in range(count):
        t += draw(st.sampled_from((0, 1, 5_000, 20_000, 61_000)))
        items.append(draw(corrupted(t) if draw(st.integers(0, 5)) == 0 else odd_records(t)))
    return items


def feed(conf, batches, *, snapshot):
    settings = ModelSettings.from_conf(conf)
    model, produced = None, []
    for batch in batches:
        result = step(model, CLUSTER, batch, settings)
        model = result.model
        model.check_invariants()
        for output in result.outputs:
            produced.append((output.kind, output.id, output.to_json()))
            json.loads(output.to_json())
        if snapshot:
            model = loads(dumps(model), settings)
            model.check_invariants()
    return produced


@given(name=st.sampled_from(sorted(ODD_CONFS)), items=odd_streams(), cuts=st.lists(st.integers(0, 30), max_size=3),
       snapshot=st.booleans())
def test_odd_values_never_raise_and_keep_batch_and_snapshot_independence(name, items, cuts, snapshot):
    conf = ODD_CONFS[name]
    whole = feed(conf, [items], snapshot=False)
    points = sorted({min(c, len(items)) for c in cuts})
    batches, start = [], 0
    for point in points + [len(items)]:
        batches.append(items[start:point])
        start = point
    # Dead letters are reported before the batch's records: only a batch boundary right before one
    # keeps the whole run's order, so compare as multisets there.
    pieces = feed(conf, batches, snapshot=snapshot)
    if any(isinstance(item, DeadLetter) for item in items):
        assert sorted(pieces) == sorted(whole)
    else:
        assert pieces == whole


@given(before=st.sampled_from(sorted(ODD_CONFS)), after=st.sampled_from(sorted(ODD_CONFS)),
       records=streams(metadata_groups=True), cut=st.integers(1, 40))
def test_a_restart_under_another_configuration_keeps_the_invariants(before, after, records, cut):
    """A snapshot written under one configuration and restored under another (a restart with a new
    policy or new bounds) is usable: the next step raises nothing and leaves every invariant true
    (it found a registry restored above a lowered `engine.audit.maxLedgers`)."""
    model = None
    for conf, batch in ((ODD_CONFS[before], records[:cut]), (ODD_CONFS[after], records[cut:])):
        settings = ModelSettings.from_conf(conf)
        if model is not None:
            model = loads(dumps(model), settings)
        result = step(model, CLUSTER, batch, settings)
        model = result.model
        model.check_invariants()
        for output in result.outputs:
            assert isinstance(json.loads(output.to_json()), dict)
    assert model.settings == ModelSettings.from_conf(ODD_CONFS[after])
    assert model.policy_name == model.settings.placement.policy
