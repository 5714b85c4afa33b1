"""et-fold-batch-norm: an inference batch norm after a convolution folds into the convolution's weights.

A batch norm in eval mode is a per-channel affine map, y = (x - mean) * s + beta
with s = gamma / sqrt(var + eps); after a convolution it is the same as a
convolution with weights W * s (each output channel scaled) and bias
(b - mean) * s + beta. Folding it at compile time removes a pass over the
activation (and the square root per element that the generated code would
otherwise compute), and leaves the backend a convolution with a bias, which
the cpu backend fuses into its microkernel.

    %w = "edge.constant"() {etmlir.param = "conv.weight", value = ...} : () -> tensor<8x3x3x3xf32>
    %y = "edge.convolution"(%x, %w) {...} : (...) -> tensor<1x8x16x16xf32>
    %n:3 = "edge.native_batch_norm_legit_no_training"(%y, %g, %b, %m, %v) {eps = 1.0e-05 : f64, ...}

becomes

    %w2 = "edge.constant"() {etmlir.param = "conv.weight.bn_folded", value = dense<...>} : () -> tensor<8x3x3x3xf32>
    %b2 = "edge.constant"() {etmlir.param = "conv.weight.bn_folded_bias", value = dense<...>} : () -> tensor<8xf32>
    %y = "edge.convolution"(%x, %w2, %b2) {...} : (...) -> tensor<1x8x16x16xf32>

It folds only when every parameter is an `edge.constant` whose data the
module holds, the convolution is not transposed, has static shapes and no
other user, and the batch norm's other two results are unused. The folded
convolution's location keeps the batch norm's debug handle next to its own,
so a profile or an error still names both ops. The arithmetic runs in
float64 and is rounded to the weights' type once.

A batch norm over the last dim of a matrix product (LeViT's linear layers:
`mm`, views that keep the channels last, `BatchNorm1d` over the flattened
rows) folds the same way, into the weight's columns and a bias (an `mm`
becomes an `addmm`). Any other batch norm with constant statistics (after a
pooling, an add, a transposed convolution) becomes a multiply-add by
per-channel constants, scale = gamma / sqrt(var + eps) and shift = beta -
mean * scale, shaped [C, 1, ...] to broadcast over the dims after the
channel's:

    %n:3 = "edge.native_batch_norm_legit_no_training"(%x, %g, %b, %m, %v) {eps = 1.0e-05 : f64, ...}

becomes

    %s = "edge.constant"() {etmlir.param = "bn.bn_scale", value = dense<...>} : () -> tensor<8x1x1xf32>
    %t = "edge.constant"() {etmlir.param = "bn.bn_shift", value = dense<...>} : () -> tensor<8x1x1xf32>
    %0 = "edge.mul_tensor"(%x, %s) : (tensor<1x8x16x16xf32>, tensor<8x1x1xf32>) -> tensor<1x8x16x16xf32>
    %1 = "edge.add_tensor"(%0, %t, %one) : (...) -> tensor<1x8x16x16xf32>

(torch-mlir's lowering of the batch norm computes the square root and a
division per element, and asserts on the divisor per element.) Both ops
carry the batch norm's debug handle.
"""

from __future__ import annotations

import numpy as np
from torch_mlir import ir

from etmlir.dialects import attrs
from etmlir.dialects.edge import edge_op_of, named_operands
from etmlir.frontend.locations import with_debug_handle
from etmlir.passes.assign_debug_handles import debug_handle
from etmlir.passes.fold_constants import constant_tensor
from etmlir.passes.registry import register_pass
from etmlir.passes.rewrite import rewrite_each

BATCH_NORM = "edge.native_batch_norm_legit_no_training"
CONVOLUTION = "edge.convolution"
MATMULS = ("edge.mm", "edge.addmm")
VIEW = "edge.view_copy"


def _constant(value: ir.Value | None) -> np.ndarray | None:
    if value is None or isinstance(value.owner, ir.Block) or value.owner.name != "edge.constant":
        return None
    tensor = constant_tensor(value.owner.operation)
    return None if tensor is None else tensor.numpy().astype(np.float64)


def _param(value: ir.Value) -> str:
    owner = value.owner
    return ir.StringAttr(owner.attributes[attrs.PARAM]).value if attrs.PARAM in owner.attributes else "conv"


def _one(values: list[ir.Value]) -> ir.Value | None:
    return values[0] if values else None


def _new_constant(array: np.ndarray, like: ir.RankedTensorType, shape: list[int], name: str,
                  before: ir.Operation) -> ir.Value:
    t = ir.RankedTensorType.get(shape, like.element_type)
    data = np.ascontiguousarray(array.astype(np.float32 if str(like.element_type) == "f32" else np.float64))
    attributes = {"value": ir.DenseElementsAttr.get(data, type=like.element_type, shape=shape),
                  attrs.PARAM: ir.StringAttr.get(name)}
    return ir.Operation.create("edge.constant", results=[t], attributes=attributes, loc=before.location,
                               ip=ir.InsertionPoint(before)).result


