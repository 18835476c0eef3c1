"""`placement-engine check-conf` (streaming.check_conf): the report and its exit code. No Spark."""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from streaming.check_conf import add_parser, check_conf, duplicate_keys, startup_warnings
from streaming.config import ConfigError
from tests.recording import RecordingConf

ROOT = Path(__file__).resolve().parents[2]


def run(tmp_path: Path, conf_text: str, events: list[dict] | None = None, overrides=()) -> tuple[int, str]:
    conf = tmp_path / "test.properties"
    conf.write_text(conf_text, encoding="utf-8")
    paths = []
    if events is not None:
        log = tmp_path / "events.jsonl"
        log.write_text("".join(json.dumps(record) + "\n" for record in events), encoding="utf-8")
        paths.append(log)
    out = io.StringIO()
    code = check_conf(conf, overrides, paths, out=out)
    return code, out.getvalue()


def writable(i: int, location: str | None, cluster: str = "prod") -> dict:
    record = {"type": "bookie_writable", "cluster": cluster, "time": 1_795_316_400_000 + i, "bookie": f"bk{i}:3181"}
    if location is not None:
        record["location"] = location
    return record


TWO_RACKS = [writable(i, f"/rack{i % 2}") for i in range(6)]
ENFORCED_THREE = "minNumRacksPerWriteQuorum=3\nenforceMinNumRacksPerWriteQuorum=true\n"


@pytest.mark.parametrize("path", sorted((ROOT / "conf").glob("*.properties")), ids=lambda p: p.name)
def test_every_shipped_configuration_is_clean(path):
    out = io.StringIO()
    assert check_conf(path, out=out) == 0, out.getvalue()
    assert "0 error(s), 0 warning(s)" in out.getvalue()


def test_a_near_miss_key_is_an_error_that_names_the_known_key(tmp_path):
    code, text = run(tmp_path, "minNumRackPerWriteQuorum=3\n")
    assert code == 2
    assert "did you mean minNumRacksPerWriteQuorum?" in text


def test_a_key_the_policy_ignores_is_a_warning(tmp_path):
    code, text = run(tmp_path, "ensemblePlacementPolicy=rackaware\nreppRegionsToWrite=a;b\n")
    assert code == 1
    assert "warning  reppRegionsToWrite: the rackaware policy does not read it" in text


def test_a_key_set_twice_is_a_warning_naming_both_lines(tmp_path):
    code, text = run(tmp_path, "minNumRacksPerWriteQuorum=2\n# again\nminNumRacksPerWriteQuorum=3\n")
    assert code == 1
    assert "minNumRacksPerWriteQuorum: set on lines 1 and 3; only the last one applies" in text


def test_duplicate_keys_ignore_continued_lines_and_comments():
    assert duplicate_keys("a=1\\\n  a=2\n# a=3\nb=1\n") == []


def test_a_value_the_engine_refuses_is_an_error_and_the_topology_is_not_checked(tmp_path):
    code, text = run(tmp_path, "minNumRacksPerWriteQuorum=two\n", TWO_RACKS)
    assert code == 2
    assert "error    minNumRacksPerWriteQuorum: expected an integer" in text
    assert "topology not checked" in text


def test_an_engine_value_the_engine_refuses_is_an_error_naming_the_key(tmp_path):
    code, text = run(tmp_path, "engine.trigger.seconds=-1\n")
    assert code == 2
    assert "error    engine.trigger.seconds: expected a number of seconds >= 0" in text


def test_overrides_apply_before_the_lint(tmp_path):
    code, _ = run(tmp_path, "ensemblePlacementPolicy=rackaware\n", overrides=["reppRegionsToWrite=a;b"])
    assert code == 1


def test_the_topology_names_the_binding_constraint_of_each_shape(tmp_path):
    """Two racks, three racks per write quorum enforced: E=3, W=3 cannot be placed."""
    code, text = run(tmp_path, ENFORCED_THREE, TWO_RACKS)
    assert "racks     2: /rack0 (3), /rack1 (3)" in text
    assert "(2, 2, 2)   ok" in text
    assert "(3, 3, 2)   infeasible; binding: minNumRacksPerWriteQuorum" in text
    assert code == 0   # shapes nobody configured are information, not findings


