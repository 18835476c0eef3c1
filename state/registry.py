"""The ledger audit's registry: what it remembers of each ledger, least recently seen first, indexed by
bookie, and the packed form it is stored in.

Why packed: Spark hands a cluster's state to whichever Python worker is idle, so most micro-batches
load the registry from the state store and store it again (docs/performance.md). Building every
entry on load and encoding every entry on store would cost O(remembered ledgers) Python steps per
micro-batch, whatever the batch touched. Here a loaded registry
stays in columns (the *base*); an entry becomes a Python object only when the audit reads it, and
storing copies the untouched rows' columns as they are. Load and store are O(ledgers) in C (base64,
array slices, zlib in `state.snapshot`) plus O(touched ledgers) in Python.

Layout, in recency order:

* base rows `0 .. n-1` in columns. A row leaves the base when its ledger is forgotten or refreshed
  (`_gone`); a row that was read is kept as its entry (`_live`).
* then the ledgers added or refreshed since the base was packed (`_recent`).

A base row's key, ids, ensemble, quorums and time never change: `refresh` moves the entry out of the
base first. Only the verdict fields of a live base entry (relaxed, rules, adhering, adherence,
fix_known, open) change in place; `pack` encodes those again and copies every other row's.

Packed form (`pack`, JSON-able): `bookies` (names; ensembles are indices into it), `request_ids` (a
list), and integer columns as text (`_encode`): `ledger_ids` (-1 for none), `sizes` (ensemble sizes),
`members`, `write_quorums`, `ack_quorums`, `seen_ms`, `extra_rows` with `extra` (the distinct JSON
texts of the rows that are not plainly adhering, `[relaxed, adhering, adherence, fix_known, open,
rules]`) and `extra_index` (each such row's text in `extra`), and `waiting_rows`. Format 2 stores a
column in the narrowest of 8-, 16-, 32- and 64-bit little-endian integers that holds it, `ledger_ids`
and `seen_ms` as differences from the previous row, so a busy cluster's snapshot is smaller and
cheaper to compress than format 1's full-width columns (docs/performance.md). `unpack` also reads
format 1 (full-width columns, one verdict text per row) and the list columns engines before the
packed registry wrote.

Keys are not stored: a row's key is `ledger/<ledger_id>`, or `request/<request_id>` without a ledger
id (`ledger_key`), and rows are found by ledger id or request id.

Renamed alert types: a verdict row names each open alert by its type. A registry packed by an engine
that used an old name (`outputs.ALERT_TYPE_ALIASES`) is read with the current names (`unpack` rewrites
the distinct verdict texts that hold one, `apply_verdict_row` the rows of older forms), so the alert
is resolved under its current name with `resolves` naming the id it was opened with.
"""

from __future__ import annotations

import base64
import bisect
import functools
import json
import sys
from array import array
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, chain
from typing import Any

import numpy as np
import orjson

from events.model import positional_builder
from policies import Adherence

from .outputs import ALERT_TYPE_ALIASES, current_alert_type, jsonable

_STRICT = Adherence.MEETS_STRICT.name
#: Prefix of the `relaxed` notes in which snapshots written before `AuditEntry.rules` existed kept the
#: machine-readable relaxations; `unpack` moves them into `rules`.
_LEGACY_RULE_NOTE = "rule "
PACKED_FORMAT = 2
_READABLE_FORMATS = (1, 2)
_LITTLE = sys.byteorder == "little"
assert array("i").itemsize == 4 and array("q").itemsize == 8, "the packed registry needs 32- and 64-bit arrays"


