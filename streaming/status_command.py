"""`placement-engine status --conf FILE [--cluster C] [--dir DIR] [--json]`: the latest status of each cluster.

One job: read the clusters' status records (`placement.cluster.status`, docs/operations.md) from the status
topic (`engine.kafka.statusTopic`, from its beginning to its end) or from a replay's `DIR/status/`, keep the
latest record of each (cluster, shard), combine a cluster's shards and print one row per cluster; with
`--cluster C`, that cluster's racks and their write share, observed against expected, below its row.

Combining shards: with `engine.shardsPerCluster` > 1 each shard writes its own record. Ledger counts and
the write share are each shard's own (its requests), so they are summed; the topology (bookies, racks,
topology version) is the same in every shard and taken from the newest record.

AGE is how long before the reference time the cluster's latest record was written, in event time: the
wall clock for the topic (a cluster's status is written when it changes, at most once per
`engine.statusIntervalSeconds`, so a quiet cluster's age grows while nothing is wrong), and the latest
record time of all clusters for a replay's folder (the end of its recording).

Exit code: 0 when a status was printed, 1 when there is no status record (for `--cluster C`: none of C),
2 for a configuration error, an unreachable broker or a missing topic (one line, as for every command).

Reading the topic: an assigned consumer (no consumer group) reads every partition from its first offset
until librdkafka reports the partition's end, which it takes from the fetch responses, not from the
broker's offset lookup (ListOffsets; wrong on some brokers, `streaming.kafka_source`). Cost: the whole
retained topic is read; a retention of a day or two on the status topic keeps that small.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from events import format_time
from state.status import STATUS_TYPE

from .alert_consumer import CONNECT_TIMEOUT_S
from .config import ConfigError, load_conf
from .kafka_health import client_logging
from .settings import BOOTSTRAP_SERVERS, EngineSettings, engine_settings

STATUS_TOPIC_KEY = "engine.kafka.statusTopic"
READ_GROUP = "placement-engine-status"
"""The consumer's group.id: librdkafka requires one; the command never joins nor commits to it."""

BOOKIE_COUNTS = ("writable", "readonly", "pending_departure", "default_rack", "join_failures", "flapping")
LEDGER_COUNTS = ("remembered", "not_adhering", "re_adhere_possible")


@dataclass(frozen=True, slots=True)
class StatusSource:
    """Where the records came from, in the words of the table's first line, and whether the reference time
    for ages is the wall clock (a topic) or the latest record (a replay's folder)."""

    description: str
    wall_clock: bool


# -- reading ------------------------------------------------------------------------------------------


def read_dir(folder: str | Path) -> list[dict[str, Any]]:
    """The status records of a replay's output folder (`DIR/status/*.jsonl`), in the order written.

    Raises:
        ConfigError: `folder` has no `status/` folder (naming `--dir`).
    """
    status_dir = Path(folder) / "status"
    if not status_dir.is_dir():
        raise ConfigError(f"--dir {folder}: no status/ folder in it; name the --out folder of a replay or demo")
    records = []
    for path in sorted(status_dir.glob("*.jsonl")):
        with open(path, encoding="utf-8") as lines:
            records.extend(_parse(line) for line in lines if line.strip())
    return [record for record in records if record is not None]