def test_an_infeasible_configured_pulsar_shape_is_a_warning(tmp_path):
    conf = ENFORCED_THREE + "managedLedgerDefaultEnsembleSize=3\nmanagedLedgerDefaultWriteQuorum=3\n"
    code, text = run(tmp_path, conf, TWO_RACKS)
    assert code == 1
    assert "Pulsar's default ledger shape (3, 3, 2) is infeasible" in text


def test_region_aware_over_one_level_locations_warns(tmp_path):
    code, text = run(tmp_path, "ensemblePlacementPolicy=regionaware\n", TWO_RACKS)
    assert code == 1
    assert "6 bookie(s) have one-level locations" in text
    assert "falls back to random selection" in text


def test_region_aware_over_two_level_locations_is_clean(tmp_path):
    regional = [writable(i, f"/region{i % 2}/rack{i % 3}") for i in range(6)]
    code, text = run(tmp_path, "ensemblePlacementPolicy=regionaware\n", regional)
    assert code == 0, text
    assert "regions   2: region0 (3), region1 (3)" in text


def test_each_cluster_of_the_log_gets_its_own_section(tmp_path):
    events = [*TWO_RACKS, writable(9, "/rack9", cluster="test")]
    _, text = run(tmp_path, "", events)
    assert "cluster prod, policy rackaware" in text
    assert "cluster test, policy rackaware" in text


def test_a_missing_file_or_events_path_is_a_configuration_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot read the configuration file"):
        check_conf(tmp_path / "missing.properties", out=io.StringIO())
    conf = tmp_path / "ok.properties"
    conf.write_text("", encoding="utf-8")
    with pytest.raises(ConfigError, match="no such file or folder"):
        check_conf(conf, events=[tmp_path / "missing.jsonl"], out=io.StringIO())


def test_the_subcommand_parses_its_arguments_and_returns_the_exit_code(tmp_path, capsys):
    conf = tmp_path / "typo.properties"
    conf.write_text("enforceMinNumRackPerWriteQuorum=true\n", encoding="utf-8")
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["check-conf", "--conf", str(conf)])
    assert args.func(args) == 2
    assert "did you mean enforceMinNumRacksPerWriteQuorum?" in capsys.readouterr().out


def test_startup_warnings_carry_warnings_and_errors_but_not_notes():
    lines = startup_warnings({"minNumRackPerWriteQuorum": "3", "zkServers": "zk:2181",
                              "ensemblePlacementPolicy": "rackaware", "reppRegionsToWrite": "a;b"})
    assert any(line.startswith("error: minNumRackPerWriteQuorum:") for line in lines)
    assert any(line.startswith("warning: reppRegionsToWrite:") for line in lines)
    assert not any("zkServers" in line for line in lines)
    lines = startup_warnings({"ensemblePlacementPolicy": "regionaware", "localNodeLocation": "/rack1"})
    assert len(lines) == 1
    assert lines[0].startswith("warning: localNodeLocation:") and "one-level location (/rack1)" in lines[0]


def test_the_console_command_exits_with_the_lint_code(tmp_path):
    conf = tmp_path / "typo.properties"
    conf.write_text("minNumRackPerWriteQuorum=3\n", encoding="utf-8")
    command = [sys.executable, "-m", "streaming.cli", "check-conf", "--conf", str(conf)]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 2, result.stderr
    assert "did you mean minNumRacksPerWriteQuorum?" in result.stdout
    missing = subprocess.run([*command[:-1], str(tmp_path / "missing.properties")], cwd=ROOT, capture_output=True,
                             text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert missing.returncode == 2
    assert "missing.properties" in missing.stderr


def test_every_engine_key_the_settings_read_is_known_to_the_lint():
    """A new engine.* key read by the streaming or model settings is never reported as unknown."""
    from streaming.check_conf import ENGINE_KEYS
    from streaming.settings import EngineSettings

    conf = RecordingConf()
    EngineSettings.from_conf(conf)
    engine_read = {key for key in conf.read if key.startswith("engine.")}
    assert engine_read
    assert engine_read <= ENGINE_KEYS
