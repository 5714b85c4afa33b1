"""Partitioners: tag the edge ops a backend will run, in the largest groups that create no cycle.

A partitioner walks each function of an edge module, asks its backend's
`OperatorSupport` about every op, and groups the supported ones. A group
becomes one delegate call (`et-outline-delegates`), so a group must be
*convex*: no op outside it may sit on a path between two of its ops, or the
call would need its own result as an input.

    x ─▶ A ─▶ B          A and B supported, N not: {A, B} as one call would
          └─▶ N ─▶┘      need N's result (made from A's) before running A.

Grouping is greedy in program order: each supported op joins the groups of
its supported producers when the union stays convex (largest group first),
and starts a new group otherwise. Constants and size queries are not
grouped: `et-outline-delegates` copies them into each delegate that uses
them, so they never cut a group apart.

The result is written on the ops, so it can be printed, tested with lit and
edited before outlining:

    %0 = "edge.addmm"(...) {etmlir.delegation_tag = "nested_0", ...}
    %1 = "edge.embedding"(...) {etmlir.not_delegated = {nested = "edge.embedding is in skip_ops"}, ...}

Groups below `min_group_size` ops are not tagged (the refusal says so).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping

from torch_mlir import ir

from etmlir.delegation.operator_support import FREE_OPS, OperatorSupport
from etmlir.dialects import attrs
from etmlir.dialects.control_flow import captured_values, function_blocks, is_control_flow
from etmlir.dialects.sym_ops import SIZE_OPS

# The call of an outlined delegate is a `func.call` of the declaration `@<tag>.forward`
# (`etmlir.backend` on both): IRDL unifies the types of a variadic operand group, so a declared
# edge op could not take a delegate's live-ins, which are tensors of different types.
DELEGATE_CALL = "func.call"
DELEGATE_ENTRY = "forward"


def is_delegate_call(op: ir.Operation) -> bool:
    """`func.call @nested_0.forward(...) {etmlir.backend = "nested"}`: a call of an outlined delegate."""
    return op.name == DELEGATE_CALL and attrs.BACKEND in op.attributes


def delegate_callee(op: ir.Operation) -> str:
    """The nested module a delegate call runs (`nested_0` for `@nested_0.forward`)."""
    callee = ir.FlatSymbolRefAttr(op.attributes["callee"]).value
    return callee[:-len("." + DELEGATE_ENTRY)] if callee.endswith("." + DELEGATE_ENTRY) else callee


def delegate_symbol(tag: str) -> str:
    """The declaration a delegate call names: `nested_0.forward`."""
    return f"{tag}.{DELEGATE_ENTRY}"


# Size queries are never grouped: each delegate that reads one computes it again itself.
SIZE_QUERY_REASON = "edge.sym_size_int: a size query stays with its readers (copied into each delegate that reads it)"
# Nor is arithmetic on sizes (edge.sym_mul, ...): it travels with the size queries it reads.
SIZE_ARITHMETIC_REASON = "size arithmetic stays with its readers (copied into each delegate that reads it)"


def tag_backend(tag: str) -> str:
    """`nested_0` -> `nested`: a tag is `<backend>_<n>`."""
    backend, _, number = tag.rpartition("_")
    if not backend or not number.isdigit():
        raise ValueError(f"delegation tag '{tag}' is not of the form <backend>_<n>")
    return backend


def defining_op(value: ir.Value) -> ir.Operation | None:
    """The op that defines `value` (None for a block argument)."""
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    return owner.operation if isinstance(owner, ir.OpView) else owner


class OpGraph:
    """The ops of one block as integers: effective producers (through free ops) per op."""

    def __init__(self, block: ir.Block) -> None:
        self.ops = [op.operation for op in block.operations]
        position = {op: i for i, op in enumerate(self.ops)}
        self.free = [op.name in FREE_OPS for op in self.ops]
        self.producers: list[frozenset[int]] = []
        for i, op in enumerate(self.ops):
            found: set[int] = set()
            # An op with regions (scf.if, scf.while) also reads what its regions read.
            reads = list(op.operands) + (captured_values(op) if op.regions else [])
            for value in reads:
                owner = defining_op(value)
                p = position.get(owner) if owner is not None else None
                if p is None:
                    continue
                # A free op is copied into whoever uses it: look through it to what it reads.
                found |= self.producers[p] if self.free[p] else {p}
            self.producers.append(frozenset(found))

    def blocker(self, group: set[int]) -> int | None:
        """An op outside `group` on a path between two of its ops (None: the group is convex)."""
        reached = set(self.dependents(group))  # (a free op is never anyone's producer)
        for s in sorted(group):
            for p in self.producers[s]:
                if p in reached:
                    return p
        return None

    def dependents(self, group: set[int]) -> list[int]:
        """Ops outside `group`, within its span, that read its results directly or indirectly
        (size queries included: they must follow the call that now produces what they measure)."""
        lo, hi = min(group), max(group)
        reached: list[int] = []
        seen: set[int] = set()
        for j in range(lo, hi + 1):
            if j in group:
                continue
            if any(p in group or p in seen for p in self.producers[j]):
                seen.add(j)
                reached.append(j)
        return reached


def convex_groups(graph: OpGraph, supported: list[bool]) -> list[list[int]]:
    """Greedy cycle-free grouping of the supported ops, in program order."""
    group_of: dict[int, int] = {}
    members: dict[int, set[int]] = {}
    next_id = 0
    for i in range(len(graph.ops)):
        if not supported[i]:
            continue
        candidates = sorted({group_of[p] for p in graph.producers[i] if p in group_of},
                            key=lambda g: (-len(members[g]), min(members[g])))
        merged, chosen = {i}, []
        for g in candidates:
            trial = merged | members[g]
            if graph.blocker(trial) is None:
                merged, chosen = trial, chosen + [g]
        if chosen:
            target = chosen[0]
            for g in chosen[1:]:
                del members[g]
        else:
            target, next_id = next_id, next_id + 1
        members[target] = merged
        for m in merged:
            group_of[m] = target
    return sorted((sorted(m) for m in members.values()), key=lambda m: m[0])


@dataclasses.dataclass
class PartitionResult:
    """What a partitioner did to a module: tags made, op counts, refusals (op, reason)."""

    backend_id: str
    tags: list[str]
    delegated_ops: int
    refused: list[tuple[ir.Operation, str]]


@dataclasses.dataclass
class Partitioner:
    """Tags ops for one backend: `OperatorSupport` + capability-based convex grouping.

    min_group_size: groups with fewer ops stay on portable kernels (a delegate call has a cost)
    skip_ops:       edge op names to leave out (e.g. to keep a layer on portable kernels)
    compile_specs:  handed to the backend's preprocess for every group this partitioner makes
    keep:           ATen ops outside Core ATen the backend runs whole; `ops_to_keep()` is what to
                    pass to `EdgeCompileConfig(keep=...)`
    """

    backend_id: str
    support: OperatorSupport
    min_group_size: int = 1
    skip_ops: tuple[str, ...] = ()
    compile_specs: Mapping[str, str] = dataclasses.field(default_factory=dict)
    keep: tuple[str, ...] = ()

    def ops_to_keep(self) -> tuple[str, ...]:
        """The ATen ops `to_edge` should leave whole for this partitioner: the backend's `keep`, less
        those whose edge op the user's `ops` / `skip_ops` leave out (a kept op must be delegated)."""
        from etmlir.dialects.edge import edge_ops_by_aten
        by_aten = edge_ops_by_aten()
        kept = []
        for name in self.keep:
            overload = name if name.count(".") == 2 else f"{name}.default"
            edge = by_aten.get(overload)
            op_name = f"edge.{edge.mnemonic}" if edge is not None else None
            if op_name is None or op_name in self.support.skip_ops or \
                    (self.support.ops is not None and op_name not in self.support.ops):
                continue
            kept.append(name)
        return tuple(kept)

    def __post_init__(self) -> None:
        if self.min_group_size < 1:
            raise ValueError(f"min_group_size must be at least 1, got {self.min_group_size}")
        if self.skip_ops:
            self.support = self.support.with_options(skip_ops=self.skip_ops)

    def partition(self, module: ir.Operation) -> PartitionResult:
        """Tag the supported ops of every top-level function of `module` (in place); the ops of a
        branch or loop body are grouped within their own block."""
        result = PartitionResult(self.backend_id, [], 0, [])
        with module.context:
            number = first_free_number(module, self.backend_id)
            for func_op in _functions(module):
                for block in function_blocks(func_op):
                    number = self._partition_block(block, number, result)
        return result

    def _partition_block(self, block: ir.Block, number: int, result: PartitionResult) -> int:
        graph = OpGraph(block)
        reasons: list[str | None] = []
        for op in graph.ops:
            if op.name == "edge.sym_size_int":
                reasons.append(SIZE_QUERY_REASON)
            elif op.name in SIZE_OPS:
                reasons.append(f"{op.name}: {SIZE_ARITHMETIC_REASON}")
            elif op.name in FREE_OPS or op.name == "func.return" or is_delegate_call(op) or attrs.DELEGATION_TAG in op.attributes \
                    or is_control_flow(op):  # (a branch's ops are partitioned in their own block)
                reasons.append("")  # not a candidate, and nothing to report
            else:
                reasons.append(self.support.refusal(op))
        supported = [r is None for r in reasons]
        for group in convex_groups(graph, supported):
            if len(group) < self.min_group_size:
                for i in group:
                    reasons[i] = (f"{graph.ops[i].name}: in a group of {len(group)} op(s), below "
                                  f"min_group_size={self.min_group_size}")
                continue
            tag = f"{self.backend_id}_{number}"
            number += 1
            result.tags.append(tag)
            result.delegated_ops += len(group)
            for i in group:
                graph.ops[i].attributes[attrs.DELEGATION_TAG] = ir.StringAttr.get(tag)
        for i, op in enumerate(graph.ops):
            if op.name == "tensor.cast" and attrs.DELEGATION_TAG not in op.attributes:
                tag = _sole_user_tag(op)
                if tag is not None:
                    op.attributes[attrs.DELEGATION_TAG] = ir.StringAttr.get(tag)
                    reasons[i] = ""
        for op, reason in zip(graph.ops, reasons):
            if reason:
                record_refusal(op, self.backend_id, reason)
                result.refused.append((op, reason))
        return number


