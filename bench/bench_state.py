"""The cluster model: state size of a big cluster, and `state.step` throughput for events and requests.

Re-run from the repository root:

    .venv/bin/python bench/bench_state.py [--bookies 10000] [--racks 100] [--records 20000] [--json FILE]

Parts (no Spark; records are built as parsed records, so parsing is not measured; rates are per
CPU-second of this process, best of --repeat runs):

* size: a cluster of --bookies bookies on --racks racks (each registered writable with its location
  and a disk report; 1% then lost), under bench/common.py's BENCH_CONF (rack-aware, enforced, disk
  weights, 30 s stabilization). Prints the snapshot size (the JSON in the streaming job's zstd frame,
  what Spark's state store keeps) and its uncompressed size, dumps/loads time, and the model's in-memory size
  (tracemalloc: bytes allocated by building it, policy included).
* throughput, for --bookies and for a typical 120-bookie/12-rack cluster, micro-batches of 1000:
  - membership events (a bookie lost, back, read-only, writable again; on_cluster_changed each),
  - disk reports,
  - requests (ledger_create 3/2/2, bookie_replace, ensemble_check; one policy call each),
  - a mix of 90% requests and 10% events (every event then also costs the next request a refresh
    of the disk weights: an O(bookies) update_bookie_info).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import common
from events.model import (
    BookieDisk,
    BookieLost,
    BookieReadonly,
    BookieReplace,
    BookieWritable,
    EnsembleCheck,
    LedgerCreate,
)
from state import ModelSettings, step
from state.snapshot import decompress, to_document
from streaming.stateful import STATE_CODEC, dump_model, load_model

CLUSTER = "bench"
BATCH = 1000
TOTAL_DISK = 4 * 2**40


def registration(bookies: int, racks: int, rng: random.Random, at_ms: int) -> tuple[list, list[str]]:
    layout = common.rack_layout(bookies, racks)
    names = sorted(layout)
    records = [BookieWritable(cluster=CLUSTER, time_ms=at_ms, bookie=b, location=layout[b]) for b in names]
    records += [BookieDisk(cluster=CLUSTER, time_ms=at_ms, bookie=b, total_disk=TOTAL_DISK,
                           free_disk=rng.randrange(TOTAL_DISK // 10, TOTAL_DISK)) for b in names]
    return records, names


def build(bookies: int, racks: int, conf: dict, settings: ModelSettings, seed: int):
    rng = random.Random(seed)
    records, names = registration(bookies, racks, rng, common.START_MS)
    model = None
    for start in range(0, len(records), BATCH):
        model = step(model, CLUSTER, records[start:start + BATCH], settings).model
    gone = [BookieLost(cluster=CLUSTER, time_ms=common.START_MS + 1000, bookie=b)
            for b in rng.sample(names, max(1, bookies // 100))]
    model = step(model, CLUSTER, gone, settings).model
    return model, names


def size_part(bookies: int, racks: int, conf: dict, settings: ModelSettings, seed: int) -> dict:
    model, _ = build(bookies, racks, conf, settings, seed)
    blob = dump_model(model)
    plain = len(decompress(blob, STATE_CODEC))
    dump_s = min(common.timed(lambda: dump_model(model))[1] for _ in range(3))
    load_s = min(common.timed(lambda: load_model(blob, settings))[1] for _ in range(3))
    again = load_model(blob, settings)
    assert to_document(again) == to_document(model), "snapshot round trip changed the model"
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    held, _ = build(bookies, racks, conf, settings, seed)
    heap = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    del held
    return {"bookies": bookies, "racks": racks, "snapshot_bytes": len(blob), "json_bytes": plain,
            "dumps_ms": dump_s * 1e3, "loads_ms": load_s * 1e3, "heap_bytes": heap}


def event_stream(names: list[str], count: int, rng: random.Random, start_ms: int) -> list:
    """Each bookie cycles lost -> writable -> read-only -> writable; one event per 10 ms."""
    records, phase = [], {}
    for i in range(count):
        bookie = rng.choice(names)
        state = phase.get(bookie, 0)
        t = start_ms + 10 * i
        kind = (BookieLost, BookieWritable, BookieReadonly, BookieWritable)[state]
        records.append(kind(cluster=CLUSTER, time_ms=t, bookie=bookie))
        phase[bookie] = (state + 1) % 4
    return records


def disk_stream(names: list[str], count: int, rng: random.Random, start_ms: int) -> list:
    return [BookieDisk(cluster=CLUSTER, time_ms=start_ms + 10 * i, bookie=rng.choice(names), total_disk=TOTAL_DISK,
                       free_disk=rng.randrange(0, TOTAL_DISK)) for i in range(count)]


def request_stream(names: list[str], count: int, rng: random.Random, start_ms: int, prefix: str) -> list:
    records = []
    for i in range(count):
        t = start_ms + 10 * i
        kind = rng.random()
        request_id = f"{prefix}-{i}"
        if kind < 0.7:
            records.append(LedgerCreate(cluster=CLUSTER, time_ms=t, request_id=request_id, ledger_id=i,
                                        ensemble_size=3, write_quorum=2, ack_quorum=2))
        else:
            ensemble = tuple(rng.sample(names, 3))
            if kind < 0.9:
                records.append(BookieReplace(cluster=CLUSTER, time_ms=t, request_id=request_id, ledger_id=i,
                                             ensemble=ensemble, bookie=ensemble[0], write_quorum=2, ack_quorum=2))
            else:
                records.append(EnsembleCheck(cluster=CLUSTER, time_ms=t, request_id=request_id, ledger_id=i,
                                             ensemble=ensemble, write_quorum=2, ack_quorum=2))
    return records


def mixed_stream(names: list[str], count: int, rng: random.Random, start_ms: int) -> list:
    requests = request_stream(names, count, rng, start_ms, "mix")
    events = event_stream(names, count // 10, rng, start_ms)
    merged = []
    for i, record in enumerate(requests):
        merged.append(record)
        if i % 10 == 9:
            merged.append(events[i // 10])
    return sorted(merged, key=lambda r: r.time_ms)


def rate(model, records: list, conf: dict, settings: ModelSettings, repeat: int) -> float:
    """Records per CPU-second of stepping `records` (batches of 1000) from a copy of `model`."""
    blob = dump_model(model)
    best = float("inf")
    for _ in range(repeat):
        current = load_model(blob, settings)
        started = time.process_time()
        for start in range(0, len(records), BATCH):
            current = step(current, CLUSTER, records[start:start + BATCH], settings).model
        best = min(best, time.process_time() - started)
    return len(records) / best if best > 0 else float("inf")


def throughput_part(bookies: int, racks: int, records: int, conf: dict, settings: ModelSettings, seed: int,
                    repeat: int) -> dict:
    model, names = build(bookies, racks, conf, settings, seed)
    names = sorted(set(names) - model.lost)
    rng = random.Random(seed + 1)
    start = common.START_MS + 60_000
    membership = max(200, records // (10 if bookies > 1000 else 1))
    return {
        "bookies": bookies, "racks": racks,
        "membership_events_per_s": rate(model, event_stream(names, membership, rng, start), conf, settings, repeat),
        "disk_events_per_s": rate(model, disk_stream(names, records, rng, start), conf, settings, repeat),
        "requests_per_s": rate(model, request_stream(names, records, rng, start, "req"), conf, settings, repeat),
        "mixed_records_per_s": rate(model, mixed_stream(names, records, rng, start), conf, settings, repeat),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bookies", type=int, default=10_000)
    parser.add_argument("--racks", type=int, default=100)
    parser.add_argument("--records", type=int, default=20_000, help="records per throughput row")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    conf = dict(common.BENCH_CONF)
    settings = ModelSettings.from_conf(conf)
    info = common.header("state: model size and step throughput",
                         "snapshot and in-memory size of a big cluster; records/s of state.step (CPU time)")
    size = size_part(args.bookies, args.racks, conf, settings, args.seed)
    print(f"size: {size['bookies']} bookies / {size['racks']} racks: "
          f"snapshot {size['snapshot_bytes'] / 1024:.0f} KiB (JSON {size['json_bytes'] / 1024:.0f} KiB), "
          f"dumps {size['dumps_ms']:.0f} ms, loads {size['loads_ms']:.0f} ms, "
          f"in memory {size['heap_bytes'] / 2**20:.1f} MiB", flush=True)
    rows = []
    for bookies, racks in ((120, 12), (args.bookies, args.racks)):
        row = throughput_part(bookies, racks, args.records, conf, settings, args.seed, args.repeat)
        rows.append(row)
        print(f"throughput: {bookies} bookies / {racks} racks: "
              f"membership events {row['membership_events_per_s']:,.0f}/s, "
              f"disk reports {row['disk_events_per_s']:,.0f}/s, requests {row['requests_per_s']:,.0f}/s, "
              f"mix 90/10 {row['mixed_records_per_s']:,.0f}/s", flush=True)
    common.footer(info)
    common.save_json(args.json, {"machine": info, "size": size, "throughput": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
