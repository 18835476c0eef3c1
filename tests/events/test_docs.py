"""docs/events.md stays accurate: its examples parse as documented, and its tables match the code."""

from __future__ import annotations

import json
import re
from pathlib import Path

from events import (
    MAX_CLUSTER_CHARS,
    MAX_ENSEMBLE_SIZE,
    MAX_EXCLUDE,
    MAX_METADATA_ENTRIES,
    MAX_METADATA_VALUE_BYTES,
    MAX_RECORD_BYTES,
    MAX_STRING_CHARS,
    MAX_VIEW_BOOKIES,
    RECORD_CLASSES,
    DeadLetter,
    Origin,
    Reason,
    parse_record,
)

DOC = (Path(__file__).resolve().parents[2] / "docs" / "events.md").read_text(encoding="utf-8")
JSON_BLOCKS = [json.loads(block) for block in re.findall(r"```json\n(.*?)```", DOC, re.DOTALL)]


def test_every_record_example_parses_to_its_type():
    examples = [block for block in JSON_BLOCKS if "raw" not in block]
    assert {block["type"] for block in examples} == set(RECORD_CLASSES)
    for block in examples:
        rec = parse_record(block)
        assert not isinstance(rec, DeadLetter), rec.detail
        assert type(rec) is RECORD_CLASSES[block["type"]]


def test_dead_letter_example_is_what_the_code_writes():
    (example,) = [block for block in JSON_BLOCKS if "raw" in block]
    source = example["source"]
    assert parse_record(example["raw"], Origin.from_file(source["file"], source["line"])).to_record() == example


def test_reason_table_lists_every_code():
    table = DOC.split("### Reason codes", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^\| `([A-Z_]+)` \|", table, re.MULTILINE))
    assert documented == {reason.name for reason in Reason}


def test_limits_table_matches_the_constants():
    for name, value in [
        ("MAX_RECORD_BYTES", MAX_RECORD_BYTES),
        ("MAX_CLUSTER_CHARS", MAX_CLUSTER_CHARS),
        ("MAX_STRING_CHARS", MAX_STRING_CHARS),
        ("MAX_ENSEMBLE_SIZE", MAX_ENSEMBLE_SIZE),
        ("MAX_EXCLUDE", MAX_EXCLUDE),
        ("MAX_VIEW_BOOKIES", MAX_VIEW_BOOKIES),
        ("MAX_METADATA_ENTRIES", MAX_METADATA_ENTRIES),
        ("MAX_METADATA_VALUE_BYTES", MAX_METADATA_VALUE_BYTES),
    ]:
        assert f"| `{name}` | {value:,} |" in DOC, name
