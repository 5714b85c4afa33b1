"""Size arithmetic in an FX graph, rewritten into calls torch-mlir's FX importer imports.

torch.export (and `make_fx`, when et-decompose-to-core-aten traces a
decomposition) records arithmetic on SymInts as Python calls. The importer
maps the plain operators (`operator.add`, `operator.floordiv`, ...) to scalar
ATen ops itself, but not the others: `torch.sym_max` / `torch.sym_min` /
`torch.sym_float` / `torch.sym_int` / `torch.sym_not`, `operator.pow`,
`math.floor` / `math.ceil` fail to import, and `operator.mod` becomes
`aten.fmod.int` (C's remainder, a float in its schema) where Python floors.
`importable_sym_calls` retargets those nodes at the scalar overloads of the
same operation, promoting int operands to float where the overload takes
floats (as the importer does for `operator.*`):

    %m = call_function[target=torch.sym_max](args = (%sym_size_int, 3))
    %m = call_function[target=torch.ops.prim.max.int](args = (%sym_size_int, 3))

    %r = call_function[target=operator.mod](args = (%sym_size_int, 3))
    %r = call_function[target=torch.ops.aten.remainder.int](args = (%sym_size_int, 3))

The scalar ops they import as are the families of `etmlir.dialects.sym_ops`.

A decomposition may also pass a size where a tensor is expected (`rsub`
decomposes to `sub.Tensor(n, x)`); `wrap_numbers_as_tensors` puts a
`prim.NumToTensor.Scalar` in between, which is what TorchScript does and
what et-to-edge turns into `edge.scalar_tensor`.

And a `reshape` to sizes computed at run time becomes a `view`
(`reshapes_to_computed_sizes_as_views`), which needs no decomposition.
"""

from __future__ import annotations

import math
import operator
from typing import Any

from etmlir.lazy import lazy_module

torch = lazy_module("torch")


def _kind(arg: Any) -> str | None:
    """`int`, `float` or `bool` for a scalar argument (a constant, or a node whose value is one)."""
    value = arg.meta.get("val") if isinstance(arg, torch.fx.Node) else arg
    if isinstance(value, (bool, torch.SymBool)):
        return "bool"
    if isinstance(value, (int, torch.SymInt)):
        return "int"
    if isinstance(value, (float, torch.SymFloat)):
        return "float"
    return None


def _location_meta(node: torch.fx.Node) -> dict[str, Any]:
    """What a node inserted for `node` inherits from it: where it comes from, not its value."""
    return {k: v for k, v in node.meta.items() if k not in ("val", "tensor_meta", "example_value")}


def _as_float(graph: torch.fx.Graph, node: torch.fx.Node, arg: Any) -> Any:
    """`arg` as a float: a constant is converted, a node gets an `aten.Float.Scalar` in front of `node`."""
    if _kind(arg) == "float":
        return arg
    if not isinstance(arg, torch.fx.Node):
        return float(arg)
    with graph.inserting_before(node):
        promoted = graph.call_function(torch.ops.aten.Float.Scalar, (arg,))
    promoted.meta = {**_location_meta(node), "val": torch.sym_float(arg.meta["val"])}
    return promoted


def _retarget(graph: torch.fx.Graph, node: torch.fx.Node) -> bool:
    """Point `node` at a scalar ATen/prim overload if it is a call the importer cannot take."""
    target = node.target
    args = list(node.args)
    kinds = [_kind(a) for a in args]
    if None in kinds or node.kwargs:
        return False
    if target in (torch.sym_max, torch.sym_min, operator.mod) and len(args) == 2:
        packet = {torch.sym_max: torch.ops.prim.max, torch.sym_min: torch.ops.prim.min,
                  operator.mod: torch.ops.aten.remainder}[target]
        if kinds == ["int", "int"]:
            node.target = packet.int
        else:
            node.target = packet.float
            node.args = tuple(_as_float(graph, node, a) for a in args)
        return True
    if target is operator.pow and len(args) == 2:
        a, b = ("float" if k == "float" else "int" for k in kinds)
        node.target = getattr(torch.ops.aten.pow, a if a == b else f"{a}_{b}")
        return True
    if len(args) != 1:
        return False
    (arg,), (kind,) = args, kinds
    if target is torch.sym_not:
        node.target = torch.ops.aten.__not__.default
        return True
    conversions = {torch.sym_float: ("float", torch.ops.aten.Float.Scalar),
                   torch.sym_int: ("int", torch.ops.aten.Int.Scalar),
                   math.floor: ("int", torch.ops.aten.floor.float),
                   math.ceil: ("int", torch.ops.aten.ceil.float)}
    if target not in conversions:
        return False
    result_kind, overload = conversions[target]
    if isinstance(arg, torch.fx.Node) and (kind == result_kind or (kind == "int" and target in (math.floor, math.ceil))):
        node.replace_all_uses_with(arg)  # already of that kind: the call is the identity
        graph.erase_node(node)
        return True
    node.target = overload
    return True


