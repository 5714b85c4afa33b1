"""torch.cond, while_loop and map: how an exported program's control flow is imported.

torch.export keeps control flow as higher-order ops whose branches and
bodies are child graph modules (`true_graph_0`, `while_loop_body_graph_0`).
torch-mlir's importer imports each child as a private function before the
graph that uses it; the node importer here inlines those functions into the
regions of `scf` ops (see `etmlir.dialects.control_flow`), so the ATen
program is one function with structured control flow:

    torch.cond(p, true_fn, false_fn, (x,))
      -> %c = "etcf.predicate"(%p) : (!torch.vtensor<[],i1>) -> i1
         %r = scf.if %c -> (!torch.vtensor<[3],f32>) { <true_fn's ops>; scf.yield ... }
              else { <false_fn's ops>; scf.yield ... }

    while_loop(cond_fn, body_fn, (i, acc), (n,))
      -> %r:2 = scf.while (%a = %i, %b = %acc) : ... {
           <cond_fn's ops>; scf.condition(%c) %a, %b
         } do { ^bb0(%a, %b): <body_fn's ops>; scf.yield %a2, %b2 }

Branch operands and a loop's additional inputs are read directly from the
enclosing region (no block arguments); only loop-carried values are block
arguments. Where a branch returns a type the op's declared result type
refines or generalizes (a static `[2,3]` for a result torch.export typed
`[s0,3]`), a `torch.tensor_static_info_cast` joins them.

`map(f, xs, *args)` is unrolled in the FX graph before import (its mapped
dim must be static): `f` runs on `xs.select(0, i)` for every i and
`aten.stack` joins the results, so every later stage sees straight-line
code. Each inlined op keeps its own source line, which `etmlir.export` makes
the branch's line (not the call's) by tracing under `preserve_node_meta`.
"""

from __future__ import annotations

import operator
import re
from typing import Any

from torch_mlir import ir
from torch_mlir.extras.fx_importer import GraphNodeImporter

from etmlir.dialects.control_flow import CONDITION, IF, PREDICATE, WHILE, YIELD
from etmlir.frontend.locations import is_library_file
from etmlir.lazy import lazy_module

torch = lazy_module("torch")

# On a private function the importer made of a branch or body, once it has been inlined.
INLINED = "etmlir.inlined"


class ControlFlowError(ValueError):
    """Control flow etmlir cannot compile; the message names the source line."""


def where(node: Any) -> str:
    """`model.py:41`: the innermost frame in the user's code of an FX node's stack trace."""
    frames = re.findall(r'File "([^"]+)", line (\d+)', node.meta.get("stack_trace") or "")
    user = [f for f in frames if not is_library_file(f[0])]
    if not user:
        return "<unknown location>"
    path, line = user[-1]
    return f"{path}:{line}"


# ------------------------------------------------------------------------------------------ map


def unroll_maps(exported: Any) -> None:
    """Replace every `map_impl` in `exported` (child graphs included) by its unrolled body, in place."""
    for gm in _graph_modules(exported.graph_module):
        maps = [n for n in gm.graph.nodes if n.op == "call_function"
                and n.target is torch.ops.higher_order.map_impl]
        for node in maps:
            _unroll_map(gm, node)
        if maps:
            gm.graph.eliminate_dead_code()
            gm.delete_all_unused_submodules()
            gm.recompile()


def _graph_modules(gm: Any) -> list[Any]:
    """`gm` and every graph module below it, children before their parents."""
    found = []
    for child in gm.children():
        if isinstance(child, torch.fx.GraphModule):
            found += _graph_modules(child)
    return found + [gm]


