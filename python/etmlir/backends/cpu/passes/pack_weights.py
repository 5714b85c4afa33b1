"""et-cpu-pack-weights: constant matmul weights are packed at compile time into the microkernel's panels.

The GEMM microkernel reads B as panels of W columns (W = 32 for the AVX-512
build, 16 otherwise), K rows each. A B it is handed in memory it first copies
into that layout, on every call; for a linear layer B is a constant, so the
copy is the same every time, and with the weights streaming from L3 it took a
fifth of a small decoder's time (LLaMA, T = 64, one thread). This pass does
the copy once, at compile time (as XNNPACK packs at init): a matmul call whose
B is a constant global gets a new global holding B's panels and calls the
kernel that reads them.

    memref.global "private" constant @w : memref<256x80xf32> = dense<...>
    %0 = memref.get_global @w : memref<256x80xf32>
    %1 = memref.cast %0 : memref<256x80xf32> to memref<?x?xf32, strided<[?, ?], offset: ?>>
    func.call @etmlir_uk_matmul_ep(%a, %1, %c, %bias, %c, %mode, %lo, %hi)

becomes (panel-width=32)

    memref.global "private" constant @w_panels : memref<3x256x32xf32> = dense<...> {alignment = 64}
    %0 = memref.get_global @w_panels : memref<3x256x32xf32>
    %1 = memref.cast %0 : memref<3x256x32xf32> to memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>
    func.call @etmlir_uk_matmul_packed_ep(%a, %1, %c, %bias, %c, %mode, %lo, %hi)

Panel p holds columns [p * W, p * W + W) of B row by row, zeros past N. The
old global goes when nothing else reads it, so the payload carries the
weight once. A B whose padding would add more than a quarter to it (N = 10
classifiers at W = 32) stays as it was, as does a splat. The width must be
the one the payload's microkernels were built for: the cpu pipeline asks
them (`link.panel_width`); 0, the default, asks the host's.
"""

from __future__ import annotations

import numpy as np
from torch_mlir import ir

from etmlir.backends.cpu.ir_util import declare_function
from etmlir.backends.cpu.passes.externalize_weights import global_bytes
from etmlir.backends.cpu.passes.microkernels import dynamic_memref
from etmlir.executable.serialize import resource_blobs, resource_key
from etmlir.passes.registry import Option, register_pass

PACKED_KERNEL = "etmlir_uk_matmul_packed_ep"
# kernel -> whether it already takes the epilogue operands (bias, residual, mode, lo, hi)
SOURCES = {"etmlir_uk_matmul": False, "etmlir_uk_matmul_ep": True}


@register_pass("et-cpu-pack-weights", options={
    "panel-width": Option(int, 0, "columns per panel: the payload's microkernels' width (0: the host's)",
                          minimum=0)})
def pack_weights(module: ir.Operation, *, panel_width: int = 0) -> None:
    """et-cpu-pack-weights: matmuls by a constant B read it from panels packed at compile time."""
    if panel_width == 0:
        from etmlir.backends.cpu import link, target

        panel_width = link.panel_width(target.host())
    calls: list[tuple[ir.Operation, ir.Operation]] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "func.call" and ir.FlatSymbolRefAttr(op.attributes["callee"]).value in SOURCES:
            source = _constant_source(op.operands[1])
            if source is not None:
                calls.append((op, source))
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    if not calls:
        return
    body = module.regions[0].blocks[0]
    globals_ = {ir.StringAttr(op.attributes["sym_name"]).value: op.operation for op in body.operations
                if op.operation.name == "memref.global"}
    blobs: dict[str, bytes] | None = None
    packed: dict[str, ir.Operation | None] = {}  # old global -> its panels' global (None: left as it is)
    with module.context:
        for call, get_global in calls:
            name = ir.FlatSymbolRefAttr(get_global.attributes["name"]).value
            if name not in packed:
                old = globals_.get(name)
                value = old.attributes["initial_value"] if old is not None and "constant" in old.attributes \
                    and "initial_value" in old.attributes else None
                if value is not None and resource_key(value) is not None and blobs is None:
                    blobs = resource_blobs(module)
                data = global_bytes(value, blobs) if value is not None else None
                panels = _panels(data, ir.MemRefType(get_global.result.type), panel_width)
                packed[name] = None if panels is None else _new_global(old, f"{name}_panels", panels)
            if packed[name] is not None:
                _call_packed(call, packed[name])
        if any(p is not None for p in packed.values()):
            declare_function(module, PACKED_KERNEL, _kernel_types())
            _erase_unread(module, [globals_[n] for n, p in packed.items() if p is not None])


