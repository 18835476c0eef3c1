"""`placement-engine check-conf --conf FILE [--events PATH ...] [--set KEY=VALUE ...]`: lint a configuration.

One job: read the configuration as `run` and `replay` read it, run the configuration lint
(`policies.conf_lint`) and the engine's own settings checks over it, and with `--events` replay the
log's cluster events to report each cluster's final topology and the `(E, W, A)` shapes it can place
(`state.topology_report`); print a readable report and return the exit code: 0 clean (notes only),
1 warnings, 2 errors (CONTRACT §3). A file that cannot be read or parsed, or an `--events` path that
does not exist, is a configuration error (exit 2, one line naming the file) as for every command.

`startup_warnings(conf)` gives `run` the same warnings to log when it starts.

No Spark: the events are parsed and stepped in this process. Cost: O(events) for `--events`,
dominated by the parse and the step; without it, the lint's (`policies.conf_lint`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from events.model import Origin
from events.parse import parse_record
from policies.conf_lint import Finding, Severity, configured_shape, effective_policy, exit_code, lint_conf
from state.outputs import iso_time
from state.settings import MODEL_KEYS, ModelSettings
from state.topology_report import COMMON_SHAPES, DRAWS, TopologyReport, final_models, topology_findings, topology_report

from .config import ConfigError, load_conf, parse_properties
from .settings import DEFAULTS, KAFKA_CLIENT_PREFIX, engine_settings

ENGINE_KEYS = frozenset(DEFAULTS) | frozenset(MODEL_KEYS)
"""Every `engine.*` key the engine reads (the streaming settings' and the cluster model's)."""


def lint_findings(conf: Mapping[str, str]) -> list[Finding]:
    """The configuration lint, plus what the engine's settings refuse (one error: the first they meet).

    Unknown `engine.*` keys, already errors of the lint, are left out of the settings check so that it
    can look at the values of the others.
    """
    findings = lint_conf(conf, engine_keys=ENGINE_KEYS, engine_prefixes=(KAFKA_CLIENT_PREFIX,))
    unknown = {f.key for f in findings if f.rule == "unknown-key"}
    try:
        engine_settings({key: value for key, value in conf.items() if key not in unknown})
    except ConfigError as exc:
        message = str(exc)
        key, _, rest = message.partition(": ")
        if not any(f.rule == "invalid-value" and str(f) == f"{Severity.ERROR}: {message}" for f in findings):
            findings.append(Finding(severity=Severity.ERROR, rule="invalid-value", key=key if rest else None,
                                    message=rest or message))
    return findings


def startup_warnings(conf: Mapping[str, str]) -> list[str]:
    """The lint's warnings and errors as log lines, for `run` to log at start (notes are left out).

    `run` has parsed the configuration already, so a value the engine refuses never gets here.
    """
    findings = lint_conf(conf, engine_keys=ENGINE_KEYS, engine_prefixes=(KAFKA_CLIENT_PREFIX,))
    return [str(finding) for finding in findings if finding.severity >= Severity.WARNING]


def duplicate_keys(text: str) -> list[Finding]:
    """Keys set on more than one line of a properties file (the last one applies, silently)."""
    lines: dict[str, list[int]] = {}
    continued = False
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        starts_value = not continued
        continued = stripped.endswith("\\") and not stripped.endswith("\\\\")
        if not starts_value or continued:
            continue
        try:
            parsed = parse_properties(stripped)
        except ConfigError:
            continue
        for key in parsed:
            lines.setdefault(key, []).append(number)
    return [Finding(severity=Severity.WARNING, rule="duplicate-key", key=key, message=(
                f"set on lines {', '.join(map(str, numbers[:-1]))} and {numbers[-1]}; only the last one applies"))
            for key, numbers in lines.items() if len(numbers) > 1]


def check_conf(conf_path: str | Path, overrides: Sequence[str] = (), events: Sequence[str | Path] = (), *,
               out: TextIO | None = None) -> int:
    """Lint the configuration (and the topology of `events`), print the report, return the exit code.

    Raises:
        ConfigError: the file cannot be read or parsed, or an events path does not exist.
    """
    out = out or sys.stdout
    conf = load_conf(conf_path, overrides)
    files = _input_files(events) if events else []
    findings = duplicate_keys(Path(conf_path).read_text(encoding="utf-8")) + lint_findings(conf)
    policy = effective_policy(conf)
    out.write(f"check-conf {conf_path}: policy {policy or '(refused)'}\n")
    _print_findings(findings, out)
    model_settings = _model_settings(conf) if events else None
    if model_settings is not None:
        shape = configured_shape(conf)
        shapes = COMMON_SHAPES if shape is None or shape in COMMON_SHAPES else (*COMMON_SHAPES, shape)
        models = final_models(_records(files), model_settings)
        if not models:
            findings.append(Finding(severity=Severity.WARNING, rule="no-bookies", key=None,
                                    message="the events hold no cluster event"))
            _print_findings(findings[-1:], out)
        for model in models.values():
            report = topology_report(model, shapes)
            _print_topology(report, out)
            found = topology_findings(report, shape)
            _print_findings(found, out)
            findings.extend(found)
    elif events:
        out.write("topology not checked: the engine refuses this configuration\n")
    code = exit_code(findings)
    counts = [sum(1 for f in findings if f.severity is severity) for severity in Severity]
    out.write(f"result: {counts[Severity.ERROR]} error(s), {counts[Severity.WARNING]} warning(s), "
              f"{counts[Severity.NOTE]} note(s): exit {code}\n")
    return code


def _model_settings(conf: Mapping[str, str]) -> ModelSettings | None:
    """The model settings the engine would run with, or None when it refuses the configuration."""
    try:
        return ModelSettings.from_conf(conf)
    except ValueError:
        return None


def _input_files(paths: Sequence[str | Path]) -> list[str]:
    from .replay import input_files  # what `--events` names is defined once, by `replay` (imports Spark)

    return input_files(paths)


def _records(files: Sequence[str]) -> Iterator[Any]:
    """Every non-blank line of the `--events` files, parsed, in file and line order."""
    for name in files:
        with open(name, "rb") as handle:
            for number, line in enumerate(handle, start=1):
                text = line.rstrip(b"\r\n")
                if text.strip():
                    yield parse_record(text, Origin.from_file(name, number))


def _print_findings(findings: Iterable[Finding], out: TextIO) -> None:
    for finding in findings:
        out.write(f"{str(finding.severity):<8} {finding.key + ': ' if finding.key else ''}{finding.message}\n")


def _print_topology(report: TopologyReport, out: TextIO) -> None:
    out.write(f"\ncluster {report.cluster}, policy {report.policy}, at the end of the log "
              f"(last change {iso_time(report.clock_ms)})\n")
    out.write(f"  bookies   {len(report.writable)} writable ({len(report.placeable)} placeable), "
              f"{len(report.readonly)} read-only, {len(report.lost)} lost, {len(report.pending)} pending departure(s), "
              f"{len(report.join_failures)} join failure(s)\n")
    out.write(f"  racks     {len(report.racks)}: {_counts(report.racks)}\n")
    if report.policy == "regionaware":
        out.write(f"  regions   {len(report.regions)}: {_counts(report.regions)}\n")
    if report.policy == "zoneaware":
        out.write(f"  zones     {len(report.zones)}: {_counts(report.zones)}\n")
    on_default = ", ".join(report.on_default) or "none"
    out.write(f"  default   {report.default_location}: {on_default}\n")
    out.write(f"  shapes (E, W, A), {DRAWS} draws each:\n")
    for outcome in report.shapes:
        line = f"    {outcome.shape!s:<11} {outcome.status}"
        if outcome.failures and outcome.failures < outcome.draws:
            line += f" ({outcome.failures} of {outcome.draws} draws failed)"
        if outcome.binding:
            line += f"; binding: {outcome.binding}"
        if outcome.detail:
            line += f" ({outcome.detail})"
        out.write(line + "\n")


def _counts(counts: Mapping[str, int], limit: int = 12) -> str:
    items = [f"{name} ({count})" for name, count in counts.items()]
    more = f", and {len(items) - limit} more" if len(items) > limit else ""
    return (", ".join(items[:limit]) + more) or "none"


def cmd_check_conf(args: argparse.Namespace) -> int:
    return check_conf(args.conf, args.set, args.events)


def add_parser(sub: Any) -> None:
    """Register `check-conf` on the command line's subparsers."""
    check = sub.add_parser("check-conf", help="lint a configuration; with --events, the topology and the "
                           "ledger shapes it can place (exit 0 clean, 1 warnings, 2 errors)")
    check.add_argument("--conf", required=True, help="properties file (BookKeeper, Pulsar and engine.* keys)")
    check.add_argument("--events", action="append", default=[], metavar="PATH",
                       help="a JSON-lines file or a folder of them (repeatable): report the topology at its end")
    check.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override one key")
    check.set_defaults(func=cmd_check_conf)


__all__ = ["ENGINE_KEYS", "add_parser", "check_conf", "duplicate_keys", "lint_findings", "startup_warnings"]
