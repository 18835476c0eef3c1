"""Start a streaming query that reads the Python Kafka source, again if Spark could not start its driver-side
Python worker in time.

A Python streaming source runs its driver side (offsets, planning) in a Python process that Spark starts
when the query starts (`PythonStreamingSourceRunner`). Spark waits a fixed 10 s for that process to
connect back (`PythonWorkerFactory.createSimpleWorker`; no setting changes it), and the process first
imports pyspark from `pyspark.zip`, which Python compiles from source on every start. On a loaded
machine that can take longer, and the query then fails before reading anything with
`SparkException: Python worker failed to connect back` (a `SocketTimeoutException`). Nothing was read
or written, so starting the query again from its checkpoint is safe: `start_query` does that a few
times, logging a WARNING each time, and gives up with the last failure.

Cost: one wait for the query to leave "Initializing sources" per start (its sources are created then).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger("placement-engine")

WORKER_START_FAILURE = "Python worker failed to connect back"
"""Spark's message when a Python worker did not connect back within its fixed wait."""

START_ATTEMPTS = 3
_INITIALIZING = "Initializing sources"


def worker_start_failed(failure: BaseException | None) -> bool:
    """Whether a query's failure is Spark's driver-side Python worker not connecting back in time."""
    return failure is not None and WORKER_START_FAILURE in str(failure)


def start_query(start: Callable[[], Any], *, attempts: int = START_ATTEMPTS, guard_s: float = 600.0,
                poll_s: float = 0.1, sleep: Callable[[float], None] = time.sleep,
                clock: Callable[[], float] = time.monotonic) -> Any:
    """`start()` a StreamingQuery and wait until it has created its sources; start it again (up to `attempts`
    starts) when it failed because its driver-side Python worker did not connect back in time.

    Returns:
        The running query, or one that ended for another reason (its failure is left for the caller's
        `awaitTermination` / `exception()` to report), or the last failed one after `attempts` starts.
    """
    for attempt in range(1, attempts + 1):
        query = start()
        deadline = clock() + guard_s
        while query.isActive and query.status.get("message") == _INITIALIZING and clock() < deadline:
            sleep(poll_s)
        if query.isActive or attempt == attempts or not worker_start_failed(query.exception()):
            return query
        log.warning("Spark's Python worker for the Kafka source did not connect back within Spark's fixed wait "
                    "(a loaded machine); starting the query again from its checkpoint (start %d of %d)",
                    attempt + 1, attempts)
    raise AssertionError("unreachable")


__all__ = ["START_ATTEMPTS", "WORKER_START_FAILURE", "start_query", "worker_start_failed"]
