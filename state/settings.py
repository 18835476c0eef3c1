"""The engine's cluster-model keys -> one frozen `ModelSettings` (STYLE R2).

Only this module knows how the `engine.*` model keys are spelled. The placement keys of the same
mapping (BookKeeper and Pulsar keys) are parsed by `policies.settings.PlacementSettings` into
`ModelSettings.placement`, so one properties file configures both, and it is read once: the model,
its policy and its snapshots take these settings, never the raw mapping.

| key | default | meaning |
|---|---|---|
| `engine.seed` | 0 | seed of every request's random generator (STYLE R4) |
| `engine.bookieHistoryTtlSeconds` | 86400 | what the model knows of a departed bookie expires this long after it left |
| `engine.flapWindowSeconds` | `networkTopologyStabilizePeriodSeconds` if > 0, else 60 | the flap-counting window |
| `engine.flapThreshold` | 3 | departures inside the window that make a bookie "flapping" |
| `engine.audit.maxLedgers` | 100000 | ledgers the audit remembers per cluster (and shard); 0 turns the audit off |
| `engine.audit.ttlSeconds` | 604800 | the audit forgets a ledger this long after it was last placed or checked |
| `engine.maxFutureSkewSeconds` | 86400 | a record further ahead of its cluster's latest one is refused; 0: no bound |

`engine.maxFutureSkewSeconds` defaults to one day: far beyond any clock error of a synchronised host
(NTP keeps milliseconds; a wrong zone is at most 14 hours), so no honest record of a busy cluster is
refused, while a bad time (a sentinel such as 9999-12-31, a wrong year or month, seconds read as
milliseconds) is refused before it can move the clock. A record that passes can hold the cluster's timers
(stabilization, flap window) at most one day ahead. The cost of a short bound: a cluster with no record at
all for longer than it refuses its next records, until one falls within the bound again or the key is
raised (or set to 0) for a restart. Negative values are invalid.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from policies.settings import PlacementSettings, int_key

SEED = "engine.seed"
HISTORY_TTL = "engine.bookieHistoryTtlSeconds"
FLAP_WINDOW = "engine.flapWindowSeconds"
FLAP_THRESHOLD = "engine.flapThreshold"
AUDIT_MAX_LEDGERS = "engine.audit.maxLedgers"
AUDIT_TTL = "engine.audit.ttlSeconds"
MAX_FUTURE_SKEW = "engine.maxFutureSkewSeconds"

#: Every configuration key this module reads (the streaming CLI accepts them as known keys).
MODEL_KEYS: tuple[str, ...] = (SEED, HISTORY_TTL, FLAP_WINDOW, FLAP_THRESHOLD, AUDIT_MAX_LEDGERS, AUDIT_TTL,
                                MAX_FUTURE_SKEW)

DEFAULT_FLAP_WINDOW_S = 60
_MIN_SEED = -(2**63)
_MAX_SEED = 2**64 - 1


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSettings:
    """The cluster model's settings, parsed once at the edge.

    Attributes:
        seed: `engine.seed`, mixed into every request's generator.
        history_ttl_s: `engine.bookieHistoryTtlSeconds`.
        flap_window_s: `engine.flapWindowSeconds`.
        flap_threshold: `engine.flapThreshold`.
        audit_max_ledgers: `engine.audit.maxLedgers`.
        audit_ttl_s: `engine.audit.ttlSeconds`.
        max_future_skew_s: `engine.maxFutureSkewSeconds`; 0: no bound.
        placement: the placement keys of the same mapping, parsed (policy name, stabilization period,
            disk weighting, isolation groups, ...); the policy is created from them.
    """

    seed: int = 0
    history_ttl_s: int = 86400
    flap_window_s: int = DEFAULT_FLAP_WINDOW_S
    flap_threshold: int = 3
    audit_max_ledgers: int = 100_000
    audit_ttl_s: int = 604_800
    max_future_skew_s: int = 86_400
    placement: PlacementSettings = field(default_factory=PlacementSettings)

    @classmethod
    def from_conf(cls, conf: Mapping[str, Any]) -> ModelSettings:
        """Parse the model keys (and check the placement keys) of a configuration mapping.

        Raises:
            ValueError: a malformed value; the message names the key, what was expected and what arrived.
        """
        placement = PlacementSettings.from_conf(conf)
        period = placement.stabilize_period_s
        return cls(
            seed=int_key(conf, SEED, 0, _MIN_SEED, _MAX_SEED),
            history_ttl_s=int_key(conf, HISTORY_TTL, 86400, 0),
            flap_window_s=int_key(conf, FLAP_WINDOW, period if period > 0 else DEFAULT_FLAP_WINDOW_S, 1),
            flap_threshold=int_key(conf, FLAP_THRESHOLD, 3, 1),
            audit_max_ledgers=int_key(conf, AUDIT_MAX_LEDGERS, 100_000, 0),
            audit_ttl_s=int_key(conf, AUDIT_TTL, 604_800, 1),
            max_future_skew_s=int_key(conf, MAX_FUTURE_SKEW, 86_400, 0),
            placement=placement,
        )

    @property
    def history_ttl_ms(self) -> int:
        return self.history_ttl_s * 1000

    @property
    def flap_window_ms(self) -> int:
        return self.flap_window_s * 1000

    @property
    def max_future_skew_ms(self) -> int | None:
        """`max_future_skew_s` in milliseconds; None when the bound is off."""
        return self.max_future_skew_s * 1000 if self.max_future_skew_s else None


__all__ = ["MODEL_KEYS", "ModelSettings"]
