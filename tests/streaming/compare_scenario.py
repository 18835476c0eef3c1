"""The generated traffic the `compare` tests replay: the demo's scenario on three racks, one of which
goes down and comes back, under rack-aware placement with minNumRacksPerWriteQuorum=3, enforced or not.

The demo's bookies (`streaming.demo.generate`) keep their order and their events; only their locations
change: the rack the demo takes down becomes `/rack-out`, the others fall into `/rack-a` and `/rack-b`.
While `/rack-out` is down, two racks are left, so a write quorum of 3 cannot span 3 racks.
"""

from __future__ import annotations

from pathlib import Path

from streaming.demo import generate, write_input

OUTAGE_RACK = "/region-b/rack-2"
"""The rack `streaming.demo.generate` takes down and brings back."""

BASE_CONF = """\
ensemblePlacementPolicy=rackaware
minNumRacksPerWriteQuorum=3
enforceMinNumRacksPerWriteQuorum={enforce}
engine.seed=1
engine.replay.recordsPerTrigger=1000
"""


def _rack(location: str) -> str:
    if location == OUTAGE_RACK:
        return "/rack-out"
    return "/rack-a" if location < OUTAGE_RACK else "/rack-b"


def write_scenario(folder: Path, requests: int, seed: int = 7) -> tuple[Path, Path, Path]:
    """Write the events and the two configurations; return (events folder, enforcement off, on)."""
    records = generate(requests, seed)
    for record in records:
        if record.get("location"):
            record["location"] = _rack(record["location"])
    events = folder / "input"
    write_input(records, events / "events.jsonl")
    off, on = folder / "enforcement-off.properties", folder / "enforcement-on.properties"
    off.write_text(BASE_CONF.format(enforce="false"), encoding="utf-8")
    on.write_text(BASE_CONF.format(enforce="true"), encoding="utf-8")
    return events, off, on
