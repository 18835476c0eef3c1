"""`placement.search=complete` for the rack-aware policy: when BookKeeper's greedy search gives up
under `enforceMinNumRacksPerWriteQuorum`, an exact search (`complete_search`) places the request
whenever a valid ensemble or replacement exists.

Spec: bookkeeper-rackaware.md §4.4 (the greedy search, which can miss: apache/bookkeeper#3722),
§5.1 (replacement), §6.1 (what valid means).

Valid, as the enforced policy judges it (`is_ensemble_adhering` answers MEETS_STRICT):

* new ensemble: `E` distinct writable bookies, none excluded (by the caller, the isolation groups, as
  read-only or for a failed join), none in the default rack, and every write set spans
  `k = min(WQ, minNumRacksPerWriteQuorum)` racks;
* replacement: a writable bookie outside the ensemble and the exclusions, not in the default rack,
  such that every write set through the replaced position spans `k` racks of the known members and
  holds no default-rack member (the other write sets do not change). BookKeeper accepts only the
  replaced bookie's rack or a rack the rest of the ensemble does not use; the complete search also
  accepts a rack used elsewhere in the ensemble when the write sets through the position allow it.

Only the live view is searched: departed bookies that a stabilized view keeps are used by
BookKeeper's retry there, not by the complete search. `RackComplete` is a mixin of
`rackaware.RackawarePolicy` (and so of the isolated policy); the host provides `settings`, `known`,
`known_sorted`, `default_location`, `is_ensemble_adhering` and `name`.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from .api import PlacementResult
from .complete_search import complete_ensemble, complete_replacement, node_budget
from .errors import NotEnoughBookiesError
from .provenance import RULE_RACKS
from .rack_selection import STEP_ENSEMBLE, STEP_REPLACEMENT

SEARCH_COMPLETE = "complete"
SCOPE_COMPLETE = "cluster (complete search)"


class RackComplete:
    """The complete search behind the rack-aware policy's public `new_ensemble` and `replace_bookie`."""

    def is_complete_search_on(self) -> bool:
        """Whether a failed BookKeeper search is followed by the complete search: `placement.search=
        complete` with `enforceMinNumRacksPerWriteQuorum` (without enforcement the greedy search only
        fails when too few bookies are eligible, and then no ensemble exists)."""
        settings = self.settings  # type: ignore[attr-defined]
        return settings.search == SEARCH_COMPLETE and settings.enforce_min_racks

    def _eligible_by_rack(self, exclude: set[str]) -> dict[str, list[str]]:
        """Rack -> its writable bookies outside `exclude` and the default rack, in id order."""
        known = self.known  # type: ignore[attr-defined]
        default = self.default_location  # type: ignore[attr-defined]
        racks: dict[str, list[str]] = {}
        for bookie in self.known_sorted():  # type: ignore[attr-defined]
            rack = known[bookie]
            if rack != default and bookie not in exclude:
                racks.setdefault(rack, []).append(bookie)
        return racks

    def complete_new_ensemble(self, error: NotEnoughBookiesError, ensemble_size: int, write_quorum: int,
                              ack_quorum: int, exclude: Sequence[str], rng: random.Random | None) -> PlacementResult:
        """The complete search after BookKeeper's search raised `error` for `new_ensemble`.

        Cost: see `complete_search.complete_ensemble` (bounded by its node budget) plus O(bookies).

        Raises:
            NotEnoughBookiesError: no valid ensemble exists, or the search reached its bound; the
                message and `explain` keep BookKeeper's and add what the complete search found.
        """
        rng = rng if rng is not None else random.Random(0)
        min_racks = min(write_quorum, self.settings.min_racks_per_write_quorum)  # type: ignore[attr-defined]
        racks = self._eligible_by_rack(set(exclude))
        found = complete_ensemble(racks, ensemble_size, write_quorum, min_racks, rng)
        step: dict[str, Any] = {"step": STEP_ENSEMBLE, "scope": SCOPE_COMPLETE,
                                "candidates": sum(len(members) for members in racks.values()),
                                "racks": len(racks), "nodes": found.nodes}
        if found.ensemble is None:
            budget = node_budget(ensemble_size, write_quorum)
            why = (f"the complete search stopped at its bound of {budget} nodes without finding one (a valid "
                   "ensemble may exist)" if found.bounded else
                   f"the complete search ({found.nodes} nodes) proved that no valid ensemble exists")
            raise self._complete_failed(error, step, why) from error
        ensemble = list(found.ensemble)
        explain = self._complete_explain(error, step)
        spanned = len({self.known[b] for b in ensemble})  # type: ignore[attr-defined]
        if spanned < len(ensemble):
            explain["relaxed"] = [{"rule": RULE_RACKS, "spanned": spanned}]
        return PlacementResult(ensemble, self.is_ensemble_adhering(ensemble, write_quorum, ack_quorum),  # type: ignore[attr-defined]
                               None, explain)

    def complete_replace_bookie(self, error: NotEnoughBookiesError, ensemble_size: int, write_quorum: int,
                                ack_quorum: int, current_ensemble: Sequence[str], bookie_to_replace: str,
                                exclude: Sequence[str], rng: random.Random | None) -> PlacementResult:
        """The complete search after BookKeeper's search raised `error` for `replace_bookie`.

        `error` is raised again unchanged when the replaced bookie is not a member of the ensemble
        (nothing to judge). Cost: O(bookies + WQ^2).

        Raises:
            NotEnoughBookiesError: no eligible bookie keeps the write sets through the position valid.
        """
        current = list(current_ensemble)
        if bookie_to_replace not in current:
            raise error
        rng = rng if rng is not None else random.Random(0)
        position = current.index(bookie_to_replace)
        known = self.known  # type: ignore[attr-defined]
        min_racks = min(write_quorum, self.settings.min_racks_per_write_quorum)  # type: ignore[attr-defined]
        racks = self._eligible_by_rack({*exclude, *current})
        chosen = complete_replacement([known.get(b) for b in current], position, racks, write_quorum, min_racks,
                                      self.default_location, rng)  # type: ignore[attr-defined]
        step: dict[str, Any] = {"step": STEP_REPLACEMENT, "scope": SCOPE_COMPLETE,
                                "candidates": sum(len(members) for members in racks.values()),
                                "racks": len(racks), "position": position}
        if chosen is None:
            raise self._complete_failed(
                error, step, f"the complete search found no eligible bookie that keeps every write set through "
                             f"position {position} on {min_racks} rack(s) without a default-rack member") from error
        ensemble = list(current)
        ensemble[position] = chosen
        return PlacementResult(ensemble, self.is_ensemble_adhering(ensemble, write_quorum, ack_quorum),  # type: ignore[attr-defined]
                               chosen, self._complete_explain(error, step))

    def _complete_explain(self, error: NotEnoughBookiesError, step: dict[str, Any]) -> dict[str, Any]:
        """The explanation of a placement the complete search made: BookKeeper's steps and fallbacks,
        then the complete search's step and a note naming why BookKeeper's search failed."""
        inner = error.explain
        reason = inner.get("constraint") or str(error).split(";")[0]
        return {"policy": self.name, "steps": [*inner.get("steps", ()), step],  # type: ignore[attr-defined]
                "fallbacks": [*inner.get("fallbacks", ()),
                              f"complete search: placed after the BookKeeper search failed ({reason})"],
                "excluded": dict(inner.get("excluded", {}))}

    def _complete_failed(self, error: NotEnoughBookiesError, step: dict[str, Any], why: str) -> NotEnoughBookiesError:
        explain = dict(error.explain)
        explain["steps"] = [*explain.get("steps", ()), {**step, "failed": True}]
        explain["fallbacks"] = [*explain.get("fallbacks", ()), f"complete search: {why}"]
        return NotEnoughBookiesError(f"{error}; {why}", explain=explain)
