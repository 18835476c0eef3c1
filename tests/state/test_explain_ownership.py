"""Every decision owns its `explain`: JSON values of exact types, shared with no other output, never
changed afterwards. `state.outputs.decision` relies on this to hand the explanation on without a deep
copy (`explain_ready`), so these properties guard the built-in policies' explanations."""

from hypothesis import given, settings

from state import ModelSettings, step
from state.outputs import DECISION
from tests.state.helpers import CLUSTER
from tests.state.strategies import CONFS, configured_streams

_SCALARS = (str, int, float, bool, type(None))


def _containers(value, path, found):
    """Every dict and list in `value` (by id), asserting exact JSON types on the way."""
    kind = type(value)
    if kind is dict:
        found.append((id(value), path))
        for key, item in value.items():
            assert type(key) is str, f"{path}: key {key!r} is a {type(key).__name__}, not a str"
            _containers(item, f"{path}.{key}", found)
    elif kind is list:
        found.append((id(value), path))
        for index, item in enumerate(value):
            _containers(item, f"{path}[{index}]", found)
    else:
        assert kind in _SCALARS, f"{path}: {value!r} is a {kind.__name__}, not a JSON value"


def _steps_one_by_one(conf, records):
    settings_ = ModelSettings.from_conf(conf)
    model, texts = None, []
    for record in records:
        result = step(model, CLUSTER, [record], settings_)
        model = result.model
        texts.extend(o.to_json() for o in result.outputs)
    return texts


@settings(max_examples=200)
@given(case=configured_streams(metadata_groups=True))
def test_each_decision_owns_a_json_ready_explanation(case):
    """No dict or list of one decision's `explain` is also part of another output (one explanation may
    repeat a value of its own), and every value
    is a plain JSON value of its exact type (what the policies hand over is what is written)."""
    name, records = case
    conf = CONFS[name]
    result = step(None, CLUSTER, records, ModelSettings.from_conf(conf))
    owners: dict[int, tuple[int, str]] = {}
    for number, output in enumerate(result.outputs):
        found: list[tuple[int, str]] = []
        if output.kind == DECISION:
            _containers(output.payload["explain"], f"{output.payload['request_id']}.explain", found)
        for ident, path in found:
            owner, first_path = owners.setdefault(ident, (number, path))
            assert owner == number, f"{path} is the same object as {first_path}"


@settings(max_examples=200)
@given(case=configured_streams(metadata_groups=True))
def test_later_records_change_no_written_explanation(case):
    """Outputs written when the whole stream is one batch equal those written record by record, so no
    policy changes an explanation it handed out while it goes on placing and changing topology."""
    name, records = case
    conf = CONFS[name]
    whole = step(None, CLUSTER, records, ModelSettings.from_conf(conf))
    assert [o.to_json() for o in whole.outputs] == _steps_one_by_one(conf, records)
