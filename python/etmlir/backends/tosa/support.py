"""Which edge ops the `tosa` backend takes: what TOSA 1.0's PRO-FP profile expresses, on static shapes.

The table is `et-tosa-convert-edge`'s (one converter per op); this file adds
the checks of one instance, so that an op the conversion would refuse stays
on the portable kernels and the delegation report says why (op, reason,
source line) instead of the compile failing:

  - every tensor is f32 (booleans where TOSA has them: comparisons, logical
    ops, select's condition), except 0-d operands that are compile-time
    constants (alpha, eps, clamp bounds), which the conversion reads;
  - every shape is static (a TOSA graph has fixed shapes: export without
    dynamic dims to delegate a transformer's blocks) and of rank <= 6
    (level 8K's MAX_RANK);
  - convolutions are 2-d, not transposed, plain or depthwise; slices have
    step 1; pools have no ceil_mode or dilation; resizes are by integer
    factors without align_corners.

Embeddings stay portable: TOSA's gather takes i32 indices and models index
with i64.
"""

from __future__ import annotations

from torch_mlir import ir

from etmlir.backends.tosa.passes.convert_edge import CONVERTERS, bool_attr, int_list_attr
from etmlir.dialects.edge import DYNAMIC
from etmlir.delegation.operator_support import OperatorSupport, OpPredicate

MAX_RANK = 6  # TOSA level 8K
_BOOLEAN_OPS = frozenset({
    "edge.eq_scalar", "edge.eq_tensor", "edge.ne_scalar", "edge.ne_tensor", "edge.gt_scalar", "edge.gt_tensor",
    "edge.ge_scalar", "edge.ge_tensor", "edge.lt_scalar", "edge.lt_tensor", "edge.le_scalar", "edge.le_tensor",
    "edge.logical_not", "edge.logical_and", "edge.logical_or", "edge.where_self", "edge.any_dim", "edge.full",
    "edge.full_like", "edge.view_copy", "edge.unsqueeze_copy", "edge.squeeze_copy_dims", "edge.squeeze_copy_dim",
    "edge.squeeze_copy", "edge.permute_copy", "edge.expand_copy", "edge.clone", "edge.alias_copy", "edge.cat",
    "edge.slice_copy_tensor",
})


def _shape(value: ir.Value) -> list[int]:
    return list(ir.RankedTensorType(value.type).shape)


def _is_constant(value: ir.Value) -> bool:
    owner = value.owner
    return isinstance(owner, (ir.Operation, ir.OpView)) and owner.name == "edge.constant"


def _convolution(op: ir.Operation) -> str | None:
    if bool_attr(op, "transposed"):
        return "transposed convolution is not lowered to TOSA yet"
    rank = ir.RankedTensorType(op.operands[0].type).rank
    if rank != 4:
        return f"only 2-d convolutions (4-d inputs) are lowered; this one has a rank-{rank} input"
    groups = int(ir.IntegerAttr(op.attributes["groups"]).value)
    c_in, c_out = _shape(op.operands[0])[1], _shape(op.results[0])[1]
    if groups != 1 and not (groups == c_in and c_out % c_in == 0):
        return f"grouped convolution ({groups} groups of {c_in} channels) is neither plain nor depthwise"
    return None


def _slice(op: ir.Operation) -> str | None:
    for name in ("start", "end", "step", "index"):
        if name in op.attributes and int(ir.IntegerAttr(op.attributes[name]).value) == DYNAMIC:
            return f"the slice's {name} is only known at run time; TOSA graphs are static"
    return None


def _pool(op: ir.Operation) -> str | None:
    if bool_attr(op, "ceil_mode"):
        return "ceil_mode pooling has no TOSA form"
    if any(d != 1 for d in int_list_attr(op, "dilation")):
        return "dilated pooling has no TOSA form"
    if op.name == "edge.max_pool2d_with_indices" and len(list(op.results[1].uses)):
        return "max_pool2d's indices are used (TOSA's max_pool2d gives none)"
    if op.name == "edge.avg_pool2d" and len(op.operands) > 1:
        return "avg_pool2d with divisor_override has no TOSA form"
    return None


