"""et-assign-debug-handles: give every edge op a stable integer id, once, before partitioning.

    %0 = "edge.convolution"(%x, %w, %b) {...} : (...) -> tensor<1x32x112x112xf32>
    %1 = "edge.hardtanh"(%0) {...} : (...) -> tensor<1x32x112x112xf32>

becomes

    %0 = "edge.convolution"(%x, %w, %b) {etmlir.debug_handle = 1 : i64, ...} : (...) -> ...
    %1 = "edge.hardtanh"(%0) {etmlir.debug_handle = 2 : i64, ...} : (...) -> ...

A debug handle names one edge op for the rest of the op's life: when a
partitioner moves it into a delegate, when a backend compiles it into a
payload, and when the runtime reports that it failed, the handle is what maps
back to the op's source line (`.pte` debug_info). So handles are given before
anything moves ops around, and never change: ops that already have one keep
it, and new ops get ids above the largest one in the module (the pass is
idempotent). Handles count up in program order, through nested modules (an
outlined delegate's ops keep theirs). `edge.constant` gets none: it is data,
not an op that runs.
"""

from __future__ import annotations

from torch_mlir import ir

from etmlir.dialects import attrs
from etmlir.passes.registry import register_pass

_NO_HANDLE = ("edge.constant",)


def _edge_ops(module: ir.Operation) -> list[ir.Operation]:
    ops: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if (op.name.startswith("edge.") and op.name not in _NO_HANDLE) or (
                op.name == "func.call" and attrs.BACKEND in op.attributes):  # a delegate call
            ops.append(op)
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    return ops


def debug_handle(op: ir.Operation) -> int | None:
    """The op's debug handle, or None if it has none."""
    return ir.IntegerAttr(op.attributes[attrs.DEBUG_HANDLE]).value if attrs.DEBUG_HANDLE in op.attributes else None


def debug_handles(op: ir.Operation) -> list[int]:
    """The debug handles of `op` and every op inside it, in program order."""
    found: list[int] = []

    def visit(inner: ir.Operation) -> ir.WalkResult:
        handle = debug_handle(inner)
        if handle is not None:
            found.append(handle)
        return ir.WalkResult.ADVANCE

    op.walk(visit)
    return found


def next_debug_handle(module: ir.Operation) -> int:
    """An id no op in `module` has yet (for ops a pass creates, such as a delegate call)."""
    return max((debug_handle(op) or 0 for op in _edge_ops(module)), default=0) + 1


@register_pass("et-assign-debug-handles", level="edge")
def assign_debug_handles(module: ir.Operation) -> None:
    """et-assign-debug-handles: give every edge op a stable `etmlir.debug_handle` (kept ones stay)."""
    ops = _edge_ops(module)
    handle = max((debug_handle(op) or 0 for op in ops), default=0)
    i64 = ir.IntegerType.get_signless(64, module.context)
    for op in ops:
        if attrs.DEBUG_HANDLE not in op.attributes:
            handle += 1
            op.attributes[attrs.DEBUG_HANDLE] = ir.IntegerAttr.get(i64, handle)
