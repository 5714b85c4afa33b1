"""et-plan-memory: give every tensor an etx function allocates a place (mem_id, offset, size) in planned arenas.

A tensor is live from the instruction that defines it (inputs: from the
start) to its last use, through any `etx.list` that holds it; method outputs
stay live to the end; a tensor defined before a loop (a backward `etx.jump_false`)
and read inside it stays live to the loop's last instruction. Program state (`etx.state`) is live for the whole
method, so no other tensor ever shares its bytes and its value survives
from one call to the next. Dynamic dims are planned at their `upper_bounds`.
The placement itself is `etmlir.executable.planner` (greedy by size, best
fit, never worse than ExecuTorch's shared-object greedy):

    %0 = "etx.input"() {index = 0 : i64, type = tensor<2x3xf32>} : () -> !etx.value
    %1 = "etx.alloc"() {type = tensor<2x3xf32>} : () -> !etx.value
    "etx.kernel_call"(%0, %1) {kernel = "aten::relu.out", ...}
    %2 = "etx.alloc"() {type = tensor<2x3xf32>} : () -> !etx.value
    "etx.kernel_call"(%1, %2) {kernel = "aten::relu.out", ...}
    "etx.output"(%2) : (!etx.value) -> ()

with `arenas=fast:32,slow` becomes

    %0 = "etx.input"() {index = 0 : i64, mem_id = 1 : i64, offset = 0 : i64, size = 32 : i64, ...}
    %1 = "etx.alloc"() {mem_id = 0 : i64, offset = 0 : i64, size = 32 : i64, ...}
    %2 = "etx.alloc"() {mem_id = 1 : i64, offset = 32 : i64, size = 32 : i64, ...}

and the function gets `etx.arenas = [{name = "fast", size = 32}, {name = "slow", size = 64}]`.
Options: `arenas` (name[:bytes] list, default one unbounded arena), `policy`
(largest-first | smallest-first: who gets the bounded arenas first),
`alignment` (bytes, default 16), `alloc-inputs` / `alloc-outputs` (plan the
method's inputs / outputs; when off, the user provides their memory at run
time), `algorithm`, and `print-summary` (a per-arena table on stderr).
"""

from __future__ import annotations

import sys

from torch_mlir import ir

from etmlir.dialects.etx import method_functions, output_owners, tensor_type, upper_bounds
from etmlir.executable.control_flow import live_until, loop_ranges
from etmlir.executable.dtypes import UnsupportedElementType, nbytes
from etmlir.frontend.locations import source_line
from etmlir.executable.planner import (ALGORITHMS, POLICIES, Arena, Buffer, Placement, Plan, PlanningError,
                                       parse_arenas, plan_memory)
from etmlir.passes.registry import Option, PassFailure, emit_error, power_of_two, register_pass

ARENAS_ATTR = "etx.arenas"
PLAN_ATTR = "etx.memory_plan"
# Offsets and sizes are int64 attributes (and int64 in the .pte): a plan cannot address more.
MAX_PLAN_BYTES = 2**63 - 1


def _i64(value: int) -> ir.IntegerAttr:
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), value)


def describe(op: ir.Operation) -> str:
    """`etx.alloc (written by aten::convolution.out at model.py:12)` for messages."""
    line = source_line(op.location)
    where = f" at {line}" if line != "unknown" else ""
    if op.name == "etx.input":
        return f"input {ir.IntegerAttr(op.attributes['index']).value}{where}"
    if op.name == "etx.state":
        return f"state '{ir.StringAttr(op.attributes['name']).value}'{where}"
    writer = None
    for use in op.result.uses:
        if use.owner.name == "etx.kernel_call":
            writer = ir.StringAttr(use.owner.attributes["kernel"]).value
            break
    return f"{op.name} ({'written by ' + writer if writer else 'unused'}{where})"