def _try_fold(norm: ir.Operation) -> bool:
    source = norm.operands[0]
    conv = source.owner
    if isinstance(conv, ir.Block) or conv.name != CONVOLUTION:
        return False
    if any(True for r in list(norm.results)[1:] for _ in r.uses) or len(list(source.uses)) != 1:
        return False
    conv_args = named_operands(conv.operation, edge_op_of(conv))
    if conv_args.get("sym_values") or ir.BoolAttr(conv.attributes["transposed"]).value:
        return False
    out_type = ir.RankedTensorType(source.type)
    weight_type = ir.RankedTensorType(conv_args["weight"][0].type)
    if not out_type.has_static_shape or str(weight_type.element_type) not in ("f32", "f64"):
        return False
    weight = _constant(conv_args["weight"][0])
    bias_value = _one(conv_args["bias"])
    bias = _constant(bias_value)
    if weight is None or (bias_value is not None and bias is None):
        return False
    channels = weight.shape[0]
    statistics = _statistics(norm, channels)
    if statistics is None or (bias is not None and bias.shape != (channels,)):
        return False
    scale, shift = statistics
    new_weight = weight * scale.reshape((channels,) + (1,) * (weight.ndim - 1))
    new_bias = (bias if bias is not None else 0.0) * scale + shift

    name = _param(conv_args["weight"][0])
    w = _new_constant(new_weight, weight_type, list(weight_type.shape), f"{name}.bn_folded", conv)
    b = _new_constant(new_bias, weight_type, [channels], f"{name}.bn_folded_bias", conv)
    attributes = {name: conv.attributes[name] for name in conv.attributes}
    attributes["operandSegmentSizes"] = ir.DenseI32ArrayAttr.get([1, 1, 1, 0])
    folded = ir.Operation.create(CONVOLUTION, results=[out_type], operands=[conv_args["input"][0], w, b],
                                 attributes=attributes, loc=_norm_location(conv, norm), ip=ir.InsertionPoint(norm))
    norm.results[0].replace_all_uses_with(folded.result)
    _erase_with_parameters(norm, conv, [conv_args["weight"][0], bias_value])
    return True


