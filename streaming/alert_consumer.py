"""`placement-engine alerts`: tail the alert topic, drop duplicates, filter, print.

A downstream consumer written with kafka-python on purpose: the engine produces with confluent-kafka,
so this proves the alert stream is plain Kafka + CloudEvents that any client reads. Both CloudEvents
Kafka bindings are understood: binary mode (`ce_*` headers, the event's `data` as the value) and
structured mode (the whole event as JSON in the value).

The sink is at-least-once, so a replayed batch can deliver an alert twice with the same `id`; the
last `--dedupe-window` ids are remembered and repeats are skipped.

A readable line names the cluster and says what happened in a few words built from the alert's
`data` (`describe`); `--json` prints the whole event. An unreachable broker or a missing topic stops
the command with one line and exit code 2, as `run` does.

A renamed alert type (`state.outputs.ALERT_TYPE_ALIASES`) is read under either name: its line is
built alike, and `--type` with either name (or a prefix of it) matches events of both. Each event is
printed with the type it carries.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, TextIO
from urllib.parse import unquote

from state.outputs import (
    ALERT_LEDGER_NOT_ADHERING,
    ALERT_LEDGER_RE_ADHERE,
    ALERT_LEDGER_RE_ADHERE_OLD_NAME,
    ALERT_TYPE_ALIASES,
    ERROR,
    INFO,
    WARNING,
    current_alert_type,
)

from .config import ConfigError, load_conf
from .settings import BOOTSTRAP_SERVERS, engine_settings

SEVERITIES = (INFO, WARNING, ERROR)
"""The engine's alert severities, lowest first (`data.severity`)."""

CONNECT_TIMEOUT_S = 15.0
"""How long `alerts` waits for the broker's first answer before it stops (as `run`'s start-up check)."""

MAX_DETAIL = 160
"""Longest free-text part (a constraint, a problem, a reason) quoted in a readable line."""

KAFKA_LOGGER = "kafka"

ALERT_CLUSTER_SKEW = "placement.cluster.skew"
SKEW_OFFENDERS_SHOWN = 2
"""Offenders of a skew alert named in its line (the rest are counted)."""

#: Each current alert type -> its old names (`ALERT_TYPE_ALIASES` read backwards).
_OLD_NAMES: dict[str, list[str]] = {}
for _old, _new in ALERT_TYPE_ALIASES.items():
    _OLD_NAMES.setdefault(_new, []).append(_old)


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


def cluster_of(event: Mapping[str, Any]) -> str:
    """`data.cluster`, else the cluster named by `source` (`placement-engine/<percent-encoded cluster>`)."""
    data = event.get("data") if isinstance(event.get("data"), Mapping) else {}
    return str(data.get("cluster") or unquote(str(event.get("source", "")).rpartition("/")[2]) or "?")


def type_names(alert_type: str) -> list[str]:
    """The names an alert type is known by: its current name first, then its old ones."""
    current = current_alert_type(alert_type)
    return [current, *_OLD_NAMES.get(current, ())]


def matches(event: Mapping[str, Any], clusters: set[str], types: list[str], min_severity: str) -> bool:
    """Whether the event passes the filters: one of `clusters` (any if empty), a type that one of
    `types` is a prefix of (of its current or an old name; any if empty), and at least `min_severity`."""
    cluster = cluster_of(event)
    if clusters and cluster not in clusters:
        return False
    if types:
        names = type_names(str(event.get("type", "")))
        if not any(name.startswith(prefix) for name in names for prefix in types):
            return False
    return SEVERITIES.index(severity_of(event)) >= SEVERITIES.index(min_severity)


def _cut(text: Any) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= MAX_DETAIL else text[:MAX_DETAIL - 3].rstrip() + "..."


def _first_clause(text: Any) -> str:
    """A policy message up to its first `;` (the rest repeats it for the stabilized topology)."""
    return _cut(str(text).split(";", 1)[0])


def _ledger(data: Mapping[str, Any]) -> str:
    return f"ledger {data['ledger_id']}" if data.get("ledger_id") is not None else "the request"


def _fix(data: Mapping[str, Any]) -> str:
    fix = data.get("fix") if isinstance(data.get("fix"), Mapping) else {}
    if not fix.get("possible"):
        return "no fix possible now"
    moves = ", ".join(f"{r.get('bookie')} with {r.get('with')}" for r in fix.get("replace") or [])
    reaches = fix.get("adherence", "?")
    return f"fix: replace {moves} ({reaches})" if moves else f"fix: re-place the ledger ({reaches})"


def _problems(data: Mapping[str, Any]) -> str:
    problems = [str(p) for p in data.get("problems") or []]
    if not problems:
        return f"adherence {data.get('adherence', '?')}"
    more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
    return _cut(problems[0]) + more


