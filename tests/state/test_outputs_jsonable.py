"""`outputs.jsonable`: the fast paths for plain dicts and lists give what the general rules give."""

import enum
from collections import OrderedDict

from hypothesis import given
from hypothesis import strategies as st

from state.outputs import jsonable


class Color(enum.Enum):
    RED = 1


class Level(enum.IntEnum):
    HIGH = 2


scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5),
                    st.floats(allow_nan=False), st.sampled_from([Color.RED, Level.HIGH]))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.tuples(inner, inner),
    st.dictionaries(st.one_of(st.text(max_size=4), st.integers()), inner, max_size=4)), max_leaves=12)


def _plain(value):
    """The expected copy, written out rule by rule."""
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, dict):
        return {k if isinstance(k, str) else str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


@given(values)
def test_nested_plain_values_copy_as_the_rules_say(value):
    assert jsonable(value) == _plain(value)


def test_enums_sets_bytes_and_mappings_inside_plain_containers():
    value = {"levels": [Level.HIGH, Color.RED], 3: {"b", "a"}, "raw": b"x\xff", "ordered": OrderedDict(z=1),
             "nested": [{"k": (1, 2)}]}
    assert jsonable(value) == {"levels": ["HIGH", "RED"], "3": ["a", "b"], "raw": "x\ufffd", "ordered": {"z": 1},
                               "nested": [{"k": [1, 2]}]}
    # A copy: changing it leaves the original alone.
    copied = jsonable(value)
    copied["nested"][0]["k"].append(3)
    assert value["nested"][0]["k"] == (1, 2)
