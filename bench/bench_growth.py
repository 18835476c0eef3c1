"""Growth: cost per request as bookies, clusters and shards grow; state size per cluster; peak memory.

Re-run from the repository root:

    .venv/bin/python bench/bench_growth.py                      # all parts (about 5-10 min on 2 cores)
    .venv/bin/python bench/bench_growth.py --parts bookies      # no Spark, about 1 min
    .venv/bin/python bench/bench_growth.py --parts clusters,shards --requests 50000
    .venv/bin/python bench/bench_growth.py --json docs/growth.json   # results for bench/plot_cost.py

Parts:

* `core` (no Spark): calls/s of new_ensemble(3,3,2), replace_bookie and is_ensemble_adhering of the
  region-aware (`/region<j>/rack<i>`, 3 regions) and zone-aware (`/zone<j>/ud<i>`, 3 zones) policies, weighted
  and not, at 12/4, 600/30 and 6000/100, with bench_policies.py's method (it covers rack-aware and default).
* `bookies` (no Spark, this process's CPU time): for clusters of 12/4 up to 6000/100 bookies/racks,
  - the placement core alone: new_ensemble(3,3,2) of the rack-aware policy, unweighted, default
    settings, one shared generator (the set-up of BookKeeper's and bench_policies.py's figures);
  - the engine's whole per-request work (parse the JSON request, the model's step with a per-request
    generator, the policy call, the decision and its JSON) with `common.BENCH_CONF` (2 racks per write
    quorum enforced, disk weights, stabilization), on a warm model, with the garbage collector tuned as the
    engine's Python workers tune it (`streaming.worker_gc.tune_worker_gc`);
  - registering the cluster (one bookie_writable and one bookie_disk per bookie);
  - the state of one cluster: snapshot bytes, dumps and loads time (paid once per cluster per micro-batch),
    and the model's Python heap (tracemalloc).
* `clusters` (Spark, wall time): `run_replay` of --requests requests dealt round-robin over 1, 10, 100
  and 1000 clusters of 12 bookies on 4 racks: records/s and wall time per request.
* `shards` (Spark, wall time): `run_replay` of one busy cluster (120/12) with engine.shardsPerCluster 1, 2, 4.
  Every event goes to every shard, a request to one.

Peak memory is the highest PSS sum (shared pages counted once) of this process tree (driver, JVM, Python workers)
while a run goes on;
CPU is the CPU time of that tree per request (robust to other load on a shared machine, unlike wall time).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_policies
import common

SIZES = ((12, 4), (120, 12), (600, 30), (1200, 40), (6000, 100))
CORE_SIZES = ((12, 4), (600, 30), (6000, 100))
CLUSTERS = (1, 10, 100, 1000)
SHARDS = (1, 2, 4)


def cpu_rate(call, min_seconds: float) -> float:
    """Calls per CPU-second of `call(i)`, over at least `min_seconds` of CPU."""
    calls, start = 0, time.process_time()
    while True:
        for _ in range(200):
            call(calls)
            calls += 1
        elapsed = time.process_time() - start
        if elapsed >= min_seconds:
            return calls / elapsed


def part_bookies(sizes, seconds: float, requests: int) -> list[dict]:
    from events import Origin, parse_record
    from policies import create_policy
    from state.settings import ModelSettings
    from state.step import step
    from streaming.stateful import dump_model, load_model
    from streaming.worker_gc import paused_gc, tune_worker_gc

    tune_worker_gc()  # as the engine's Python workers run (Python's default thresholds would add collector time)
    conf = dict(common.BENCH_CONF)
    settings = ModelSettings.from_conf(conf)
    rows = []
    print("\n## cost per request as bookies grow (no Spark; CPU time of this process)")
    print(f"{'bookies/racks':>14} {'core new_ensemble':>18} {'engine per request':>19} {'register':>12} "
          f"{'state bytes':>12} {'dumps':>9} {'loads':>9} {'model heap':>11}")
    for bookies, racks in sizes:
        layout = common.rack_layout(bookies, racks)
        # The placement core alone (bench_policies.py's rack-aware row).
        policy = create_policy({"ensemblePlacementPolicy": "rackaware"}, resolver=layout, clock=lambda: 0.0)
        policy.on_cluster_changed(list(layout), [])
        rng = random.Random(2)
        core = cpu_rate(lambda _i: policy.new_ensemble(3, 3, 2, rng=rng), seconds)
        # The engine: register the cluster, then answer requests on the warm model.
        rng = random.Random(7)
        origin = Origin.from_kafka("events", 0, 0)
        registration = [parse_record(common._line(r), origin)  # noqa: SLF001
                        for r in common.registration("c", layout, common.START_MS, rng)]
        tracemalloc.start()
        cpu = time.process_time()
        model = step(None, "c", registration, settings).model
        register_s = time.process_time() - cpu
        heap = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        members = list(layout)
        begin = common.START_MS + 2 * bookies + 1000
        lines = [common._line(common.request("c", n, begin + n, members, rng)) for n in range(requests)]  # noqa: SLF001
        step(model, "c", [parse_record(lines[0], origin)], settings)   # warm the policy's caches
        cpu = time.process_time()
        with paused_gc():  # as the state function parses and steps (streaming.worker_gc)
            items = [parse_record(line, origin) for line in lines]
            result = step(model, "c", items, settings)
            texts = [o.to_json() for o in result.outputs]
        engine_s = time.process_time() - cpu
        failed = sum('"status":"failed"' in t for t in texts)
        blob = dump_model(model)
        dump_s = min(common.timed(lambda: dump_model(model))[2] for _ in range(3))
        load_s = min(common.timed(lambda: load_model(blob, settings))[2] for _ in range(3))
        row = {"bookies": bookies, "racks": racks, "core_new_ensemble_per_s": core,
               "core_us_per_call": 1e6 / core, "engine_us_per_request": engine_s / requests * 1e6,
               "engine_requests_per_cpu_s": requests / engine_s, "failed_decisions": failed,
               "register_s": register_s, "state_bytes": len(blob), "dumps_ms": dump_s * 1e3,
               "loads_ms": load_s * 1e3, "model_heap_kib": heap / 1024}
        rows.append(row)
        print(f"{f'{bookies}/{racks}':>14} {core:>11,.0f} /s ({1e6 / core:5.1f} us) "
              f"{row['engine_us_per_request']:>7.1f} us "
              f"({requests / engine_s:>7,.0f}/s) {register_s:>10.2f} s {len(blob):>12,} {dump_s * 1e3:>7.1f}ms "
              f"{load_s * 1e3:>7.1f}ms {heap / 1024:>8,.0f} KiB", flush=True)
        if failed:
            print(f"    note: {failed} of {requests} decisions failed (check the generated cluster)")
    return rows


def zone_cluster(bookies: int, racks: int, zones: int = 3) -> dict[str, list[str]]:
    """`/zone<j>/ud<i>` locations: the racks become upgrade domains spread over `zones` zones."""
    layout: dict[str, list[str]] = {}
    for rack, members in bench_policies.racks_cluster(bookies, racks).items():
        layout[f"/zone{int(rack[5:]) % zones}/ud{rack[5:]}"] = members
    return layout


def core_rows():
    """Region-aware and zone-aware rows in bench_policies.py's format (it covers rack-aware and default)."""
    Row = bench_policies.Row
    weighted = {"diskWeightBasedPlacementEnabled": True}
    return [
        Row("regionaware", "regionaware", build=bench_policies.region_racks_cluster),
        Row("regionaware", "regionaware weighted", weighted, build=bench_policies.region_racks_cluster, disk=True),
        Row("zoneaware", "zoneaware", build=zone_cluster),
        Row("zoneaware", "zoneaware weighted", weighted, build=zone_cluster, disk=True),
    ]


