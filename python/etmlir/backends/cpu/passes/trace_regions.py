"""et-cpu-trace-regions: time each piece of generated compute as a region the runtime's tracer can see.

A `cpu` delegate is one call to the runtime; without this pass a trace shows
it as one opaque row. After bufferization and `et-cpu-microkernels`, the
entry function is a flat list of compute ops (loop nests as `linalg` ops,
microkernel calls) with views and allocations between them. Each run of
consecutive compute ops that came from the same edge ops (read off their
locations, which `et-edge-to-torch` tagged with debug handles, including the
locations of a fused loop nest's body ops) becomes one region, bracketed by
two calls into the payload's runtime glue (`payload_c/shim.c`):

    linalg.fill ins(%cst : f32) outs(%alloc : memref<2x16xf32>)   loc(addmm, handle 2)
    func.call @etmlir_uk_matmul(%a, %w, %alloc) : (...) -> ()       loc(addmm, handle 2)
    linalg.generic ... ins(%b, %alloc ...) { addf (2), tanh (3) }  loc(tanh, handle 3)

becomes

    func.call @etmlir_cpu_region_begin(%c1_i32, %c2_i32) : (i32, i32) -> ()   // region 1, first handle 2
    linalg.fill ...
    func.call @etmlir_uk_matmul(...)
    func.call @etmlir_cpu_region_end(%c1_i32) : (i32) -> ()
    func.call @etmlir_cpu_region_begin(%c2_i32, %c2_i32) : (i32, i32) -> ()   // region 2: handles 2, 3
    linalg.generic ...
    func.call @etmlir_cpu_region_end(%c2_i32) : (i32) -> ()

and the module records `etmlir.cpu_regions = [array<i64: 2>, array<i64: 2, 3>]`
(region i + 1 covers the i-th entry's edge ops), which the compiler writes
into the payload header's debug_handle_map. Without a tracer attached the
two calls test one pointer and return (PAYLOAD.md, "Symbols"), so the regions
stay in the code; the compile spec `trace_regions=false` leaves them out.
"""

from __future__ import annotations

from torch_mlir import ir

from etmlir.backends.cpu.ir_util import ENTRY, declare_function
from etmlir.frontend.locations import location_debug_handles
from etmlir.passes.registry import PassFailure, emit_error, register_pass
from etmlir.program import find_function

REGIONS_ATTR = "etmlir.cpu_regions"
BEGIN = "etmlir_cpu_region_begin"
END = "etmlir_cpu_region_end"
# Ops that do work over tensor data; the rest of the entry's top level (allocations, views, casts,
# scalar arithmetic, asserts) is bookkeeping that belongs to no region.
_COMPUTE_PREFIXES = ("linalg.", "scf.", "affine.for", "affine.parallel", "memref.copy", "func.call")


def op_debug_handles(op: ir.Operation) -> list[int]:
    """The debug handles in the locations of `op` and every op nested in it, ascending."""
    found: set[int] = set()

    def visit(inner: ir.Operation) -> ir.WalkResult:
        found.update(location_debug_handles(inner.location))
        return ir.WalkResult.ADVANCE

    op.walk(visit)
    return sorted(found)


def _is_compute(op: ir.Operation) -> bool:
    if not op.name.startswith(_COMPUTE_PREFIXES):
        return False
    if op.name == "func.call":
        callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
        return callee not in (BEGIN, END)
    return True


def _regions(block: ir.Block) -> list[tuple[list[ir.Operation], list[int]]]:
    """Runs of consecutive compute ops with the same handles (ops between them do not break a run)."""
    runs: list[tuple[list[ir.Operation], list[int]]] = []
    for op in block.operations:
        op = op.operation
        if not _is_compute(op):
            continue
        handles = op_debug_handles(op)
        if not handles:
            continue  # code no edge op claims: timed as the delegate's own
        if runs and runs[-1][1] == handles:
            runs[-1][0].append(op)
        else:
            runs.append(([op], handles))
    return runs


def _call(name: str, values: list[int], i32: ir.Type) -> None:
    operands = [ir.Operation.create("arith.constant", results=[i32],
                                    attributes={"value": ir.IntegerAttr.get(i32, v)}).result for v in values]
    ir.Operation.create("func.call", operands=operands, attributes={"callee": ir.FlatSymbolRefAttr.get(name)})


def trace_regions(module: ir.Operation) -> list[tuple[int, ...]]:
    """Bracket the entry's compute regions; returns each region's edge debug handles (region i + 1: entry i)."""
    forward = find_function(module, ENTRY)
    if forward is None or len(forward.regions[0].blocks) == 0:
        return []
    with module.context:
        i32 = ir.IntegerType.get_signless(32)
        regions = _regions(forward.regions[0].blocks[0])
        for number, (ops, handles) in enumerate(regions, start=1):
            with ops[0].location, ir.InsertionPoint(ops[0]):
                _call(BEGIN, [number, handles[0]], i32)
            with ops[-1].location, ir.InsertionPoint.after(ops[-1]):
                _call(END, [number], i32)
        if regions:
            declare_function(module, BEGIN, [i32, i32])
            declare_function(module, END, [i32])
        covered = [tuple(handles) for _, handles in regions]
        module.attributes[REGIONS_ATTR] = ir.ArrayAttr.get([ir.DenseI64ArrayAttr.get(list(h)) for h in covered])
    return covered


def recorded_regions(module: ir.Operation) -> list[tuple[int, ...]]:
    """What `trace_regions` recorded on `module` (empty when it did not run)."""
    if REGIONS_ATTR not in module.attributes:
        return []
    return [tuple(ir.DenseI64ArrayAttr(a)) for a in ir.ArrayAttr(module.attributes[REGIONS_ATTR])]


@register_pass("et-cpu-trace-regions")
def trace_regions_pass(module: ir.Operation) -> None:
    """et-cpu-trace-regions: bracket each run of compute ops from the same edge ops in region begin/end calls."""
    if REGIONS_ATTR in module.attributes:
        # A second run would nest every region in a copy of itself and number them anew.
        emit_error(module, f"et-cpu-trace-regions: the module's regions are already bracketed ({REGIONS_ATTR} is set)")
        raise PassFailure()
    if find_function(module, ENTRY) is None:
        emit_error(module, f"et-cpu-trace-regions: the module has no func.func @{ENTRY}")
        raise PassFailure()
    trace_regions(module)