def _constant_source(value: ir.Value) -> ir.Operation | None:
    """The memref.get_global `value` is (through casts), if B is a whole 2-d f32 global."""
    while not isinstance(value.owner, ir.Block) and value.owner.operation.name == "memref.cast":
        value = value.owner.operands[0]
    if isinstance(value.owner, ir.Block) or value.owner.operation.name != "memref.get_global":
        return None
    owner = value.owner.operation
    t = ir.MemRefType(owner.result.type)
    if t.rank != 2 or str(t.element_type) != "f32" or not t.has_static_shape or \
            str(t.layout) != str(ir.AffineMapAttr.get(ir.AffineMap.get_identity(2))):
        return None
    return owner


def _panels(data: bytes | None, t: ir.MemRefType, width: int) -> np.ndarray | None:
    """B [K, N] (the global's bytes) as panels, or None when its bytes are unknown or packing costs too much."""
    k, n = t.shape
    if data is None or not worth_packing(k, n, width):
        return None
    return pack_panels(np.frombuffer(data, dtype=np.float32).reshape(k, n), width)


def worth_packing(k: int, n: int, width: int) -> bool:
    """Whether B [K, N] is packed: not empty, and its padding to whole panels adds at most a quarter."""
    return k > 0 and n > 0 and -(-n // width) * width - n <= n // 4


def pack_panels(b: np.ndarray, width: int) -> np.ndarray:
    """B [K, N] as [ceil(N / width), K, width]: panel p holds columns [p * width, p * width + width) row by
    row, zeros past N (the layout `etmlir_uk_matmul_packed_ep` reads)."""
    k, n = b.shape
    count = -(-n // width)
    padded = np.zeros((k, count * width), dtype=np.float32)
    padded[:, :n] = b
    return np.ascontiguousarray(padded.reshape(k, count, width).transpose(1, 0, 2))


def _new_global(old: ir.Operation, name: str, panels: np.ndarray) -> ir.Operation:
    with old.location, ir.InsertionPoint(old):
        t = ir.MemRefType.get(list(panels.shape), ir.F32Type.get())
        value = ir.DenseElementsAttr.get(panels, type=ir.RankedTensorType.get(list(panels.shape), ir.F32Type.get()))
        return ir.Operation.create("memref.global", attributes={
            "sym_name": ir.StringAttr.get(name), "sym_visibility": ir.StringAttr.get("private"),
            "type": ir.TypeAttr.get(t), "initial_value": value, "constant": ir.UnitAttr.get(),
            "alignment": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 64)})


def _kernel_types() -> list[ir.Type]:
    i64, f32 = ir.IntegerType.get_signless(64), ir.F32Type.get()
    return [dynamic_memref(2), dynamic_memref(3), dynamic_memref(2), dynamic_memref(1), dynamic_memref(2),
            i64, f32, f32]


def _call_packed(call: ir.Operation, panels: ir.Operation) -> None:
    """Replace `call` by the packed kernel's, reading B from `panels`."""
    i64, f32 = ir.IntegerType.get_signless(64), ir.F32Type.get()
    t = ir.TypeAttr(panels.attributes["type"]).value
    old_b = call.operands[1]
    with call.location, ir.InsertionPoint(call):
        b = ir.Operation.create("memref.get_global", results=[t], attributes={
            "name": ir.FlatSymbolRefAttr.get(ir.StringAttr(panels.attributes["sym_name"]).value)}).result
        b = ir.Operation.create("memref.cast", results=[dynamic_memref(3)], operands=[b]).result
        operands = list(call.operands)
        operands[1] = b
        if not SOURCES[ir.FlatSymbolRefAttr(call.attributes["callee"]).value]:
            bias = ir.Operation.create("memref.alloca", results=[ir.MemRefType.get([1], f32)], attributes={
                "operandSegmentSizes": ir.DenseI32ArrayAttr.get([0, 0])}).result
            operands.append(ir.Operation.create("memref.cast", results=[dynamic_memref(1)], operands=[bias]).result)
            operands.append(operands[2])  # no residual: any memref of the output's rank
            for t_, attr in ((i64, ir.IntegerAttr.get(i64, 0)), (f32, ir.FloatAttr.get(f32, 0.0)),
                             (f32, ir.FloatAttr.get(f32, 0.0))):
                operands.append(ir.Operation.create("arith.constant", results=[t_], attributes={"value": attr}).result)
        ir.Operation.create("func.call", operands=operands, attributes={
            "callee": ir.FlatSymbolRefAttr.get(PACKED_KERNEL)})
    call.erase()
    while not isinstance(old_b.owner, ir.Block) and not list(old_b.uses):
        owner = old_b.owner.operation
        source = owner.operands[0] if owner.name == "memref.cast" else None
        owner.erase()
        if source is None:
            break
        old_b = source


def _erase_unread(module: ir.Operation, candidates: list[ir.Operation]) -> None:
    """Erase the globals in `candidates` no memref.get_global reads any more."""
    read: set[str] = set()

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "memref.get_global":
            read.add(ir.FlatSymbolRefAttr(op.attributes["name"]).value)
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    for op in candidates:
        if ir.StringAttr(op.attributes["sym_name"]).value not in read:
            op.erase()
