"""The pure micro-batch step: order -> apply -> decide -> outputs (STYLE R9).

`step` takes plain values and returns plain values, so tests feed it batch by batch without Spark.

* Items arrive in arrival order. Dead letters become dead-letter outputs first (and a `failed`
  decision with code `INVALID_REQUEST` when the request's cluster and `request_id` could be read).
* Records are applied in `(time, arrival)` order (`state.ordering`); the cluster clock never goes
  back: a late record is applied at the clock and counted.
* A record more than `engine.maxFutureSkewSeconds` ahead of the cluster's latest record
  (`ClusterModel.record_clock_ms`, as it stands when the record's turn comes in time order) is not
  applied: it becomes a `TIME_TOO_FAR_AHEAD` dead letter (a request also gets its `failed`
  INVALID_REQUEST decision), so one bad time cannot move the clock past every stabilization delay. The
  first record of a new cluster sets the clock. Idle ticks do not move `record_clock_ms`, so `run` and
  `replay` refuse the same records.
* Timed changes (a stabilization delay or flap window that ends, a bookie's history or a ledger's
  audit TTL) are applied and reported at their own time (`settle`), before any record of that time
  or later. A batch may carry a `horizon_ms` instead of records (an idle cluster's tick, the end of a
  replay): the model is settled up to it, so an idle cluster's expiries are reported without waiting
  for its next record, with the same outputs the record would have brought. The horizon must not
  pass a record still to come (the streaming layer uses the event-time watermark).
* Each request is answered against the model as it stands at its time, with its own generator
  seeded from `(engine.seed, cluster, request_id)` (STYLE R4): answers do not depend on batch
  boundaries or on other clusters. A decision's id covers the request's content as well
  (`outputs.request_content`), so a reused `request_id` with other content gets another id.
* Sharding (`shards > 1`): every cluster event reaches every shard and is applied by all of them,
  but only shard 0 emits what events produce (their alerts, and dead letters that were not
  requests); a request reaches only its own shard, which answers it. Status records and skew
  alerts are per shard: each shard emits its own.
* After each record and each timed change (a record boundary, at the cluster clock) the cluster's
  status record is emitted when due (`state.status`: change-driven, at most once per
  `engine.statusIntervalSeconds`); a record due at an interval's end is settled like a timed change.
  Each placing decision (a create, a replace) is counted in its skew window, which may open or
  resolve a `placement.cluster.skew` alert after the decision's own outputs (`state.skew`). The step
  counts the ledger alerts it emits for the status (`StatusState.count`).

Policy errors become `failed` decisions (`NotEnoughBookiesError` -> `NOT_ENOUGH_BOOKIES`, another
`PlacementError` -> its `.code`, `ValueError` -> `INVALID_REQUEST`). Nothing raises out of `step` for
bad data; a genuine bug may (the streaming layer guards per request).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from events.dead_letter import DeadLetter, Reason
from events.encode import to_json_text
from events.model import REQUEST_TYPES, BookieReplace, EnsembleCheck, LedgerCreate, Origin, Record
from events.times import format_time
from policies import Adherence, NotEnoughBookiesError, PlacementError

from . import outputs
from .alert_text import decision_hint
from .cluster import ClusterModel
from .health import after_expiry, after_record
from .ordering import in_time_order
from .outputs import Output
from .seeding import seeded_random
from .settings import ModelSettings
from .skew import SCOPE_CREATE, SCOPE_REPLACE

NOT_ENOUGH_BOOKIES = "NOT_ENOUGH_BOOKIES"


@dataclass(frozen=True, slots=True)
class StepResult:
    """The model after the batch, and the batch's outputs in emission order.

    `model` is None only when no model was given and `cluster` is "" (a batch of records whose
    cluster could not be read: dead letters only).
    """

    model: ClusterModel | None
    outputs: list[Output]


def request_rng(seed: int, cluster: str, request_id: str) -> random.Random:
    """The request's own generator (STYLE R4): the same on every machine, batch and shard."""
    key = f"{seed}\0{cluster}\0{request_id}".encode("utf-8", "surrogatepass")
    return seeded_random(int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "big"))



