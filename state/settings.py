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
| `engine.statusIntervalSeconds` | 60 | a cluster's status record at most once per this much event time; 0: none |
| `engine.skew.windowDecisions` | 1000 | placing decisions per skew window (creates, replaces); 0: no skew, no share |
| `engine.skew.minDecisions` | 200 | no skew verdict before a window holds this many (at most the window) |
| `engine.skew.pValue` | 1e-6 | chance of a false skew alarm per evaluation (Bonferroni over racks and bookies) |
| `engine.skew.minRatio` | 1.5 | an offender's observed share is also at least this times its expected share |
| `engine.skew.checkEveryDecisions` | 100 | a skew window is judged after every this many of its decisions |

`engine.maxFutureSkewSeconds` defaults to one day: far beyond any clock error of a synchronised host
(NTP keeps milliseconds; a wrong zone is at most 14 hours), so no honest record of a busy cluster is
refused, while a bad time (a sentinel such as 9999-12-31, a wrong year or month, seconds read as
milliseconds) is refused before it can move the clock. A record that passes can hold the cluster's timers
(stabilization, flap window) at most one day ahead. The cost of a short bound: a cluster with no record at
all for longer than it refuses its next records, until one falls within the bound again or the key is
raised (or set to 0) for a restart. Negative values are invalid.

The status and skew keys are described in docs/status-and-skew.md (`state.status`, `state.skew`).
`engine.skew.windowDecisions` is at most `MAX_SKEW_WINDOW`: the windows travel in the model's snapshot.
"""

from __future__ import annotations

import math
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
STATUS_INTERVAL = "engine.statusIntervalSeconds"
SKEW_WINDOW = "engine.skew.windowDecisions"
SKEW_MIN_DECISIONS = "engine.skew.minDecisions"
SKEW_P_VALUE = "engine.skew.pValue"
SKEW_MIN_RATIO = "engine.skew.minRatio"
SKEW_CHECK_EVERY = "engine.skew.checkEveryDecisions"

#: Every configuration key this module reads (the streaming CLI accepts them as known keys).
MODEL_KEYS: tuple[str, ...] = (SEED, HISTORY_TTL, FLAP_WINDOW, FLAP_THRESHOLD, AUDIT_MAX_LEDGERS, AUDIT_TTL,
                                MAX_FUTURE_SKEW, STATUS_INTERVAL, SKEW_WINDOW, SKEW_MIN_DECISIONS, SKEW_P_VALUE,
                                SKEW_MIN_RATIO, SKEW_CHECK_EVERY)

DEFAULT_FLAP_WINDOW_S = 60
_MIN_SEED = -(2**63)
_MAX_SEED = 2**64 - 1
#: The largest `engine.skew.windowDecisions` (a window of E-bookie creates is stored with the model).
MAX_SKEW_WINDOW = 100_000


def float_key(conf: Mapping[str, Any], key: str, default: float, *, above: float | None = None,
              minimum: float | None = None, below: float | None = None) -> float:
    """A finite number key (a Python int or float, or a decimal string such as `1e-6`).

    Raises:
        ValueError: anything else, or a number out of range; the message names the key, what was
            expected and what arrived.
    """
    value = conf.get(key)
    if value is None:
        return default
    bounds = [f"> {above:g}" if above is not None else "", f">= {minimum:g}" if minimum is not None else "",
              f"< {below:g}" if below is not None else ""]
    expected = " and ".join(b for b in bounds if b)
    expected = f"a number {expected}" if expected else "a number"
    number: float | None = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            number = None
    if number is None or not math.isfinite(number) or (above is not None and number <= above) \
            or (minimum is not None and number < minimum) or (below is not None and number >= below):
        raise ValueError(f"{key}: expected {expected}, got {value!r}")
    return number


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
        status_interval_s: `engine.statusIntervalSeconds`; 0: no status records.
        skew_window: `engine.skew.windowDecisions`; 0: no skew detection and no write share.
        skew_min_decisions: `engine.skew.minDecisions`.
        skew_p_value: `engine.skew.pValue`.
        skew_min_ratio: `engine.skew.minRatio`.
        skew_check_every: `engine.skew.checkEveryDecisions`.
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
    status_interval_s: int = 60
    skew_window: int = 1000
    skew_min_decisions: int = 200
    skew_p_value: float = 1e-6
    skew_min_ratio: float = 1.5
    skew_check_every: int = 100
    placement: PlacementSettings = field(default_factory=PlacementSettings)

    @classmethod
    def from_conf(cls, conf: Mapping[str, Any]) -> ModelSettings:
        """Parse the model keys (and check the placement keys) of a configuration mapping.

        Raises:
            ValueError: a malformed value; the message names the key, what was expected and what arrived.
        """
        placement = PlacementSettings.from_conf(conf)
        period = placement.stabilize_period_s
        window = int_key(conf, SKEW_WINDOW, 1000, 0, MAX_SKEW_WINDOW)
        min_decisions = int_key(conf, SKEW_MIN_DECISIONS, min(200, window) if window else 200, 1)
        if window and min_decisions > window:
            raise ValueError(f"{SKEW_MIN_DECISIONS}: expected at most {SKEW_WINDOW} ({window}), got {min_decisions}; "
                             "a window never holds more decisions than its size, so the skew would never be judged")
        return cls(
            seed=int_key(conf, SEED, 0, _MIN_SEED, _MAX_SEED),
            history_ttl_s=int_key(conf, HISTORY_TTL, 86400, 0),
            flap_window_s=int_key(conf, FLAP_WINDOW, period if period > 0 else DEFAULT_FLAP_WINDOW_S, 1),
            flap_threshold=int_key(conf, FLAP_THRESHOLD, 3, 1),
            audit_max_ledgers=int_key(conf, AUDIT_MAX_LEDGERS, 100_000, 0),
            audit_ttl_s=int_key(conf, AUDIT_TTL, 604_800, 1),
            max_future_skew_s=int_key(conf, MAX_FUTURE_SKEW, 86_400, 0),
            status_interval_s=int_key(conf, STATUS_INTERVAL, 60, 0),
            skew_window=window,
            skew_min_decisions=min_decisions,
            skew_p_value=float_key(conf, SKEW_P_VALUE, 1e-6, above=0.0, below=1.0),
            skew_min_ratio=float_key(conf, SKEW_MIN_RATIO, 1.5, minimum=1.0),
            skew_check_every=int_key(conf, SKEW_CHECK_EVERY, 100, 1),
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

    @property
    def status_interval_ms(self) -> int:
        return self.status_interval_s * 1000


__all__ = ["MAX_SKEW_WINDOW", "MODEL_KEYS", "ModelSettings", "float_key"]
