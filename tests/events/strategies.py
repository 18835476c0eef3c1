"""Hypothesis strategies for valid events records and for arbitrary junk (tests/events only).

Valid records are built directly as model objects, so the round-trip property
``parse_record(to_json(rec)) == rec`` checks the parser and the encoder against each other.
"""

from __future__ import annotations

import string

from hypothesis import strategies as st

from events import (
    BookieDisk,
    BookieLocation,
    BookieLost,
    BookieReadonly,
    BookieReplace,
    BookieWritable,
    ClusterView,
    EnsembleCheck,
    FeatureSet,
    LedgerCreate,
)
from events.limits import MAX_CLUSTER_CHARS, MAX_LONG, MAX_TIME_MS

# Any Unicode scalar value (no unpaired surrogates, which are not valid Unicode text).
unicode_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=24)

# BookKeeper's id alphabet (spec §1.1): letters, digits, '.', '-', and 0x3A..0x5F.
BOOKIE_ALPHABET = string.ascii_letters + string.digits + ".-" + "".join(chr(c) for c in range(0x3A, 0x60))
bookie_ids = st.one_of(
    st.builds(
        lambda host, port: f"{host}:{port}", st.from_regex(r"[a-z0-9.-]{1,20}", fullmatch=True), st.integers(0, 65535)
    ),
    st.text(alphabet=BOOKIE_ALPHABET, min_size=1, max_size=24),
).filter(lambda b: b.lower() != "readonly")

clusters = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=MAX_CLUSTER_CHARS // 8)
times = st.integers(0, MAX_TIME_MS)
locations = unicode_text.map(lambda s: "/" + s) | st.sampled_from(["/", "/rack1", "/region-a/rack1"])
optional_text = st.none() | unicode_text
metadata_values = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40).map(str.encode)
custom_metadata = st.dictionaries(unicode_text, metadata_values, max_size=4).map(lambda d: tuple(sorted(d.items())))
excludes = st.frozensets(bookie_ids, max_size=5)
ledger_ids = st.integers(0, MAX_LONG)


@st.composite
def quorums(draw, size=None):
    """(ensemble_size, write_quorum, ack_quorum) with 1 <= ack <= write <= size."""
    size = draw(st.integers(1, 12)) if size is None else size
    write = draw(st.integers(1, size))
    return size, write, draw(st.integers(1, write))


@st.composite
def ledger_creates(draw):
    size, write, ack = draw(quorums())
    return LedgerCreate(
        cluster=draw(clusters),
        time_ms=draw(times),
        request_id=draw(unicode_text),
        ledger_id=draw(st.none() | ledger_ids),
        ensemble_size=size,
        write_quorum=write,
        ack_quorum=ack,
        custom_metadata=draw(custom_metadata),
        exclude=draw(excludes),
    )


@st.composite
def bookie_replaces(draw):
    ensemble = tuple(draw(st.lists(bookie_ids, min_size=1, max_size=8, unique=True)))
    _, write, ack = draw(quorums(len(ensemble)))
    return BookieReplace(
        cluster=draw(clusters),
        time_ms=draw(times),
        request_id=draw(unicode_text),
        ledger_id=draw(st.none() | ledger_ids),
        ensemble=ensemble,
        bookie=draw(st.sampled_from(ensemble)),
        write_quorum=write,
        ack_quorum=ack,
        exclude=draw(excludes),
        custom_metadata=draw(custom_metadata),
    )


@st.composite
def ensemble_checks(draw):
    ensemble = tuple(draw(st.lists(bookie_ids, min_size=1, max_size=8, unique=True)))
    _, write, ack = draw(quorums(len(ensemble)))
    return EnsembleCheck(
        cluster=draw(clusters),
        time_ms=draw(times),
        request_id=draw(unicode_text),
        ledger_id=draw(ledger_ids),
        ensemble=ensemble,
        write_quorum=write,
        ack_quorum=ack,
    )


@st.composite
def cluster_views(draw):
    bookies = draw(st.lists(bookie_ids, max_size=12, unique=True))
    cut = draw(st.integers(0, len(bookies)))
    return ClusterView(
        cluster=draw(clusters), time_ms=draw(times), writable=tuple(bookies[:cut]), readonly=tuple(bookies[cut:])
    )


@st.composite
def bookie_disks(draw):
    total = draw(st.integers(0, MAX_LONG))
    return BookieDisk(
        cluster=draw(clusters),
        time_ms=draw(times),
        bookie=draw(bookie_ids),
        free_disk=draw(st.integers(0, total)),
        total_disk=total,
    )


events = st.one_of(
    st.builds(
        BookieWritable,
        cluster=clusters,
        time_ms=times,
        bookie=bookie_ids,
        location=st.none() | locations,
        hostname=optional_text,
        group=optional_text,
    ),
    st.builds(BookieReadonly, cluster=clusters, time_ms=times, bookie=bookie_ids),
    st.builds(BookieLost, cluster=clusters, time_ms=times, bookie=bookie_ids),
    st.builds(
        BookieLocation,
        cluster=clusters,
        time_ms=times,
        bookie=bookie_ids,
        location=st.none() | locations,
        hostname=optional_text,
        group=optional_text,
    ),
    bookie_disks(),
    cluster_views(),
    st.builds(FeatureSet, cluster=clusters, time_ms=times, name=unicode_text, value=st.integers(-(2**31), 2**31 - 1)),
)
requests = st.one_of(ledger_creates(), bookie_replaces(), ensemble_checks())
records = events | requests

# Arbitrary JSON values (what a confused producer might send).
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=12,
)
# Arbitrary Python values a caller might put in a mapping (not all are JSON).
python_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text() | st.binary(max_size=8),
    lambda children: (
        st.lists(children, max_size=3)
        | st.tuples(children)
        | st.frozensets(st.integers(), max_size=3)
        | st.dictionaries(st.text(max_size=8) | st.integers(), children, max_size=3)
    ),
    max_leaves=10,
)
