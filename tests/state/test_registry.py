"""The audit's ledger registry behaves as an ordered mapping indexed by bookie, whether its entries were
added live or read back from a packed snapshot, and packing it loses nothing.

The registry keeps a loaded snapshot in columns and builds an entry only when it is read; these tests
drive it with random operations next to a plain `OrderedDict` and compare everything a caller can see
after every step, packing and unpacking (through JSON, as the snapshot does) at random points.
"""

import base64
import json
import random
import zlib
from array import array
from collections import OrderedDict

import pytest

from state.audit import ALERT_LEDGER_NOT_ADHERING, ALERT_LEDGER_RE_ADHERE, LedgerAudit
from state.registry import AuditEntry, LedgerRegistry
from tests.state.helpers import format_1, v2_audit

BOOKIES = [f"b{n}:3181" for n in range(9)]
FIELDS = ("key", "ledger_id", "request_id", "ensemble", "write_quorum", "ack_quorum", "seen_ms", "relaxed",
          "rules", "adhering", "adherence", "fix_known", "open")


def fields_of(entry):
    return tuple(getattr(entry, name) for name in FIELDS)


def through_json(registry, waiting=()):
    """Pack, send through JSON, unpack into a fresh registry (what a snapshot round trip does)."""
    packed = json.loads(json.dumps(registry.pack(waiting)))
    copy = LedgerRegistry()
    return copy, copy.unpack(packed)


def assert_same(registry, reference):
    assert len(registry) == len(reference) and bool(registry) == bool(reference)
    assert registry.keys() == list(reference)
    assert [fields_of(entry) for entry in registry.values()] == [fields_of(entry) for entry in reference.values()]
    expected = {}
    for key, entry in reference.items():
        for bookie in entry.ensemble:
            expected.setdefault(bookie, set()).add(key)
    assert registry.bookie_index() == expected
    for bookie in BOOKIES:
        assert registry.keys_on(bookie) == expected.get(bookie, set())
    oldest = next(iter(reference.values()), None)
    assert registry.oldest_seen_ms() == (oldest.seen_ms if oldest else None)
    assert (fields_of(registry.oldest()) if oldest else None) == (fields_of(oldest) if oldest else None)


def new_random_entry(rng, number, time_ms):
    ledger_id = None if rng.random() < 0.2 else number
    ensemble = tuple(rng.sample(BOOKIES, rng.randint(1, 4)))
    key = f"ledger/{ledger_id}" if ledger_id is not None else f"request/req \"{number}\"\n"
    return AuditEntry(key=key, ledger_id=ledger_id, request_id=f"req \"{number}\"\n", ensemble=ensemble,
                      write_quorum=rng.randint(1, len(ensemble)), ack_quorum=1, seen_ms=time_ms,
                      adhering=True, adherence="MEETS_STRICT")


def copy_entry(entry):
    return AuditEntry(*(dict(value) if isinstance(value, dict) else value for value in fields_of(entry)))


@pytest.mark.parametrize("seed", range(12))
def test_random_operations_give_what_an_ordered_dict_gives_across_pack_and_unpack(seed):
    rng = random.Random(seed)
    registry, reference = LedgerRegistry(), OrderedDict()
    time_ms = 1_000
    for number in range(400):
        time_ms += rng.randint(0, 3)
        operation = rng.random()
        keys = list(reference)
        if operation < 0.4 or not keys:
            entry = new_random_entry(rng, number, time_ms)
            if entry.key not in reference:
                registry.add(entry)
                reference[entry.key] = copy_entry(entry)
        elif operation < 0.55:
            key = rng.choice(keys)
            ensemble = reference[key].ensemble if rng.random() < 0.3 else tuple(rng.sample(BOOKIES, 3))
            entry = registry[key]
            registry.refresh(entry, ensemble)
            entry.seen_ms = time_ms
            reference.move_to_end(key)
            reference[key].ensemble, reference[key].seen_ms = ensemble, time_ms
        elif operation < 0.65:
            key = keys[0] if rng.random() < 0.7 else rng.choice(keys)
            registry.remove(key)
            del reference[key]
        elif operation < 0.85:
            key = rng.choice(keys)
            entry = registry.get(key)
            verdict = rng.choice([
                (False, "FAIL", (), (), False, {ALERT_LEDGER_NOT_ADHERING: f"id-{number}"}),
                (True, "MEETS_SOFT", ("adherence MEETS_SOFT",), ({"rule": "racks", "spanned": 2},), True,
                 {ALERT_LEDGER_RE_ADHERE: f"id-{number}"}),
                (True, "MEETS_STRICT", (), (), False, {}),
            ])
            for target in (entry, reference[key]):
                (target.adhering, target.adherence, target.relaxed, target.rules, target.fix_known,
                 target.open) = verdict[0], verdict[1], verdict[2], verdict[3], verdict[4], dict(verdict[5])
        elif operation < 0.93:
            waiting = {key for key in keys if rng.random() < 0.2}
            registry, restored_waiting = through_json(registry, waiting)
            assert restored_waiting == waiting
        else:
            registry.pack()                       # packing in place keeps the registry as it was
        assert_same(registry, reference)


