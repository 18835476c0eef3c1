"""The placement core: BookKeeper's and Pulsar's ensemble placement policies, in pure Python.

Public surface (CONTRACT §1)::

    from policies import create_policy, Adherence, PlacementResult, BookieInfo, HealthInfo
    from policies import PlacementError, NotEnoughBookiesError
    from policies import PlacementPolicy       # the interface every policy implements

This package never imports Spark, pandas or the engine's other packages.
"""

from .api import Adherence, BookieInfo, HealthInfo, PlacementPolicy, PlacementResult
from .errors import NotEnoughBookiesError, PlacementError
from .factory import create_policy

__all__ = [
    "Adherence",
    "BookieInfo",
    "HealthInfo",
    "NotEnoughBookiesError",
    "PlacementError",
    "PlacementPolicy",
    "PlacementResult",
    "create_policy",
]
