"""Program state at the executable level: `etx.state` values and the writes of their new values.

et-to-out-variants turns a state argument of the edge function (see
`etmlir/frontend/state.py`) into an `etx.state` and the state result into a
write at the end of the method, a copy (`aten::clone.out`) into the state:

    %n = "etx.state"() {name = "n", type = tensor<4xf32>, value = dense_resource<n> : tensor<4xf32>}
    %1 = "etx.alloc"() {type = tensor<4xf32>}
    "etx.kernel_call"(%n, %one, %one, %1) {kernel = "aten::add.Scalar_out", ...}
    ...                                                         // readers of %1
    "etx.kernel_call"(%1, %none, %n) {kernel = "aten::clone.out", ...}   // the state write

`write_in_place` then removes the copy where the kernel that computes the new
value can write it into the state directly: the new value's alloc is replaced
by the state,

    "etx.kernel_call"(%n, %one, %one, %n) {kernel = "aten::add.Scalar_out", ...}

which is legal when nothing reads the state's old value at or after that
kernel, or the kernel is one that may write over its first argument
(`IN_PLACE_KERNELS`: a scatter that copies `self` to `out` first and skips
the copy when they are the same memory, an elementwise op that reads element
i of `self` before writing element i of `out`). A KV cache updated by
`index_put`/`index_copy_`/slice assignment is then written where it lives,
with no copy of the whole cache per call.
"""

from __future__ import annotations

import dataclasses

from torch_mlir import ir

from etmlir.dialects import attrs
from etmlir.dialects.etx import value_type

# Kernels whose out may be their `self` (argument 0) when both have the same type.
IN_PLACE_KERNELS = frozenset({
    "aten::index_put.out", "aten::slice_scatter.out", "aten::select_scatter.out",
    "aten::add.out", "aten::sub.out", "aten::mul.out",
    "aten::add.Scalar_out", "aten::sub.Scalar_out", "aten::mul.Scalar_out",
})
COPY_KERNEL = "aten::clone.out"


@dataclasses.dataclass(frozen=True)
class StateWrite:
    """The copy of `value` into `state` that ends the method (`copy`: its kernel call)."""

    state: ir.Value
    value: ir.Value
    copy: ir.Operation


def _i64(value: int) -> ir.IntegerAttr:
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), value)


def copy_call(source: ir.Value, target: ir.Value, none: ir.Value, what: str, loc: ir.Location) -> ir.Operation:
    """`aten::clone.out(source, None, out=target)` at the insertion point."""
    return ir.Operation.create(
        "etx.kernel_call", operands=[source, none, target], loc=loc,
        attributes={"kernel": ir.StringAttr.get(COPY_KERNEL), "debug_handle": _i64(0),
                    attrs.EDGE_OP: ir.StringAttr.get(what),
                    "operandSegmentSizes": ir.DenseI32ArrayAttr.get([2, 1])})


def fresh_copy(value: ir.Value, state_op: ir.Operation, none: ir.Value, what: str,
               loc: ir.Location) -> ir.Value:
    """A new planned tensor holding `value` (a state's current value), at the insertion point."""
    alloc = ir.Operation.create("etx.alloc", results=[value_type()], loc=loc,
                                attributes={"type": state_op.attributes["type"]}).result
    copy_call(value, alloc, none, what, loc)
    return alloc


def state_of(value: ir.Value) -> ir.Operation | None:
    owner = value.owner
    return owner if isinstance(owner, (ir.Operation, ir.OpView)) and owner.name == "etx.state" else None


