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

Rack info is replaced whole (`update_rack_info`, Pulsar's `/bookies` watch: O(rack info)) or bookie by
bookie (`update_rack_entries`, O(changed bookies x their groups and host neighbours)), with the same
result.
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


def is_valid_bookie_id(bookie: str) -> bool:
    """BookKeeper's `BookieId` rule (rackaware spec §1.1): letters, digits, `.`, `-` and 0x3A-0x5F.

    (The isolation policy refuses rack info that lists another id; the resolver indexes them.)
    """
    if not bookie or bookie.lower() == "readonly":
        return False
    return all(c.isascii() and (c.isalnum() or c in ".-" or 0x3A <= ord(c) <= 0x5F) for c in bookie)


def _entry(group: Any, bookie: Any, info: Any) -> dict[str, Any]:
    """A copy of one rack-info entry; ValueError names a malformed group or entry."""
    if not isinstance(group, str):
        raise ValueError(f"rack_info: expected {{group: {{bookie: {{rack, hostname}}}}}}, got group {group!r}")
    if not isinstance(info, Mapping):
        raise ValueError(f"rack_info: bookie {bookie!r} in group {group!r} needs an object "
                         f"with 'rack' and 'hostname', got {info!r}")
    return dict(info)


def _hosts_named(bookie: str, info: Mapping[str, Any]) -> tuple[str, ...]:
    """The host keys one rack-info entry answers for: the bookie's host, then its `hostname` if set."""
    host = host_of(bookie)
    hostname = info.get("hostname")
    if isinstance(hostname, str) and hostname and hostname != host:
        return (host, hostname)
    return (host,)


class LocationResolver:
    """Resolves bookie ids to raw network locations and knows isolation-group membership."""

    __slots__ = ("mapping", "_rack_info", "_rack_by_id", "_rack_by_host", "_host_writers", "_groups", "_invalid")

    def __init__(self, mapping: Mapping[str, str] | None = None, rack_info: RackInfo | None = None) -> None:
        self.mapping = mapping
        self._rack_info: dict[str, dict[str, dict[str, Any]]] = {}
        self._rack_by_id: dict[str, str | None] = {}
        self._rack_by_host: dict[str, str | None] = {}
        # host -> {(group, bookie): rack} of the entries that name the host (the bookie's own host or
        # its `hostname`); `_rack_by_host[host]` is the rack of the greatest (group, bookie), the entry
        # a whole update writes last. Lets `update_rack_entries` change one entry exactly.
        self._host_writers: dict[str, dict[tuple[str, str], str | None]] = {}
        self._groups: dict[str, tuple[str, ...]] = {}
        # group -> listed ids that are not valid bookie ids; None until first asked for after a whole update.
        self._invalid: dict[str, set[str]] | None = None
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
                copied[group][str(bookie)] = _entry(group, bookie, info)
        before = set(self._rack_by_id)
        by_id: dict[str, str | None] = {}
        by_host: dict[str, str | None] = {}
        writers: dict[str, dict[tuple[str, str], str | None]] = {}
        groups: dict[str, list[str]] = {}
        # Groups in name order: a bookie listed in several groups takes the rack of the last one.
        for group in sorted(copied):
            for bookie, info in sorted(copied[group].items()):
                rack = pulsar_rack(info.get("rack"))
                by_id[bookie] = rack
                for host in _hosts_named(bookie, info):
                    by_host[host] = rack
                    writers.setdefault(host, {})[(group, bookie)] = rack
                groups.setdefault(bookie, []).append(group)
        self._rack_info = copied
        self._rack_by_id = by_id
        self._rack_by_host = by_host
        self._host_writers = writers
        self._groups = {b: tuple(g) for b, g in groups.items()}
        self._invalid = None
        return before | set(by_id)

    def update_rack_entries(self, entries: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> bool:
        """Replace every listing of some bookies: `{bookie: {group: {"rack", "hostname"}}}`, `{}` to unlist
        one. The result is that of `update_rack_info` with the whole rack info so changed.

        Returns:
            Whether group membership changed (some bookie joined or left a group).

        Raises:
            ValueError: an entry is not `{group: {...}}`; nothing is changed then.

        Cost: O(changed bookies x (their groups + entries naming the same hosts)).
        """
        checked = {str(bookie): {group: _entry(group, bookie, info) for group, info in listing.items()}
                   for bookie, listing in entries.items()}
        membership_changed = False
        for bookie, listing in checked.items():
            old_groups = self._groups.get(bookie, ())
            new_groups = tuple(sorted(listing))
            membership_changed = membership_changed or old_groups != new_groups
            invalid = self._invalid if self._invalid is not None and not is_valid_bookie_id(bookie) else None
            touched_hosts: set[str] = set()
            for group in old_groups:
                members = self._rack_info[group]
                info = members.pop(bookie)
                if not members:
                    del self._rack_info[group]
                if invalid is not None:
                    invalid[group].discard(bookie)
                    if not invalid[group]:
                        del invalid[group]
                for host in _hosts_named(bookie, info):
                    del self._host_writers[host][(group, bookie)]
                    touched_hosts.add(host)
            for group in new_groups:
                info = listing[group]
                self._rack_info.setdefault(group, {})[bookie] = info
                if invalid is not None:
                    invalid.setdefault(group, set()).add(bookie)
                rack = pulsar_rack(info.get("rack"))
                for host in _hosts_named(bookie, info):
                    self._host_writers.setdefault(host, {})[(group, bookie)] = rack
                    touched_hosts.add(host)
            if new_groups:
                self._groups[bookie] = new_groups
                self._rack_by_id[bookie] = pulsar_rack(listing[new_groups[-1]].get("rack"))
            else:
                self._groups.pop(bookie, None)
                self._rack_by_id.pop(bookie, None)
            for host in touched_hosts:
                named = self._host_writers[host]
                if named:
                    self._rack_by_host[host] = named[max(named)]
                else:
                    del self._host_writers[host]
                    del self._rack_by_host[host]
        return membership_changed

    def is_listed(self, bookie: str) -> bool:
        """Whether rack info lists `bookie` in some group."""
        return bookie in self._rack_by_id

    def check_invariants(self) -> None:
        """Assert the indexes are those a whole update of the current rack info builds (tests only)."""
        again = LocationResolver(None, self._rack_info)
        for name in ("_rack_info", "_rack_by_id", "_rack_by_host", "_host_writers", "_groups"):
            assert getattr(again, name) == getattr(self, name), f"resolver index {name} differs from rack info"
        if self._invalid is not None:
            assert again.invalid_members() == self.invalid_members(), "invalid-id index differs from rack info"

    def groups_of(self, bookie: str) -> tuple[str, ...]:
        """Isolation groups listing `bookie` (sorted), empty if none."""
        return self._groups.get(bookie, ())

    def invalid_members(self) -> dict[str, tuple[str, ...]]:
        """group -> sorted ids it lists that are not valid bookie ids (`is_valid_bookie_id`), groups in
        name order; only groups that list some. O(invalid ids), after a whole update O(rack info) once."""
        invalid = self._invalid
        if invalid is None:
            invalid = self._invalid = {}
            for group, members in self._rack_info.items():
                bad = {bookie for bookie in members if not is_valid_bookie_id(bookie)}
                if bad:
                    invalid[group] = bad
        return {group: tuple(sorted(bad)) for group, bad in sorted(invalid.items())}

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
