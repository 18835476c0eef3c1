"""docs/state.md and docs/alerts.md show what the model writes: state.md's examples are replayed here
and must come out identical (ids included); every alert example of alerts.md has exactly the `data`
fields the engine writes for its type."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

from tests.state.helpers import Runner, check, create, location, lost, readonly, writable

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _examples(name: str) -> list[dict]:
    text = (DOCS / name).read_text(encoding="utf-8")
    return [json.loads(block) for block in re.findall(r"```json\n(\{.*?\})\n```", text, flags=re.S)]


def test_state_md_examples_are_what_the_step_writes():
    runner = Runner({"ensemblePlacementPolicy": "rackaware"})
    runner.run(writable(0, "bk1:3181", "/r1"), writable(0, "bk2:3181", "/r1"), writable(0, "bk3:3181", "/r2"),
               writable(0, "bk4:3181", "/r2"), writable(0, "bk5:3181", "/region-a/r3"))
    runner.run(create(1000, "req-7", 4, 2, 2, ledger_id=7))
    runner.run(check(2000, "chk-1", ["bk1:3181", "bk2:3181", "bk3:3181", "bk4:3181"], 2, 2, ledger_id=8))
    runner.run(create(3000, "req-8", 5, 2, 2, ledger_id=9))
    flaps = Runner({"ensemblePlacementPolicy": "rackaware"})
    flaps.run(writable(0, "bk1:3181", "/r1"), writable(0, "bk4:3181", "/r2"))
    for t in (10_000, 20_000, 30_000):
        flaps.run(lost(t, "bk4:3181"))
        flaps.run(writable(t + 5_000, "bk4:3181"))
    written = {output.payload["id"]: output.payload for output in runner.outputs + flaps.outputs}
    examples = _examples("state.md")
    assert len(examples) == 6
    for example in examples:
        assert example["id"] in written, example["id"]
        assert example == written[example["id"]]


def _alerts_of_every_type() -> list[dict]:
    """Scenarios that raise every alert type and its resolution (the shapes of docs/alerts.md)."""
    alerts = []
    conf = {"ensemblePlacementPolicy": "rackaware", "networkTopologyStabilizePeriodSeconds": "30",
            "engine.flapThreshold": "2", "engine.flapWindowSeconds": "30", "minNumRacksPerWriteQuorum": "3"}
    runner = Runner(conf, cluster="prod")
    on = {"cluster": "prod"}
    runner.run(*[writable(0, f"bk{i}:3181", rack, **on)
                 for i, rack in enumerate(("/rack-a", "/rack-a", "/rack-b", "/rack-b", "/rack-c"), start=1)])
    runner.run(create(100, "create-1", 3, 3, 2, ledger_id=4711, **on))
    runner.run(lost(2000, "bk5:3181", **on))
    runner.run(create(2100, "create-2", 3, 3, 2, ledger_id=4712, **on))
    for t in (3000, 5000):
        runner.run(writable(t, "bk5:3181", **on))
        runner.run(lost(t + 1000, "bk5:3181", **on))
    runner.run(create(60_000, "create-3", 7, 3, 2, ledger_id=4713, **on))
    runner.run(writable(61_000, "bk5:3181", **on))
    [re_adhere] = runner.alerts("placement.ledger.re_adhere_possible")
    runner.run(check(63_000, "check-1", re_adhere["data"]["fix"]["ensemble"], 3, 2,
                     ledger_id=re_adhere["data"]["ledger_id"], **on))
    runner.run(writable(70_000, "bk6:3181", "/rack-a/deeper", **on))
    runner.run(location(71_000, "bk6:3181", "/rack-c", **on))
    alerts += runner.alerts()
    runner = Runner({"ensemblePlacementPolicy": "rackaware", "enforceMinNumRacksPerWriteQuorum": "true"},
                    cluster="prod")
    runner.run(writable(0, "bk1:3181", "/rack-a", **on), writable(0, "bk2:3181", "/rack-b", **on),
               writable(0, "bk9:3181", **on))
    runner.run(location(1000, "bk9:3181", "/rack-b", **on))
    alerts += runner.alerts()
    runner = Runner({"ensemblePlacementPolicy": "isolated", "bookkeeperClientIsolationGroups": "g1",
                     "bookkeeperClientSecondaryIsolationGroups": "g2"})
    runner.run(writable(0, "p1:3181", "/r1", group="g1"), writable(0, "p2:3181", "/r2", group="g1"),
               writable(0, "p3:3181", "/r3", group="g1"), writable(0, "s1:3181", "/r4", group="g2"))
    runner.run(lost(1000, "p1:3181"))
    runner.run(create(2000, "during", 3, 2, 2, ledger_id=2))
    runner.run(writable(3000, "p1:3181"))
    runner.run(readonly(4000, "p2:3181"))
    return alerts + runner.alerts()


def test_alerts_md_examples_have_the_fields_the_engine_writes():
    written = defaultdict(set)
    for alert in _alerts_of_every_type():
        written[alert["type"]].add(tuple(sorted(alert["data"])))
    examples = _examples("alerts.md")
    documented = {example["type"] for example in examples}
    assert documented == set(written), documented ^ set(written)
    for example in examples:
        assert tuple(sorted(example)) == ("data", "datacontenttype", "id", "source", "specversion", "subject",
                                          "time", "type")
        assert tuple(sorted(example["data"])) in written[example["type"]], (example["type"], sorted(example["data"]))
