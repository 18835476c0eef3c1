"""Read ordering: which replica of an entry to ask first (`reorderReadSequence`), as pure functions.

Spec: bookkeeper-rackaware.md §8.1-§8.3 (rack-aware) and bookkeeper-region-zone-isolation.md §2.3
(region-aware local/remote interleaving).

The policies call `reorder_read_sequence` with predicates over bookie ids, so the same code serves the
rack-aware policy (everything available is LOCAL) and the region-aware one (`is_local` given: bookies
of other regions are REMOTE, and one remote replica is tried after at most two local ones).

Every replica of the write set falls in one class; lower classes are tried first:

    LOCAL < LOCAL_FAIL < REMOTE < REMOTE_FAIL < READ_ONLY < SLOW < UNAVAILABLE

Two Java bugs are fixed (the differences table of docs/policies-rackaware.md lists them):

* BK bug fixed (spec bookkeeper-rackaware.md App. A #4): Java packs the write-set index with the failed
  entry id (or pending count) into one int; for large entry ids the recovered index is wrong, and the
  "earliest failure first" ordering never takes effect anyway. Here the order inside a class is the
  original write-set order (what Java does when it works), and indices are never re-encoded.
* BK bug fixed (App. A #5): Java's `shuffleWithMask` can move entries across class boundaries. Here
  `ensembleRandomReadReordering` shuffles strictly inside the LOCAL, REMOTE, READ_ONLY and UNAVAILABLE
  groups (the fail classes and SLOW keep their order, as Java intends).

The caller's write set is never modified; a new list is returned.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

BookiePredicate = Callable[[str], bool]
BookieNumber = Callable[[str], int]

REMOTE_NODE_IN_REORDER_SEQUENCE = 2
"""How many local replicas the region-aware order tries before one remote replica (hard-coded in Java)."""


class ReadClass(enum.IntEnum):
    """Health class of one replica; lower values are read first."""

    LOCAL = 0
    LOCAL_FAIL = 1
    REMOTE = 2
    REMOTE_FAIL = 3
    READ_ONLY = 4
    SLOW = 5
    UNAVAILABLE = 6


_SHUFFLED = (ReadClass.LOCAL, ReadClass.REMOTE, ReadClass.READ_ONLY, ReadClass.UNAVAILABLE)


def _always_local(bookie: str) -> bool:
    return True


def classify(bookie: str, *, is_known: BookiePredicate, is_readonly: BookiePredicate,
             is_slow: BookiePredicate, failure_of: BookieNumber,
             is_local: BookiePredicate = _always_local) -> ReadClass:
    """The read class of one replica (spec §8.1 step 4, region spec §2.3 step 1).

    Args:
        bookie: the replica's bookie id.
        is_known: the bookie is a known writable bookie of the policy.
        is_readonly: the bookie is registered read-only.
        is_slow: the bookie is in the slow-bookie cache (not expired).
        failure_of: last failed entry id of the bookie, < 0 when it has no failure history.
        is_local: the bookie is in the reader's region (always true for rack-aware).
    """
    if not is_known(bookie):
        if not is_readonly(bookie):
            return ReadClass.UNAVAILABLE
        return ReadClass.SLOW if is_slow(bookie) else ReadClass.READ_ONLY
    if failure_of(bookie) < 0:
        if is_slow(bookie):
            return ReadClass.SLOW
        return ReadClass.LOCAL if is_local(bookie) else ReadClass.REMOTE
    return ReadClass.LOCAL_FAIL if is_local(bookie) else ReadClass.REMOTE_FAIL


def _move_and_shift(items: list[int], source: int, target: int) -> None:
    """Move `items[source]` to `target`, shifting the entries between them by one (`moveAndShift`)."""
    items.insert(target, items.pop(source))


def _check_indices(ensemble: Sequence[str], write_set: Sequence[int]) -> list[int]:
    size = len(ensemble)
    indices = list(write_set)
    for index in indices:
        if not isinstance(index, int) or not 0 <= index < size:
            raise ValueError(f"write_set: index {index!r} is not a position of the {size}-bookie ensemble; "
                             f"indices must be integers in [0, {size})")
    return indices


def move_least_pending_first(ensemble: Sequence[str], indices: list[int], pending_of: BookieNumber,
                             threshold: int) -> bool:
    """Spec §8.1 step 2: move the replica with the fewest pending requests to the front, in place.

    Only when it is not already first and the first replica has at least `threshold` more pending
    requests. Ties keep the earliest replica. Returns whether anything moved.
    """
    if threshold <= 0 or len(indices) < 2:
        return False
    pending = [pending_of(ensemble[i]) for i in indices]
    best = 0
    for k in range(1, len(pending)):
        if pending[k] < pending[best]:
            best = k
    if best > 0 and pending[0] >= pending[best] + threshold:
        _move_and_shift(indices, best, 0)
        return True
    return False


def reorder_read_sequence(ensemble: Sequence[str], write_set: Iterable[int], *,
                          is_known: BookiePredicate, is_readonly: BookiePredicate,
                          is_slow: BookiePredicate, failure_of: BookieNumber, pending_of: BookieNumber,
                          threshold_pending: int = 0, random_reordering: bool = False,
                          rng: random.Random | None = None, is_local: BookiePredicate | None = None,
                          remote_insert_position: int = REMOTE_NODE_IN_REORDER_SEQUENCE) -> list[int]:
    """The order in which to read the replicas of `write_set` (a new list of ensemble indices).

    Rack-aware mode (`is_local` None, spec §8.1): when no replica of the write set is unavailable or
    slow and random reordering is off, the write set comes back unchanged (after the pending-request
    move). Otherwise replicas are grouped by `ReadClass`, keeping write-set order inside a class.

    Region-aware mode (`is_local` given, region spec §2.3): always grouped; LOCAL_FAIL joins LOCAL and
    REMOTE_FAIL joins REMOTE after sorting, then the first remote replica is moved to position
    min(leading local replicas, `remote_insert_position`): "at most 2 local, then one remote".

    Args:
        ensemble: the ledger's ensemble (bookie ids by position).
        write_set: ensemble indices holding the entry, in the default read order.
        is_known, is_readonly, is_slow, failure_of: see `classify`.
        pending_of: pending requests of a bookie (0 when unknown).
        threshold_pending: `readReorderThresholdPendingRequests` (> 0 enables step 2).
        random_reordering: `ensembleRandomReadReordering`.
        rng: draws for the random reordering (default `random.Random(0)`).
        is_local: region-aware: whether a bookie is in the reader's region.
        remote_insert_position: region-aware N (2 in BookKeeper).

    Raises:
        ValueError: an index of `write_set` is not a position of `ensemble`.

    Cost: O(|write_set|) predicate calls plus a sort of |write_set| items.
    """
    indices = _check_indices(ensemble, write_set)
    region_aware = is_local is not None
    moved = move_least_pending_first(ensemble, indices, pending_of, threshold_pending)
    del moved  # Java only counts it in a metric
    if not (region_aware or random_reordering):
        for index in indices:
            bookie = ensemble[index]
            if (not is_known(bookie) and not is_readonly(bookie)) or is_slow(bookie):
                break
        else:
            return indices
    local = is_local if is_local is not None else _always_local
    classes = [classify(ensemble[i], is_known=is_known, is_readonly=is_readonly, is_slow=is_slow,
                        failure_of=failure_of, is_local=local) for i in indices]
    # BK bug fixed (spec bookkeeper-rackaware.md App. A #4): a stable sort by class keeps the write-set
    # order inside each class and never re-encodes indices (Java's packed keys overflow).
    order = sorted(range(len(indices)), key=classes.__getitem__)
    ordered = [indices[k] for k in order]
    ordered_classes = [classes[k] for k in order]
    if random_reordering:
        generator = rng if rng is not None else random.Random(0)
        _shuffle_groups(ordered, ordered_classes, generator)
    if region_aware:
        merged = [ReadClass.LOCAL if c == ReadClass.LOCAL_FAIL else
                  ReadClass.REMOTE if c == ReadClass.REMOTE_FAIL else c for c in ordered_classes]
        first_remote = next((k for k, c in enumerate(merged) if c == ReadClass.REMOTE), -1)
        if first_remote >= 0:
            target = 0
            while target < remote_insert_position and target < len(merged) and merged[target] == ReadClass.LOCAL:
                target += 1
            _move_and_shift(ordered, first_remote, target)
    return ordered


def _shuffle_groups(ordered: list[int], classes: list[ReadClass], rng: random.Random) -> None:
    """Shuffle, in place, each contiguous run of a shuffled class (classes are already sorted).

    BK bug fixed (spec bookkeeper-rackaware.md App. A #5): Java's `shuffleWithMask` can cross group
    boundaries; this never does.
    """
    start = 0
    n = len(ordered)
    while start < n:
        end = start
        while end < n and classes[end] == classes[start]:
            end += 1
        if classes[start] in _SHUFFLED and end - start > 1:
            group = ordered[start:end]
            rng.shuffle(group)
            ordered[start:end] = group
        start = end


def reorder_read_lac_sequence(ensemble: Sequence[str], write_set: Iterable[int], **kwargs: Any) -> list[int]:
    """`reorder_read_sequence`, then every ensemble index not present, as BookKeeper appends them (spec §8.3)."""
    ordered = reorder_read_sequence(ensemble, write_set, **kwargs)
    return add_missing_indices(ordered, len(ensemble))


def add_missing_indices(write_set: Sequence[int], ensemble_size: int) -> list[int]:
    """A new list: `write_set` followed by the ensemble indices it lacks (`WriteSet.addMissingIndices`).

    BK quirk (spec bookkeeper-rackaware.md §8.3): Java grows the write set to `ensemble_size` zero-filled
    slots before it fills them, and its `contains(0)` sees those zeros, so a missing index 0 is never
    written and stays in the one slot left over: the last. The other missing indices come in ascending
    order. `[5, 6]` with 10 bookies gives `[5, 6, 1, 2, 3, 4, 7, 8, 9, 0]`.

    Cost: O(ensemble_size).
    """
    result = list(write_set)
    if len(result) >= ensemble_size:
        return result
    present = set(result)
    result.extend(i for i in range(1, ensemble_size) if i not in present)
    if 0 not in present:
        result.append(0)
    return result


class SlowBookieCache:
    """Bookies reported slow by the read path; an entry expires `expiry_s` after it was written.

    BookKeeper keeps `bookie -> entry id` in a Guava cache with `expireAfterWrite =
    bookieFailureHistoryExpirationMSec`; only presence matters. Time is the policy's injected clock.

    Args:
        expiry_s: seconds an entry stays (0 keeps nothing).
    """

    __slots__ = ("expiry_s", "_entries")

    def __init__(self, expiry_s: float) -> None:
        self.expiry_s = expiry_s
        self._entries: dict[str, tuple[int, float]] = {}

    def register(self, bookie: str, entry_id: int, now: float) -> None:
        """Record (or refresh) a slow bookie at time `now`."""
        self._entries[bookie] = (entry_id, now)

    def contains(self, bookie: str, now: float) -> bool:
        """Whether `bookie` was registered less than `expiry_s` before `now`."""
        entry = self._entries.get(bookie)
        return entry is not None and now < entry[1] + self.expiry_s

    def purge(self, now: float) -> None:
        """Forget expired entries (keeps the cache small; never changes an answer)."""
        expiry = self.expiry_s
        for bookie in [b for b, (_, at) in self._entries.items() if not now < at + expiry]:
            del self._entries[bookie]

    def __len__(self) -> int:
        return len(self._entries)

    def export(self) -> dict[str, list[float]]:
        """JSON-able: bookie -> [entry_id, registered_at]."""
        return {b: [entry, at] for b, (entry, at) in sorted(self._entries.items())}

    def restore(self, entries: Mapping[str, Sequence[float]]) -> None:
        """Replace the content with what `export` produced."""
        self._entries = {b: (int(v[0]), float(v[1])) for b, v in entries.items()}