def _statistics(norm: ir.Operation, channels: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(scale, shift) of an inference batch norm whose statistics and affine parameters are constants."""
    args = named_operands(norm, edge_op_of(norm))
    gamma_value, beta_value = _one(args["weight"]), _one(args["bias"])
    mean, var = _constant(args["running_mean"][0]), _constant(args["running_var"][0])
    gamma, beta = _constant(gamma_value), _constant(beta_value)
    if mean is None or var is None or (gamma_value is not None and gamma is None) or (
            beta_value is not None and beta is None):
        return None
    if any(a is not None and a.shape != (channels,) for a in (gamma, beta, mean, var)):
        return None
    scale = (gamma if gamma is not None else 1.0) / np.sqrt(var + ir.FloatAttr(norm.attributes["eps"]).value)
    shift = (beta if beta is not None else 0.0) - mean * scale
    return np.broadcast_to(scale, (channels,)), np.broadcast_to(shift, (channels,))


def _erase_with_parameters(norm: ir.Operation, producer: ir.Operation | None = None,
                           extra: list[ir.Value | None] = ()) -> None:
    """Erase the folded batch norm, then the op it was folded into, then the constants left unused."""
    args = named_operands(norm, edge_op_of(norm))
    dead = [*extra, _one(args["weight"]), _one(args["bias"]), args["running_mean"][0], args["running_var"][0]]
    norm.erase()
    if producer is not None:
        producer.operation.erase()
    erased: list[ir.Value] = []
    for value in dead:  # the same value may come twice (addmm's alpha and beta): erased once
        if value is None or any(value == e for e in erased) or any(True for _ in value.uses):
            continue
        erased.append(value)
        value.owner.erase()


def _norm_location(op: ir.Operation, norm: ir.Operation) -> ir.Location:
    location = ir.Location.fused([op.location, norm.location])
    handle = debug_handle(norm)
    return with_debug_handle(location, handle) if handle is not None else location


def _one_constant(before: ir.Operation) -> ir.Value:
    i64 = ir.IntegerType.get_signless(64)
    t = ir.RankedTensorType.get([], i64)
    return ir.Operation.create("edge.constant", results=[t], attributes={
        "value": ir.DenseElementsAttr.get(np.array(1, dtype=np.int64), type=i64, shape=[])},
        loc=before.location, ip=ir.InsertionPoint(before)).result


def _is_one(value: ir.Value) -> bool:
    array = _constant(value)
    return array is not None and array.size == 1 and float(array.reshape(())) == 1.0


def _try_fold_matmul(norm: ir.Operation) -> bool:
    """mm / addmm -> views keeping the last dim -> batch norm over that dim: fold into the weight's columns."""
    source = norm.operands[0]
    norm_type = ir.RankedTensorType(source.type)
    if norm_type.rank != 2 or norm_type.is_dynamic_dim(1) or any(True for r in list(norm.results)[1:] for _ in r.uses):
        return False
    channels = norm_type.shape[1]
    value = source
    while True:
        if isinstance(value.owner, ir.Block) or len(list(value.uses)) != 1:
            return False
        t = ir.RankedTensorType(value.type)
        if t.rank == 0 or t.is_dynamic_dim(t.rank - 1) or t.shape[-1] != channels:
            return False
        if value.owner.name != VIEW:
            break
        value = value.owner.operands[0]
    matmul = value.owner
    if matmul.name not in MATMULS:
        return False
    args = named_operands(matmul.operation, edge_op_of(matmul))
    weight_value = args["mat2"][0]
    weight_type = ir.RankedTensorType(weight_value.type)
    weight = _constant(weight_value)
    if weight is None or str(weight_type.element_type) not in ("f32", "f64") or weight.shape[-1] != channels:
        return False
    is_addmm = matmul.name == "edge.addmm"
    rows = args["mat1"][0] if is_addmm else args["self"][0]  # mm(self, mat2); addmm(self (the bias), mat1, mat2)
    bias_value = args["self"][0] if is_addmm else None
    bias = _constant(bias_value) if bias_value is not None else np.zeros(channels)
    if bias is None or bias.shape not in ((channels,), (1, channels)) or (
            bias_value is not None and not (_is_one(args["beta"][0]) and _is_one(args["alpha"][0]))):
        return False
    statistics = _statistics(norm, channels)
    if statistics is None:
        return False
    scale, shift = statistics
    name = _param(weight_value)
    w = _new_constant(weight * scale, weight_type, list(weight_type.shape), f"{name}.bn_folded", matmul)
    b = _new_constant(bias.reshape(channels) * scale + shift, weight_type, [channels], f"{name}.bn_folded_bias", matmul)
    one = _one_constant(matmul)
    attributes = {name: matmul.attributes[name] for name in matmul.attributes}
    folded = ir.Operation.create("edge.addmm", results=[matmul.results[0].type],
                                 operands=[b, rows, w, one, one], attributes=attributes,
                                 loc=_norm_location(matmul, norm), ip=ir.InsertionPoint(matmul))
    matmul.results[0].replace_all_uses_with(folded.result)
    norm.results[0].replace_all_uses_with(norm.operands[0])  # re-read: it is `folded` when no view stands between
    extra = [weight_value, bias_value] + ([args["beta"][0], args["alpha"][0]] if bias_value is not None else [])
    _erase_with_parameters(norm, matmul, extra)
    return True


def _to_affine(norm: ir.Operation) -> bool:
    """Any other batch norm with constant statistics: x * scale + shift, per channel (dim 1)."""
    x = norm.operands[0]
    t = ir.RankedTensorType(x.type)
    if t.rank < 2 or t.is_dynamic_dim(1) or str(t.element_type) not in ("f32", "f64") or any(
            True for r in list(norm.results)[1:] for _ in r.uses):
        return False
    channels = t.shape[1]
    statistics = _statistics(norm, channels)
    if statistics is None:
        return False
    scale, shift = statistics
    shape = [channels] + [1] * (t.rank - 2)
    args = named_operands(norm, edge_op_of(norm))
    named = _one(args["weight"]) or args["running_mean"][0]
    name = _param(named).removesuffix(".weight").removesuffix(".running_mean") if (
        attrs.PARAM in named.owner.attributes) else "batch_norm"
    s = _new_constant(scale.reshape(shape), t, shape, f"{name}.bn_scale", norm)
    b = _new_constant(shift.reshape(shape), t, shape, f"{name}.bn_shift", norm)
    one = _one_constant(norm)
    handle = {attrs.DEBUG_HANDLE: norm.attributes[attrs.DEBUG_HANDLE]} if attrs.DEBUG_HANDLE in norm.attributes else {}
    mul = ir.Operation.create("edge.mul_tensor", results=[t], operands=[x, s], attributes=dict(handle),
                              loc=norm.location, ip=ir.InsertionPoint(norm))
    add = ir.Operation.create("edge.add_tensor", results=[t], operands=[mul.result, b, one], attributes=dict(handle),
                              loc=norm.location, ip=ir.InsertionPoint(norm))
    norm.results[0].replace_all_uses_with(add.result)
    _erase_with_parameters(norm)
    return True


def _fold_one(norm: ir.Operation) -> bool:
    return _try_fold(norm) or _try_fold_matmul(norm) or _to_affine(norm)


def fold_batch_norms(module: ir.Operation) -> int:
    """Fold every batch norm that can be folded (into a convolution, a matrix product, or a multiply-add by
    constants); returns how many were."""
    return rewrite_each(module, BATCH_NORM, _fold_one)


@register_pass("et-fold-batch-norm", level="edge")
def fold_batch_norm(module: ir.Operation) -> None:
    """et-fold-batch-norm: fold inference batch norms into the convolutions or matrix products before them,
    else into a multiply-add by per-channel constants."""
    fold_batch_norms(module)