def write_state(updates: list[tuple[ir.Value, ir.Value]], outputs: list[ir.Value], none: ir.Value,
                loc: ir.Location) -> tuple[list[ir.Value], list[StateWrite]]:
    """The writes of `updates` (state, new value) at the insertion point, and `outputs` made safe.

    An output that is a state, or a new value that is another state, is copied before any state
    is written (functional semantics: each reads the value the state had during the call), so
    that no write is seen by a later one and an output never aliases memory the next call writes.
    """
    safe_outputs = []
    for index, value in enumerate(outputs):
        state_op = state_of(value)
        if state_op is None:
            safe_outputs.append(value)
        else:
            name = ir.StringAttr(state_op.attributes["name"]).value
            safe_outputs.append(fresh_copy(value, state_op, none, f"output {index} = state '{name}'", loc))
    snapshots = []
    for state, value in updates:
        source = state_of(value)
        if source is not None and value != state:
            value = fresh_copy(value, source, none, "state snapshot", loc)
        snapshots.append((state, value))
    writes = []
    for state, value in snapshots:
        if value == state:
            continue  # returned unchanged
        name = ir.StringAttr(state.owner.attributes["name"]).value
        writes.append(StateWrite(state, value, copy_call(value, state, none, f"state update '{name}'", loc)))
    return safe_outputs, writes


def _outs(call: ir.Operation) -> list[ir.Value]:
    n_outs = list(ir.DenseI32ArrayAttr(call.attributes["operandSegmentSizes"]))[1]
    operands = list(call.operands)
    return operands[len(operands) - n_outs:]


def _args(call: ir.Operation) -> list[ir.Value]:
    n_outs = list(ir.DenseI32ArrayAttr(call.attributes["operandSegmentSizes"]))[1]
    operands = list(call.operands)
    return operands[:len(operands) - n_outs]


def _expand(values: list[ir.Value]) -> list[ir.Value]:
    """Values with each `etx.list` replaced by its items."""
    expanded = []
    for value in values:
        owner = value.owner
        if isinstance(owner, (ir.Operation, ir.OpView)) and owner.name == "etx.list":
            expanded.extend(owner.operands)
        else:
            expanded.append(value)
    return expanded


def write_in_place(func_op: ir.Operation, writes: list[StateWrite]) -> None:
    """Let the kernel that computes a state's new value write it into the state (module docstring).

    The analysis reads instruction order as execution order, so a method with jumps or moves
    (control flow: a loop may run an earlier instruction again) keeps its copies.
    """
    block = func_op.regions[0].blocks[0]
    if any(op.operation.name in ("etx.jump_false", "etx.move") for op in block.operations):
        return
    for write in writes:
        ops = [op.operation for op in block.operations]
        position = {op: i for i, op in enumerate(ops)}
        calls = [op for op in ops if op.name in ("etx.kernel_call", "etx.delegate_call")]
        value = write.copy.operands[0]  # an earlier rewrite may have replaced `write.value`
        alloc = value.owner
        if not isinstance(alloc, (ir.Operation, ir.OpView)) or alloc.name != "etx.alloc":
            continue
        if alloc.attributes["type"] != write.state.owner.attributes["type"] or "upper_bounds" in alloc.attributes:
            continue
        writers = [call for call in calls if value in _expand(_outs(call))]
        if len(writers) != 1 or writers[0] == write.copy:
            continue
        writer = writers[0]
        if any(op.name == "etx.output" and value in list(op.operands) for op in ops):
            continue
        if any(write.state in _expand(_outs(call)) for call in calls if call != write.copy):
            continue
        readers = [call for call in calls if call != write.copy and write.state in _expand(_args(call))]
        if not all(position[r] < position[writer] or (r == writer and _in_place(writer, write.state))
                   for r in readers):
            continue
        write.copy.erase()
        value.replace_all_uses_with(write.state)
        alloc.erase()
    for op in list(block.operations):  # the copies' None, when no copy is left to use it
        if op.operation.name == "etx.none" and not any(True for _ in op.operation.result.uses):
            op.operation.erase()


def _in_place(call: ir.Operation, state: ir.Value) -> bool:
    """Whether `call` may write over `state`, which it reads as its first argument and nowhere else."""
    if call.name != "etx.kernel_call" or ir.StringAttr(call.attributes["kernel"]).value not in IN_PLACE_KERNELS:
        return False
    args = _args(call)
    return bool(args) and args[0] == state and _expand(args[1:]).count(state) == 0
