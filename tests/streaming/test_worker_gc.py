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
