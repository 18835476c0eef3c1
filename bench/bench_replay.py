"""Replay throughput: records/s of `placement-engine replay` over a generated day of a busy cluster.

Re-run from the repository root (the default takes a few minutes on a 2-core machine):

    .venv/bin/python bench/bench_replay.py                       # a day with 200k requests
    .venv/bin/python bench/bench_replay.py --requests 1000000    # the full day of 1M requests
    .venv/bin/python bench/bench_replay.py --no-spark            # only the per-stage breakdown (no Spark)
    .venv/bin/python bench/bench_replay.py --profile 50000       # + cProfile of the state function
    .venv/bin/python bench/bench_replay.py --no-spark --regions 3 --set ensemblePlacementPolicy=regionaware
                                                                 # another policy on /region<j>/rack<i>

The day (bench/common.py `write_busy_day`): one cluster of --bookies bookies on --racks racks registers
at 00:00; every --disk-interval seconds a poll round of disk reports from every bookie; a rolling
restart an hour, two bookies read-only for an hour, a rack down for 10 minutes, a rack move; and
--requests requests spread evenly over the 24 hours (70% ledger_create, a fifth of them 5/3/2, 20%
bookie_replace, 10% ensemble_check). Policy: rack-aware, 2 racks per write quorum (enforced), disk
weights, 30 s stabilization (`common.BENCH_CONF`).

What is timed:

1. the command `placement-engine replay --conf F --events DAY --out DIR` as a subprocess, end to end
   (JVM start, spooling the input in time order, the streaming query, writing outputs): records/s of
   the whole command, and the records/s the command reports itself (summary.json, which excludes the
   Spark start-up); peak memory (PSS sum) of the command's process tree (driver, JVM, Python workers), sampled.
2. the per-record CPU cost of each stage of the engine's per-group work, in this process without Spark
   (`common.stage_breakdown`): parse, model and decisions, policy calls, output JSON, snapshots.
   The gap between (2) and (1) is what Spark adds (JVM, Arrow transfer, shuffle, state store, sink).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common


def write_conf(path: Path, conf: dict[str, str]) -> None:
    path.write_text("".join(f"{k}={v}\n" for k, v in sorted(conf.items())), encoding="utf-8")


def run_command(day: Path, out: Path, conf: dict[str, str], extra: list[str]) -> dict:
    conf_file = out.parent / "bench-replay.properties"
    write_conf(conf_file, conf)
    command = [str(common.ROOT / ".venv" / "bin" / "placement-engine"), "replay", "--conf", str(conf_file),
               "--events", str(day), "--out", str(out), *extra]
    if not Path(command[0]).exists():
        command[:1] = [sys.executable, "-m", "streaming.cli"]
    print(f"# command: {' '.join(command)}", flush=True)
    log = out.parent / "replay.log"
    memory = common.PeakMemory(interval_s=0.5)
    started = time.perf_counter()
    with open(log, "wb") as handle, memory:
        process = subprocess.Popen(command, cwd=common.ROOT, stdout=handle, stderr=subprocess.STDOUT)
        code = process.wait()
    wall = time.perf_counter() - started
    if code != 0:
        tail = log.read_text(errors="replace")[-3000:]
        raise SystemExit(f"placement-engine replay exited with {code}; its log ends with:\n{tail}")
    summary = json.loads((out / "summary.json").read_text())
    return {"wall_s": wall, "summary": summary, "peak_rss": memory.describe(), "peak_rss_mib": memory.peak_mib,
            "cpu": memory.describe_cpu(), "cpu_s": memory.cpu_s, "cpu_by_name": memory.cpu_by_name}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=200_000, help="requests in the day (default 200000)")
    parser.add_argument("--bookies", type=int, default=120)
    parser.add_argument("--racks", type=int, default=12)
    parser.add_argument("--regions", type=int, default=0,
                        help="spread the racks over this many regions (/region<j>/rack<i>; for the region-aware and "
                             "zone-aware policies with --set ensemblePlacementPolicy=...)")
    parser.add_argument("--disk-interval", type=int, default=600, help="seconds between disk poll rounds")
    parser.add_argument("--records-per-trigger", type=int, default=200_000,
                        help="engine.replay.recordsPerTrigger (the engine's default is 200000)")
    parser.add_argument("--shards", type=int, default=1, help="engine.shardsPerCluster")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a configuration key (e.g. diskWeightBasedPlacementEnabled=false)")
    parser.add_argument("--breakdown-records", type=int, default=100_000,
                        help="records of the day used for the per-stage breakdown (0: skip)")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="also cProfile the state function over the first N records")
    parser.add_argument("--no-spark", action="store_true", help="skip the replay command (breakdown only)")
    parser.add_argument("--keep", metavar="DIR", help="keep the day and the outputs in DIR")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = parser.parse_args(argv)

    conf = {**common.BENCH_CONF, "engine.replay.recordsPerTrigger": str(args.records_per_trigger),
            "engine.shardsPerCluster": str(args.shards)}
    for item in args.set:
        key, _, value = item.partition("=")
        conf[key.strip()] = value.strip()
    info = common.header(
        "replay throughput: placement-engine replay over a generated day of one busy cluster",
        f"{args.requests} requests over 24 h, {args.bookies} bookies on {args.racks} racks"
        f"{f' in {args.regions} regions' if args.regions else ''}, disk poll round every "
        f"{args.disk_interval} s, recordsPerTrigger {args.records_per_trigger}, shardsPerCluster {args.shards}\n"
        f"policy conf: {', '.join(f'{k}={v}' for k, v in sorted(conf.items()) if not k.startswith('engine.replay'))}",
        spark=not args.no_spark)
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-replay-"))
    work.mkdir(parents=True, exist_ok=True)
    results: dict = {"machine": info, "args": vars(args), "conf": conf}
    try:
        day = work / "input" / "day.jsonl"
        _, gen_wall, _ = common.timed(lambda: results.update(
            counts=common.write_busy_day(day, args.requests, args.bookies, args.racks,
                                         disk_interval_s=args.disk_interval, regions=args.regions)))
        counts = results["counts"]
        print(f"input: {counts['records']:,} records ({counts['events']:,} events + {counts['requests']:,} requests), "
              f"{day.stat().st_size / 2**20:.0f} MiB, generated in {gen_wall:.1f} s (not timed below)", flush=True)

        if not args.no_spark:
            load = common.load_average()
            run = run_command(day, work / "out", conf, [])
            summary = run["summary"]
            records = summary["records"]
            results["replay"] = {"wall_s": run["wall_s"], "records": records,
                                 "records_per_s_command": records / run["wall_s"],
                                 "records_per_s_reported": summary["records_per_second"],
                                 "seconds_reported": summary["seconds"], "batches": summary["batches"],
                                 "decisions": summary["decisions"]["total"], "alerts": summary["alerts"]["total"],
                                 "dead_letters": summary["dead_letters"]["total"],
                                 "peak_rss_mib": run["peak_rss_mib"], "cpu_s": run["cpu_s"],
                                 "cpu_by_name": run["cpu_by_name"], "load_during": [load, common.load_average()]}
            r = results["replay"]
            print(f"replay command: {records:,} records in {r['wall_s']:.1f} s wall -> "
                  f"{r['records_per_s_command']:,.0f} records/s end to end (incl. JVM start)")
            print(f"  as reported by the command (spool + query, excl. Spark start-up): {summary['seconds']:.1f} s -> "
                  f"{summary['records_per_second']:,.0f} records/s, {summary['batches']} micro-batches")
            print(f"  outputs: {r['decisions']:,} decisions, {r['alerts']:,} alerts, "
                  f"{r['dead_letters']:,} dead letters")
            print(f"  peak memory (PSS) of the command's process tree: {run['peak_rss']}")
            print(f"  CPU used by the command's process tree: {run['cpu']} -> "
                  f"{records / max(run['cpu_s'], 1e-9):,.0f} records per CPU-second, "
                  f"{records / max(run['cpu_by_name'].get('python worker', 0), 1e-9):,.0f} per CPU-second of the "
                  "Python workers (the figure a quiet 2-core machine bounds)")
            if args.requests < 1_000_000:
                full = counts["events"] + 1_000_000
                startup = r["wall_s"] - summary["seconds"]
                estimate = startup + summary["seconds"] * full / records
                print(f"  extrapolated to the full day ({full:,} records): ~{estimate:,.0f} s, ~{full / estimate:,.0f} "
                      f"records/s (start-up {startup:.0f} s + the measured per-record time; an extrapolation, "
                      "not a measurement)")
                r["extrapolated_full_day_s"] = estimate

        if args.breakdown_records:
            lines = day.read_text(encoding="utf-8").splitlines()[:args.breakdown_records]
            cpu = time.process_time()
            stages = common.stage_breakdown(lines, conf, "busy", args.records_per_trigger)
            cpu = time.process_time() - cpu
            snapshot = stages.pop("snapshot bytes (last)")
            last = {k: stages.pop(k) for k in ("snapshot load s (last)", "snapshot store s (last)",
                                               "audit ledgers (last)") if k in stages}
            methods = {k: stages.pop(k) for k in list(stages) if k.startswith("policy.")}
            n = len(lines)
            results["breakdown"] = {"records": n, "cpu_s": cpu,
                                    "us_per_record": {k: v / n * 1e6 for k, v in stages.items()},
                                    "snapshot_bytes": snapshot, "last_snapshot": last}
            print(f"\nper-stage CPU cost of the state function without Spark, first {n:,} records of the day, "
                  f"batches of {args.records_per_trigger:,} (this process's CPU time):")
            for name, seconds in stages.items():
                print(f"  {name:<26} {seconds / n * 1e6:8.1f} us/record  "
                      f"({seconds / max(sum(stages.values()), 1e-9):5.1%})")
            for name, seconds in methods.items():
                label, _, count = name.rpartition(" x")
                print(f"    of which {label:<30} {seconds / n * 1e6:6.1f} us/record, "
                      f"{seconds / max(int(count), 1) * 1e6:6.1f} us per call over {int(count):,} calls")
            results["breakdown"]["policy_methods_s"] = methods
            print(f"  {'total':<26} {cpu / n * 1e6:8.1f} us/record -> {n / cpu:,.0f} records per CPU-second "
                  f"(one Python worker holds one cluster's group)")
            print(f"  model snapshot (state of one cluster) after the last batch: {snapshot:,.0f} bytes", end="")
            if last:
                print(f", {last['audit ledgers (last)']:,} remembered ledgers; loading it took "
                      f"{last['snapshot load s (last)'] * 1000:,.0f} ms, storing it again "
                      f"{last['snapshot store s (last)'] * 1000:,.0f} ms (CPU)", end="")
            print()

        if args.profile:
            from streaming.settings import engine_settings
            from streaming.stateful import make_state_function

            lines = day.read_text(encoding="utf-8").splitlines()[:args.profile]
            function = make_state_function(engine_settings(conf).model, "kafka", 1, [])
            state = common.FakeGroupState()
            profiler = cProfile.Profile()
            profiler.enable()
            for first in range(0, len(lines), args.records_per_trigger):
                frame = common.input_frame("busy", lines[first:first + args.records_per_trigger], first)
                for _ in function(("busy", 0), iter([frame]), state):
                    pass
            profiler.disable()
            print(f"\ncProfile of streaming.stateful's state function over {len(lines):,} records "
                  "(top 25 by own time):")
            pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(25)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    results["load_after"] = common.footer(info)
    common.save_json(args.json, results)


if __name__ == "__main__":
    main()
