"""et-torch-to-linalg: torch-mlir's `torch` dialect (value tensors) -> linalg on tensors.

torch-mlir's own backend pipelines do the lowering
(`torchdynamo-export-to-torch-backend-pipeline`, then
`torch-backend-to-linalg-on-tensors-backend-pipeline`). A few Core ATen ops
have no linalg lowering there, and GELU's tanh form has a wrong one (0.797724
for sqrt(2/pi) = 0.7978846); PyTorch's reference decompositions (Python
code, not the eager kernels) rewrite them first. An average pooling whose one
window covers the whole plane (EfficientNet's pooler: a 1280 window over 7x7)
becomes a mean, since torch-mlir pads the input to the window's size.
torch-mlir's pipeline keeps only public functions, so visibility and argument
attributes are dropped.

    func.func @forward(%x: !torch.vtensor<[2,3],f32>) -> !torch.vtensor<[2,3],f32> {
      %0 = torch.aten.relu %x : !torch.vtensor<[2,3],f32> -> !torch.vtensor<[2,3],f32>

becomes

    func.func @forward(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
      %0 = linalg.generic {...} ins(%x : tensor<2x3xf32>) outs(%e : tensor<2x3xf32>) {
        ^bb0(%in: f32, %out: f32): ... arith.maximumf ...

With `attention=1` (the `cpu` backend) a kept `scaled_dot_product_attention`
becomes `tm_tensor.attention` whatever its form, an explicit scale folded into
the query (torch-mlir lowers only the default one to that op).

The `cpu` backend runs it after `et-edge-to-torch`; the reference runner
(`etmlir.devtools.reference_runner`) runs it on ATen-level modules.
"""

from __future__ import annotations

import math

from torch_mlir import ir
from torch_mlir.passmanager import PassManager

from etmlir.frontend.aten_ops import (
    UndecodableOperand, decode_arguments, lookup_overload, op_overload_name, parse_vtensor_type)
from etmlir.lazy import lazy_module
from etmlir.passes.decompose_to_core_aten import decompose_ops
from etmlir.passes.registry import Option, PassFailure, emit_error, register_pass
from etmlir.passes.rewrite import rewrite_each

torch = lazy_module("torch")

# Core ATen ops torch-mlir's linalg lowering rejects; PyTorch's decomposition registry
# (the Python reference implementations, not the eager kernels) rewrites them first.
UNLOWERABLE = ("aten._native_batch_norm_legit_no_training.default", "aten.upsample_bilinear2d.vec",
               "aten._unsafe_index.Tensor", "aten._native_batch_norm_legit.default")

TORCH_TO_LINALG = (
    "builtin.module(func.func(torch-match-quantized-custom-ops),"
    "torchdynamo-export-to-torch-backend-pipeline{OPTIONS},"
    "torch-backend-to-linalg-on-tensors-backend-pipeline)"
)
# With `attention=1`, attention (kept whole for a backend) goes to `tm_tensor.attention` in every form:
# otherwise torch-mlir decomposes the unmasked, non-causal one into matmuls and a softmax.
ATTENTION = "torch.aten.scaled_dot_product_attention"
ATTENTION_OPTIONS = "{backend-legal-ops=aten.scaled_dot_product_attention}"


def _gelu_tanh(op: ir.Operation) -> bool:
    """aten.gelu(x, approximate="tanh"): torch-mlir's lowering multiplies by 0.797724 where sqrt(2/pi) is
    0.7978846 (up to 2e-4 off eager); PyTorch's reference decomposition has the right constants."""
    if op_overload_name(op) != "aten.gelu.default" or len(op.operands) < 2:
        return False
    owner = op.operands[1].owner
    return (not isinstance(owner, ir.Block) and owner.name == "torch.constant.str"
            and ir.StringAttr(owner.attributes["value"]).value == "tanh")


def decompose_unlowerable(module: ir.Operation) -> None:
    """Rewrite the UNLOWERABLE ops, and GELU's tanh form, with PyTorch's reference decompositions
    (raises PassFailure)."""
    overloads = [lookup_overload(name) for name in UNLOWERABLE + ("aten.gelu.default",)]
    table = {op: torch._decomp.decomposition_table[op] for op in overloads}
    decompose_ops(module, lambda op: op_overload_name(op) in UNLOWERABLE or _gelu_tanh(op), table,
                  goal="ops torch-mlir can lower")


