"""et-edge-canonicalize: fold no-op copies and views, then remove dead and duplicate edge ops.

    %0 = "edge.clone"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
    %1 = "edge.permute_copy"(%0) {dims = array<i64: 0, 1>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
    %2 = "edge.relu"(%1) : (tensor<2x3xf32>) -> tensor<2x3xf32>
    %3 = "edge.relu"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>       // unused

becomes

    %2 = "edge.relu"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>

An op is folded into its input only when it provably returns its input
unchanged: same type in and out, and an identity by its attributes (a
permutation 0..n-1, a full slice with step 1, a view whose shape has at
most one dynamic dim, a dim-order copy with no dtype or layout change).
Dead-code removal and CSE are upstream `canonicalize` and `cse`, which work
on edge ops because every edge op is declared free of side effects.
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir import rewrite as rw
from torch_mlir.passmanager import PassManager

from etmlir.dialects.edge import DYNAMIC
from etmlir.passes.registry import register_pass

# Ops that return their (first) operand when the types match and `is_identity` says so.
# (A same-type squeeze removed no dim; an unsqueeze never keeps its type.)
_ALWAYS_IDENTITY = ("edge.alias_copy", "edge.detach_copy", "edge.squeeze_copy", "edge.squeeze_copy_dim",
                    "edge.squeeze_copy_dims", "edge.unsqueeze_copy")


def _attr(op: ir.Operation, name: str) -> ir.Attribute | None:
    return op.attributes[name] if name in op.attributes else None


def is_identity(op: ir.Operation) -> bool:
    """True if `op` returns its first operand unchanged."""
    if len(op.results) != 1 or not op.operands or op.operands[0].type != op.results[0].type:
        return False
    source = ir.RankedTensorType(op.operands[0].type)
    name = op.name
    if name in _ALWAYS_IDENTITY:
        return True
    if name == "edge.expand_copy":  # a dynamic dim could be 1 at run time and broadcast
        return source.has_static_shape
    if name == "edge.clone":
        fmt = _attr(op, "memory_format")
        return fmt is None or ir.StringAttr(fmt).value in ("torch.contiguous_format", "torch.preserve_format")
    if name == "edge.to_dim_order_copy":
        order = _attr(op, "dim_order")
        return order is None or list(ir.DenseI64ArrayAttr(order)) == list(range(source.rank))
    if name in ("edge.permute_copy", "edge.view_copy"):
        if name == "edge.permute_copy":
            return list(ir.DenseI64ArrayAttr(op.attributes["dims"])) == list(range(source.rank))
        # Same type: every static dim matches, and with one dynamic dim the element count fixes it.
        return sum(1 for i in range(source.rank) if source.is_dynamic_dim(i)) <= 1
    if name == "edge.slice_copy_tensor":
        start = _attr(op, "start")
        end = _attr(op, "end")
        step = ir.IntegerAttr(op.attributes["step"]).value
        dim = ir.IntegerAttr(op.attributes["dim"]).value % max(source.rank, 1)
        starts_at_zero = start is None or ir.IntegerAttr(start).value == 0
        size = source.shape[dim]
        ends_at_end = end is None or (not source.is_dynamic_dim(dim) and ir.IntegerAttr(end).value not in
                                      (DYNAMIC,) and ir.IntegerAttr(end).value >= size)
        return step == 1 and starts_at_zero and ends_at_end
    if name == "edge.cat":
        return len(op.operands) == 1
    return False


def _fold_identity(op: ir.Operation, rewriter: rw.PatternRewriter) -> bool:
    op = op.operation
    if not is_identity(op):
        return True  # no match
    rewriter.replace_op(op, [op.operands[0]])
    return False


_FOLDED = _ALWAYS_IDENTITY + ("edge.expand_copy", "edge.clone", "edge.to_dim_order_copy", "edge.permute_copy",
                              "edge.view_copy", "edge.slice_copy_tensor", "edge.cat")


@register_pass("et-edge-canonicalize", level="edge")
def edge_canonicalize(module: ir.Operation) -> None:
    """et-edge-canonicalize: fold no-op copies/views, remove dead code, merge duplicate edge ops."""
    with module.context:
        patterns = rw.RewritePatternSet()
        for name in _FOLDED:
            patterns.add(name, _fold_identity)
        rw.apply_patterns_and_fold_greedily(module, patterns.freeze())
        PassManager.parse("builtin.module(canonicalize,cse)").run(module)
