"""et-cpu-fuse-inverted-residual: expand, depthwise, project as one kernel call (after et-cpu-pack-weights).

An inverted-residual block (MobileNetV2, EfficientNet's MBConv without its
squeeze-excitation) widens its channels with a 1x1 convolution, runs a
depthwise convolution over the wide tensor and narrows it again with another
1x1 convolution. The wide tensors are the block's largest: MobileNetV2's first
ones are 1.8 to 4.8 MB, so between the three calls each goes to memory and
comes back (one core's L2 holds 1-2 MB). `etmlir_uk_inverted_residual_ep`
(payload_c/ukernels.c) runs the three over bands of output rows instead, each
band's wide rows in cache, and the two wide buffers are never allocated
(MobileNetV2, 1 thread: its 112x112 block 0.98 -> 0.71 ms, a 56x56 one 0.72 ->
0.58).

    call @etmlir_uk_conv2d_packed_ep(%x, %p1, %e, 1, 1, 1, 1, 1, 1, %b1, %e, %mode1, %lo1, %hi1)   // 1x1
    call @etmlir_uk_depthwise_conv2d_nchw_chw_ep(%e, %f, %d, %s, %s, 1, 1, %b2, %d, %mode2, %lo2, %hi2, %pt, %pl)
    memref.dealloc %e_alloc
    call @etmlir_uk_conv2d_packed_ep(%d, %p2, %y, 1, 1, 1, 1, 1, 1, %b3, %x, %mode3, %lo3, %hi3)   // 1x1
    memref.dealloc %d_alloc

becomes

    call @etmlir_uk_inverted_residual_ep(%x, %p1, %b1, %mode1, %lo1, %hi1, %f, %s, %s, %b2, %mode2, %lo2, %hi2,
                                         %pt, %pl, %p2, %y, %b3, %x, %mode3, %lo3, %hi3)

The chain qualifies when both 1x1 convolutions have unit strides and
dilations, the depthwise one is undilated with equal strides, the two wide
buffers are allocations whose contents only the chain reads (the
bufferization may put an earlier or a later tensor there; the first later
user must write the buffer whole), their epilogues set them whole (an init of
zero or the bias, no residual), and the projection does not write the block's
own input (a band's output rows would overwrite input rows the next band
reads). Between the first call and the last only bookkeeping ops (casts,
constants, allocations, deallocs, globals) may stand, since the fused call
runs where the last one was. The kernel decides at run time how to split it:
below 1 MiB of wide activations it runs the three kernels one after the
other, as before.
"""

from __future__ import annotations

from torch_mlir import ir

from etmlir.backends.cpu import epilogue
from etmlir.backends.cpu.ir_util import block_ops, constant_int, declare_function, uncast
from etmlir.backends.cpu.passes.microkernels import dynamic_memref, erase_dead_buffer
from etmlir.passes.registry import register_pass

PACKED = "etmlir_uk_conv2d_packed_ep"
DEPTHWISE = "etmlir_uk_depthwise_conv2d_nchw_chw_ep"
KERNEL = "etmlir_uk_inverted_residual_ep"
# Ops that may stand between the first and the last call: none touches tensor data.
_BOOKKEEPING = ("memref.cast", "memref.alloc", "memref.alloca", "memref.dealloc", "memref.get_global",
                "arith.constant")


def _callee(op: ir.Operation) -> str | None:
    return ir.FlatSymbolRefAttr(op.attributes["callee"]).value if op.name == "func.call" else None


def _sets_whole(mode: ir.Value) -> bool:
    """An epilogue mode that writes its output without reading it (and adds no residual)."""
    m = constant_int(mode)
    return m is not None and not m & epilogue.RESIDUAL and (m & epilogue.INIT_MASK) != epilogue.INIT_OUTPUT


def _pointwise(call: ir.Operation) -> bool:
    """A packed convolution call with a 1x1 window, unit strides and dilations."""
    return _callee(call) == PACKED and all(constant_int(call.operands[i]) == 1 for i in range(3, 9))


# Kernels that can write a buffer whole after the chain (bufferization reuses a dead wide buffer for a later
# tensor of its shape): output operand 2, the epilogue mode at this operand.
_MODE_OPERAND = {PACKED: 11, DEPTHWISE: 9, "etmlir_uk_conv2d_nchw_fchw_ep": 9, "etmlir_uk_conv2d_winograd_ep": 5,
                 "etmlir_uk_matmul_ep": 5, "etmlir_uk_matmul_packed_ep": 5, "etmlir_uk_batch_matmul_ep": 5}


def _users(buffer: ir.Value) -> list[ir.Operation]:
    """The ops that use `buffer` or a cast of it (not the casts themselves)."""
    found: list[ir.Operation] = []
    stack = [buffer]
    while stack:
        for use in stack.pop().uses:
            if use.owner.name == "memref.cast":
                stack.append(use.owner.result)
            elif not any(use.owner == op for op in found):
                found.append(use.owner)
    return found


def _writes_whole(op: ir.Operation, buffer: ir.Value) -> bool:
    """`op` is a kernel call writing `buffer` without reading it: its output (operand 2) under an init that
    ignores the old value, and no other operand but the unread residual (just before the mode) is it."""
    mode = _MODE_OPERAND.get(_callee(op) or "")
    return (mode is not None and uncast(op.operands[2]) == buffer and _sets_whole(op.operands[mode])
            and all(uncast(v) != buffer for i, v in enumerate(op.operands) if i not in (2, mode - 1)))