def tensor_lifetimes(func_op: ir.Operation, alloc_inputs: bool = True,
                     alloc_outputs: bool = True) -> tuple[list[ir.Operation], list[Buffer]]:
    """The ops defining tensors to plan, and a Buffer (bytes, lifetime) for each."""
    ops = [op.operation for op in func_op.regions[0].blocks[0].operations]
    index = {op: i for i, op in enumerate(ops)}
    end_of_method = len(ops)
    loops = loop_ranges(ops)  # (first, last) op of each loop: its backward etx.jump_false
    outputs = output_owners(func_op)

    def last_use(value: ir.Value) -> int:
        last = -1
        for use in value.uses:
            owner = use.owner
            last = max(last, index.get(owner, -1))
            if owner.name == "etx.list":  # live as long as the list is used
                last = max(last, last_use(owner.result))
        return last

    planned, buffers = [], []
    for op in ops:
        if op.name not in ("etx.alloc", "etx.input", "etx.state") or tensor_type(op) is None:
            continue
        if op.name == "etx.input" and not alloc_inputs:
            continue
        is_output = op in outputs
        if is_output and not alloc_outputs:
            continue
        # State lives across calls: live for the whole method, it shares its bytes with nothing.
        start = 0 if op.name in ("etx.input", "etx.state") else index[op]
        end = end_of_method if is_output or op.name == "etx.state" else max(last_use(op.result), start)
        end = live_until(start, end, loops)  # read inside a loop it entered: live for the whole loop
        t = tensor_type(op)
        buffers.append(Buffer(nbytes(upper_bounds(op), t.element_type), start, end, describe(op)))
        planned.append(op)
    return planned, buffers


def tensor_problems(func_op: ir.Operation) -> list[tuple[ir.Operation, str]]:
    """(op, why) for each tensor of `func_op` that cannot be planned: no size to reserve (a dynamic
    dim without `upper_bounds`), a negative bound, an element type the .pte has no number for,
    or more bytes than a plan can address."""
    problems = []
    for op in (o.operation for o in func_op.regions[0].blocks[0].operations):
        if op.name not in ("etx.alloc", "etx.input", "etx.state") or tensor_type(op) is None:
            continue
        sizes = upper_bounds(op)
        if sizes is None or len(sizes) != tensor_type(op).rank:
            problems.append((op, f"{describe(op)} has type {tensor_type(op)} with a dynamic dim and no "
                                 "upper_bounds of its rank: there is no size to plan"))
            continue
        if any(s < 0 for s in sizes):
            problems.append((op, f"{describe(op)} has a negative size bound {sizes}"))
            continue
        try:
            size = nbytes(sizes, tensor_type(op).element_type)
        except UnsupportedElementType as error:
            problems.append((op, f"{describe(op)}: {error}"))
            continue
        if size > MAX_PLAN_BYTES:
            problems.append((op, f"{describe(op)} needs {size} bytes ({tensor_type(op)}), more than a plan "
                                 f"can address ({MAX_PLAN_BYTES})"))
    return problems


def recorded_plan(func_op: ir.Operation) -> tuple[list[ir.Operation], list[Buffer], Plan]:
    """The plan written on `func_op` by et-plan-memory: planned ops, their buffers (lifetimes recomputed
    from the IR) and a Plan over them. Raises PlanningError if the function carries no plan."""
    if ARENAS_ATTR not in func_op.attributes:
        raise PlanningError("no memory plan (run et-plan-memory)")
    arenas, sizes = [], []
    for entry in ir.ArrayAttr(func_op.attributes[ARENAS_ATTR]):
        entry = ir.DictAttr(entry)
        capacity = ir.IntegerAttr(entry["capacity"]).value if "capacity" in entry else None
        arenas.append(Arena(ir.StringAttr(entry["name"]).value, capacity))
        sizes.append(ir.IntegerAttr(entry["size"]).value)
    alignment, policy, algorithm = 1, "", ""
    if PLAN_ATTR in func_op.attributes:
        info = ir.DictAttr(func_op.attributes[PLAN_ATTR])
        alignment = ir.IntegerAttr(info["alignment"]).value
        policy = ir.StringAttr(info["policy"]).value
        algorithm = ir.StringAttr(info["algorithm"]).value if "algorithm" in info else ""
    candidates, candidate_buffers = tensor_lifetimes(func_op)
    ops, buffers, placements = [], [], []
    for op, buffer in zip(candidates, candidate_buffers):
        if "mem_id" in op.attributes:
            get = lambda name: ir.IntegerAttr(op.attributes[name]).value  # noqa: E731
            ops.append(op)
            buffers.append(buffer)
            placements.append(Placement(get("mem_id"), get("offset"), get("size")))
    tensor_bytes, counts = [0] * len(arenas), [0] * len(arenas)
    for placement in placements:
        if 0 <= placement.mem_id < len(arenas):
            tensor_bytes[placement.mem_id] += placement.size
            counts[placement.mem_id] += 1
    return ops, buffers, Plan(arenas, placements, sizes, tensor_bytes, counts, alignment, policy, algorithm)


