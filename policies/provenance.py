"""Provenance records shared by the policies: the `steps`, `excluded`, `relaxed` and
`constraint` entries of `PlacementResult.explain` and `PlacementError.explain`.

Shape (the same for every policy; docs/policies-rackaware.md "Provenance" has the full table):

* `steps`: one record per selection stage the policy really ran, in order:
  `{"step": what was being chosen, "scope": where from, "candidates": eligible bookies in that scope
  after every exclusion, ...}`, plus optional counts (`racks`, `regions`, `zones`, group sizes) and
  `"failed": True` when the stage found no acceptable bookie (the next record is the fallback tried,
  or the call failed there). Counts are ints and names short constant strings, so a record costs
  one small dict.
* `excluded`: `{reason: sorted bookie ids}`; reasons are the `EXCLUDED_*` constants below.
* `relaxed`: machine-readable fallbacks that a later topology may make unnecessary (`{"rule": kind,
  ...}`), read by the ledger audit to raise `placement.ledger.re_adhere_possible`.
* `constraint` (failed calls only): the rule that could not be met, in a short sentence.

No policy quarantines bookies (BookKeeper's quarantine lives in the client's bookie watcher); a
caller that quarantines passes those bookies as `exclude` and they appear under `caller`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .api import Adherence, PlacementResult
from .errors import PlacementError

#: `excluded` reasons.
EXCLUDED_CALLER = "caller"                    # the call's `exclude` argument
EXCLUDED_READONLY = "readonly"                # registered read-only: never written to
EXCLUDED_JOIN_FAILED = "join_failed"          # writable, but the location is unusable (join failed)
EXCLUDED_NOT_WRITABLE = "not_writable"        # members of a relocated ensemble that are not writable
EXCLUDED_DEFAULT_RACK = "default_rack"        # default-rack bookies under enforceMinNumRacksPerWriteQuorum
EXCLUDED_DEFAULT_FAULT_DOMAIN = "default_fault_domain"  # zone-aware strict mode
EXCLUDED_ISOLATION = "isolation_group"        # outside the ledger's admitted isolation groups
EXCLUDED_ENSEMBLE = "ensemble"                # the other members (replacements)
EXCLUDED_DISALLOWED_REGION = "disallowed_region"  # bookies of regions switched off by a feature

#: `relaxed` rule kinds.
RULE_RACKS = "racks"            # rack-aware: a position could not take a rack of its own
RULE_REGIONS = "regions"        # region-aware: the ensemble spans fewer regions than allocated
RULE_ZONES = "zones"            # zone-aware: fewer zones than desiredNumZonesPerWriteQuorum
RULE_ISOLATION = "isolation"    # isolation: secondary groups or ungrouped bookies admitted

#: `step` names of ensemble positions, built once: `POSITIONS[i] == "position <i>"`. Grown by `position`
#: (call `position(size - 1)` once before indexing up to `size - 1` on a hot path).
POSITIONS: list[str] = [f"position {i}" for i in range(64)]


def position(index: int) -> str:
    """The `step` name of ensemble position `index` (`POSITIONS[index]`, growing the list if needed)."""
    if index >= len(POSITIONS):
        POSITIONS.extend(f"position {i}" for i in range(len(POSITIONS), index + 1))
    return POSITIONS[index]


def unavailable(policy: Any, excluded: dict[str, list[str]]) -> None:
    """Add the read-only and join-failed bookies the policy knows of to `excluded` (in place).

    Cost: O(1) when there are none (the usual case); otherwise a sort of those (few) bookies.
    """
    readonly = policy.readonly
    if readonly:
        excluded[EXCLUDED_READONLY] = sorted(readonly)
    failures = policy.join_failures
    if failures:
        excluded[EXCLUDED_JOIN_FAILED] = sorted(failures)


def failed(exc: PlacementError, explain: Mapping[str, Any], constraint: str | None = None) -> PlacementError:
    """Give `exc` the call's explanation (keeping what a deeper layer already recorded) and return it.

    Keys already in `exc.explain` win for `constraint` and extra counts; `steps`, `fallbacks` and
    `excluded` are the caller's (the deeper layer wrote into the same lists or reported them here).
    """
    merged = dict(explain)
    inner = exc.explain
    for key, value in inner.items():
        if key not in merged or key in ("constraint", "eligible"):
            merged[key] = value
    if constraint is not None and "constraint" not in inner:
        merged["constraint"] = constraint
    merged.setdefault("constraint", str(exc).split(";")[0])
    exc.explain = merged
    return exc


def retried(first: Mapping[str, Any], second: Mapping[str, Any], note: str, candidates: int, *,
            failed_too: bool = False) -> dict[str, Any]:
    """The explanation of a call retried elsewhere (the stabilized topology): both attempts' steps,
    separated by a `retry` step (`candidates`: the bookies of the retry's topology), and the second
    attempt's other entries. `fallbacks` end with `note` when the retry succeeded; when it failed too
    (`failed_too`) they are the first attempt's, `note`, then the second's."""
    merged = dict(second)
    merged["steps"] = [*first.get("steps", ()), {"step": "retry", "scope": note, "candidates": candidates},
                       *second.get("steps", ())]
    if failed_too:
        merged["fallbacks"] = [*first.get("fallbacks", ()), note, *second.get("fallbacks", ())]
    else:
        merged["fallbacks"] = [*second.get("fallbacks", ()), note]
    return merged


def no_fix(policy: str, why: str) -> PlacementResult:
    """The answer of `relaxation_fix` when the relaxation is still needed: empty, FAIL, and why."""
    return PlacementResult([], Adherence.FAIL, None, {"policy": policy, "steps": [], "excluded": {},
                                                      "fallbacks": [why]})


def fixed(policy: str, ensemble: list[str], adherence: Adherence, replaced: Mapping[str, str],
          exclude: Iterable[str] = (), fallbacks: Iterable[str] = ()) -> PlacementResult:
    """The answer of `relaxation_fix` with a fix: `explain.replaced` maps positions (as strings) to
    their new bookies, as `replace_to_adhere` of the region-aware policy does."""
    caller = sorted(exclude)
    return PlacementResult(ensemble, adherence, None, {
        "policy": policy, "steps": [], "excluded": {EXCLUDED_CALLER: caller} if caller else {},
        "fallbacks": list(fallbacks), "replaced": dict(replaced)})


__all__ = [
    "EXCLUDED_CALLER", "EXCLUDED_DEFAULT_FAULT_DOMAIN", "EXCLUDED_DEFAULT_RACK", "EXCLUDED_DISALLOWED_REGION",
    "EXCLUDED_ENSEMBLE", "EXCLUDED_ISOLATION", "EXCLUDED_JOIN_FAILED", "EXCLUDED_NOT_WRITABLE",
    "EXCLUDED_READONLY", "POSITIONS", "RULE_ISOLATION", "RULE_RACKS", "RULE_REGIONS", "RULE_ZONES", "failed", "fixed",
    "no_fix", "position",
    "retried", "unavailable",
]