def _adaptive_pool(op: ir.Operation) -> str | None:
    h, w = _shape(op.operands[0])[2:]
    oh, ow = _shape(op.results[0])[2:]
    if (oh, ow) != (1, 1) and (h % oh or w % ow):
        return f"adaptive pooling {h}x{w} -> {oh}x{ow} has windows of different sizes"
    return None


def _resize(op: ir.Operation) -> str | None:
    if bool_attr(op, "align_corners"):
        return "align_corners=True resizing is not lowered"
    if len(_shape(op.operands[0])) != 4:
        return "only 2-d resizing is lowered"
    h, w = _shape(op.operands[0])[2:]
    oh, ow = _shape(op.results[0])[2:]
    if oh % h or ow % w:
        return f"resizing {h}x{w} -> {oh}x{ow} is not by integer factors"
    return None


def _constant_pad(op: ir.Operation) -> str | None:
    if any(p < 0 for p in int_list_attr(op, "pad")):
        return "negative padding (cropping) is not lowered"
    return None


_CHECKS: dict[str, OpPredicate] = {
    "edge.convolution": _convolution,
    "edge.slice_copy_tensor": _slice,
    "edge.select_copy_int": _slice,
    "edge.avg_pool2d": _pool,
    "edge.max_pool2d_with_indices": _pool,
    "edge.adaptive_avg_pool2d": _adaptive_pool,
    "edge.upsample_bilinear2d_vec": _resize,
    "edge.upsample_nearest2d_vec": _resize,
    "edge.constant_pad_nd": _constant_pad,
}

TOSA_OPS: dict[str, OpPredicate | None] = {name: _CHECKS.get(name) for name in CONVERTERS}


def _tensors(op: ir.Operation) -> str | None:
    """Static f32 tensors (booleans where the op has them); 0-d operands must be compile-time constants."""
    for kind, values in (("operand", op.operands), ("result", op.results)):
        for i, value in enumerate(values):
            if kind == "result" and len(op.results) > 1 and not len(list(value.uses)):
                continue  # an unused extra result (max_pool2d's indices): never computed
            if not isinstance(value.type, ir.RankedTensorType):
                if kind == "operand" and str(value.type).startswith("!"):
                    return f"{kind} {i} is a {value.type}, not a tensor"
                continue
            t = ir.RankedTensorType(value.type)
            if kind == "operand" and t.rank == 0 and _is_constant(value):
                continue
            if not t.has_static_shape:
                return f"{kind} {i} ({t}) has a dynamic shape; TOSA graphs are static (export without dynamic dims)"
            if t.rank > MAX_RANK:
                return f"{kind} {i} has rank {t.rank}; TOSA level 8K allows {MAX_RANK}"
            element = str(t.element_type)
            if element == "i1" and op.name in _BOOLEAN_OPS:
                continue
            if element != "f32":
                return f"{kind} {i} has dtype {element}; the tosa backend's PRO-FP graphs take f32 (and bool)"
            if kind == "operand" and t.rank == 0 and not _is_constant(value) and op.name not in _TENSOR_SCALAR_OK:
                return f"{kind} {i} is a 0-d tensor computed at run time; TOSA reads it as a constant"
    return None


# Ops whose 0-d operands are tensors in their own right (the others read 0-d operands as constants).
_TENSOR_SCALAR_OK = frozenset({"edge.add_tensor", "edge.sub_tensor", "edge.mul_tensor", "edge.div_tensor",
                               "edge.where_self", "edge.maximum", "edge.minimum", "edge.eq_tensor",
                               "edge.ne_tensor", "edge.gt_tensor", "edge.ge_tensor", "edge.lt_tensor",
                               "edge.le_tensor", "edge.logical_and", "edge.logical_or", "edge.pow_tensor_tensor"})

TOSA_SUPPORT = OperatorSupport(ops=TOSA_OPS, max_rank=MAX_RANK, predicates=(_tensors,))
