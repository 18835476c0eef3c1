"""Throughput of the placement policies: calls/s of new_ensemble(3,3,2), replace_bookie and
is_ensemble_adhering on regular clusters (bookies spread evenly over racks).

Re-run from the repository root:

    .venv/bin/python bench/bench_policies.py [--seconds 0.3] [--repeat 3] [--only rackaware]
    .venv/bin/python bench/bench_policies.py --profile rackaware 12/4     # cProfile one cell

Rates use this process's CPU time, best of --repeat runs (the least disturbed by other processes on a
shared machine). Every call gets the same `random.Random` (seeded once per run), as the engine passes a
per-request generator; creating a generator per call (`random.Random(seed)`) is not measured.

To add rows (region-aware, zone-aware, isolation policies), append `Row`s to `ROWS`: a policy short
name, a label, a configuration mapping and a cluster builder `(bookies, racks) -> {location: [bookie]}`;
the builder decides the location format (`/rack`, `/region/rack`, `/zone/upgradedomain`).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import platform
import pstats
import random
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from policies import BookieInfo, create_policy

Cluster = dict[str, list[str]]
SIZES = ((12, 4), (600, 30), (6000, 100))  # (bookies, racks)


def racks_cluster(bookies: int, racks: int) -> Cluster:
    """`/rack<i>` locations, bookies dealt round-robin over the racks."""
    layout: Cluster = {f"/rack{r}": [] for r in range(racks)}
    for b in range(bookies):
        layout[f"/rack{b % racks}"].append(f"10.{b // 65536}.{b // 256 % 256}.{b % 256}:3181")
    return layout


def region_racks_cluster(bookies: int, racks: int, regions: int = 3) -> Cluster:
    """`/region<j>/rack<i>` locations (for region-aware rows)."""
    return {f"/region{r % regions}{rack}": members for r, (rack, members) in
            enumerate(racks_cluster(bookies, racks).items())}


@dataclass(frozen=True)
class Row:
    policy: str
    label: str
    conf: Mapping[str, Any] = field(default_factory=dict)
    build: Callable[[int, int], Cluster] = racks_cluster
    disk: bool = False  # report free disk space (for weighted rows)


ROWS: list[Row] = [
    Row("rackaware", "rackaware"),
    Row("rackaware", "rackaware weighted", {"diskWeightBasedPlacementEnabled": True}, disk=True),
    Row("default", "default"),
    Row("default", "default weighted", {"diskWeightBasedPlacementEnabled": True}, disk=True),
]


def build(row: Row, bookies: int, racks: int):
    layout = row.build(bookies, racks)
    mapping = {b: rack for rack, members in layout.items() for b in members}
    policy = create_policy({"ensemblePlacementPolicy": row.policy, **row.conf}, resolver=mapping,
                           clock=lambda: 0.0)
    policy.on_cluster_changed(list(mapping), [])
    if row.disk:
        rng = random.Random(5)
        policy.update_bookie_info({b: BookieInfo(total_disk=1 << 40, free_disk=rng.randrange(1 << 30, 1 << 40))
                                   for b in mapping})
    return policy


def operations(policy, rng: random.Random) -> dict[str, Callable[[], Any]]:
    ensemble = policy.new_ensemble(3, 3, 2, rng=random.Random(1)).ensemble
    victim = ensemble[1]
    return {
        "new_ensemble(3,3,2)": lambda: policy.new_ensemble(3, 3, 2, rng=rng),
        "replace_bookie": lambda: policy.replace_bookie(3, 3, 2, None, ensemble, victim, rng=rng),
        "is_ensemble_adhering": lambda: policy.is_ensemble_adhering(ensemble, 3, 2),
    }


def rate(call: Callable[[], Any], seconds: float, repeat: int) -> float:
    """Best calls per CPU-second over `repeat` runs of about `seconds` each."""
    batch = 1
    while True:  # size a batch to about 10 ms
        start = time.process_time()
        for _ in range(batch):
            call()
        if time.process_time() - start > 0.01:
            break
        batch *= 2
    best = 0.0
    for _ in range(repeat):
        calls = 0
        start = time.process_time()
        while True:
            for _ in range(batch):
                call()
            calls += batch
            elapsed = time.process_time() - start
            if elapsed >= seconds:
                break
        best = max(best, calls / elapsed)
    return best


def machine() -> str:
    return (f"{platform.platform()}, {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
            f"Python {platform.python_version()} ({platform.python_implementation()})")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=0.3, help="CPU seconds per measurement")
    parser.add_argument("--repeat", type=int, default=3, help="measurements per cell (best is kept)")
    parser.add_argument("--only", help="run only rows whose label contains this text")
    parser.add_argument("--sizes", help="comma-separated bookies/racks, e.g. 12/4,600/30")
    parser.add_argument("--profile", nargs=2, metavar=("LABEL", "SIZE"),
                        help="cProfile new_ensemble(3,3,2) for one row label and size (e.g. rackaware 12/4)")
    args = parser.parse_args(argv)
    sizes = SIZES if not args.sizes else tuple(tuple(int(x) for x in s.split("/")) for s in args.sizes.split(","))
    if args.profile:
        label, size = args.profile
        bookies, racks = (int(x) for x in size.split("/"))
        row = next(r for r in ROWS if r.label == label)
        policy = build(row, bookies, racks)
        call = operations(policy, random.Random(2))["new_ensemble(3,3,2)"]
        profiler = cProfile.Profile()
        profiler.enable()
        for _ in range(50000):
            call()
        profiler.disable()
        pstats.Stats(profiler).sort_stats("tottime").print_stats(15)
        return
    print(f"# placement policies, calls per CPU-second (best of {args.repeat} x {args.seconds}s)")
    print(f"# machine: {machine()}")
    print("# re-run: .venv/bin/python bench/bench_policies.py " + " ".join(argv or sys.argv[1:]))
    header = f"{'policy':<22}{'bookies/racks':>14}  {'operation':<22}{'calls/s':>12}"
    print(header)
    print("-" * len(header))
    for row in ROWS:
        if args.only and args.only not in row.label:
            continue
        for bookies, racks in sizes:
            policy = build(row, bookies, racks)
            for name, call in operations(policy, random.Random(2)).items():
                calls = rate(call, args.seconds, args.repeat)
                print(f"{row.label:<22}{f'{bookies}/{racks}':>14}  {name:<22}{calls:>12,.0f}", flush=True)


if __name__ == "__main__":
    main()
