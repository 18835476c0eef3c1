"""Golden outputs: check that a change of structure leaves every output byte-identical.

It replays fixed scenarios through the real command line (local Spark) and digests what they write:

* the demo (`placement-engine demo --requests 2000 --seed 11`), with its default configuration;
* a three-cluster scenario under each ready configuration in `conf/` and the default policy: the demo's
  generator run with three seeds, each under its own cluster name, with isolation groups on the bookies
  and a few malformed lines.

A digest is the SHA-256 of the sorted lines of each output folder (decisions, alerts, dead letters), with
the line count, so partition layout and file names do not matter. `summary.json` is compared without its
timing fields.

Usage, from the repository root::

    .venv/bin/python bench/golden.py record --json /tmp/reference.json   # on the code before the change
    .venv/bin/python bench/golden.py check --json /tmp/reference.json    # on the changed code

`check` exits 1 and names each output that differs. To record the reference from another checkout, run
`record` from that checkout with this file, e.g. `PYTHONPATH=/path/to/old .venv/bin/python bench/golden.py`.
Not a test: a run takes a few minutes of Spark.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFS = ("default", "rackaware", "regionaware", "zoneaware", "diskweighted", "isolated")
CLUSTERS = (("east", 3), ("west", 5), ("north", 8))
REQUESTS = 1500
TIMING_FIELDS = ("seconds", "records_per_second", "batches", "throughput", "wall_seconds")
MALFORMED = (
    "{not json",
    '{"type": "ledger_create", "cluster": "east", "request_id": "bad-1", "time": "2026-11-18T11:06:40Z"}',
    '{"type": "bookie_writable", "cluster": "west", "time": "yesterday", "bookie": "x:1"}',
    '{"type": "ledger_create", "cluster": "north", "request_id": "bad-2", "time": "2026-11-18T11:10:00Z",'
    ' "ensemble_size": 2, "write_quorum": 3, "ack_quorum": 1}',
)


def _scenario(path: Path) -> None:
    """Three clusters from the demo's generator; region-c bookies in the secondary isolation group."""
    from streaming.demo import generate

    lines = []
    for cluster, seed in CLUSTERS:
        for record in generate(REQUESTS, seed):
            record["cluster"] = cluster
            if record.get("type") == "bookie_writable" and record.get("location"):
                record["group"] = "secondary" if "region-c" in record["location"] else "primary"
            lines.append(json.dumps(record, sort_keys=True))
    lines.extend(MALFORMED)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _digest_folder(folder: Path) -> dict[str, object]:
    lines: list[bytes] = []
    for file in sorted(folder.rglob("*")):
        if file.is_file() and not file.name.startswith((".", "_")):
            lines.extend(line for line in file.read_bytes().splitlines() if line)
    lines.sort()
    return {"lines": len(lines), "sha256": hashlib.sha256(b"\n".join(lines)).hexdigest()}


def _digest_run(out: Path) -> dict[str, object]:
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    for name in TIMING_FIELDS:
        summary.pop(name, None)
    return {
        "decisions": _digest_folder(out / "decisions"),
        "alerts": _digest_folder(out / "alerts"),
        "dead-letters": _digest_folder(out / "dead-letters"),
        "summary": hashlib.sha256(json.dumps(summary, sort_keys=True).encode()).hexdigest(),
    }


def _cli(work: Path, *args: str) -> None:
    """Run the command line from `work`, so the packages come from PYTHONPATH or the installed project."""
    subprocess.run([sys.executable, "-m", "streaming.cli", *args], check=True, cwd=work, stdout=subprocess.DEVNULL)


def digests(work: Path) -> dict[str, object]:
    """Run every scenario under `work` and return the digests by scenario name."""
    results: dict[str, object] = {}
    demo = work / "demo"
    _cli(work, "demo", "--requests", "2000", "--seed", "11", "--out", str(demo))
    results["demo"] = _digest_run(demo)
    events = work / "input" / "events.jsonl"
    _scenario(events)
    results["input"] = hashlib.sha256(events.read_bytes()).hexdigest()
    for name in CONFS:
        out = work / name
        conf = ROOT / "conf" / f"{name}.properties"
        if not conf.exists():
            conf = work / f"{name}.properties"
            conf.write_text(f"ensemblePlacementPolicy={name}\n", encoding="utf-8")
        _cli(work, "replay", "--conf", str(conf), "--events", str(events.parent), "--out", str(out))
        results[name] = _digest_run(out)
        print(f"golden: {name} done", file=sys.stderr)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("record", "check"))
    parser.add_argument("--json", required=True, help="the digests file")
    parser.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "placement-golden"),
                        help="scratch folder, emptied first; dead letters name their input file, so the "
                             "reference and the check must use the same path (default: %(default)s)")
    args = parser.parse_args(argv)
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    current = digests(work)
    path = Path(args.json)
    if args.mode == "record":
        path.write_text(json.dumps(current, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        print(f"golden: recorded {len(current)} scenarios in {path}")
        return 0
    reference = json.loads(path.read_text(encoding="utf-8"))
    differing = [name for name in sorted(reference) if reference[name] != current.get(name)]
    for name in differing:
        print(f"golden: {name} differs: reference {reference[name]} now {current.get(name)}")
    print(f"golden: {len(reference) - len(differing)} of {len(reference)} scenarios identical")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