def _unroll_map(gm: Any, node: Any) -> None:
    body_node, xs, args = node.args
    body = getattr(gm, body_node.target)
    xs, args = list(xs), list(args)
    values = [x.meta["val"] for x in xs]
    count = values[0].shape[0]
    if not isinstance(count, int):
        raise ControlFlowError(
            f"{where(node)}: map over a dim of size {count}, which is only known at run time; etmlir unrolls "
            "map and needs the mapped dim static (export with that dim static, or write the loop as "
            "torch._higher_order_ops.while_loop)")
    if count == 0:
        raise ControlFlowError(f"{where(node)}: map over an empty dim")
    placeholders = [n for n in body.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(xs) + len(args):
        raise ControlFlowError(f"{where(node)}: map body takes {len(placeholders)} inputs, "
                               f"the call gives {len(xs) + len(args)}")
    trace = node.meta.get("stack_trace")
    graph = gm.graph
    per_step: list[list[Any]] = []
    with graph.inserting_before(node):
        for i in range(count):
            env: dict[Any, Any] = dict(zip(placeholders[len(xs):], args))
            for placeholder, x, value in zip(placeholders, xs, values):
                sliced = graph.call_function(torch.ops.aten.select.int, (x, 0, i))
                sliced.meta = {"val": value.select(0, i), "stack_trace": trace}
                env[placeholder] = sliced
            outputs: list[Any] = []
            for inner in body.graph.nodes:
                if inner.op == "placeholder":
                    continue
                if inner.op == "output":
                    outputs = [env[o] for o in _flat(inner.args[0])]
                elif inner.op == "get_attr":  # a nested HOP's branch: now an attribute of `gm`
                    name = _free_attribute(gm, f"{body_node.target}_{inner.target}")
                    setattr(gm, name, getattr(body, inner.target))
                    env[inner] = graph.get_attr(name)
                    env[inner].meta = dict(inner.meta)
                else:
                    env[inner] = graph.node_copy(inner, lambda a: env[a])
            per_step.append(outputs)
        stacked = []
        for k, value in enumerate(node.meta["val"]):
            joined = graph.call_function(torch.ops.aten.stack.default, ([step[k] for step in per_step], 0))
            joined.meta = {"val": value, "stack_trace": trace}
            stacked.append(joined)
    for user in list(node.users):
        if user.op != "call_function" or user.target is not operator.getitem:
            raise ControlFlowError(f"{where(node)}: map's result is used other than by indexing")
        user.replace_all_uses_with(stacked[user.args[1]])
        graph.erase_node(user)
    graph.erase_node(node)


def _flat(value: Any) -> list[Any]:
    return [v for item in value for v in _flat(item)] if isinstance(value, (list, tuple)) else [value]


def _free_attribute(gm: Any, stem: str) -> str:
    name, n = stem, 0
    while hasattr(gm, name):
        n += 1
        name = f"{stem}_{n}"
    return name


# ------------------------------------------------------------------------------------------ import


class ControlFlowImporter(GraphNodeImporter):
    """torch-mlir's node importer, with `cond` and `while_loop` imported as `scf.if` / `scf.while`."""

    def _import_hop_cond(self, loc: ir.Location, node: Any, hop: Any) -> None:
        pred, true_fn, false_fn, operands = node.args
        pred_value = pred.meta.get("val") if isinstance(pred, torch.fx.Node) else pred
        if not isinstance(pred_value, torch.Tensor):
            raise ControlFlowError(
                f"{where(node)}: torch.cond's predicate is a {type(pred_value).__name__} computed from sizes; "
                "etmlir takes a boolean tensor (torch.cond(x.sum() > 0, ...)) as the predicate")
        result_types = self._result_types(node, "torch.cond")
        with ir.InsertionPoint(self._b), loc:
            condition = self._predicate(self._import_argument(loc, pred), node)
            inputs = [self._import_argument(loc, a) for a in operands]
            if_op = ir.Operation.create(IF, results=result_types, operands=[condition], regions=2)
        for region, branch in zip(if_op.regions, (true_fn, false_fn)):
            with loc:
                block = ir.Block.create_at_start(region, [])
            returned = self._inline(branch, block, inputs, loc)
            with ir.InsertionPoint(block), loc:
                ir.Operation.create(YIELD, operands=_cast_all(returned, result_types))
        self._bind_results(node, if_op)

    def _import_hop_while_loop(self, loc: ir.Location, node: Any, hop: Any) -> None:
        if len(node.args) != 4:
            raise ControlFlowError(f"{where(node)}: while_loop with {len(node.args)} arguments "
                                   "(expected cond_fn, body_fn, carried_inputs, additional_inputs)")
        cond_fn, body_fn, carried, additional = node.args
        for value in carried:
            if not isinstance(getattr(value, "meta", {}).get("val"), torch.Tensor):
                raise ControlFlowError(f"{where(node)}: while_loop carries a {type(value).__name__}; etmlir "
                                       "carries tensors only (wrap a counter as torch.tensor(0))")
        types = self._result_types(node, "while_loop")
        with ir.InsertionPoint(self._b), loc:
            inits = _cast_all([self._import_argument(loc, c) for c in carried], types)
            extras = [self._import_argument(loc, a) for a in additional]
            while_op = ir.Operation.create(WHILE, results=types, operands=inits, regions=2)
            before = ir.Block.create_at_start(while_op.regions[0], types)
            after = ir.Block.create_at_start(while_op.regions[1], types)
        returned = self._inline(cond_fn, before, list(before.arguments) + extras, loc)
        if len(returned) != 1:
            raise ControlFlowError(f"{where(node)}: while_loop's cond_fn returns {len(returned)} values, not one")
        with ir.InsertionPoint(before), loc:
            condition = self._predicate(returned[0], node)
            ir.Operation.create(CONDITION, operands=[condition] + list(before.arguments))
        returned = self._inline(body_fn, after, list(after.arguments) + extras, loc)
        with ir.InsertionPoint(after), loc:
            ir.Operation.create(YIELD, operands=_cast_all(returned, types))
        self._bind_results(node, while_op)

    def _import_hop_map_impl(self, loc: ir.Location, node: Any, hop: Any) -> None:
        raise ControlFlowError(f"{where(node)}: map must be unrolled before import "
                               "(etmlir.frontend.control_flow.unroll_maps; etmlir.export does it)")

    # -- helpers ----------------------------------------------------------------------------

    def _result_types(self, node: Any, what: str) -> list[ir.Type]:
        values = node.meta.get("val")
        values = list(values) if isinstance(values, (list, tuple)) else [values]
        for value in values:
            if not isinstance(value, torch.Tensor):
                raise ControlFlowError(f"{where(node)}: {what} returns a {type(value).__name__}; etmlir "
                                       "supports tensor results only")
        return [self._cc.value_info_to_type(v) for v in values]

    def _predicate(self, value: ir.Value, node: Any) -> ir.Value:
        text = str(value.type)
        if not text.endswith(",i1>") and not text.endswith("[],i1>"):
            raise ControlFlowError(f"{where(node)}: the condition is {text}, not a boolean tensor")
        return ir.Operation.create(PREDICATE, results=[ir.IntegerType.get_signless(1)], operands=[value]).result

    def _bind_results(self, node: Any, op: ir.Operation) -> None:
        self._multi_result_nodes.add(node)
        for index, result in enumerate(op.results):
            self.bind_node_value(node, result, index)

    def _inline(self, graph_node: Any, block: ir.Block, arguments: list[ir.Value],
                loc: ir.Location) -> list[ir.Value]:
        """Move a copy of the function imported from `graph_node`'s module into `block`, its
        arguments replaced by `arguments`; returns the values it returned."""
        if getattr(graph_node, "op", None) != "get_attr":
            raise ControlFlowError(f"a control-flow branch is a {graph_node!r}, not a graph module")
        module = getattr(graph_node.graph.owning_module, graph_node.target)
        name = self.fx_importer._graph_module_to_func_name[id(module)]
        function = self.fx_importer.symbol_table[name].operation
        function.attributes[INLINED] = ir.UnitAttr.get()
        copy = function.clone(ip=False)
        body = copy.regions[0].blocks[0]
        if len(body.arguments) != len(arguments):
            raise ControlFlowError(f"branch @{name} takes {len(body.arguments)} values; the call gives "
                                   f"{len(arguments)}")
        with ir.InsertionPoint(block), loc:
            for parameter, value in zip(body.arguments, arguments):
                parameter.replace_all_uses_with(_cast(value, parameter.type))
        ops = [op.operation for op in body.operations]
        returned = list(ops[-1].operands)
        for op in ops[:-1]:
            block.append(op)
        copy.erase()
        return returned


def _cast(value: ir.Value, target: ir.Type) -> ir.Value:
    """`value` as `target` (same dtype and rank, sizes refined or generalized), at the insertion point."""
    if value.type == target:
        return value
    return ir.Operation.create("torch.tensor_static_info_cast", results=[target], operands=[value]).result


def _cast_all(values: list[ir.Value], types: list[ir.Type]) -> list[ir.Value]:
    if len(values) != len(types):
        raise ControlFlowError(f"a branch returns {len(values)} values where {len(types)} are expected")
    return [_cast(v, t) for v, t in zip(values, types)]


def erase_inlined_functions(module: ir.Module) -> None:
    """Remove the private functions `ControlFlowImporter` inlined (each branch now lives in its op)."""
    for op in list(module.body.operations):
        op = op.operation
        if op.name == "func.func" and INLINED in op.attributes:
            op.erase()

