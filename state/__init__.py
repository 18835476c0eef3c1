"""The per-cluster model between parsed records (`events`) and the placement core (`policies`).

Public surface::

    from state import ClusterModel, ModelSettings, Output, StepResult, step, dumps, loads

* `ModelSettings.from_conf(conf)`: the configuration, parsed once: the engine's model keys
  (`engine.seed`, ...) and the placement keys (`ModelSettings.placement`).
* `step(model, cluster, items, settings, shard=0, shards=1, horizon_ms=None)`: one pure micro-batch.
* `dumps(model)` / `loads(data, settings)`: the versioned snapshot kept in Spark's state store.

This package imports `events`, `policies`, the standard library, numpy (the ledger registry's
columns) and orjson (snapshots and output records); never `streaming`, Spark or pandas.
"""

from .cluster import ClusterModel
from .outputs import Output
from .settings import MODEL_KEYS, ModelSettings
from .snapshot import SnapshotError, dumps, loads
from .step import StepResult, request_rng, step

__all__ = [
    "MODEL_KEYS",
    "ClusterModel",
    "ModelSettings",
    "Output",
    "SnapshotError",
    "StepResult",
    "dumps",
    "loads",
    "request_rng",
    "step",
]
