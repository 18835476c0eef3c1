"""Shared helpers of the benchmarks in bench/: what machine, what load, what memory, what input.

Nothing here is part of the engine; the benchmarks import it as `common` (bench/ is put first on
sys.path when a benchmark runs as a script). Every benchmark prints a header made by `header()` and a
footer made by `footer()`, so each figure carries the machine it was measured on, the load average
before and after (the machine may be shared) and the command that re-runs it.

Generators (`write_busy_day`, `write_clusters`) write contract-shaped JSON lines in time order, seeded,
so the same arguments give the same file.
"""

from __future__ import annotations

import json
import math
import os
import platform
import random
import shlex
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from events import format_time  # noqa: E402

START_MS = 1_795_046_400_000  # 2026-11-20T00:00:00Z, the start of every generated day
DAY_MS = 86_400_000

#: The placement configuration of the benchmarks unless a benchmark says otherwise: rack-aware with
#: BookKeeper's usual production switches (two racks per write quorum, enforced; disk weights).
BENCH_CONF: dict[str, str] = {
    "ensemblePlacementPolicy": "rackaware",
    "minNumRacksPerWriteQuorum": "2",
    "enforceMinNumRacksPerWriteQuorum": "true",
    "diskWeightBasedPlacementEnabled": "true",
    "networkTopologyStabilizePeriodSeconds": "30",
    "engine.seed": "1",
}


# -- the machine ----------------------------------------------------------------------------------


def load_average() -> tuple[float, float, float]:
    """The 1, 5 and 15 minute load averages (/proc/loadavg)."""
    try:
        one, five, fifteen = Path("/proc/loadavg").read_text().split()[:3]
        return float(one), float(five), float(fifteen)
    except (OSError, ValueError):
        return (float("nan"),) * 3


def _version(module: str) -> str:
    try:
        return __import__(module).__version__
    except Exception:  # noqa: BLE001 - absent or broken: say so in the header
        return "absent"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _memory_total_gib() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 1024 / 1024
    except OSError:
        pass
    return float("nan")


def machine(spark: bool = False) -> dict[str, Any]:
    """What the figures were measured on."""
    info = {
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cpus": os.cpu_count(),
        "memory_gib": round(_memory_total_gib(), 1),
        "python": platform.python_version(),
    }
    if spark:
        info.update(pyspark=_version("pyspark"), pandas=_version("pandas"), pyarrow=_version("pyarrow"))
    return info


def header(title: str, what: str, spark: bool = False) -> dict[str, Any]:
    """Print the benchmark's header; return the machine info plus the load before (for `footer`)."""
    info = machine(spark)
    load = load_average()
    script = Path(sys.argv[0])
    try:
        script = script.resolve().relative_to(ROOT)
    except ValueError:
        pass
    command = " ".join([".venv/bin/python", str(script), *map(shlex.quote, sys.argv[1:])])
    print(f"# {title}")
    for line in what.strip().splitlines():
        print(f"#   {line}")
    print(f"# machine: {info['platform']}, {info['cpu']}, {info['cpus']} CPUs, {info['memory_gib']} GiB, "
          f"Python {info['python']}"
          + (f", pyspark {info['pyspark']}, pandas {info['pandas']}, pyarrow {info['pyarrow']}" if spark else ""))
    print(f"# load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (1/5/15 min; the machine may be shared)")
    print(f"# re-run (from the repository root): {command}", flush=True)
    return {**info, "load_before": load, "command": command}


def footer(info: Mapping[str, Any]) -> tuple[float, float, float]:
    """Print the load average after the run; return it."""
    load = load_average()
    before = info["load_before"]
    print(f"# load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} "
          f"(before: {before[0]:.2f} {before[1]:.2f} {before[2]:.2f})", flush=True)
    return load


