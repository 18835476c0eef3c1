"""The README tells the truth: its commands, examples and key tables match the code."""

import json
import re
from pathlib import Path

from events import DeadLetter, Origin, parse_record
from policies.settings import PlacementSettings
from state.settings import MODEL_KEYS
from streaming.settings import DEFAULTS

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _bash_blocks() -> list[str]:
    return re.findall(r"```bash\n(.*?)```", README, flags=re.S)


def test_readme_opens_with_the_demo_and_the_ci_test_command():
    blocks = _bash_blocks()
    assert "placement-engine demo" in blocks[0]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()[-1]
    assert blocks[1].strip() == ci


def test_every_input_example_is_a_valid_record():
    section = README.split("## Input records", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \| `(\{.*?\})`", section, flags=re.M)
    assert {kind for kind, _ in rows} == {"bookie_writable", "bookie_readonly", "bookie_lost", "bookie_location",
                                          "bookie_disk", "cluster_view", "feature", "ledger_create",
                                          "bookie_replace", "ensemble_check"}
    for kind, text in rows:
        record = parse_record(text, Origin.inline("README"))
        assert not isinstance(record, DeadLetter), (kind, record)
        assert record.type == kind == json.loads(text)["type"]


def test_the_python_example_runs():
    code = README.split("The placement core can be used on its own", 1)[1]
    code = re.search(r"```python\n(.*?)```", code, flags=re.S).group(1)
    exec(compile(code.replace("print(", "(lambda *a: a)("), "README", "exec"), {})  # noqa: S102 - the README's own example


def test_every_engine_key_is_documented_with_its_default():
    section = README.split("### Engine keys", 1)[1].split("\n## ", 1)[0]
    documented = dict(re.findall(r"^\| `([\w.<>]+)` \| ([^|]*) \|", section, flags=re.M))
    for key, default in DEFAULTS.items():
        assert key in documented, key
        shown = documented[key].strip().strip("`")
        assert shown == default or (not default and ("none" in shown or "unset" in shown)), (key, shown)
    for key in MODEL_KEYS:
        assert key in documented, key


def test_every_placement_key_is_documented():
    section = README.split("### Placement keys", 1)[1].split("### Engine keys", 1)[0]
    for key in ("ensemblePlacementPolicy", "localNodeLocation", "minNumRacksPerWriteQuorum",
                "enforceMinNumRacksPerWriteQuorum", "networkTopologyStabilizePeriodSeconds",
                "diskWeightBasedPlacementEnabled", "bookieMaxMultipleForWeightBasedPlacement",
                "reppRegionsToWrite", "reppMinimumRegionsForDurability", "minNumZonesPerWriteQuorum",
                "desiredNumZonesPerWriteQuorum", "enforceStrictZoneawarePlacement",
                "bookkeeperClientIsolationGroups", "bookkeeperClientSecondaryIsolationGroups",
                "placement.compat.keepStaleReadOnlySet", "placement.isolation.failClosed"):
        assert f"`{key}`" in section, key
    assert PlacementSettings.from_conf({}).min_racks_per_write_quorum == 2


def _json_examples(section: str) -> list[dict]:
    return [json.loads(block) for block in re.findall(r"```json\n(\{.*?\})\n```", section, flags=re.S)]


def test_the_decision_example_has_every_field_and_every_always_present_explain_key():
    outputs = README.split("## Outputs", 1)[1].split("\n## ", 1)[0]
    decision = _json_examples(outputs.split("**Decisions**", 1)[1])[0]
    assert set(decision) == {"id", "request_id", "cluster", "ledger_id", "type", "status", "ensemble", "bookie",
                             "adherence", "error", "policy", "time", "topology_version", "explain"}
    table = outputs.split("**`explain`**", 1)[1].split("```json", 1)[0]
    always = {key for key, present in re.findall(r"^\| `(\w+)` \| ([^|]*) \|", table, flags=re.M)
              if present.strip() == "always"}
    assert always == {"policy", "topology_version", "steps", "excluded", "fallbacks"}
    assert always | {"bookies"} <= set(decision["explain"]), "an ok decision also carries `bookies`"


def test_every_dead_letter_code_the_readme_names_exists():
    from events import Reason

    outputs = README.split("**Dead letters**", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`([A-Z][A-Z_]+)`", outputs))
    assert named and named <= {reason.name for reason in Reason}, named - {reason.name for reason in Reason}


def _documented_defaults(section: str) -> dict[str, str]:
    """`key` -> its default, for the rows whose default is one literal value in backticks."""
    rows = re.findall(r"^\| `([\w.]+)`[^|]* \| `([^`|]*)` \|", section, flags=re.M)
    return dict(rows)


def test_every_key_set_to_its_documented_default_changes_nothing():
    from state.settings import ModelSettings
    from streaming.settings import EngineSettings

    placement = README.split("### Placement keys", 1)[1].split("### Engine keys", 1)[0]
    engine = README.split("### Engine keys", 1)[1].split("\n## ", 1)[0]
    defaults = _documented_defaults(placement)
    assert len(defaults) >= 20, defaults
    for key, value in defaults.items():
        assert PlacementSettings.from_conf({key: value}) == PlacementSettings.from_conf({}), (key, value)
    defaults = _documented_defaults(engine)
    assert len(defaults) >= 20, defaults
    for key, value in defaults.items():
        conf = {key: value}
        assert EngineSettings.from_conf(conf, frozenset(MODEL_KEYS)) == EngineSettings.from_conf({}), (key, value)
        assert ModelSettings.from_conf(conf) == ModelSettings.from_conf({}), (key, value)
