"""et-decompose-to-core-aten: rewrite every op outside Core ATen into Core ATen ops, keeping its location.

    %w = torch.aten.linear %x, %W, %b : ... -> !torch.vtensor<[1,?,128],f32> loc("model.py":41:0)

becomes PyTorch's own decomposition of `aten.linear` for these operand types,
every op carrying the original location:

    %0 = torch.aten.size.int %x, %int1 : ... loc("model.py":41:0)
    %1 = torch.aten.view %x, %list : ... -> !torch.vtensor<[?,64],f32> loc("model.py":41:0)
    %2 = torch.aten.permute %W, %perm : ... loc("model.py":41:0)
    %3 = torch.aten.addmm %b, %1, %2, %int1, %int1 : ... loc("model.py":41:0)
    %w = torch.aten.view %3, %list2 : ... -> !torch.vtensor<[1,?,128],f32> loc("model.py":41:0)

The decomposition comes from PyTorch's core table (`torch.export.default_decompositions`),
traced for the op's operand types with fake tensors (see
`etmlir.frontend.decompositions`), imported with torch-mlir's FX importer and
spliced in place of the op. Ops named in `keep` (e.g.
`keep=aten.upsample_bilinear2d.vec,aten.scaled_dot_product_attention`) are
left alone so decomposition never fights a backend's partitioner; a kept op's
own decomposition is never used, but an op that PyTorch decomposes through a
kept op (rather than by table lookup) can still decompose it.

An op that cannot be decomposed (no decomposition exists, an operand that is
not a constant where the decomposition needs one, a decomposition that only
holds for some dynamic sizes) is an error naming the op and its location.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch_mlir import ir

from etmlir.frontend.aten_ops import (
    RuntimeValue, UndecodableOperand, call_arguments, decode_arguments, lookup_overload, op_overload_name, parse_vtensor_type)
from etmlir.frontend.core_aten import is_core_aten, normalize_keep
from etmlir.frontend.decompositions import (
    DecompositionError, TracedDecomposition, decomposition_table, trace_decomposition)
from etmlir.lazy import lazy_module
from etmlir.passes.registry import Option, PassFailure, aten_op_name, each, emit_error, register_pass

torch = lazy_module("torch")
fx_importer = lazy_module("torch_mlir.extras.fx_importer")

# A decomposition may produce ops that decompose further; a handful of rounds reaches a fixed point.
_MAX_ROUNDS = 8


@register_pass("et-decompose-to-core-aten", level="torch", options={
    "keep": Option(list, [], "ATen ops to leave undecomposed, e.g. aten.upsample_bilinear2d.vec",
                   check=each(aten_op_name)),
})
def decompose_to_core_aten(module: ir.Operation, *, keep: list[str]) -> None:
    """et-decompose-to-core-aten: rewrite non-Core-ATen ops into Core ATen ops (PyTorch's decompositions)."""
    keep_set = normalize_keep(keep)
    decompose_ops(module, lambda op: not is_core_aten(op, keep_set), decomposition_table(keep_set),
                  goal="Core ATen")


def decompose_ops(module: ir.Operation, should_decompose: Callable[[ir.Operation], bool], table: dict,
                  goal: str) -> None:
    """Replace every ATen op for which `should_decompose` holds by its decomposition from `table`.

    Repeats until no such op is left (a decomposition may produce more); emits
    an error per op it cannot decompose and raises PassFailure.
    """
    splicer = _Splicer(module.context, table)
    for _ in range(_MAX_ROUNDS):
        pending = _ops_matching(module, should_decompose)
        if not pending:
            return
        failed = 0
        for op in pending:
            try:
                splicer.replace(op)
            except DecompositionError as exc:
                emit_error(op, f"cannot decompose '{op_overload_name(op)}' to {goal}: {exc}")
                failed += 1
        if failed:
            raise PassFailure()
    for op in _ops_matching(module, should_decompose):
        emit_error(op, f"'{op_overload_name(op)}' is still not {goal} after {_MAX_ROUNDS} rounds")
    raise PassFailure()


def _ops_matching(module: ir.Operation, predicate: Callable[[ir.Operation], bool]) -> list[ir.Operation]:
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op_overload_name(op) is not None and predicate(op):
            found.append(op)
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    return found


class _Splicer:
    """Replaces one op by its imported decomposition; traces are cached by call signature."""

    def __init__(self, context: ir.Context, table: dict) -> None:
        self._importer = fx_importer.FxImporter(context=context)
        self._table = table
        self._cache: dict[str, torch.fx.GraphModule] = {}
        self._count = 0

    def replace(self, op: ir.Operation) -> None:
        name = op_overload_name(op)
        overload = lookup_overload(name)
        if overload is None:
            raise DecompositionError(f"PyTorch has no operator named '{name}'")
        args, kwargs = _decode_call(op, overload)
        key = repr((name, args, kwargs))
        cached = self._cache.get(key)
        if cached is None:
            traced = trace_decomposition(name, overload, args, kwargs, self._table)
            _check_progress(name, traced)
            self._cache[key] = traced.graph_module
            graph_module = traced.graph_module
        else:
            graph_module = cached
        runtime_operands = _runtime_values(args, kwargs)
        self._count += 1
        with op.context:
            func = self._importer.import_stateless_graph(
                graph_module.graph, func_name=f"__etmlir_decomposition_{self._count}")
        _splice(func, op, runtime_operands)


def _decode_call(op: ir.Operation, overload: Any) -> tuple[list[Any], dict[str, Any]]:
    try:
        return call_arguments(decode_arguments(op, overload))
    except UndecodableOperand as exc:
        raise DecompositionError(f"argument '{exc.argument}': {exc}" if exc.argument else str(exc)) from None


def _runtime_values(args: list[Any], kwargs: dict[str, Any]) -> list[ir.Value]:
    """The run-time operands in the order `trace_decomposition` made placeholders of them."""
    found: list[ir.Value] = []

    def collect(value: Any) -> None:
        if isinstance(value, RuntimeValue):
            found.append(value.value)
        elif isinstance(value, list):
            for v in value:
                collect(v)

    for value in list(args) + list(kwargs.values()):
        collect(value)
    return found


def _check_progress(name: str, traced: TracedDecomposition) -> None:
    for node in traced.graph_module.graph.nodes:
        if node.op == "call_function" and str(node.target) in (name, name.removesuffix(".default")):
            raise DecompositionError(
                "PyTorch has no decomposition for it; keep it for a backend that implements it "
                f"(keep={name}) or rewrite the model")


def _splice(func: ir.Operation, target: ir.Operation, operands: list[ir.Value]) -> None:
    """Move `func`'s body in front of `target`, wire it to `operands`, and replace `target`'s results."""
    block = func.regions[0].blocks[0]
    if len(block.arguments) != len(operands):
        raise DecompositionError(
            f"internal: decomposition takes {len(block.arguments)} values, the op supplies {len(operands)}")
    for argument, value in zip(block.arguments, operands):
        argument.replace_all_uses_with(value)
    body = list(block.operations)
    returned = list(body[-1].operands)
    location = target.location
    for op in body[:-1]:
        op.move_before(target)
        op.location = location
    replacements = _match_results(target, returned, location)
    for old, new in zip(target.results, replacements):
        old.replace_all_uses_with(new)
    for new in replacements:
        _fold_list_unpacks(new)
    inputs = [v.owner for v in target.operands if isinstance(v.owner, (ir.Operation, ir.OpView))]
    target.erase()
    func.erase()
    _erase_dead([r.owner for r in replacements if isinstance(r.owner, (ir.Operation, ir.OpView))]
                + [op for op in body[:-1]] + inputs)


def _fold_list_unpacks(value: ir.Value) -> None:
    """`torch.prim.ListUnpack(torch.prim.ListConstruct(a, b))` -> a, b."""
    owner = value.owner
    if not isinstance(owner, (ir.Operation, ir.OpView)) or owner.name != "torch.prim.ListConstruct":
        return
    elements = list(owner.operands)
    for use in list(value.uses):
        user = use.owner
        if user.name == "torch.prim.ListUnpack" and len(user.results) == len(elements):
            for result, element in zip(user.results, elements):
                result.replace_all_uses_with(element)
            user.erase()


# Ops with effects beyond their results: never erased as dead.
_EFFECTFUL = ("torch.runtime.assert", "torch.aten._assert", "torch.bind_symbolic_shape")


def _erase_dead(candidates: list[ir.Operation]) -> None:
    """Erase candidates (and, transitively, their producers) whose results are all unused.

    Only live ops are ever compared or inspected: a Python handle to an erased
    op must not be touched again, so each op is dropped from the list as it is erased.
    """
    alive: list[ir.Operation] = []

    def add(op: ir.Operation) -> None:
        op = op.operation
        if op.name == "func.return" or op.name.startswith(_EFFECTFUL) or not op.results:
            return
        if not any(op == other for other in alive):
            alive.append(op)

    for op in candidates:
        add(op)
    while True:
        dead = next((i for i, op in enumerate(alive) if not any(True for r in op.results for _ in r.uses)), None)
        if dead is None:
            return
        op = alive.pop(dead)
        producers = [v.owner for v in op.operands if isinstance(v.owner, (ir.Operation, ir.OpView))]
        op.erase()
        for producer in producers:
            add(producer)


def _match_results(target: ir.Operation, returned: list[ir.Value], location: ir.Location) -> list[ir.Value]:
    results = list(target.results)
    if len(results) == 1 and str(results[0].type).startswith("!torch.list<") and \
            (len(returned) != 1 or str(returned[0].type) != str(results[0].type)):
        # A Tensor[] result (aten.split.Tensor): the decomposition returns the elements.
        with ir.InsertionPoint(target), location:
            built = ir.Operation.create("torch.prim.ListConstruct", results=[results[0].type],
                                        operands=returned)
        return [built.result]
    if len(returned) != len(results):
        raise DecompositionError(
            f"internal: decomposition returns {len(returned)} values for {len(results)} results")
    matched = []
    for old, new in zip(results, returned):
        if str(old.type) == str(new.type):
            matched.append(new)
            continue
        # The decomposition may know a dim statically that the op's type left dynamic (or back);
        # anything else (dtype, rank) is a real mismatch.
        if not _same_dtype_and_rank(old.type, new.type):
            raise DecompositionError(f"decomposition returns {new.type} where the op returns {old.type}")
        with ir.InsertionPoint(target), location:
            cast = ir.Operation.create("torch.tensor_static_info_cast", results=[old.type], operands=[new])
        matched.append(cast.result)
    return matched


def _same_dtype_and_rank(a: ir.Type, b: ir.Type) -> bool:
    ta, tb = parse_vtensor_type(a), parse_vtensor_type(b)
    return ta is not None and tb is not None and ta.dtype == tb.dtype and len(ta.sizes) == len(tb.sizes)
