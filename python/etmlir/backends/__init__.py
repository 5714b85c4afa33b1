"""Backends and delegation: partitioners, the backend registry, and lowering to delegates.

    partitioner = etmlir.backends.partitioner("nested", skip_ops=["edge.embedding"])
    edge = edge.to_backend(partitioner)            # partial: the tagged groups become delegates
    lowered = etmlir.to_backend("nested", edge)    # whole program as one delegate (composable)

A backend (`Backend`) is registered by id and provides a `Partitioner`
(`OperatorSupport` + cycle-free grouping) and `preprocess`, which compiles
one outlined delegate into the payload bytes the runtime backend of the same
id runs. Delegation is a pipeline of passes, each usable from et-opt:
et-partition (tags), et-outline-delegates (nested modules + delegate calls),
et-preprocess-delegates (payloads).

The framework (the `Backend` interface and registry, `OperatorSupport`, the
partitioner) lives in `etmlir.delegation`, below the passes; this package
holds the backends themselves, one folder each (`nested/`, `cpu/`, `tosa/`, `vulkan/`), found by
id and imported on first use (`get_backend`), and `lowering.py`
(`etmlir.to_backend`, composition). A backend folder holds its operator
support table, its passes (`et-<id>-*`, in the one pass registry), a
`pipeline.py` whose `preprocess` runs them as a named pipeline and
serialises the payload, and its README; its runtime half lives in
`runtime/backends/<id>/`.
"""

from etmlir.delegation.backend import (Backend, BackendError, PreprocessResult, backend_ids, get_backend, partitioner,
                                       register_backend)
from etmlir.delegation.operator_support import OperatorSupport
from etmlir.delegation.partitioner import PartitionResult, Partitioner

__all__ = ["Backend", "BackendError", "OperatorSupport", "PartitionResult", "Partitioner", "PreprocessResult",
           "backend_ids", "get_backend", "partitioner", "register_backend"]
