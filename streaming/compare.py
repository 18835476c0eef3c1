"""`placement-engine compare`: replay the same events under several configurations and compare them.

One job: check every configuration before Spark starts (a file or key the engine refuses is a
`ConfigError` naming the file and the key: exit 2), replay the events once per configuration in one
Spark session with one `engine.seed` (`streaming.replay.run_replay`, so `DIR/<label>/` has the replay
layout), replay once more with `placement.search=complete` (label `<label>+complete`) each
configuration on the default search whose creates or replaces failed with `NOT_ENOUGH_BOOKIES`, then
count the outputs (`streaming.compare_stats`) into `DIR/comparison.json` and draw `DIR/report.html`
(`streaming.report`). Progress goes to stderr as `demo` prints it.

`comparison.json` maps each label to that configuration's figures (schema: README, "Compare
configurations").

Cost: one replay per configuration (and per complete-search replay), then O(outputs) to count them;
the replays dominate.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from policies import create_policy
from state.settings import SEED

from .config import ConfigError, load_conf
from .progress import add_progress_argument
from .settings import EngineSettings, engine_settings

log = logging.getLogger(__name__)

SEARCH_KEY = "placement.search"
DEFAULT_SEARCH = "bookkeeper"
COMPLETE_SEARCH = "complete"
COMPLETE_SUFFIX = "+complete"
DIFFERENCES_SHOWN = 300
"""Requests whose outcome differs between configurations that the report shows in full."""


@dataclass(frozen=True)
class Configuration:
    """One configuration to replay: its label, file, overrides, parsed mapping and settings."""

    label: str
    path: str
    overrides: tuple[str, ...]
    conf: Mapping[str, str]
    settings: EngineSettings
    derived_from: str | None = None

    @property
    def search(self) -> str:
        return str(self.conf.get(SEARCH_KEY, DEFAULT_SEARCH)).strip() or DEFAULT_SEARCH


def plan(conf_paths: Sequence[str], labels: Sequence[str] = (), overrides: Sequence[str] = ()) -> list[Configuration]:
    """Read and check every configuration; labels default to the file names without extension.

    Raises:
        ConfigError: fewer than two files, labels that do not match the files or repeat, a file that
            cannot be read, a key the engine refuses (the message names the file and the key), or
            configurations with different `engine.seed`.
    """
    if len(conf_paths) < 2:
        raise ConfigError("compare: give at least two --conf files")
    if labels and len(labels) != len(conf_paths):
        raise ConfigError(f"--label: {len(labels)} label(s) for {len(conf_paths)} --conf file(s); "
                          "give one per --conf, in the same order, or none")
    names = list(labels) or [Path(path).stem for path in conf_paths]
    for name in names:
        if not name or name in (".", "..") or "/" in name or "\\" in name or name.endswith(COMPLETE_SUFFIX):
            raise ConfigError(f"--label {name!r}: a label names a folder under --out: no '/', not '.' or '..', "
                              f"and not ending in {COMPLETE_SUFFIX!r}")
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ConfigError(f"--label: {', '.join(repeated)} names more than one configuration; give --label "
                          "for each --conf")
    configurations = []
    for name, path in zip(names, conf_paths):
        conf = load_conf(path, overrides)
        configurations.append(Configuration(label=name, path=str(path), overrides=tuple(overrides), conf=conf,
                                            settings=_settings(path, conf)))
    seeds = {c.label: c.settings.configured_seed for c in configurations}
    if len(set(seeds.values())) > 1:
        shown = ", ".join(f"{label} {seed}" for label, seed in seeds.items())
        raise ConfigError(f"{SEED}: the configurations set different seeds ({shown}); a comparison replays every "
                          f"configuration with one seed: set it with --set {SEED}=N")
    return configurations


def complete_variant(configuration: Configuration) -> Configuration | str:
    """The configuration with `placement.search=complete`, or why there is none."""
    if configuration.search != DEFAULT_SEARCH:
        return f"{SEARCH_KEY}={configuration.search} already"
    conf = {**configuration.conf, SEARCH_KEY: COMPLETE_SEARCH}
    try:
        settings = engine_settings(conf)
    except ConfigError as exc:
        return f"refused: {exc}"
    return Configuration(label=configuration.label + COMPLETE_SUFFIX, path=configuration.path,
                         overrides=(*configuration.overrides, f"{SEARCH_KEY}={COMPLETE_SEARCH}"), conf=conf,
                         settings=settings, derived_from=configuration.label)


def _settings(path: str, conf: Mapping[str, str]) -> EngineSettings:
    try:
        return engine_settings(conf)
    except ConfigError as exc:
        raise ConfigError(f"--conf {path}: {exc}") from None


def run_compare(spark: Any, configurations: Sequence[Configuration], events: Sequence[str | Path], out: str | Path,
                *, complete_search: bool = True, stream: TextIO | None = None,
                progress: bool = True) -> dict[str, Any]:
    """Replay `events` under each configuration into `out/<label>/`, write `out/comparison.json` and
    `out/report.html`; return the comparison. Each replay shows its progress on `stream` under its label
    (`streaming.progress`; `progress=False`: none), after a line naming it."""
    from .compare_stats import configuration_figures, topology_changes
    from .progress import ProgressDisplay
    from .replay import input_files, run_replay
    from .report import write_report

    stream = stream if stream is not None else sys.stderr
    display = ProgressDisplay(stream, enabled=progress)
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    files = input_files(events)
    topology = topology_changes(files)
    comparison: dict[str, Any] = {}
    figures: dict[str, Any] = {}

    def replay(configuration: Configuration, step: str) -> None:
        where = out_dir / configuration.label
        stream.write(f"compare {step} {configuration.label} ({configuration.path}, policy "
                     f"{configuration.settings.configured_policy}, search {configuration.search}): replaying...\n")
        stream.flush()
        summary = run_replay(spark, configuration.settings, files, where, display=display, label=configuration.label)
        placement = configuration.settings.model.placement
        counted = configuration_figures(where, topology, default_location=_default_location(configuration.conf),
                                        disk_weighted=placement.disk_weighted,
                                        max_multiple=placement.max_weight_multiple)
        figures[configuration.label] = counted
        comparison[configuration.label] = {
            "conf": configuration.path, "overrides": list(configuration.overrides),
            "policy": configuration.settings.configured_policy, "seed": configuration.settings.configured_seed,
            "search": configuration.search, "derived_from": configuration.derived_from, "outputs": str(where),
            "records": summary["records"], "seconds": summary["seconds"], "dead_letters": counted.dead_letters,
            "clusters": counted.clusters,
        }
        failed = sum(c["decisions"]["by_status"].get("failed", 0) for c in counted.clusters.values())
        stream.write(f"  {configuration.label}: {summary['decisions']['total']} decisions ({failed} failed), "
                     f"{summary['alerts']['total']} alerts, {summary['dead_letters']['total']} dead letters "
                     f"in {summary['seconds']} s\n")
        stream.flush()

    started = time.monotonic()
    for number, configuration in enumerate(configurations, start=1):
        replay(configuration, f"[{number}/{len(configurations)}]")
    for configuration in configurations:
        entry = comparison[configuration.label]
        failures = _placement_failures(figures[configuration.label].outcomes)
        variant = complete_variant(configuration) if failures and complete_search else None
        if isinstance(variant, Configuration):
            replay(variant, "[complete search]")
            entry["complete_search"] = _complete_search_figures(
                variant.label, figures[configuration.label].outcomes, figures[variant.label].outcomes)
        else:
            reason = variant or ("no NOT_ENOUGH_BOOKIES failures" if not failures else "not asked for")
            entry["complete_search"] = {"label": None, "status": reason, "failures": len(failures)}
    labels = [c.label for c in configurations]
    for label in labels:
        comparison[label]["outcome_differences"] = {
            other: _count_differences(figures[label].outcomes, figures[other].outcomes)
            for other in labels if other != label}
    (out_dir / "comparison.json").write_text(json.dumps(comparison, indent=1, sort_keys=True) + "\n",
                                             encoding="utf-8")
    differing = differing_requests(out_dir, labels, {label: figures[label].outcomes for label in labels})
    write_report(out_dir / "report.html", comparison, differing, labels)
    stream.write(f"compare: {len(comparison)} replays in {time.monotonic() - started:.1f} s; "
                 f"{out_dir / 'comparison.json'}, {out_dir / 'report.html'}\n")
    return comparison


def _default_location(conf: Mapping[str, str]) -> str:
    return create_policy({k: v for k, v in conf.items() if not k.startswith("engine.")}).default_location


def _placement_failures(outcomes: Mapping[str, tuple]) -> list[str]:
    """Ids of the creates and replaces that failed with NOT_ENOUGH_BOOKIES."""
    return [key for key, (_, _, _, kind, result) in outcomes.items()
            if kind in ("ledger_create", "bookie_replace") and result == "failed NOT_ENOUGH_BOOKIES"]


def _complete_search_figures(label: str, base: Mapping[str, tuple], complete: Mapping[str, tuple]) -> dict[str, Any]:
    """How many of `base`'s NOT_ENOUGH_BOOKIES failures the complete search avoids, overall and per cluster."""
    per_cluster: dict[str, dict[str, int]] = {}
    failed_base, failed_complete = set(_placement_failures(base)), set(_placement_failures(complete))
    for key in failed_base | failed_complete:
        cluster = (base.get(key) or complete[key])[1]
        tally = per_cluster.setdefault(cluster, {"failures": 0, "failures_with_complete": 0, "avoided": 0})
        tally["failures"] += key in failed_base
        tally["failures_with_complete"] += key in failed_complete
        tally["avoided"] += key in failed_base and key in complete and complete[key][4].startswith("ok")
    return {"label": label, "status": "replayed", "failures": len(failed_base),
            "failures_with_complete": len(failed_complete),
            "avoided": sum(t["avoided"] for t in per_cluster.values()),
            "by_cluster": dict(sorted(per_cluster.items()))}


