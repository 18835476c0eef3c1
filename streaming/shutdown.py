"""Stopping `placement-engine run` on SIGINT or SIGTERM the way an operator expects: quietly.

Without this, Ctrl-C raised KeyboardInterrupt inside whatever py4j call the driver was making (py4j
then logged two ERROR lines about a broken command), and SIGTERM, what Kubernetes, systemd and YARN
send, killed the driver outright: exit status -15 and a page of Spark ERRORs and stack traces, the
in-flight micro-batch's tasks crashing. Now both signals only record the request (`StopSignals`);
the driver lets the micro-batch in progress finish, for up to `engine.stopGraceSeconds`, then stops
the query and `run` exits with status 0 (`serve_until_stopped`). A second signal stops at once.

Send the signal to the `placement-engine` process only: a JVM that gets SIGTERM itself shuts down at
once, whatever the driver does (systemd: `KillMode=mixed`; a container: the engine as its main
process). A micro-batch stopped midway is retried from the checkpoint when the job starts again;
what its finished tasks wrote stays in Kafka and is written again (at-least-once, as always).

Once the query has stopped, `stop_spark` stops the SparkContext from the driver, within
`SPARK_STOP_SECONDS`. Left to the JVM, the context is stopped by the JVM's shutdown hooks after
the driver exits (under `spark-submit`, after the Python driver has returned), and a hook that
hangs holds the process until the hooks' own timeout (30 s by default, `spark.shutdown.timeout`),
past the platform's kill timeout. Stopped here, the hooks find nothing left to do; a stop that
does not finish in time is abandoned and the process exits at once, its outputs flushed.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable
from types import FrameType
from typing import Any

from .settings import STOP_GRACE_SECONDS

log = logging.getLogger("placement-engine")

STOPPING = threading.Event()
"""Set in the driver once a stop was asked for: the Kafka sink then reports a batch aborted by the
stop as part of it (INFO), not as a failure (WARNING). One per process: the driver runs one job."""


class StopSignals:
    """A context manager that turns SIGINT and SIGTERM into a stop request instead of an exception.

    The handlers only record the signal, so a blocking call in progress (py4j's socket read) resumes
    undisturbed; the previous handlers come back on exit.
    """

    def __init__(self, signals: Iterable[signal.Signals] = (signal.SIGINT, signal.SIGTERM)) -> None:
        self.signals = tuple(signals)
        self.received: list[str] = []
        self._previous: dict[signal.Signals, Any] = {}

    def __enter__(self) -> StopSignals:
        for number in self.signals:
            self._previous[number] = signal.signal(number, self._record)
        return self

    def __exit__(self, *exc_info: object) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)
        self._previous.clear()

    def _record(self, number: int, frame: FrameType | None) -> None:
        self.received.append(signal.Signals(number).name)

    @property
    def requested(self) -> bool:
        """A stop was asked for."""
        return bool(self.received)

    @property
    def hurried(self) -> bool:
        """A second signal came: stop without waiting for the micro-batch."""
        return len(self.received) > 1


def serve_until_stopped(query: Any, signals: StopSignals, grace_s: float, *, poll_s: float = 0.5,
                        clock: Callable[[], float] = time.monotonic,
                        sleep: Callable[[float], None] = time.sleep) -> str | None:
    """Wait while `query` (a StreamingQuery) runs; on a stop request, stop it between micro-batches.

    The query stops in the first moment no micro-batch runs, or as soon as the micro-batch in
    progress when the stop was asked for has completed, waiting up to `grace_s` seconds (a second
    signal ends the wait). A job that is behind runs micro-batches back to back, so the next one has
    usually begun by then: it is cut short at its start (Spark and pyspark log its cancellation) and
    retried from the checkpoint on the next start, as is a micro-batch still running at the deadline.

    Returns:
        The name of the signal that stopped the query; None when the query ended by itself.

    Raises:
        StreamingQueryException: the query failed (from `awaitTermination`).
    """
    while not signals.requested:
        if query.awaitTermination(poll_s):
            return None
    name = signals.received[0]
    log.info("%s received: stopping after the micro-batch in progress (waiting up to %g s; send it again to "
             "stop at once)", name, grace_s)
    deadline = clock() + grace_s
    in_progress = _completed_batch(query)
    while query.isActive and query.status.get("isTriggerActive") and not signals.hurried:
        if _completed_batch(query) != in_progress:
            break
        if clock() >= deadline:
            log.info("the micro-batch in progress did not finish within %s=%g; stopping it "
                     "(it is retried from the checkpoint on the next start)", STOP_GRACE_SECONDS, grace_s)
            break
        sleep(0.05)
    STOPPING.set()
    query.stop()
    log.info("stopped on %s", name)
    return name


SPARK_STOP_SECONDS = 5.0
"""How long `stop_spark` waits for the SparkContext to stop before the process exits without it."""


def stop_spark(spark: Any, timeout_s: float = SPARK_STOP_SECONDS, *,
               exit_now: Callable[[int], None] = os._exit) -> bool:
    """Stop `spark` (a SparkSession whose queries have stopped) from the driver, waiting up to `timeout_s`.

    Returns:
        True when Spark stopped in time. Otherwise the logs and standard streams are flushed and
        `exit_now(0)` ends the process (the query has stopped and its checkpoint is complete, so
        nothing is lost); it returns False only when `exit_now` returns (tests).
    """
    stopper = threading.Thread(target=spark.stop, name="spark-stop", daemon=True)
    stopper.start()
    stopper.join(timeout_s)
    if not stopper.is_alive():
        return True
    log.warning("Spark did not stop within %g s after the query stopped; exiting without waiting for it", timeout_s)
    for handler in logging.getLogger().handlers:
        handler.flush()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    exit_now(0)
    return False


def _completed_batch(query: Any) -> int | None:
    """The id of the query's last completed micro-batch (None before the first)."""
    progress = query.lastProgress
    return None if progress is None else progress["batchId"]


__all__ = ["SPARK_STOP_SECONDS", "STOPPING", "StopSignals", "serve_until_stopped", "stop_spark"]
