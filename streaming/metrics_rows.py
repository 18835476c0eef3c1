"""The `run` job's metrics rows: what one (cluster, shard) group put out in one micro-batch, counted,
and the group's gauges; how they travel from the Python workers to the driver.

The state function (`streaming.stateful`, `metrics=True`, the `run` job only) ends every group's call
that stepped the model with one extra output of kind `METRICS`, whose value is `MetricsRow.to_json()`:

    {"cluster": C, "shard": s,
     "counts": {"decisions": [[status, policy, adherence, n], ...],
                "alerts": [[type, severity, n], ...],
                "dead_letters": [[source, code, n], ...]},
     "gauges": state.status.status_gauges(model) | null}

The counts are those of the outputs the same call handed to Spark (after `streaming.output_limits`),
so they equal what the sink writes. `streaming.job.start_kafka_job` gathers the rows with
`DataFrame.observe(OBSERVATION, collect_list(value of the metrics rows))` on the outputs and then
filters them out before the sink: Spark collects an observed aggregate from every task of the
micro-batch and reports it to the driver with the batch's progress (`observedMetrics`), where
`streaming.metrics` reads it in a `StreamingQueryListener`.

Label values are bounded: a decision's `status` (`ok`, `failed`), its `policy` (the configured one)
and `adherence` (the policy's answers, `none` for a failed decision); an alert's `type` and
`severity` (the engine's own); a dead letter's `code` (`events.Reason`) and `source`, which is the
topic it was read from, or `file`, `inline` or `internal` (the engine's own records).

Nothing here imports Spark: the worker builds rows, the driver parses them.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from state.outputs import ALERT, DEAD_LETTER, DECISION, Output

METRICS = "metrics"
"""The kind of a metrics row (never written to a sink)."""

OBSERVATION = "placement_engine"
"""The name of the query's observed metrics (`DataFrame.observe`) holding the micro-batch's rows."""

ROWS = "rows"
"""The observed column: the micro-batch's metrics rows, as a list of JSON texts."""

NO_ADHERENCE = "none"
"""The `adherence` label of a decision without one (a failed decision)."""


def dead_letter_source(source: Mapping[str, object]) -> str:
    """A dead letter's `source` as a bounded label: its topic, else `file`, `inline` or `internal`."""
    topic = source.get("topic")
    if isinstance(topic, str):
        return topic
    if "file" in source:
        return "file"
    if "inline" in source:
        return "inline"
    return "internal"


@dataclass(slots=True)
class OutputCounts:
    """Counts of one group's outputs in one micro-batch, by the labels the metrics export.

    Cost: O(outputs) for `add`.
    """

    decisions: Counter = field(default_factory=Counter)
    alerts: Counter = field(default_factory=Counter)
    dead_letters: Counter = field(default_factory=Counter)

    def add(self, produced: Iterable[Output]) -> None:
        """Count `produced` (status records and anything else not counted are skipped)."""
        for output in produced:
            payload = output.payload
            if output.kind == DECISION:
                self.decisions[(str(payload.get("status")), str(payload.get("policy")),
                                str(payload.get("adherence") or NO_ADHERENCE))] += 1
            elif output.kind == ALERT:
                data = payload.get("data")
                severity = data.get("severity") if isinstance(data, dict) else None
                self.alerts[(str(payload.get("type")), str(severity))] += 1
            elif output.kind == DEAD_LETTER:
                source = payload.get("source")
                self.dead_letters[(dead_letter_source(source if isinstance(source, dict) else {}),
                                   str(payload.get("code")))] += 1

    def to_output(self, cluster: str, shard: int, gauges: Mapping[str, int] | None) -> Output:
        """The metrics row of the group (`kind` `METRICS`; never written to a sink)."""
        payload = {"cluster": cluster, "shard": int(shard), "gauges": dict(gauges) if gauges is not None else None,
                   "counts": {"decisions": _listed(self.decisions), "alerts": _listed(self.alerts),
                              "dead_letters": _listed(self.dead_letters)}}
        return Output(METRICS, cluster, "", payload)


def _listed(counts: Counter) -> list[list]:
    return [[*labels, n] for labels, n in sorted(counts.items())]


@dataclass(frozen=True, slots=True, kw_only=True)
class MetricsRow:
    """One group's metrics row as the driver reads it."""

    cluster: str
    shard: int
    decisions: tuple[tuple[tuple[str, str, str], int], ...] = ()
    alerts: tuple[tuple[tuple[str, str], int], ...] = ()
    dead_letters: tuple[tuple[tuple[str, str], int], ...] = ()
    gauges: Mapping[str, int] | None = None

    @classmethod
    def from_json(cls, text: str) -> MetricsRow:
        """Read a row the state function wrote (`OutputCounts.to_output`).

        Raises:
            ValueError: the text is not such a row.
        """
        try:
            row = json.loads(text)
            counts = row["counts"]
            return cls(cluster=str(row["cluster"]), shard=int(row["shard"]),
                       decisions=tuple((tuple(item[:3]), int(item[3])) for item in counts["decisions"]),
                       alerts=tuple((tuple(item[:2]), int(item[2])) for item in counts["alerts"]),
                       dead_letters=tuple((tuple(item[:2]), int(item[2])) for item in counts["dead_letters"]),
                       gauges=None if row["gauges"] is None else {k: int(v) for k, v in row["gauges"].items()})
        except (TypeError, KeyError, IndexError, ValueError) as exc:
            raise ValueError(f"not a metrics row ({type(exc).__name__}: {exc}): {text[:200]!r}") from exc


__all__ = ["METRICS", "NO_ADHERENCE", "OBSERVATION", "ROWS", "MetricsRow", "OutputCounts", "dead_letter_source"]
