"""et-cpu-microkernels: contractions -> calls of the payload's C microkernels (after bufferization).

A matrix product or a convolution is where a model spends its time, and a
register-blocked, cache-blocked microkernel (packing, AVX-512/AVX2 FMA
tiles; runtime/backends/cpu/payload_c/ukernels.c) is what makes it fast. At memref level each
of these linalg ops becomes a call of the kernel with the same semantics,
its operands cast to fully dynamic strided memrefs (any layout, any size):

    linalg.matmul ins(%a, %b : memref<64x384xf32>, memref<384x1152xf32>)
                  outs(%c : memref<64x1152xf32>)

becomes

    %0 = memref.cast %a : memref<64x384xf32> to memref<?x?xf32, strided<[?, ?], offset: ?>>
    ...
    func.call @etmlir_uk_matmul(%0, %1, %2) : (...) -> ()

The call passes each memref as its expanded descriptor (MLIR's default
convention); `payload_c/abi.c` rebuilds the descriptors and calls the
kernel (`_mlir_ciface_etmlir_uk_matmul(A*, B*, C*)`). Ops with a form a
kernel does not take (another element type, extra attributes) are left to
the generic lowering.

Around each call, what the kernel can do itself goes into it (the `_ep`
kernels; `etmlir.backends.cpu.epilogue` says what fits):
- the op initializing the output (a zero fill, a bias broadcast): the
  accumulators start there instead of in memory;
- the elementwise op after it, when it is a bias add, a residual add and/or
  a clamp (ReLU, ReLU6, hardtanh) or an activation (GELU, SiLU, sigmoid,
  tanh): applied before the store (an activation right after it, while the
  tile is in L1), writing the elementwise op's output directly, also where
  that op sees the product with leading unit dims ([T, N] as [1, T, N]) or
  a matmul's rows split ([H W, N] as [1, H, W, N]: a linear layer over an image);
- a depthwise convolution's zero padding (a filled buffer with a copy of the
  input inside): the kernel reads the unpadded input.

Max pooling (`linalg.pooling_nchw_max`) becomes `etmlir_uk_max_pool2d(%in, %out,
kh, kw, strides, dilations, pad_top, pad_left)`, its -inf padding likewise
taken over (the window's shape is all it reads of the window operand).

    linalg.fill ins(%zero) outs(%c)
    linalg.matmul ins(%a, %b) outs(%c)
    linalg.generic ins(%bias, %c) outs(%c) { addf, cmpf ugt + select (ReLU) }

becomes

    func.call @etmlir_uk_matmul_ep(%a, %b, %c, %bias, %c, %mode, %lo, %hi)   // mode 37: zero | bias | ReLU
"""

from __future__ import annotations

import math

from torch_mlir import ir

from etmlir.backends.cpu import epilogue
from etmlir.backends.cpu.ir_util import block_ops, declare_function, reassociation_attr
from etmlir.passes.registry import register_pass

# linalg op -> (kernel, operand ranks, names of i64 attribute pairs passed after the operands)
KERNELS: dict[str, tuple[str, tuple[int, ...], tuple[str, ...]]] = {
    "linalg.matmul": ("etmlir_uk_matmul", (2, 2, 2), ()),
    "linalg.batch_matmul": ("etmlir_uk_batch_matmul", (3, 3, 3), ()),
    "linalg.conv_2d_nchw_fchw": ("etmlir_uk_conv2d_nchw_fchw", (4, 4, 4), ("strides", "dilations")),
    "linalg.depthwise_conv_2d_nchw_chw": ("etmlir_uk_depthwise_conv2d_nchw_chw", (4, 3, 4), ("strides", "dilations")),
}
# Attributes every instance of these ops carries; any other one means a variant we do not map.
_PLAIN_ATTRIBUTES = {"operandSegmentSizes", "operand_segment_sizes", "strides", "dilations",
                     "linalg.memoized_indexing_maps", "indexing_maps"}
# linalg.matmul / batch_matmul may spell out their maps; only the plain (untransposed) ones map to a kernel.
_DEFAULT_MAPS = {
    "linalg.matmul": "[affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, "
                     "affine_map<(d0, d1, d2) -> (d0, d1)>]",
    "linalg.batch_matmul": "[affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>, "
                           "affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>]",
}


# Kernels that take their input's zero padding as arguments (the _ep variant's last two: top, left).
PADDED = ("linalg.depthwise_conv_2d_nchw_chw",)
POOLING = "linalg.pooling_nchw_max"
POOL_KERNEL = "etmlir_uk_max_pool2d"


