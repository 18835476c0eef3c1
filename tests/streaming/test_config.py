"""Configuration files and start-up errors: every problem names its key, before Spark starts."""

from pathlib import Path

import pytest

from policies import create_policy
from state.settings import ModelSettings
from streaming.cli import main
from streaming.config import ConfigError, load_conf, parse_properties
from streaming.settings import DEFAULTS, EngineSettings, engine_settings

CONF_DIR = Path(__file__).resolve().parents[2] / "conf"


def test_properties_syntax():
    text = "# comment\n! other comment\n\na=1\nb : two\nc= x=y \nlong=one\\\n  two\n"
    assert parse_properties(text) == {"a": "1", "b": "two", "c": "x=y", "long": "onetwo"}


def test_a_line_without_a_key_is_an_error_naming_the_line():
    with pytest.raises(ConfigError, match=":2:"):
        parse_properties("a=1\njust words\n", "x.properties")


def test_set_overrides_the_file(tmp_path):
    path = tmp_path / "c.properties"
    path.write_text("minNumRacksPerWriteQuorum=2\n")
    assert load_conf(path, ["minNumRacksPerWriteQuorum=3"])["minNumRacksPerWriteQuorum"] == "3"
    with pytest.raises(ConfigError, match="--set"):
        load_conf(path, ["novalue"])


def test_missing_conf_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_conf(tmp_path / "absent.properties")


def test_engine_properties_lists_every_engine_key_with_its_default():
    listed = {}
    for line in (CONF_DIR / "engine.properties").read_text().splitlines():
        if line.startswith("#") and "=" in line and not line.startswith("# "):
            key, _, value = line[1:].partition("=")
            listed[key.strip()] = value.strip()
    for key, default in DEFAULTS.items():
        assert key in listed, f"{key} missing from conf/engine.properties"
        assert listed[key] == default, f"{key}: documented {listed[key]!r}, code says {default!r}"


SHIPPED_POLICIES = {"diskweighted": "rackaware", "engine": "rackaware", "isolated": "isolated",
                    "rackaware": "rackaware", "regionaware": "regionaware", "zoneaware": "zoneaware"}
POLICY_CLASSES = {"rackaware": "RackawarePolicy", "regionaware": "RegionawarePolicy",
                  "zoneaware": "ZoneawarePolicy", "isolated": "IsolatedPolicy"}


@pytest.mark.parametrize("name", sorted(p.name for p in CONF_DIR.glob("*.properties")))
def test_every_shipped_config_parses_and_builds_the_policy_it_names(name):
    """Each file in conf/ parses into settings whose model runs the policy the file is named for,
    and the policy built from it is that policy's class."""
    conf = load_conf(CONF_DIR / name)
    settings = engine_settings(conf)
    expected = SHIPPED_POLICIES[name.removesuffix(".properties")]
    assert settings.model.placement.policy == expected
    assert settings.model == ModelSettings.from_conf(conf)
    policy = create_policy({k: v for k, v in conf.items() if not k.startswith("engine.")})
    assert type(policy).__name__ == POLICY_CLASSES[expected]


def test_the_shipped_disk_weighted_config_turns_disk_weights_on():
    assert engine_settings(load_conf(CONF_DIR / "diskweighted.properties")).model.placement.disk_weighted
    assert not engine_settings(load_conf(CONF_DIR / "rackaware.properties")).model.placement.disk_weighted


def test_unknown_engine_key_is_rejected():
    with pytest.raises(ConfigError, match="engine.shardPerCluster"):
        EngineSettings.from_conf({"engine.shardPerCluster": "2"})


@pytest.mark.parametrize("key, value", [("engine.shardsPerCluster", "0"), ("engine.trigger.seconds", "soon"),
                                        ("engine.kafka.connector", "jdbc"), ("engine.spark.shufflePartitions", "x"),
                                        ("engine.stopGraceSeconds", "-1")])
def test_bad_engine_values_name_the_key(key, value):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        EngineSettings.from_conf({key: value})


def test_the_stop_grace_period_is_read_from_its_key():
    assert EngineSettings.from_conf({}).stop_grace_seconds == 20
    assert EngineSettings.from_conf({"engine.stopGraceSeconds": "5"}).stop_grace_seconds == 5


def test_run_requires_a_broker_and_a_checkpoint(capsys, tmp_path):
    conf = tmp_path / "run.properties"
    conf.write_text("ensemblePlacementPolicy=rackaware\n")
    assert main(["run", "--conf", str(conf)]) == 2
    assert "engine.kafka.bootstrapServers" in capsys.readouterr().err
    assert main(["run", "--conf", str(conf), "--set", "engine.kafka.bootstrapServers=127.0.0.1:1"]) == 2
    assert "engine.checkpointLocation" in capsys.readouterr().err


@pytest.mark.parametrize("override, key", [
    ("engine.bogus=1", "engine.bogus"),
    ("minNumRacksPerWriteQuorum=two", "minNumRacksPerWriteQuorum"),
    ("ensemblePlacementPolicy=nope", "ensemblePlacementPolicy"),
    ("engine.seed=abc", "engine.seed"),
])
def test_replay_config_errors_stop_before_spark_with_the_key(capsys, tmp_path, override, key):
    events = tmp_path / "e.jsonl"
    events.write_text("")
    code = main(["replay", "--conf", str(CONF_DIR / "rackaware.properties"), "--events", str(events),
                 "--out", str(tmp_path / "out"), "--set", override])
    err = capsys.readouterr().err
    assert code == 2
    assert key in err and "Traceback" not in err


def test_an_interrupted_command_says_so_in_one_line_and_exits_130(monkeypatch, capsys):
    import streaming.cli as cli

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "cmd_demo", interrupted)
    assert main(["demo"]) == 130
    err = capsys.readouterr().err
    assert err.strip() == "placement-engine: demo interrupted; anything it was writing is incomplete"


def test_the_settings_defaults_are_the_documented_defaults():
    # EngineSettings() once said 50,000 records per replay trigger while DEFAULTS (and the README) say 200,000.
    assert EngineSettings() == EngineSettings.from_conf({})


def test_engine_settings_hold_the_model_settings_and_the_policy_and_seed_as_written():
    conf = {"ensemblePlacementPolicy": "org.apache.bookkeeper.client.RackawareEnsemblePlacementPolicy",
            "engine.seed": "07", "engine.flapThreshold": "5"}
    settings = engine_settings(conf)
    assert settings.model == ModelSettings.from_conf(conf)
    assert (settings.model.seed, settings.model.flap_threshold) == (7, 5)
    assert (settings.configured_policy, settings.configured_seed) == (conf["ensemblePlacementPolicy"], "07")
    with pytest.raises(ConfigError, match="engine.flapThreshold"):
        engine_settings({"engine.flapThreshold": "0"})
