"""`placement-engine demo`: a synthetic cluster and its traffic, replayed on local Spark.

The scenario (one seeded generator, so the same seed gives the same input): three regions of four
racks with four bookies each, disk reports that drift, a bookie that flaps, a rack that goes down and
comes back, bookies switching to read-only and back, a rack change, thousands of ledger creates,
bookie replaces and ensemble checks, and a few malformed records that must land in the dead letters.

Everything stays in one folder (`--out`, else a new temporary one that is kept): the input, the outputs
as `replay` writes them (the cluster's status records included, which `placement-engine status --dir`
reads), and the configuration (`demo.properties`) with which `replay` reproduces them.
The summary separates the adherence of the ensembles the engine placed from that of the existing
ensembles it was asked to check. Progress goes to stderr as `replay` shows it (`streaming.progress`).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from events import format_time

from .config import load_conf
from .progress import progress_for
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


CONF_FILE = "demo.properties"
"""The demo's whole configuration, written beside `input/` so `replay` can run the same input again."""

REQUEST_TYPES = ("ledger_create", "bookie_replace", "ensemble_check")
ADHERENCE_MEANING = {
    "MEETS_STRICT": "meets the placement rule",
    "MEETS_SOFT": "meets the minimum spread, not the desired one",
    "FAIL": "breaks the placement rule",
}
"""What each `adherence` answer means, in the words of the summary."""


def write_conf(conf: dict[str, str], path: Path) -> None:
    """`conf` as a properties file `replay --conf` reads back to the same mapping."""
    lines = ["# placement-engine demo configuration: the demo's defaults, then --conf and --set",
             *(f"{key}={conf[key]}" for key in sorted(conf))]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def decisions_by_request(out: Path) -> dict[str, Counter]:
    """Per request type, the ok decisions' adherence answers and the total (`"total"`), from `out/decisions`.

    Cost: O(decisions); dominated by parsing the JSON lines."""
    counts: dict[str, Counter] = {}
    for path in sorted((out / "decisions").glob("*.jsonl")):
        with open(path, encoding="utf-8") as lines:
            for line in lines:
                decision = json.loads(line)
                tally = counts.setdefault(str(decision.get("type")), Counter())
                tally["total"] += 1
                if decision.get("adherence"):
                    tally[decision["adherence"]] += 1
    return counts


def _adherence_lines(title: str, tallies: list[Counter], meaning: dict[str, str]) -> list[str]:
    merged = sum(tallies, Counter())
    answers = [name for name in ADHERENCE_MEANING if merged[name]]
    answers += sorted(name for name in merged if name not in ADHERENCE_MEANING and name != "total")
    if not answers:
        return []
    return [f"    {title}:"] + [f"      {name:<13} {merged[name]:>6}  {meaning.get(name, '')}".rstrip()
                                for name in answers]


def print_summary(summary: dict, out: Path, kept: bool, conf_file: Path,
                  by_request: dict[str, Counter] | None = None) -> None:
    """The demo's result for people: what the counts mean, where the files are, how to replay them.

    Args:
        kept: whether `out` was named by `--out` (otherwise a new temporary folder, kept as well).
        by_request: `decisions_by_request(out)`; read from `out` when not given.
    """
    by_request = by_request if by_request is not None else decisions_by_request(out)
    decisions = summary["decisions"]
    print()
    print(f"placement-engine demo: {summary['records']} records replayed in {summary['seconds']} s "
          f"({summary['records_per_second']} records/s, {summary['batches']} micro-batches)")
    print(f"  decisions: {decisions.get('total', 0)} "
          f"({decisions.get('ok', 0)} ok, {decisions.get('failed', 0)} failed), one per request")
    requests = [name for name in REQUEST_TYPES if name in by_request]
    requests += sorted(name for name in by_request if name not in REQUEST_TYPES)
    print("    requests: " + ", ".join(f"{by_request[name]['total']} {name}" for name in requests))
    placed = [by_request[name] for name in ("ledger_create", "bookie_replace") if name in by_request]
    for line in _adherence_lines("adherence of the ensembles it placed (ledger_create, bookie_replace)", placed,
                                 {**ADHERENCE_MEANING, "FAIL": "placed against the rule: too few racks usable"}):
        print(line)
    checked = [by_request["ensemble_check"]] if "ensemble_check" in by_request else []
    for line in _adherence_lines("adherence of existing ensembles it was asked to check (ensemble_check)", checked,
                                 {**ADHERENCE_MEANING, "FAIL": "breaks the rule, e.g. all in one rack"}):
        print(line)
    for name, count in summary["errors"].items():
        print(f"    failed with {name:<17} {count}")
    alerts = summary["alerts"]
    print(f"  alerts: {alerts.get('total', 0)}")
    for name, count in alerts.items():
        if name != "total":
            print(f"    {name:<44} {count}")
    dead = summary["dead_letters"]
    print(f"  dead letters (input records that are not valid events or requests): {dead.get('total', 0)}")
    for name, count in dead.items():
        if name != "total":
            print(f"    {name:<44} {count}")
    print(f"  status records (the cluster's counts when they changed): {summary['status_records']}; "
          f"the latest: placement-engine status --dir {out} --cluster {CLUSTER}")
    where = "" if kept else " (a new temporary folder; it is not deleted: remove it when done)"
    print(f"  files in {out}{where}: input/, decisions/, alerts/, dead-letters/, status/, summary.json, "
          f"{CONF_FILE}")
    print(f"  same input again: placement-engine replay --conf {conf_file} --events {out / 'input'} "
          f"--out {out / 'replay'}")


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
    conf_file = out / CONF_FILE
    write_conf(conf, conf_file)
    print(f"placement-engine demo: {len(records)} records for cluster '{CLUSTER}' "
          f"({len(REGIONS)} regions x {RACKS_PER_REGION} racks x {BOOKIES_PER_RACK} bookies), "
          f"policy {settings.configured_policy}; starting local Spark...", file=sys.stderr)
    spark = engine_session(settings, "placement-engine-demo")
    summary = run_replay(spark, settings, [out / "input"], out, display=progress_for(args), label="demo")
    print_summary(summary, out, kept=bool(args.out), conf_file=conf_file)
    print(f"  total wall time {time.monotonic() - started:.1f} s")
    return 0
