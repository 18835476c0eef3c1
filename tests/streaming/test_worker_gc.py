"""A worker's garbage collector: the thresholds, and one freeze of what exists when it first runs our code.

Run in a fresh interpreter: freezing is process-wide and would reach into the test process.
"""

import subprocess
import sys
import textwrap

from state.settings import ModelSettings

PROBE = textwrap.dedent("""
    import gc, json, weakref
    from streaming.worker_gc import GC_THRESHOLD, tune_worker_gc

    class Node:
        pass

    old_a, old_b = Node(), Node()         # alive when the worker first runs our code
    old_a.other, old_b.other = old_b, old_a
    kept = weakref.ref(old_a)
    before = gc.get_freeze_count()
    tune_worker_gc()
    frozen = gc.get_freeze_count()
    del old_a, old_b                      # frozen: no collection looks at it again
    # Objects made afterwards (a cluster's model, a batch) are still collected, cycles included.
    a, b = Node(), Node()
    a.other, b.other = b, a
    gone = weakref.ref(a)
    del a, b
    gc.collect()
    tune_worker_gc()                      # a later task: nothing is frozen again
    # ... nor is the frozen generation walked again (`get_freeze_count` is O(frozen objects)).
    walks = []
    counted = gc.get_freeze_count
    gc.get_freeze_count = lambda: walks.append(1) or counted()
    for _ in range(3):
        tune_worker_gc()
    gc.get_freeze_count = counted
    print(json.dumps({"before": before, "frozen": frozen, "after_second": gc.get_freeze_count(),
                      "later_walks": len(walks),
                      "threshold": list(gc.get_threshold()), "expected": list(GC_THRESHOLD),
                      "cycle_freed": gone() is None, "frozen_cycle_kept": kept() is not None}))
""")


def test_the_first_call_freezes_what_exists_and_later_objects_are_still_collected():
    out = subprocess.run([sys.executable, "-c", PROBE], check=True, capture_output=True, text=True).stdout
    result = __import__("json").loads(out)
    assert result["before"] == 0
    assert result["frozen"] > 1_000                   # the imported modules' objects, among others
    assert result["frozen_cycle_kept"]                # what was frozen is never scanned again
    assert result["after_second"] == result["frozen"]
    assert result["later_walks"] == 0                 # later calls cost O(1), not O(frozen objects)
    assert result["threshold"] == result["expected"]
    assert result["cycle_freed"]


def test_every_executor_entry_point_tunes_the_worker_first(monkeypatch):
    """The state function, the Kafka source's read and the Kafka sink's write each tune the worker's
    collector before their work (the first of them in a worker does the freeze)."""
    from pyspark.sql.types import StringType, StructField, StructType

    import streaming.kafka_sink as kafka_sink
    import streaming.kafka_source as kafka_source
    import streaming.stateful as stateful
    from streaming.kafka_options import KafkaSinkSettings, KafkaSourceSettings
    from tests.streaming.test_model_cache import GroupState, _day, _run

    calls = []
    for module in (stateful, kafka_source, kafka_sink):
        monkeypatch.setattr(module, "tune_worker_gc", lambda name=module.__name__: calls.append(name))
    monkeypatch.setattr(stateful, "MODEL_CACHE", stateful.ModelCache())

    function = stateful.make_state_function(ModelSettings(), "kafka")
    _run(function, GroupState(), _day()[:5], 0)
    reader = kafka_source.KafkaStreamReader(KafkaSourceSettings.from_options(
        {"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "t"}))
    assert list(reader.read(kafka_source.KafkaInputPartition("t", 0, 7, 7))) == []   # an empty range
    writer = kafka_sink.KafkaStreamWriter(KafkaSinkSettings.from_options(
        {"kafka.bootstrap.servers": "127.0.0.1:1"},
        StructType([StructField(name, StringType()) for name in ("topic", "key", "value")])))
    writer.write(iter([]))
    assert calls == ["streaming.stateful", "streaming.kafka_source", "streaming.kafka_sink"]


def test_paused_gc_turns_the_collector_off_for_the_block_and_back_as_it_was():
    import gc

    import pytest

    from streaming.worker_gc import paused_gc

    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
    assert gc.isenabled()
    with pytest.raises(RuntimeError), paused_gc():
        raise RuntimeError("a failing slice")
    assert gc.isenabled()                              # back on after an error too
    gc.disable()
    try:
        with paused_gc():
            assert not gc.isenabled()
        assert not gc.isenabled()                      # someone else turned it off: left off
    finally:
        gc.enable()


def test_the_state_function_keeps_the_collector_paused_for_the_whole_group_and_turns_it_back_on(monkeypatch):
    """A collection while a group is handled only scans its parsed records and decisions, all still
    alive (streaming.worker_gc): paused from parsing to the last slice handed on, yields included;
    on again once the call is over, also when the caller stops reading early."""
    import gc
    import importlib

    import streaming.stateful as stateful
    from tests.streaming.test_model_cache import GroupState, _day, _frame

    state_step = importlib.import_module("state.step")   # `state.step` the attribute is the function
    seen = {"parse": set(), "answer": set()}
    parse, answer = stateful.parse_record, state_step.answer

    def parse_watched(*args, **kwargs):
        seen["parse"].add(gc.isenabled())
        return parse(*args, **kwargs)

    def answer_watched(*args, **kwargs):
        seen["answer"].add(gc.isenabled())
        return answer(*args, **kwargs)

    monkeypatch.setattr(stateful, "parse_record", parse_watched)
    monkeypatch.setattr(state_step, "answer", answer_watched)
    monkeypatch.setattr(stateful, "MODEL_CACHE", stateful.ModelCache())
    monkeypatch.setattr(stateful, "SLICE_RECORDS", 20)   # several slices, so several yields
    function = stateful.make_state_function(ModelSettings(), "kafka")
    lines = _day()
    frames = function(("c1", 0), iter([_frame(lines, 0)]), GroupState())
    on_at_yield = []
    rows = 0
    for frame in frames:
        on_at_yield.append(gc.isenabled())
        rows += len(frame)
    assert seen == {"parse": {False}, "answer": {False}}
    assert len(on_at_yield) > 2 and not any(on_at_yield)
    assert rows > 60                                   # the decisions came out
    assert gc.isenabled()

    monkeypatch.setattr(stateful, "MODEL_CACHE", stateful.ModelCache())
    frames = function(("c1", 0), iter([_frame(lines, 0)]), GroupState())
    next(frames)
    assert not gc.isenabled()
    frames.close()                                     # a caller that stops early
    assert gc.isenabled()
