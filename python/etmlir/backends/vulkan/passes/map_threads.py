"""et-vulkan-map-threads: a kernel's linalg op -> loops, its parallel iterations spread one per GPU thread.

Each kernel that et-vulkan-tile-matmul left alone still holds one linalg op.
`convert-linalg-to-parallel-loops` turns it into an `scf.parallel` over the
op's parallel dimensions (reductions become `scf.for` loops inside it). That
loop nest is then flattened over the whole dispatch: thread `g` of the grid
(workgroups of `WORKGROUP_SIZE` threads along x, as many workgroups along x as
Vulkan guarantees, the rest along y) computes iteration `g`, its indices taken
back out of `g` by division and remainder, and threads past the last iteration
do nothing. The kernel gets its `spirv.entry_point_abi` and its launch the grid.

    gpu.func @k0(%a0: memref<4x8xf32>, %a1: memref<4x8xf32>) kernel {
      linalg.generic ... ins(%a0) outs(%a1) { math.exp }
becomes
    gpu.func @k0(...) kernel attributes {spirv.entry_point_abi = #spirv.entry_point_abi<workgroup_size = [64, 1, 1]>} {
      %g = (block_id.y * grid_dim.x + block_id.x) * 64 + thread_id.x
      scf.if %g < 32 {
        %i = %g / 8, %j = %g % 8
        memref.load %a0[%i, %j] ... math.exp ... memref.store ... %a1[%i, %j]
      }
    gpu.launch_func @k0::@k0 blocks in (%c1, %c1, %c1) threads in (%c64, %c1, %c1) ...
"""

from __future__ import annotations

import math
import re

from torch_mlir import ir
from torch_mlir.dialects import scf

from etmlir.backends.cpu.ir_util import run
from etmlir.backends.vulkan.passes.outline_kernels import index_constant, kernels, launches, set_launch_sizes
from etmlir.passes.registry import PassFailure, emit_error, register_pass

WORKGROUP_SIZE = 64
# Vulkan guarantees maxComputeWorkGroupCount >= 65535 in each dimension.
MAX_GROUPS = 65535
ENTRY_POINT_ABI = "spirv.entry_point_abi"


def grid_for(threads: int) -> tuple[int, int, int]:
    """Workgroups (x, y, 1) that cover `threads` threads in groups of WORKGROUP_SIZE."""
    groups = max(1, math.ceil(threads / WORKGROUP_SIZE))
    x = min(groups, MAX_GROUPS)
    return (x, math.ceil(groups / x), 1)


def set_entry_point(kernel: ir.Operation, workgroup: tuple[int, int, int]) -> None:
    kernel.attributes[ENTRY_POINT_ABI] = ir.Attribute.parse(
        f"#spirv.entry_point_abi<workgroup_size = [{workgroup[0]}, {workgroup[1]}, {workgroup[2]}]>")


def _binary(name: str, a: ir.Value, b: ir.Value) -> ir.Value:
    return ir.Operation.create(name, results=[a.type], operands=[a, b]).results[0]


def _gpu_index(name: str, dimension: str) -> ir.Value:
    return ir.Operation.create(name, results=[ir.IndexType.get()],
                               attributes={"dimension": ir.Attribute.parse(f"#gpu<dim {dimension}>")}).results[0]


def _constant_value(value: ir.Value) -> int | None:
    owner = value.owner
    if isinstance(owner, ir.Block) or owner.name != "arith.constant":
        return None
    return ir.IntegerAttr(owner.attributes["value"]).value


def _rename_dims(map_text: str, position: list[int]) -> str:
    """`affine_map<(d0, d1, d2) -> (d1, d2)>` with result dim i renamed to position[i] (the dim list kept)."""
    head, results = map_text.split("->", 1)
    results = re.sub(r"\bd(\d+)\b", lambda m: f"e{position[int(m.group(1))]}", results)
    return head + "->" + results.replace("e", "d")


def parallel_dims_first(generic: ir.Operation) -> None:
    """Reorder a linalg.generic's loops so that its parallel dims come before its reductions.

    convert-linalg-to-parallel-loops only makes the leading parallel dims an scf.parallel; a
    reduction in front of them (softmax over dim 1 of NCHW) would leave every iteration to one
    thread. Reordering loops is a permutation of the indexing maps' dims (and of linalg.index)."""
    iterators = [str(a) for a in ir.ArrayAttr(generic.attributes["iterator_types"])]
    parallel = [i for i, it in enumerate(iterators) if "parallel" in it]
    order = parallel + [i for i, it in enumerate(iterators) if "parallel" not in it]
    if order == list(range(len(iterators))):
        return
    position = [order.index(i) for i in range(len(order))]
    maps = [str(m) for m in ir.ArrayAttr(generic.attributes["indexing_maps"])]
    generic.attributes["indexing_maps"] = ir.ArrayAttr.get([ir.Attribute.parse(_rename_dims(m, position)) for m in maps])
    generic.attributes["iterator_types"] = ir.ArrayAttr.get([ir.Attribute.parse(iterators[i]) for i in order])

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "linalg.index":
            dim = ir.IntegerAttr(op.attributes["dim"]).value
            op.attributes["dim"] = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), position[dim])
        return ir.WalkResult.ADVANCE

    for op in generic.regions[0].blocks[0].operations:
        op.operation.walk(visit)


