"""Control flow at the executable level: `scf.if` / `scf.while` as jumps and moves.

An etx method is one block of instructions that run in order; et-to-out-variants
lowers each structured op of the edge function into it (`ControlFlowLowering`).
Every value the op defines gets a slot, an `etx.alloc` placed before the op,
and each branch ends by moving its values into the slots. The instruction
index of each instruction is on the left:

    %c = "etcf.predicate"(%p) : (tensor<i1>) -> i1
    %r = scf.if %c -> (tensor<3xf32>) { A; scf.yield %a } else { B; scf.yield %b }

becomes

        %r = "etx.alloc"() {type = tensor<3xf32>}       // the result's slot
     4: "etx.jump_false"(%p) {target = 8}               // JumpFalse reads the 0-d bool tensor
     5:   A
     6:   "etx.move"(%a, %r)
     7:   "etx.jump_false"(%false) {target = 10}        // over the else branch (%false: a Bool)
     8:   B
     9:   "etx.move"(%b, %r)
    10: ...

and `scf.while` (carried values in slots %s, the condition region C, the body D):

        %s = "etx.alloc"() ...;  "etx.move"(%init, %s)
     T:   C                                             // reads %s
          "etx.jump_false"(%pred) {target = E}
          D                                             // reads %s
          "etx.move"(%next, %s)                         // the yielded values (a swap goes through a temporary)
          "etx.jump_false"(%false) {target = T}         // back to the condition
     E: ...                                             // the loop's results are %s

`etx.move` copies a tensor's sizes and bytes into the slot's own memory, so
a slot never aliases another tensor. A slot of a dynamic type is planned at
the largest upper bound of the values moved into it.

While a function is being lowered, jump targets are labels (`etx.label` on
the jump, and on an `etx.none` marker where the label sits); `resolve_jumps`
turns them into instruction indices once the whole function is converted.

For memory planning, `loop_ranges` finds the loops of a lowered block (the
backward jumps): a value defined before a loop and read inside it must stay
live until the loop's last instruction, since the next iteration reads it
again (`live_until`).
"""

from __future__ import annotations

from typing import Protocol

from torch_mlir import ir

from etmlir.dialects.control_flow import CONDITION, CONSTANT, IF, PREDICATE, WHILE, YIELD, is_tensor_select
from etmlir.dialects.etx import upper_bounds, value_type

# Ops that are instructions of the .pte, in the order they run.
INSTRUCTIONS = ("etx.kernel_call", "etx.delegate_call", "etx.jump_false", "etx.move", "etx.free")
# On a jump (its target) and on the `etx.none` marking where that label sits, until resolve_jumps.
LABEL = "etx.label"


class ControlFlowError(Exception):
    """Control flow the executable level cannot express; the message says why."""


class Builder(Protocol):
    """What the lowering needs from et-to-out-variants' method builder."""

    tensors: dict[ir.Value, ir.Value]
    poisoned: set[ir.Value]

    def tensor(self, value: ir.Value, what: str) -> ir.Value: ...

    def const(self, attr: ir.Attribute) -> ir.Value: ...

    def convert_ops(self, ops: list[ir.Operation]) -> None: ...


def lowers(op: ir.Operation) -> bool:
    """True for the ops `ControlFlowLowering.lower` takes."""
    return op.name in (PREDICATE, IF, WHILE) or is_tensor_select(op) or (
        op.name == CONSTANT and str(op.results[0].type) == "i1")


def _i64(value: int) -> ir.IntegerAttr:
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), value)


