"""`placement-engine produce --conf FILE --events PATH [--events PATH ...]`: send recorded files to Kafka.

One job: send every non-blank line of JSON-lines files (what `replay` reads, e.g. `demo --out DIR`'s
`DIR/input/`) to the two input topics of `run`, as a producer of cluster events should: requests
(`ledger_create`, `bookie_replace`, `ensemble_check`) to `engine.kafka.requestsTopic`, every other line
to `engine.kafka.eventsTopic`, keyed by the record's `cluster` so each cluster's records stay in one
partition, in file and line order (an idempotent producer keeps that order across retries).

Lines are sent as they are, unjudged: a line that is not a JSON object, or has no readable `type`,
goes to the events topic (keyed by its cluster when one can be read) and the engine dead-letters it,
with the same code and reason as `replay` gives it, naming its topic, partition and offset. The
engine is the one judge of what is valid. Blank lines are skipped, as `replay` skips them.

Prints the counts (per topic, and lines whose type could not be read) and returns 0 once every record is
acknowledged; a record the broker refuses stops the command with one line naming the topic (exit 2).

No Spark. Cost: O(lines); one JSON parse per line to route it, dominated by the producer's sending.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from confluent_kafka import KafkaError, KafkaException, Producer

from events import REQUEST_TYPES

from .config import ConfigError, load_conf
from .settings import BOOTSTRAP_SERVERS, EngineSettings, engine_settings

_FLUSH_TIMEOUT_S = 120.0


@dataclass(frozen=True, slots=True)
class Routed:
    """Where one line goes: `topic`, the `key` (the cluster, or None) and whether its type could be read."""

    topic: str
    key: bytes | None
    readable: bool


def route(line: bytes, settings: EngineSettings) -> Routed:
    """The topic and key of one line: requests to the requests topic, anything else to the events topic."""
    try:
        record = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return Routed(settings.events_topic, None, False)
    if not isinstance(record, dict):
        return Routed(settings.events_topic, None, False)
    cluster = record.get("cluster")
    key = cluster.encode("utf-8", "surrogatepass") if isinstance(cluster, str) else None
    kind = record.get("type")
    topic = settings.requests_topic if kind in REQUEST_TYPES else settings.events_topic
    return Routed(topic, key, isinstance(kind, str))


def _lines(files: Sequence[str]) -> Iterator[bytes]:
    for name in files:
        with open(name, "rb") as handle:
            for line in handle:
                text = line.rstrip(b"\r\n")
                if text.strip():
                    yield text


def _input_files(paths: Sequence[str | Path]) -> list[str]:
    from .replay import input_files  # what `--events` names is defined once, by `replay` (imports Spark)

    return input_files(paths)


def _require_topics(producer: Producer, settings: EngineSettings, timeout_s: float = 15.0) -> None:
    """Refuse to send to a topic that does not exist (a broker may otherwise create it with its defaults)."""
    try:
        existing = producer.list_topics(timeout=timeout_s).topics
    except KafkaException as exc:
        raise ConfigError(f"{BOOTSTRAP_SERVERS}: cannot reach {settings.bootstrap_servers} within "
                          f"{timeout_s:.0f} s ({exc.args[0]}); check the address and that the broker runs") from exc
    for key, topic in (("engine.kafka.eventsTopic", settings.events_topic),
                       ("engine.kafka.requestsTopic", settings.requests_topic)):
        if topic not in existing:
            raise ConfigError(f"{key}: topic {topic!r} does not exist on {settings.bootstrap_servers}; create the "
                              "topics with `placement-engine topics --conf FILE --create`")


def produce_files(settings: EngineSettings, paths: Sequence[str | Path]) -> Counter:
    """Send the lines of `paths` (files, or folders of them, as `replay --events` takes) to the input topics.

    Returns:
        Counts: records per topic, and `"unreadable type"` for lines sent to the events topic whose type
        could not be read.

    Raises:
        ConfigError: no broker address, a path that does not exist, an unreachable broker, an input topic
            that does not exist, or a record the broker refused or did not acknowledge (the message names the
            topic and the broker's reason).
    """
    if not settings.bootstrap_servers:
        raise ConfigError(f"{BOOTSTRAP_SERVERS}: required by `produce` (host:port[,host:port])")
    files = _input_files(paths)
    producer = Producer({"linger.ms": 5, "enable.idempotence": True, **settings.kafka_client,
                         "bootstrap.servers": settings.bootstrap_servers})
    _require_topics(producer, settings)
    failures: list[tuple[str, KafkaError]] = []

    def delivered(err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            failures.append((msg.topic(), err))

    counts: Counter = Counter()
    for line in _lines(files):
        routed = route(line, settings)
        while True:
            try:
                producer.produce(routed.topic, value=line, key=routed.key, on_delivery=delivered)
                break
            except BufferError:  # the local queue is full: serve delivery reports, then retry
                producer.poll(0.1)
            except KafkaException as exc:
                raise ConfigError(f"cannot send to topic {routed.topic!r}: {exc.args[0]}") from exc
        counts[routed.topic] += 1
        if not routed.readable:
            counts["unreadable type"] += 1
        producer.poll(0)
    remaining = producer.flush(_FLUSH_TIMEOUT_S)
    if remaining:
        raise ConfigError(f"{BOOTSTRAP_SERVERS}: {remaining} record(s) not acknowledged by "
                          f"{settings.bootstrap_servers} within {_FLUSH_TIMEOUT_S:.0f} s")
    if failures:
        topic, error = failures[0]
        raise ConfigError(f"topic {topic!r} refused {len(failures)} record(s): {error.str()}; create the topics "
                          "with `placement-engine topics --conf FILE --create`")
    return counts


def print_counts(counts: Counter, settings: EngineSettings, out: TextIO | None = None) -> None:
    out = out or sys.stdout
    print(f"sent {counts[settings.events_topic]} record(s) to {settings.events_topic} (events) and "
          f"{counts[settings.requests_topic]} to {settings.requests_topic} (requests), keyed by cluster", file=out)
    if counts["unreadable type"]:
        print(f"{counts['unreadable type']} line(s) without a readable type went to {settings.events_topic}; "
              f"the engine dead-letters them to {settings.dead_letters_topic}", file=out)


def run_produce(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """The `produce` command; the exit code."""
    settings = engine_settings(load_conf(args.conf, args.set))
    print_counts(produce_files(settings, args.events), settings, out)
    return 0


def add_parser(sub: Any) -> None:
    """Register `produce` on the command line's subparsers."""
    produce = sub.add_parser("produce", help="send recorded JSON-lines files to the events and requests topics, "
                             "keyed by cluster, in file order")
    produce.add_argument("--conf", required=True, help="properties file (engine.kafka.* keys)")
    produce.add_argument("--events", action="append", required=True, metavar="PATH",
                         help="a JSON-lines file or a folder of them (repeatable), as for `replay`")
    produce.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override one key")
    produce.set_defaults(func=run_produce)


def main(argv: list[str] | None = None) -> int:
    """`python -m streaming.produce ...`: the command without the `placement-engine` entry point."""
    parser = argparse.ArgumentParser(prog="placement-engine")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["produce", *(sys.argv[1:] if argv is None else argv)])
    try:
        return args.func(args)
    except ConfigError as exc:
        print(f"placement-engine: configuration error: {exc}", file=sys.stderr)
        return 2


__all__ = ["Routed", "add_parser", "produce_files", "route", "run_produce"]

if __name__ == "__main__":
    sys.exit(main())
