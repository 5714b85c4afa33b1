"""The driver of the edge-level rewrites that match one op by name (et-fold-batch-norm, et-conv1d-to-conv2d).

The ops are collected first and rewritten after the walk, since a rewrite
erases the op it matched (and may erase its neighbours), which a walk in
progress must not see.
"""

from __future__ import annotations

from collections.abc import Callable

from torch_mlir import ir


def rewrite_each(module: ir.Operation, name: str, rewrite: Callable[[ir.Operation], bool]) -> int:
    """Calls `rewrite` on every op named `name` (under its location); returns how many it rewrote."""
    matched: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == name:
            matched.append(op)
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    rewritten = 0
    for op in matched:
        with op.location:
            rewritten += rewrite(op)
    return rewritten
