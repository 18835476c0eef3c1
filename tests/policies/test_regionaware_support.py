"""Builders shared by the region-aware tests (this module holds no tests)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, MutableMapping, Sequence

from policies import create_policy
from policies.regionaware import RegionawarePolicy


class ManualClock:
    """Event time that only moves when a test says so."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def make_policy(locations: Mapping[str, str], *, features: MutableMapping[str, int] | None = None,
                writable: Iterable[str] | None = None, clock: ManualClock | None = None,
                **conf: object) -> tuple[RegionawarePolicy, dict[str, str]]:
    """A region-aware policy over `locations` (bookie -> `/region/rack`), all of them writable.

    Returns the policy and the resolver mapping (the caller may edit it, then notify a rack change).
    """
    mapping = dict(locations)
    policy = create_policy({"ensemblePlacementPolicy": "regionaware", **conf}, resolver=mapping,
                           clock=clock, features=features if features is not None else {})
    assert isinstance(policy, RegionawarePolicy)
    policy.on_cluster_changed(sorted(mapping) if writable is None else list(writable), [])
    policy.check_invariants()
    return policy, mapping


def grid(regions: Mapping[str, int], bookies_per_rack: int = 1) -> dict[str, str]:
    """`{"a": 3}` -> bookies a-0-0, a-1-0, a-2-0 in racks /a/r0, /a/r1, /a/r2 (port 3181)."""
    return {f"{region}-{rack}-{n}:3181": f"/{region}/r{rack}"
            for region, racks in regions.items() for rack in range(racks) for n in range(bookies_per_rack)}


def region_of(location: str) -> str:
    return location.split("/")[1]


def regions(mapping: Mapping[str, str], ensemble: Sequence[str]) -> list[str]:
    """The region of each ensemble member, in ensemble order."""
    return [region_of(mapping[b]) for b in ensemble]


def region_counts(mapping: Mapping[str, str], ensemble: Sequence[str]) -> Counter[str]:
    return Counter(regions(mapping, ensemble))


def write_set_members(ensemble: Sequence[str], write_quorum: int) -> list[list[str]]:
    size = len(ensemble)
    return [[ensemble[(i + j) % size] for j in range(write_quorum)] for i in range(size)]


def multi_region_write_sets(mapping: Mapping[str, str], ensemble: Sequence[str], write_quorum: int) -> int:
    """How many write sets span more than one region (upstream test helper's count)."""
    return sum(1 for members in write_set_members(ensemble, write_quorum)
               if len({region_of(mapping[b]) for b in members}) > 1)


def blocks(sequence: Sequence[str]) -> list[str]:
    """Collapse runs: a a b c c -> a b c."""
    out: list[str] = []
    for item in sequence:
        if not out or out[-1] != item:
            out.append(item)
    return out
