"""How the region-aware policy replaces one bookie (spec bookkeeper-region-zone-isolation.md §2.1): the
same rack, else the same region (both through the region's rack-aware sub-policy), else any allowed
region, under the durability rule when `reppEnableDurabilityEnforcementInReplace` is on.

`RegionReplacement` is a mixin of `RegionawarePolicy`; the host provides the regions and
sub-policies and `_new_explain`, `_exclusion`, `_note_disallowed`, `_excluded_per_region`,
`_region_candidates`, `_merge_notes`, `_select_random`, `_result` and `region_of_bookie`.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence

from .api import PlacementResult
from .coverage import CoverageEnsemble
from .errors import NotEnoughBookiesError
from .provenance import failed
from .selection import WeightedSelector


class RegionReplacement:
    """`replace_bookie` (§2.1) and its cross-region candidate pool."""

    def replace_bookie(self, ensemble_size: int, write_quorum: int, ack_quorum: int,
                       custom_metadata: Mapping[str, bytes] | None, current_ensemble: Sequence[str],
                       bookie_to_replace: str, exclude: Iterable[str] | None = (), *,
                       rng: random.Random | None = None) -> PlacementResult:
        """Replace one bookie: same rack, else same region, else any allowed region (spec §2.1).

        With durability enforced in replacement (`reppEnableDurabilityEnforcementInReplace`, feature off)
        the cross-region pick must keep every write set within the durability rule; a current ensemble
        that already breaks it turns enforcement off for this call ("anomalous ensemble").

        Raises:
            ValueError: `bookie_to_replace` is not in a non-empty `current_ensemble`.
            NotEnoughBookiesError: no eligible bookie in any allowed region.
        """
        if exclude is None:
            exclude = ()
        self._tick()
        rng = rng if rng is not None else random.Random(0)
        current = list(current_ensemble)
        if current and bookie_to_replace not in current:  # Java fails with an index error
            raise ValueError(f"bookie_to_replace {bookie_to_replace} is not a member of current_ensemble {current}")
        disabled = self.durability_in_replace and self.is_durability_disabled()
        enforce = self.durability_in_replace and not disabled
        min_regions = self.min_regions if enforce else 1
        explain = self._new_explain(disabled)
        excluded = self._exclusion(exclude, explain)
        disallowed = set(self._note_disallowed(explain))
        excluded.add(bookie_to_replace)
        # The region-level coverage of the other members matters only while durability is enforced (it is
        # the cross-region pick's predicate); without enforcement it is never built.
        coverage = CoverageEnsemble(ensemble_size, write_quorum, ack_quorum, self.settings.min_racks_per_write_quorum,
                                    self._region_keys.__getitem__, regions=self._regions,
                                    min_durability=min_regions) if enforce else None
        for member in current:
            if member == bookie_to_replace:
                continue
            excluded.add(member)
            if enforce:
                if not coverage.apply(member, coverage):  # type: ignore[union-attr]
                    enforce = False
                    explain["fallbacks"].append(f"anomalous ensemble: {member} already breaks the durability rule; "
                                                "durability not enforced for this replacement")
                else:
                    coverage.add_node(member)  # type: ignore[union-attr]
        others = sorted({b for b in current if b != bookie_to_replace})
        if others:
            explain["excluded"]["ensemble"] = others

        region = self.region_of_bookie(bookie_to_replace)
        allowed = [r for r in self._regions if r not in disallowed]
        per_region = self._excluded_per_region(excluded)
        steps = explain["steps"]
        candidate = None
        if region in allowed:
            notes: list[str] = []
            candidates, racks = self._region_candidates(region, per_region)
            steps.append({"step": "replacement", "scope": f"region {region}", "candidates": candidates,
                          "racks": racks})
            try:
                candidate = self.sub_policies[region].select_from_network_location(
                    self.location_of(bookie_to_replace), set(excluded), None, None, True, rng, fallbacks=notes)
                self._merge_notes(explain, region, notes)
            except NotEnoughBookiesError:
                steps[-1]["failed"] = True
                explain["fallbacks"].append(f"region {region}: no eligible bookie; chose from all allowed regions")
        else:
            explain["fallbacks"].append(f"region {region} of {bookie_to_replace} is not available; "
                                        "chose from all allowed regions")
        if candidate is None:
            pool, selector = self._fallback_pool(allowed)
            predicate = coverage if enforce else None
            steps.append({"step": "replacement", "scope": "allowed regions",
                          "candidates": len(pool) - sum(per_region.get(r, 0) for r in allowed),
                          "regions": len(allowed)})
            if predicate is not None and self._refuses_every_region(
                    predicate, [r for r in allowed if self.sub_policies[r].known]):
                picked = []
            else:
                picked = self._select_random(pool, 1, excluded, predicate, predicate, rng, selector)
            if not picked:
                steps[-1]["failed"] = True
                rule = (f" that keeps {self.min_regions} regions per acknowledged entry "
                        "(reppEnableDurabilityEnforcementInReplace)") if enforce else ""
                raise failed(NotEnoughBookiesError(
                    f"cannot replace {bookie_to_replace}: no bookie in the allowed regions ({', '.join(allowed)})"
                    f"{rule} remains after excluding {len(excluded)} (current ensemble and exclusions); add bookies"),
                    explain, f"the replacement must be an eligible bookie of an allowed region{rule}")
            candidate = picked[0]
        explain["region"] = self.region_of_bookie(candidate)
        replaced = list(current)
        if replaced:
            replaced[replaced.index(bookie_to_replace)] = candidate
        else:
            replaced = [candidate]
        return self._result(replaced, write_quorum, ack_quorum, explain, bookie=candidate)

    def _fallback_pool(self, allowed: list[str]) -> tuple[list[str], WeightedSelector | None]:
        """The known bookies of the `allowed` regions (region by region, each in id order) and, with disk
        weights, the selector over them: a replacement's cross-region candidates. Kept until membership
        changes (the selector until the weights are replaced), so a run of replacements that all fall
        back, as during a region's outage, does not rebuild them per call (O(bookies log bookies))."""
        key = tuple(allowed)
        found = self._fallback_pools.get(key)
        if found is None:
            if len(self._fallback_pools) >= 64:
                self._fallback_pools.clear()
            pool = [b for r in allowed for b in self.sub_policies[r].known_sorted()]
            found = self._fallback_pools[key] = [pool, None, None]
        pool, weights, selector = found
        if self.settings.disk_weighted and weights is not self.weights:
            selector = found[2] = WeightedSelector(pool, self.weights, self.settings.max_weight_multiple)
            found[1] = self.weights
        return pool, selector

    @staticmethod
    def _refuses_every_region(coverage: CoverageEnsemble, regions: Iterable[str]) -> bool:
        """Whether the region-level `coverage` refuses its next position in each of `regions` (those of
        the fallback pool).

        It judges bookies by region only, so then no bookie of those regions can pass: a cross-region
        replacement under the durability rule would walk (and draw for) every bookie of the pool to
        find nothing, on every replacement while, for example, all but one region are down.
        """
        return all(coverage.refuses_location("/" + region) for region in regions)