def _count_differences(mine: Mapping[str, tuple], theirs: Mapping[str, tuple]) -> int:
    return sum(1 for key, value in mine.items() if key in theirs and theirs[key][4] != value[4])


def differing_requests(out_dir: Path, labels: Sequence[str], outcomes: Mapping[str, Mapping[str, tuple]],
                       limit: int = DIFFERENCES_SHOWN) -> dict[str, Any]:
    """The first `limit` requests (in event time) whose outcome differs between the configurations,
    each with every configuration's whole decision; and how many differ in all."""
    from .compare_stats import read_jsonl

    common = set.intersection(*(set(outcomes[label]) for label in labels))
    differ = [key for key in common if len({outcomes[label][key][4] for label in labels}) > 1]
    differ.sort(key=lambda key: outcomes[labels[0]][key][:3])
    shown = differ[:limit]
    wanted = set(shown)
    decisions: dict[str, dict[str, Any]] = {key: {} for key in shown}
    for label in labels:
        for decision in read_jsonl(out_dir / label / "decisions"):
            if decision.get("id") in wanted:
                decisions[decision["id"]][label] = decision
    return {"total": len(differ), "shown": [decisions[key] for key in shown]}


def cmd_compare(args: argparse.Namespace) -> int:
    """The `compare` command: check, start Spark, compare, print where the outputs are."""
    from .check_conf import startup_warnings
    from .session import SHORT_RUN_JAVA_OPTIONS, engine_session

    configurations = plan(args.conf, args.label, args.set)
    for configuration in configurations:
        for warning in startup_warnings(configuration.conf):
            log.warning("configuration %s: %s", configuration.label, warning)
    from .replay import input_files

    input_files(args.events)  # a missing --events path stops here, before Spark starts
    spark = engine_session(configurations[0].settings, "placement-engine-compare", SHORT_RUN_JAVA_OPTIONS)
    run_compare(spark, configurations, args.events, args.out, complete_search=not args.no_complete_search,
                progress=not args.no_progress)
    return 0


