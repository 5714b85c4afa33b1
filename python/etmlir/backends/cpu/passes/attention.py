"""et-cpu-attention: scaled dot-product attention -> one call of the payload's fused attention kernel.

A model whose `aten.scaled_dot_product_attention` was kept whole (`to_edge` with
`EdgeCompileConfig(keep=partitioner.ops_to_keep())`) reaches linalg as torch-mlir's
`tm_tensor.attention` over [batch x heads, rows, depth] views. Decomposed, it
would be two batch matmuls around a softmax, the [L, S] scores and a causal
mask written to memory and read back four times; `etmlir_uk_attention`
(runtime/backends/cpu/payload_c/attention.c) keeps each block of scores in
the task's scratch instead. At tensor level the op becomes the call on the
operands' buffers (`bufferization.to_buffer`), its result a fresh buffer
(`bufferization.to_tensor ... restrict`), which et-cpu-bufferize then writes
straight into the consumer's (et-cpu-shapes-function, which runs first, has already
replaced the op in its copy of @forward by the result's sizes: `sizes_only`):

    %m = linalg.generic outs(%fill : tensor<1x6x?x?xf32>) { index 2 >= index 3 ? 0 : -inf }
    %mc = tensor.collapse_shape %m [[0, 1], [2], [3]] : ... into tensor<6x?x?xf32>
    %o = tm_tensor.attention ins(%q, %k, %v, %mc : ...) outs(%init : tensor<6x?x64xf32>)

becomes (the causal mask recognized and never built)

    %qb = bufferization.to_buffer %q read_only : tensor<6x?x64xf32> to memref<6x?x64xf32, strided<...>>
    ...
    %out = memref.alloc(%rows) : memref<6x?x64xf32>
    func.call @etmlir_uk_attention(%qb', %kb', %vb', %out', %causal, %scale)   // causal = 1, scale = 1/sqrt(64)
    %o = bufferization.to_tensor %out restrict writable : memref<6x?x64xf32> to tensor<6x?x64xf32>

Any other mask is passed as it is: f32 (added to the scores, `_mask`) or
boolean (`_bmask`, false masks out). The scale is torch-mlir's, 1/sqrt(depth);
et-torch-to-linalg folds an explicit `scale=` into the query first.
"""

from __future__ import annotations

import math

from torch_mlir import ir

from etmlir.backends.cpu.ir_util import declare_function, tensor_dim
from etmlir.backends.cpu.passes.microkernels import cast_dynamic, dynamic_memref
from etmlir.passes.registry import register_pass
from etmlir.passes.rewrite import rewrite_each

ATTENTION = "tm_tensor.attention"
KERNELS = {None: "etmlir_uk_attention", "f32": "etmlir_uk_attention_mask", "i1": "etmlir_uk_attention_bmask"}


def _causal_mask(value: ir.Value) -> ir.Operation | None:
    """The op building `value` when it is PyTorch's causal mask (0 where row >= column, else -inf)
    seen through a collapse_shape: a linalg.generic with no inputs comparing its last two indices."""
    owner = value.owner
    if isinstance(owner, ir.Block) or owner.name != "tensor.collapse_shape":
        return None
    generic = owner.operands[0].owner
    if isinstance(generic, ir.Block) or generic.name != "linalg.generic" or len(generic.operands) != 1:
        return None
    body = [op.operation for op in generic.regions[0].blocks[0].operations]
    rank = ir.RankedTensorType(generic.results[0].type).rank
    if [op.name for op in body] != ["linalg.index", "linalg.index", "arith.cmpi", "arith.select", "linalg.yield"]:
        return None
    row, col, cmp, select = body[0], body[1], body[2], body[3]
    if [ir.IntegerAttr(row.attributes["dim"]).value, ir.IntegerAttr(col.attributes["dim"]).value] != [rank - 2, rank - 1]:
        return None
    if ir.IntegerAttr(cmp.attributes["predicate"]).value != 5 or list(cmp.operands) != [row.result, col.result]:
        return None  # 5: sge
    if select.operands[0] != cmp.result or body[4].operands[0] != select.result:
        return None
    values = []
    for v in select.operands[1:]:
        if isinstance(v.owner, ir.Block) or v.owner.name != "arith.constant":
            return None
        values.append(ir.FloatAttr(v.owner.attributes["value"]).value)
    return owner if values == [0.0, -math.inf] else None


def _erase_if_dead(op: ir.Operation) -> None:
    """`op` and, in turn, the ops only it used (the causal mask's collapse, generic, fill, empty)."""
    stack = [op]
    while stack:
        op = stack.pop()
        if any(True for r in op.results for _ in r.uses):
            continue  # still used (a feeder shared with a live op): pushed again if that one goes
        feeders = [v.owner for v in op.operands if not isinstance(v.owner, ir.Block)]
        op.erase()
        for feeder in feeders:
            if feeder.name in ("linalg.generic", "linalg.fill", "tensor.empty", "tensor.collapse_shape",
                               "arith.constant") and feeder not in stack:
                stack.append(feeder)