def settle(model: ClusterModel, until_ms: int, *, emit_health: bool = True, shard: int = 0,
           shards: int = 1) -> list[Output]:
    """Apply every timed change due at or before `until_ms`, each at its own time, and report it.

    The clock moves to each expiry time in turn, never to `until_ms` itself, so a record that comes
    later with a time between the two is not late. A status record due (`StatusState.due_ms`) is
    emitted at its time too, before a timed change of a later time (it moves no clock). Cost: O(log n)
    per expiry plus its observation.
    """
    produced: list[Output] = []
    status = model.status
    interval_ms = model.settings.status_interval_ms
    while True:
        due = model.next_expiry_ms()
        status_due = status.due_ms
        if status_due is not None and status_due <= until_ms and (due is None or status_due < due):
            produced.extend(status.fire_due(model, shard=shard, shards=shards))
            continue
        if due is None or due > until_ms:
            return produced
        alerts = model.expire_due(due)
        changes = alerts if emit_health else []
        changes += after_expiry(model, emit_health=emit_health)
        status.count(changes)
        produced.extend(changes)
        produced.extend(status.observe(model, interval_ms, shard=shard, shards=shards))


def step(model: ClusterModel | None, cluster: str, items: Sequence[Any], settings: ModelSettings, *,
         shard: int = 0, shards: int = 1, horizon_ms: int | None = None,
         origins: Mapping[int, Origin] | None = None) -> StepResult:
    """Apply one micro-batch of one cluster (or one shard of it).

    Args:
        model: the cluster's model from the previous batch, or None for a new cluster.
        cluster: the cluster name ("" for records whose cluster could not be read).
        items: records and dead letters of this cluster, in arrival order.
        settings: the model settings (a new model's policy is created from `settings.placement`).
        shard: this shard's number, 0 <= shard < shards.
        shards: shards per cluster.
        horizon_ms: settle the model up to this time after the records (see `settle`); None: no tick.
        origins: where each record came from, by `id(record)`: the `source` of the dead letter of a
            record refused here (`TIME_TOO_FAR_AHEAD`); without it, `{"inline": "unknown"}`.

    Returns:
        The updated model and the outputs.

    Raises:
        ValueError: a caller error: a bad shard number, a model or record of another cluster.
    """
    if shards < 1 or not 0 <= shard < shards:
        raise ValueError(f"shard: expected 0 <= shard < shards, got shard={shard} shards={shards}")
    if model is None and cluster:
        model = ClusterModel(cluster, settings)
    if model is not None and model.cluster != cluster:
        raise ValueError(f"cluster: the model is of cluster {model.cluster!r}, the batch of {cluster!r}")
    emit_events = shard == 0
    result: list[Output] = []
    records = []
    for item in items:
        if isinstance(item, DeadLetter):
            if emit_events or item.record_type in REQUEST_TYPES:
                result.extend(dead_letter_outputs(item, cluster, settings))
        elif item.cluster != cluster:
            raise ValueError(f"cluster: a {item.type} record of cluster {item.cluster!r} in the batch of "
                             f"{cluster!r}; group records by cluster before the step")
        else:
            records.append(item)
    if records and model is None:
        raise ValueError("cluster: records need a cluster name")
    if model is not None:
        # Restored under a lower engine.audit.maxLedgers: forget the excess before anything else.
        forgotten = model.audit.keep_bound(model.clock_ms, model.version)
        model.status.count(forgotten)
        result.extend(forgotten)
        # Restored with skew detection turned off: its open alerts are resolved.
        result.extend(model.skew.keep_bound(model, shard=shard, shards=shards))
        # Restored under a shorter stabilization period, flap window or TTL: changes already due at
        # the clock (the policy dropped those leaves on restore) are applied and reported first.
        due = model.next_expiry_ms()
        if due is not None and due <= model.clock_ms:
            result.extend(settle(model, model.clock_ms, emit_health=emit_events, shard=shard, shards=shards))
    skew_ms = settings.max_future_skew_ms
    interval_ms = settings.status_interval_ms
    for record in in_time_order(records):
        time_ms = record.time_ms
        if skew_ms is not None:
            latest = model.record_clock_ms
            if latest is not None and time_ms - latest > skew_ms:
                if emit_events or record.type in REQUEST_TYPES:
                    letter = too_far_ahead(record, latest, settings, origins)
                    result.extend(dead_letter_outputs(letter, cluster, settings))
                continue
        due = model.next_expiry_ms()
        status_due = model.status.due_ms
        if (due is not None and due <= time_ms) or (status_due is not None and status_due <= time_ms):
            result.extend(settle(model, time_ms, emit_health=emit_events, shard=shard, shards=shards))
        model.advance(time_ms)
        if record.type in REQUEST_TYPES:
            # (`after_record` observes nothing for a request: it changes no topology.)
            changes = answer(model, record)
            model.status.count(changes)
            result.extend(changes)
            if record.type != EnsembleCheck.type and model.skew.enabled:
                result.extend(place(model, record, changes[0].payload, shard=shard, shards=shards))
        else:
            before = (model.writable, model.readonly, model.version)
            alerts = model.apply(record)
            changes = alerts if emit_events else []
            changes += after_record(model, record, before, emit_health=emit_events)
            model.status.count(changes)
            result.extend(changes)
        # A record boundary: the status record, if it is due (`state.status`).
        result.extend(model.status.observe(model, interval_ms, shard=shard, shards=shards))
    if horizon_ms is not None and model is not None:
        result.extend(settle(model, horizon_ms, emit_health=emit_events, shard=shard, shards=shards))
    return StepResult(model, result)