@dataclass(slots=True)
class AuditEntry:
    """What the audit remembers of one ledger (mutable: owned by its `LedgerAudit` only).

    `relaxed` holds sentences for people (why the placement was relaxed); `rules` the machine-readable
    relaxations of the decision's `explain.relaxed` (`{"rule": "isolation" | "racks" | "regions" |
    "zones", ...}`, see `relaxation_rules`) that the ensemble still depends on. The rule mappings are
    private JSON-ready copies, shared with nobody; treat them as read-only.

    `key` to `seen_ms` change only through `LedgerRegistry.refresh` (which gives the new ensemble).
    """

    key: str
    ledger_id: int | None
    request_id: str
    ensemble: tuple[str, ...]
    write_quorum: int
    ack_quorum: int
    seen_ms: int
    relaxed: tuple[str, ...] = ()          # human-readable sentences (alerts' `data.relaxed`)
    rules: tuple[Mapping[str, Any], ...] = ()   # `explain.relaxed` tags still depended on (read-only)
    adhering: bool | None = None          # last settled verdict; None: never settled
    adherence: str | None = None
    fix_known: bool = False               # an open alert already carries a possible fix
    open: dict[str, str] = field(default_factory=dict)  # alert type -> id of the opening alert


# `AuditEntry(...)` with every field given in order (`remember`'s fast path builds one per placement,
# the registry one per base row it reads).
new_entry = positional_builder(AuditEntry)


def canonical_rule(rule: Mapping[str, Any]) -> dict[str, Any]:
    """A deep, JSON-ready copy with sorted keys (so equal rules compare and export alike)."""
    copied = jsonable(rule)
    return {key: copied[key] for key in sorted(copied)}


def split_legacy_notes(notes: Iterable[str]) -> tuple[tuple[str, ...], tuple[dict[str, Any], ...]]:
    """Notes of a snapshot written before `AuditEntry.rules`: (sentences, rules parsed from the
    `rule {json}` notes). An unreadable rule note is dropped. Cost: O(notes)."""
    sentences: list[str] = []
    rules: list[dict[str, Any]] = []
    for note in notes:
        if note.startswith(_LEGACY_RULE_NOTE):
            try:
                rule = json.loads(note[len(_LEGACY_RULE_NOTE):])
            except ValueError:
                continue
            if isinstance(rule, dict) and isinstance(rule.get("rule"), str):
                rules.append(canonical_rule(rule))
        else:
            sentences.append(note)
    return tuple(sentences), tuple(rules)


def verdict_row(entry: AuditEntry) -> list[Any] | None:
    """The entry's verdict fields as a JSON-ready row, or None when it plainly adheres (the default)."""
    if not (entry.relaxed or entry.rules or entry.adhering is not True or entry.adherence != _STRICT
            or entry.fix_known or entry.open):
        return None
    return [list(entry.relaxed), entry.adhering, entry.adherence, entry.fix_known,
            dict(sorted(entry.open.items())), [jsonable(rule) for rule in entry.rules]]


def apply_verdict_row(entry: AuditEntry, row: Sequence[Any]) -> None:
    """Set the verdict fields from a `verdict_row` (or a five-field row of an older snapshot); open
    alerts of a renamed type are held under its current name."""
    relaxed, entry.adhering, entry.adherence, entry.fix_known, opened = row[:5]
    if len(row) > 5:
        entry.relaxed = tuple(relaxed)
        entry.rules = tuple(canonical_rule(rule) for rule in row[5] if isinstance(rule, Mapping))
    else:
        entry.relaxed, entry.rules = split_legacy_notes(relaxed)
    entry.open = {current_alert_type(alert_type): ident for alert_type, ident in opened.items()}


@functools.lru_cache(maxsize=1024)
def _holds_open_alert(text: str) -> bool:
    """Whether a `_verdict_text` (or an older snapshot's verdict row) names an open alert. Cached: a
    registry's rows share a few distinct texts."""
    return bool(json.loads(text)[4])


def _verdict_text(entry: AuditEntry) -> str | None:
    """`verdict_row` as JSON text with sorted keys (orjson's; `json`'s for what orjson refuses).

    Any valid text reads back the same (`apply_verdict_row`), so the two spellings may meet in one
    snapshot; equal texts share one `extra` item.
    """
    row = verdict_row(entry)
    return None if row is None else _row_text(row)


