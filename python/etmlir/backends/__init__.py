"""Backends and delegation: partitioners, the backend registry, and lowering to delegates.

    partitioner = etmlir.backends.partitioner("nested", skip_ops=["edge.embedding"])
    edge = edge.to_backend(partitioner)            # partial: the tagged groups become delegates
    lowered = etmlir.to_backend("nested", edge)    # whole program as one delegate (composable)

A backend (`Backend`) is registered by id and provides a `Partitioner`
(`OperatorSupport` + cycle-free grouping) and `preprocess`, which compiles
one outlined delegate into the payload bytes the runtime backend of the same
id runs. Delegation is a pipeline of passes, each usable from et-opt:
et-partition (tags), et-outline-delegates (nested modules + delegate calls),
et-preprocess-delegates (payloads). Backends shipped here: "nested" (a .pte run by the runtime itself) and "cpu"
(native code compiled by MLIR, `etmlir.backends.cpu`).
"""

from etmlir.backends.backend import (Backend, BackendError, PreprocessResult, backend_ids, get_backend, partitioner,
                                     register_backend)
from etmlir.backends.operator_support import OperatorSupport
from etmlir.backends.partitioner import PartitionResult, Partitioner
from etmlir.backends import nested  # noqa: F401  (registers "nested")
from etmlir.backends import cpu  # noqa: F401  (registers "cpu")

__all__ = ["Backend", "BackendError", "OperatorSupport", "PartitionResult", "Partitioner", "PreprocessResult",
           "backend_ids", "get_backend", "partitioner", "register_backend"]
