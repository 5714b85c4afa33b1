"""et-cpu-split-groups: a grouped convolution as one dense convolution per group (before et-cpu-fuse-elementwise).

torch-mlir lowers a convolution with 1 < groups < channels (RegNet's, ResNeXt's) to
`linalg.conv_2d_ngchw_gfchw` over views that split the channels into groups. No microkernel takes that
op, so it ran as generated scalar loops: a layer like RegNet's first grouped one (256 channels in 4 groups
at 56x56, batch norm and ReLU) took 459 ms against eager's 10 (6.7 ms now). Each group is a dense
convolution over its slice of the channels, which et-cpu-microkernels gives to the GEMM kernels:

    %xe = tensor.expand_shape %x [[0], [1, 2], [3], [4]] : tensor<1x32x10x10xf32> into tensor<1x4x8x10x10xf32>
    %we = tensor.expand_shape %w [[0, 1], [2], [3], [4]] : tensor<32x8x3x3xf32> into tensor<4x8x8x3x3xf32>
    %oe = tensor.expand_shape %o [[0], [1, 2], [3], [4]] : tensor<1x32x8x8xf32> into tensor<1x4x8x8x8xf32>
    %c = linalg.conv_2d_ngchw_gfchw ins(%xe, %we) outs(%oe)
    %y = tensor.collapse_shape %c [[0], [1, 2], [3], [4]] : tensor<1x4x8x8x8xf32> into tensor<1x32x8x8xf32>

becomes, for each group g (here 4 of 8 channels):

    %xg = tensor.extract_slice %x[0, 8 g, 0, 0] [1, 8, 10, 10] [1, 1, 1, 1]
    %wg = tensor.extract_slice %w[8 g, 0, 0, 0] [8, 8, 3, 3] [1, 1, 1, 1]
    %og = tensor.extract_slice %r[0, 8 g, 0, 0] [1, 8, 8, 8] [1, 1, 1, 1]       // %r: %o, then each insert
    %cg = linalg.conv_2d_nchw_fchw ins(%xg, %wg) outs(%og)
    %r' = tensor.insert_slice %cg into %r[0, 8 g, 0, 0] [1, 8, 8, 8] [1, 1, 1, 1]

Bufferization turns the slices into views, so each group's convolution reads and writes its channels in
place. An operand in any other form (a filter or zero init folded to a constant in the split shape, a
1-d convolution's input with its unit height) is collapsed to its 4-d shape first, and the result is
split back into groups for the op's users (canonicalization folds the pair). Only static shapes are
rewritten.
"""

from __future__ import annotations

import math

from torch_mlir import ir
from torch_mlir.dialects import linalg

from etmlir.backends.cpu.ir_util import reassociation, reassociation_attr
from etmlir.passes.rewrite import rewrite_each
from etmlir.passes.registry import register_pass

GROUPED = "linalg.conv_2d_ngchw_gfchw"


def _unexpanded(value: ir.Value, groups: list[list[int]]) -> ir.Value:
    """The 4-d tensor the 5-d `value` splits with these reassociation groups: the source of the
    `tensor.expand_shape` that made it, or else (a constant folded in the split shape) a collapse of it."""
    owner = value.owner
    if not isinstance(owner, ir.Block) and owner.name == "tensor.expand_shape" and reassociation(owner) == groups:
        return owner.operands[0]
    t = ir.RankedTensorType(value.type)
    shape = [math.prod(t.shape[d] for d in group) for group in groups]
    return ir.Operation.create("tensor.collapse_shape", results=[ir.RankedTensorType.get(shape, t.element_type)],
                               operands=[value], attributes={"reassociation": reassociation_attr(groups)}).result


def _slice(name: str, result: ir.Type, operands: list[ir.Value], offsets: list[int], sizes: list[int]) -> ir.Value:
    attributes = {"static_offsets": ir.DenseI64ArrayAttr.get(offsets),
                  "static_sizes": ir.DenseI64ArrayAttr.get(sizes),
                  "static_strides": ir.DenseI64ArrayAttr.get([1] * len(sizes)),
                  # the source (and the destination), then no dynamic offsets, sizes or strides
                  "operandSegmentSizes": ir.DenseI32ArrayAttr.get([1] * len(operands) + [0, 0, 0])}
    return ir.Operation.create(name, results=[result], operands=operands, attributes=attributes).result


def split_groups(op: ir.Operation) -> bool:
    """Rewrite one grouped convolution as per-group dense ones; returns whether it did."""
    channels = [[0], [1, 2], [3], [4]]
    if not all(ir.RankedTensorType(v.type).has_static_shape for v in op.operands):
        return False
    strides, dilations = (list(ir.DenseIntElementsAttr(op.attributes[name])) for name in ("strides", "dilations"))
    with op.location, ir.InsertionPoint(op):
        x = _unexpanded(op.operands[0], channels)
        w = _unexpanded(op.operands[1], [[0, 1], [2], [3], [4]])
        o = _unexpanded(op.operands[2], channels)
        types = [ir.RankedTensorType(v.type) for v in (x, w, o, op.operands[0])]
        (n, _, h, wd), (_, c, kh, kw), (_, _, oh, ow), (_, g, _, _, _) = (list(t.shape) for t in types)
        f = types[1].shape[0] // g
        element = types[0].element_type
        result = o
        for i in range(g):
            xg = _slice("tensor.extract_slice", ir.RankedTensorType.get([n, c, h, wd], element), [x],
                        [0, i * c, 0, 0], [n, c, h, wd])
            wg = _slice("tensor.extract_slice", ir.RankedTensorType.get([f, c, kh, kw], element), [w],
                        [i * f, 0, 0, 0], [f, c, kh, kw])
            og_type = ir.RankedTensorType.get([n, f, oh, ow], element)
            og = _slice("tensor.extract_slice", og_type, [result], [0, i * f, 0, 0], [n, f, oh, ow])
            conv = linalg.conv_2d_nchw_fchw(xg, wg, outs=[og], strides=strides, dilations=dilations)
            result = _slice("tensor.insert_slice", result.type, [conv, result], [0, i * f, 0, 0], [n, f, oh, ow])
        split = ir.Operation.create(  # the groups split again for the op's users (canonicalization folds it)
            "tensor.expand_shape", results=[op.results[0].type], operands=[result],
            attributes={"reassociation": reassociation_attr(channels),
                        "static_output_shape": ir.DenseI64ArrayAttr.get([n, g, f, oh, ow])})
    op.results[0].replace_all_uses_with(split.result)
    op.erase()
    return True


@register_pass("et-cpu-split-groups")
def split_grouped_convolutions(module: ir.Operation) -> None:
    """et-cpu-split-groups: each grouped convolution as one dense convolution per group."""
    with module.context:
        rewrite_each(module, GROUPED, split_groups)
