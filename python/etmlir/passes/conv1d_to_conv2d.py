"""et-conv1d-to-conv2d: a 1-d convolution becomes a 2-d one over a height-1 image.

Audio and sequence models (Whisper's encoder stem, wav2vec2's feature
extractor, Conv1d-based blocks) convolve along one axis. A backend whose
kernels are 2-d (the cpu backend's implicit-GEMM and depthwise microkernels)
runs them by inserting a unit height: the input N x C x L becomes N x C x 1 x L,
the weight F x C/g x K becomes F x C/g x 1 x K, stride/padding/dilation get a
leading 1/0/1, and the result's unit dim is squeezed away. The arithmetic is
the same, term for term.

    %y = "edge.convolution"(%x, %w, %b) {stride = array<i64: 2>, padding = array<i64: 1>, ...}
        : (tensor<1x80x300xf32>, tensor<64x80x3xf32>, tensor<64xf32>) -> tensor<1x64x150xf32>

becomes

    %x4 = "edge.unsqueeze_copy"(%x) {dim = 2 : i64} : (tensor<1x80x300xf32>) -> tensor<1x80x1x300xf32>
    %w4 = "edge.unsqueeze_copy"(%w) {dim = 2 : i64} : (tensor<64x80x3xf32>) -> tensor<64x80x1x3xf32>
    %y4 = "edge.convolution"(%x4, %w4, %b) {stride = array<i64: 1, 2>, padding = array<i64: 0, 1>, ...}
        : (...) -> tensor<1x64x1x150xf32>
    %y = "edge.squeeze_copy_dim"(%y4) {dim = 2 : i64} : (tensor<1x64x1x150xf32>) -> tensor<1x64x150xf32>

Run it before et-fold-constants, which folds the weight's unsqueeze into a
constant. Transposed convolutions and ones with sizes known only at run time
(`sym_values`) are left alone; every op keeps the convolution's location.
"""

from __future__ import annotations

from torch_mlir import ir

from etmlir.dialects.edge import edge_op_of, named_operands
from etmlir.passes.registry import register_pass
from etmlir.passes.rewrite import rewrite_each

CONVOLUTION = "edge.convolution"


def _i64(value: int) -> ir.IntegerAttr:
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), value)


def _with_unit_dim(t: ir.RankedTensorType) -> ir.RankedTensorType:
    shape = list(t.shape)
    return ir.RankedTensorType.get(shape[:2] + [1] + shape[2:], t.element_type)


def _unsqueeze(value: ir.Value, at: ir.Operation) -> ir.Value:
    return ir.Operation.create("edge.unsqueeze_copy", results=[_with_unit_dim(ir.RankedTensorType(value.type))],
                               operands=[value], attributes={"dim": _i64(2)}, loc=at.location,
                               ip=ir.InsertionPoint(at)).result


def _try_rewrite(conv: ir.Operation) -> bool:
    operands = named_operands(conv, edge_op_of(conv))
    x, w = operands["input"][0], operands["weight"][0]
    if operands.get("sym_values") or ir.BoolAttr(conv.attributes["transposed"]).value:
        return False
    x_type, w_type, y_type = (ir.RankedTensorType(v.type) for v in (x, w, conv.results[0]))
    if x_type.rank != 3 or w_type.rank != 3 or not (x_type.has_static_shape and y_type.has_static_shape):
        return False
    attributes = {name: conv.attributes[name] for name in conv.attributes}
    for name, lead in (("stride", 1), ("padding", 0), ("dilation", 1), ("output_padding", 0)):
        values = list(ir.DenseI64ArrayAttr(attributes[name]))
        if len(values) != 1:
            return False
        attributes[name] = ir.DenseI64ArrayAttr.get([lead] + values)
    bias = list(operands["bias"])
    y4 = ir.Operation.create(CONVOLUTION, results=[_with_unit_dim(y_type)],
                             operands=[_unsqueeze(x, conv), _unsqueeze(w, conv)] + bias,
                             attributes=attributes, loc=conv.location, ip=ir.InsertionPoint(conv)).result
    y = ir.Operation.create("edge.squeeze_copy_dim", results=[y_type], operands=[y4], attributes={"dim": _i64(2)},
                            loc=conv.location, ip=ir.InsertionPoint(conv)).result
    conv.results[0].replace_all_uses_with(y)
    conv.erase()
    return True


def convert_conv1d(module: ir.Operation) -> int:
    """Rewrite every 1-d convolution that can be; returns how many were."""
    return rewrite_each(module, CONVOLUTION, _try_rewrite)


@register_pass("et-conv1d-to-conv2d", level="edge")
def conv1d_to_conv2d(module: ir.Operation) -> None:
    """et-conv1d-to-conv2d: 1-d convolutions as 2-d ones over a height-1 image."""
    convert_conv1d(module)