def _thread_guard(before: ir.Operation, threads: int) -> tuple[ir.Value, ir.Operation]:
    """Before `before`: the thread's flat id over the dispatch, (block_id.y * grid_dim.x + block_id.x) *
    WORKGROUP_SIZE + thread_id.x, and an `scf.if id < threads`; (the id, the yield ending the if's body)."""
    with before.location, ir.InsertionPoint(before):
        flat = _binary("arith.muli", _binary("arith.addi", _binary(
            "arith.muli", _gpu_index("gpu.block_id", "y"), _gpu_index("gpu.grid_dim", "x")),
            _gpu_index("gpu.block_id", "x")), index_constant(WORKGROUP_SIZE))
        flat = _binary("arith.addi", flat, _gpu_index("gpu.thread_id", "x"))
        in_range = ir.Operation.create(
            "arith.cmpi", results=[ir.IntegerType.get_signless(1)], operands=[flat, index_constant(threads)],
            attributes={"predicate": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 6)}).results[0]  # ult
        guard = scf.IfOp(in_range)
    with before.location, ir.InsertionPoint(guard.then_block):
        end = scf.YieldOp([])
    return flat, end.operation


def _guard_single_thread(kernel: ir.Operation) -> None:
    """A kernel with no parallel loop runs its body on thread 0 of workgroup 0 only."""
    entry = kernel.regions[0].blocks[0]
    ops = [op.operation for op in entry.operations]
    body = [op for op in ops[:-1] if op.name != "arith.constant"]
    if not body:
        return
    _, end = _thread_guard(body[0], 1)
    for op in body:
        op.move_before(end)


def flatten_parallel(kernel: ir.Operation) -> int:
    """Replace the kernel's outermost scf.parallel by one thread per iteration; the number of iterations."""
    entry = kernel.regions[0].blocks[0]
    loops = [op.operation for op in entry.operations if op.operation.name == "scf.parallel"]
    if not loops:
        _guard_single_thread(kernel)  # a single iteration (every dimension was 1, or the op was 0-d)
        return 1
    if len(loops) > 1:
        emit_error(kernel, "et-vulkan-map-threads: a kernel with more than one parallel loop nest")
        raise PassFailure()
    loop = loops[0]
    rank = len(loop.regions[0].blocks[0].arguments)
    bounds = [_constant_value(v) for v in list(loop.operands)[:3 * rank]]
    if any(b is None for b in bounds):
        emit_error(loop, "et-vulkan-map-threads: the loop bounds are not constants (the vulkan backend compiles "
                         "static shapes)")
        raise PassFailure()
    lower, upper, step = bounds[:rank], bounds[rank:2 * rank], bounds[2 * rank:]
    counts = [max(0, -(-(u - lo) // s)) for lo, u, s in zip(lower, upper, step)]
    total = math.prod(counts)
    flat, end = _thread_guard(loop, total)
    with loop.location, ir.InsertionPoint(end):
        indices: list[ir.Value] = []
        stride = 1
        for d in reversed(range(rank)):
            index = _binary("arith.divui", flat, index_constant(stride)) if stride != 1 else flat
            if d != 0:
                index = _binary("arith.remui", index, index_constant(counts[d]))
            if step[d] != 1:
                index = _binary("arith.muli", index, index_constant(step[d]))
            if lower[d] != 0:
                index = _binary("arith.addi", index, index_constant(lower[d]))
            indices.insert(0, index)
            stride *= counts[d]
    body = loop.regions[0].blocks[0]
    for argument, index in zip(body.arguments, indices):
        argument.replace_all_uses_with(index)
    for op in list(body.operations):
        if op.operation.name != "scf.reduce":
            op.operation.move_before(end)
    loop.erase()
    return total


@register_pass("et-vulkan-map-threads")
def map_threads(module: ir.Operation) -> None:
    """et-vulkan-map-threads: each untiled kernel's linalg op as loops, one parallel iteration per GPU thread."""
    todo = [(kernel_module, kernel) for kernel_module, kernel in kernels(module)
            if ENTRY_POINT_ABI not in kernel.attributes]
    if not todo:
        return
    for _, kernel in todo:
        for op in kernel.regions[0].blocks[0].operations:
            if op.operation.name == "linalg.generic":
                parallel_dims_first(op.operation)
    run(module, "builtin.module(gpu.module(gpu.func(convert-linalg-to-parallel-loops)),canonicalize,cse)")
    launch_of = launches(module)
    for kernel_module, kernel in todo:
        threads = flatten_parallel(kernel)
        set_entry_point(kernel, (WORKGROUP_SIZE, 1, 1))
        name = ir.StringAttr(kernel_module.attributes["sym_name"]).value
        if name in launch_of:
            set_launch_sizes(launch_of[name], grid_for(threads), (WORKGROUP_SIZE, 1, 1))
    # Parallel loops nested inside a reduction loop run in sequence within their thread.
    run(module, "builtin.module(gpu.module(scf-parallel-for-to-nested-fors),lower-affine,canonicalize,cse)")