def part_core(sizes, seconds: float, repeat: int) -> list[dict]:
    rows = []
    print(f"\n## placement core of the region-aware and zone-aware policies, calls per CPU-second (best of {repeat} x "
          f"{seconds}s; bench_policies.py's method and operations; 3 regions or 3 zones)")
    print(f"{'policy':<22}{'bookies/racks':>14}  {'operation':<22}{'calls/s':>12}")
    for row in core_rows():
        for bookies, racks in sizes:
            policy = bench_policies.build(row, bookies, racks)
            for name, call in bench_policies.operations(policy, random.Random(2)).items():
                calls = bench_policies.rate(call, seconds, repeat)
                rows.append({"policy": row.label, "bookies": bookies, "racks": racks, "operation": name,
                             "calls_per_s": calls})
                print(f"{row.label:<22}{f'{bookies}/{racks}':>14}  {name:<22}{calls:>12,.0f}", flush=True)
    return rows


def _spark(shuffle: int = 2):
    from streaming.session import build_session

    return build_session(app_name="bench-growth", conf={"spark.sql.shuffle.partitions": str(shuffle)},
                         log_level="ERROR")


def _replay(spark, conf: dict[str, str], day: Path, out: Path) -> dict:
    from streaming.replay import run_replay
    from streaming.settings import engine_settings

    settings = engine_settings(conf)
    memory = common.PeakMemory(interval_s=0.5)
    load = common.load_average()
    with memory:
        wall = time.perf_counter()
        summary = run_replay(spark, settings, [day], out)
        wall = time.perf_counter() - wall
    return {"wall_s": wall, "records": summary["records"], "batches": summary["batches"],
            "decisions": summary["decisions"]["total"], "failed": summary["decisions"].get("failed", 0),
            "peak_rss_mib": memory.peak_mib, "peak_rss": memory.describe(), "cpu_by_name": memory.cpu_by_name,
            "cpu_s": memory.cpu_s, "load": [load[0], common.load_average()[0]]}


