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
"""

from __future__ import annotations

import gc

GC_THRESHOLD = (50_000, 20, 20)
"""The cyclic garbage collector's thresholds in a worker that steps models (`gc.set_threshold`).

A cluster's model and audit memory are hundreds of thousands of long-lived objects, and Python's
default (700 allocations) runs a collection that scans them every few requests: about a fifth of
a busy cluster's CPU time was the collector. The engine makes almost no reference cycles, so
collecting less often costs little memory.
"""


def tune_worker_gc() -> None:
    """Set `GC_THRESHOLD` and, the first time in this process, freeze every tracked object.

    Called at the start of each executor entry point (the state function, the Kafka source's read,
    the Kafka sink's write); after the first call it costs two function calls.
    """
    if gc.get_threshold() != GC_THRESHOLD:
        gc.set_threshold(*GC_THRESHOLD)
    if not gc.get_freeze_count():
        gc.freeze()


__all__ = ["GC_THRESHOLD", "tune_worker_gc"]
