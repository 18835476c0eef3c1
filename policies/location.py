"""Network-location strings: normalisation, depth, ancestors and the default locations.

Spec: bookkeeper-rackaware.md §1.2-§1.3, bookkeeper-region-zone-isolation.md §0.2.
A location is a `/`-separated path; the bookie is the leaf and its location is the parent path.
"""

from __future__ import annotations

from .errors import InvalidLocationError

ROOT = ""
DEFAULT_RACK = "/default-rack"
DEFAULT_REGION = "/default-region"
DEFAULT_ZONE = "/default-zone"
DEFAULT_UPGRADEDOMAIN = "/default-upgradedomain"
DEFAULT_REGION_AND_RACK = DEFAULT_REGION + DEFAULT_RACK
DEFAULT_ZONE_AND_UPGRADEDOMAIN = DEFAULT_ZONE + DEFAULT_UPGRADEDOMAIN
UNKNOWN_REGION = "UnknownRegion"


def normalize(path: str | None) -> str:
    """BookKeeper's `NodeBase.normalize`: None or "" is ROOT, one trailing `/` is dropped.

    Raises:
        InvalidLocationError: a non-empty path that does not start with `/`.
    """
    if not path:
        return ROOT
    if path[0] != "/":
        raise InvalidLocationError(f"network location {path!r} does not start with '/'")
    if path.endswith("/"):
        return path[:-1]
    return path


def leaf_depth(location: str) -> int:
    """Depth of a leaf placed at `location` (`/r1` -> 2, `/region/r1` -> 3; spec §1.5)."""
    return location.count("/") + 1


def ancestor(location: str, distance: int) -> str:
    """The location at `distance` from a leaf placed at `location`.

    Distance 1 is the leaf's own location (its rack), distance 2 the rack's parent
    (`/region/rack` -> `/region`, `/rack` -> ROOT), as `Node.getNetworkLocation(d)` for an attached node.
    """
    for _ in range(distance - 1):
        cut = location.rfind("/")
        if cut <= 0:
            return ROOT
        location = location[:cut]
    return location


def components(location: str) -> list[str]:
    """Non-empty path components: `/region/rack` -> ["region", "rack"]."""
    return [part for part in location.split("/") if part]


def is_under(location: str, scope: str) -> bool:
    """Whether a rack `location` lies in the subtree named by the normalised `scope` (component-wise)."""
    if scope == ROOT:
        return True
    return location == scope or location.startswith(scope + "/")
