"""The ring of write sets around one slot: its neighbours, and the write quorums that contain it.

Spec: bookkeeper-region-zone-isolation.md §0.3 (write sets wrap around the ensemble), §3.4
(`fill(index)` looks at the slot's neighbours, then at every write quorum containing the slot).

Write set i holds positions i .. i+W-1 (mod E). A strict fill keeps the zones of the nearest
neighbours of a slot distinct (`rings`) and, when it must fall back, judges each write quorum that
contains the slot, sliding from one to the next (`quorum_moves`, `single_domain_zones`) so the
cost per slot is O(W), not O(W x W).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from .zone_index import ZoneUD


class _Rings:
    """The slots around `position` in a ring of `size`, nearest first: `rings[n]` is the tuple of the
    slots at offsets -n..-1, +1..+n (n < W), `position` itself left out, each once; `rings[-1]` all of
    them. One list with the end of each offset's prefix, so building costs O(W) (a tuple per n would
    cost O(W x W) per position, O(E x W x W) per ensemble) and `rings[n]` costs O(n)."""

    __slots__ = ("slots", "ends")

    def __init__(self, size: int, position: int, write_quorum: int) -> None:
        slots: list[int] = []
        ends = [0]
        seen = {position}
        for offset in range(1, write_quorum):
            for slot in ((position - offset) % size, (position + offset) % size):
                if slot not in seen:
                    seen.add(slot)
                    slots.append(slot)
            ends.append(len(slots))
        self.slots = tuple(slots)
        self.ends = tuple(ends)

    def __getitem__(self, n: int) -> tuple[int, ...]:
        return self.slots[:self.ends[n]]

    def __len__(self) -> int:
        return len(self.ends)


# Below this write quorum `rings` keeps every ring as a tuple (at most 120 slots in all): indexing a tuple
# of tuples is cheaper than `_Rings.__getitem__` on the hot path of small ensembles.
_LAZY_RINGS_FROM = 16
# (size, position, W) keys `rings` keeps before it starts afresh.
_RINGS_KEPT = 4096
_RINGS: dict[tuple[int, int, int], Sequence[tuple[int, ...]]] = {}


def rings(size: int, position: int, write_quorum: int) -> Sequence[tuple[int, ...]]:
    """`rings[n]`: the slots at offsets -n..-1, +1..+n around `position` in a ring of `size` (n < W),
    `position` itself left out, each once. Cached per (size, position, W)."""
    key = (size, position, write_quorum)
    around = _RINGS.get(key)
    if around is None:
        lazy = _Rings(size, position, write_quorum)
        around = lazy if write_quorum >= _LAZY_RINGS_FROM else tuple(lazy[n] for n in range(write_quorum))
        if len(_RINGS) >= _RINGS_KEPT:
            _RINGS.clear()
        _RINGS[key] = around
    return around


def quorum_moves(size: int, position: int, write_quorum: int) -> tuple[list[int], Iterator[tuple[int, int]]]:
    """The write quorums containing `position` (start offsets -(W-1)..0), one slot move at a time: the
    slots of the first, then (leaving, entering) as the start advances. Slots repeat when W > E;
    `position` is among them, and callers leave it out."""
    first = position - write_quorum + 1
    slots = [(first + j) % size for j in range(write_quorum)]
    moves = (((first + k) % size, (first + k + write_quorum) % size) for k in range(write_quorum - 1))
    return slots, moves


def single_domain_zones(slots: Sequence[ZoneUD | None], position: int, write_quorum: int) -> set[ZoneUD]:
    """(zone, UD) of every zone whose filled slots, in some write quorum containing `position` (the
    slot itself left out), all sit in that one upgrade domain (spec §3.4 `candidates`, second rule).

    Cost: O(W). Per-zone upgrade-domain counts slide from one quorum to the next (`quorum_moves`);
    only the zones of the two slots that moved can change, so only they are looked at again.
    """
    domains: dict[str, dict[str, int]] = {}
    single: set[ZoneUD] = set()

    def count(located: ZoneUD, step: int) -> None:
        zone, domain = located
        held = domains.setdefault(zone, {})
        copies = held.get(domain, 0) + step
        if copies:
            held[domain] = copies
        else:
            del held[domain]
            if not held:
                del domains[zone]

    def note(zone: str) -> None:
        held = domains.get(zone)
        if held is not None and len(held) == 1:
            single.add((zone, next(iter(held))))

    first, moves = quorum_moves(len(slots), position, write_quorum)
    for slot in first:
        located = slots[slot]
        if slot != position and located is not None:
            count(located, 1)
    for zone in list(domains):
        note(zone)
    for leaving, entering in moves:
        came = slots[entering] if entering != position else None
        went = slots[leaving] if leaving != position else None
        if came is not None:
            count(came, 1)
        if went is not None:
            count(went, -1)
        if came is not None:
            note(came[0])
        if went is not None:
            note(went[0])
    return single
