"""Whether the Kafka brokers answer: one log line when they stop, one when they are back, and a typed error
once they have been unreachable for longer than allowed; librdkafka's own log lines routed to Python logging.

librdkafka retries a broker that went away by itself, logging each failed connection attempt (hundreds of
``FAIL ... Connection refused`` lines) to stderr, and a metadata call that finds no broker fails with
``_TRANSPORT``. :class:`BrokerWatch` turns those failures into what an operator needs:
a WARNING when the brokers become unreachable, an INFO line when they answer again, and
:class:`BrokerUnreachableError` naming the brokers after ``unreachableTimeoutSeconds``.
:data:`LIBRDKAFKA_LOG` receives librdkafka's lines at DEBUG (pass ``client_logging()`` in a client's config).
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable

from confluent_kafka import KafkaError

from .kafka_options import KafkaReadError

logger = logging.getLogger(__name__)

LIBRDKAFKA_LOG = logging.getLogger("streaming.librdkafka")
"""librdkafka's own log lines (connection attempts, retries), all at DEBUG: the watch reports what matters."""

#: librdkafka errors that mean "no broker answers", as opposed to an answer that is an error.
UNREACHABLE_CODES = frozenset({KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._TIMED_OUT,
                               KafkaError._RESOLVE, KafkaError.NETWORK_EXCEPTION})


class BrokerUnreachableError(KafkaReadError):
    """No Kafka broker answered for longer than ``unreachableTimeoutSeconds`` (the source) or than the
    producer's ``message.timeout.ms`` (the sink; ``option`` names the setting to raise)."""

    def __init__(self, bootstrap: str, seconds: float, last_error: str, option: str = "unreachableTimeoutSeconds"):
        self.bootstrap = bootstrap
        super().__init__(
            f"the Kafka brokers {bootstrap} have been unreachable for {seconds:.0f} s (last error: {last_error}); "
            "the query stops. Check that the brokers run and that this host can reach them, then restart: the "
            f"query goes on from its checkpoint. To wait longer, raise {option} "
            "(engine.kafka.unreachableTimeoutSeconds)"
        )


class _DebugLog:
    """What librdkafka's ``logger`` config calls: ``log(level, fmt, *args)``; every line goes out at DEBUG."""

    def log(self, level: int, fmt: str, *args: object) -> None:
        LIBRDKAFKA_LOG.debug(fmt, *args)


def log_in_spark_worker() -> None:
    """Send the ``streaming`` loggers' INFO and above to stderr in a process where nothing configured logging.

    Spark runs a Python source's driver side and its reads in Python workers that configure no logging, so
    the WARNING above would reach stderr bare and the INFO line not at all; Spark copies a worker's stderr
    to its own log. A process that configured logging (the command line, a test run) is left alone.
    """
    engine_log = logging.getLogger("streaming")
    if logging.getLogger().handlers or engine_log.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    engine_log.addHandler(handler)
    engine_log.setLevel(logging.INFO)


def client_logging() -> dict[str, object]:
    """Client config entries routing librdkafka's log lines to :data:`LIBRDKAFKA_LOG` (served on poll)."""
    return {"logger": _DebugLog()}


class BrokerWatch:
    """Reachability of one client's brokers, fed by the outcome of its broker calls.

    Args:
        bootstrap: the broker list, as configured (named in every line and in the error).
        timeout_s: how long the brokers may stay unreachable before :meth:`on_failure` raises.
        clock: monotonic seconds (injected by tests).
        option: the setting that bounds the outage, named in the error.
    """

    def __init__(self, bootstrap: str, timeout_s: float, clock: Callable[[], float] = time.monotonic,
                 option: str = "unreachableTimeoutSeconds"):
        self._bootstrap = bootstrap
        self._timeout_s = timeout_s
        self._clock = clock
        self._option = option
        self._down_since: float | None = None
        self._last_error = ""

    @property
    def bootstrap(self) -> str:
        return self._bootstrap

    @property
    def is_down(self) -> bool:
        return self._down_since is not None

    def on_failure(self, error: str) -> None:
        """A call found no broker: log the first such failure; raise once the outage lasts too long.

        Raises:
            BrokerUnreachableError: the brokers have been unreachable for longer than ``timeout_s``.
        """
        self._last_error = error
        if self._down_since is None:
            self._down_since = self._clock()
            logger.warning("Kafka brokers %s unreachable (%s); retrying for up to %.0f s",
                           self._bootstrap, error, self._timeout_s)
        self.check()

    def check(self) -> None:
        """Raise if the brokers have been unreachable for longer than allowed.

        Raises:
            BrokerUnreachableError: they have, for longer than ``timeout_s``.
        """
        if self._down_since is not None and self._clock() - self._down_since >= self._timeout_s:
            raise self.unreachable_error()

    def unreachable_error(self) -> BrokerUnreachableError:
        """The error for the outage in progress: the brokers, how long they have been away, the last error."""
        seconds = 0.0 if self._down_since is None else self._clock() - self._down_since
        return BrokerUnreachableError(self._bootstrap, seconds, self._last_error, self._option)

    def note(self, error: str) -> None:
        """Keep ``error`` as the last error of the outage in progress (a failed connection attempt, say);
        outside an outage, nothing."""
        if self._down_since is not None:
            self._last_error = error

    def on_success(self) -> None:
        """A call was answered: log the recovery if the brokers were unreachable."""
        if self._down_since is not None:
            logger.info("Kafka brokers %s reachable again after %.0f s", self._bootstrap,
                        self._clock() - self._down_since)
            self._down_since = None

    def error_cb(self, error: KafkaError) -> None:
        """librdkafka's ``error_cb`` (served on poll): an all-brokers-down error counts as a failure."""
        if error.code() == KafkaError._ALL_BROKERS_DOWN:
            self.on_failure(error.str())
