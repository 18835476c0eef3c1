"""The core benchmarks time what they say: every row's operations succeed and adhere.

bench/bench_policies.py and bench/bench_growth.py (`--parts core`) quote calls per second of
`new_ensemble(3,3,2)`, `replace_bookie` and `is_ensemble_adhering` for each policy and size. A row
whose calls failed (NotEnoughBookiesError from a mis-built cluster) or fell back would still print a
rate; these tests keep the measured calls the plain, adhering placements the README's table names.
No timing is asserted.
"""

import random
import sys
from pathlib import Path

import pytest

from policies import Adherence

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import bench_growth
import bench_policies

ROWS = bench_policies.ROWS + bench_growth.core_rows()
SIZES = [(12, 4), (600, 30)]


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row.label)
@pytest.mark.parametrize("bookies,racks", SIZES, ids=lambda value: str(value))
def test_every_measured_call_places_an_adhering_ensemble(row, bookies, racks):
    policy = bench_policies.build(row, bookies, racks)
    operations = bench_policies.operations(policy, random.Random(2))
    assert set(operations) == {"new_ensemble(3,3,2)", "replace_bookie", "is_ensemble_adhering"}
    for _ in range(20):
        created = operations["new_ensemble(3,3,2)"]()
        assert len(set(created.ensemble)) == 3
        replaced = operations["replace_bookie"]()   # replaces position 1 of a fixed ensemble
        assert replaced.ensemble[1] == replaced.bookie and len(set(replaced.ensemble)) == 3
        assert replaced.adherence != Adherence.FAIL, replaced.explain
        expected = Adherence.MEETS_STRICT if row.policy != "default" else created.adherence
        assert created.adherence == expected, created.explain
        assert operations["is_ensemble_adhering"]() in (Adherence.MEETS_STRICT, Adherence.MEETS_SOFT)
    assert not created.explain.get("relaxed"), "a benchmark row should measure the rules, not a fallback"
