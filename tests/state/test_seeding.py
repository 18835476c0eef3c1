"""`seeded_random` builds the generator `random.Random(seed)` builds: the same draws, seeded more cheaply."""

import random

from hypothesis import given
from hypothesis import strategies as st

from state.seeding import seeded_random


@given(st.integers(min_value=0, max_value=2**160))
def test_the_same_state_and_draws_as_random_random(seed):
    expected, built = random.Random(seed), seeded_random(seed)
    assert type(built) is random.Random
    assert built.getstate() == expected.getstate()
    assert [built.random() for _ in range(3)] + [built.gauss(0, 1)] == \
        [expected.random() for _ in range(3)] + [expected.gauss(0, 1)]


def test_other_seeds_go_through_random_random():
    for seed in (-5, "text", 1.5):
        assert seeded_random(seed).getstate() == random.Random(seed).getstate()
