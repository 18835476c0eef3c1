"""Shared fixtures of the placement-core tests: policy factories and a manual clock.

`make_policy(racks={"/r1": ["bk1:3181", "bk2:3181"], "/r2": ["bk3:3181"]}, readonly=(), **conf)` builds a
policy through `create_policy`, registers every listed bookie as writable (and `readonly` as read-only)
and returns it. Keyword arguments are BookKeeper configuration keys (`minNumRacksPerWriteQuorum=3`);
`policy=` picks the policy short name (default rack-aware), `clock=` a clock, `resolver_extra=` extra
resolver entries (bookies mapped but not registered), `features=` the feature switches,
`default_rack=` the policy's default rack (set before the bookies join, as upstream tests call
`withDefaultRack`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pytest

from policies import create_policy


class ManualClock:
    """Event time that only moves when a test says so."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def build_policy(racks: Mapping[str, Iterable[str]] | None = None, readonly: Iterable[str] = (), *,
                 policy: str = "rackaware", clock: ManualClock | None = None,
                 resolver_extra: Mapping[str, str] | None = None, unmapped: Iterable[str] = (),
                 features: dict[str, int] | None = None, rack_info: Any = None, default_rack: str | None = None,
                 **conf: Any):
    """A policy with every bookie of `racks` writable (plus `unmapped` bookies, which get the default rack)."""
    racks = {rack: list(members) for rack, members in (racks or {}).items()}
    mapping = {bookie: rack for rack, members in racks.items() for bookie in members}
    mapping.update(resolver_extra or {})
    settings = {"ensemblePlacementPolicy": policy, **conf}
    built = create_policy(settings, resolver=mapping, clock=clock or ManualClock(),
                          rack_info=rack_info, features=features if features is not None else {})
    if default_rack is not None:
        built.with_default_rack(default_rack)
    writable = [b for members in racks.values() for b in members] + list(unmapped)
    built.on_cluster_changed(writable, list(readonly))
    return built


@pytest.fixture
def make_policy():
    """Factory fixture: `make_policy(racks={...}, readonly=(), **conf)` -> a ready policy."""
    return build_policy


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1000.0)


def cluster(num_racks: int, per_rack: int, prefix: str = "/r") -> dict[str, list[str]]:
    """`{"/r0": ["b0-0:3181", ...], ...}`: a regular cluster for tests and benchmarks."""
    return {f"{prefix}{r}": [f"b{r}-{i}:3181" for i in range(per_rack)] for r in range(num_racks)}