def test_packing_an_unchanged_registry_gives_the_same_packed_form():
    rng = random.Random(7)
    registry = LedgerRegistry()
    for number in range(50):
        registry.add(new_random_entry(rng, number, 1_000 + number))
    registry["ledger/3"].open = {ALERT_LEDGER_NOT_ADHERING: "x"}
    first = registry.pack({"ledger/3"})
    copy = LedgerRegistry()
    waiting = copy.unpack(json.loads(json.dumps(first)))
    assert copy.pack(waiting) == first
    assert copy.get("ledger/3").open == {ALERT_LEDGER_NOT_ADHERING: "x"}
    assert copy.pack(waiting) == first, "reading an entry changes nothing that is stored"


def test_a_bookie_that_left_every_ledger_leaves_the_packed_bookie_list():
    registry = LedgerRegistry()
    registry.add(AuditEntry("ledger/1", 1, "r1", ("a", "b"), 2, 2, 10))
    registry.add(AuditEntry("ledger/2", 2, "r2", ("b", "c"), 2, 2, 11))
    assert registry.pack()["bookies"] == ["a", "b", "c"]
    registry.remove("ledger/1")
    packed = registry.pack()
    assert packed["bookies"] == ["b", "c"]
    copy = LedgerRegistry()
    copy.unpack(packed)
    assert [entry.ensemble for entry in copy.values()] == [("b", "c")]
    assert copy.keys_on("a") == set() and copy.keys_on("c") == {"ledger/2"}


def test_reading_a_loaded_registry_builds_only_the_entries_read():
    registry = LedgerRegistry()
    for number in range(1_000):
        registry.add(AuditEntry(f"ledger/{number}", number, f"r{number}", (BOOKIES[number % 9],), 1, 1, number))
    copy = LedgerRegistry()
    copy.unpack(registry.pack())
    assert copy.get("ledger/500").request_id == "r500" and copy.oldest().key == "ledger/0"
    assert "ledger/999" in copy and "ledger/1000" not in copy and "ledger/x" not in copy
    assert copy.keys_on(BOOKIES[0]) == {f"ledger/{n}" for n in range(0, 1_000, 9)}
    assert len(copy._live) == 2, "only the two entries read were built"  # noqa: SLF001


def test_a_registry_stored_by_the_previous_format_loads_and_stores_in_the_current_one():
    rng = random.Random(11)
    registry = LedgerRegistry()
    for number in range(300):
        entry = new_random_entry(rng, number, 5_000 + 3 * number)
        if number % 7 == 0:
            entry.adhering, entry.adherence, entry.relaxed = False, "FAIL", ("adherence FAIL",)
        registry.add(entry)
    waiting = {registry.keys()[14]}
    packed = json.loads(json.dumps(registry.pack(waiting)))
    old = format_1(packed)
    assert old["ledger_ids"].startswith("q:") and len(old["extra"]) == 43 and len(packed["extra"]) == 1
    copy = LedgerRegistry()
    assert copy.unpack(json.loads(json.dumps(old))) == waiting
    assert [fields_of(entry) for entry in copy.values()] == [fields_of(entry) for entry in registry.values()]
    assert copy.pack(waiting) == packed


@pytest.mark.parametrize("ledger_ids", [
    [0, 1, 2, 3],                                        # consecutive: one-byte differences
    [-1, 2**63 - 1, -1, 7],                              # differences wrap around in 64 bits
    [2**40, 2**40 + 70_000, 5, -(2**63)],
    [12],
    [],
])
def test_columns_read_back_exactly_whatever_width_they_are_stored_in(ledger_ids):
    registry = LedgerRegistry()
    for row, ledger_id in enumerate(ledger_ids):
        registry.add(AuditEntry(f"ledger/{ledger_id}", ledger_id, f"r{row}", tuple(BOOKIES[:1 + row % 4]), 1, 1,
                                [0, 2**62, -5, 10**15][row % 4]))
    packed = json.loads(json.dumps(registry.pack()))
    copy = LedgerRegistry()
    copy.unpack(packed)
    assert [fields_of(entry) for entry in copy.values()] == [fields_of(entry) for entry in registry.values()]


def test_a_column_is_stored_in_the_narrowest_width_that_holds_it():
    from state.registry import _encode

    assert _encode(array("i", [0, 127, -128])).startswith("i1:")
    assert _encode(array("i", [0, 128])).startswith("i2:")
    assert _encode(array("i", [0, 40_000])).startswith("i4:")
    assert _encode(array("q", [0, 2**31])).startswith("i8:")
    assert _encode(array("q", [1_000, 1_001, 1_003]), delta=True).startswith("D1000,i1:")


