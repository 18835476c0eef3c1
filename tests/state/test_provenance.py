"""Every decision's `explain` through `state.step`: the policy's steps with their candidate
counts, the exclusions by reason, the topology version and the cluster counts; a failed decision keeps
the policy's explanation of the failure (the constraint and the steps reached)."""

import json

from state.outputs import ALERT_DECISION_FAILED
from tests.state.helpers import Runner, check, create, readonly, writable

ENFORCED = {"ensemblePlacementPolicy": "rackaware", "minNumRacksPerWriteQuorum": "3",
            "enforceMinNumRacksPerWriteQuorum": "true"}


def two_racks(runner):
    runner.run(*[writable(0, f"{name}:3181", f"/{name[0]}") for name in ("a1", "a2", "b1", "b2")])


def test_a_decision_explains_its_steps_exclusions_and_topology():
    runner = Runner({"ensemblePlacementPolicy": "rackaware"})
    runner.run(*[writable(0, f"{name}:3181", f"/{name[0]}") for name in ("a1", "a2", "b1", "b2", "c1", "c2")])
    runner.run(readonly(1_000, "c2:3181"))
    runner.run(create(2_000, "r", 3, 2, 2, exclude=["a1:3181"], ledger_id=1))
    decided = runner.decision("r")
    explain = decided["explain"]
    assert explain["policy"] == "rackaware"
    assert explain["topology_version"] == decided["topology_version"]
    assert explain["excluded"] == {"caller": ["a1:3181"], "readonly": ["c2:3181"]}
    assert explain["steps"][0] == {"step": "position 0", "scope": "cluster", "candidates": 4, "racks": 3}
    assert [s["step"] for s in explain["steps"]] == ["position 0", "position 1", "position 2"]
    assert explain["fallbacks"] == []
    assert explain["bookies"] == {"writable": 5, "readonly": 1, "pending": 0, "join_failed": 0, "flapping": 0}
    json.dumps(decided)


def test_a_failed_decision_names_the_constraint_and_the_counts():
    runner = Runner(ENFORCED)
    two_racks(runner)
    produced = runner.run(create(1_000, "r", 3, 3, 2, ledger_id=1))
    decided = runner.decision("r")
    assert decided["status"] == "failed" and decided["error"]["code"] == "NOT_ENOUGH_BOOKIES"
    explain = decided["explain"]
    assert explain["policy"] == "rackaware"
    assert explain["constraint"] == ("minNumRacksPerWriteQuorum=3 enforced: each write set needs 3 racks; "
                                     "eligible bookies are in 2 rack(s)")
    assert explain["eligible"] == {"bookies": 4, "racks": 2}
    assert explain["steps"][0] == {"step": "position 0", "scope": "cluster", "candidates": 4, "racks": 2}
    assert explain["steps"][-1]["failed"] is True
    assert explain["bookies"]["writable"] == 4, "the state-level counts are kept"
    assert explain["topology_version"] == decided["topology_version"]
    [alert] = runner.alerts(ALERT_DECISION_FAILED, produced)
    assert alert["data"]["decision_id"] == decided["id"]


def test_a_failed_isolation_decision_explains_the_groups():
    conf = {"ensemblePlacementPolicy": "isolated", "bookkeeperClientIsolationGroups": "g1"}
    runner = Runner(conf)
    runner.run(writable(0, "p1:3181", "/r1", group="g1"), writable(0, "p2:3181", "/r2", group="g1"),
               writable(0, "o1:3181", "/r3", group="other"))
    runner.run(create(1_000, "r", 3, 2, 2))
    explain = runner.decision("r")["explain"]
    assert explain["steps"][0]["step"] == "isolation groups"
    assert explain["steps"][0]["candidates"] == 2 and explain["steps"][0]["excluded"] == 1
    assert explain["excluded"]["isolation_group"] == ["o1:3181"]
    assert "isolation groups (primary [g1], secondary [(none)]" in explain["constraint"]


def test_an_unknown_group_places_as_pulsar_does_and_the_decision_says_so():
    conf = {"ensemblePlacementPolicy": "isolated", "bookkeeperClientIsolationGroups": "missing"}
    runner = Runner(conf)
    runner.run(writable(0, "p1:3181", "/r1", group="g1"), writable(0, "u1:3181", "/r2"))
    runner.run(create(1_000, "r", 1, 1, 1))
    decided = runner.decision("r")
    assert decided["status"] == "ok" and decided["ensemble"] == ["u1:3181"]     # never g1's bookie
    assert decided["explain"]["fallbacks"][0].startswith("isolation group(s) missing named by")


def test_an_unknown_group_is_explained_too():
    conf = {"ensemblePlacementPolicy": "isolated", "bookkeeperClientIsolationGroups": "missing",
            "placement.isolation.failClosed": "true"}
    runner = Runner(conf)
    runner.run(writable(0, "p1:3181", "/r1", group="g1"))
    runner.run(create(1_000, "r", 1, 1, 1))
    decided = runner.decision("r")
    assert decided["error"]["code"] == "ISOLATION_GROUP_ERROR"
    assert decided["explain"]["isolation"] == {"primary": ["missing"], "secondary": [], "source": "client"}
    assert "isolation groups must exist" in decided["explain"]["constraint"]


def test_a_check_and_a_replacement_have_the_same_keys():
    runner = Runner({"ensemblePlacementPolicy": "rackaware"})
    two_racks(runner)
    runner.run(check(1_000, "c", ["a1:3181", "b1:3181"], 2, 2, ledger_id=3))
    checked = runner.decision("c")["explain"]
    assert {"policy", "steps", "fallbacks", "excluded", "bookies", "topology_version"} <= set(checked)
    assert checked["steps"] == []
