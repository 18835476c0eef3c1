"""Record builders and a step runner for the state tests (pure, no Spark).

Records are built directly as the frozen dataclasses `events.parse_record` returns; `raw()` goes
through the parser when a test needs the real boundary (dead letters).
"""

from __future__ import annotations

import json

from events.dead_letter import DeadLetter
from events.model import (
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
    Origin,
)
from events.parse import parse_record
from state import ModelSettings, step
from state.outputs import ALERT, DEAD_LETTER, DECISION

CLUSTER = "c1"
T0 = 1_700_000_000_000  # a fixed epoch-ms origin; tests count from here

RACKAWARE = {"ensemblePlacementPolicy": "rackaware"}


def writable(t, bookie, location=None, *, hostname=None, group=None, cluster=CLUSTER):
    return BookieWritable(cluster=cluster, time_ms=T0 + t, bookie=bookie, location=location, hostname=hostname,
                          group=group)


def readonly(t, bookie, *, cluster=CLUSTER):
    return BookieReadonly(cluster=cluster, time_ms=T0 + t, bookie=bookie)


def lost(t, bookie, *, cluster=CLUSTER):
    return BookieLost(cluster=cluster, time_ms=T0 + t, bookie=bookie)


def location(t, bookie, loc, *, hostname=None, group=None, cluster=CLUSTER):
    return BookieLocation(cluster=cluster, time_ms=T0 + t, bookie=bookie, location=loc, hostname=hostname,
                          group=group)


def disk(t, bookie, free, total=None, *, cluster=CLUSTER):
    return BookieDisk(cluster=cluster, time_ms=T0 + t, bookie=bookie, free_disk=free,
                      total_disk=free if total is None else total)


def view(t, writable_bookies, readonly_bookies=(), *, cluster=CLUSTER):
    return ClusterView(cluster=cluster, time_ms=T0 + t, writable=tuple(writable_bookies),
                       readonly=tuple(readonly_bookies))


def feature(t, name, value, *, cluster=CLUSTER):
    return FeatureSet(cluster=cluster, time_ms=T0 + t, name=name, value=value)


def create(t, request_id, ensemble_size=3, write_quorum=2, ack_quorum=2, *, exclude=(), metadata=(),
           ledger_id=None, cluster=CLUSTER):
    return LedgerCreate(cluster=cluster, time_ms=T0 + t, request_id=request_id, ledger_id=ledger_id,
                        ensemble_size=ensemble_size, write_quorum=write_quorum, ack_quorum=ack_quorum,
                        custom_metadata=tuple(metadata), exclude=frozenset(exclude))


def replace(t, request_id, ensemble, bookie, write_quorum=2, ack_quorum=2, *, exclude=(), cluster=CLUSTER):
    return BookieReplace(cluster=cluster, time_ms=T0 + t, request_id=request_id, ensemble=tuple(ensemble),
                         bookie=bookie, write_quorum=write_quorum, ack_quorum=ack_quorum, exclude=frozenset(exclude))


def check(t, request_id, ensemble, write_quorum=2, ack_quorum=2, *, ledger_id=1, cluster=CLUSTER):
    return EnsembleCheck(cluster=cluster, time_ms=T0 + t, request_id=request_id, ledger_id=ledger_id,
                         ensemble=tuple(ensemble), write_quorum=write_quorum, ack_quorum=ack_quorum)


def raw(obj_or_text, line=1):
    """Parse a record through the real boundary (a dict is dumped to JSON first)."""
    text = obj_or_text if isinstance(obj_or_text, (str, bytes)) else json.dumps(obj_or_text)
    return parse_record(text, Origin.from_file("events.jsonl", line))


def racks(spec):
    """`{"/r1": ["a", "b"], ...}` -> writable events at t=0 (bookie ids get `:3181`)."""
    return [writable(0, f"{name}:3181", rack) for rack, names in spec.items() for name in names]


class Runner:
    """Feeds a model batch by batch and checks its invariants after every step (STYLE R13)."""

    def __init__(self, conf=None, *, cluster=CLUSTER, shard=0, shards=1):
        self.conf = dict(RACKAWARE if conf is None else conf)
        self.settings = ModelSettings.from_conf(self.conf)
        self.cluster = cluster
        self.shard = shard
        self.shards = shards
        self.model = None
        self.outputs = []

    def run(self, *items):
        result = step(self.model, self.cluster, list(items), self.settings, shard=self.shard,
                      shards=self.shards)
        self.model = result.model
        if self.model is not None:
            self.model.check_invariants()
        self.outputs.extend(result.outputs)
        return result.outputs

    def decisions(self, produced=None):
        return [o.payload for o in (self.outputs if produced is None else produced) if o.kind == DECISION]

    def decision(self, request_id):
        found = [d for d in self.decisions() if d["request_id"] == request_id]
        assert len(found) == 1, f"expected one decision for {request_id}, got {found}"
        return found[0]

    def alerts(self, alert_type=None, produced=None):
        return [o.payload for o in (self.outputs if produced is None else produced)
                if o.kind == ALERT and (alert_type is None or o.payload["type"] == alert_type)]

    def dead_letters(self, produced=None):
        return [o.payload for o in (self.outputs if produced is None else produced) if o.kind == DEAD_LETTER]


def is_dead_letter(item):
    return isinstance(item, DeadLetter)


def v2_audit(audit_state):
    """The audit part of a v2 snapshot (what engines before the packed registry wrote: list columns,
    verdict rows keyed by row number) holding what `audit_state`, a packed export, holds."""
    from state.registry import LedgerRegistry, verdict_row

    registry = LedgerRegistry()
    registry.unpack(audit_state)
    numbers: dict[str, int] = {}
    columns = {name: [] for name in ("keys", "ledger_ids", "request_ids", "sizes", "members", "quorums", "seen_ms")}
    extra = {}
    for row, entry in enumerate(registry.values()):
        columns["keys"].append(entry.key)
        columns["ledger_ids"].append(entry.ledger_id)
        columns["request_ids"].append(entry.request_id)
        columns["sizes"].append(len(entry.ensemble))
        columns["members"] += [numbers.setdefault(bookie, len(numbers)) for bookie in entry.ensemble]
        columns["quorums"].append(entry.write_quorum * 1024 + entry.ack_quorum)
        columns["seen_ms"].append(entry.seen_ms)
        more = verdict_row(entry)
        if more is not None:
            extra[str(row)] = more
    return {"bookies": list(numbers), **columns, "extra": extra, "cursor": audit_state.get("cursor", "")}


def format_1(packed):
    """`packed` (format 2) as the engines before it wrote it: every column at its array's own width
    (`q` 64-bit, `i` 32-bit, little-endian) and one verdict text per extra row."""
    import base64

    from state.registry import _decode

    old = dict(packed, packed=1)
    for name in ("ledger_ids", "seen_ms"):
        values = _decode(packed[name], "q")
        old[name] = "q:" + base64.b64encode(values.tobytes()).decode("ascii")
    for name in ("sizes", "members", "write_quorums", "ack_quorums", "extra_rows", "waiting_rows"):
        values = _decode(packed[name], "i")
        old[name] = "i:" + base64.b64encode(values.tobytes()).decode("ascii")
    old["extra"] = [packed["extra"][n] for n in _decode(packed["extra_index"], "i")]
    del old["extra_index"]
    return old