def _record(func_op: ir.Operation, planned: list[ir.Operation], plan: Plan) -> None:
    for op, placement in zip(planned, plan.placements):
        op.attributes["mem_id"] = _i64(placement.mem_id)
        op.attributes["offset"] = _i64(placement.offset)
        op.attributes["size"] = _i64(placement.size)
    arenas = []
    for arena, size in zip(plan.arenas, plan.arena_sizes):
        entry = {"name": ir.StringAttr.get(arena.name), "size": _i64(size)}
        if arena.capacity is not None:
            entry["capacity"] = _i64(arena.capacity)
        arenas.append(ir.DictAttr.get(entry))
    func_op.attributes[ARENAS_ATTR] = ir.ArrayAttr.get(arenas)
    func_op.attributes[PLAN_ATTR] = ir.DictAttr.get({
        "alignment": _i64(plan.alignment), "policy": ir.StringAttr.get(plan.policy),
        "algorithm": ir.StringAttr.get(plan.algorithm)})


def _arenas_problem(specs: list[str]) -> str | None:
    try:
        arenas = parse_arenas(specs)
    except PlanningError as error:
        return str(error)
    for arena in arenas:
        if arena.capacity is not None and arena.capacity > MAX_PLAN_BYTES:
            return f"arena '{arena.name}' is larger than a plan can address ({MAX_PLAN_BYTES} bytes)"
    return None


@register_pass("et-plan-memory", level="etx", options={
    "arenas": Option(list, [], "planned memories as name[:bytes] (64k, 2M), fastest first; default: one unbounded",
                     check=_arenas_problem),
    "policy": Option(str, "largest-first", "who gets the bounded arenas", choices=POLICIES),
    "alignment": Option(int, 16, "byte alignment of every planned tensor", minimum=1, maximum=1 << 30,
                        check=power_of_two),
    "alloc-inputs": Option(bool, True, "plan the method's inputs (else the user provides their memory)"),
    "alloc-outputs": Option(bool, True, "plan the method's outputs (else the user provides their memory)"),
    "algorithm": Option(str, "auto", "auto: the smaller plan of the two", choices=ALGORITHMS),
    "print-summary": Option(bool, False, "print the per-arena table to stderr"),
})
def plan_memory_pass(module: ir.Operation, *, arenas: list[str], policy: str, alignment: int,
                     alloc_inputs: bool, alloc_outputs: bool, algorithm: str, print_summary: bool) -> None:
    """et-plan-memory: lifetime-based placement of every tensor in planned arenas (mem_id, offset, size)."""
    functions = method_functions(module)
    if not functions:
        emit_error(module, "et-plan-memory: no etx method in the module (run et-to-out-variants first)")
        raise PassFailure()
    try:
        arena_list = parse_arenas(arenas)
    except PlanningError as error:
        emit_error(module, f"et-plan-memory: {error}")
        raise PassFailure() from None
    problems = [(op, message) for func_op in functions for op, message in tensor_problems(func_op)]
    for op, message in problems:
        emit_error(op, f"et-plan-memory: {message}")
    if problems:
        raise PassFailure()
    for func_op in functions:
        planned, buffers = tensor_lifetimes(func_op, alloc_inputs, alloc_outputs)
        try:
            plan = plan_memory(buffers, arena_list, alignment, policy, algorithm)
        except PlanningError as error:
            emit_error(func_op, f"et-plan-memory: {error}")
            raise PassFailure() from None
        total = max([s for s in plan.arena_sizes] + [p.offset + p.size for p in plan.placements] + [0])
        if total > MAX_PLAN_BYTES:
            emit_error(func_op, f"et-plan-memory: the plan needs {total} bytes in one arena, more than a plan "
                                f"can address ({MAX_PLAN_BYTES})")
            raise PassFailure()
        _record(func_op, planned, plan)
        if print_summary:
            name = ir.StringAttr(func_op.attributes["etx.method"]).value
            print(f"method '{name}': {plan.summary()}", file=sys.stderr)