class ControlFlowLowering:
    """Lowers the control-flow ops of one function, at the builder's insertion point."""

    def __init__(self, builder: Builder) -> None:
        self.builder = builder
        self.conditions: dict[ir.Value, ir.Value] = {}  # i1 value -> the etx value JumpFalse reads
        self.labels = 0

    def lower(self, op: ir.Operation) -> None:
        name = op.name
        if name == PREDICATE:
            self.conditions[op.result] = self.builder.tensor(op.operands[0], "the condition")
        elif name == CONSTANT:
            value = ir.IntegerAttr(op.attributes["value"]).value != 0
            self.conditions[op.result] = self.builder.const(ir.BoolAttr.get(value))
        elif name == IF:
            self._if(op)
        elif name == WHILE:
            self._while(op)
        elif is_tensor_select(op):
            self._select(op)
        else:
            raise ControlFlowError(f"'{name}' is not control flow the executable level takes")

    # -- the ops ----------------------------------------------------------------------------

    def _if(self, op: ir.Operation) -> None:
        slots = [self._slot(r.type, op.location) for r in op.results]
        condition = self._condition(op.operands[0])
        otherwise = self._label()
        self._jump(condition, otherwise)
        sources = [[] for _ in slots]
        taken = self._region(op.regions[0].blocks[0], op)
        if taken is None:
            return
        self._moves(taken, slots, sources)
        else_blocks = list(op.regions[1].blocks)
        if else_blocks and (len(list(else_blocks[0].operations)) > 1 or slots):
            end = self._label()
            self._jump(self._false(), end)
            self._place(otherwise)
            values = self._region(else_blocks[0], op)
            if values is None:
                return
            self._moves(values, slots, sources)
            self._place(end)
        else:
            self._place(otherwise)
        self._finish(op, slots, sources)

    def _select(self, op: ir.Operation) -> None:
        """`arith.select %c, %a, %b` on whole tensors: an if whose branches only move."""
        slot = self._slot(op.results[0].type, op.location)
        condition = self._condition(op.operands[0])
        a = self.builder.tensor(op.operands[1], "the selected value")
        b = self.builder.tensor(op.operands[2], "the selected value")
        otherwise, end = self._label(), self._label()
        sources: list[list[ir.Value]] = [[]]
        self._jump(condition, otherwise)
        self._moves([a], [slot], sources)
        self._jump(self._false(), end)
        self._place(otherwise)
        self._moves([b], [slot], sources)
        self._place(end)
        self._finish(op, [slot], sources)

    def _while(self, op: ir.Operation) -> None:
        before, after = op.regions[0].blocks[0], op.regions[1].blocks[0]
        inits = [self.builder.tensor(v, f"initial value {i} of the loop") for i, v in enumerate(op.operands)]
        carried = [self._slot(a.type, op.location) for a in before.arguments]
        condition_op = list(before.operations)[-1].operation
        if condition_op.name != CONDITION:
            raise ControlFlowError(f"the condition region of scf.while ends in '{condition_op.name}'")
        forwarded = list(condition_op.operands)[1:]
        # A value the condition forwards unchanged keeps its slot; any other gets its own.
        results = [carried[list(before.arguments).index(f)] if _is_argument_of(f, before) else
                   self._slot(r.type, op.location) for f, r in zip(forwarded, op.results)]
        carried_sources: list[list[ir.Value]] = [[] for _ in carried]
        result_sources: list[list[ir.Value]] = [[] for _ in results]
        self._moves(inits, carried, carried_sources)
        for argument, slot in zip(before.arguments, carried):
            self.builder.tensors[argument] = slot
        top, end = self._label(), self._label()
        self._place(top)
        self.builder.convert_ops(list(before.operations)[:-1])
        if self._failed(condition_op, op):
            return
        condition = self._condition(condition_op.operands[0])
        values = [self.builder.tensor(v, f"value {i} the loop condition forwards") for i, v in enumerate(forwarded)]
        self._moves(values, results, result_sources)
        self._jump(condition, end)
        for argument, slot in zip(after.arguments, results):
            self.builder.tensors[argument] = slot
        yielded = self._region(after, op)
        if yielded is None:
            return
        temporaries = self._parallel_moves(yielded, carried, carried_sources, op.location)
        self._jump(self._false(), top)
        self._place(end)
        self._bound(carried + [t for t, _ in temporaries], carried_sources + [[v] for _, v in temporaries])
        self._finish(op, results, result_sources)

    # -- pieces -----------------------------------------------------------------------------

    def _region(self, block: ir.Block, parent: ir.Operation) -> list[ir.Value] | None:
        """Lower a region's ops; the etx values its terminator yields (None if an op failed)."""
        ops = [o.operation for o in block.operations]
        self.builder.convert_ops(ops[:-1])
        terminator = ops[-1]
        if terminator.name != YIELD:
            raise ControlFlowError(f"a region of '{parent.name}' ends in '{terminator.name}', not scf.yield")
        if self._failed(terminator, parent):
            return None
        return [self.builder.tensor(v, f"yielded value {i}") for i, v in enumerate(terminator.operands)]

    def _failed(self, terminator: ir.Operation, parent: ir.Operation) -> bool:
        """True (and the op's results poisoned) when an op the terminator reads failed to lower."""
        if any(v in self.builder.poisoned for v in terminator.operands):
            self.builder.poisoned.update(parent.results)
            return True
        return False

    def _condition(self, value: ir.Value) -> ir.Value:
        if value not in self.conditions:
            owner = value.owner
            what = owner.name if isinstance(owner, (ir.Operation, ir.OpView)) else "a block argument"
            raise ControlFlowError(f"the condition is computed by {what}; the runtime's JumpFalse reads a "
                                   "one-element bool tensor (etcf.predicate) or a constant")
        return self.conditions[value]

    def _false(self) -> ir.Value:
        return self.builder.const(ir.BoolAttr.get(False))

    def _slot(self, t: ir.Type, loc: ir.Location) -> ir.Value:
        if not isinstance(t, ir.RankedTensorType):
            raise ControlFlowError(f"control flow carries a {t}; only tensors are supported")
        return ir.Operation.create("etx.alloc", results=[value_type()], loc=loc,
                                   attributes={"type": ir.TypeAttr.get(t)}).result

    def _moves(self, values: list[ir.Value], slots: list[ir.Value], sources: list[list[ir.Value]]) -> None:
        for value, slot, seen in zip(values, slots, sources):
            seen.append(value)
            if value != slot:
                ir.Operation.create("etx.move", operands=[value, slot])

    def _parallel_moves(self, values: list[ir.Value], slots: list[ir.Value], sources: list[list[ir.Value]],
                        loc: ir.Location) -> list[tuple[ir.Value, ir.Value]]:
        """Move `values` into `slots` as one step: a value that is another slot is copied aside first
        (`(a, b) = (b, a)` must not read a slot already overwritten). Returns (temporary, its source)."""
        staged, temporaries = [], []
        for index, value in enumerate(values):
            if value in slots and value != slots[index]:
                temporary = self._slot(ir.TypeAttr(_defining(value).attributes["type"]).value, loc)
                ir.Operation.create("etx.move", operands=[value, temporary])
                temporaries.append((temporary, value))
                sources[index].append(value)
                value = temporary
            staged.append(value)
        self._moves(staged, slots, [[] for _ in slots])
        for index, value in enumerate(staged):
            if value not in (t for t, _ in temporaries):
                sources[index].append(value)
        return temporaries

    def _finish(self, op: ir.Operation, slots: list[ir.Value], sources: list[list[ir.Value]]) -> None:
        self._bound(slots, sources)
        for result, slot in zip(op.results, slots):
            self.builder.tensors[result] = slot

    def _bound(self, slots: list[ir.Value], sources: list[list[ir.Value]]) -> None:
        """Give each dynamic slot the elementwise largest upper bounds of the values moved into it.

        A source may be another slot (a loop that swaps its carried values): bounds are
        propagated until nothing changes."""
        pending = {}
        found: dict[ir.Operation, list[int]] = {}
        for slot, values in zip(slots, sources):
            alloc = _defining(slot)
            t = ir.RankedTensorType(ir.TypeAttr(alloc.attributes["type"]).value)
            if not t.has_static_shape:
                pending[alloc] = (t, [v for v in values if v != slot])
                if "upper_bounds" in alloc.attributes:  # a loop's result that is its carried slot
                    found[alloc] = list(ir.DenseI64ArrayAttr(alloc.attributes["upper_bounds"]))
        changed = True
        while changed:
            changed = False
            for alloc, (t, values) in pending.items():
                bounds = found.get(alloc, list(t.shape))
                for value in values:
                    owner = _defining(value)
                    known = found.get(owner) if owner in pending else (upper_bounds(owner) if owner else None)
                    if known is not None:
                        merged = [max(b, k) if b >= 0 else k for b, k in zip(bounds, known)]
                        if merged != bounds and all(b >= 0 for b in merged):
                            bounds = merged
                if all(b >= 0 for b in bounds) and found.get(alloc) != bounds:
                    found[alloc] = bounds
                    changed = True
        for alloc, (t, _) in pending.items():
            if alloc not in found:
                raise ControlFlowError(f"a control-flow value of dynamic type {t} has no upper bound: no value "
                                       "that flows into it has one")
            alloc.attributes["upper_bounds"] = ir.DenseI64ArrayAttr.get(found[alloc])

    def _label(self) -> int:
        self.labels += 1
        return self.labels

    def _place(self, label: int) -> None:
        ir.Operation.create("etx.none", results=[value_type()], attributes={LABEL: _i64(label)})

    def _jump(self, condition: ir.Value, label: int) -> None:
        ir.Operation.create("etx.jump_false", operands=[condition], attributes={"target": _i64(0), LABEL: _i64(label)})


