"""et-vulkan-outline-kernels: every linalg op of the bufferized `@forward` becomes a GPU kernel of its own.

After et-vulkan-bufferize, `@forward` is a list of buffers (arguments, allocations,
weights as `memref.get_global`, views of those) and of linalg ops between them.
Each linalg op (and each `memref.copy`) moves into a `gpu.func` of its own, in a
`gpu.module` named after it, and is replaced by a `gpu.launch_func` of that kernel
with the op's buffers as arguments. The constants the op reads are cloned into the
kernel. What stays on the host is what the runtime's dispatch graph expresses:
buffers, views and launches. Any other host op is an error naming it.

The launch's grid and block sizes are placeholders (1 and 1) until
et-vulkan-tile-matmul or et-vulkan-map-threads decides how the kernel's
iterations are spread over workgroups and threads.

    func.func @forward(%x: memref<4x8xf32>, %out: memref<4x8xf32>) {
      linalg.generic {...} ins(%x : memref<4x8xf32>) outs(%out : memref<4x8xf32>) { math.exp ... }
      return
    }
becomes
    func.func @forward(%x: memref<4x8xf32>, %out: memref<4x8xf32>) {
      gpu.launch_func @k0::@k0 blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1)
          args(%x : memref<4x8xf32>, %out : memref<4x8xf32>)
      return
    }
    gpu.module @k0 {
      gpu.func @k0(%a0: memref<4x8xf32>, %a1: memref<4x8xf32>) kernel {
        linalg.generic {...} ins(%a0 : memref<4x8xf32>) outs(%a1 : memref<4x8xf32>) { math.exp ... }
        gpu.return
      }
    }
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import gpu

from etmlir.backends.cpu.ir_util import ENTRY
from etmlir.passes.registry import PassFailure, emit_error, register_pass
from etmlir.program import find_function

# Host ops the dispatch graph expresses without a kernel.
VIEW_OPS = ("memref.expand_shape", "memref.collapse_shape", "memref.subview", "memref.cast", "memref.reshape")
HOST_OPS = VIEW_OPS + ("memref.alloc", "memref.dealloc", "memref.get_global", "arith.constant", "func.return")
# The attribute a kernel's gpu.module keeps with the debug handle of the op it computes.
DEBUG_HANDLE = "etmlir.debug_handle"


def index_constant(value: int) -> ir.Value:
    index = ir.IndexType.get()
    return ir.Operation.create("arith.constant", results=[index],
                               attributes={"value": ir.IntegerAttr.get(index, value)}).results[0]


def kernels(module: ir.Operation) -> list[tuple[ir.Operation, ir.Operation]]:
    """(gpu.module, its gpu.func kernel) pairs, in module order."""
    found = []
    for op in module.regions[0].blocks[0].operations:
        op = op.operation
        if op.name == "gpu.module":
            for inner in op.regions[0].blocks[0].operations:
                if inner.operation.name == "gpu.func":
                    found.append((op, inner.operation))
    return found


def launches(module: ir.Operation) -> dict[str, ir.Operation]:
    """Kernel name -> the gpu.launch_func in @forward that runs it."""
    forward = find_function(module, ENTRY)
    found = {}
    if forward is not None:
        for op in forward.regions[0].blocks[0].operations:
            if op.operation.name == "gpu.launch_func":
                found[ir.SymbolRefAttr(op.operation.attributes["kernel"]).value[0]] = op.operation
    return found


def set_launch_sizes(launch: ir.Operation, grid: tuple[int, int, int], block: tuple[int, int, int]) -> None:
    """Point a launch's grid and block operands (the first six) at new index constants."""
    with launch.location, ir.InsertionPoint(launch):
        for i, size in enumerate(grid + block):
            launch.operands[i] = index_constant(size)


def _inside(value: ir.Value, kernel: ir.Operation) -> bool:
    owner = value.owner
    op = owner.owner if isinstance(owner, ir.Block) else owner.operation
    while op is not None:
        if op == kernel:
            return True
        op = op.parent
    return False


def _clone_captured_constants(clone: ir.Operation, kernel: ir.Operation) -> None:
    """Values the cloned op reads from the host are constants: clone them into the kernel's entry block."""
    entry = kernel.regions[0].blocks[0]
    first = list(entry.operations)[0].operation
    cloned: dict[str, ir.Value] = {}
    problems: list[str] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        for i, value in enumerate(op.operands):
            if _inside(value, kernel):
                continue
            owner = value.owner
            if isinstance(owner, ir.Block) or owner.name != "arith.constant":
                problems.append(str(value.type))
                continue
            key = str(owner)
            if key not in cloned:
                cloned[key] = owner.operation.clone(ir.InsertionPoint(first)).results[0]
            op.operands[i] = cloned[key]
        return ir.WalkResult.ADVANCE

    clone.walk(visit)
    if problems:
        emit_error(clone, f"et-vulkan-outline-kernels: '{clone.name}' reads a host value that is not a constant "
                          f"({', '.join(problems)}); a kernel takes buffers and constants only")
        raise PassFailure()