def _decision_failed(data: Mapping[str, Any]) -> str:
    return (f"{data.get('request_type', 'request')} for {_ledger(data)} failed with {data.get('code', '?')}: "
            f"{_first_clause(data.get('constraint', ''))}")


def _decision_not_adhering(data: Mapping[str, Any]) -> str:
    ensemble = ", ".join(data.get("ensemble") or [])
    return (f"{data.get('request_type', 'request')} for {_ledger(data)} answered adherence "
            f"{data.get('adherence', '?')} on [{ensemble}]")


def _ledger_not_adhering(data: Mapping[str, Any]) -> str:
    return f"no longer adheres: {_problems(data)}; {_fix(data)}"


def _ledger_re_adhere(data: Mapping[str, Any]) -> str:
    if data.get("problems"):
        return f"placed under a relaxed rule ({_problems(data)}) and can now be fixed; {_fix(data)}"
    return f"adheres but still on a fallback it no longer needs; {_fix(data)}"


def _share(value: Any) -> str:
    return f"{float(value) * 100:.1f}%"


_SKEW_SCOPES = {"create": "creates", "replace": "replacements"}


def _cluster_skew(data: Mapping[str, Any]) -> str:
    offenders = [o for o in data.get("offenders") or [] if isinstance(o, Mapping)]
    if not offenders:
        return _cut(data.get("message", ""))
    named = "; ".join(f"{o['level']} {o['name']} takes {_share(o['observed_share'])} "
                      f"(expected {_share(o['expected_share'])})" for o in offenders[:SKEW_OFFENDERS_SHOWN])
    more = f" (+{len(offenders) - SKEW_OFFENDERS_SHOWN} more)" if len(offenders) > SKEW_OFFENDERS_SHOWN else ""
    scope = data.get("scope", "?")
    what = _SKEW_SCOPES.get(scope, f"{scope} placements")
    over = f" over {data['placements']} placements" if data.get("placements") else ""
    return f"{what} skewed{over}: {named}{more}"


def _default_rack(data: Mapping[str, Any]) -> str:
    why = "unmapped" if data.get("unmapped") else "configured there"
    never = "; enforcement is on, so nothing is placed on it" if data.get("enforced") else ""
    return f"in the default location {data.get('location', '?')} ({why}){never}"


def _join_failed(data: Mapping[str, Any]) -> str:
    return f"cannot join the topology: {_cut(data.get('reason', ''))}"


def _flapping(data: Mapping[str, Any]) -> str:
    return (f"left {data.get('departures', '?')} times within {data.get('window_seconds', '?')} s "
            f"(threshold {data.get('threshold', '?')}) at {data.get('location', '?')}")


def _departure_pending(data: Mapping[str, Any]) -> str:
    how = "turned read-only" if data.get("readonly") else "lost"
    return f"{how}; kept as a last resort until {data.get('expires_at', '?')}"


def _departure_ended(data: Mapping[str, Any]) -> str:
    if data.get("outcome") == "returned":
        return "came back inside the stabilization period"
    return (f"stabilization period over ({data.get('outcome', '?')}): the departure is final, its ledgers are "
            "re-checked")


DESCRIPTIONS: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "placement.decision.failed": _decision_failed,
    "placement.decision.not_adhering": _decision_not_adhering,
    ALERT_LEDGER_NOT_ADHERING: _ledger_not_adhering,
    ALERT_LEDGER_RE_ADHERE: _ledger_re_adhere,
    ALERT_LEDGER_RE_ADHERE_OLD_NAME: _ledger_re_adhere,
    ALERT_CLUSTER_SKEW: _cluster_skew,
    "placement.bookie.default_rack": _default_rack,
    "placement.bookie.join_failed": _join_failed,
    "placement.bookie.flapping": _flapping,
    "placement.bookie.departure_pending": _departure_pending,
    "placement.bookie.departure_pending.resolved": _departure_ended,
}
"""One-line summaries by alert type (and old name), built from the `data` fields docs/alerts.md lists."""


def describe(event: Mapping[str, Any]) -> str:
    """What the alert says, in a few words: from its type's `data` fields (docs/alerts.md); a resolving
    event gives its `reason`; an unknown type its `message`, `summary` or `reason`."""
    data = event.get("data") if isinstance(event.get("data"), Mapping) else {}
    kind = str(event.get("type", ""))
    build = DESCRIPTIONS.get(kind)
    if build is not None:
        try:
            return build(data)
        except (KeyError, TypeError, AttributeError, ValueError):
            pass
    text = data.get("message") or data.get("summary") or data.get("reason") or ""
    if kind.endswith(".resolved") and data.get("reason"):
        text = f"resolved: {data['reason']}"
    return _cut(text)


def format_line(event: Mapping[str, Any]) -> str:
    """`TIME SEVERITY CLUSTER TYPE SUBJECT: what happened`, one line."""
    message = describe(event)
    line = (f"{event.get('time', '?')} {severity_of(event).upper():<7} {cluster_of(event)} "
            f"{event.get('type', '?')} {event.get('subject', '')}".rstrip())
    return f"{line}: {message}" if message else line


