"""Hypothesis strategies for the state tests: time-ordered streams of cluster events and requests."""

from __future__ import annotations

from hypothesis import strategies as st

from tests.state import helpers as h

BOOKIES = tuple(f"bk{i}:3181" for i in range(8)) + ("bare",)
LOCATIONS = ("/r0", "/r1", "/r2", "/r3", "/", "/region/r9")
GROUPS = ("g1", "g2")
FEATURES = ("region2.disallowBookies", "repp_disable_durability_enforcement", "r1.disallowBookies")

# Configurations exercised by the property tests (all pure policies of the placement core).
CONFS = {
    "rackaware-stabilized-weighted": {"ensemblePlacementPolicy": "rackaware",
                                      "networkTopologyStabilizePeriodSeconds": "30",
                                      "diskWeightBasedPlacementEnabled": "true",
                                      "engine.flapThreshold": "2", "engine.bookieHistoryTtlSeconds": "120"},
    "rackaware-enforced": {"ensemblePlacementPolicy": "rackaware", "enforceMinNumRacksPerWriteQuorum": "true",
                           "minNumRacksPerWriteQuorum": "2", "engine.seed": "7"},
    "default-weighted": {"ensemblePlacementPolicy": "default", "diskWeightBasedPlacementEnabled": "true"},
    # One-level locations are regions here ("/r0" -> r0); "/region/r9" is of another depth.
    "regionaware-durable": {"ensemblePlacementPolicy": "regionaware", "reppRegionsToWrite": "r0;r1;r2",
                            "reppMinimumRegionsForDurability": "2", "networkTopologyStabilizePeriodSeconds": "20",
                            "reppDisallowBookiePlacementInRegionFeatureName": "disallowBookies"},
    "zoneaware-stabilized-weighted": {"ensemblePlacementPolicy": "zoneaware",
                                      "networkTopologyStabilizePeriodSeconds": "20",
                                      "diskWeightBasedPlacementEnabled": "true",
                                      "desiredNumZonesPerWriteQuorum": "2", "minNumZonesPerWriteQuorum": "1"},
    "isolated": {"ensemblePlacementPolicy": "isolated", "bookkeeperClientIsolationGroups": "g1",
                 "bookkeeperClientSecondaryIsolationGroups": "g2", "networkTopologyStabilizePeriodSeconds": "20"},
}

# Locations of the depth and shape each policy places by (zones and upgrade domains, regions and racks),
# drawn besides `LOCATIONS` so that the zone- and region-aware policies also place on well-formed clusters.
CONF_LOCATIONS = {
    "zoneaware-stabilized-weighted": ("/z0/u0", "/z0/u1", "/z1/u0", "/z1/u1", "/z2/u0",
                                      "/default-zone/default-upgradedomain"),
    "regionaware-durable": ("/r0/a", "/r0/b", "/r1/a", "/r1/b", "/r2/a", "/default-region/default-rack"),
    "rackaware-enforced": ("/default-rack",),
    "isolated": ("/default-rack",),
}

bookies = st.sampled_from(BOOKIES)
maybe_group = st.one_of(st.none(), st.none(), st.sampled_from(GROUPS))


@st.composite
def _event(draw, t, locations):
    maybe_location = st.one_of(st.none(), st.sampled_from(locations))
    kind = draw(st.sampled_from(("writable", "writable", "writable", "readonly", "lost", "lost", "location",
                                 "disk", "view", "feature")))
    bookie = draw(bookies)
    if kind == "writable":
        return h.writable(t, bookie, draw(maybe_location), group=draw(maybe_group),
                          hostname=draw(st.one_of(st.none(), st.just("bk1"))))
    if kind == "readonly":
        return h.readonly(t, bookie)
    if kind == "lost":
        return h.lost(t, bookie)
    if kind == "location":
        return h.location(t, bookie, draw(maybe_location), group=draw(maybe_group))
    if kind == "disk":
        total = draw(st.integers(1, 10**12))
        return h.disk(t, bookie, draw(st.integers(0, total)), total)
    if kind == "view":
        members = draw(st.lists(bookies, unique=True, max_size=len(BOOKIES)))
        cut = draw(st.integers(0, len(members)))
        return h.view(t, members[:cut], members[cut:])
    return h.feature(t, draw(st.sampled_from(FEATURES)), draw(st.integers(0, 1)))


@st.composite
def _request(draw, t, request_id, metadata_groups=False):
    kind = draw(st.sampled_from(("create", "create", "replace", "check")))
    size = draw(st.integers(1, 5))
    write_quorum = draw(st.integers(1, size))
    ack_quorum = draw(st.integers(1, write_quorum))
    if kind == "create":
        exclude = draw(st.lists(bookies, unique=True, max_size=2))
        metadata = ()
        if metadata_groups and draw(st.booleans()):
            config = ('{"policyClass":"org.apache.pulsar.bookie.rackawareness.IsolatedBookieEnsemblePlacementPolicy",'
                      '"properties":{"isolationBookieGroups":"g2"}}')
            metadata = (("EnsemblePlacementPolicyConfig", config.encode()),)
        return h.create(t, request_id, size, write_quorum, ack_quorum, exclude=exclude, metadata=metadata,
                        ledger_id=draw(st.one_of(st.none(), st.integers(0, 1000))))
    ensemble = draw(st.lists(bookies, unique=True, min_size=size, max_size=size))
    if kind == "replace":
        return h.replace(t, request_id, ensemble, draw(st.sampled_from(ensemble)), write_quorum, ack_quorum,
                         exclude=draw(st.lists(bookies, unique=True, max_size=2)))
    return h.check(t, request_id, ensemble, write_quorum, ack_quorum)


@st.composite
def streams(draw, min_size=1, max_size=40, requests=True, metadata_groups=False, locations=LOCATIONS):
    """A time-ordered list of events and requests (unique request ids), times from T0 upwards.

    Gaps are drawn around the 20 s / 30 s stabilization periods, the flap window and the history TTL
    of `CONFS`, so expiries happen between records and exactly at them.
    """
    count = draw(st.integers(min_size, max_size))
    t = 0
    records = []
    for index in range(count):
        t += draw(st.sampled_from((0, 0, 1, 500, 5_000, 20_000, 30_000, 61_000, 130_000)))
        if requests and draw(st.integers(0, 2)) == 0:
            records.append(draw(_request(t, f"req-{index}", metadata_groups)))
        else:
            records.append(draw(_event(t, locations)))
    return records


confs = st.sampled_from(sorted(CONFS))


@st.composite
def configured_streams(draw, **kwargs):
    """(conf name, stream), locations of every depth included."""
    name = draw(confs)
    extra = CONF_LOCATIONS.get(name, ())
    if extra and draw(st.booleans()):
        locations = extra + ("/r0",)      # well formed but for one location of another depth
    else:
        locations = LOCATIONS + extra
    return name, draw(streams(locations=locations, **kwargs))
