"""et-partition: tag the ops a backend takes, with its partitioner (`etmlir.backends.partitioner`).

    %0 = "edge.relu"(%x) {etmlir.debug_handle = 1 : i64} : ...
    %1 = "edge.embedding"(%w, %i) {etmlir.debug_handle = 2 : i64} : ...

with `--et-partition='backend=nested skip-ops=edge.embedding'` becomes

    %0 = "edge.relu"(%x) {etmlir.debug_handle = 1 : i64, etmlir.delegation_tag = "nested_0"} : ...
    %1 = "edge.embedding"(%w, %i) {etmlir.debug_handle = 2 : i64,
                                    etmlir.not_delegated = {nested = "edge.embedding is in skip_ops"}} : ...

The same partitioner `edge.to_backend(etmlir.backends.partitioner(...))`
runs, made available to pipelines so that grouping can be checked with lit
and outlined separately (`et-outline-delegates`). Groups are the largest
the backend supports that create no cycle; every refused op records why.
"""

from __future__ import annotations

from torch_mlir import ir

from etmlir.delegation.backend import backend_ids, partitioner as get_partitioner
from etmlir.passes.registry import Option, PassFailure, each, edge_op_name, emit_error, register_pass


@register_pass("et-partition", level="edge", options={
    "backend": Option(str, "", "the backend's id (etmlir.backends: nested, ...)", choices=backend_ids),
    "ops": Option(list, [], "only these edge ops (default: all the backend supports)", check=each(edge_op_name)),
    "skip-ops": Option(list, [], "edge ops to leave out", check=each(edge_op_name)),
    "min-group-size": Option(int, 1, "smallest group to delegate", minimum=1)})
def partition(module: ir.Operation, *, backend: str, ops: list[str], skip_ops: list[str],
              min_group_size: int) -> None:
    """et-partition: tag the ops a backend supports in cycle-free groups (etmlir.delegation_tag)."""
    try:
        partitioner = get_partitioner(backend, ops=ops or None, skip_ops=skip_ops,
                                           min_group_size=min_group_size)
    except (KeyError, ValueError) as error:
        emit_error(module, f"et-partition: {error.args[0] if error.args else error}")
        raise PassFailure() from None
    partitioner.partition(module)