def filter_events(records: Iterable[tuple[bytes | None, Any]], clusters: set[str], types: list[str],
                  min_severity: str, dedupe: Deduplicator) -> Iterator[dict[str, Any]]:
    """Events from (value, headers) pairs, duplicates and non-matching events dropped."""
    for value, headers in records:
        event = event_from_kafka(value, headers)
        if event is None or dedupe.seen(str(event["id"])):
            continue
        if matches(event, clusters, types, min_severity):
            yield event


def connect(bootstrap: str, topic: str, *, from_beginning: bool, idle_timeout_s: float | None,
            connect_timeout_s: float = CONNECT_TIMEOUT_S):
    """A kafka-python consumer of every partition of `topic`, once the broker has answered.

    Raises:
        ConfigError: no broker answered within `connect_timeout_s` (naming `engine.kafka.bootstrapServers`,
            in the words `run` uses), or the topic does not exist (naming `engine.kafka.alertsTopic`).
    """
    from kafka import KafkaConsumer
    from kafka.errors import KafkaError

    try:
        consumer = KafkaConsumer(bootstrap_servers=bootstrap.split(","), group_id=None,
                                 auto_offset_reset="earliest" if from_beginning else "latest",
                                 enable_auto_commit=False, bootstrap_timeout_ms=int(connect_timeout_s * 1000),
                                 consumer_timeout_ms=int(idle_timeout_s * 1000) if idle_timeout_s else float("inf"))
    except KafkaError as exc:
        raise ConfigError(f"{BOOTSTRAP_SERVERS}: cannot reach {bootstrap} within {connect_timeout_s:.0f} s "
                          f"({exc}); check the address and that the broker runs") from None
    try:
        if topic not in consumer.topics():
            raise ConfigError(f"engine.kafka.alertsTopic: topic {topic!r} does not exist on {bootstrap}; "
                              "create it or name an existing topic")
        consumer.subscribe([topic])
    except BaseException:
        consumer.close()
        raise
    return consumer


def tail(consumer, max_messages: int | None) -> Iterator[tuple[bytes | None, Any]]:
    """(value, headers) of the consumer's records; stops when idle or at max_messages, then closes it."""
    count = 0
    try:
        for record in consumer:
            yield record.value, record.headers
            count += 1
            if max_messages is not None and count >= max_messages:
                return
    finally:
        consumer.close()


def run_alerts(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """The `alerts` command: connect, say where reading starts, print matching alerts until stopped."""
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    settings = engine_settings(load_conf(args.conf, args.set))
    settings.require_alerts_broker()
    # kafka-python logs each failed connection attempt (ERROR) and slow event-loop steps ("Task ... ran
    # for ...s", WARNING): this command reports an unreachable broker itself, in one line, so the client
    # is silent while connecting and shows only its errors while tailing.
    kafka_logger = logging.getLogger(KAFKA_LOGGER)
    level = kafka_logger.level
    kafka_logger.setLevel(logging.CRITICAL)
    try:
        consumer = connect(settings.bootstrap_servers, settings.alerts_topic, from_beginning=args.from_beginning,
                           idle_timeout_s=args.idle_timeout)
        kafka_logger.setLevel(logging.ERROR)
        if not args.from_beginning:
            print(f"placement-engine alerts: waiting for new alerts on {settings.alerts_topic} at "
                  f"{settings.bootstrap_servers} (from the end of the topic; --from-beginning shows the retained "
                  "ones)", file=err, flush=True)
        records = tail(consumer, args.max_messages)
        for event in filter_events(records, set(args.cluster), args.type, args.severity, Deduplicator()):
            out.write((json.dumps(event, sort_keys=True) if args.json else format_line(event)) + "\n")
            out.flush()
    finally:
        kafka_logger.setLevel(level)
    return 0


def add_parser(sub) -> None:
    alerts = sub.add_parser("alerts", help="tail the alert topic: de-duplicated, filtered, readable")
    alerts.add_argument("--conf", required=True)
    alerts.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    alerts.add_argument("--cluster", action="append", default=[], help="only these clusters (repeatable)")
    alerts.add_argument("--type", action="append", default=[], help="only types starting with this (repeatable)")
    alerts.add_argument("--severity", choices=SEVERITIES, default="info", help="minimum severity")
    alerts.add_argument("--json", action="store_true", help="print each alert as one JSON line")
    alerts.add_argument("--from-beginning", action="store_true",
                        help="start at the oldest retained alert (default: only alerts that arrive from now on)")
    alerts.add_argument("--idle-timeout", type=float, default=None, metavar="SECONDS",
                        help="stop after this long without a new record")
    alerts.add_argument("--max-messages", type=int, default=None, help="stop after this many records")
    alerts.set_defaults(func=lambda a: run_alerts(a))