def fold_attention_scale(op: ir.Operation) -> bool:
    """scaled_dot_product_attention(q, ..., scale=s) -> scaled_dot_product_attention(q * (s * sqrt(D)), ...,
    scale=None): torch-mlir lowers only the default scale, 1/sqrt(D), to `tm_tensor.attention` (an explicit
    one it decomposes into matmuls and a softmax), and a backend runs that op as one kernel. Returns
    whether it folded one (not when the scale is already the default, or the depth D is not static)."""
    scale = op.operands[6].owner if len(op.operands) >= 7 else None
    if scale is None or isinstance(scale, ir.Block) or scale.name != "torch.constant.float":
        return False
    query = op.operands[0]
    query_type = parse_vtensor_type(query.type)
    if query_type is None or not query_type.sizes or query_type.sizes[-1] is None:
        return False  # the depth is not static: left to torch-mlir's decomposition
    factor = ir.FloatAttr(scale.attributes["value"]).value * math.sqrt(query_type.sizes[-1])
    with ir.InsertionPoint(op):
        constant = ir.Operation.create("torch.constant.float", results=[ir.Type.parse("!torch.float")],
                                       attributes={"value": ir.FloatAttr.get(ir.F64Type.get(), factor)}).result
        scaled_query = ir.Operation.create("torch.aten.mul.Scalar", results=[query.type],
                                           operands=[query, constant]).result
        none = ir.Operation.create("torch.constant.none", results=[ir.Type.parse("!torch.none")]).result
    op.operands[0] = scaled_query
    op.operands[6] = none
    return True


AVG_POOL = "torch.aten.avg_pool2d"


def whole_plane_avg_pool(op: ir.Operation) -> bool:
    """avg_pool2d whose one window covers the whole unpadded plane -> mean over H and W (kept as 1x1).

    EfficientNet's pooler (transformers) is AvgPool2d(1280, ceil_mode=True) over a 7x7 plane: one output,
    its window cut where the input ends, so eager divides by 7 x 7. torch-mlir pads the input to the
    window's reach, 1280 x 1280 per channel (8 GB): the compile ran out of memory (a crash). Rewritten
    only with no padding and no divisor override, where the mean is exactly what eager computes. Returns
    whether it rewrote `op`."""
    try:
        args = {a.name: v for a, v in decode_arguments(op, lookup_overload("aten.avg_pool2d.default"))}
    except UndecodableOperand:
        return False
    source, result = args["self"].tensor, parse_vtensor_type(op.results[0].type)
    if result is None or len(source.sizes or []) != 4 or len(result.sizes or []) != 4:
        return False
    height, width = source.sizes[2:]
    kernel = list(args["kernel_size"]) * (2 if len(args["kernel_size"]) == 1 else 1)
    if (height is None or width is None or not all(isinstance(k, int) for k in kernel)
            or list(result.sizes[2:]) != [1, 1] or any(args["padding"]) or args["divisor_override"] is not None
            or kernel[0] < height or kernel[1] < width):
        return False
    int_type = ir.Type.parse("!torch.int")
    with ir.InsertionPoint(op):
        dims = [ir.Operation.create("torch.constant.int", results=[int_type], attributes={
            "value": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), d)}).result for d in (2, 3)]
        dim_list = ir.Operation.create("torch.prim.ListConstruct", results=[ir.Type.parse("!torch.list<int>")],
                                       operands=dims).result
        keep = ir.Operation.create("torch.constant.bool", results=[ir.Type.parse("!torch.bool")],
                                   attributes={"value": ir.BoolAttr.get(True)}).result
        none = ir.Operation.create("torch.constant.none", results=[ir.Type.parse("!torch.none")]).result
        mean = ir.Operation.create("torch.aten.mean.dim", results=[op.results[0].type],
                                   operands=[op.operands[0], dim_list, keep, none])
    op.results[0].replace_all_uses_with(mean.results[0])
    op.erase()
    return True


@register_pass("et-torch-to-linalg", level="torch", options={
    "attention": Option(bool, False, "lower scaled_dot_product_attention, in every form, to tm_tensor.attention "
                        "(for a backend that runs it as one kernel: the cpu backend's et-cpu-attention)"),
})
def torch_to_linalg(module: ir.Operation, *, attention: bool = False) -> None:
    """et-torch-to-linalg: lower torch-dialect functions to linalg on tensors (torch-mlir's pipelines)."""
    for op in module.regions[0].blocks[0].operations:
        op = op.operation
        if op.name == "func.func":
            for name in ("sym_visibility", "arg_attrs"):
                if name in op.attributes:
                    del op.attributes[name]
    decompose_unlowerable(module)
    with module.context:
        rewrite_each(module, AVG_POOL, whole_plane_avg_pool)
    options = ""
    if attention:
        found: list[ir.Operation] = []

        def fold(op: ir.Operation) -> bool:
            found.append(op)
            return fold_attention_scale(op)

        with module.context:
            rewrite_each(module, ATTENTION, fold)
        options = ATTENTION_OPTIONS if found else ""
    try:
        PassManager.parse(TORCH_TO_LINALG.replace("{OPTIONS}", options), context=module.context).run(module)
    except ir.MLIRError as error:
        emit_error(module, f"et-torch-to-linalg: torch-mlir cannot lower the module: {error}")
        raise PassFailure() from None
