"""The `run` job's metrics endpoint: Prometheus metrics served over HTTP from the driver.

`start_metrics(settings)` creates the job's `EngineMetrics` (`streaming.metrics_progress`, its own
`CollectorRegistry`, never prometheus_client's global one) and, unless `engine.metrics.port` is 0,
serves it with prometheus_client's HTTP server on `engine.metrics.host:engine.metrics.port` (`/metrics`).
`RunMetrics.watch(spark, query_name)` adds a `StreamingQueryListener` to the session before the
query starts: Spark calls its `onQueryProgress` on the driver after every micro-batch with the
batch's progress, the metrics rows observed on the outputs included (`streaming.job.observed_metrics`),
and the metrics are updated from it. Nothing polls the query. The same listener says "behind" once
per episode (`metrics_progress.BehindLog`), with the endpoint on or off.

A port already in use (another `run` on the host?) or a host that cannot be listened on is a
`MetricsEndpointError`, a configuration error: `run` stops before Spark starts, with one line and exit
status 2. See docs/metrics.md for the metrics and the alerts we suggest.
"""

from __future__ import annotations

import errno
import json
import logging
from typing import Any

from prometheus_client import disable_created_metrics, start_http_server
from pyspark.sql.streaming.listener import (
    QueryIdleEvent,
    QueryProgressEvent,
    QueryStartedEvent,
    QueryTerminatedEvent,
    StreamingQueryListener,
)

from .config import ConfigError
from .metrics_progress import EngineMetrics
from .settings import METRICS_PORT, EngineSettings

log = logging.getLogger("placement-engine")


class MetricsEndpointError(ConfigError):
    """The metrics endpoint cannot listen where `engine.metrics.host` and `engine.metrics.port` say."""


class ProgressListener(StreamingQueryListener):
    """Feeds `EngineMetrics` from the progress of the query named `query_name` (other queries of the
    session are ignored). Spark calls it on the driver, after each micro-batch."""

    def __init__(self, metrics: EngineMetrics, query_name: str) -> None:
        self.metrics = metrics
        self.query_name = query_name
        self._ids: set[str] = set()

    def onQueryStarted(self, event: QueryStartedEvent) -> None:  # noqa: N802 - Spark's name
        if event.name == self.query_name:
            self._ids.add(str(event.id))

    def onQueryProgress(self, event: QueryProgressEvent) -> None:  # noqa: N802 - Spark's name
        progress = event.progress
        if progress.name == self.query_name:
            self.metrics.on_progress(json.loads(progress.json))

    def onQueryIdle(self, event: QueryIdleEvent) -> None:  # noqa: N802 - Spark's name
        if str(event.id) in self._ids:
            self.metrics.on_idle()

    def onQueryTerminated(self, event: QueryTerminatedEvent) -> None:  # noqa: N802 - Spark's name
        self._ids.discard(str(event.id))


class RunMetrics:
    """The `run` job's metrics and their endpoint (None when `engine.metrics.port` is 0)."""

    def __init__(self, metrics: EngineMetrics, server: Any = None, thread: Any = None) -> None:
        self.metrics = metrics
        self._server = server
        self._thread = thread
        self._listener: ProgressListener | None = None
        self._spark: Any = None

    @property
    def port(self) -> int | None:
        """The port the endpoint listens on (None: no endpoint)."""
        return None if self._server is None else int(self._server.server_address[1])

    def watch(self, spark: Any, query_name: str) -> None:
        """Listen to the progress of the query `query_name` of `spark` (call before starting it)."""
        self._listener = ProgressListener(self.metrics, query_name)
        self._spark = spark
        spark.streams.addListener(self._listener)

    def stop(self) -> None:
        """Stop listening and serving (idempotent)."""
        listener, self._listener = self._listener, None
        server, self._server = self._server, None
        try:
            if listener is not None:
                self._spark.streams.removeListener(listener)
        finally:
            if server is not None:
                server.shutdown()
                server.server_close()
                self._thread.join(timeout=5)


def start_metrics(settings: EngineSettings) -> RunMetrics:
    """The `run` job's metrics, served on `engine.metrics.host:engine.metrics.port` unless the port is 0.

    Raises:
        MetricsEndpointError: the port is in use, or the host cannot be listened on.
    """
    # One `_created` series per counter and label set would double the series Prometheus stores, for
    # timestamps nobody queries (process-wide; `run` serves no other metrics).
    disable_created_metrics()
    metrics = EngineMetrics(max_clusters=settings.metrics_max_clusters, trigger_seconds=settings.trigger_seconds)
    if settings.metrics_port == 0:
        return RunMetrics(metrics)
    where = f"{settings.metrics_host or '0.0.0.0'}:{settings.metrics_port}"
    try:
        server, thread = start_http_server(settings.metrics_port, settings.metrics_host, registry=metrics.registry)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise MetricsEndpointError(
                f"{METRICS_PORT}: port {settings.metrics_port} is in use on {settings.metrics_host or '0.0.0.0'} "
                f"(another placement-engine run?); choose a free port, or set {METRICS_PORT}=0 to turn the "
                "metrics endpoint off") from exc
        raise MetricsEndpointError(f"engine.metrics.host: cannot listen on {where} ({exc.strerror or exc}); "
                                   "name an address of this host, or 0.0.0.0 for all") from exc
    log.info("metrics: http://%s/metrics", where)
    return RunMetrics(metrics, server, thread)


__all__ = ["MetricsEndpointError", "ProgressListener", "RunMetrics", "start_metrics"]
