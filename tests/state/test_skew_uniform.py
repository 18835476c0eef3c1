"""No false skew alarm: a long run of uniform traffic on a healthy cluster of the demo's size raises none.

The cluster is `streaming.demo`'s topology (three regions of four racks of four bookies: 48 bookies),
healthy and uniform (equal disks where placement is weighted); the traffic is ledger creates of the
demo's sizes with a replace of a random member of a recent ledger every eleventh request: 50,000
creates and 5,000 replaces for every policy (half as many under isolation, whose calls cost twice as
much: the file stays near 20 s). With the default keys the create window is judged every 50 creates, 500
to 1,000 times over a run, so a statistic that is not calibrated (a variance too small, a
basis other than the one the policy places by) would fire.
"""

import random
from collections import deque

import pytest

from state import ModelSettings, step
from state.skew import ALERT_SKEW, SCOPES, judge
from tests.state.helpers import CLUSTER, create, disk, replace, writable

REGIONS = ("region-a", "region-b", "region-c")
LOCATIONS = {f"bk-{region[-1]}{rack}{i}.demo:3181": f"/{region}/rack-{rack}"
             for region in REGIONS for rack in range(4) for i in range(4)}
# Isolated placements cost about twice the others' (the policy excludes two thirds of the cluster per call).
CREATES = {"rackaware": 50_000, "regionaware": 50_000, "zoneaware": 50_000, "default": 50_000, "isolated": 25_000}

CONFS = {
    # The demo's own configuration (streaming/settings.py DEMO_CONF), disks equal.
    "rackaware": {"ensemblePlacementPolicy": "rackaware", "minNumRacksPerWriteQuorum": "2",
                  "enforceMinNumRacksPerWriteQuorum": "true", "diskWeightBasedPlacementEnabled": "true",
                  "networkTopologyStabilizePeriodSeconds": "30"},
    "regionaware": {"ensemblePlacementPolicy": "regionaware", "reppRegionsToWrite": ";".join(REGIONS),
                    "reppMinimumRegionsForDurability": "2"},
    "zoneaware": {"ensemblePlacementPolicy": "zoneaware", "desiredNumZonesPerWriteQuorum": "3",
                  "minNumZonesPerWriteQuorum": "2"},
    "default": {"ensemblePlacementPolicy": "default"},
    # Pulsar isolation: the ledgers' group is region-a's bookies (region-b's the secondary group).
    "isolated": {"ensemblePlacementPolicy": "isolated", "bookkeeperClientIsolationGroups": "g1",
                 "bookkeeperClientSecondaryIsolationGroups": "g2"},
}
GROUPS = {"isolated": {"region-a": "g1", "region-b": "g2"}}


def uniform_traffic(policy):
    """The cluster, then creates of the demo's sizes and replaces of a random member of a placed ledger,
    in batches of 1,000 (the step is fed as the streaming job feeds it)."""
    groups = GROUPS.get(policy, {})
    yield [writable(0, bookie, location, group=groups.get(location.split("/")[1]))
           for bookie, location in sorted(LOCATIONS.items())]
    yield [disk(0, bookie, 2**40) for bookie in sorted(LOCATIONS)]
    rng = random.Random(29)
    sizes = (3, 3, 3) if policy == "zoneaware" else (3, 3, 3, 5)    # zone-aware: one bookie per zone
    batch, t, created, n = [], 1_000, 0, 0
    while created < CREATES[policy]:
        t += 20
        n += 1
        if n % 11 == 10:
            batch.append(("replace", t, n))
        else:
            size = rng.choice(sizes)
            write_quorum = min(size, 3)
            # Region-aware durability across 2 regions needs every write-quorum member to acknowledge.
            ack_quorum = write_quorum if policy == "regionaware" else 2
            batch.append(create(t, f"c{n}", size, write_quorum, ack_quorum, ledger_id=n))
            created += 1
        if len(batch) == 1_000:
            yield batch
            batch = []
    if batch:
        yield batch


@pytest.mark.parametrize("policy", sorted(CONFS))
def test_uniform_traffic_on_a_healthy_cluster_never_raises_a_skew_alert(policy):
    settings = ModelSettings.from_conf({**CONFS[policy], "engine.audit.maxLedgers": "0"})
    rng = random.Random(7)
    model, placed, decisions, alerts = None, deque(maxlen=2_000), 0, []
    for batch in uniform_traffic(policy):
        items = []
        for item in batch:
            if isinstance(item, tuple):
                if placed:
                    _, t, n = item
                    ensemble, write_quorum, ack_quorum = rng.choice(placed)
                    items.append(replace(t, f"x{n}", ensemble, rng.choice(ensemble), write_quorum, ack_quorum))
            else:
                items.append(item)
        requests = {r.request_id: r for r in items if hasattr(r, "ensemble_size")}
        result = step(model, CLUSTER, items, settings)
        model = result.model
        for output in result.outputs:
            if output.kind == "decision" and output.payload["status"] == "ok":
                decisions += 1
                request = requests.get(output.payload["request_id"])
                if request is not None:
                    placed.append((output.payload["ensemble"], request.write_quorum, request.ack_quorum))
            elif output.kind == "alert" and output.payload["type"].startswith(ALERT_SKEW):
                alerts.append(output.payload)
    assert decisions >= CREATES[policy], "every request was placed"
    assert alerts == []
    model.skew.check_invariants()
    for scope in SCOPES:
        window = model.skew.windows[scope]
        assert len(window.decisions) == settings.skew_window, f"the {scope} window is full"
        verdict = judge(window, settings.skew_p_value, 1.0, model)
        assert verdict.offenders == [], "no item is past the threshold even without the ratio condition"
