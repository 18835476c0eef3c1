"""Bookie locations: caller mapping (whole id, then host), then Pulsar rack info, else unmapped."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

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


# Bookies sharing hosts (h1, h2) and host names, so entries compete for the same host keys; and two
# ids that are not valid bookie ids (the isolation policy refuses rack info listing them).
_BOOKIES = ("h1:1", "h1:2", "h2:1", "h3:1", "h3", "h1:bad id", "readonly")
_ENTRY = st.fixed_dictionaries({"rack": st.sampled_from(["/r1", "r2", "/", "", "/a/b"]),
                                "hostname": st.sampled_from([None, "", "h1", "h3", "name"])})
_LISTING = st.dictionaries(st.sampled_from(["g1", "g2", "g3"]), _ENTRY, max_size=2)


def _whole(listings):
    """bookie -> {group: entry} as whole rack info {group: {bookie: entry}}."""
    info = {}
    for bookie, listing in listings.items():
        for group, entry in listing.items():
            info.setdefault(group, {})[bookie] = entry
    return info


@given(first=st.dictionaries(st.sampled_from(_BOOKIES), _LISTING),
       changes=st.lists(st.dictionaries(st.sampled_from(_BOOKIES), _LISTING, min_size=1, max_size=3), max_size=6))
def test_updating_some_entries_is_updating_the_whole_rack_info_so_changed(first, changes):
    """`update_rack_entries` leaves the resolver as `update_rack_info` with the whole new rack info
    would: same indexes (the last group's rack per bookie, the last entry's rack per host), same
    answers, the same invalid ids, and it reports whether group membership changed."""
    listings = {b: listing for b, listing in first.items() if listing}
    resolver = LocationResolver({"h3": "/mapped"}, _whole(listings))
    resolver.invalid_members()      # indexed from now on, kept up to date by each update
    for change in changes:
        before = {b: resolver.groups_of(b) for b in _BOOKIES}
        membership_changed = resolver.update_rack_entries(change)
        listings = {**listings, **change}
        listings = {b: listing for b, listing in listings.items() if listing}
        whole = LocationResolver({"h3": "/mapped"}, _whole(listings))
        resolver.check_invariants()
        assert resolver.rack_info == whole.rack_info
        assert resolver.group_members() == whole.group_members()
        assert resolver.invalid_members() == whole.invalid_members()
        for bookie in (*_BOOKIES, "h1:9", "h2:9", "name:1", "h3:9"):
            assert resolver.resolve(bookie) == whole.resolve(bookie), bookie
            assert resolver.groups_of(bookie) == whole.groups_of(bookie), bookie
        assert membership_changed == any(resolver.groups_of(b) != groups for b, groups in before.items())


def test_updating_entries_checks_them_all_before_changing_any():
    r = LocationResolver(None, {"g": {"a:1": {"rack": "/r1"}}})
    with pytest.raises(ValueError, match="rack_info"):
        r.update_rack_entries({"a:1": {}, "b:1": {"g": "rack1"}})
    assert r.resolve("a:1") == "/r1"