def _row_text(row: list[Any]) -> str:
    try:
        return orjson.dumps(row, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:          # orjson.JSONEncodeError: integers beyond 64 bits, lone surrogates
        return json.dumps(row, sort_keys=True, separators=(",", ":"))


def _with_current_alert_types(texts: Sequence[str]) -> Sequence[str]:
    """Verdict texts with each open alert of a renamed type under its current name (the texts of a
    registry an engine using the old name packed), so they read and pack again as today's engine
    writes them. Cost: a substring search per text; O(text) to rewrite one holding an old name."""
    if not any(old in text for text in texts for old in ALERT_TYPE_ALIASES):
        return texts
    current = []
    for text in texts:
        if any(old in text for old in ALERT_TYPE_ALIASES):
            row = json.loads(text)
            opened = {current_alert_type(alert_type): ident for alert_type, ident in row[4].items()}
            if opened != row[4]:
                row[4] = opened
                text = _row_text(row)
        current.append(text)
    return current


#: Format-2 column widths, narrowest first: (name in the text, little-endian numpy type).
_WIDTHS = (("i1", np.dtype("<i1")), ("i2", np.dtype("<i2")), ("i4", np.dtype("<i4")), ("i8", np.dtype("<i8")))
_WIDTH_OF = dict(_WIDTHS)
_NATIVE = {"q": np.dtype(np.int64), "i": np.dtype(np.int32)}


def _encode(values: array, *, delta: bool = False) -> str:
    """A column (an `array` of typecode `q` or `i`) as `"<width>:<base64>"`: its items as little-endian
    integers of the narrowest width (`i1`, `i2`, `i4`, `i8`) that holds them all.

    With `delta`, `"D<first item>,<width>:<base64>"` holds the differences between consecutive items
    instead (ledger ids and times grow by small steps). The differences wrap around in 64 bits, as the
    sum that undoes them does, so every 64-bit column reads back exactly.
    """
    items = np.frombuffer(values, dtype=_NATIVE[values.typecode]).astype(np.int64)
    prefix = ""
    if delta and len(items):
        prefix = f"D{int(items[0])},"
        items = np.diff(items)
    low, high = (int(items.min()), int(items.max())) if len(items) else (0, 0)
    for name, dtype in _WIDTHS:  # noqa: B007 - the first width that holds the column is used below
        info = np.iinfo(dtype)
        if info.min <= low and high <= info.max:
            break
    return f"{prefix}{name}:{base64.b64encode(items.astype(dtype).tobytes()).decode('ascii')}"


def _decode(text: str, typecode: str) -> array:
    """An `_encode`d column (or a format-1 one, `"<typecode>:<base64 of the array's bytes>"`) as an
    `array` of `typecode`.

    Raises:
        ValueError: the text is not such a column, or holds items that do not fit `typecode`.
    """
    head, _, data = text.partition(":")
    values = array(typecode)
    if head in _NATIVE:                         # format 1: the array's own items, little-endian
        if head != typecode:
            raise ValueError(f"packed ledger registry: a column of typecode {head!r}, expected {typecode!r}")
        values.frombytes(base64.b64decode(data))
        if not _LITTLE:
            values.byteswap()
        return values
    first = None
    if head.startswith("D"):
        first_text, _, head = head[1:].partition(",")
        first = int(first_text)
        if not -(2**63) <= first < 2**63:
            raise ValueError(f"packed ledger registry: a column starting at {first}, beyond 64 bits")
    dtype = _WIDTH_OF.get(head)
    if dtype is None:
        raise ValueError(f"packed ledger registry: a column of unknown width {head!r}")
    items = np.frombuffer(base64.b64decode(data), dtype=dtype).astype(np.int64)
    if first is not None:
        items = np.concatenate((np.array([first], dtype=np.int64), items)).cumsum()
    target = _NATIVE[typecode]
    if len(items) and target != np.int64:
        info = np.iinfo(target)
        if int(items.min()) < info.min or int(items.max()) > info.max:
            raise ValueError(f"packed ledger registry: a column of {head!r} items beyond typecode {typecode!r}")
    values.frombytes(items.astype(target).tobytes())
    return values


class LedgerRegistry:
    """The audit's entries by key, least recently seen first (see the module docstring).

    Supports what `LedgerAudit` needs of an ordered mapping: `len`, `in`, `get`, `[key]`, `keys`,
    `values`, `items`, `oldest`; changes go through `add` (a new key, most recent), `refresh` (an
    existing entry becomes most recent, with a new ensemble) and `remove`. `keys_on(bookie)` is the
    index by bookie.
    """

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self._set_base([], array("q"), [], array("i"), array("i"), array("i"), array("i"), array("q"), {})

    def _set_base(self, bookies: list[str], ledger_ids: array, request_ids: list[str], sizes: array,
                  members: array, write_quorums: array, ack_quorums: array, seen_ms: array,
                  extra: dict[int, str]) -> None:
        n = len(ledger_ids)
        self._bookies = bookies
        self._bookie_number = {bookie: number for number, bookie in enumerate(bookies)}
        # Lookups by ledger id and by request id, built at the first lookup that needs them: a model
        # stored and then dropped (Spark gives the group to another worker) never builds them, and
        # ledger ids above every base row's (new ledgers: BookKeeper's ids grow) need no lookup.
        self._row_of_ledger: dict[int, int] | None = None       # -1 (no ledger id) is never looked up
        self._row_of_request: dict[str, int] | None = None
        self._max_ledger_id = int(np.frombuffer(ledger_ids, dtype=np.int64).max()) if n else -1
        self._ledger_ids = ledger_ids
        self._request_ids = request_ids
        self._sizes = sizes
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.frombuffer(sizes, dtype=np.int32), out=offsets[1:])
        self._offsets = array("q", offsets.tobytes())
        self._members = members
        self._write_quorums = write_quorums
        self._ack_quorums = ack_quorums
        self._seen_ms = seen_ms
        self._extra = extra                       # base row -> its verdict row as JSON text
        self._n = self._alive = n
        self._head = 0                            # no base row before it is alive
        self._gone: set[int] = set()
        self._live: dict[int, AuditEntry] = {}    # base rows read so far
        self._rows_by_bookie: list[list[int]] | None = None   # built at the first `keys_on`
        self._ensembles: dict[tuple[int, ...], tuple[str, ...]] = {}   # rows on the same bookies share one
        self._recent: OrderedDict[str, AuditEntry] = OrderedDict()
        self._recent_index: dict[str, set[str]] = {}

    # -- reading -------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return self._alive + len(self._recent)

    def __bool__(self) -> bool:
        return self._alive > 0 or bool(self._recent)

    def __contains__(self, key: object) -> bool:
        if key in self._recent:
            return True
        row = self._row(key) if isinstance(key, str) else None
        return row is not None and row not in self._gone

    def __iter__(self) -> Iterator[str]:
        return iter(self.keys())

    def keys(self) -> list[str]:
        """Every key, least recently seen first. O(ledgers), no entry is built."""
        gone, key_at = self._gone, self._key_at
        return [key_at(row) for row in range(self._head, self._n) if row not in gone] + list(self._recent)

    def values(self) -> list[AuditEntry]:
        """Every entry, least recently seen first (builds every base entry: checks and tests)."""
        gone = self._gone
        return [self._entry(row) for row in range(self._head, self._n) if row not in gone] + list(self._recent.values())

    def items(self) -> list[tuple[str, AuditEntry]]:
        return [(entry.key, entry) for entry in self.values()]

    def get(self, key: str, default: AuditEntry | None = None) -> AuditEntry | None:
        entry = self._recent.get(key)
        if entry is not None:
            return entry
        row = self._row(key)
        if row is None or row in self._gone:
            return default
        return self._entry(row)

    def __getitem__(self, key: str) -> AuditEntry:
        entry = self.get(key)
        if entry is None:
            raise KeyError(key)
        return entry

    def oldest(self) -> AuditEntry | None:
        """The least recently seen entry (None when empty)."""
        row = self._first_row()
        if row is not None:
            return self._entry(row)
        return next(iter(self._recent.values()), None)

    def drop_oldest_unread(self) -> str | None:
        """Remove the least recently seen entry if it is a base row that was never read and has no open
        alert; return its key, else None and change nothing. Lets the audit forget its oldest ledger
        without building its entry (one with an open alert is resolved as it is forgotten, so the
        audit builds that one)."""
        row = self._first_row()
        if row is None or row in self._live:
            return None
        text = self._extra.get(row)
        if text is not None and _holds_open_alert(text):
            return None
        key = self._key_at(row)
        self._drop_row(row)
        return key

    def oldest_seen_ms(self) -> int | None:
        """When the least recently seen ledger was last placed or checked (None when empty). O(1), builds nothing."""
        row = self._first_row()
        if row is not None:
            return self._seen_ms[row]
        for entry in self._recent.values():
            return entry.seen_ms
        return None

    def keys_on(self, bookie: str) -> set[str]:
        """Keys of the ledgers whose ensemble holds `bookie`. O(ledgers on it); the first call after a
        load indexes the base, O(ledgers x E)."""
        found = set(self._recent_index.get(bookie, ()))
        number = self._bookie_number.get(bookie)
        if number is not None and self._alive:
            rows_by_bookie = self._rows_by_bookie
            if rows_by_bookie is None:
                rows_by_bookie = self._rows_by_bookie = self._index_base()
            gone, key_at = self._gone, self._key_at
            found.update(key_at(row) for row in rows_by_bookie[number] if row not in gone)
        return found

    def bookie_index(self) -> dict[str, set[str]]:
        """bookie -> keys of its ledgers, for every bookie some ledger holds (checks and tests)."""
        bookies = set(self._recent_index)
        bookies.update(self._bookies)
        index = {bookie: self.keys_on(bookie) for bookie in sorted(bookies)}
        return {bookie: keys for bookie, keys in index.items() if keys}

    # -- changes ---------------------------------------------------------------------------------

    def add(self, entry: AuditEntry) -> None:
        """Register an entry under a key the registry does not hold, as the most recent."""
        self._recent[entry.key] = entry
        index = self._recent_index
        for bookie in entry.ensemble:
            keys = index.get(bookie)
            if keys is None:
                index[bookie] = {entry.key}
            else:
                keys.add(entry.key)

    def refresh(self, entry: AuditEntry, ensemble: tuple[str, ...]) -> None:
        """Make a held entry the most recent and give it `ensemble` (its other fields are the caller's)."""
        key = entry.key
        if key in self._recent:
            self._recent.move_to_end(key)
            if ensemble != entry.ensemble:
                self._reindex(key, ensemble, entry.ensemble)
                entry.ensemble = ensemble
            return
        self._drop_row(self._row(key))
        entry.ensemble = ensemble
        self.add(entry)

    def remove(self, key: str) -> None:
        entry = self._recent.pop(key, None)
        if entry is not None:
            self._reindex(key, (), entry.ensemble)
            return
        row = self._row(key)
        if row is None or row in self._gone:
            raise KeyError(key)
        self._drop_row(row)

    # -- packed form -----------------------------------------------------------------------------

    def pack(self, waiting: Iterable[str] = ()) -> dict[str, Any]:
        """The registry in its packed form (module docstring), `waiting` as row numbers; the packed
        columns become the registry's base (entries read so far are dropped and read again on demand).
        Cost: O(ledgers) in array copies, plus O(entries read or added since the last load or pack)."""
        bookies = list(self._bookies)
        number = dict(self._bookie_number)
        request_ids: list[str] = []
        ledger_ids, seen_ms = array("q"), array("q")
        sizes, members, write_quorums, ack_quorums = array("i"), array("i"), array("i"), array("i")
        extra_rows: list[int] = []
        extra: list[str] = []
        runs = self._alive_runs()
        rewritten = sorted(row for row in self._extra.keys() | self._live.keys() if row not in self._gone)
        starts = [a for a, _ in runs]
        offsets = self._offsets
        for a, b in runs:
            request_ids += self._request_ids[a:b]
            ledger_ids += self._ledger_ids[a:b]
            seen_ms += self._seen_ms[a:b]
            sizes += self._sizes[a:b]
            members += self._members[offsets[a]:offsets[b]]
            write_quorums += self._write_quorums[a:b]
            ack_quorums += self._ack_quorums[a:b]
        new_start = list(accumulate((b - a for a, b in runs), initial=0))
        for row in rewritten:
            live = self._live.get(row)
            text = _verdict_text(live) if live is not None else self._extra[row]
            if text is not None:
                run = bisect.bisect_right(starts, row) - 1
                extra_rows.append(new_start[run] + row - starts[run])
                extra.append(text)
        # The recent entries column by column (one pass of C per column, not one Python step per field).
        recent = list(self._recent.values())
        first_recent = len(ledger_ids)
        request_ids += [entry.request_id for entry in recent]
        ledger_ids.extend([-1 if entry.ledger_id is None else entry.ledger_id for entry in recent])
        seen_ms.extend([entry.seen_ms for entry in recent])
        ensembles = [entry.ensemble for entry in recent]
        sizes.extend(map(len, ensembles))
        for bookie in dict.fromkeys(chain.from_iterable(ensembles)):   # new bookies numbered as first met
            if bookie not in number:
                number[bookie] = len(bookies)
                bookies.append(bookie)
        members.extend(map(number.__getitem__, chain.from_iterable(ensembles)))
        write_quorums.extend([entry.write_quorum for entry in recent])
        ack_quorums.extend([entry.ack_quorum for entry in recent])
        for row, entry in enumerate(recent, first_recent):
            text = _verdict_text(entry)
            if text is not None:
                extra_rows.append(row)
                extra.append(text)
        if len(set(members)) < len(bookies):      # some bookie is in no ledger any more: renumber
            used = sorted(set(members))
            renumber = dict(zip(used, range(len(used))))
            bookies = [bookies[old] for old in used]
            members = array("i", map(renumber.__getitem__, members))
        extra_by_row = dict(zip(extra_rows, extra))
        self._set_base(bookies, ledger_ids, request_ids, sizes, members, write_quorums, ack_quorums, seen_ms,
                       extra_by_row)
        waiting_rows = array("i", sorted(map(self._row, waiting)))
        texts: dict[str, int] = {}
        extra_index = array("i", [texts.setdefault(text, len(texts)) for text in extra])
        return {"packed": PACKED_FORMAT, "bookies": bookies, "ledger_ids": _encode(ledger_ids, delta=True),
                "request_ids": request_ids, "sizes": _encode(sizes), "members": _encode(members),
                "write_quorums": _encode(write_quorums), "ack_quorums": _encode(ack_quorums),
                "seen_ms": _encode(seen_ms, delta=True), "extra_rows": _encode(array("i", extra_rows)),
                "extra": list(texts), "extra_index": _encode(extra_index), "waiting_rows": _encode(waiting_rows)}

    def unpack(self, state: Mapping[str, Any]) -> set[str] | None:
        """Replace the registry with a packed one (or the list columns of an older engine).

        Returns:
            The keys of the waiting ledgers, or None for the older form (the caller works them out).
        """
        if state.get("packed") not in _READABLE_FORMATS:
            self._unpack_lists(state)
            return None
        extra = _with_current_alert_types(state["extra"])
        if "extra_index" in state:              # format 2: each row names its text in the shared list
            extra = map(extra.__getitem__, _decode(state["extra_index"], "i"))
        self._set_base(list(state["bookies"]), _decode(state["ledger_ids"], "q"), list(state["request_ids"]),
                       _decode(state["sizes"], "i"), _decode(state["members"], "i"),
                       _decode(state["write_quorums"], "i"), _decode(state["ack_quorums"], "i"),
                       _decode(state["seen_ms"], "q"), dict(zip(_decode(state["extra_rows"], "i"), extra)))
        return set(map(self._key_at, _decode(state["waiting_rows"], "i")))

    def _unpack_lists(self, state: Mapping[str, Any]) -> None:
        """The list columns of snapshot format v2 (keys, ledger_ids, request_ids, sizes, members, quorums
        as write x 1024 + ack, seen_ms, extra rows by row number), as recent entries."""
        self.clear()
        bookies = state.get("bookies", [])
        members = state.get("members", [])
        extra_rows = {int(row): more for row, more in state.get("extra", {}).items()}
        offset = 0
        for row, (key, ledger_id, request_id, size, quorums, seen_ms) in enumerate(zip(
                state.get("keys", ()), state.get("ledger_ids", ()), state.get("request_ids", ()),
                state.get("sizes", ()), state.get("quorums", ()), state.get("seen_ms", ()))):
            ensemble = tuple(bookies[number] for number in members[offset:offset + size])
            offset += size
            entry = new_entry(key, ledger_id, request_id, ensemble, quorums // 1024, quorums % 1024, seen_ms,
                              (), (), True, _STRICT, False, {})
            more = extra_rows.get(row)
            if more is not None:
                apply_verdict_row(entry, more)
            self.add(entry)

    # -- internals -------------------------------------------------------------------------------

    def _entry(self, row: int) -> AuditEntry:
        entry = self._live.get(row)
        if entry is None:
            entry = self._live[row] = self._read_row(row)
        return entry

    def _read_row(self, row: int) -> AuditEntry:
        numbers = tuple(self._members[self._offsets[row]:self._offsets[row + 1]])
        ensemble = self._ensembles.get(numbers)
        if ensemble is None:
            ensemble = self._ensembles[numbers] = tuple(map(self._bookies.__getitem__, numbers))
        ledger_id = self._ledger_ids[row]
        entry = new_entry(self._key_at(row), ledger_id if ledger_id >= 0 else None, self._request_ids[row], ensemble,
                          self._write_quorums[row], self._ack_quorums[row], self._seen_ms[row],
                          (), (), True, _STRICT, False, {})
        text = self._extra.get(row)
        if text is not None:
            apply_verdict_row(entry, json.loads(text))
        return entry

    def _row(self, key: str) -> int | None:
        """The base row of `key` (gone or not), or None. Keys are `ledger_key`'s, so the id reads back."""
        if key.startswith("ledger/"):
            digits = key[7:]
            if not (digits.isascii() and digits.isdigit()):
                return None
            ledger_id = int(digits)
            if ledger_id > self._max_ledger_id:
                return None
            rows = self._row_of_ledger
            if rows is None:
                rows = self._row_of_ledger = dict(zip(self._ledger_ids, range(self._n)))
            return rows.get(ledger_id)
        if key.startswith("request/"):
            rows = self._row_of_request
            if rows is None:
                requests = self._request_ids
                without_id = np.flatnonzero(np.frombuffer(self._ledger_ids, dtype=np.int64) < 0).tolist()
                rows = self._row_of_request = {requests[row]: row for row in without_id}
            return rows.get(key[8:])
        return None

    def _key_at(self, row: int) -> str:
        ledger_id = self._ledger_ids[row]
        return f"ledger/{ledger_id}" if ledger_id >= 0 else f"request/{self._request_ids[row]}"

    def _first_row(self) -> int | None:
        if not self._alive:
            return None
        head, gone = self._head, self._gone
        while head in gone:
            head += 1
        self._head = head
        return head

    def _drop_row(self, row: int) -> None:
        self._gone.add(row)
        self._live.pop(row, None)
        self._alive -= 1

    def _alive_runs(self) -> list[tuple[int, int]]:
        """The alive base rows as [start, end) runs, in order."""
        runs = []
        start = self._head
        for row in sorted(row for row in self._gone if row >= self._head):
            if row > start:
                runs.append((start, row))
            start = row + 1
        if start < self._n:
            runs.append((start, self._n))
        return runs

    def _index_base(self) -> list[list[int]]:
        rows_by_bookie: list[list[int]] = [[] for _ in self._bookies]
        members, offsets = self._members, self._offsets
        for row in range(self._n):
            for bookie_number in members[offsets[row]:offsets[row + 1]]:
                rows_by_bookie[bookie_number].append(row)
        return rows_by_bookie

    def _reindex(self, key: str, new: Iterable[str], old: Iterable[str]) -> None:
        new_set, old_set = set(new), set(old)
        index = self._recent_index
        for bookie in old_set - new_set:
            keys = index.get(bookie)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del index[bookie]
        for bookie in new_set - old_set:
            index.setdefault(bookie, set()).add(key)


__all__ = ["PACKED_FORMAT", "AuditEntry", "LedgerRegistry", "apply_verdict_row", "canonical_rule", "new_entry",
           "split_legacy_notes", "verdict_row"]
