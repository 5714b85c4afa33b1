"""Control flow in etmlir's IR: MLIR's `scf` ops, with `etcf.predicate` for a tensor predicate.

At the ATen and Edge levels a program's control flow is structured, in upstream `scf`:

    %c = "etcf.predicate"(%p) : (tensor<i1>) -> i1            // torch.cond(p, ...)
    %r = scf.if %c -> (tensor<3xf32>) {
      %0 = "edge.sin"(%x) : (tensor<3xf32>) -> tensor<3xf32>
      scf.yield %0 : tensor<3xf32>
    } else { ... }

    %r:2 = scf.while (%i = %i0, %acc = %a0) : (tensor<i64>, tensor<3xf32>) -> (...) {
      %lt = "edge.lt_tensor"(%i, %n) ...                      // while_loop's cond_fn
      %c = "etcf.predicate"(%lt) : (tensor<i1>) -> i1
      scf.condition(%c) %i, %acc : tensor<i64>, tensor<3xf32>
    } do {
    ^bb0(%i: tensor<i64>, %acc: tensor<3xf32>):               // while_loop's body_fn
      ...
      scf.yield %i1, %acc1 : tensor<i64>, tensor<3xf32>
    }

Regions read values defined above them directly (scf's regions are not
isolated), so anything that orders the ops of a block (the delegation
partitioner) must count what an op's regions read as that op's operands:
`captured_values`. The executable level has no structured ops: et-to-out-variants
lowers them to `etx.jump_false` and `etx.move` (see `etmlir.executable.control_flow`).

Why `scf` and not ops of our own: IRDL gives every value of a variadic operand
or result group one type, and a branch's operands and results are tensors of
different types.
"""

from __future__ import annotations

from typing import Any

from torch_mlir import ir
from torch_mlir.dialects import irdl

from etmlir.dialects.edge import irdl_text, problem_verifier

PREDICATE = "etcf.predicate"
IF = "scf.if"
WHILE = "scf.while"
YIELD = "scf.yield"
CONDITION = "scf.condition"
# Ops with regions that etmlir lowers, and every op that only carries control flow.
STRUCTURED_OPS = (IF, WHILE)
CONTROL_FLOW_OPS = frozenset({IF, WHILE, YIELD, CONDITION, PREDICATE})
# `arith.select` on whole tensors: what `canonicalize` makes of an `scf.if` whose branches
# both return a value defined before it (`torch.cond(p, lambda x, y: x, lambda x, y: y, ...)`).
SELECT = "arith.select"
CONSTANT = "arith.constant"


def is_control_flow(op: ir.Operation | ir.OpView) -> bool:
    """True for `scf.if`/`scf.while`, their terminators and `etcf.predicate`."""
    return op.operation.name in CONTROL_FLOW_OPS


def is_tensor_select(op: ir.Operation | ir.OpView) -> bool:
    """`arith.select %c, %a, %b : tensor<...>` with a scalar `i1` condition."""
    op = op.operation
    return op.name == SELECT and len(op.operands) == 3 and isinstance(op.results[0].type, ir.RankedTensorType) \
        and str(op.operands[0].type) == "i1"


def captured_values(op: ir.Operation | ir.OpView) -> list[ir.Value]:
    """Values defined outside `op` that the ops in its regions read, in first-use order."""
    op = op.operation
    nested: list[ir.Operation] = []

    def collect(inner: ir.Operation) -> ir.WalkResult:
        if inner != op:
            nested.append(inner)
        return ir.WalkResult.ADVANCE

    op.walk(collect, ir.WalkOrder.PRE_ORDER)
    inside = set(nested) | {op}
    found: list[ir.Value] = []
    for inner in nested:
        for value in inner.operands:
            owner = value.owner
            defined_by = owner.owner if isinstance(owner, ir.Block) else owner  # a block argument's op
            defined_by = defined_by.operation if isinstance(defined_by, ir.OpView) else defined_by
            if defined_by not in inside and value not in found:
                found.append(value)
    return found


