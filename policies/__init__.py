"""The placement core: BookKeeper's and Pulsar's ensemble placement policies, in pure Python.

Public surface (CONTRACT §1)::

    from policies import create_policy, Adherence, PlacementResult, BookieInfo, HealthInfo
    from policies import PlacementError, NotEnoughBookiesError

This package never imports Spark, pandas or the engine's other packages.
"""

from .api import Adherence, BookieInfo, HealthInfo, PlacementResult
from .errors import NotEnoughBookiesError, PlacementError
from .factory import create_policy

__all__ = [
    "Adherence",
    "BookieInfo",
    "HealthInfo",
    "NotEnoughBookiesError",
    "PlacementError",
    "PlacementResult",
    "create_policy",
]