def _result_sizes(op: ir.Operation) -> list[ir.Value]:
    """The dynamic sizes of the op's result [batch, rows, value depth], read from the query and value
    (at the current insertion point)."""
    result_type = ir.RankedTensorType(op.results[0].type)
    return [tensor_dim(source, d) for source, d in ((op.operands[0], 0), (op.operands[0], 1), (op.operands[2], 2))
            if result_type.is_dynamic_dim(d)]


def _as_buffer(value: ir.Value) -> ir.Value:
    """The tensor's buffer, read only, as the fully dynamic strided memref the kernel takes."""
    t = ir.RankedTensorType(value.type)
    buffer_type = dynamic_memref(t.rank, str(t.element_type), list(t.shape))
    buffer = ir.Operation.create("bufferization.to_buffer", results=[buffer_type], operands=[value],
                                 attributes={"read_only": ir.UnitAttr.get()}).result
    return cast_dynamic(buffer, t.rank)


def sizes_only(op: ir.Operation) -> bool:
    """For et-cpu-shapes-function's copy of @forward, which computes only the output sizes (and
    resolves them through ops that say how their result sizes follow from their operands', which
    tm_tensor.attention does not): the op becomes a tensor.empty of its result's sizes."""
    with ir.InsertionPoint(op):
        empty = ir.Operation.create("tensor.empty", results=[op.results[0].type], operands=_result_sizes(op)).result
    op.results[0].replace_all_uses_with(empty)
    op.erase()
    return True


def _rewrite(op: ir.Operation, declared: dict[str, list[ir.Type]]) -> bool:
    """Replace one tm_tensor.attention by the kernel call (its operand types into `declared`); False
    when it is not a form the kernel takes (left alone: et-cpu-bufferize then reports it)."""
    operands = list(op.operands)
    if len(operands) not in (4, 5):
        return None
    q, k, v = operands[:3]
    mask = operands[3] if len(operands) == 5 else None
    types = [ir.RankedTensorType(x.type) for x in (q, k, v)]
    if any(t.rank != 3 or str(t.element_type) != "f32" for t in types) or types[0].is_dynamic_dim(2):
        return None
    causal_op = _causal_mask(mask) if mask is not None else None
    mask_type = str(ir.RankedTensorType(mask.type).element_type) if mask is not None and causal_op is None else None
    if mask_type not in KERNELS:
        return False
    f32, i64 = ir.F32Type.get(), ir.IntegerType.get_signless(64)
    result_type = ir.RankedTensorType(op.results[0].type)
    with ir.InsertionPoint(op):
        args = [_as_buffer(x) for x in (q, k, v)]
        if mask_type is not None:
            args.append(_as_buffer(mask))
        sizes = _result_sizes(op)
        out = ir.Operation.create("memref.alloc", results=[ir.MemRefType.get(result_type.shape, f32)], operands=sizes,
                                  attributes={"operandSegmentSizes": ir.DenseI32ArrayAttr.get([len(sizes), 0]),
                                              "alignment": ir.IntegerAttr.get(i64, 64)}).result
        args.append(cast_dynamic(out, 3))
        args.append(ir.Operation.create("arith.constant", results=[i64], attributes={
            "value": ir.IntegerAttr.get(i64, 1 if causal_op is not None else 0)}).result)
        scale = 1.0 / math.sqrt(types[0].shape[2])
        args.append(ir.Operation.create("arith.constant", results=[f32], attributes={
            "value": ir.FloatAttr.get(f32, scale)}).result)
        kernel = KERNELS[mask_type]
        ir.Operation.create("func.call", operands=args, attributes={"callee": ir.FlatSymbolRefAttr.get(kernel)})
        declared[kernel] = [a.type for a in args]
        result = ir.Operation.create("bufferization.to_tensor", results=[result_type], operands=[out], attributes={
            "restrict": ir.UnitAttr.get(), "writable": ir.UnitAttr.get()}).result
    op.results[0].replace_all_uses_with(result)
    init = [x.owner for x in op.operands[len(operands) - 1:] if not isinstance(x.owner, ir.Block)]
    op.erase()
    for dead in ([causal_op] if causal_op is not None else []) + init:
        _erase_if_dead(dead)
    return True


@register_pass("et-cpu-attention")
def attention(module: ir.Operation) -> None:
    """et-cpu-attention: every tm_tensor.attention -> a call of the fused attention kernel."""
    declared: dict[str, list[ir.Type]] = {}
    with module.context:
        rewrite_each(module, ATTENTION, lambda op: _rewrite(op, declared))
        for kernel, types in declared.items():
            declare_function(module, kernel, types)
