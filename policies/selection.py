"""Random picks from an injected `random.Random`: uniform, and disk-weighted with the median cap.

Spec: bookkeeper-rackaware.md §4.5 and §7 (`WeightedRandomSelectionImpl`).

BookKeeper shuffles a copy of every candidate list and walks it until a candidate is acceptable.
The outcome is a uniformly random choice among the acceptable candidates. `pick_uniform` gets the
same distribution with a lazy Fisher-Yates shuffle: it draws positions without replacement and stops
at the first acceptable one, so its cost grows with the number of rejections, not the population.

The weighted pick keeps BookKeeper's meaning: probabilities are computed over the whole population
(excluded members included, as Java computes its cap over the scope), each capped at
`max_multiple` x the median probability, and the result is drawn among acceptable members in
proportion to those probabilities.

Every draw goes through `rng.random()`; populations are ordered sequences (never sets), so the same
seed gives the same pick on every machine.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Callable, Container, Iterator, Mapping, Sequence
from itertools import accumulate, repeat

from .topology import LeafView

Accept = Callable[[str], bool]


def lazy_shuffle(rng: random.Random, population: Sequence[str]) -> Iterator[str]:
    """The members of `population` in uniformly random order, drawn lazily (Fisher-Yates).

    Equivalent to Java's `Collections.shuffle` followed by a walk; costs one draw per member visited.
    """
    n = len(population)
    swapped: dict[int, int] = {}
    draw = rng.random
    for i in range(n):
        j = i + int(draw() * (n - i))
        pos = swapped.get(j, j)
        swapped[j] = swapped.get(i, i)
        yield population[pos]


def pick_uniform(rng: random.Random, population: Sequence[str], accept: Accept | None = None) -> str | None:
    """A uniformly random member of `population` for which `accept` is true, or None.

    Cost: O(rejections + 1) draws; never materialises the population.
    """
    n = len(population)
    if n == 0:
        return None
    if accept is None:
        return population[int(rng.random() * n)]
    # The first step of `lazy_shuffle`, inline (most picks end there); then the rest of the same walk.
    j = int(rng.random() * n)
    candidate = population[j]
    if accept(candidate):
        return candidate
    for candidate in _shuffle_rest(rng, population, {j: 0} if j else {}):
        if accept(candidate):
            return candidate
    return None


def pick_uniform_view(rng: random.Random, view: LeafView, excluded: Container[str]) -> str | None:
    """`pick_uniform(rng, view, lambda b: b not in excluded)`: the same draws, the same answer.

    The first draw indexes the view directly (most picks end there); a rejected first draw goes on
    with the rest of the same lazy shuffle. `view` must not be empty.
    """
    j = int(rng.random() * view._len)
    candidate = view.at(j)
    if candidate not in excluded:
        return candidate
    for candidate in _shuffle_rest(rng, view, {j: 0} if j else {}):
        if candidate not in excluded:
            return candidate
    return None


def _shuffle_rest(rng: random.Random, population: Sequence[str], swapped: dict[int, int]) -> Iterator[str]:
    """`lazy_shuffle` from its second step, given the swaps of its first."""
    n = len(population)
    draw = rng.random
    for i in range(1, n):
        j = i + int(draw() * (n - i))
        pos = swapped.get(j, j)
        swapped[j] = swapped.get(i, i)
        yield population[pos]


def capped_probabilities(weights: Sequence[int], max_multiple: int) -> list[float]:
    """Per-member selection mass of `WeightedRandomSelectionImpl.updateMap` (spec §7.3).

    Zero weights get the smallest non-zero probability; every probability is capped at
    `max_multiple` x the median's (a non-positive multiple, or a zero median, means no cap);
    all-zero weights mean uniform.
    """
    n = len(weights)
    if n == 0:
        return []
    total = sum(weights)
    if total == 0:
        return [1.0 / n] * n
    ordered = sorted(weights)
    min_weight = next(w for w in ordered if w > 0)
    if n % 2:
        median = float(ordered[n // 2])
    else:
        median = (ordered[n // 2 - 1] + ordered[n // 2]) / 2.0
    cap = max_multiple * (median / total)
    min_p = min_weight / total
    probabilities = [weight / total if weight > 0 else min_p for weight in weights]
    if cap > 0:
        probabilities = [p if p <= cap else cap for p in probabilities]
    return probabilities


class WeightedSelector:
    """Disk-weighted draws over a fixed, ordered population (one `updateMap` of BookKeeper)."""

    __slots__ = ("population", "_cumulative", "_total", "_mass")

    def __init__(self, population: Sequence[str], weight_of: Mapping[str, int], max_multiple: int) -> None:
        self.population = list(population)
        self._mass = capped_probabilities(list(map(weight_of.get, self.population, repeat(0))), max_multiple)
        # Running sums, left to right (0.0 + p is p): the same floats as an explicit loop.
        cumulative = list(accumulate(self._mass))
        self._cumulative = cumulative
        self._total = cumulative[-1] if cumulative else 0.0

    def probability(self, bookie: str) -> float:
        """Normalised chance of `bookie` in one unconstrained draw (for tests and explanations)."""
        return self._mass[self.population.index(bookie)] / self._total

    def draw(self, rng: random.Random) -> str:
        """One draw with replacement (`getNextRandom`)."""
        u = rng.random() * self._total
        i = bisect.bisect_right(self._cumulative, u)
        return self.population[min(i, len(self.population) - 1)]

    def pick(self, rng: random.Random, accept: Accept | None = None, tries: int = 32) -> str | None:
        """A member drawn in proportion to its capped weight among those `accept` allows, or None.

        A few draws with replacement are tried first (cheap when most members are acceptable);
        then the acceptable members are enumerated and one is drawn from their mass, which is the
        same conditional distribution BookKeeper's retry loop converges to.
        """
        if not self.population:
            return None
        if accept is None:
            return self.draw(rng)
        for _ in range(min(tries, 4 * len(self.population))):
            candidate = self.draw(rng)
            if accept(candidate):
                return candidate
        acceptable = [(b, p) for b, p in zip(self.population, self._mass) if accept(b)]
        if not acceptable:
            return None
        u = rng.random() * sum(p for _, p in acceptable)
        for bookie, p in acceptable:
            u -= p
            if u < 0:
                return bookie
        return acceptable[-1][0]


def pick_weighted(rng: random.Random, population: Sequence[str], weight_of: Mapping[str, int],
                  max_multiple: int, accept: Accept | None = None) -> str | None:
    """One disk-weighted pick among acceptable members (a fresh selector over `population`)."""
    return WeightedSelector(population, weight_of, max_multiple).pick(rng, accept)