def read_topic(settings: EngineSettings, timeout_s: float = CONNECT_TIMEOUT_S) -> list[dict[str, Any]]:
    """The status records on `settings.status_topic`, from each partition's first offset to its end.

    Args:
        timeout_s: how long the broker may leave a call unanswered (the first metadata call, then any
            stretch without a record or a partition end) before the command stops.

    Raises:
        ConfigError: no broker address, the broker does not answer (naming `engine.kafka.bootstrapServers`,
            in the words `run` uses), or the topic does not exist (naming `engine.kafka.statusTopic`).
    """
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    if not settings.bootstrap_servers:
        raise ConfigError(f"{BOOTSTRAP_SERVERS}: required by `status` without --dir (host:port[,host:port])")
    topic = settings.status_topic
    consumer = Consumer({**settings.kafka_client, "bootstrap.servers": settings.bootstrap_servers,
                         "group.id": READ_GROUP, "enable.auto.commit": False, "enable.partition.eof": True,
                         "auto.offset.reset": "earliest", "fetch.wait.max.ms": 10, **client_logging()})
    unreachable = (f"{BOOTSTRAP_SERVERS}: cannot reach {settings.bootstrap_servers} within {timeout_s:.0f} s "
                   "({}); check the address and that the broker runs")
    try:
        try:
            metadata = consumer.list_topics(timeout=timeout_s)
        except KafkaException as exc:
            raise ConfigError(unreachable.format(exc.args[0])) from None
        meta = metadata.topics.get(topic)
        if meta is None or meta.error is not None or not meta.partitions:
            raise ConfigError(f"{STATUS_TOPIC_KEY}: topic {topic!r} does not exist on {settings.bootstrap_servers}; "
                              "create it (placement-engine topics --create) or name an existing topic")
        # Offset 0 with auto.offset.reset=earliest: the first retained record, without an offset lookup.
        consumer.assign([TopicPartition(topic, partition, 0) for partition in sorted(meta.partitions)])
        pending = set(meta.partitions)
        records = []
        deadline = time.monotonic() + timeout_s
        while pending:
            messages = consumer.consume(num_messages=1000, timeout=0.5)
            for message in messages:
                error = message.error()
                if error is None:
                    records.append(_parse(message.value()))
                elif error.code() == KafkaError._PARTITION_EOF:
                    pending.discard(message.partition())
                else:
                    raise ConfigError(f"{STATUS_TOPIC_KEY}: reading topic {topic!r} partition "
                                      f"{message.partition()} failed: {error.str()}")
            if messages:
                deadline = time.monotonic() + timeout_s
            elif time.monotonic() > deadline:
                raise ConfigError(unreachable.format(f"no answer while reading {topic!r}"))
        return [record for record in records if record is not None]
    finally:
        consumer.close()


def _parse(value: str | bytes | None) -> dict[str, Any] | None:
    """A status record from a JSON line or Kafka value; None for anything else (other records are skipped)."""
    try:
        record = json.loads(value) if value else None
    except ValueError:
        return None
    if not isinstance(record, dict) or record.get("type") != STATUS_TYPE or not isinstance(record.get("cluster"), str):
        return None
    return record


# -- combining ----------------------------------------------------------------------------------------


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _time_ms(record: Mapping[str, Any]) -> int:
    return _int(record.get("time_ms"))


def latest_by_shard(records: Iterable[Mapping[str, Any]]) -> dict[tuple[str, int], Mapping[str, Any]]:
    """The latest record of each (cluster, shard): the greatest `time_ms`, of equal ones the last read
    (a batch written again after a failure repeats records, never goes back). Cost: O(records)."""
    latest: dict[tuple[str, int], tuple[int, int, Mapping[str, Any]]] = {}
    for position, record in enumerate(records):
        key = (record["cluster"], _int(record.get("shard")))
        rank = (_time_ms(record), position)
        if key not in latest or rank >= latest[key][:2]:
            latest[key] = (*rank, record)
    return {key: value[2] for key, value in sorted(latest.items())}