def add_parser(sub: Any) -> None:
    """Register `compare` on the command line's subparsers."""
    compare = sub.add_parser("compare", help="replay the same events under several configurations; write each "
                             "one's outputs, comparison.json and a self-contained report.html")
    compare.add_argument("--events", action="append", required=True, metavar="PATH",
                         help="a JSON-lines file or a folder of them (repeatable)")
    compare.add_argument("--conf", action="append", required=True, metavar="FILE",
                         help="a properties file to compare (repeat: at least two)")
    compare.add_argument("--label", action="append", default=[], metavar="NAME",
                         help="a name per --conf, in order (default: the file name without extension)")
    compare.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                         help="override one key in every configuration")
    compare.add_argument("--out", required=True, metavar="DIR")
    compare.add_argument("--no-complete-search", action="store_true",
                         help=f"do not replay failing configurations again with {SEARCH_KEY}={COMPLETE_SEARCH}")
    add_progress_argument(compare)
    compare.set_defaults(func=cmd_compare)


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m streaming.compare ...`: the `compare` command on its own."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        stream=sys.stderr)
    logging.getLogger("py4j").setLevel(logging.WARNING)
    parser = argparse.ArgumentParser(prog="placement-engine")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(["compare", *(sys.argv[1:] if argv is None else argv)])
    try:
        return args.func(args)
    except ConfigError as exc:
        print(f"placement-engine: configuration error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("placement-engine: compare interrupted; anything it was writing is incomplete", file=sys.stderr)
        return 130


__all__ = ["COMPLETE_SEARCH", "SEARCH_KEY", "Configuration", "add_parser", "cmd_compare", "complete_variant",
           "differing_requests", "main", "plan", "run_compare"]


if __name__ == "__main__":
    sys.exit(main())
