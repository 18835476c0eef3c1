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
"""

from __future__ import annotations

import logging
import signal
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


def _completed_batch(query: Any) -> int | None:
    """The id of the query's last completed micro-batch (None before the first)."""
    progress = query.lastProgress
    return None if progress is None else progress["batchId"]


__all__ = ["STOPPING", "StopSignals", "serve_until_stopped"]
