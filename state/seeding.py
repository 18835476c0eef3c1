"""Seeded generators, built fast (STYLE R4: every draw comes from a generator seeded by the inputs).

The engine builds one `random.Random` per request (`state.step.request_rng`) and per suggested fix
(`state.audit`), so building one is on the per-record path.
"""

from __future__ import annotations

import random
from _random import Random as _CoreRandom  # the C base class of random.Random

_new_random = random.Random.__new__
_seed_core = _CoreRandom.seed


def seeded_random(seed: int) -> random.Random:
    """`random.Random(seed)` for a non-negative int `seed`, in the same state, without the Python-level
    type checks (one generator is seeded per request).

    `random.Random(seed)` runs the Python `seed` (type checks) before the C generator's `seed`; for
    an int both end in the C `seed(seed)` (Mersenne Twister `init_by_array`), which sets the whole state.
    """
    if type(seed) is not int or seed < 0:
        return random.Random(seed)
    rng = _new_random(random.Random)
    _seed_core(rng, seed)
    rng.gauss_next = None
    return rng


__all__ = ["seeded_random"]