def dynamic_memref(rank: int, element: str = "f32", shape: list[int] | None = None) -> ir.Type:
    """A memref with fully dynamic strides and offset: of `shape` (dynamic sizes where None is given)."""
    dynamic = ir.ShapedType.get_dynamic_size()
    dims = "x".join("?" if s == dynamic else str(s) for s in shape) if shape is not None else "x".join("?" * rank)
    strides = ", ".join("?" * rank)
    return ir.Type.parse(f"memref<{dims}x{element}, strided<[{strides}], offset: ?>>")


def _pair(attr: ir.Attribute) -> list[int]:
    return [int(v) for v in ir.DenseIntElementsAttr(attr)]


def _takes(op: ir.Operation, ranks: tuple[int, ...]) -> bool:
    if len(op.operands) != len(ranks) or any(name not in _PLAIN_ATTRIBUTES for name in op.attributes):
        return False
    if "indexing_maps" in op.attributes and str(op.attributes["indexing_maps"]) != _DEFAULT_MAPS.get(op.name):
        return False
    for value, rank in zip(op.operands, ranks):
        if not isinstance(value.type, ir.MemRefType):
            return False
        t = ir.MemRefType(value.type)
        if t.rank != rank or str(t.element_type) != "f32":
            return False
    return True


@register_pass("et-cpu-microkernels")
def microkernels(module: ir.Operation) -> None:
    """et-cpu-microkernels: replace every contraction a microkernel takes by a call of it."""
    use_microkernels(module)


def cast_dynamic(value: ir.Value, rank: int) -> ir.Value:
    """`value` cast to the fully dynamic strided memref the kernels take (at the current insertion point)."""
    element = str(ir.MemRefType(value.type).element_type)
    return ir.Operation.create("memref.cast", results=[dynamic_memref(rank, element)], operands=[value]).result


def constant(t: ir.Type, attr: ir.Attribute) -> ir.Value:
    return ir.Operation.create("arith.constant", results=[t], attributes={"value": attr}).result


def merge_leading(value: ir.Value, lead: int) -> ir.Value:
    """An identity-layout `value` with its first `lead + 1` dims merged into one (memref.collapse_shape):
    the product's rows again, where an epilogue saw them as [1, T] or [1, H, W]."""
    if lead == 0:
        return value
    t = ir.MemRefType(value.type)
    rank = len(t.shape)
    groups = [list(range(lead + 1))] + [[d] for d in range(lead + 1, rank)]
    shape = [math.prod(t.shape[:lead + 1])] + list(t.shape[lead + 1:])
    return ir.Operation.create("memref.collapse_shape", results=[ir.MemRefType.get(shape, t.element_type)],
                               operands=[value], attributes={"reassociation": reassociation_attr(groups)}).result


def no_bias() -> ir.Value:
    """A 1-element buffer for an _ep kernel's bias operand when its mode reads no bias (cast like the rest)."""
    f32 = ir.F32Type.get()
    return cast_dynamic(ir.Operation.create("memref.alloca", results=[ir.MemRefType.get([1], f32)], attributes={
        "operandSegmentSizes": ir.DenseI32ArrayAttr.get([0, 0])}).result, 1)


def erase_dead_buffer(buffer: ir.Value) -> None:
    """An allocation left with only views, casts and deallocs of it (and of them): all of them go."""
    owner = buffer.owner
    if isinstance(owner, ir.Block) or owner.name != "memref.alloc":
        return
    users: list[ir.Operation] = []
    stack = [buffer]
    while stack:
        for use in stack.pop().uses:
            user = use.owner
            if user.name not in ("memref.dealloc", *epilogue.VIEWS):
                return  # something still reads or writes it
            users.append(user)
            stack.extend(user.results)
    for user in reversed(users):  # a view's users were found after it
        user.erase()
    owner.erase()


def _move_uses_after(call: ir.Operation, old: ir.Value, new: ir.Value) -> None:
    """The ops after `call` use `new` where they used `old`; `old` is freed right after `call`."""
    ops = block_ops(call)
    for later in ops[ops.index(call) + 1:]:
        for i, value in enumerate(list(later.operands)):
            if value == old:
                later.operands[i] = new
    with call.location, ir.InsertionPoint.after(call):
        ir.Operation.create("memref.dealloc", operands=[old])


