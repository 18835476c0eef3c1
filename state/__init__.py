"""The per-cluster model between parsed records (`events`) and the placement core (`policies`).

Public surface::

    from state import ClusterModel, ModelSettings, Output, StepResult, step, dumps, loads

* `ModelSettings.from_conf(conf)`: the engine's model keys (`engine.seed`, ...), plus the whole conf.
* `step(model, cluster, items, settings, conf, shard=0, shards=1)`: one pure micro-batch.
* `dumps(model)` / `loads(data, conf)`: the versioned snapshot kept in Spark's state store.

This package imports only `events`, `policies` and the standard library.
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
