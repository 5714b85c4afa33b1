"""Upper bounds of dynamic dims, by running a Core ATen function on symbolic fake tensors.

A dynamic input dim carries its range (`etmlir.dynamic_dims` on the function
argument: `{"1" = {min = 2, max = 256, symbol = "s0"}}`). Every op is run with
PyTorch's fake-tensor kernels on inputs whose dynamic sizes are symbols
constrained to those ranges, so each result size comes out as an expression
(`s0`, `2*s0`, `s0 - 1`), and its upper bound is the expression's maximum over
the ranges (sympy value-range analysis, not a guess at the largest input).

    %5 = torch.aten.cat %list, %int0 : ... -> !torch.vtensor<[?,384],f32>
    bounds[%5's op] == [[512, 384]]        # if the two inputs are [s0,384] each, s0 <= 256

The memory planner plans dynamic tensors at these bounds. A size no bound can
be found for (an unbounded input, an op the fake kernels cannot run) is None.

Control flow is evaluated region by region: both branches of an `scf.if` (a
result dim the branches disagree on becomes a fresh size between the smaller
lower and the larger upper bound), and an `scf.while`'s regions once with the
initial values, which bounds every iteration when the body returns values of
the sizes it was given; a carried value whose sizes change is unknown, and so
is everything the loop computes from it.
"""

from __future__ import annotations

from typing import Any

from etmlir.dialects import attrs
from etmlir.frontend.aten_ops import (
    RuntimeValue, UndecodableOperand, call_arguments, decode_arguments, lookup_overload, op_overload_name, parse_vtensor_type)
from etmlir.frontend.core_aten import NUM_TO_TENSOR, SIZE_QUERY_ALIASES, size_arithmetic
from torch_mlir import ir

from etmlir.lazy import lazy_module

torch = lazy_module("torch")



class _Unknown:
    """A value the evaluation could not compute; anything computed from it is unknown too."""


UNKNOWN = _Unknown()

Bounds = list[list[int | None]]


def argument_max_sizes(func: ir.Operation, index: int) -> dict[int, int]:
    """dim -> max of argument `index`'s dynamic dims that declare one (its `etmlir.dynamic_dims`)."""
    if "arg_attrs" not in func.attributes:
        return {}
    arg_attrs = ir.DictAttr(ir.ArrayAttr(func.attributes["arg_attrs"])[index])
    if attrs.DYNAMIC_DIMS not in arg_attrs:
        return {}
    return {int(entry.name): ir.IntegerAttr(ir.DictAttr(entry.attr)["max"]).value
            for entry in ir.DictAttr(arg_attrs[attrs.DYNAMIC_DIMS]) if "max" in ir.DictAttr(entry.attr)}


def dynamic_dims_of(func: ir.Operation) -> list[dict[int, dict[str, Any]]]:
    """Per function argument: dim -> {min, max, symbol} from its `etmlir.dynamic_dims` attribute."""
    result: list[dict[int, dict[str, Any]]] = []
    if "arg_attrs" not in func.attributes:
        return [{} for _ in func.regions[0].blocks[0].arguments]
    for arg_attrs in ir.ArrayAttr(func.attributes["arg_attrs"]):
        dims: dict[int, dict[str, Any]] = {}
        arg_attrs = ir.DictAttr(arg_attrs)
        if attrs.DYNAMIC_DIMS in arg_attrs:
            for named in ir.DictAttr(arg_attrs[attrs.DYNAMIC_DIMS]):
                info = ir.DictAttr(named.attr)
                dims[int(named.name)] = {
                    "min": ir.IntegerAttr(info["min"]).value,
                    "max": ir.IntegerAttr(info["max"]).value if "max" in info else None,
                    "symbol": ir.StringAttr(info["symbol"]).value,
                }
        result.append(dims)
    return result


