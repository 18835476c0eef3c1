"""bench/bench_replay.py's per-stage breakdown runs the region-aware policy on a day spread over regions
(`--regions 3 --set ensemblePlacementPolicy=regionaware`); no timing is asserted."""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import common


def test_a_day_spread_over_regions_is_placed_by_the_region_aware_policy(tmp_path):
    day = tmp_path / "day.jsonl"
    counts = common.write_busy_day(day, 1500, bookies=30, racks=6, regions=3)
    lines = day.read_text(encoding="utf-8").splitlines()
    assert len(lines) == counts["records"]
    locations = {json.loads(line)["location"] for line in lines if '"location"' in line}
    assert locations == {f"/region{rack % 3}/rack{rack}" for rack in range(6)}
    conf = {**common.BENCH_CONF, "ensemblePlacementPolicy": "regionaware"}
    stages = common.stage_breakdown(lines, conf, "busy", 1000)
    creates = next(name for name in stages if name.startswith("policy.new_ensemble x"))
    assert int(creates.rpartition(" x")[2]) > 900      # the day's creates reached the policy
