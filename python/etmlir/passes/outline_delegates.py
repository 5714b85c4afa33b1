"""et-outline-delegates: move each tagged group of edge ops into a nested module, behind a call.

A partitioner tagged the ops a backend runs (`etmlir.delegation_tag`). Each
tag becomes a module `@<tag>` holding `func.func @forward` with the group's
ops (their locations and debug handles kept), and the group is replaced by
one delegate call whose operands are the group's live-ins and whose results
are its live-outs:

    func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
      %0 = "edge.relu"(%x) {etmlir.delegation_tag = "nested_0", etmlir.debug_handle = 1 : i64}
      %1 = "edge.neg"(%0) {etmlir.delegation_tag = "nested_0", etmlir.debug_handle = 2 : i64}
      %2 = "edge.exp"(%1) {etmlir.debug_handle = 3 : i64}
      return %2 : tensor<4xf32>
    }

becomes

    func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
      %0 = call @nested_0.forward(%x) {etmlir.backend = "nested", etmlir.debug_handle = 4 : i64}
          : (tensor<4xf32>) -> tensor<4xf32>
      %1 = "edge.exp"(%0) {etmlir.debug_handle = 3 : i64}
      return %1 : tensor<4xf32>
    }
    func.func private @nested_0.forward(tensor<4xf32>) -> tensor<4xf32> attributes {etmlir.backend = "nested"}
    module @nested_0 attributes {etmlir.backend = "nested"} {
      func.func @forward(%arg0: tensor<4xf32>) -> tensor<4xf32> {
        %0 = "edge.relu"(%arg0) {etmlir.debug_handle = 1 : i64}
        %1 = "edge.neg"(%0) {etmlir.debug_handle = 2 : i64}
        return %1 : tensor<4xf32>
      }
    }

The call is a plain `func.call` of a private declaration `@<tag>.forward`
(the nested module's entry; `etmlir.backend` marks both). A declared (IRDL)
edge op could not be the call: IRDL unifies the types of a variadic operand
group, and a delegate's live-ins are tensors of different types.

Constants and size queries a group reads are copied into it (a weight
travels with the delegate that uses it; a constant nothing else reads is
then erased), except a tensor constant that an op outside the group reads
too: that one stays in the outer program and is passed to the delegate as
a live-in, so the `.pte` stores each weight once (not once in the constant
segment and again in a payload). Scalars and splats are always copied:
backends fold them into code. The call takes the place of the group's last op, and ops
between the group's first and last op that read its results move after the
call. A group that would need one of its own results as an input (an op
outside it on a path between two of its ops) is an error at that op: the
partitioners in `etmlir.backends` never make one. Dynamic live-ins and
live-outs keep their upper bounds (`etmlir.dynamic_dims` on the delegate's
arguments, `etmlir.upper_bounds` on the call), so both sides can plan memory.
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import func

from etmlir.delegation.partitioner import DELEGATE_CALL, OpGraph, defining_op, delegate_symbol, tag_backend
from etmlir.dialects import attrs
from etmlir.dialects.control_flow import function_blocks
from etmlir.dialects.edge import DYNAMIC
from etmlir.frontend.locations import common_module_path, module_path, source_line, with_module_path
from etmlir.frontend.shape_bounds import argument_max_sizes
from etmlir.passes.assign_debug_handles import next_debug_handle
from etmlir.passes.registry import PassFailure, emit_error, register_pass
from etmlir.passes.to_edge import recorded_upper_bounds

DELEGATE_FUNCTION = "forward"


def _call_location(tag: str, members: list[ir.Operation]) -> ir.Location:
    """The delegate call's location: named after its tag, at its first op's line, in the innermost
    module that holds all of its ops (`layers.0` for ops from `layers.0.ln` and `layers.0.attn`)."""
    location = ir.Location.name(tag, childLoc=members[0].location)
    paths = [module_path(op.location) for op in members]
    if any(path is None for path in paths):
        return location
    return with_module_path(location, common_module_path(paths))


def _result_bounds(value: ir.Value, func_op: ir.Operation) -> list[int] | None:
    """Upper bounds of a dynamic value: its producer's `etmlir.upper_bounds` or its argument's dims."""
    t = ir.RankedTensorType(value.type)
    if t.has_static_shape:
        return None
    owner = defining_op(value)
    if owner is None:
        if value.owner != func_op.regions[0].blocks[0]:
            return None  # a loop-carried value: its bound is not recorded at this level
        maxes = argument_max_sizes(func_op, ir.BlockArgument(value).arg_number)
        return [maxes.get(d, DYNAMIC) if t.is_dynamic_dim(d) else t.shape[d] for d in range(t.rank)]
    return recorded_upper_bounds(owner, ir.OpResult(value).result_number)


def _dynamic_dims_attr(t: ir.RankedTensorType, bounds: list[int] | None) -> ir.DictAttr:
    entries = {}
    for d in range(t.rank):
        if t.is_dynamic_dim(d) and bounds is not None and bounds[d] != DYNAMIC:
            entries[str(d)] = ir.DictAttr.get({"max": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), bounds[d])})
    return ir.DictAttr.get({attrs.DYNAMIC_DIMS: ir.DictAttr.get(entries)} if entries else {})


def declare_delegate(module: ir.Operation, tag: str, backend: str, in_types: list[ir.Type],
                     out_types: list[ir.Type], loc: ir.Location) -> None:
    """`func.func private @<tag>.forward(...)`: what a delegate call names (its body is the nested module)."""
    with ir.InsertionPoint(module.regions[0].blocks[0]), loc:
        decl = func.FuncOp(delegate_symbol(tag), ir.FunctionType.get(in_types, out_types), visibility="private")
        decl.attributes[attrs.BACKEND] = ir.StringAttr.get(backend)


def _shared_weight(op: ir.Operation, group: set[ir.Operation]) -> bool:
    """A non-splat tensor constant that an op outside `group` reads too: it stays a live-in."""
    if op.name != "edge.constant" or ir.RankedTensorType(op.results[0].type).rank == 0:
        return False
    value = op.attributes["value"]
    if isinstance(value, ir.DenseElementsAttr) and ir.DenseElementsAttr(value).is_splat:
        return False
    return any(use.owner.operation not in group for use in op.results[0].uses)


class _Outliner:
    def __init__(self, module: ir.Operation, func_op: ir.Operation, block: ir.Block) -> None:
        self.module = module
        self.func_op = func_op
        self.block = block

    def groups(self) -> dict[str, list[ir.Operation]]:
        groups: dict[str, list[ir.Operation]] = {}
        for op in self.block.operations:
            op = op.operation
            if attrs.DELEGATION_TAG in op.attributes:
                groups.setdefault(ir.StringAttr(op.attributes[attrs.DELEGATION_TAG]).value, []).append(op)
        return groups

    def outline(self, tag: str, members: list[ir.Operation]) -> None:
        backend = tag_backend(tag)
        graph = OpGraph(self.block)
        position = {op: i for i, op in enumerate(graph.ops)}
        group = {position[op] for op in members}
        blocker = graph.blocker(group)
        if blocker is not None:
            op = graph.ops[blocker]
            emit_error(op, f"delegation group '{tag}' would contain a cycle: '{op.name}' "
                           f"({source_line(op.location)}) is not in the group but reads one of its results "
                           "and feeds another of its ops; split the group (the partitioners in "
                           "etmlir.backends never make such a group)")
            raise PassFailure()
        members = [graph.ops[i] for i in sorted(group)]
        member_set = set(members)

        # Free ops (constants, size queries) the group reads, in program order, copied inside.
        copied: list[ir.Operation] = []

        def collect(op: ir.Operation) -> None:
            for value in op.operands:
                owner = defining_op(value)
                if owner is not None and owner not in member_set and owner in position and graph.free[position[owner]] \
                        and owner not in copied and not _shared_weight(owner, member_set):
                    collect(owner)
                    copied.append(owner)

        for op in members:
            collect(op)
        copied.sort(key=lambda op: position[op])
        inside = set(members) | set(copied)

        live_ins: list[ir.Value] = []
        for op in sorted(inside, key=lambda op: position[op]):
            for value in op.operands:
                if defining_op(value) not in inside and value not in live_ins:
                    live_ins.append(value)
        # A size query of a member's result that only the group reads is copied in and dropped outside:
        # it is no reason for the delegate to return that result.
        internal = {op for op in copied
                    if all(use.owner.operation in inside for r in op.results for use in r.uses)}
        # Positions, taken now: moving and erasing ops below leaves their Python handles unusable as keys.
        internal_at = {position[op] for op in internal}
        kept = [op for op in copied if position[op] not in internal_at]
        live_outs: list[ir.Value] = []
        for op in members:
            for result in op.results:
                if any(use.owner.operation not in member_set and use.owner.operation not in internal
                       for use in result.uses):
                    live_outs.append(result)

        in_types = [v.type for v in live_ins]
        out_types = [v.type for v in live_outs]
        self._check_free_symbol(tag)
        declare_delegate(self.module, tag, backend, in_types, out_types, members[0].location)
        nested = self._nested_module(tag, backend)
        with ir.InsertionPoint(nested.regions[0].blocks[0]), members[0].location:
            callee = func.FuncOp(DELEGATE_FUNCTION, ir.FunctionType.get(in_types, out_types))
            arg_attrs = [_dynamic_dims_attr(ir.RankedTensorType(v.type), _result_bounds(v, self.func_op))
                         for v in live_ins]
            if any(len(a) for a in arg_attrs):
                callee.attributes["arg_attrs"] = ir.ArrayAttr.get(arg_attrs)
            body = callee.add_entry_block()
        mapping: dict[ir.Value, ir.Value] = dict(zip(live_ins, body.arguments))
        with ir.InsertionPoint(body):
            for op in sorted(inside, key=lambda op: position[op]):
                attributes = {name: op.attributes[name] for name in op.attributes if name != attrs.DELEGATION_TAG}
                clone = ir.Operation.create(op.name, results=[r.type for r in op.results],
                                            operands=[mapping[v] for v in op.operands],
                                            attributes=attributes, loc=op.location)
                for old, new in zip(op.results, clone.results):
                    mapping[old] = new
            func.ReturnOp([mapping[v] for v in live_outs], loc=members[-1].location)

        # The call replaces the group's last op; dependents in between move after it.
        last = members[-1]
        after = [graph.ops[j] for j in graph.dependents(group)]
        call_attrs = {attrs.BACKEND: ir.StringAttr.get(backend),
                      "callee": ir.FlatSymbolRefAttr.get(delegate_symbol(tag)),
                      attrs.DEBUG_HANDLE: ir.IntegerAttr.get(ir.IntegerType.get_signless(64),
                                                            next_debug_handle(self.module))}
        bounds = [_result_bounds(v, self.func_op) for v in live_outs]
        if any(b is not None for b in bounds):
            call_attrs[attrs.UPPER_BOUNDS] = ir.ArrayAttr.get([
                ir.DenseI64ArrayAttr.get(b if b is not None else list(ir.RankedTensorType(v.type).shape))
                for v, b in zip(live_outs, bounds)])
        with ir.InsertionPoint(last):
            call = ir.Operation.create(DELEGATE_CALL, results=out_types, operands=live_ins,
                                       attributes=call_attrs,
                                       loc=_call_location(tag, members))
        call.move_after(last)
        anchor = call
        for op in after:
            if position[op] < position[last]:
                op.move_after(anchor)
                anchor = op
        for old, new in zip(live_outs, call.results):
            old.replace_all_uses_with(new)
        # Members and the queries of them only members read use each other: erase last-first.
        for i in sorted(group | internal_at, reverse=True):
            graph.ops[i].erase()
        for op in reversed(kept):
            if all(not list(r.uses) for r in op.results):
                op.erase()

    def _check_free_symbol(self, tag: str) -> None:
        for op in self.module.regions[0].blocks[0].operations:
            op = op.operation
            if "sym_name" in op.attributes and ir.StringAttr(op.attributes["sym_name"]).value in (
                    tag, delegate_symbol(tag)):
                emit_error(op, f"cannot outline delegation group '{tag}': the module already has a symbol "
                               f"@{ir.StringAttr(op.attributes['sym_name']).value}")
                raise PassFailure()

    def _nested_module(self, tag: str, backend: str) -> ir.Operation:
        top = self.module.regions[0].blocks[0]
        with ir.InsertionPoint(top), self.module.location:
            nested = ir.Operation.create("builtin.module", regions=1,
                                         attributes={"sym_name": ir.StringAttr.get(tag),
                                                     attrs.BACKEND: ir.StringAttr.get(backend)})
            nested.regions[0].blocks.append()
        return nested


@register_pass("et-outline-delegates", level="edge")
def outline_delegates(module: ir.Operation) -> None:
    """et-outline-delegates: move each tagged op group into a nested module behind a delegate call."""
    for func_op in [op.operation for op in module.regions[0].blocks[0].operations]:
        if func_op.name != "func.func" or len(func_op.regions[0].blocks) == 0:
            continue
        for block in function_blocks(func_op):  # a branch's or loop body's groups: in their block
            outliner = _Outliner(module, func_op, block)
            for tag, members in outliner.groups().items():
                try:
                    tag_backend(tag)
                except ValueError as error:
                    emit_error(members[0], str(error))
                    raise PassFailure() from None
                outliner.outline(tag, members)