def _defining(value: ir.Value) -> ir.Operation | None:
    owner = value.owner
    if isinstance(owner, ir.OpView):
        return owner.operation
    return owner if isinstance(owner, ir.Operation) else None


def _is_argument_of(value: ir.Value, block: ir.Block) -> bool:
    return isinstance(value.owner, ir.Block) and value.owner == block


def resolve_jumps(func_op: ir.Operation) -> None:
    """Replace the labels of a lowered function's jumps by instruction indices; remove the markers."""
    block = func_op.regions[0].blocks[0]
    positions: dict[int, int] = {}
    count = 0
    markers = []
    for op in block.operations:
        op = op.operation
        if op.name == "etx.none" and LABEL in op.attributes:
            positions[ir.IntegerAttr(op.attributes[LABEL]).value] = count
            markers.append(op)
        elif op.name in INSTRUCTIONS:
            count += 1
    for op in block.operations:
        op = op.operation
        if op.name == "etx.jump_false" and LABEL in op.attributes:
            op.attributes["target"] = _i64(positions[ir.IntegerAttr(op.attributes[LABEL]).value])
            del op.attributes[LABEL]
    for marker in markers:
        marker.erase()


# ------------------------------------------------------------------------------------------ planning


def loop_ranges(ops: list[ir.Operation]) -> list[tuple[int, int]]:
    """(position of the loop's first instruction, position of its backward jump) for every loop of
    a lowered block; `ops` is the block's ops in order."""
    instruction_positions = [i for i, op in enumerate(ops) if op.name in INSTRUCTIONS]
    loops = []
    for index, position in enumerate(instruction_positions):
        op = ops[position]
        if op.name == "etx.jump_false":
            target = ir.IntegerAttr(op.attributes["target"]).value
            if target <= index:
                loops.append((instruction_positions[target], position))
    return loops


def live_until(start: int, end: int, loops: list[tuple[int, int]]) -> int:
    """The end of the lifetime [start, end] once loops are counted: a value defined before a loop
    and read inside it is read again by the next iteration, so it lives until the backward jump."""
    changed = True
    while changed:
        changed = False
        for first, last in loops:
            if start < first <= end < last:
                end = last
                changed = True
    return end