def _sole_user_tag(cast: ir.Operation) -> str | None:
    """The delegation tag every user of `cast` carries, if they all carry the same one.

    Edge ops whose operands form one variadic group (`edge.cat` of a class token [1,1,D] and
    patches [1,16,D]) take them through a `tensor.cast` to a shared type with a `?` dim. Left
    outside, the cast would make the delegate's input dynamic, with no bound; pulled into the
    delegate with its users, the delegate takes the static value.
    """
    tags = set()
    for use in cast.results[0].uses:
        owner = use.owner
        owner = owner.operation if hasattr(owner, "operation") else owner
        if attrs.DELEGATION_TAG not in owner.attributes:
            return None
        tags.add(ir.StringAttr(owner.attributes[attrs.DELEGATION_TAG]).value)
    return tags.pop() if len(tags) == 1 else None


def record_refusal(op: ir.Operation, backend_id: str, reason: str) -> None:
    """Add `backend_id: reason` to the op's `etmlir.not_delegated` dictionary."""
    entries = {}
    if attrs.NOT_DELEGATED in op.attributes:
        entries = {e.name: e.attr for e in ir.DictAttr(op.attributes[attrs.NOT_DELEGATED])}
    entries[backend_id] = ir.StringAttr.get(reason)
    op.attributes[attrs.NOT_DELEGATED] = ir.DictAttr.get(entries)


def _functions(module: ir.Operation) -> Iterable[ir.Operation]:
    for op in module.regions[0].blocks[0].operations:
        if op.operation.name == "func.func" and len(op.operation.regions[0].blocks) > 0:
            yield op.operation


def first_free_number(module: ir.Operation, backend_id: str) -> int:
    """The first n with no `<backend>_<n>` yet in `module` (as a tag or a nested module)."""
    pattern = re.compile(rf"^{re.escape(backend_id)}_(\d+)$")
    used = [-1]

    def visit(op: ir.Operation) -> ir.WalkResult:
        for name in (attrs.DELEGATION_TAG, "sym_name", "callee"):
            if name in op.attributes:
                attr = op.attributes[name]
                text = (ir.StringAttr(attr).value if isinstance(attr, ir.StringAttr)
                        else ir.FlatSymbolRefAttr(attr).value if isinstance(attr, ir.FlatSymbolRefAttr) else "")
                text = text.split(".")[0]
                match = pattern.match(text)
                if match:
                    used.append(int(match.group(1)))
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    return max(used) + 1
