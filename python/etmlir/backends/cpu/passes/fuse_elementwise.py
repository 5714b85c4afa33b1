"""et-cpu-fuse-elementwise: fuse elementwise linalg producers into their consumers, contractions kept.

A bias add, a clamp and a residual add become one loop nest instead of three
passes over memory (`linalg-fuse-elementwise-ops`). That pass also folds
reshapes into neighbouring ops by rewriting them as `linalg.generic`, which
would turn a `linalg.matmul` next to a reshape (nanoGPT's linears) into a
generic no microkernel takes. So each contraction, and the reshapes feeding
it, is first fenced into an `scf.execute_region` of its own (canonicalization
inlines the fences again afterwards); if fusion still loses a contraction,
the module is left unfused (canonicalized only).

    %0 = linalg.matmul ins(%a, %b ...) outs(%init ...)
    %1 = linalg.generic {...} ins(%0, %bias ...) { arith.addf }
    %2 = linalg.generic {...} ins(%1 ...) { arith.maximumf }

becomes

    %0 = linalg.matmul ins(%a, %b ...) outs(%init ...)
    %2 = linalg.generic {...} ins(%0, %bias ...) { arith.addf, arith.maximumf }
"""

from __future__ import annotations

from torch_mlir import ir

from etmlir.backends.cpu.ir_util import clone_body, count_ops, replace_body, run
from etmlir.passes.registry import register_pass

# Canonicalization after fusion also inlines the fences again.
TENSOR_LEVEL = "builtin.module(func.func(linalg-fuse-elementwise-ops),canonicalize,cse)"

CONTRACTIONS = ("linalg.matmul", "linalg.batch_matmul", "linalg.conv_2d_nchw_fchw",
                "linalg.depthwise_conv_2d_nchw_chw")


def _fence(op: ir.Operation) -> None:
    """Move `op` into an `scf.execute_region` of its own (canonicalization inlines it again later)."""
    with op.location, ir.InsertionPoint(op):
        region = ir.Operation.create("scf.execute_region", results=[r.type for r in op.results], regions=1)
    block = region.regions[0].blocks.append()
    for old, new in zip(op.results, region.results):
        old.replace_all_uses_with(new)
    with op.location, ir.InsertionPoint(block):
        ir.Operation.create("scf.yield", operands=list(op.results))
    op.move_before(list(block.operations)[0])


def fence_contractions(module: ir.Module | ir.Operation) -> None:
    """Hide each contraction, and the reshapes feeding it, from reshape folding."""
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name in CONTRACTIONS:
            found.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    with module.operation.context:
        for op in found:
            for value in op.operands:
                owner = value.owner
                if isinstance(owner, (ir.Operation, ir.OpView)) and owner.name in (
                        "tensor.expand_shape", "tensor.collapse_shape"):
                    _fence(owner.operation)
            _fence(op)


@register_pass("et-cpu-fuse-elementwise")
def fuse_elementwise(module: ir.Operation) -> None:
    """et-cpu-fuse-elementwise: fuse elementwise linalg ops into one loop nest each; contractions stay."""
    fused = clone_body(module)
    fence_contractions(fused)
    run(fused, TENSOR_LEVEL)
    if count_ops(fused, CONTRACTIONS) < count_ops(module, CONTRACTIONS):
        run(module, "builtin.module(canonicalize,cse)")  # fusion ate a contraction: keep the unfused module
        return
    replace_body(module, fused)
