"""The wording of the ledger audit's and the decisions' alerts: the sentences operators read.

`state.audit` decides *when* an alert opens or resolves and *what* its data holds; this module says it
in words: the problem sentences of a verdict (`member_problem`, `describe_fail`), the reasons an alert
resolves for, the relaxation notes of a placement (`relaxed_notes`), and the `action` (with a suggested
fix, `fix_action`) that tells the operator what to do. Every text is built from the values given, so
the same input always reads the same (alert ids do not depend on it, but replays compare it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from policies import Adherence, PlacementPolicy
from policies.base import distinct_per_write_set

from .outputs import ALERT_LEDGER_RE_ADHERE

#: At most this many relaxation notes per ledger (adherence first, then the policy's fallbacks).
MAX_RELAXED_NOTES = 5

RE_ADHERE_ACTION = ("move the ledger to the suggested ensemble (bookie_replace of each listed position, or "
                    "BookKeeper's auditor/autorecovery); it no longer needs the relaxed rule")
ADHERES_AGAIN = "the ensemble adheres again"
NO_IMPROVING_CHANGE = "no change of bookies improves the ensemble"


def relaxed_notes(adherence: str | None, explain: Mapping[str, Any] | None) -> tuple[str, ...]:
    """Why a placement was made under a relaxed rule, as sentences: adherence below MEETS_STRICT, then
    the policy's fallback notes (at most `MAX_RELAXED_NOTES` notes in all). The machine-readable
    relaxations are `state.audit.relaxation_rules`."""
    notes = []
    if adherence is not None and adherence != Adherence.MEETS_STRICT.name:
        notes.append(f"adherence {adherence}")
    for note in (explain or {}).get("fallbacks", ()) or ():
        if len(notes) >= MAX_RELAXED_NOTES:
            break
        notes.append(str(note))
    return tuple(notes)


# -- the problems of a verdict ----------------------------------------------------------------------

def unplaced_problem(member: str) -> str:
    return f"{member} is writable but not placed: its location is unusable (join failed)"


def disallowed_problem(member: str, region: str | None, feature: str | None) -> str:
    return f"{member} is in region {region}, where placement is disallowed by the feature {region}.{feature}"


def readonly_problem(member: str) -> str:
    return f"{member} is read-only"


def lost_problem(member: str) -> str:
    return f"{member} is not registered (lost)"


def unjudged_problem(exc: Exception) -> str:
    return f"the policy refuses to judge the ensemble: {exc}"


def describe_fail(policy: PlacementPolicy, ensemble: Sequence[str], write_quorum: int) -> str:
    """Name the write set with the fewest distinct locations (placed members only). Cost: O(E)."""
    size = len(ensemble)
    needed = policy.settings.min_racks_per_write_quorum
    if policy.topology is None or size == 0:
        return "the policy's rules are not met (adherence FAIL)"
    located = [policy.known_location(b) for b in ensemble]
    count, start = narrowest_write_set(located, write_quorum)
    bookies = [ensemble[(start + j) % size] for j in range(write_quorum)]
    locations = sorted({located[(start + j) % size] for j in range(write_quorum)} - {None})
    return (f"adherence FAIL: write set {start} ({', '.join(bookies)}) spans {count} location(s)"
            f" ({', '.join(locations) or 'none placed'}); needs {min(write_quorum, needed)}")


def narrowest_write_set(locations: list[str | None], write_quorum: int) -> tuple[int, int]:
    """(distinct locations, first position) of the first write set spanning the fewest locations;
    None (an unplaced member) counts as none. Cost: O(E) (`distinct_per_write_set`), not O(E x W)."""
    return min((held, start) for start, held in enumerate(distinct_per_write_set(locations, write_quorum)))


# -- why an alert resolves ------------------------------------------------------------------------------

def replaced_reason(request_id: str) -> str:
    return f"re-placed by {request_id}: the ensemble adheres"


def over_bound_reason(max_ledgers: int) -> str:
    return f"forgotten: more than engine.audit.maxLedgers={max_ledgers} ledgers"


def expired_reason(ttl_s: int) -> str:
    return f"forgotten: not placed or checked for engine.audit.ttlSeconds={ttl_s}"


# -- what to do ------------------------------------------------------------------------------------------

def no_relocation_reason(fallbacks: Sequence[Any]) -> str:
    """Why no fix exists: `replace_to_adhere` found no adhering ensemble (its fallback notes say why)."""
    notes = "; ".join(str(n) for n in fallbacks) or "no relocation adheres"
    return f"no adhering ensemble exists now: {notes}"


def fix_action(fix: Mapping[str, Any]) -> str:
    """The `action` of a `placement.ledger.not_adhering` alert, given its suggested fix."""
    if fix.get("possible"):
        moves = ", ".join(f"{c['bookie']} -> {c['with']}" for c in fix.get("replace", ()))
        return (f"re-replicate to the suggested ensemble ({moves}) with bookie_replace requests or BookKeeper's "
                "autorecovery; or restore the unavailable bookies")
    return (f"no fix is possible now ({fix.get('reason', 'unknown')}); restore the unavailable bookies or add "
            "writable bookies in other racks/regions")


def decision_hint(error: Mapping[str, str] | None, adherence: str | None,
                  explain: Mapping[str, Any] | None) -> dict[str, str]:
    """`action` (and for `placement.decision.not_adhering` the `reason`) for a decision alert."""
    fallbacks = [str(note) for note in (explain or {}).get("fallbacks", ()) or ()]
    if error is not None:
        code = error.get("code")
        if code == "NOT_ENOUGH_BOOKIES":
            action = ("add writable bookies where the constraint asks (racks, regions, isolation groups), bring "
                      "back lost or read-only ones, or relax the setting it names; then retry the request")
        elif code == "INVALID_REQUEST":
            action = "fix the request as the message says and send it again; the engine state is unchanged"
        elif code == "ISOLATION_GROUP_ERROR":
            action = ("check bookkeeperClientIsolationGroups and the groups named in the ledger's metadata: "
                      "the groups need members (bookie_location with a group)")
        else:
            action = "read the message; the request was not placed"
        return {"action": action}      # the reason is the alert's `constraint` (the error message)
    reason = "; ".join(fallbacks) if fallbacks else f"adherence {adherence}"
    if adherence == Adherence.FAIL.name:
        action = ("the ledger was placed against the placement rule: add bookies in more racks/regions (or bring "
                  f"back the missing ones); the audit raises {ALERT_LEDGER_RE_ADHERE} with a fix when one "
                  "exists. Turn on enforceMinNumRacksPerWriteQuorum to refuse such placements instead")
    else:
        action = ("the ledger meets only the soft rule (too few regions/zones for the desired spread); add "
                  "bookies in more regions/zones; the audit reports when a strict placement becomes possible")
    return {"reason": reason, "action": action}


__all__ = [
    "ADHERES_AGAIN",
    "MAX_RELAXED_NOTES",
    "NO_IMPROVING_CHANGE",
    "RE_ADHERE_ACTION",
    "decision_hint",
    "describe_fail",
    "disallowed_problem",
    "expired_reason",
    "fix_action",
    "lost_problem",
    "narrowest_write_set",
    "no_relocation_reason",
    "over_bound_reason",
    "readonly_problem",
    "relaxed_notes",
    "replaced_reason",
    "unjudged_problem",
    "unplaced_problem",
]
