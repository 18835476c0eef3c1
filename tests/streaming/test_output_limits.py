"""`streaming.output_limits`: every dead letter fits its sink, and says what was cut."""

import hashlib
import json

import pytest

from events import Origin, parse_record
from state.outputs import dead_letter
from streaming.output_limits import capped_dead_letter, deliverable, record_budget


def _letter(raw: str, cluster: str = ""):
    return dead_letter(parse_record(raw, Origin.from_kafka("requests", 0, 7)), cluster)


def test_a_dead_letter_that_fits_is_left_as_it_was():
    letter = _letter("{not json")
    assert capped_dead_letter(letter, 65_536, record_budget(1_000_000, None)) is letter


@pytest.mark.parametrize("raw", ["\x01" * 300_000, "é" * 300_000, "\U0001F600" * 100_000, "x" * 2_000_000])
def test_raw_keeps_a_prefix_within_the_cap_with_its_length_and_hash(raw):
    whole = _letter(raw)
    capped = capped_dead_letter(whole, 4096)
    record = json.loads(capped.to_json())
    assert capped.id == whole.id == record["id"], "the id stays the whole text's"
    assert raw.startswith(record["raw"]) and record["raw"]
    assert len(json.dumps(record["raw"])) <= 4096 < len(json.dumps(raw[:len(record["raw"]) + 1]))
    assert record["raw_truncated"] is True
    assert record["raw_length"] == len(raw.encode())
    assert record["raw_sha256"] == hashlib.sha256(raw.encode()).hexdigest()


def test_the_whole_record_fits_the_sink_budget_even_with_a_larger_cap():
    budget = record_budget(100_000, 60_000)
    capped = capped_dead_letter(_letter("\x01" * 300_000), 1_000_000, budget)
    assert len(capped.to_json()) <= budget


def test_an_over_long_cluster_key_is_dropped():
    [capped] = deliverable([_letter("{x", cluster="c" * 5000)], 65_536)
    assert capped.cluster == ""
