"""A worker's garbage collector: the thresholds, and one freeze of what exists when it first runs our code.

Run in a fresh interpreter: freezing is process-wide and would reach into the test process.
"""

import subprocess
import sys
import textwrap

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
    print(json.dumps({"before": before, "frozen": frozen, "after_second": gc.get_freeze_count(),
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
    assert result["threshold"] == result["expected"]
    assert result["cycle_freed"]


def test_every_executor_entry_point_tunes_the_worker_first(monkeypatch):
    """The state function, the Kafka source's read and the Kafka sink's write each tune the worker's
    collector before their work (the first of them in a worker does the freeze)."""
    from pyspark.sql.types import StringType, StructField, StructType

    import streaming.kafka_sink as kafka_sink
    import streaming.kafka_source as kafka_source
    import streaming.stateful as stateful
    from tests.streaming.test_model_cache import GroupState, _day, _run

    calls = []
    for module in (stateful, kafka_source, kafka_sink):
        monkeypatch.setattr(module, "tune_worker_gc", lambda name=module.__name__: calls.append(name))
    monkeypatch.setattr(stateful, "MODEL_CACHE", stateful.ModelCache())

    function = stateful.make_state_function({"ensemblePlacementPolicy": "rackaware"}, "kafka")
    _run(function, GroupState(), _day()[:5], 0)
    reader = kafka_source.KafkaStreamReader(kafka_source.KafkaSourceSettings.from_options(
        {"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "t"}))
    assert list(reader.read(kafka_source.KafkaInputPartition("t", 0, 7, 7))) == []   # an empty range
    writer = kafka_sink.KafkaStreamWriter(kafka_sink.KafkaSinkSettings.from_options(
        {"kafka.bootstrap.servers": "127.0.0.1:1"}, StructType([StructField(name, StringType()) for name in ("topic", "key", "value")])))
    writer.write(iter([]))
    assert calls == ["streaming.stateful", "streaming.kafka_source", "streaming.kafka_sink"]