def place(model: ClusterModel, request: LedgerCreate | BookieReplace, decided: Mapping[str, Any], *,
          shard: int = 0, shards: int = 1) -> list[Output]:
    """Count a placing decision in its skew window (`state.skew`): a create's ensemble, a replace's new
    bookie; a failed decision placed nothing. Returns the skew alert it opened or resolved, if any.
    Cost: O(E), plus the skew's own (`state.skew`)."""
    if decided["status"] != outputs.OK:
        return []
    if isinstance(request, LedgerCreate):
        scope, placed = SCOPE_CREATE, decided["ensemble"]
    else:
        scope, placed = SCOPE_REPLACE, [decided["bookie"]] if decided["bookie"] is not None else []
    return model.skew.on_decision(model, scope, request, placed, request.request_id, shard=shard, shards=shards)


def _sorted_tuple(bookies: frozenset[str]) -> tuple[str, ...]:
    return tuple(sorted(bookies)) if bookies else ()


def dead_letter_outputs(letter: DeadLetter, cluster: str, settings: ModelSettings) -> list[Output]:
    """The dead letter, plus a `failed` INVALID_REQUEST decision when the requester can be answered."""
    produced = [outputs.dead_letter(letter, cluster)]
    if letter.needs_failed_decision:
        produced.append(outputs.decision(
            cluster=letter.cluster, request_id=letter.request_id, request_type=letter.record_type,
            ledger_id=letter.ledger_id, time_ms=letter.time_ms, policy=settings.placement.policy, topology_version=None,
            error={"code": outputs.INVALID_REQUEST, "message": f"{letter.reason.name}: {letter.detail}"},
            # The keys every explanation has (README); no `bookies`: nothing was decided against the
            # cluster, and a dead letter is reported before the batch's records are applied.
            explain={"policy": settings.placement.policy, "steps": [], "fallbacks": [], "excluded": {},
                     "dead_letter": letter.reason.name},
            content=outputs.dead_letter_content(letter)))
    return produced


_UNKNOWN_ORIGIN = Origin.inline("unknown")


def too_far_ahead(record: Record, latest_ms: int, settings: ModelSettings,
                  origins: Mapping[int, Origin] | None = None) -> DeadLetter:
    """The `TIME_TOO_FAR_AHEAD` dead letter of a record refused by `engine.maxFutureSkewSeconds`.

    Its `raw` is the record written again from its parsed form (`events.to_json_text`; the step gets
    parsed records, not their text), its `source` the record's origin when `origins` has it.
    """
    origin = origins.get(id(record), _UNKNOWN_ORIGIN) if origins is not None else _UNKNOWN_ORIGIN
    is_request = record.type in REQUEST_TYPES
    skew_s = settings.max_future_skew_s
    ahead_ms = record.time_ms - latest_ms
    return DeadLetter(
        raw=to_json_text(record), source=origin.to_record(), reason=Reason.TIME_TOO_FAR_AHEAD,
        detail=(f"time: {format_time(record.time_ms)} is {ahead_ms // 1000}.{ahead_ms % 1000:03d} s ahead of the "
                f"cluster's latest record ({format_time(latest_ms)}); engine.maxFutureSkewSeconds={skew_s} allows "
                f"at most {skew_s} s. Fix the producer's clock, or raise the key (0: no bound) if the cluster "
                "really had no record for that long"),
        cluster=record.cluster, request_id=record.request_id if is_request else None,
        ledger_id=record.ledger_id if is_request else None, record_type=record.type,
        time_ms=record.time_ms if is_request else None)