def save_json(path: str | Path | None, payload: Mapping[str, Any]) -> None:
    """Write results as JSON (for plot_cost.py and docs); nothing when `path` is None."""
    if path:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(json.dumps(payload, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")
        print(f"# results written to {path}")


# -- memory and CPU of a process tree (the driver, its JVM and Spark's Python workers) -------------


def _children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read().decode("ascii", "replace")
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    return children


def _rss_kib(pid: int) -> int:
    """Proportional set size (shared pages split among the processes sharing them), else RSS, in KiB.

    PSS, because Spark's Python workers are forked from one daemon and the JVM forks helpers: their RSS
    counts the same copy-on-write pages several times."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as handle:
            for line in handle:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    try:
        with open(f"/proc/{pid}/status", "rb") as handle:
            for line in handle:
                if line.startswith(b"VmRSS:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of one process so far."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().decode("ascii", "replace").rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICKS
    except (OSError, ValueError, IndexError):
        return 0.0


def _name(pid: int) -> str:
    if pid == os.getpid():
        return "benchmark"
    try:
        name = Path(f"/proc/{pid}/comm").read_text().strip()
        if name.startswith("python"):
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if b"pyspark.daemon" in cmdline or any(b"pyspark/daemon" in c for c in cmdline):
                return "python worker"
        return name
    except OSError:
        return "?"


def process_tree(root: int | None = None) -> list[int]:
    """`root` (default: this process) and all its descendants."""
    root = os.getpid() if root is None else root
    children = _children_map()
    found, stack = [], [root]
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack.extend(children.get(pid, ()))
    return found


def tree_rss_mib(root: int | None = None) -> tuple[float, dict[str, float]]:
    """Memory (PSS, see `_rss_kib`) of `root` (default: this process) and its descendants, in MiB; also per name."""
    total = 0
    per: dict[str, float] = {}
    for pid in process_tree(root):
        rss = _rss_kib(pid)
        total += rss
        name = _name(pid)
        per[name] = per.get(name, 0.0) + rss / 1024
    return total / 1024, per


@dataclass
class PeakMemory:
    """Samples a process tree every `interval_s` in a thread: peak memory, and CPU seconds per process name.

    Memory is the sum of the processes' PSS (`_rss_kib`), so shared pages count once. CPU is
    the growth of each process's user+system time while sampled (a process that ends between two
    samples loses its last interval), so on a shared machine it says what this work cost, whatever
    the wall clock says. `root` None samples this process's tree; set `root` for another process.
    """

    interval_s: float = 0.25
    root: int | None = None
    peak_mib: float = 0.0
    peak_parts: dict[str, float] = field(default_factory=dict)
    cpu_by_name: dict[str, float] = field(default_factory=dict)
    _first_cpu: dict[int, tuple[str, float]] = field(default_factory=dict, repr=False)
    _last_cpu: dict[int, float] = field(default_factory=dict, repr=False)
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)
    _thread: threading.Thread | None = field(default=None, repr=False)

    def sample(self) -> float:
        total = 0
        parts: dict[str, float] = {}
        for pid in process_tree(self.root):
            rss = _rss_kib(pid)
            if not rss:
                continue
            name = _name(pid)
            total += rss
            parts[name] = parts.get(name, 0.0) + rss / 1024
            cpu = _cpu_s(pid)
            if pid not in self._first_cpu:
                # A process that started after the first sample counts from zero (it is ours).
                self._first_cpu[pid] = (name, cpu if not self._thread else 0.0)
            else:
                # The latest name: spark-submit's bash execs java in the same process.
                self._first_cpu[pid] = (name, self._first_cpu[pid][1])
            self._last_cpu[pid] = cpu
        total /= 1024
        if total > self.peak_mib:
            self.peak_mib, self.peak_parts = total, parts
        cpu_by_name: dict[str, float] = {}
        for pid, (name, first) in self._first_cpu.items():
            cpu_by_name[name] = cpu_by_name.get(name, 0.0) + self._last_cpu[pid] - first
        self.cpu_by_name = cpu_by_name
        return total

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def start(self) -> PeakMemory:
        self.sample()
        self._thread = threading.Thread(target=self._run, name="peak-memory", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.sample()

    def __enter__(self) -> PeakMemory:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def cpu_now(self) -> dict[str, float]:
        """CPU seconds per process name so far (takes a sample first); subtract two of these for a phase."""
        self.sample()
        return dict(self.cpu_by_name)

    @property
    def cpu_s(self) -> float:
        return sum(self.cpu_by_name.values())

    def describe(self) -> str:
        parts = ", ".join(f"{name} {mib:.0f}" for name, mib in sorted(self.peak_parts.items(), key=lambda kv: -kv[1])
                          if mib >= 1)
        return f"{self.peak_mib:.0f} MiB ({parts})"

    def describe_cpu(self) -> str:
        parts = ", ".join(f"{name} {s:.1f}" for name, s in sorted(self.cpu_by_name.items(), key=lambda kv: -kv[1])
                          if s >= 0.05)
        return f"{self.cpu_s:.1f} CPU-s ({parts})"


# -- clusters and generated input -------------------------------------------------------------------


def bookie_id(index: int) -> str:
    """A bookie id like BookKeeper's default (ip:port)."""
    return f"10.{index // 65536}.{index // 256 % 256}.{index % 256}:3181"


def rack_layout(bookies: int, racks: int, regions: int = 0) -> dict[str, str]:
    """bookie -> location, bookies dealt round-robin over racks; `/region<j>/rack<i>` when `regions` > 0."""
    layout = {}
    for b in range(bookies):
        rack = b % racks
        layout[bookie_id(b)] = f"/region{rack % regions}/rack{rack}" if regions else f"/rack{rack}"
    return layout


def _line(record: Mapping[str, Any]) -> str:
    return json.dumps(record, separators=(",", ":")) + "\n"


def registration(cluster: str, layout: Mapping[str, str], at_ms: int, rng: random.Random) -> Iterator[dict]:
    """Every bookie joins writable with its location, then reports its disk."""
    total = 4 << 40
    for n, (bookie, location) in enumerate(layout.items()):
        yield {"type": "bookie_writable", "cluster": cluster, "time": format_time(at_ms + n),
               "bookie": bookie, "location": location}
    for n, bookie in enumerate(layout):
        yield {"type": "bookie_disk", "cluster": cluster, "time": format_time(at_ms + len(layout) + n),
               "bookie": bookie, "total_disk": total, "free_disk": rng.randrange(total // 10, total)}


def request(cluster: str, n: int, at_ms: int, bookies: Sequence[str], rng: random.Random,
            request_id: str | None = None) -> dict:
    """One request of the mix: 70% ledger_create (3/3/2, a fifth 5/3/2), 20% bookie_replace, 10% ensemble_check."""
    rid = request_id or f"r{n}"
    kind = rng.random()
    if kind < 0.70:
        size = 5 if rng.random() < 0.2 else 3
        return {"type": "ledger_create", "cluster": cluster, "time": format_time(at_ms), "request_id": rid,
                "ledger_id": n, "ensemble_size": size, "write_quorum": 3, "ack_quorum": 2}
    ensemble = rng.sample(bookies, 3)
    if kind < 0.90:
        return {"type": "bookie_replace", "cluster": cluster, "time": format_time(at_ms), "request_id": rid,
                "ledger_id": n, "ensemble": ensemble, "bookie": ensemble[rng.randrange(3)],
                "write_quorum": 3, "ack_quorum": 2}
    return {"type": "ensemble_check", "cluster": cluster, "time": format_time(at_ms), "request_id": rid,
            "ledger_id": n, "ensemble": ensemble, "write_quorum": 3, "ack_quorum": 2}


def busy_day_events(cluster: str, layout: Mapping[str, str], rng: random.Random,
                    disk_interval_s: int = 600) -> list[tuple[int, dict]]:
    """The cluster events of a day, as (time_ms, record), sorted by time.

    Registration at 00:00; every `disk_interval_s` a poll round in which every bookie reports its disk
    (BookKeeper's BookieInfoReader polls all bookies per round; its default period is a day); one rolling restart
    an hour (a bookie is lost and back 90 s later); two bookies read-only for an hour; one rack down
    for 10 minutes at 14:00; one bookie moved to another rack at 18:00.
    """
    bookies = list(layout)
    racks = sorted(set(layout.values()))
    events: list[tuple[int, dict]] = []

    def add(at_ms: int, kind: str, **fields: Any) -> None:
        events.append((at_ms, {"type": kind, "cluster": cluster, "time": format_time(at_ms), **fields}))

    for n, record in enumerate(registration(cluster, layout, START_MS, rng)):
        events.append((START_MS + n, record))
    total = 4 << 40
    free = {b: rng.randrange(total // 4, total) for b in bookies}
    steps = DAY_MS // (disk_interval_s * 1000)
    for s in range(1, steps):
        base = START_MS + s * disk_interval_s * 1000
        for i, bookie in enumerate(bookies):  # one poll round, as BookKeeper's BookieInfoReader does
            free[bookie] = max(0, free[bookie] - rng.randrange(0, total // 500))
            add(base + i // 10, "bookie_disk", bookie=bookie, total_disk=total, free_disk=free[bookie])
    for hour in range(24):
        bookie = bookies[(hour * 7) % len(bookies)]
        at = START_MS + hour * 3_600_000 + 1_800_000
        add(at, "bookie_lost", bookie=bookie)
        add(at + 90_000, "bookie_writable", bookie=bookie, location=layout[bookie])
    for k, hour in enumerate((9, 21)):
        bookie = bookies[(11 + k) % len(bookies)]
        add(START_MS + hour * 3_600_000, "bookie_readonly", bookie=bookie)
        add(START_MS + (hour + 1) * 3_600_000, "bookie_writable", bookie=bookie)
    down = [b for b in bookies if layout[b] == racks[len(racks) // 2]]
    if len(racks) > 2:
        for b in down:
            add(START_MS + 14 * 3_600_000, "bookie_lost", bookie=b)
            add(START_MS + 14 * 3_600_000 + 600_000, "bookie_writable", bookie=b)
    moved = bookies[-1]
    add(START_MS + 18 * 3_600_000, "bookie_location", bookie=moved, location=racks[0])
    events.sort(key=lambda item: item[0])
    return events


def write_busy_day(path: str | Path, requests: int, bookies: int = 120, racks: int = 12, seed: int = 7,
                   cluster: str = "busy", disk_interval_s: int = 600, regions: int = 0) -> dict[str, int]:
    """Write a day of one busy cluster to `path`: its events merged in time order with `requests`
    requests spread evenly over the day (racks spread over `regions` regions when > 0, see
    `rack_layout`). Returns counts by kind."""
    rng = random.Random(seed)
    layout = rack_layout(bookies, racks, regions)
    members = list(layout)
    events = busy_day_events(cluster, layout, rng, disk_interval_s)
    spacing = (DAY_MS - 1000) / max(requests, 1)
    counts = {"events": len(events), "requests": requests}
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as out:
        e = 0
        for n in range(requests):
            at = START_MS + 1000 + int(n * spacing)
            while e < len(events) and events[e][0] <= at:
                out.write(_line(events[e][1]))
                e += 1
            out.write(_line(request(cluster, n, at, members, rng)))
        for _, record in events[e:]:
            out.write(_line(record))
    counts["records"] = counts["events"] + requests
    return counts


def write_clusters(path: str | Path, clusters: int, bookies: int, racks: int, requests: int,
                   seed: int = 7) -> dict[str, int]:
    """Write `clusters` clusters of `bookies`/`racks` each (registration, disk reports) and then
    `requests` requests dealt round-robin over the clusters, 10 ms apart. Returns counts."""
    rng = random.Random(seed)
    layout = rack_layout(bookies, racks)
    members = list(layout)
    events = 0
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as out:
        for c in range(clusters):
            for record in registration(f"c{c:04d}", layout, START_MS, rng):
                out.write(_line(record))
                events += 1
        begin = START_MS + 2 * bookies + 1000
        for n in range(requests):
            out.write(_line(request(f"c{n % clusters:04d}", n, begin + n * 10, members, rng)))
    return {"events": events, "requests": requests, "records": events + requests}


def cpu_between(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
    """CPU seconds per process name between two `PeakMemory.cpu_now()` snapshots."""
    return {name: after[name] - before.get(name, 0.0) for name in after if after[name] - before.get(name, 0.0) >= 0.005}


def describe_cpu(cpu: Mapping[str, float]) -> str:
    parts = ", ".join(f"{name} {s:.1f}" for name, s in sorted(cpu.items(), key=lambda kv: -kv[1]) if s >= 0.05)
    return f"{sum(cpu.values()):.1f} CPU-s ({parts})"


def timed(call: Callable[[], Any]) -> tuple[Any, float, float]:
    """(result, wall seconds, this process's CPU seconds)."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = call()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) by nearest rank; nan for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(q / 100 * len(ordered))))
    return ordered[rank - 1]


# -- the state function without Spark ---------------------------------------------------------------


class FakeGroupState:
    """The part of Spark's GroupState the engine's state function uses (get, exists, update,
    hasTimedOut; no timeouts fire here)."""

    hasTimedOut = False  # noqa: N815 - Spark's name

    def __init__(self) -> None:
        self.value: tuple | None = None

    @property
    def exists(self) -> bool:
        return self.value is not None

    @property
    def get(self) -> tuple:
        return self.value

    def update(self, value: tuple) -> None:
        self.value = value


def input_frame(cluster: str, lines: Sequence[str], first: int, shard: int = 0):
    """The pandas frame Spark hands the state function for one group (columns of stateful.INPUT_COLUMNS)."""
    import pandas as pd

    positions = range(first, first + len(lines))
    return pd.DataFrame({"cluster": cluster, "shard": shard, "o1": 1, "o2": 0, "o3": positions,
                         "src_name": "requests", "src_part": 0, "src_pos": positions, "value": list(lines)})


POLICY_CALLS = ("new_ensemble", "replace_bookie", "is_ensemble_adhering", "on_cluster_changed",
                "update_bookie_info", "update_rack_info", "on_bookie_rack_change")


def _timed_method(method: Callable, name: str, sink: dict[str, list[float]], depth: list[int]) -> Callable:
    """`method` timed into `sink[name]` = [CPU seconds, calls]; only outermost calls count (a policy
    method calling another public one, e.g. new_ensemble -> is_ensemble_adhering, is not counted twice)."""
    clock = time.process_time
    slot = sink.setdefault(name, [0.0, 0])

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if depth[0]:
            return method(*args, **kwargs)
        depth[0] += 1
        start = clock()
        try:
            return method(*args, **kwargs)
        finally:
            slot[0] += clock() - start
            slot[1] += 1
            depth[0] -= 1

    return wrapper


def stage_breakdown(lines: Sequence[str], conf: Mapping[str, str], cluster: str,
                    batch: int) -> dict[str, float]:
    """CPU seconds spent per stage of the engine's per-group work over `lines`, cut in batches of `batch`.

    Mirrors streaming.stateful's function stage by stage (input frame and sort, parse, snapshot load,
    step with the policy calls timed apart, output JSON, output frame, snapshot dump), without Spark.
    Also returns "snapshot bytes (last)", "snapshot load s (last)" and "snapshot store s (last)" (CPU
    seconds of one more load and store of the last snapshot), "audit ledgers (last)" and, per policy
    method, "policy.<name> x<calls>" (CPU seconds, already inside "step: policy calls").
    """
    import pandas as pd

    from events import DeadLetter, Origin, parse_record
    from state.cluster import ClusterModel
    from state.settings import ModelSettings
    from state.step import step
    from streaming.stateful import dump_model, load_model
    from streaming.worker_gc import paused_gc, tune_worker_gc

    tune_worker_gc()  # as the engine's Python workers run
    settings = ModelSettings.from_conf(conf)
    stages = dict.fromkeys(("input frame + sort", "parse_record", "snapshot load", "step: policy calls",
                            "step: model + decisions", "output to_json", "output frame", "snapshot dump"), 0.0)
    clock = time.process_time  # CPU time of this process: other load on the machine does not count
    blob = None
    snapshot_bytes = 0
    per_call: dict[str, list[float]] = {}
    for first in range(0, len(lines), batch):
        # The state function keeps the collector off for a group's whole call (streaming.worker_gc).
        with paused_gc():
            t0 = clock()
            frame = input_frame(cluster, lines[first:first + batch], first)
            frame = frame.sort_values(["o1", "o2", "o3"], kind="stable")
            t1 = clock()
            items = []
            for name, part, pos, value in zip(frame["src_name"], frame["src_part"], frame["src_pos"],
                                              frame["value"]):
                item = parse_record(value, Origin.from_kafka(name, int(part), int(pos)))
                if isinstance(item, DeadLetter):
                    raise RuntimeError(f"generated record became a dead letter: {item.reason}: {item.detail}")
                items.append(item)
            t2 = clock()
            model = (load_model(blob, settings) if blob is not None
                     else ClusterModel(cluster, settings))
            t3 = clock()
            calls: dict[str, list[float]] = {}
            depth = [0]
            for name in POLICY_CALLS:
                if hasattr(model.policy, name):
                    setattr(model.policy, name, _timed_method(getattr(model.policy, name), name, calls, depth))
            result = step(model, cluster, items, settings)
            t4 = clock()
            policy_time = sum(seconds for seconds, _ in calls.values())
            for name, (seconds, count) in calls.items():
                total = per_call.setdefault(name, [0.0, 0])
                total[0] += seconds
                total[1] += count
            texts = [o.to_json() for o in result.outputs]
            t5 = clock()
            pd.DataFrame({"kind": [o.kind for o in result.outputs], "cluster": [o.cluster for o in result.outputs],
                          "id": [o.id for o in result.outputs], "value": texts},
                         columns=["kind", "cluster", "id", "value"])
            t6 = clock()
            for name in POLICY_CALLS:  # drop the timing wrappers before serialising
                result.model.policy.__dict__.pop(name, None)
            blob = dump_model(result.model)
            snapshot_bytes = len(blob)
            t7 = clock()
            stages["input frame + sort"] += t1 - t0
            stages["parse_record"] += t2 - t1
            stages["snapshot load"] += t3 - t2
            stages["step: policy calls"] += policy_time
            stages["step: model + decisions"] += (t4 - t3) - policy_time
            stages["output to_json"] += t5 - t4
            stages["output frame"] += t6 - t5
            stages["snapshot dump"] += t7 - t6
    stages["snapshot bytes (last)"] = snapshot_bytes
    if blob is not None:  # one cold load and one store of the last snapshot (a group moved to another worker)
        t0 = clock()
        model = load_model(blob, settings)
        t1 = clock()
        dump_model(model)
        stages["snapshot load s (last)"], stages["snapshot store s (last)"] = t1 - t0, clock() - t1
        stages["audit ledgers (last)"] = len(model.audit.entries)
    for name, (seconds, count) in sorted(per_call.items()):
        stages[f"policy.{name} x{count}"] = seconds
    return stages
