"""`ClusterModel` <-> bytes for Spark's state store: versioned, compact, bounded (STYLE R9).

Format: UTF-8 JSON of one object `{"v": 4, ...}`, zlib-compressed, or framed by a `Codec` the caller
passes (the streaming job's is zstd: `streaming.stateful.STATE_CODEC`). The policy's internals travel as
the policy's own `export_state()` and are restored with `import_state()`; the ledger audit's registry
in its packed form (`state.registry`: integer columns as base64 arrays, entries built only when read,
so a load and a store cost little per remembered ledger); everything else is the model's
(membership, facts, disk, features, pending leaves, flaps, counters, the clocks), with the status
record's emission state and open ledger-alert counts (`state.status`) and the skew windows
(`state.skew`: bookie and rack names tabled once, decisions as indices), so a restart goes on with the
same status records and skew alerts.

Versioning: `VERSION` is the format this engine writes. `loads` reads any older version by applying
`MIGRATIONS[v]` (which turns a version-v document into a version-(v+1) one) until it reaches `VERSION`;
a newer version raises `SnapshotError` (it was written by a newer engine: upgrade this one).

If the configuration now names another policy than the one that wrote the snapshot, the policy's
internals cannot be imported: a fresh policy is built from the model's membership instead (pending
stabilization leaves are then dropped).

Bounded: the model forgets what it knew of a departed bookie `engine.bookieHistoryTtlSeconds` after
it left (location unless set by `bookie_location`, disk report, flap history), so the size follows
the live cluster plus the recent departures, not the whole history.
"""

from __future__ import annotations

import json
import zlib
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

import orjson

from policies import BookieInfo

from .cluster import BookieFacts, ClusterModel
from .health import TopologyHealth
from .settings import ModelSettings

VERSION = 4


def _v1_to_v2(document: dict[str, Any]) -> dict[str, Any]:
    """v2 adds the ledger audit (empty) and the health state (adopted from the model on load)."""
    return {**document, "v": 2, "audit": {}, "health": None}


def _v2_to_v3(document: dict[str, Any]) -> dict[str, Any]:
    """v3 packs the ledger audit (`state.registry`); `LedgerAudit.import_state` still reads v2's list
    columns, so the document only changes its number. The bump keeps a v2 engine from reading a v3
    audit as empty."""
    return {**document, "v": 3}


def _v3_to_v4(document: dict[str, Any]) -> dict[str, Any]:
    """v4 stores the packed registry's columns narrowed and delta-coded (`state.registry` format 2);
    `LedgerRegistry.unpack` still reads v3's format 1, so the document only changes its number. The
    bump keeps a v3 engine, which would read format 2 as an empty audit, from loading it."""
    return {**document, "v": 4}


#: version -> function turning a document of that version into one of the next version.
MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _v1_to_v2, 2: _v2_to_v3, 3: _v3_to_v4}


class SnapshotError(ValueError):
    """A snapshot that cannot be read (corrupt, or written by a newer engine)."""


def to_document(model: ClusterModel) -> dict[str, Any]:
    """The model as a JSON-ready dict of the current `VERSION`."""
    return {
        "v": VERSION,
        "cluster": model.cluster,
        "policy": model.policy_name,
        "clock_ms": model.clock_ms,
        "record_clock_ms": model.record_clock_ms,
        "version": model.version,
        "late_records": model.late_records,
        "writable": sorted(model.writable),
        "readonly": sorted(model.readonly),
        "lost": sorted(model.lost),
        "facts": {b: [f.location, f.hostname, f.group, f.pinned] for b, f in sorted(model.facts.items())},
        "features": dict(sorted(model.features.items())),
        "disk": {b: [i.total_disk, i.free_disk] for b, i in sorted(model.disk.items())},
        "absent_since": dict(sorted(model.absent_since.items())),
        "pending": dict(sorted(model.pending.items())),
        "flaps": {b: list(times) for b, times in sorted(model.flaps.items())},
        "flapping": sorted(model.flapping),
        "join_failures": dict(sorted(model.join_failures.items())),
        "rack_info_stale": model.rack_info_stale,
        "disk_stale": model.disk_stale,
        "policy_state": model.policy.export_state(),
        "audit": model.audit.export_state(),
        "health": model.health.export_state(),
        "status": model.status.export_state(),
        "skew": model.skew.export_state(),
    }


