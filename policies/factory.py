"""`create_policy` and `policy_from_settings`: configuration -> a ready policy instance (CONTRACT §1).

`create_policy(conf, ...)` parses the configuration mapping into `PlacementSettings` and hands it to
`policy_from_settings`, which callers that parsed their configuration once (the cluster model) use
directly. Policy classes take `(settings, resolver, clock, features)`; the registry names their
modules so that importing `policies` stays cheap and each policy lives in its own module.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

from .api import PlacementPolicy
from .resolver import LocationResolver, RackInfo
from .settings import PlacementSettings

POLICY_IMPLEMENTATIONS: dict[str, tuple[str, str]] = {
    "default": ("policies.default", "DefaultPolicy"),
    "rackaware": ("policies.rackaware", "RackawarePolicy"),
    "regionaware": ("policies.regionaware", "RegionawarePolicy"),
    "zoneaware": ("policies.zoneaware", "ZoneawarePolicy"),
    "isolated": ("policies.isolation", "IsolatedPolicy"),
}


def _frozen_clock() -> float:
    return 0.0


def create_policy(conf: Mapping[str, Any], resolver: Mapping[str, str] | None = None,
                  clock: Callable[[], float] | None = None, rack_info: RackInfo | None = None,
                  features: MutableMapping[str, int] | None = None) -> PlacementPolicy:
    """Build the policy named by `conf["ensemblePlacementPolicy"]` (default: rack-aware).

    Args:
        conf: BookKeeper client / Pulsar broker keys (strings or Python values).
        resolver: bookie-or-host -> network location; read at resolution time, so the caller may
            change it and then call `policy.on_bookie_rack_change(bookies)`.
        clock: zero-argument callable giving seconds; without one, time stands still at 0.0
            (stabilization delays then never expire).
        rack_info: Pulsar rack info `{group: {bookie: {"rack": ..., "hostname": ...}}}`.
        features: mutable feature switches `name -> availability`, read at decision time.

    Raises:
        ValueError: unknown policy, malformed value or impossible combination; names the key.
    """
    return policy_from_settings(PlacementSettings.from_conf(conf), resolver=resolver, clock=clock,
                                rack_info=rack_info, features=features)


def policy_from_settings(settings: PlacementSettings, *, resolver: Mapping[str, str] | None = None,
                         clock: Callable[[], float] | None = None, rack_info: RackInfo | None = None,
                         features: MutableMapping[str, int] | None = None) -> PlacementPolicy:
    """`create_policy` from settings already parsed (the cluster model builds a policy on every load
    of its snapshot, with the settings it parsed once). Arguments as for `create_policy`."""
    module_name, class_name = POLICY_IMPLEMENTATIONS[settings.policy]
    policy_class = getattr(importlib.import_module(module_name), class_name)
    location_resolver = LocationResolver(resolver, rack_info)
    return policy_class(settings, location_resolver, clock or _frozen_clock,
                        features if features is not None else {})