def _predicate_problem(op: ir.Operation) -> str | None:
    t = op.operands[0].type
    text = str(t)
    if isinstance(t, ir.RankedTensorType):
        tensor = ir.RankedTensorType(t)
        ok = str(tensor.element_type) == "i1" and tensor.has_static_shape and all(s == 1 for s in tensor.shape)
    else:  # the ATen level: !torch.vtensor<[],i1> (or [1], [1,1] ...)
        ok = text.startswith("!torch.vtensor<[") and text.endswith("],i1>") and all(
            s.strip() == "1" for s in text[len("!torch.vtensor<["):-len("],i1>")].split(",") if s.strip())
    if not ok:
        return f"etcf.predicate: the operand must be a one-element boolean tensor, got {text}"
    return None


_PredicateVerifier = problem_verifier(_predicate_problem)


class _NoMemoryEffects(ir.MemoryEffectsOpInterface):
    """Reading a predicate has no effect: unused ones are removed, equal ones merged."""

    @staticmethod
    def get_effects(op: object, effects: object) -> None:
        return None


def load_etcf_dialect(context: ir.Context) -> None:
    """Load `etcf` into `context` with its verifier and memory effects attached."""
    with context, ir.Location.unknown():
        irdl.load_dialects(ir.Module.parse(irdl_text("etcf")))
        ir.DynamicOpTrait.attach(PREDICATE, _PredicateVerifier)
        _NoMemoryEffects.attach(PREDICATE)


# ------------------------------------------------------------------------------------------ et-to-edge


def body_ops(function: ir.Operation) -> list[ir.Operation]:
    """Every op in `function`'s body, those inside `scf` regions included, in program order."""
    found: list[ir.Operation] = []

    def visit(block: ir.Block) -> None:
        for op in block.operations:
            op = op.operation
            found.append(op)
            for region in op.regions:
                for inner in region.blocks:
                    visit(inner)

    for block in function.regions[0].blocks:
        visit(block)
    return found


def _structured_ops(module: ir.Operation) -> list[ir.Operation]:
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name in (IF, WHILE):
            found.append(op)
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    return found


def retype_for_edge(module: ir.Operation, edge_type: Any) -> list[tuple[ir.Operation, str]]:
    """Give every `scf` op's results and region arguments their edge type (`edge_type(t)`), in place.

    The dialect conversion of et-to-edge rewrites torch ops, not `scf`: an op
    with regions cannot be rebuilt through the Python rewriter. Retyped first,
    the values an `scf` op defines are already edge values when the ops that
    read them are converted; `join_converted` then reconnects the operands.
    Returns (op, message) for a result type that has no edge form.
    """
    problems = []
    for op in _structured_ops(module):
        values = list(op.results) + [a for region in op.regions for block in region.blocks for a in block.arguments]
        for value in values:
            converted = edge_type(value.type) if str(value.type).startswith("!torch") else value.type
            if converted is None:
                problems.append((op, f"'{op.name}' carries a {value.type}; control flow carries tensors only"))
                continue
            value.set_type(converted)
    return problems


def join_converted(module: ir.Operation) -> None:
    """After the conversion: control-flow operands that read an edge value through a cast back to a
    torch type read the edge value itself; the casts are erased."""
    casts: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name in (IF, WHILE, YIELD, CONDITION, PREDICATE):
            for value in list(op.operands):
                owner = value.owner
                if isinstance(owner, ir.OpView):
                    owner = owner.operation
                if isinstance(owner, ir.Operation) and owner.name == "builtin.unrealized_conversion_cast" \
                        and len(owner.operands) == 1 and not str(owner.operands[0].type).startswith("!torch"):
                    op.replace_uses_of_with(value, owner.operands[0])
                    if not any(owner == c for c in casts):
                        casts.append(owner)
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    for cast in casts:
        if not any(True for r in cast.results for _ in r.uses):
            cast.erase()


def function_blocks(function: ir.Operation) -> list[ir.Block]:
    """The blocks of `function`'s body, then the blocks inside its control-flow ops (outermost first):
    what a pass that works block by block (the delegation partitioner) visits."""
    blocks = list(function.regions[0].blocks)
    for block in blocks:  # grows while it is walked
        for op in block.operations:
            if op.operation.name in STRUCTURED_OPS:
                blocks += [b for region in op.operation.regions for b in region.blocks]
    return blocks