def test_a_busy_registry_is_stored_far_smaller_than_in_the_previous_format():
    """Sequential ledger ids, times a few ms apart, ensembles of a small cluster: the narrowed and
    delta-coded columns compress to less than two thirds of the full-width ones."""
    rng = random.Random(3)
    registry = LedgerRegistry()
    for number in range(20_000):
        registry.add(AuditEntry(f"ledger/{number}", number, f"r{number}", tuple(rng.sample(BOOKIES, 3)), 3, 2,
                                1_763_000_000_000 + 4 * number))
    packed = registry.pack()
    current = len(zlib.compress(json.dumps(packed).encode(), 1))
    previous = len(zlib.compress(json.dumps(format_1(packed)).encode(), 1))
    assert current < 0.67 * previous


@pytest.mark.parametrize(("column", "text", "reason"), [
    ("seen_ms", "i:AAAAAA==", "typecode 'i', expected 'q'"),          # format 1, the wrong width
    ("sizes", "i3:AAAA", "unknown width 'i3'"),
    ("ledger_ids", f"D{2**64},i1:AA==", "beyond 64 bits"),
    ("sizes", "i8:" + base64.b64encode((2**40).to_bytes(8, "little")).decode(), "beyond typecode 'i'"),
])
def test_a_column_that_cannot_be_read_is_refused_with_the_reason(column, text, reason):
    registry = LedgerRegistry()
    registry.add(AuditEntry("ledger/1", 1, "r1", ("a",), 1, 1, 10))
    packed = registry.pack()
    packed[column] = text
    with pytest.raises(ValueError, match=reason):
        LedgerRegistry().unpack(packed)


def test_the_audit_reads_the_list_columns_of_older_engines():
    audit = LedgerAudit("c1")
    entries = [AuditEntry("ledger/1", 1, "r1", ("a", "b"), 2, 2, 10),
               AuditEntry("request/r2", None, "r2", ("b", "c"), 2, 1, 11, ("adherence FAIL",), (),
                          False, "FAIL", False, {ALERT_LEDGER_NOT_ADHERING: "id"})]
    for entry in entries:
        audit.entries.add(entry)
    audit.waiting.add("request/r2")
    packed = audit.export_state()
    older = LedgerAudit("c1")
    older.import_state(v2_audit(packed))
    assert [fields_of(entry) for entry in older.entries.values()] == [fields_of(entry) for entry in entries]
    assert older.waiting == {"request/r2"}
    assert older.export_state() == packed


def test_a_loaded_registry_builds_its_lookup_by_ledger_id_only_when_an_older_id_is_looked_up():
    registry = LedgerRegistry()
    for number in range(100):
        registry.add(AuditEntry(f"ledger/{number}", number, f"r{number}", ("a", "b"), 2, 2, number))
    registry.add(AuditEntry("request/q", None, "q", ("a", "b"), 2, 2, 100))
    copy = LedgerRegistry()
    copy.unpack(registry.pack())
    copy.pack()                                          # stored again without a lookup
    assert "ledger/100" not in copy and copy.get("ledger/5000") is None
    assert copy._row_of_ledger is None, "ids above every stored one need no lookup"  # noqa: SLF001
    assert copy.get("ledger/42").request_id == "r42" and "ledger/99" in copy and "ledger/-1" not in copy
    assert copy.get("request/q").ledger_id is None and "request/r5" not in copy


def test_verdicts_that_orjson_writes_differently_or_refuses_survive_a_pack():
    """Verdict texts are orjson's, `json`'s where orjson refuses the row: both read back alike."""
    registry = LedgerRegistry()
    verdicts = {
        "ledger/1": (("rack “north” was down",), ({"rule": "racks", "spanned": 2},)),   # non-ASCII: raw UTF-8
        "ledger/2": (("bookie b\ud800 was down",), ()),                                # lone surrogate: json
        "ledger/3": ((), ({"rule": "zones", "spanned": 2**70},)),                       # beyond 64 bits: json
    }
    for number, (key, (relaxed, rules)) in enumerate(verdicts.items(), 1):
        entry = AuditEntry(key, number, f"r{number}", ("a", "b"), 2, 2, 10 + number)
        entry.relaxed, entry.rules, entry.adhering, entry.adherence = relaxed, rules, True, "MEETS_SOFT"
        registry.add(entry)
    copy, _ = through_json(registry)
    for key, (relaxed, rules) in verdicts.items():
        read = copy.get(key)
        assert (read.relaxed, read.rules, read.adherence, read.adhering) == (relaxed, rules, "MEETS_SOFT", True)
