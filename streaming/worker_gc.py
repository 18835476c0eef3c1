"""The garbage collector of a Spark Python worker that runs this engine's code.

PySpark's worker daemon calls `gc.collect()` after every task a reused worker finishes. A full
collection scans every object the process tracks, and most of them are the modules a worker
imports (pyspark, pandas, pyarrow, the engine), so it costs the same with nothing else alive, more
in a worker holding a cluster's model, and it runs several times per micro-batch on the same cores
as the work. Freezing what exists when a worker first runs our code (`gc.freeze`: moved to a
generation no collection scans) leaves those collections only the objects made since, the models
and batches.

The objects frozen then are never freed by the cyclic collector; they are the imported modules
and the first task's own objects, so at most the latter, once per worker, stay behind.

While the state function handles a group, from reading its frames to handing on its last slice of
outputs, the collector is paused (`paused_gc`). Everything the engine makes then either lives until
it is handed on or the call ends (the decisions, the parsed records) or joins the model, and the
engine makes no reference cycles on that path, so a collection there finds nothing to free and only
scans: each such object once in the youngest generation and again in the middle one. Paused only
while each slice is stepped, one young collection per slice would remain, over the batch's parsed
records and the slice's decisions, all still alive. Paused for the whole call, the first allocation
after it runs one young collection over what the model kept. pyspark's own code, which takes the
outputs between two slices, runs paused too: whatever cycles it or some input made wait for the
call's end, so a micro-batch (`engine.kafka.maxOffsetsPerTrigger`, `engine.replay.recordsPerTrigger`)
bounds what could pile up. The pause ends when the call's generator is exhausted or closed; pyspark's
worker exits on an error in the function, so a generator it abandoned cannot leave the collector
off.

Cost: a collection is O(tracked objects not frozen); the freeze is O(tracked objects), once per worker.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

GC_THRESHOLD = (50_000, 20, 20)
"""The cyclic garbage collector's thresholds in a worker that steps models (`gc.set_threshold`).

A cluster's model and audit memory are hundreds of thousands of long-lived objects, and Python's
default (700 allocations) runs a collection that scans them every few requests, so the collector
took a large share of a busy cluster's CPU time. The engine makes almost no reference cycles, so
collecting less often costs little memory.
"""


_frozen = False
"""Whether this process has been through its one freeze (the collector is process-wide state)."""


def tune_worker_gc() -> None:
    """Set `GC_THRESHOLD` and, the first time in this process, freeze every tracked object.

    Called at the start of each executor entry point (the state function once per group and
    micro-batch, the Kafka source's read, the Kafka sink's write); after the first call it costs two
    function calls. It remembers the freeze in a flag instead of asking `gc.get_freeze_count()`,
    which walks the whole frozen generation: O(frozen objects) once per group would grow with the
    number of clusters.
    """
    global _frozen  # noqa: PLW0603 - see `_frozen`
    if gc.get_threshold() != GC_THRESHOLD:
        gc.set_threshold(*GC_THRESHOLD)
    if not _frozen:
        _frozen = True
        if not gc.get_freeze_count():
            gc.freeze()


@contextmanager
def paused_gc() -> Iterator[None]:
    """The cyclic collector off for the block, then back as it was (left off if it was off)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


__all__ = ["GC_THRESHOLD", "paused_gc", "tune_worker_gc"]
