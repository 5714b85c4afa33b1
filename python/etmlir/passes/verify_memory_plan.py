"""et-verify-memory-plan: check a planned etx function: no two simultaneously live tensors share bytes.

Recomputes every tensor's lifetime from the IR (as et-plan-memory does) and
checks the placements written on the ops against the function's `etx.arenas`:
each tensor fits inside its arena, offsets are aligned, bounded arenas stay
within capacity, and tensors whose lifetimes intersect do not overlap. A
hand-edited or corrupted plan such as

    %1 = "etx.alloc"() {mem_id = 0 : i64, offset = 0 : i64, size = 32 : i64, type = tensor<2x3xf32>}
    %2 = "etx.alloc"() {mem_id = 0 : i64, offset = 16 : i64, size = 32 : i64, type = tensor<2x3xf32>}
    "etx.kernel_call"(%1, %2) {kernel = "aten::relu.out", ...}

is reported at the function:

    error: etx.alloc (written by aten::relu.out ...) [0, 32) and etx.alloc (...) [16, 48) overlap while both are live

Intermediate tensors must be planned; method inputs and outputs may be left
to the user (et-plan-memory's alloc-inputs / alloc-outputs).
"""

from __future__ import annotations

from torch_mlir import ir

from etmlir.dialects.etx import method_functions, output_owners, tensor_type
from etmlir.executable.planner import PlanningError, verify_plan
from etmlir.passes.plan_memory import describe, recorded_plan
from etmlir.passes.registry import PassFailure, emit_error, register_pass


def plan_problems(func_op: ir.Operation) -> list[str]:
    """Everything wrong with the memory plan recorded on `func_op`."""
    try:
        planned, buffers, plan = recorded_plan(func_op)
    except PlanningError as error:
        return [str(error)]
    outputs = output_owners(func_op)
    problems = [f"{describe(op)} has no planned memory"
                for op in (o.operation for o in func_op.regions[0].blocks[0].operations)
                if ((op.name == "etx.alloc" and op not in outputs) or op.name == "etx.state")
                and tensor_type(op) is not None and "mem_id" not in op.attributes]
    return problems + verify_plan(buffers, plan)


@register_pass("et-verify-memory-plan", level="etx")
def verify_memory_plan(module: ir.Operation) -> None:
    """et-verify-memory-plan: no two simultaneously live tensors overlap, and every tensor fits its arena."""
    failed = False
    for func_op in method_functions(module):
        for problem in plan_problems(func_op):
            emit_error(func_op, f"et-verify-memory-plan: {problem}")
            failed = True
    if failed:
        raise PassFailure()
