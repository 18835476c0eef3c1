"""The location tree (spec bookkeeper-rackaware.md §1.5-§1.6; upstream NetworkTopologyImplTest)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from policies.errors import InvalidLocationError, InvalidTopologyError
from policies.topology import NetworkTopology


def tree(*leaves: tuple[str, str]) -> NetworkTopology:
    topology = NetworkTopology()
    for bookie, rack in leaves:
        topology.add(bookie, rack)
    return topology


def test_unknown_scope_has_no_leaves():
    assert list(NetworkTopology().leaves("/non-existing-scope")) == []
    assert list(tree(("a", "/r1")).leaves("/r2")) == []


def test_leaves_of_a_rack():
    topology = tree(("a", "/rack-0"), ("b", "/rack-1"))
    assert list(topology.leaves("/rack-0")) == ["a"]
    assert list(topology.leaves("/rack-1")) == ["b"]
    assert sorted(topology.leaves("")) == ["a", "b"]


def test_scopes_match_whole_components():
    """`/r1` does not match `/r10`."""
    topology = tree(("a", "/r1"), ("b", "/r10"))
    assert list(topology.leaves("/r1")) == ["a"]
    assert list(topology.leaves("~/r1")) == ["b"]


def test_inner_node_scope_and_trailing_slash():
    topology = tree(("a", "/east/r1"), ("b", "/east/r2"), ("c", "/west/r1"))
    assert sorted(topology.leaves("/east")) == ["a", "b"]
    assert sorted(topology.leaves("/east/")) == ["a", "b"]
    assert list(topology.leaves("/west/r1")) == ["c"]


def test_leaf_path_scope_returns_that_leaf():
    topology = tree(("a", "/r1"), ("b", "/r1"))
    assert list(topology.leaves("/r1/b")) == ["b"]
    assert list(topology.leaves("/r1/zz")) == []


@pytest.mark.parametrize("scope, expected", [
    ("~/rack-1", ["a", "c"]),
    ("~/rack-1,/rack-2", ["a"]),
    ("~/rack-9", ["a", "b", "c"]),      # an unknown scope removes nothing
    ("~", []),                          # "~" alone excludes ROOT, i.e. everything
    ("~/rack-0,", []),                  # an empty member means ROOT
])
def test_negated_scopes(scope, expected):
    topology = tree(("a", "/rack-0"), ("b", "/rack-1"), ("c", "/rack-2"))
    assert sorted(topology.leaves(scope)) == expected


def test_depth_rule_and_reset_when_empty():
    """testRestartBKWithNewRackDepth: another depth is refused until the tree empties."""
    topology = tree(("bk1", "/rack-1"), ("bk2", "/rack-1"))
    topology.remove("bk1")
    with pytest.raises(InvalidTopologyError):
        topology.add("bk1", "/dp/rack-1")
    assert list(topology.leaves("/rack-1")) == ["bk2"]
    topology.remove("bk2")
    assert topology.depth is None
    topology.add("bk1", "/dp/rack-1")
    topology.add("bk2", "/dp/rack-1")
    assert sorted(topology.leaves("/dp/rack-1")) == ["bk1", "bk2"]
    topology.check_invariants()


@pytest.mark.parametrize("location", ["", "/"])
def test_root_location_is_rejected(location):
    with pytest.raises(InvalidLocationError, match="not a descendant"):
        NetworkTopology().add("bookieIdScopeRack0", location)


def test_location_without_leading_slash_is_rejected():
    with pytest.raises(InvalidLocationError):
        NetworkTopology().add("a", "rack1")


def test_location_naming_a_leaf_is_rejected():
    """As in Java the depth check comes first, so a leaf path as location is a depth error."""
    topology = tree(("a", "/r1"))
    with pytest.raises((InvalidLocationError, InvalidTopologyError)):
        topology.add("b", "/r1/a")


def test_rack_count_and_removal_of_absent_leaf():
    topology = tree(("a", "/r1"), ("b", "/r1"), ("c", "/r2"))
    assert topology.num_racks == 2
    topology.remove("zz")
    topology.remove("c")
    assert topology.num_racks == 1
    assert topology.count_available("/r1", ["a"]) == 1


def test_readding_under_another_rack_moves_the_leaf():
    """BK bug fixed (App. A #10): a same-id leaf under another rack replaces the old one."""
    topology = tree(("a", "/r1"), ("b", "/r1"))
    topology.add("a", "/r2")
    assert list(topology.leaves("/r1")) == ["b"]
    assert list(topology.leaves("/r2")) == ["a"]
    assert len(topology) == 2
    topology.check_invariants()


@given(st.lists(st.tuples(st.sampled_from("abcdefgh"), st.sampled_from(["/r1", "/r2", "/r3", None])),
                max_size=40))
def test_random_changes_keep_the_tree_consistent(changes):
    """Any sequence of adds (rack) and removes (None) leaves a consistent tree and exact scopes."""
    topology = NetworkTopology()
    model: dict[str, str] = {}
    for bookie, rack in changes:
        if rack is None:
            topology.remove(bookie)
            model.pop(bookie, None)
        else:
            topology.add(bookie, rack)
            model[bookie] = rack
        topology.check_invariants()
    assert topology.num_racks == len(set(model.values()))
    for rack in ("/r1", "/r2", "/r3"):
        assert sorted(topology.leaves(rack)) == sorted(b for b, r in model.items() if r == rack)
        assert sorted(topology.leaves("~" + rack)) == sorted(b for b, r in model.items() if r != rack)