def use_microkernels(module: ir.Module | ir.Operation) -> dict[str, int]:
    """Replace every contraction a kernel takes by a call of it; returns calls per kernel.

    The op initializing its output and the elementwise op after it are fused into the call where
    `epilogue.match` says they can be (the `_ep` kernels)."""
    targets: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name in KERNELS and _takes(op, KERNELS[op.name][1]):
            targets.append(op)
        elif op.name == POOLING and _takes(op, (4, 2, 4)) and ir.MemRefType(op.operands[1].type).has_static_shape:
            targets.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    counts: dict[str, int] = {}
    declared: dict[str, list[ir.Type]] = {}
    with module.operation.context:
        i64, f32 = ir.IntegerType.get_signless(64), ir.F32Type.get()
        for op in targets:
            name = op.name
            ops = block_ops(op)
            at = ops.index(op.operation)
            if name == POOLING:
                declared[POOL_KERNEL] = _max_pool_call(op, ops, at)
                counts[POOL_KERNEL] = counts.get(POOL_KERNEL, 0) + 1
                continue
            kernel, ranks, pairs = KERNELS[name]
            fusion = epilogue.match(ops, at)
            padding = epilogue.match_padding(ops, at, fusion) if name in PADDED else None
            out_rank = ranks[-1]
            written = fusion.output if fusion.output is not None else op.operands[-1]
            old_output = epilogue.root(written) if padding is not None and padding.new_output else None
            for hoisted in fusion.hoist:
                hoisted.move_before(op)
            with op.location, ir.InsertionPoint(op):
                if old_output is not None:
                    written = ir.Operation.create("memref.alloc", results=[old_output.type], attributes={
                        "operandSegmentSizes": ir.DenseI32ArrayAttr.get([0, 0]),
                        "alignment": ir.IntegerAttr.get(i64, 64)}).result
                written = merge_leading(written, fusion.lead if fusion.output is not None else 0)
                inputs = list(op.operands)[:-1]
                if padding is not None:
                    inputs[0] = padding.source
                operands = [cast_dynamic(value, rank) for value, rank in zip(inputs, ranks[:-1])]
                output = cast_dynamic(written, out_rank)
                operands.append(output)
                for attr_name in pairs:
                    for v in _pair(op.attributes[attr_name]):
                        operands.append(constant(i64, ir.IntegerAttr.get(i64, v)))
                if fusion.fused or padding is not None:
                    kernel += "_ep"
                    operands.append(cast_dynamic(fusion.bias, 1) if fusion.bias is not None else no_bias())
                    operands.append(cast_dynamic(merge_leading(fusion.residual, fusion.lead), out_rank)
                                    if fusion.residual is not None else output)
                    operands.append(constant(i64, ir.IntegerAttr.get(i64, fusion.mode)))
                    operands.append(constant(f32, ir.FloatAttr.get(f32, fusion.lo)))
                    operands.append(constant(f32, ir.FloatAttr.get(f32, fusion.hi)))
                    if name in PADDED:
                        for pad in (padding.top, padding.left) if padding is not None else (0, 0):
                            operands.append(constant(i64, ir.IntegerAttr.get(i64, pad)))
                call = ir.Operation.create("func.call", operands=operands,
                                           attributes={"callee": ir.FlatSymbolRefAttr.get(kernel)})
                declared[kernel] = [o.type for o in operands]
            if old_output is not None:
                _move_uses_after(call, old_output, written)
            for fused in fusion.erase:
                fused.erase()
            op.erase()
            if fusion.dead_buffer is not None and (padding is None or fusion.dead_buffer != epilogue.root(padding.source)):
                erase_dead_buffer(fusion.dead_buffer)
            if padding is not None:
                for fused in padding.erase:
                    fused.erase()
                erase_dead_buffer(padding.buffer)
            counts[kernel] = counts.get(kernel, 0) + 1
        for kernel, types in declared.items():
            declare_function(module, kernel, types)
    return counts


def _max_pool_call(op: ir.Operation, ops: list[ir.Operation], at: int) -> list[ir.Type]:
    """linalg.pooling_nchw_max ins(%in, %window) outs(%out) -> etmlir_uk_max_pool2d(%in, %out, kh, kw,
    strides, dilations, pad_top, pad_left), reading the unpadded input when %in is a -inf padded copy
    (not when the output took over the input's buffer: the kernel reads while it writes). The window
    buffer goes (only its shape mattered). Returns the call's operand types."""
    i64 = ir.IntegerType.get_signless(64)
    padding = epilogue.match_padding(ops, at, epilogue.Fusion(), value=float("-inf"))
    if padding is not None and padding.new_output:
        padding = None
    window = op.operands[1]
    with op.location, ir.InsertionPoint(op):
        operands = [cast_dynamic(padding.source if padding is not None else op.operands[0], 4),
                    cast_dynamic(op.operands[2], 4)]
        scalars = list(ir.MemRefType(window.type).shape) + _pair(op.attributes["strides"]) + \
            _pair(op.attributes["dilations"]) + ([padding.top, padding.left] if padding is not None else [0, 0])
        operands += [constant(i64, ir.IntegerAttr.get(i64, v)) for v in scalars]
        ir.Operation.create("func.call", operands=operands, attributes={"callee": ir.FlatSymbolRefAttr.get(POOL_KERNEL)})
    op.erase()
    erase_dead_buffer(window)
    if padding is not None:
        for fused in padding.erase:
            fused.erase()
        erase_dead_buffer(padding.buffer)
    return [o.type for o in operands]