def _warm_up(spark, work: Path) -> float:
    """One small replay so that the first measured run does not pay for starting the Python workers."""
    day = work / "warm-up" / "input.jsonl"
    common.write_clusters(day, 2, 12, 4, 200)
    started = time.perf_counter()
    _replay(spark, dict(common.BENCH_CONF), day, work / "warm-up" / "out")
    return time.perf_counter() - started


def _cpu_us(run: dict, requests: int) -> str:
    worker = run["cpu_by_name"].get("python worker", 0.0)
    return f"{run['cpu_s'] / requests * 1e6:>11.0f} {worker / requests * 1e6:>18.0f}"


def part_clusters(spark, work: Path, counts, requests: int, per_trigger: int) -> list[dict]:
    rows = []
    print(f"\n## cost per request as clusters grow (Spark replay, wall time; {requests:,} requests dealt "
          f"round-robin, 12 bookies on 4 racks per cluster, recordsPerTrigger {per_trigger:,})")
    print(f"{'clusters':>9} {'records':>9} {'batches':>8} {'wall':>8} {'records/s':>10} {'us/request':>11} "
          f"{'CPU-us/req':>11} {'worker CPU-us/req':>18} {'peak PSS MiB':>13} {'load 1m':>12}")
    conf = {**common.BENCH_CONF, "engine.replay.recordsPerTrigger": str(per_trigger)}
    for clusters in counts:
        day = work / f"clusters-{clusters}" / "input.jsonl"
        common.write_clusters(day, clusters, 12, 4, requests)
        run = _replay(spark, conf, day, work / f"clusters-{clusters}" / "out")
        row = {"clusters": clusters, "requests": requests, **run,
               "records_per_s": run["records"] / run["wall_s"], "us_per_request": run["wall_s"] / requests * 1e6}
        rows.append(row)
        print(f"{clusters:>9} {run['records']:>9,} {run['batches']:>8} {run['wall_s']:>7.1f}s "
              f"{row['records_per_s']:>10,.0f} {row['us_per_request']:>11.0f} {_cpu_us(run, requests)} "
              f"{run['peak_rss_mib']:>13,.0f} "
              f"{run['load'][0]:>5.1f}->{run['load'][1]:<5.1f}", flush=True)
        shutil.rmtree(day.parent, ignore_errors=True)
    return rows