def upper_bounds(func: ir.Operation) -> dict[ir.Operation, Bounds]:
    """For every op with a dynamic tensor result: the upper bound of each result dim, per result."""
    from torch._dynamo.source import ConstantSource  # torch is imported when bounds are computed
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    shape_env = ShapeEnv()
    mode = FakeTensorMode(shape_env=shape_env, allow_non_fake_inputs=True)
    symbols: dict[str, torch.SymInt] = {}
    env: dict[ir.Value, Any] = {}
    block = func.regions[0].blocks[0]

    def symbol(name: str, low: int, high: int | None) -> torch.SymInt:
        if name not in symbols:
            hint = high if high is not None else max(low, 2)
            source = ConstantSource(f"etmlir_{name}")
            sym = shape_env.create_symbol(hint, source)
            shape_env.constrain_symbol_range(sym, compiler_min=low, compiler_max=high if high else int(2**62))
            symbols[name] = shape_env.create_symintnode(sym, hint=hint, source=source)
        return symbols[name]

    for argument, dims in zip(block.arguments, dynamic_dims_of(func)):
        tensor = parse_vtensor_type(argument.type)
        if tensor is None:
            env[argument] = UNKNOWN
            continue
        sizes = [symbol(dims[i]["symbol"], dims[i]["min"], dims[i]["max"]) if i in dims else
                 (size if size is not None else UNKNOWN) for i, size in enumerate(tensor.sizes)]
        if any(s is UNKNOWN for s in sizes):
            env[argument] = UNKNOWN
            continue
        with mode:
            env[argument] = torch.empty(sizes, dtype=tensor.dtype)

    bounds: dict[ir.Operation, Bounds] = {}
    fresh = iter(range(1 << 62))

    def run(ops: list[ir.Operation]) -> None:
        for op in ops:
            op = op.operation
            if op.name == "scf.if":
                outputs = evaluate_if(op)
            elif op.name == "scf.while":
                outputs = evaluate_while(op)
            else:
                try:
                    outputs = _evaluate(op, env, mode)
                except Exception:  # noqa: BLE001 - an op the fake kernels cannot run has unknown sizes
                    outputs = [UNKNOWN] * len(op.results)
            for result, value in zip(op.results, outputs):
                env[result] = value
            if any("?" in str(r.type) for r in op.results if str(r.type).startswith("!torch.vtensor")):
                bounds[op] = [_bound_sizes(shape_env, value, result) for result, value in zip(op.results, outputs)]

    def region(block: ir.Block) -> list[Any]:
        """Evaluate a region's ops; the values its terminator passes on."""
        ops = [o.operation for o in block.operations]
        run(ops[:-1])
        passed = list(ops[-1].operands)
        if ops[-1].name == "scf.condition":
            passed = passed[1:]
        return [env.get(v, UNKNOWN) for v in passed]

    def evaluate_if(op: ir.Operation) -> list[Any]:
        # A result is either branch's value: a dim the branches agree on keeps its size, any
        # other becomes a fresh size between the smaller lower and the larger upper bound.
        branches = [region(r.blocks[0]) for r in op.regions if len(r.blocks)]
        if len(branches) != 2:
            return [UNKNOWN] * len(op.results)
        return [_join(a, b, shape_env, mode, lambda low, high: symbol(f"cf{next(fresh)}", low, high))
                for a, b in zip(*branches)]

    def evaluate_while(op: ir.Operation) -> list[Any]:
        # Loop-carried values keep their sizes in every iteration when the body returns them
        # with the sizes it was given; a value whose sizes change has no bound (nor has anything
        # computed from it inside the loop: the regions are evaluated again with it unknown).
        before, after = op.regions[0].blocks[0], op.regions[1].blocks[0]
        carried = [env.get(v, UNKNOWN) for v in op.operands]
        for _ in range(2):
            env.update(zip(before.arguments, carried))
            forwarded = region(before)
            env.update(zip(after.arguments, forwarded))
            yielded = region(after)
            changing = [not _same_sizes(c, y) for c, y in zip(carried, yielded)]
            if not any(changing):
                return forwarded
            carried = [UNKNOWN if change else c for c, change in zip(carried, changing)]
        return [UNKNOWN if change else f for f, change in zip(forwarded, changing)]

    run(list(block.operations))
    return bounds


def _same_sizes(a: Any, b: Any) -> bool:
    """Both unknown, or tensors whose sizes are the same numbers or expressions."""
    if a is UNKNOWN or b is UNKNOWN:
        return a is b
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor) or a.dim() != b.dim():
        return False
    return all(_size_key(x) == _size_key(y) for x, y in zip(a.shape, b.shape))


def _size_key(size: Any) -> Any:
    return size if isinstance(size, int) else size.node.expr