def _chain_buffer(value: ir.Value, chain: tuple[ir.Operation, ...], ops: list[ir.Operation]) -> ir.Value | None:
    """The allocation `value` is a cast of, when only `chain`'s calls read what the chain writes there. The
    bufferization reuses a dead buffer for a later tensor of its shape, so other users may come before the
    chain (an earlier tensor: the chain writes the buffer whole before it reads it) or after it, the first of
    those writing it whole (a later tensor)."""
    buffer = uncast(value)
    if isinstance(buffer.owner, ir.Block) or buffer.owner.name != "memref.alloc":
        return None
    span = [i for i, op in enumerate(ops) if any(op == c for c in chain)]
    later = []
    for user in _users(buffer):
        if user.name == "memref.dealloc" or any(user == c for c in chain):
            continue
        index = next((i for i, op in enumerate(ops) if op == user), None)
        if index is None or span[0] <= index <= span[-1]:
            return None
        if index > span[-1]:
            later.append((index, user))
    if later and not _writes_whole(min(later, key=lambda pair: pair[0])[1], buffer):
        return None
    return buffer


def _chain(first: ir.Operation, ops: list[ir.Operation]) -> tuple[ir.Operation, ...] | None:
    """(expand, depthwise, project) starting at `first`, when the three can become one call."""
    if not _pointwise(first) or not _sets_whole(first.operands[11]):
        return None
    start = ops.index(first)
    depthwise = project = None
    for op in ops[start + 1:]:
        name = _callee(op)
        if depthwise is None and name == DEPTHWISE:
            depthwise = op
        elif depthwise is not None and name == PACKED:
            project = op
            break
        elif op.name not in _BOOKKEEPING:
            return None
    if depthwise is None or project is None:
        return None
    stride_h, stride_w, dilation_h, dilation_w = (constant_int(depthwise.operands[i]) for i in range(3, 7))
    if (uncast(depthwise.operands[0]) != uncast(first.operands[2]) or not _sets_whole(depthwise.operands[9])
            or stride_h is None or stride_h != stride_w or (dilation_h, dilation_w) != (1, 1)):
        return None
    if not _pointwise(project) or uncast(project.operands[0]) != uncast(depthwise.operands[2]):
        return None
    chain = (first, depthwise, project)
    wide = _chain_buffer(first.operands[2], chain, ops)
    narrow = _chain_buffer(depthwise.operands[2], chain, ops)
    if wide is None or narrow is None or wide == narrow:
        return None
    # The projection's own operands (output, residual) must be other buffers, and its output not the block's
    # input: the fused call writes a band's output rows while later bands still read input rows above them.
    if any(uncast(project.operands[i]) in (wide, narrow) for i in (2, 10)):
        return None
    if epilogue.root(project.operands[2]) == epilogue.root(first.operands[0]):
        return None
    return chain


def _fuse(first: ir.Operation, depthwise: ir.Operation, project: ir.Operation) -> None:
    e, d = first.operands, depthwise.operands
    p = project.operands
    operands = [e[0], e[1], e[9], e[11], e[12], e[13],  # input, expansion panels, its bias, mode, bounds
                d[1], d[3], d[4], d[7], d[9], d[10], d[11], d[12], d[13],  # filter, strides, epilogue, pads
                p[1], p[2], p[9], p[10], p[11], p[12], p[13]]  # projection panels, output, epilogue
    wide, narrow = uncast(e[2]), uncast(d[2])
    location = ir.Location.fused([first.location, depthwise.location, project.location])
    with location, ir.InsertionPoint(project):
        ir.Operation.create("func.call", operands=operands,
                            attributes={"callee": ir.FlatSymbolRefAttr.get(KERNEL)})
    for call in (project, depthwise, first):
        call.erase()
    erase_dead_buffer(wide)  # unless the bufferization put another tensor there too
    erase_dead_buffer(narrow)


def kernel_types() -> list[ir.Type]:
    """The fused kernel's operand types (payload_c/abi.c: etmlir_uk_inverted_residual_ep)."""
    i64, f32 = ir.IntegerType.get_signless(64), ir.F32Type.get()
    return [dynamic_memref(4), dynamic_memref(3), dynamic_memref(1), i64, f32, f32,
            dynamic_memref(3), i64, i64, dynamic_memref(1), i64, f32, f32, i64, i64,
            dynamic_memref(3), dynamic_memref(4), dynamic_memref(1), dynamic_memref(4), i64, f32, f32]


@register_pass("et-cpu-fuse-inverted-residual")
def fuse_inverted_residual(module: ir.Operation) -> None:
    """et-cpu-fuse-inverted-residual: 1x1 -> depthwise -> 1x1 convolution calls as one banded kernel call."""
    firsts: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if _callee(op) == PACKED:
            firsts.append(op)
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    chains: list[tuple[ir.Operation, ...]] = []
    for first in firsts:  # all found before any changes; a call takes part in one chain at most
        chain = _chain(first, block_ops(first))
        if chain is not None and not any(op in taken for taken in chains for op in chain):
            chains.append(chain)
    with module.context:
        for chain in chains:
            _fuse(*chain)
        if chains:
            declare_function(module, KERNEL, kernel_types())
