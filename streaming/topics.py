"""`placement-engine topics --conf FILE [--create] [--partitions N] [--replication R]`: the job's six topics.

One job: tell, for each topic the configuration names (`engine.kafka.*Topic`: events, requests, decisions,
alerts, dead letters and the clusters' status records), whether it exists on the broker and with how many
partitions, and with `--create` create the missing ones first. Creating is idempotent: a topic that exists
is left as it is (its partitions are never changed), so the command can run before every start. Exit code
0 when all six exist afterwards, 1 when some are missing (listing only), 2 for a configuration error or a
broker that does not answer (one line, as for every command).

No Spark: one confluent-kafka admin client.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any, TextIO

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from .config import ConfigError, load_conf
from .kafka_health import client_logging
from .settings import BOOTSTRAP_SERVERS, EngineSettings, engine_settings

DEFAULT_PARTITIONS = 3
"""Partitions of a created topic. A cluster's records stay in one partition (the key is the cluster), so
more partitions spread more clusters over more readers; one busy cluster gains nothing from them."""

DEFAULT_REPLICATION = 1
"""Replication factor of a created topic: 1 suits a single test broker; use 3 on a production cluster."""


@dataclass(frozen=True, slots=True)
class TopicState:
    """One configured topic as the broker has it: `partitions` is None when the topic does not exist."""

    key: str
    topic: str
    partitions: int | None
    created: bool = False

    def line(self) -> str:
        if self.partitions is None:
            state = "missing"
        else:
            state = f"{self.partitions} partition{'s' if self.partitions != 1 else ''}, " \
                    f"{'created' if self.created else 'exists'}"
        return f"{self.topic}  ({self.key}): {state}"


def _admin(settings: EngineSettings) -> AdminClient:
    if not settings.bootstrap_servers:
        raise ConfigError(f"{BOOTSTRAP_SERVERS}: required by `topics` (host:port[,host:port])")
    return AdminClient({"bootstrap.servers": settings.bootstrap_servers, **settings.kafka_client, **client_logging()})


def _existing(admin: AdminClient, settings: EngineSettings, timeout_s: float) -> dict[str, int]:
    """`topic -> partitions` of the topics the broker has."""
    try:
        metadata = admin.list_topics(timeout=timeout_s)
    except KafkaException as exc:
        raise ConfigError(f"{BOOTSTRAP_SERVERS}: cannot reach {settings.bootstrap_servers} within "
                          f"{timeout_s:.0f} s ({exc.args[0]}); check the address and that the broker runs") from exc
    return {name: len(meta.partitions) for name, meta in metadata.topics.items()
            if meta.error is None and meta.partitions}


def ensure_topics(settings: EngineSettings, *, create: bool, partitions: int = DEFAULT_PARTITIONS,
                  replication: int = DEFAULT_REPLICATION, timeout_s: float = 15.0) -> list[TopicState]:
    """The configured topics as the broker has them, after creating the missing ones when `create` is set.

    A topic that another client creates at the same moment counts as existing.

    Raises:
        ConfigError: no broker address, the broker does not answer, or it refuses to create a topic (the
            message names the topic's key and the broker's reason).
    """
    admin = _admin(settings)
    existing = _existing(admin, settings, timeout_s)
    wanted = settings.topics_by_key()
    missing = list(dict.fromkeys(topic for _key, topic in wanted if topic not in existing))
    created: set[str] = set()
    if create and missing:
        futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=replication)
                                       for topic in missing], operation_timeout=timeout_s,
                                      request_timeout=timeout_s)
        for topic, future in futures.items():
            try:
                future.result(timeout=timeout_s)
                created.add(topic)
            except KafkaException as exc:
                error = exc.args[0]
                if isinstance(error, KafkaError) and error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                    continue
                key = next(key for key, name in wanted if name == topic)
                raise ConfigError(f"{key}: the broker refused to create topic {topic!r} with {partitions} "
                                  f"partition(s) and replication factor {replication}: {error}") from exc
        existing = _existing(admin, settings, timeout_s)
    return [TopicState(key, topic, existing.get(topic), topic in created) for key, topic in wanted]


def print_topics(states: list[TopicState], out: TextIO | None = None) -> None:
    for state in states:
        print(state.line(), file=out or sys.stdout)


def run_topics(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """The `topics` command: list (and with `--create` create) the topics; the exit code."""
    if args.partitions < 1 or args.replication < 1:
        raise ConfigError("--partitions and --replication: expected integers >= 1")
    settings = engine_settings(load_conf(args.conf, args.set))
    states = ensure_topics(settings, create=args.create, partitions=args.partitions, replication=args.replication)
    print_topics(states, out or sys.stdout)
    return 0 if all(state.partitions is not None for state in states) else 1


def add_parser(sub: Any) -> None:
    """Register `topics` on the command line's subparsers."""
    topics = sub.add_parser("topics", help="list the six topics the configuration names; --create creates "
                            "the missing ones (exit 0 all exist, 1 some missing, 2 errors)")
    topics.add_argument("--conf", required=True, help="properties file (engine.kafka.* keys)")
    topics.add_argument("--create", action="store_true", help="create the missing topics (existing ones are "
                        "left as they are)")
    topics.add_argument("--partitions", type=int, default=DEFAULT_PARTITIONS,
                        help=f"partitions of each created topic (default {DEFAULT_PARTITIONS})")
    topics.add_argument("--replication", type=int, default=DEFAULT_REPLICATION,
                        help=f"replication factor of each created topic (default {DEFAULT_REPLICATION}; "
                        "use 3 on a production cluster)")
    topics.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override one key")
    topics.set_defaults(func=run_topics)


def main(argv: list[str] | None = None) -> int:
    """`python -m streaming.topics ...`: the command without the `placement-engine` entry point."""
    parser = argparse.ArgumentParser(prog="placement-engine")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["topics", *(sys.argv[1:] if argv is None else argv)])
    try:
        return args.func(args)
    except ConfigError as exc:
        print(f"placement-engine: configuration error: {exc}", file=sys.stderr)
        return 2


__all__ = ["DEFAULT_PARTITIONS", "DEFAULT_REPLICATION", "TopicState", "add_parser", "ensure_topics", "run_topics"]

if __name__ == "__main__":
    sys.exit(main())