#: zlib level of snapshots stored without a codec. Any level reads back.
COMPRESS_LEVEL = 1

#: A snapshot stored with a `Codec` starts with these three bytes and the codec's fourth, then the
#: JSON's length (8 bytes, little-endian), then the codec's frame. A zlib stream never starts with them.
FRAMED = b"PEZ"


class Codec(Protocol):
    """A compressor for snapshots (the streaming layer passes one built on pyarrow's zstd)."""

    magic: bytes  # four bytes starting with `FRAMED`

    def compress(self, data: bytes) -> bytes: ...

    def decompress(self, data: bytes, size: int) -> bytes: ...


def dumps(model: ClusterModel, codec: Codec | None = None) -> bytes:
    """Serialize the model: compact JSON with sorted keys, framed by `codec` (see `FRAMED`), or a zlib
    stream (`COMPRESS_LEVEL`) without one.

    orjson writes the JSON (faster than `json` for a cluster's document); what it
    refuses (a lone surrogate in a name, an integer beyond 64 bits) is written by `json`.
    """
    document = to_document(model)
    try:
        data = orjson.dumps(document, option=orjson.OPT_SORT_KEYS)
    except TypeError:        # orjson.JSONEncodeError
        data = json.dumps(document, sort_keys=True, separators=(",", ":")).encode("utf-8", "surrogatepass")
    if codec is None:
        return zlib.compress(data, COMPRESS_LEVEL)
    return codec.magic + len(data).to_bytes(8, "little") + codec.compress(data)


def decompress(data: bytes, codec: Codec | None = None) -> bytes:
    """The JSON of a snapshot: a `codec` frame (see `FRAMED`), else a zlib stream.

    Raises:
        SnapshotError: a frame of another codec than `codec`, or one `codec` cannot read.
        zlib.error: neither a frame nor a zlib stream.
    """
    if data[:3] != FRAMED:
        return zlib.decompress(data)
    if codec is None or data[:4] != codec.magic:
        raise SnapshotError(f"model snapshot: stored with codec {data[:4]!r}, which this loader was not given "
                            "(snapshots of the streaming job load through streaming.stateful.STATE_CODEC)")
    try:
        return codec.decompress(data[12:], int.from_bytes(data[4:12], "little"))
    except (OSError, ValueError) as exc:
        raise SnapshotError(f"model snapshot: not a readable {data[:4]!r} frame ({exc}); the state store is "
                            "corrupt") from exc


def loads(data: bytes, settings: ModelSettings, codec: Codec | None = None) -> ClusterModel:
    """Restore a model written by `dumps` (this or an older engine).

    Args:
        data: the snapshot bytes.
        settings: the model settings (the policy is created from `settings.placement`).
        codec: the `Codec` the snapshot may be framed by (a zlib stream loads either way).

    Raises:
        SnapshotError: the bytes are not a snapshot, or one written by a newer engine.
    """
    try:
        text = decompress(bytes(data), codec)
        try:
            document = orjson.loads(text)
        except orjson.JSONDecodeError:    # a lone surrogate, an integer beyond 64 bits, or not JSON at all
            document = json.loads(text.decode("utf-8", "surrogatepass"))
    except (zlib.error, UnicodeDecodeError, json.JSONDecodeError, TypeError) as exc:
        raise SnapshotError(f"model snapshot: not a readable snapshot ({exc}); the state store is corrupt or "
                            "holds another kind of state") from exc
    return from_document(document, settings)


