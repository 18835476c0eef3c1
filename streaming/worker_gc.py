"""The garbage collector of a Spark Python worker that runs this engine's code.

PySpark's worker daemon calls `gc.collect()` after every task a reused worker finishes. A full
collection scans every object the process tracks, and most of them are the modules a worker
imports (pyspark, pandas, pyarrow, the engine): about 20 ms per collection with nothing else alive,
30-100 ms in a worker holding a cluster's model, several times per micro-batch and on the same two
cores as the work (measured with `gc.callbacks` in the workers of a one-cluster streaming run: 3-4 s
of full collections per busy worker in 40 s). Freezing what exists when a worker first runs our
code (`gc.freeze`: moved to a generation no collection scans) leaves those collections only the
objects made since, the models and batches.

The objects frozen then are never freed by the cyclic collector; they are the imported modules
and the first task's own objects, so at most the latter, once per worker, stay behind.

While a group's batch is parsed and a slice of it stepped, the collector is paused
(`paused_gc`). Everything made then either lives until the slice's outputs are handed on (the
parsed records, the decisions) or joins the model; the engine makes no reference cycles on that
path, so a collection there finds nothing to free and only scans: each such object once in the
youngest generation and again in the middle one, about 5 us per record of a busy cluster
(`gc.callbacks` in the state function: 50 young and 2 middle collections over 200,000 records,
0.5 s, nothing collected). Paused, the first allocation after the slice runs one young collection
over what is still alive. A slice bounds what could pile up meanwhile if some input did make
cycles.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

GC_THRESHOLD = (50_000, 20, 20)
"""The cyclic garbage collector's thresholds in a worker that steps models (`gc.set_threshold`).

A cluster's model and audit memory are hundreds of thousands of long-lived objects, and Python's
default (700 allocations) runs a collection that scans them every few requests: about a fifth of
a busy cluster's CPU time was the collector. The engine makes almost no reference cycles, so
collecting less often costs little memory.
"""


_frozen = False
"""Whether this process has been through its one freeze (the collector is process-wide state)."""


def tune_worker_gc() -> None:
    """Set `GC_THRESHOLD` and, the first time in this process, freeze every tracked object.

    Called at the start of each executor entry point (the state function once per group and
    micro-batch, the Kafka source's read, the Kafka sink's write); after the first call it costs two
    function calls. It remembers the freeze in a flag instead of asking `gc.get_freeze_count()`,
    which walks the whole frozen generation (0.6-3 ms a call in a worker, 9 ms in a fresh interpreter
    that froze 77,000 objects): once per group, that cost grew with the number of clusters.
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
