"""The region of a network location (BookKeeper's `parseBookieRegion`, spec
bookkeeper-region-zone-isolation.md §1.1): the one parsing rule every region-aware module shares.
"""

from __future__ import annotations

from .location import DEFAULT_REGION_AND_RACK, UNKNOWN_REGION


def region_of_location(location: str) -> str:
    """The region of a network location (`parseBookieRegion`, spec §1.1).

    `/r1/rack1` -> `r1`; `/default-region/r3` -> `default-region`; `/region4` -> `region4`;
    the region-aware default location `/default-region/default-rack` and `""` -> `UnknownRegion`.
    """
    if location == DEFAULT_REGION_AND_RACK:
        return UNKNOWN_REGION
    parts = location.split("/")
    if len(parts) <= 1 or not parts[1]:
        return UNKNOWN_REGION
    return parts[1]
