"""Where bookie locations come from: the caller's mapping, then Pulsar rack info, then "unmapped".

Spec: bookkeeper-rackaware.md §1.4 (resolution, the decorator), region-zone-isolation.md §4.2-§4.3
(`BookieRackAffinityMapping`), CONTRACT §1 (`resolver`, `rack_info`).

* The mapping (`resolver=` of `create_policy`) is the caller's object, read at resolution time, so a
  caller may change it and then notify the policy with `on_bookie_rack_change`. A bookie id `host:port`
  is looked up whole, then by host. An answer of "", "/" or a path not starting with `/` makes the
  bookie's join fail, as BookKeeper's topology does.
* Rack info maps bookies to racks and isolation groups. Racks are read as Pulsar reads them:
  `rack0` becomes `/rack0`; empty or `/` means "no answer" (the policy's default location).
* "No answer" returns None; the policy substitutes its own default location (the decorator).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .errors import InvalidLocationError
from .location import normalize

RackInfo = Mapping[str, Mapping[str, Mapping[str, Any]]]


def host_of(bookie: str) -> str:
    """`host:port` -> host; an id without a port is its own host."""
    host, sep, _ = bookie.rpartition(":")
    return host if sep else bookie


_JAVA_TRIM = "".join(map(chr, range(33)))  # what Java's String.trim() removes: every char <= U+0020


def pulsar_rack(rack: Any) -> str | None:
    """A rack as `BookieRackAffinityMapping.getRack` returns it: `/`-prefixed, or None when unset.

    Empty, or `/` once trimmed, is unset; otherwise the rack is kept as written, spaces included
    (`" rack0"` is `"/ rack0"`), as Pulsar does.
    """
    if not isinstance(rack, str) or not rack or rack.strip(_JAVA_TRIM) == "/":
        return None
    return rack if rack.startswith("/") else "/" + rack


class LocationResolver:
    """Resolves bookie ids to raw network locations and knows isolation-group membership."""

    __slots__ = ("mapping", "_rack_info", "_rack_by_id", "_rack_by_host", "_groups")

    def __init__(self, mapping: Mapping[str, str] | None = None, rack_info: RackInfo | None = None) -> None:
        self.mapping = mapping
        self._rack_info: dict[str, dict[str, dict[str, Any]]] = {}
        self._rack_by_id: dict[str, str | None] = {}
        self._rack_by_host: dict[str, str | None] = {}
        self._groups: dict[str, tuple[str, ...]] = {}
        self.update_rack_info(rack_info or {})

    @property
    def rack_info(self) -> dict[str, dict[str, dict[str, Any]]]:
        """A copy of the current rack info, `{group: {bookie: {"rack": ..., "hostname": ...}}}`."""
        return {g: {b: dict(i) for b, i in members.items()} for g, members in self._rack_info.items()}

    def update_rack_info(self, rack_info: RackInfo) -> set[str]:
        """Replace the rack info; return every bookie id listed before or after (Pulsar notifies them all).

        Raises:
            ValueError: the structure is not `{group: {bookie: {...}}}`.
        """
        copied: dict[str, dict[str, dict[str, Any]]] = {}
        for group, members in rack_info.items():
            if not isinstance(group, str) or not isinstance(members, Mapping):
                raise ValueError(f"rack_info: expected {{group: {{bookie: {{rack, hostname}}}}}}, got group "
                                 f"{group!r} -> {members!r}")
            copied[group] = {}
            for bookie, info in members.items():
                if not isinstance(info, Mapping):
                    raise ValueError(f"rack_info: bookie {bookie!r} in group {group!r} needs an object "
                                     f"with 'rack' and 'hostname', got {info!r}")
                copied[group][str(bookie)] = dict(info)
        before = set(self._rack_by_id)
        by_id: dict[str, str | None] = {}
        by_host: dict[str, str | None] = {}
        groups: dict[str, list[str]] = {}
        # Groups in name order: a bookie listed in several groups takes the rack of the last one.
        for group in sorted(copied):
            for bookie, info in sorted(copied[group].items()):
                rack = pulsar_rack(info.get("rack"))
                by_id[bookie] = rack
                by_host[host_of(bookie)] = rack
                hostname = info.get("hostname")
                if isinstance(hostname, str) and hostname:
                    by_host[hostname] = rack
                groups.setdefault(bookie, []).append(group)
        self._rack_info = copied
        self._rack_by_id = by_id
        self._rack_by_host = by_host
        self._groups = {b: tuple(g) for b, g in groups.items()}
        return before | set(by_id)

    def groups_of(self, bookie: str) -> tuple[str, ...]:
        """Isolation groups listing `bookie` (sorted), empty if none."""
        return self._groups.get(bookie, ())

    def group_members(self) -> dict[str, tuple[str, ...]]:
        """group -> sorted bookie ids listed in it."""
        return {group: tuple(sorted(members)) for group, members in sorted(self._rack_info.items())}

    def resolve(self, bookie: str) -> str | None:
        """The bookie's normalised location, or None when nothing maps it (use the default).

        Raises:
            InvalidLocationError: the mapping answers "", "/" or a path not starting with `/`.
        """
        mapping = self.mapping
        if mapping:
            answer = mapping.get(bookie)
            if answer is None:
                answer = mapping.get(host_of(bookie))
            if answer is not None:
                if not isinstance(answer, str) or answer in ("", "/") or not answer.startswith("/"):
                    raise InvalidLocationError(
                        f"bookie {bookie} resolves to {answer!r}: a location must be a path such as /rack1")
                return normalize(answer)
        if bookie in self._rack_by_id:
            rack = self._rack_by_id[bookie]
        else:
            rack = self._rack_by_host.get(host_of(bookie))
        return normalize(rack) if rack is not None else None
