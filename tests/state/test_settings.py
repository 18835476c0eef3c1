"""ModelSettings: the engine's model keys, defaults, and errors that name the key."""

import dataclasses
import pickle

import pytest

from state import MODEL_KEYS, ModelSettings


def test_defaults():
    settings = ModelSettings.from_conf({})
    assert (settings.seed, settings.history_ttl_s, settings.flap_window_s, settings.flap_threshold) == (0, 86400, 60, 3)
    assert settings.placement.policy == "rackaware"


def test_values_may_be_strings_as_in_a_properties_file():
    settings = ModelSettings.from_conf({"engine.seed": " 42 ", "engine.bookieHistoryTtlSeconds": "10",
                                        "engine.flapWindowSeconds": "5", "engine.flapThreshold": "2"})
    assert (settings.seed, settings.history_ttl_s, settings.flap_window_s, settings.flap_threshold) == (42, 10, 5, 2)
    assert (settings.history_ttl_ms, settings.flap_window_ms) == (10_000, 5_000)


def test_the_future_skew_bound_defaults_to_a_day_and_zero_turns_it_off():
    assert ModelSettings.from_conf({}).max_future_skew_s == 86_400
    assert ModelSettings.from_conf({}).max_future_skew_ms == 86_400_000
    assert ModelSettings.from_conf({"engine.maxFutureSkewSeconds": "60"}).max_future_skew_ms == 60_000
    assert ModelSettings.from_conf({"engine.maxFutureSkewSeconds": "0"}).max_future_skew_ms is None
    assert "engine.maxFutureSkewSeconds" in MODEL_KEYS


def test_flap_window_defaults_to_the_stabilize_period_when_set():
    assert ModelSettings.from_conf({"networkTopologyStabilizePeriodSeconds": "30"}).flap_window_s == 30
    assert ModelSettings.from_conf({"networkTopologyStabilizePeriodSeconds": "0"}).flap_window_s == 60
    conf = {"networkTopologyStabilizePeriodSeconds": "30", "engine.flapWindowSeconds": "7"}
    assert ModelSettings.from_conf(conf).flap_window_s == 7


def test_settings_are_parsed_once_and_keep_no_raw_mapping():
    """The configuration is read once: changing the mapping afterwards changes no setting, and the
    settings carry no raw mapping for later code to read keys from."""
    conf = {"ensemblePlacementPolicy": "default", "engine.seed": 3}
    settings = ModelSettings.from_conf(conf)
    conf["engine.seed"] = 4
    conf["ensemblePlacementPolicy"] = "rackaware"
    assert (settings.seed, settings.placement.policy) == (3, "default")
    assert "conf" not in {f.name for f in dataclasses.fields(ModelSettings)}


def test_settings_pickle_for_spark_closures():
    settings = ModelSettings.from_conf({"engine.seed": "9"})
    assert pickle.loads(pickle.dumps(settings)) == settings


@pytest.mark.parametrize(("key", "value", "expected"), [
    ("engine.seed", "two", "an integer between"),
    ("engine.seed", True, "an integer between"),
    ("engine.seed", 2**64, "an integer between"),
    ("engine.bookieHistoryTtlSeconds", "-1", "an integer >= 0"),
    ("engine.flapWindowSeconds", "0", "an integer >= 1"),
    ("engine.flapThreshold", "0", "an integer >= 1"),
    ("engine.flapThreshold", 2.5, "an integer >= 1"),
    ("engine.maxFutureSkewSeconds", "-1", "an integer >= 0"),
    ("engine.maxFutureSkewSeconds", "1d", "an integer >= 0"),
])
def test_a_bad_value_names_the_key(key, value, expected):
    with pytest.raises(ValueError, match=key.replace(".", r"\.")) as info:
        ModelSettings.from_conf({key: value})
    assert expected in str(info.value)


def test_placement_keys_are_checked_too():
    with pytest.raises(ValueError, match="ensemblePlacementPolicy"):
        ModelSettings.from_conf({"ensemblePlacementPolicy": "nope"})


def test_model_keys_lists_every_key():
    assert set(MODEL_KEYS) >= {"engine.seed", "engine.bookieHistoryTtlSeconds", "engine.flapWindowSeconds",
                               "engine.flapThreshold"}
    assert all(key.startswith("engine.") for key in MODEL_KEYS)