def _join(a: Any, b: Any, shape_env: Any, mode: Any, new_symbol: Any) -> Any:
    """A fake tensor that stands for `a` or `b` (the result of a branch)."""
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor) or a.dim() != b.dim():
        return UNKNOWN
    if _same_sizes(a, b):
        return a
    sizes = []
    for x, y in zip(a.shape, b.shape):
        if _size_key(x) == _size_key(y):
            sizes.append(x)
            continue
        ranges = [shape_env.bound_sympy(s.node.expr) if not isinstance(s, int) else None for s in (x, y)]
        lows = [s if r is None else (int(r.lower) if r.lower.is_finite else 0) for s, r in zip((x, y), ranges)]
        highs = [s if r is None else (int(r.upper) if r.upper.is_finite else None) for s, r in zip((x, y), ranges)]
        if any(h is None for h in highs):
            return UNKNOWN
        sizes.append(new_symbol(min(lows), max(highs)))
    with mode:
        return torch.empty(sizes, dtype=a.dtype)


def _bound_sizes(shape_env: torch.fx.experimental.symbolic_shapes.ShapeEnv, value: Any, result: ir.Value) -> list[int | None]:
    tensor = parse_vtensor_type(result.type)
    if tensor is None:
        return []
    if not isinstance(value, torch.Tensor):
        return [size for size in tensor.sizes]
    sizes: list[int | None] = []
    for static, size in zip(tensor.sizes, value.shape):
        if static is not None:
            sizes.append(static)
        elif isinstance(size, int):
            sizes.append(size)
        else:
            upper = shape_env.bound_sympy(size.node.expr).upper
            sizes.append(int(upper) if upper.is_finite and int(upper) < 2**62 else None)
    return sizes


_SIZES_ONLY = {"aten.view.default": "aten.reshape.default", "aten._unsafe_view.default": "aten.reshape.default"}


def _evaluate(op: ir.Operation, env: dict[ir.Value, Any], mode: torch._subclasses.fake_tensor.FakeTensorMode) -> list[Any]:
    name = op.name
    if name.startswith("torch.constant."):
        if name == "torch.constant.none":
            return [None]
        return [op.attributes["value"].value]
    if name == "torch.prim.ListConstruct":
        return [[env.get(v, UNKNOWN) for v in op.operands]]
    if name == "torch.prim.ListUnpack":
        items = env.get(op.operands[0], UNKNOWN)
        return list(items) if isinstance(items, (list, tuple)) else [UNKNOWN] * len(op.results)
    if name in ("torch.vtensor.literal", NUM_TO_TENSOR):  # static shapes: the type says it all
        tensor = parse_vtensor_type(op.results[0].type)
        with mode:
            return [torch.empty(tensor.sizes, dtype=tensor.dtype)]
    family = size_arithmetic(op)
    if family is not None:  # on SymInts: `s0 * s1`, `Max(3, s0)`, `(s0//2)`
        inputs = [env.get(v, UNKNOWN) for v in op.operands]
        if any(i is UNKNOWN for i in inputs):
            return [UNKNOWN]
        return [family.fold(*inputs)]
    overload_name = op_overload_name(op)
    # Only sizes matter here: a view of an expanded (stride-0) tensor, which export leaves in place of a
    # reshape's copy (grouped-query attention's key repeat), is evaluated as the reshape it stands for.
    overload_name = _SIZES_ONLY.get(overload_name, overload_name) if overload_name else None
    overload = lookup_overload(SIZE_QUERY_ALIASES.get(overload_name, overload_name)) if overload_name else None
    if overload is None:
        return [UNKNOWN] * len(op.results)
    args, kwargs = call_arguments([(a, _resolve(v, env)) for a, v in decode_arguments(op, overload)])
    with mode:
        out = overload(*args, **kwargs)
    if len(op.results) == 1:
        return [out]
    return list(out)


def _resolve(value: Any, env: dict[ir.Value, Any]) -> Any:
    if isinstance(value, RuntimeValue):
        resolved = env.get(value.value, UNKNOWN)
        if resolved is UNKNOWN:
            raise UndecodableOperand("unknown input")
        return resolved
    if isinstance(value, list):
        return [_resolve(v, env) for v in value]
    return value