def _write_share(records: Sequence[Mapping[str, Any]], newest: Mapping[str, Any]) -> dict[str, Any] | None:
    """The shards' write shares as one: placements per rack summed over the shards' windows; the observed
    share is of the sum, the expected share each shard's weighted by its placements."""
    shares = [r["write_share"] for r in records if isinstance(r.get("write_share"), Mapping)]
    if not shares:
        return None
    placements: dict[str, int] = {}
    expected: dict[str, float] = {}
    for share in shares:
        weight = _int(share.get("placements"))
        for rack in share.get("racks") or []:
            name = str(rack.get("rack"))
            placements[name] = placements.get(name, 0) + _int(rack.get("placements"))
            share_expected = rack.get("expected")
            expected[name] = expected.get(name, 0.0) + (
                weight * share_expected if isinstance(share_expected, int | float) else 0.0)
    total = sum(_int(share.get("placements")) for share in shares)
    basis = (newest.get("write_share") or shares[-1]).get("basis")
    return {
        "window_decisions": _int(shares[-1].get("window_decisions")),
        "decisions": sum(_int(share.get("decisions")) for share in shares),
        "placements": total,
        "basis": basis,
        "racks": [{"rack": rack, "placements": placements.get(rack, 0),
                   "observed": round(placements.get(rack, 0) / total, 6) if total else 0.0,
                   "expected": round(expected.get(rack, 0.0) / total, 6) if total else 0.0}
                  for rack in sorted(placements.keys() | expected.keys())],
    }