def migrate(document: dict[str, Any]) -> dict[str, Any]:
    """Bring a document to `VERSION` through `MIGRATIONS`."""
    version = document.get("v") if isinstance(document, dict) else None
    if not isinstance(version, int) or isinstance(version, bool):
        raise SnapshotError(f"model snapshot: expected an object with an integer 'v', got {str(document)[:80]!r}")
    if version > VERSION:
        raise SnapshotError(f"model snapshot: format v{version} was written by a newer engine (this one reads up "
                            f"to v{VERSION}); upgrade the engine or start from a fresh checkpoint")
    while version < VERSION:
        step = MIGRATIONS.get(version)
        if step is None:
            raise SnapshotError(f"model snapshot: no migration from format v{version}; start from a fresh "
                                "checkpoint")
        document = step(document)
        version = document["v"]
    return document


def from_document(document: dict[str, Any], settings: ModelSettings) -> ClusterModel:
    """A model from a (possibly older) document; see `loads`."""
    document = migrate(document)
    model = ClusterModel(document["cluster"], settings)
    model.clock_ms = int(document["clock_ms"])
    # Optional (added within v4; an engine that does not know it ignores it): without it, the clock.
    record_clock = document.get("record_clock_ms", model.clock_ms or None)
    model.record_clock_ms = None if record_clock is None else int(record_clock)
    model.version = int(document["version"])
    model.late_records = int(document["late_records"])
    model.writable = set(document["writable"])
    model.readonly = set(document["readonly"])
    model.lost = set(document["lost"])
    model.features.update(document["features"])
    for bookie, (total, free) in document["disk"].items():
        model.disk[bookie] = BookieInfo(total_disk=total, free_disk=free)
    model.absent_since = {b: int(t) for b, t in document["absent_since"].items()}
    model.replace_pending({b: float(t) for b, t in document["pending"].items()})
    model.flaps = {b: deque(times) for b, times in document["flaps"].items()}
    model.flapping = set(document["flapping"])
    model.join_failures = dict(document["join_failures"])
    # Facts first: they determine the mapping and the rack info the policy reads (same dict objects).
    for bookie, (location, hostname, group, pinned) in document["facts"].items():
        model._set_facts(bookie, BookieFacts(location, hostname, group, bool(pinned)))  # noqa: SLF001
    if model.rack_info:
        # The model's policy copied the rack info when there was none; build it again with the facts'.
        # (Its mapping and features are the model's own dicts, read when it resolves or decides.)
        model.policy = model.new_policy()
    if document["policy"] == model.policy_name:
        model.policy.import_state(document["policy_state"])
        if not model.placement.keep_stale_readonly_set:
            # Written under placement.compat.keepStaleReadOnlySet, the policy's set may be stale.
            model.policy.restore_readonly(model.readonly)
        model.rack_info_stale = bool(document["rack_info_stale"])
        model.disk_stale = bool(document["disk_stale"])
    else:
        # Another policy now: rebuild it from the membership (its pending departures are lost).
        model.replace_pending({})
        model.policy.on_cluster_changed(model.writable, model.readonly)
        model.join_failures = dict(model.policy.join_failures)
        model.rack_info_stale = False
        model.disk_stale = model.placement.disk_weighted
        model.version += 1
    # The policy now holds the rack info as it is (or none), not as it was when the snapshot was
    # taken: a pending hand-over is of the whole rack info, as it was before per-bookie hand-overs.
    model.rack_info_dirty = None if model.rack_info_stale else set()
    model.audit.import_state(document["audit"])
    if document["health"] is None:
        model.health = TopologyHealth.adopt(model.cluster, model)
    else:
        model.health.import_state(document["health"])
    # Optional (added within v4; an engine that does not know them ignores them): without the status,
    # the open ledger alerts are counted once from the audit and the next record boundary emits a
    # status record; without the skew windows, they start empty.
    status = document.get("status")
    if status is None:
        model.status.recount(model.audit.open_alerts())
    else:
        model.status.import_state(status, model.settings.status_interval_ms)
    model.skew.import_state(document.get("skew") or {})
    model.rebuild_expiry_heaps()
    return model


__all__ = ["MIGRATIONS", "VERSION", "SnapshotError", "dumps", "from_document", "loads", "migrate", "to_document"]
