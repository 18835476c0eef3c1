"""`placement-engine alerts`: tail the alert topic, drop duplicates, filter, print.

A downstream consumer written with kafka-python on purpose: the engine produces with confluent-kafka,
so this proves the alert stream is plain Kafka + CloudEvents that any client reads. Both CloudEvents
Kafka bindings are understood: binary mode (`ce_*` headers, the event's `data` as the value) and
structured mode (the whole event as JSON in the value).

The sink is at-least-once, so a replayed batch can deliver an alert twice with the same `id`; the
last `--dedupe-window` ids are remembered and repeats are skipped.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, TextIO

from state.outputs import ERROR, INFO, WARNING

from .config import load_conf
from .settings import engine_settings

SEVERITIES = (INFO, WARNING, ERROR)
"""The engine's alert severities, lowest first (`data.severity`)."""


def event_from_kafka(value: bytes | None, headers: Iterable[tuple[str, bytes]] | None) -> dict[str, Any] | None:
    """A CloudEvent from a Kafka record in either binding; None if the record is not one."""
    header_map = {k: (v.decode("utf-8", "replace") if isinstance(v, bytes) else v) for k, v in (headers or [])}
    if "ce_id" in header_map:
        event = {k[3:]: v for k, v in header_map.items() if k.startswith("ce_")}
        try:
            event["data"] = json.loads(value) if value else None
        except ValueError:
            event["data"] = (value or b"").decode("utf-8", "replace")
        event.setdefault("datacontenttype", header_map.get("content-type", "application/json"))
        return event
    try:
        event = json.loads(value) if value else None
    except ValueError:
        return None
    return event if isinstance(event, dict) and "id" in event and "type" in event else None


def severity_of(event: Mapping[str, Any]) -> str:
    data = event.get("data")
    if isinstance(data, Mapping) and data.get("severity") in SEVERITIES:
        return data["severity"]
    return "info"


class Deduplicator:
    """Remembers the last `window` ids; `seen(id)` is True for a repeat."""

    def __init__(self, window: int = 100_000) -> None:
        self.window = window
        self._ids: OrderedDict[str, None] = OrderedDict()

    def seen(self, event_id: str) -> bool:
        if event_id in self._ids:
            self._ids.move_to_end(event_id)
            return True
        self._ids[event_id] = None
        if len(self._ids) > self.window:
            self._ids.popitem(last=False)
        return False


def matches(event: Mapping[str, Any], clusters: set[str], types: list[str], min_severity: str) -> bool:
    data = event.get("data") if isinstance(event.get("data"), Mapping) else {}
    cluster = data.get("cluster") or str(event.get("source", "")).rpartition("/")[2]
    if clusters and cluster not in clusters:
        return False
    if types and not any(str(event.get("type", "")).startswith(t) for t in types):
        return False
    return SEVERITIES.index(severity_of(event)) >= SEVERITIES.index(min_severity)


def format_line(event: Mapping[str, Any]) -> str:
    data = event.get("data") if isinstance(event.get("data"), Mapping) else {}
    message = data.get("message") or data.get("summary") or ""
    return (f"{event.get('time', '?')} {severity_of(event).upper():<8} {event.get('type', '?')} "
            f"{event.get('subject', '')} {message}".rstrip())


def filter_events(records: Iterable[tuple[bytes | None, Any]], clusters: set[str], types: list[str],
                  min_severity: str, dedupe: Deduplicator) -> Iterator[dict[str, Any]]:
    """Events from (value, headers) pairs, duplicates and non-matching events dropped."""
    for value, headers in records:
        event = event_from_kafka(value, headers)
        if event is None or dedupe.seen(str(event["id"])):
            continue
        if matches(event, clusters, types, min_severity):
            yield event


def tail(bootstrap: str, topic: str, *, from_beginning: bool, idle_timeout_s: float | None,
         max_messages: int | None) -> Iterator[tuple[bytes | None, Any]]:
    """(value, headers) of the topic's records with kafka-python; stops when idle or at max_messages."""
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap.split(","), group_id=None,
                             auto_offset_reset="earliest" if from_beginning else "latest",
                             enable_auto_commit=False,
                             consumer_timeout_ms=int(idle_timeout_s * 1000) if idle_timeout_s else float("inf"))
    count = 0
    try:
        for record in consumer:
            yield record.value, record.headers
            count += 1
            if max_messages is not None and count >= max_messages:
                return
    finally:
        consumer.close()


def run_alerts(args: argparse.Namespace, out: TextIO = sys.stdout) -> int:
    settings = engine_settings(load_conf(args.conf, args.set))
    settings.require_alerts_broker()
    records = tail(settings.bootstrap_servers, settings.alerts_topic, from_beginning=args.from_beginning,
                   idle_timeout_s=args.idle_timeout, max_messages=args.max_messages)
    for event in filter_events(records, set(args.cluster), args.type, args.severity, Deduplicator()):
        out.write((json.dumps(event, sort_keys=True) if args.json else format_line(event)) + "\n")
        out.flush()
    return 0


def add_parser(sub) -> None:
    alerts = sub.add_parser("alerts", help="tail the alert topic: de-duplicated, filtered, readable")
    alerts.add_argument("--conf", required=True)
    alerts.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    alerts.add_argument("--cluster", action="append", default=[], help="only these clusters (repeatable)")
    alerts.add_argument("--type", action="append", default=[], help="only types starting with this (repeatable)")
    alerts.add_argument("--severity", choices=SEVERITIES, default="info", help="minimum severity")
    alerts.add_argument("--json", action="store_true", help="print each alert as one JSON line")
    alerts.add_argument("--from-beginning", action="store_true", help="start at the oldest retained alert")
    alerts.add_argument("--idle-timeout", type=float, default=None, metavar="SECONDS",
                        help="stop after this long without a new record")
    alerts.add_argument("--max-messages", type=int, default=None, help="stop after this many records")
    alerts.set_defaults(func=lambda a: run_alerts(a))
