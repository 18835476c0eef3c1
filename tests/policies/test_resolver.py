"""Bookie locations: caller mapping (whole id, then host), then Pulsar rack info, else unmapped."""

import pytest

from policies.errors import InvalidLocationError
from policies.resolver import LocationResolver, pulsar_rack


def test_mapping_by_whole_id_then_host():
    r = LocationResolver({"bk1:3181": "/r1", "bk2": "/r2"})
    assert r.resolve("bk1:3181") == "/r1"
    assert r.resolve("bk2:3181") == "/r2"
    assert r.resolve("bk3:3181") is None


def test_mapping_is_read_live_so_callers_can_change_it():
    mapping = {"bk1:3181": "/r1"}
    r = LocationResolver(mapping)
    mapping["bk1:3181"] = "/r9"
    assert r.resolve("bk1:3181") == "/r9"


@pytest.mark.parametrize("answer", ["", "/", "rack1"])
def test_unusable_mapping_answers_fail_instead_of_defaulting(answer):
    with pytest.raises(InvalidLocationError):
        LocationResolver({"bk1:3181": answer}).resolve("bk1:3181")


def test_trailing_slash_is_normalised():
    assert LocationResolver({"bk1:3181": "/r1/"}).resolve("bk1:3181") == "/r1"


@pytest.mark.parametrize("rack, expected", [("rack0", "/rack0"), ("/rack0", "/rack0"),
                                            ("region1/rack1", "/region1/rack1"), ("", None), ("/", None),
                                            (None, None), (" / ", None), ("  ", "/  "), (" rack0", "/ rack0")])
def test_rack_info_racks_are_read_as_pulsar_reads_them(rack, expected):
    assert pulsar_rack(rack) == expected


def test_rack_info_gives_locations_and_groups():
    info = {"g1": {"bk1:3181": {"rack": "rack1", "hostname": "bk1.example"}},
            "g2": {"bk2:3181": {"rack": "/rack2"}, "bk1:3181": {"rack": "rack3"}}}
    r = LocationResolver(None, info)
    # A bookie listed in several groups takes the rack of the last group in name order.
    assert r.resolve("bk1:3181") == "/rack3"
    assert r.resolve("bk2:3181") == "/rack2"
    assert r.groups_of("bk1:3181") == ("g1", "g2")
    assert r.group_members() == {"g1": ("bk1:3181",), "g2": ("bk1:3181", "bk2:3181")}


def test_mapping_wins_over_rack_info():
    r = LocationResolver({"bk1:3181": "/mapped"}, {"g": {"bk1:3181": {"rack": "/info"}}})
    assert r.resolve("bk1:3181") == "/mapped"


def test_update_rack_info_reports_every_bookie_before_and_after():
    r = LocationResolver(None, {"g": {"a:1": {"rack": "/r1"}}})
    assert r.update_rack_info({"g": {"b:1": {"rack": "/r2"}}}) == {"a:1", "b:1"}
    assert r.resolve("a:1") is None


def test_malformed_rack_info_is_rejected():
    with pytest.raises(ValueError, match="rack_info"):
        LocationResolver(None, {"g": {"a:1": "rack1"}})
