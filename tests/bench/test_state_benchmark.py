"""bench/bench_state.py measures the model as the streaming job stores it (no timing is asserted)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import bench_state
import common
from state import ModelSettings


def test_the_size_part_reads_the_stored_frame_back():
    conf = dict(common.BENCH_CONF)
    row = bench_state.size_part(60, 6, conf, ModelSettings.from_conf(conf), seed=7)
    assert row["bookies"] == 60 and row["racks"] == 6
    assert 0 < row["snapshot_bytes"] < row["json_bytes"]   # the JSON size is read out of the stored frame