def part_shards(spark, work: Path, shards_list, requests: int, per_trigger: int) -> list[dict]:
    rows = []
    print(f"\n## cost per request as shardsPerCluster grows (Spark replay, wall time; one busy cluster of 120 "
          f"bookies on 12 racks, a day of {requests:,} requests, recordsPerTrigger {per_trigger:,})")
    print(f"{'shards':>7} {'records':>9} {'batches':>8} {'wall':>8} {'records/s':>10} {'us/request':>11} "
          f"{'CPU-us/req':>11} {'worker CPU-us/req':>18} {'peak PSS MiB':>13} {'load 1m':>12}")
    day = work / "shards" / "input.jsonl"
    common.write_busy_day(day, requests)
    for shards in shards_list:
        conf = {**common.BENCH_CONF, "engine.replay.recordsPerTrigger": str(per_trigger),
                "engine.shardsPerCluster": str(shards)}
        run = _replay(spark, conf, day, work / "shards" / f"out-{shards}")
        row = {"shards": shards, "requests": requests, **run,
               "records_per_s": run["records"] / run["wall_s"], "us_per_request": run["wall_s"] / requests * 1e6}
        rows.append(row)
        print(f"{shards:>7} {run['records']:>9,} {run['batches']:>8} {run['wall_s']:>7.1f}s "
              f"{row['records_per_s']:>10,.0f} {row['us_per_request']:>11.0f} {_cpu_us(run, requests)} "
              f"{run['peak_rss_mib']:>13,.0f} "
              f"{run['load'][0]:>5.1f}->{run['load'][1]:<5.1f}", flush=True)
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", default="core,bookies,clusters,shards",
                        help="comma-separated: core, bookies, clusters, shards")
    parser.add_argument("--sizes", help="bookies/racks list for the bookies part, e.g. 12/4,600/30")
    parser.add_argument("--clusters", help="cluster counts for the clusters part, e.g. 1,10,100,1000")
    parser.add_argument("--shards", help="shard counts for the shards part, e.g. 1,2,4")
    parser.add_argument("--seconds", type=float, default=0.5, help="CPU seconds per core measurement")
    parser.add_argument("--engine-requests", type=int, default=5000, help="requests per size in the bookies part")
    parser.add_argument("--requests", type=int, default=50_000, help="requests per Spark run")
    parser.add_argument("--records-per-trigger", type=int, default=50_000, help="engine.replay.recordsPerTrigger")
    parser.add_argument("--json", metavar="FILE", help="also write the results as JSON (bench/plot_cost.py reads it)")
    args = parser.parse_args(argv)
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    unknown = parts - {"core", "bookies", "clusters", "shards"}
    if unknown:
        parser.error(f"--parts: unknown part(s) {', '.join(sorted(unknown))}; expected core, bookies, clusters, shards")
    sizes = SIZES if not args.sizes else tuple(tuple(int(x) for x in s.split("/")) for s in args.sizes.split(","))
    counts = CLUSTERS if not args.clusters else tuple(int(x) for x in args.clusters.split(","))
    shards = SHARDS if not args.shards else tuple(int(x) for x in args.shards.split(","))
    spark_parts = parts & {"clusters", "shards"}
    info = common.header("growth: cost per request vs bookies, clusters and shards; state size; peak memory",
                         f"parts: {', '.join(sorted(parts))}", spark=bool(spark_parts))
    results: dict = {"machine": info, "args": vars(args)}
    if "core" in parts:
        results["core"] = part_core(CORE_SIZES, 0.3, 3)
    if "bookies" in parts:
        results["bookies"] = part_bookies(sizes, args.seconds, args.engine_requests)
    if spark_parts:
        work = Path(tempfile.mkdtemp(prefix="bench-growth-"))
        try:
            started = time.perf_counter()
            spark = _spark()
            print(f"\n# SparkSession started in {time.perf_counter() - started:.1f} s, warm-up replay "
                  f"{_warm_up(spark, work):.1f} s (neither counted below)")
            print("# CPU-us/req: CPU of the whole process tree (driver, JVM, Python workers) per request; worker "
                  "CPU-us/req: of Spark's Python workers alone (the state function runs there)")
            if "clusters" in parts:
                results["clusters"] = part_clusters(spark, work, counts, args.requests, args.records_per_trigger)
            if "shards" in parts:
                results["shards"] = part_shards(spark, work, shards, args.requests, args.records_per_trigger)
            spark.stop()
        finally:
            shutil.rmtree(work, ignore_errors=True)
        peaks = [row["peak_rss_mib"] for key in ("clusters", "shards") for row in results.get(key, [])]
        print(f"\npeak PSS (memory) of this process tree over the Spark parts: {max(peaks):,.0f} MiB")
    results["load_after"] = common.footer(info)
    common.save_json(args.json, results)
    if args.json:
        print(json.dumps({"saved": args.json}))


if __name__ == "__main__":
    main()