def _captured_buffers(op: ir.Operation) -> list[ir.Value]:
    """Buffers the op's body reads from the host (a gather's table: `memref.load %table[...]` in a generic)."""
    found: list[ir.Value] = []

    def visit(inner: ir.Operation) -> ir.WalkResult:
        if inner != op:
            for value in inner.operands:
                if isinstance(value.type, ir.MemRefType) and not _inside(value, op) and value not in found:
                    found.append(value)
        return ir.WalkResult.ADVANCE

    op.walk(visit)
    return found


def _rebind_captured(clone: ir.Operation, buffers: list[ir.Value], entry: ir.Block) -> None:
    """Point the clone's reads of host buffers at the kernel arguments that carry them."""
    def visit(inner: ir.Operation) -> ir.WalkResult:
        if inner != clone:
            for i, value in enumerate(inner.operands):
                if isinstance(value.type, ir.MemRefType) and value in buffers:
                    inner.operands[i] = entry.arguments[buffers.index(value)]
        return ir.WalkResult.ADVANCE

    clone.walk(visit)


def outline(module: ir.Operation, op: ir.Operation, name: str) -> None:
    """Move `op` into kernel `name` and launch it in its place."""
    buffers: list[ir.Value] = []
    for value in op.operands:
        if isinstance(value.type, ir.MemRefType) and value not in buffers:
            buffers.append(value)
    captured = _captured_buffers(op)
    for value in captured:
        if value not in buffers:
            buffers.append(value)
    signature = ", ".join(f"%a{i}: {value.type}" for i, value in enumerate(buffers))
    # A copy becomes the linalg.copy the kernel mappers know; anything else is cloned below.
    body = (f"linalg.copy ins(%a0 : {buffers[0].type}) outs(%a1 : {buffers[1].type})\n"
            if op.name == "memref.copy" and len(buffers) == 2 else "")
    text = f"gpu.module @{name} {{ gpu.func @{name}({signature}) kernel {{ {body}gpu.return }} }}"
    parsed = ir.Module.parse(text)  # kept alive until its op has moved
    kernel_module = list(parsed.body.operations)[0].operation
    module.regions[0].blocks[0].append(kernel_module)
    kernel = list(kernel_module.regions[0].blocks[0].operations)[0].operation
    entry = kernel.regions[0].blocks[0]
    if not body:
        clone = op.clone(ir.InsertionPoint(list(entry.operations)[-1].operation))
        for i, value in enumerate(op.operands):
            if isinstance(value.type, ir.MemRefType):
                clone.operands[i] = entry.arguments[buffers.index(value)]
        if captured:
            _rebind_captured(clone, buffers, entry)
        _clone_captured_constants(clone, kernel)
    handle = _debug_handle(op.location)
    if handle:
        kernel_module.attributes[DEBUG_HANDLE] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), handle)
    with op.location, ir.InsertionPoint(op):
        one = index_constant(1)
        gpu.LaunchFuncOp([name, name], (one, one, one), (one, one, one), kernel_operands=buffers)
    op.erase()


def _debug_handle(location: ir.Location) -> int:
    """The etmlir.debug_handle a fused location carries (0: none)."""
    text = str(location)
    marker = f"{DEBUG_HANDLE} = "
    at = text.find(marker)
    if at < 0:
        return 0
    digits = text[at + len(marker):].split(" ")[0].rstrip(":,}")
    return int(digits) if digits.isdigit() else 0


@register_pass("et-vulkan-outline-kernels")
def outline_kernels(module: ir.Operation) -> None:
    """et-vulkan-outline-kernels: each linalg op (and memref.copy) of @forward becomes a gpu kernel launch."""
    forward = find_function(module, ENTRY)
    if forward is None:
        emit_error(module, f"et-vulkan-outline-kernels: the module has no func.func @{ENTRY}")
        raise PassFailure()
    module.attributes["gpu.container_module"] = ir.UnitAttr.get()
    host = forward.regions[0].blocks[0]
    numbered = len(kernels(module))
    for op in list(host.operations):
        op = op.operation
        if op.name == "memref.copy" and op.operands[0] == op.operands[1]:
            op.erase()
        elif op.name.startswith("linalg.") or op.name == "memref.copy":
            outline(module, op, f"k{numbered}")
            numbered += 1
        elif op.name not in HOST_OPS and op.name != "gpu.launch_func":
            emit_error(op, f"et-vulkan-outline-kernels: '{op.name}' cannot run on the host of a vulkan delegate "
                           f"(the dispatch graph holds buffers, views ({', '.join(VIEW_OPS)}) and kernel launches)")
            raise PassFailure()