def importable_sym_calls(graph: torch.fx.Graph) -> bool:
    """Rewrite, in place, the size-arithmetic calls the FX importer cannot import; True if any changed."""
    changed = False
    for node in list(graph.nodes):
        if node.op == "call_function" and not isinstance(node.target, torch._ops.OpOverload):
            changed |= _retarget(graph, node)
    return changed


_NUMBER_DTYPES = {"int": "int64", "float": "float64", "bool": "bool"}


def wrap_numbers_as_tensors(graph: torch.fx.Graph) -> bool:
    """Put `prim.NumToTensor.Scalar` between a scalar node and a Tensor argument it is passed as.

    `sub.Tensor(%sym_size, %x)` -> `sub.Tensor(NumToTensor(%sym_size), %x)`; the 0-d tensor
    has PyTorch's dtype for a wrapped number (int64, float64 or bool). True if any changed.
    """
    changed = False
    for node in list(graph.nodes):
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        schema = node.target._schema
        args = list(node.args)
        for index, (arg, spec) in enumerate(zip(args, schema.arguments)):
            kind = _kind(arg) if isinstance(arg, torch.fx.Node) else None
            if kind is None or not isinstance(spec.type, torch.TensorType):
                continue
            with graph.inserting_before(node):
                wrapped = graph.call_function(torch.ops.prim.NumToTensor.Scalar, (arg,))
            fake_mode = torch._guards.detect_fake_mode([n.meta.get("val") for n in graph.nodes])
            with fake_mode or torch._subclasses.fake_tensor.FakeTensorMode():
                value = torch.empty((), dtype=getattr(torch, _NUMBER_DTYPES[kind]))
            wrapped.meta = {**_location_meta(node), "val": value}
            args[index] = wrapped
            changed = True
        node.args = tuple(args)
    return changed


def reshapes_to_computed_sizes_as_views(graph: torch.fx.Graph) -> bool:
    """`aten.reshape(x, [n0 * n1])` -> `aten.view(x, [n0 * n1])` when a size is computed at run time.

    torch.export checked that the sizes agree with x's for every input it allows. `reshape` is
    not Core ATen, and et-decompose-to-core-aten would trace it again with each run-time size a
    size of its own, no longer known to equal `x.numel()` (so its numel check fails). On values
    (edge tensors have no strides; a view is a copy) reshape and view compute the same tensor.
    True if any changed.
    """
    changed = False
    for node in graph.nodes:
        if node.op == "call_function" and node.target is torch.ops.aten.reshape.default and len(node.args) == 2 \
                and any(isinstance(size, torch.fx.Node) for size in node.args[1]):
            node.target = torch.ops.aten.view.default
            changed = True
    return changed


def make_sym_calls_importable(graph_module: torch.fx.GraphModule) -> None:
    """The rewrites above on an exported program's graph and its subgraphs (torch.cond branches,
    loop bodies): `importable_sym_calls` and `reshapes_to_computed_sizes_as_views`."""
    for module in graph_module.modules():
        if isinstance(module, torch.fx.GraphModule) and (
                importable_sym_calls(module.graph) | reshapes_to_computed_sizes_as_views(module.graph)):
            module.recompile()