def combine(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One cluster's status from the latest record of each of its shards (see the module docstring)."""
    newest = max(records, key=_time_ms)
    bookies = newest.get("bookies") if isinstance(newest.get("bookies"), Mapping) else {}
    skew = [r.get("skew") for r in records if isinstance(r.get("skew"), Mapping)]
    scopes = sorted({str(scope) for s in skew for scope in s.get("scopes") or []})
    return {
        "cluster": newest["cluster"],
        "policy": newest.get("policy"),
        "topology_version": newest.get("topology_version"),
        "time": newest.get("time") or format_time(_time_ms(newest)),
        "time_ms": _time_ms(newest),
        "shards": _int(newest.get("shards")) or 1,
        "shards_reported": len(records),
        "bookies": {name: _int(bookies.get(name)) for name in BOOKIE_COUNTS},
        "ledgers": {name: sum(_int((r.get("ledgers") or {}).get(name)) for r in records) for name in LEDGER_COUNTS},
        "racks": [dict(rack) for rack in newest.get("racks") or []],
        "write_share": _write_share(records, newest),
        "skew": {"open": any(bool(s.get("open")) for s in skew), "scopes": scopes},
    }


def cluster_statuses(records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each cluster's combined status (`combine`), sorted by cluster."""
    by_cluster: dict[str, list[Mapping[str, Any]]] = {}
    for (cluster, _shard), record in latest_by_shard(records).items():
        by_cluster.setdefault(cluster, []).append(record)
    return [combine(shards) for _cluster, shards in sorted(by_cluster.items())]


# -- printing -----------------------------------------------------------------------------------------


def _clock(ms: int) -> str:
    """An event time to the second, as an operator reads it: `2026-11-18T11:06:40Z`."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms // 1000))


def _age(seconds: float) -> str:
    if seconds < 0:
        return "ahead"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 120 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.0f} h"
    return f"{seconds / 86400:.0f} d"


def _skew(status: Mapping[str, Any]) -> str:
    skew = status["skew"]
    if not skew["open"]:
        return "-"
    return "open: " + ", ".join(skew["scopes"]) if skew["scopes"] else "open"


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]], align: str) -> list[str]:
    """Columns padded to their widest cell, column i left-aligned where `align[i]` is "l", else right-aligned."""
    cells = [[str(cell) for cell in row] for row in [header, *rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    return ["  ".join(cell.ljust(width) if side == "l" else cell.rjust(width)
                      for cell, width, side in zip(row, widths, align)).rstrip() for row in cells]


CLUSTER_HEADER = ("CLUSTER", "POLICY", "WRITABLE", "READ-ONLY", "PENDING", "DEFAULT-RACK", "JOIN-FAILED",
                  "NOT-ADHERING", "RE-ADHERABLE", "TOPOLOGY", "EVENT TIME", "AGE", "SKEW")


def cluster_rows(statuses: Sequence[Mapping[str, Any]], reference_ms: int) -> list[str]:
    """The table: one row per cluster (bookie counts from the newest shard, ledger counts summed)."""
    rows = []
    for status in statuses:
        bookies, ledgers = status["bookies"], status["ledgers"]
        cluster = status["cluster"]
        if status["shards_reported"] < status["shards"]:
            cluster += f" ({status['shards_reported']}/{status['shards']} shards)"
        rows.append((cluster, str(status["policy"] or "?"), bookies["writable"], bookies["readonly"],
                     bookies["pending_departure"], bookies["default_rack"], bookies["join_failures"],
                     ledgers["not_adhering"], ledgers["re_adhere_possible"], status["topology_version"],
                     _clock(status["time_ms"]), _age((reference_ms - status["time_ms"]) / 1000), _skew(status)))
    return _table(CLUSTER_HEADER, rows, "llrrrrrrrrrrl")


def _share(value: Any) -> str:
    return f"{100 * value:.1f}%" if isinstance(value, int | float) else "-"


def cluster_detail(status: Mapping[str, Any]) -> list[str]:
    """One cluster in full: its counts in words, then its racks with bookies and write share."""
    bookies, ledgers = status["bookies"], status["ledgers"]
    lines = [
        f"cluster {status['cluster']}: policy {status['policy'] or '?'}, topology version "
        f"{status['topology_version']}, status of {_clock(status['time_ms'])} ({status['shards_reported']} of "
        f"{status['shards']} shard{'s' if status['shards'] != 1 else ''} reported)",
        f"  bookies: {bookies['writable']} writable, {bookies['readonly']} read-only, "
        f"{bookies['pending_departure']} pending departure, {bookies['default_rack']} on the default rack, "
        f"{bookies['join_failures']} failed to join, {bookies['flapping']} flapping",
        f"  ledgers: {ledgers['remembered']} remembered, {ledgers['not_adhering']} not adhering to the placement "
        f"rule, {ledgers['re_adhere_possible']} placed under a relaxed rule and re-adherable now",
    ]
    if status["skew"]["open"]:
        lines.append(f"  write skew: {_skew(status)} (placement-engine alerts --type placement.cluster.skew "
                     "names the offenders)")
    else:
        lines.append("  write skew: no open alert")
    share = status["write_share"]
    shares = {rack["rack"]: rack for rack in share["racks"]} if share else {}
    if share:
        basis = "disk weights" if share.get("basis") == "weights" else "writable bookies"
        lines.append(f"  write share by rack over the last {share['decisions']} placing decisions "
                     f"({share['placements']} bookies placed; expected share by {basis}):")
    else:
        lines.append("  write share: not measured (engine.skew.windowDecisions=0)")
    topology = {rack["rack"]: rack for rack in status["racks"]}
    rows = []
    for name in sorted(set(topology) | set(shares)):
        rack, placed = topology.get(name, {}), shares.get(name, {})
        observed, expected = placed.get("observed"), placed.get("expected")
        ratio = f"{observed / expected:.2f}" if isinstance(observed, int | float) and expected else "-"
        rows.append((name, _int(rack.get("writable")), _int(rack.get("readonly")),
                     placed.get("placements", "-") if share else "-", _share(observed) if share else "-",
                     _share(expected) if share else "-", ratio))
    if rows:
        lines += ["    " + line for line in _table(("RACK", "WRITABLE", "READ-ONLY", "PLACEMENTS", "OBSERVED",
                                                      "EXPECTED", "OBSERVED/EXPECTED"), rows, "lrrrrrr")]
    return lines


def render(statuses: Sequence[Mapping[str, Any]], source: StatusSource, reference_ms: int,
           cluster: str | None) -> list[str]:
    """The command's text: where the status comes from, the table, and with `cluster` its detail."""
    reference = _clock(reference_ms)
    ages = f"AGE: before the wall clock, {reference}" if source.wall_clock else \
        f"AGE: before the latest record, {reference}"
    count = f"{len(statuses)} cluster{'s' if len(statuses) != 1 else ''}"
    lines = [f"placement-engine status: {count} from {source.description} ({ages})", ""]
    lines += cluster_rows(statuses, reference_ms)
    if cluster is not None:
        lines.append("")
        lines += cluster_detail(statuses[0])
    return lines


# -- the command --------------------------------------------------------------------------------------


def _load(args: argparse.Namespace) -> tuple[list[dict[str, Any]], StatusSource]:
    if args.dir:
        folder = Path(args.dir) / "status"
        return read_dir(args.dir), StatusSource(f"{folder}", wall_clock=False)
    if not args.conf:
        raise ConfigError("status: give --conf FILE (the status topic of a running job) or --dir DIR (a replay's "
                          "output folder)")
    settings = engine_settings(load_conf(args.conf, args.set))
    records = read_topic(settings)
    return records, StatusSource(f"topic {settings.status_topic} at {settings.bootstrap_servers}", wall_clock=True)


def run_status(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None,
               now_ms: int | None = None) -> int:
    """The `status` command: read, combine, print; the exit code (see the module docstring).

    Args:
        now_ms: the wall clock in ms (tests inject it); ages against a topic's records count from it.
    """
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    records, source = _load(args)
    statuses = cluster_statuses(records)
    if not statuses:
        print(f"placement-engine status: no status record in {source.description} (the job writes a cluster's "
              "status when it changes, at most once per engine.statusIntervalSeconds of event time; "
              "engine.statusIntervalSeconds=0 writes none)", file=err)
        return 1
    if source.wall_clock:
        reference_ms = now_ms if now_ms is not None else int(time.time() * 1000)
    else:
        reference_ms = max(status["time_ms"] for status in statuses)
    if args.cluster is not None:
        chosen = [status for status in statuses if status["cluster"] == args.cluster]
        if not chosen:
            known = ", ".join(status["cluster"] for status in statuses)
            print(f"placement-engine status: no status record of cluster {args.cluster!r} in "
                  f"{source.description} (clusters with one: {known})", file=err)
            return 1
        statuses = chosen
    if args.json:
        document = {"source": source.description, "reference_time": format_time(reference_ms),
                    "clusters": [{**status, "age_seconds": round((reference_ms - status["time_ms"]) / 1000, 3)}
                                 for status in statuses]}
        out.write(json.dumps(document, indent=2, sort_keys=True) + "\n")
    else:
        out.write("\n".join(render(statuses, source, reference_ms, args.cluster)) + "\n")
    out.flush()
    return 0


def add_parser(sub: Any) -> None:
    """Register `status` on the command line's subparsers."""
    status = sub.add_parser("status", help="the latest status of each cluster (bookies, placement debt, write "
                            "share) from the status topic or a replay's folder (exit 0 shown, 1 none, 2 errors)")
    status.add_argument("--conf", default=None, help="properties file naming the broker and "
                        "engine.kafka.statusTopic (not needed with --dir)")
    status.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override one key")
    status.add_argument("--cluster", default=None, help="only this cluster, with its racks and write share")
    status.add_argument("--dir", default=None, metavar="DIR",
                        help="read DIR/status/ (a replay's or demo's --out folder) instead of the topic")
    status.add_argument("--json", action="store_true", help="print the combined status as one JSON document")
    status.set_defaults(func=run_status)


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m streaming.status_command ...`: the command without the `placement-engine` entry point."""
    parser = argparse.ArgumentParser(prog="placement-engine")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["status", *(sys.argv[1:] if argv is None else argv)])
    try:
        return args.func(args)
    except ConfigError as exc:
        print(f"placement-engine: configuration error: {exc}", file=sys.stderr)
        return 2


__all__ = ["add_parser", "cluster_statuses", "combine", "latest_by_shard", "read_dir", "read_topic",
           "render", "run_status"]

if __name__ == "__main__":
    sys.exit(main())
