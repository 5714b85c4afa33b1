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
    conv_info, norm_info = edge_op_of(conv), edge_op_of(norm)
    conv_args, norm_args = named_operands(conv.operation, conv_info), named_operands(norm, norm_info)
    if conv_args.get("sym_values") or ir.BoolAttr(conv.attributes["transposed"]).value:
        return False
    out_type = ir.RankedTensorType(source.type)
    weight_type = ir.RankedTensorType(conv_args["weight"][0].type)
    if not out_type.has_static_shape or str(weight_type.element_type) not in ("f32", "f64"):
        return False
    weight = _constant(conv_args["weight"][0])
    bias_value, gamma_value, beta_value = _one(conv_args["bias"]), _one(norm_args["weight"]), _one(norm_args["bias"])
    mean, var = _constant(norm_args["running_mean"][0]), _constant(norm_args["running_var"][0])
    bias, gamma, beta = map(_constant, (bias_value, gamma_value, beta_value))
    if weight is None or mean is None or var is None or any(
            v is not None and c is None for v, c in ((bias_value, bias), (gamma_value, gamma), (beta_value, beta))):
        return False
    channels = weight.shape[0]
    if any(a is not None and a.shape != (channels,) for a in (bias, gamma, beta, mean, var)):
        return False
    eps = ir.FloatAttr(norm.attributes["eps"]).value
    scale = (gamma if gamma is not None else 1.0) / np.sqrt(var + eps)
    new_weight = weight * scale.reshape((channels,) + (1,) * (weight.ndim - 1))
    new_bias = ((bias if bias is not None else 0.0) - mean) * scale + (beta if beta is not None else 0.0)

    name = _param(conv_args["weight"][0])
    w = _new_constant(new_weight, weight_type, list(weight_type.shape), f"{name}.bn_folded", conv)
    b = _new_constant(np.broadcast_to(new_bias, (channels,)), weight_type, [channels], f"{name}.bn_folded_bias", conv)
    attributes = {name: conv.attributes[name] for name in conv.attributes}
    attributes["operandSegmentSizes"] = ir.DenseI32ArrayAttr.get([1, 1, 1, 0])
    location = ir.Location.fused([conv.location, norm.location])
    handle = debug_handle(norm)
    if handle is not None:
        location = with_debug_handle(location, handle)
    folded = ir.Operation.create(CONVOLUTION, results=[out_type], operands=[conv_args["input"][0], w, b],
                                 attributes=attributes, loc=location, ip=ir.InsertionPoint(norm))
    norm.results[0].replace_all_uses_with(folded.result)
    dead = [conv_args["weight"][0], bias_value, gamma_value, beta_value, norm_args["running_mean"][0],
            norm_args["running_var"][0]]
    norm.erase()
    conv.operation.erase()
    for value in dict.fromkeys(v for v in dead if v is not None):
        if not any(True for _ in value.uses):
            value.owner.erase()
    return True


def fold_batch_norms(module: ir.Operation) -> int:
    """Fold every batch norm that can be folded into its convolution; returns how many were."""
    return rewrite_each(module, BATCH_NORM, _try_fold)


@register_pass("et-fold-batch-norm", level="edge")
def fold_batch_norm(module: ir.Operation) -> None:
    """et-fold-batch-norm: fold inference batch norms into the convolutions before them."""
    fold_batch_norms(module)