def answer(model: ClusterModel, request: LedgerCreate | BookieReplace | EnsembleCheck) -> list[Output]:
    """Answer one request against the model at the current clock: the decision and its alerts.

    Cost: one policy call (plus any deferred rack-info or disk update, see `ClusterModel`).
    """
    if model.rack_info_stale or model.disk_stale:
        model.prepare_request()
    produced: list[Output] = []
    policy = model.policy
    ensemble: list[str] = []
    bookie = None
    adherence = None
    explain: Mapping[str, Any] = {}
    error = None
    try:
        if isinstance(request, LedgerCreate):
            rng = request_rng(model.settings.seed, model.cluster, request.request_id)
            placed = policy.new_ensemble(request.ensemble_size, request.write_quorum, request.ack_quorum,
                                         request.metadata_dict(), _sorted_tuple(request.exclude), rng=rng)
            ensemble, adherence, explain = list(placed.ensemble), placed.adherence, placed.explain
        elif isinstance(request, BookieReplace):
            rng = request_rng(model.settings.seed, model.cluster, request.request_id)
            placed = policy.replace_bookie(len(request.ensemble), request.write_quorum, request.ack_quorum,
                                           request.metadata_dict(), list(request.ensemble), request.bookie,
                                           _sorted_tuple(request.exclude), rng=rng)
            ensemble, adherence, explain = list(placed.ensemble), placed.adherence, placed.explain
            bookie = placed.bookie
        else:
            adherence = policy.is_ensemble_adhering(list(request.ensemble), request.write_quorum,
                                                    request.ack_quorum)
            ensemble = list(request.ensemble)
            # A check selects nothing: the same keys as a placement's explanation, with no steps.
            explain = {"policy": policy.name, "steps": [], "fallbacks": [],
                       "excluded": {}}
    except NotEnoughBookiesError as exc:
        error = {"code": NOT_ENOUGH_BOOKIES, "message": str(exc)}
        explain = exc.explain          # the policy's provenance of the failed call (steps, constraint)
    except PlacementError as exc:
        error = {"code": exc.code, "message": str(exc)}
        explain = exc.explain
    except ValueError as exc:
        error = {"code": outputs.INVALID_REQUEST, "message": str(exc)}
    version = model.version
    adherence_name = None if adherence is None else Adherence(adherence).name
    # Provenance at the state level: what the cluster looked like at decision time, O(1).
    # A failed decision keeps the policy's explanation of the failure (`constraint`, the steps reached).
    # A new dict; what it holds is the policy's, built for this call (so the decision takes it as it is).
    explain = {**explain, "bookies": {"writable": len(model.writable), "readonly": len(model.readonly),
                                      "pending": len(model.pending), "join_failed": len(model.join_failures),
                                      "flapping": len(model.flapping)}}
    decided = outputs.decision(
        cluster=model.cluster, request_id=request.request_id, request_type=request.type,
        ledger_id=request.ledger_id, time_ms=request.time_ms, policy=model.policy_name,
        topology_version=version, ensemble=None if error else ensemble, bookie=None if error else bookie,
        adherence=adherence_name, error=error, explain=explain, explain_ready=True,
        content=outputs.request_content(request))
    produced.append(decided)
    # The ledger audit remembers every placed or checked ensemble (state/audit.py).
    remembered = [] if error is not None else model.audit.remember(
        model, ledger_id=request.ledger_id, request_id=request.request_id, ensemble=ensemble,
        write_quorum=request.write_quorum, ack_quorum=request.ack_quorum, time_ms=model.clock_ms,
        adherence=adherence_name, explain=explain)
    if error is None and adherence_name == "MEETS_STRICT":
        produced.extend(remembered)
        return produced
    subject = request.request_id
    common = {"request_id": request.request_id, "ledger_id": request.ledger_id, "request_type": request.type,
              "decision_id": decided.id, "topology_version": version}
    if error is not None:
        produced.append(outputs.alert(
            alert_type=outputs.ALERT_DECISION_FAILED, cluster=model.cluster, subject=subject,
            time_ms=model.clock_ms, key=decided.id,
            severity=outputs.ERROR if error["code"] == NOT_ENOUGH_BOOKIES else outputs.WARNING,
            data={**common, "code": error["code"], "constraint": error["message"],
                  **decision_hint(error, None, explain)}))
    elif adherence_name in ("MEETS_SOFT", "FAIL"):
        produced.append(outputs.alert(
            alert_type=outputs.ALERT_NOT_ADHERING, cluster=model.cluster, subject=subject,
            time_ms=model.clock_ms, key=decided.id,
            severity=outputs.WARNING if adherence_name == "FAIL" else outputs.INFO,
            data={**common, "adherence": adherence_name, "ensemble": ensemble,
                  "write_quorum": request.write_quorum, "ack_quorum": request.ack_quorum,
                  **decision_hint(None, adherence_name, explain)}))
    produced.extend(remembered)
    return produced


__all__ = ["StepResult", "answer", "dead_letter_outputs", "place", "request_rng", "settle", "step", "too_far_ahead"]
