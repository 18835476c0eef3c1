"""`placement-engine demo`: a synthetic cluster and its traffic, replayed on local Spark.

The scenario (one seeded generator, so the same seed gives the same input): three regions of four
racks with four bookies each, disk reports that drift, a bookie that flaps, a rack that goes down and
comes back, bookies switching to read-only and back, a rack change, thousands of ledger creates,
bookie replaces and ensemble checks, and a few malformed records that must land in the dead letters.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

from events import format_time

from .config import load_conf
from .settings import DEMO_CONF, engine_settings

REGIONS = ("region-a", "region-b", "region-c")
RACKS_PER_REGION = 4
BOOKIES_PER_RACK = 4
CLUSTER = "demo"
START_MS = 1_795_000_000_000  # 2026-11-18T11:06:40Z


def _bookie(region: int, rack: int, index: int) -> str:
    return f"bk-{REGIONS[region][-1]}{rack}{index}.demo:3181"


def generate(requests: int, seed: int) -> list[dict]:
    """The scenario as contract-shaped records, in time order."""
    rng = random.Random(seed)
    locations = {}
    for r in range(len(REGIONS)):
        for k in range(RACKS_PER_REGION):
            for i in range(BOOKIES_PER_RACK):
                locations[_bookie(r, k, i)] = f"/{REGIONS[r]}/rack-{k}"
    bookies = sorted(locations)
    records: list[dict] = []
    now = START_MS

    def emit(kind: str, **fields) -> None:
        records.append({"type": kind, "cluster": CLUSTER, "time": format_time(now), **fields})

    for bookie in bookies:
        emit("bookie_writable", bookie=bookie, location=locations[bookie])
    for bookie in bookies:
        total = 4 * 2**40
        emit("bookie_disk", bookie=bookie, total_disk=total, free_disk=rng.randrange(total // 10, total))
    flapper = bookies[5]
    outage_rack = [b for b in bookies if locations[b] == "/region-b/rack-2"]
    placed: list[list[str]] = []
    step_ms = 50
    for n in range(requests):
        now += step_ms
        # Topology happenings at fixed points of the run.
        if n == requests // 10:
            for _ in range(4):
                emit("bookie_lost", bookie=flapper)
                now += 2000
                emit("bookie_writable", bookie=flapper)
                now += 2000
        if n == requests // 4:
            for bookie in outage_rack:
                emit("bookie_lost", bookie=bookie)
        if n == requests // 2:
            for bookie in outage_rack:
                emit("bookie_writable", bookie=bookie)
        if n == (requests * 3) // 5:
            emit("bookie_readonly", bookie=bookies[20])
            emit("bookie_readonly", bookie=bookies[21])
        if n == (requests * 7) // 10:
            emit("bookie_writable", bookie=bookies[20])
            emit("bookie_location", bookie=bookies[30], location="/region-a/rack-0")
        if n % 500 == 499:
            bookie = rng.choice(bookies)
            total = 4 * 2**40
            emit("bookie_disk", bookie=bookie, total_disk=total, free_disk=rng.randrange(0, total))
        if n in (requests // 3, (requests * 2) // 3):
            records.append({"type": "ledger_create", "cluster": CLUSTER, "time": format_time(now),
                            "request_id": f"bad-{n}", "ensemble_size": 2, "write_quorum": 3, "ack_quorum": 2})
            records.append({"raw": "this line is not an event"})
        kind = rng.random()
        if kind < 0.75 or not placed:
            size = rng.choice((3, 3, 3, 5))
            emit("ledger_create", request_id=f"create-{n}", ledger_id=n, ensemble_size=size,
                 write_quorum=min(size, 3), ack_quorum=2)
            placed.append(_spread(rng, bookies, locations, size))
        elif kind < 0.95:
            ensemble = rng.choice(placed)
            emit("bookie_replace", request_id=f"replace-{n}", ledger_id=n, ensemble=ensemble,
                 bookie=rng.choice(ensemble), write_quorum=min(len(ensemble), 3), ack_quorum=2)
        else:
            # Mostly well-spread ensembles; now and then a legacy one that sits in a single rack.
            ensemble = rng.choice(placed) if rng.random() < 0.8 else _one_rack(rng, bookies, locations)
            emit("ensemble_check", request_id=f"check-{n}", ledger_id=n, ensemble=ensemble,
                 write_quorum=min(len(ensemble), 3), ack_quorum=2)
    return records


def _spread(rng: random.Random, bookies: list[str], locations: dict[str, str], size: int) -> list[str]:
    """`size` bookies from distinct racks, as a rack-aware client would have placed them."""
    racks = sorted(set(locations.values()))
    chosen = rng.sample(racks, size)
    return [rng.choice([b for b in bookies if locations[b] == rack]) for rack in chosen]


def _one_rack(rng: random.Random, bookies: list[str], locations: dict[str, str]) -> list[str]:
    rack = rng.choice(sorted(set(locations.values())))
    return rng.sample([b for b in bookies if locations[b] == rack], 3)


def write_input(records: list[dict], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as out:
        for record in records:
            if "raw" in record:
                out.write(record["raw"] + "\n")
            else:
                out.write(json.dumps(record, separators=(",", ":")) + "\n")


def _progress(update: dict, stream=None) -> None:
    """One progress line per micro-batch: rewritten in place on a terminal, a line each in a log."""
    stream = stream if stream is not None else sys.stderr
    done = update.get("decision", 0)
    line = (f"  batch {update['batch']:>3}: {done} decisions, {update.get('alert', 0)} alerts, "
            f"{update.get('dead_letter', 0)} dead letters")
    stream.write(f"\r{line}" if stream.isatty() else f"{line}\n")
    stream.flush()


def print_summary(summary: dict, out: Path) -> None:
    decisions = summary["decisions"]
    print()
    print(f"placement-engine demo: {summary['records']} records replayed in {summary['seconds']} s "
          f"({summary['records_per_second']} records/s, {summary['batches']} micro-batches)")
    print(f"  decisions: {decisions.get('total', 0)} "
          f"({decisions.get('ok', 0)} ok, {decisions.get('failed', 0)} failed)")
    for name, count in summary["adherence"].items():
        print(f"    adherence {name:<13} {count}")
    for name, count in summary["errors"].items():
        print(f"    error {name:<17} {count}")
    alerts = summary["alerts"]
    print(f"  alerts: {alerts.get('total', 0)}")
    for name, count in alerts.items():
        if name != "total":
            print(f"    {name:<40} {count}")
    dead = summary["dead_letters"]
    print(f"  dead letters: {dead.get('total', 0)}")
    for name, count in dead.items():
        if name != "total":
            print(f"    {name:<40} {count}")
    print(f"  outputs in {out}/decisions, {out}/alerts, {out}/dead-letters; summary in {out}/summary.json")


def run_demo(args: argparse.Namespace) -> int:
    """Generate the scenario, replay it on local Spark and print the summary (the `demo` command)."""
    from .replay import run_replay
    from .session import engine_session

    conf = dict(DEMO_CONF)
    conf.update(load_conf(args.conf, args.set))
    settings = engine_settings(conf)
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="placement-demo-"))
    started = time.monotonic()
    records = generate(args.requests, args.seed)
    write_input(records, out / "input" / "events.jsonl")
    print(f"placement-engine demo: {len(records)} records for cluster '{CLUSTER}' "
          f"({len(REGIONS)} regions x {RACKS_PER_REGION} racks x {BOOKIES_PER_RACK} bookies), "
          f"policy {settings.configured_policy}; starting local Spark...", file=sys.stderr)
    spark = engine_session(settings, "placement-engine-demo")
    summary = run_replay(spark, settings, [out / "input"], out, progress=_progress)
    print_summary(summary, out)
    print(f"  total wall time {time.monotonic() - started:.1f} s")
    return 0
