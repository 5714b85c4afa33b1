"""et-to-edge: convert Core ATen (torch dialect) to the edge dialect on builtin tensors.

    %int1 = torch.constant.int 1
    %0 = torch.aten.add.Tensor %x, %y, %int1 : !torch.vtensor<[2,?],f32>, ... -> !torch.vtensor<[2,?],f32>
    %n = torch.aten.size.int %0, %int1 : !torch.vtensor<[2,?],f32>, !torch.int -> !torch.int
    %1 = torch.aten.view %0, %sizes : ... -> !torch.vtensor<[?,2],f32>     // %sizes = [%n, 2]

becomes (types `!torch.vtensor<[2,?],f32>` -> `tensor<2x?xf32>`, Scalars as 0-d
tensors, views as copies, run-time sizes as `sym_values` operands):

    %c1 = "edge.constant"() {value = dense<1> : tensor<i64>} : () -> tensor<i64>
    %0 = "edge.add_tensor"(%x, %y, %c1) {etmlir.upper_bounds = [array<i64: 2, 64>]} : (...) -> tensor<2x?xf32>
    %n = "edge.sym_size_int"(%0) {dim = 1 : i64} : (tensor<2x?xf32>) -> tensor<i64>
    %1 = "edge.view_copy"(%0, %n) {size = array<i64: -9223372036854775808, 2>} : (...) -> tensor<?x2xf32>

It is a dialect conversion (torch-mlir's `rewrite` API): one pattern per op,
a `TypeConverter` for the tensor types, a `ConversionTarget` that makes the
converted ops illegal, in two steps (function signatures, then ops) joined by
`unrealized_conversion_cast`s that `reconcile-unrealized-casts` removes.

  * Weights (`torch.vtensor.literal`) become `edge.constant` with the same
    attribute: a `dense_resource` payload is referenced, never copied.
  * Dynamic dims keep their upper bound: each op with a dynamic result gets
    `etmlir.upper_bounds` (one array per result; see `frontend/shape_bounds.py`).
  * `aten._to_copy` becomes `edge.to_dim_order_copy` (memory format as a dim order).
  * Ops of other namespaces (custom ops from `torch.library`) become
    `edge.custom_op` with their qualified name, schema and constant arguments.
  * Scalar arithmetic on sizes (`torch.aten.mul.int`, `torch.prim.max.int`,
    ...) is folded when its operands are constants, and otherwise becomes the
    edge op of its family (`edge.sym_mul`, `edge.sym_max`: see
    `etmlir.dialects.sym_ops`) on 0-d tensors, like `edge.sym_size_int`:

        %m = torch.aten.mul.int %n0, %n1 : !torch.int, !torch.int -> !torch.int
        %m = "edge.sym_mul"(%n0, %n1) : (tensor<i64>, tensor<i64>) -> tensor<i64>

    A number where a tensor is expected (`torch.prim.NumToTensor.Scalar`)
    becomes `edge.scalar_tensor` with the result's dtype.
  * Anything else that has no edge form is an error naming the op and its
    source line, reported before anything is rewritten.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from torch_mlir import ir
from torch_mlir import rewrite as rw
from torch_mlir.dialects import func as func_dialect
from torch_mlir.passmanager import PassManager

from etmlir.dialects import attrs
from etmlir.dialects.control_flow import body_ops, is_control_flow, join_converted, retype_for_edge
from etmlir.dialects.edge import DYNAMIC, EDGE_ELEMENT_TYPES, EdgeOp, check_dtypes, edge_ops, edge_ops_by_aten
from etmlir.frontend.aten_ops import (
    RuntimeValue, UndecodableOperand, declared_argument_types, decode_arguments, lookup_overload, op_overload_name, parse_vtensor_type)
from etmlir.frontend.core_aten import NUM_TO_TENSOR, SIZE_QUERY_ALIASES, is_custom_op, is_scalar_only, size_arithmetic
from etmlir.frontend.shape_bounds import upper_bounds
from etmlir.lazy import lazy_module
from etmlir.passes.registry import PassFailure, emit_error, register_pass

torch = lazy_module("torch")

# torch-dialect structure that disappears once its users are converted.
_DISSOLVED = ("torch.constant.", "torch.prim.ListConstruct", "torch.prim.ListUnpack", "torch.symbolic_int",
              "torch.bind_symbolic_shape", "torch.runtime.assert")


@functools.cache
def _dim_orders() -> dict[object, tuple[int, ...] | None]:
    """Memory format -> the dim order it asks for (None: contiguous)."""
    return {torch.contiguous_format: None, torch.channels_last: (0, 2, 3, 1), torch.channels_last_3d: (0, 2, 3, 4, 1)}


def recorded_upper_bounds(op: ir.Operation | ir.OpView, index: int) -> list[int] | None:
    """The upper bounds et-to-edge recorded for result `index` of `op` (None when it recorded none)."""
    if attrs.UPPER_BOUNDS not in op.attributes:
        return None
    return list(ir.DenseI64ArrayAttr(ir.ArrayAttr(op.attributes[attrs.UPPER_BOUNDS])[index]))


class ConversionError(Exception):
    """The op has no edge form; the message says why."""


@register_pass("et-to-edge", level="torch")
def to_edge(module: ir.Operation) -> None:
    """et-to-edge: convert Core ATen (torch dialect) to the edge dialect on builtin tensors."""
    with module.context, ir.Location.unknown():
        _to_edge(module)


def _to_edge(module: ir.Operation) -> None:
    functions = [op.operation for op in module.regions[0].blocks[0].operations
                 if op.operation.name == "func.func"]
    for function in functions:
        _fold_scalar_constants(function)
    failures = [(op, str(exc)) for function in functions for op, exc in _unconvertible(function)]
    if failures:
        for op, message in failures:
            emit_error(op, message)
        raise PassFailure()
    for function in functions:
        _record_upper_bounds(function)
    converter = _EdgeTypeConverter()
    problems = retype_for_edge(module, edge_tensor_type)  # scf results and region arguments
    if problems:
        for op, message in problems:
            emit_error(op, message)
        raise PassFailure()
    _convert_signatures(module, converter)
    _convert_ops(module, converter)
    join_converted(module)
    _erase_dissolved(module)
    PassManager.parse("builtin.module(reconcile-unrealized-casts)", module.context).run(module)
    leftovers = _ops_not_converted(module)
    if leftovers:
        for op in leftovers:
            emit_error(op, f"et-to-edge left '{op.name}' unconverted: a value it produces or uses has no edge form")
        raise PassFailure()


# ---------------------------------------------------------------------------------------------- types

def edge_tensor_type(t: ir.Type) -> ir.RankedTensorType | None:
    """`!torch.vtensor<[2,?],si64>` -> `tensor<2x?xi64>` (None for any other type)."""
    tensor = parse_vtensor_type(t)
    if tensor is None:
        return None
    element = ir.Type.parse(EDGE_ELEMENT_TYPES[str(tensor.dtype).removeprefix("torch.")])
    sizes = [ir.ShapedType.get_dynamic_size() if s is None else s for s in tensor.sizes]
    return ir.RankedTensorType.get(sizes, element)


def _scalar_tensor_type(t: ir.Type) -> ir.RankedTensorType:
    """The 0-d tensor a `!torch.int` / `!torch.float` / `!torch.bool` / `!torch.number` becomes."""
    element = {"!torch.int": "i64", "!torch.bool": "i1"}.get(str(t), "f64")
    return ir.RankedTensorType.get([], ir.Type.parse(element))


class _EdgeTypeConverter:
    """Wraps `rewrite.TypeConverter`, holding the Python callables it does not keep alive itself."""

    def __init__(self) -> None:
        self.converter = rw.TypeConverter()
        self._identity = lambda t: t
        self._tensor = edge_tensor_type
        self.converter.add_conversion(self._identity)  # registered first, so tried last
        self.converter.add_conversion(self._tensor)


# ---------------------------------------------------------------------------------------------- plans

@dataclasses.dataclass
class _Plan:
    """What one torch op becomes: an edge op name, its operand groups, attributes and result types."""

    name: str
    groups: list[list[Any]]  # per operand group: ir.Value (converted later) or a Python scalar
    attributes: dict[str, ir.Attribute]
    result_types: list[ir.Type]
    needs_segment_sizes: bool
    replaces_unpacks: bool = False  # results replace the ListUnpack users of a Tensor[] result
    variadic_groups: tuple[int, ...] = ()  # operand groups IRDL declares variadic (one type for all)
    variadic_results: bool = False


def _plan(op: ir.Operation) -> _Plan:
    family = size_arithmetic(op)
    if family is not None:
        return _plan_size_arithmetic(op, edge_ops()[family.name])
    if op.name == NUM_TO_TENSOR:
        return _plan_num_to_tensor(op)
    name = op_overload_name(op)
    if name is None:
        raise ConversionError(f"'{op.name}' has no edge form")
    name = SIZE_QUERY_ALIASES.get(name, name)
    overload = lookup_overload(name)
    if overload is None:
        raise ConversionError(f"PyTorch has no operator '{name}'")
    if is_scalar_only(op) and not is_custom_op(name) and name not in edge_ops_by_aten():
        raise ConversionError(f"scalar op '{name}' on a value known only at run time has no edge form "
                              "(the size arithmetic edge ops are listed in etmlir.dialects.sym_ops)")
    decoded = _decode(op, overload)
    if is_custom_op(name):
        return _plan_custom(op, name, overload, decoded)
    if name == "aten._to_copy.default":
        return _plan_to_dim_order_copy(op, decoded)
    info = edge_ops_by_aten().get(name)
    if info is None:
        raise ConversionError(f"'{name}' is not Core ATen and has no edge op; run et-decompose-to-core-aten "
                              "first (or keep it out of the program)")
    return _plan_edge(op, info, decoded)


def _plan_size_arithmetic(op: ir.Operation, info: EdgeOp) -> _Plan:
    """`torch.aten.mul.int %n, %int2` -> `edge.sym_mul(%n, %c2)`: Scalar operands as 0-d tensors."""
    if len(op.operands) != len(info.args) or len(op.results) != 1:
        raise ConversionError(f"internal: '{op.name}' does not match the operands of '{info.name}'")
    groups: list[list[Any]] = []
    for value in op.operands:
        owner = value.owner.operation if isinstance(value.owner, (ir.Operation, ir.OpView)) else None
        constant = owner is not None and owner.name in (
            "torch.constant.int", "torch.constant.float", "torch.constant.bool")
        groups.append([owner.attributes["value"].value if constant else value])
    result_types = [_scalar_tensor_type(op.results[0].type)]
    _check_plan_dtypes(info, groups, result_types)
    return _Plan(info.name, groups, {}, result_types, info.needs_segment_sizes)


def _plan_num_to_tensor(op: ir.Operation) -> _Plan:
    """`torch.prim.NumToTensor.Scalar %n` -> `edge.scalar_tensor(%n) {dtype = <result dtype>}`.

    A constant number (`2 - x` decomposes to `sub.Tensor(NumToTensor(2), x)`) becomes an `edge.constant`.
    """
    result = parse_vtensor_type(op.results[0].type)
    if result is None or result.sizes:
        raise ConversionError(f"'{op.name}' returns {op.results[0].type}; expected a 0-d tensor")
    (_, value), = _decode(op, lookup_overload("prim.NumToTensor.Scalar"))
    if not isinstance(value, RuntimeValue):
        t = edge_tensor_type(op.results[0].type)
        element = t.element_type
        if isinstance(element, ir.IntegerType) and element.width == 1:
            splat = ir.BoolAttr.get(bool(value))
        elif isinstance(element, ir.IntegerType):
            splat = ir.IntegerAttr.get(element, int(value))
        else:
            splat = ir.FloatAttr.get(element, float(value))
        return _Plan("edge.constant", [], {"value": ir.DenseElementsAttr.get_splat(t, splat)}, [t], False)
    decoded = [("s", value), ("dtype", result.dtype), ("layout", None), ("device", None), ("pin_memory", None)]
    return _plan_edge(op, edge_ops_by_aten()["aten.scalar_tensor.default"], decoded)


def _decode(op: ir.Operation, overload: Any) -> list[tuple[str, Any]]:
    try:
        return [(argument.name, value) for argument, value in decode_arguments(op, overload)]
    except UndecodableOperand as exc:
        where = f"argument '{exc.argument}' of " if exc.argument else ""
        raise ConversionError(f"{where}'{op_overload_name(op)}': {exc}") from None


def _plan_edge(op: ir.Operation, info: EdgeOp, decoded: list[tuple[str, Any]]) -> _Plan:
    if [a["name"] for a in info.args] != [n for n, _ in decoded]:
        raise ConversionError(f"internal: arguments of '{info.aten}' do not match '{op_overload_name(op)}'")
    groups: list[list[Any]] = []
    attributes: dict[str, ir.Attribute] = {}
    sym_values: list[ir.Value] = []
    for spec, (arg_name, value) in zip(info.args, decoded):
        kind = spec["kind"]
        where = f"argument '{arg_name}' of '{info.aten}'"
        if kind in ("tensor", "tensor?", "scalar", "scalar?"):
            if value is None:
                if not kind.endswith("?"):
                    raise ConversionError(f"{where} is None")
                groups.append([])
            elif kind.startswith("tensor"):
                groups.append([_tensor_operand(value, where)])
            else:
                groups.append([value.value if isinstance(value, RuntimeValue) else value])
        elif kind in ("tensor[]", "tensor?[]"):
            items = list(value or [])
            if kind == "tensor?[]":
                attributes[f"{arg_name}_present"] = ir.DenseBoolArrayAttr.get([v is not None for v in items])
                items = [v for v in items if v is not None]
            groups.append([_tensor_operand(v, where) for v in items])
        elif value is not None:
            attributes[arg_name] = _attribute(kind, value, where, sym_values)
        elif not kind.endswith("?"):
            raise ConversionError(f"{where} is None")
    if any(a["kind"].startswith("symint") for a in info.args):
        groups.append(sym_values)
    result_types, replaces_unpacks = _result_types(op, info)
    _check_plan_dtypes(info, groups, result_types)
    variadic = tuple(i for i, (name, kind) in enumerate(info.operand_groups)
                     if kind == "variadic" and name != "sym_values")
    for index in variadic:
        types = [_edge_type(item) for item in groups[index]]
        if _BROADCAST_LISTS.get(info.name) == index:
            types = [_lifted_type(t, max(ir.RankedTensorType(u).rank for u in types)) for t in types]
        joined_type(types)  # raises if the list cannot share one type
    return _Plan(info.name, groups, attributes, result_types, info.needs_segment_sizes, replaces_unpacks,
                 variadic, any(r["kind"] == "tensor[]" for r in info.results))


# Operand groups whose tensors broadcast against each other (advanced indexing, `x[rows[:, None], cols]`;
# F.unfold's decomposition indexes that way): a lower-rank index is the same index with leading unit dims,
# so it is viewed at the list's highest rank and the list shares one type. Edge op -> the group's index.
_BROADCAST_LISTS = {"edge.index_tensor": 1, "edge.index_put": 1}


def _lifted_type(t: ir.Type, rank: int) -> ir.RankedTensorType:
    """`t` with leading unit dims up to `rank` (an index of a broadcasting list; static sizes only)."""
    tensor = ir.RankedTensorType(t)
    if tensor.rank == rank:
        return tensor
    if not tensor.has_static_shape:
        raise ConversionError(f"an index list mixes ranks and its rank-{tensor.rank} index ({tensor}) has "
                              "dynamic sizes, which the edge level cannot broadcast yet")
    return ir.RankedTensorType.get([1] * (rank - tensor.rank) + list(tensor.shape), tensor.element_type)


def _lift_ranks(values: list[ir.Value], rewriter: Any, location: ir.Location) -> list[ir.Value]:
    """Each index of a broadcasting list viewed at the list's highest rank (an `edge.view_copy`)."""
    rank = max(ir.RankedTensorType(v.type).rank for v in values)
    lifted = []
    for value in values:
        t = _lifted_type(value.type, rank)
        if t == value.type:
            lifted.append(value)
            continue
        with rewriter.ip, location:
            view = ir.Operation.create("edge.view_copy", results=[t], operands=[value],
                                       attributes={"size": ir.DenseI64ArrayAttr.get(list(t.shape))})
        lifted.append(view.results[0])
    return lifted


def joined_type(types: list[ir.Type]) -> ir.Type:
    """One type every value of a variadic group can be cast to: dims that differ become dynamic.

    IRDL gives all values of a variadic operand or result group the same type,
    so `edge.cat` of `tensor<1x4xf32>` and `tensor<1x?xf32>` takes both as
    `tensor<1x?xf32>` (`tensor.cast` in front), and `edge.split_with_sizes_copy`
    results are cast back to their own static types.
    """
    if not types:
        return ir.RankedTensorType.get([0], ir.F32Type.get())
    tensors = [ir.RankedTensorType(t) for t in types]
    first = tensors[0]
    if any(t.element_type != first.element_type for t in tensors):
        raise ConversionError("a tensor list mixes element types ("
                              + ", ".join(sorted({str(t.element_type) for t in tensors})) + ")")
    if any(t.rank != first.rank for t in tensors):
        raise ConversionError("a tensor list mixes ranks, which the edge level cannot express yet")
    dims = [first.shape[i] if all(not t.is_dynamic_dim(i) and t.shape[i] == first.shape[i] for t in tensors)
            else ir.ShapedType.get_dynamic_size() for i in range(first.rank)]
    return ir.RankedTensorType.get(dims, first.element_type)


def _edge_type(item: Any) -> ir.Type:
    return edge_tensor_type(item.type) if str(item.type).startswith("!torch") else item.type


def _cast_all(values: list[ir.Value], target: ir.Type, rewriter: Any, location: ir.Location) -> list[ir.Value]:
    cast = []
    for value in values:
        if value.type == target:
            cast.append(value)
            continue
        with rewriter.ip, location:
            cast.append(ir.Operation.create("tensor.cast", results=[target], operands=[value]).results[0])
    return cast


def _check_plan_dtypes(info: EdgeOp, groups: list[list[Any]], result_types: list[ir.Type]) -> None:
    """Reject, before rewriting, an op whose dtypes the edge op's kernels do not take."""
    operands = {name: [_edge_element(item) for item in group]
                for (name, _), group in zip(info.operand_groups, groups)}
    problem = check_dtypes(info, operands, [str(ir.RankedTensorType(t).element_type) for t in result_types])
    if problem:
        raise ConversionError(problem)


def _edge_element(item: Any) -> str:
    """The element type an operand will have once converted."""
    if isinstance(item, bool):
        return "i1"
    if isinstance(item, int):
        return "i64"
    if isinstance(item, float):
        return "f64"
    converted = item.type if isinstance(item.type, ir.RankedTensorType) else (
        edge_tensor_type(item.type) or _scalar_tensor_type(item.type))
    return str(converted.element_type)


def _tensor_operand(value: Any, where: str) -> ir.Value:
    if not isinstance(value, RuntimeValue) or value.tensor is None:
        raise ConversionError(f"{where} is not a tensor")
    return value.value


def _attribute(kind: str, value: Any, where: str, sym_values: list[ir.Value]) -> ir.Attribute:
    """A schema argument's constant value as the attribute its kind calls for."""
    base = kind.rstrip("?")
    i64 = ir.IntegerType.get_signless(64)
    if base == "symint[]":
        sizes = []
        for item in value:
            if isinstance(item, RuntimeValue):
                sym_values.append(item.value)
                sizes.append(DYNAMIC)
            else:
                sizes.append(int(item))
        return ir.DenseI64ArrayAttr.get(sizes)
    if base == "symint":
        if isinstance(value, RuntimeValue):
            sym_values.append(value.value)
            return ir.IntegerAttr.get(i64, DYNAMIC)
        return ir.IntegerAttr.get(i64, int(value))
    if _contains_runtime(value):
        raise ConversionError(f"{where} is computed at run time; the edge level needs a constant")
    if base == "int":
        return ir.IntegerAttr.get(i64, int(value))
    if base == "bool":
        return ir.BoolAttr.get(bool(value))
    if base == "float":
        return ir.FloatAttr.get(ir.F64Type.get(), float(value))
    if base == "str":
        return ir.StringAttr.get(str(value))
    if base == "int[]":
        return ir.DenseI64ArrayAttr.get([int(v) for v in value])
    if base == "bool[]":
        return ir.DenseBoolArrayAttr.get([bool(v) for v in value])
    if base == "float[]":
        return ir.DenseF64ArrayAttr.get([float(v) for v in value])
    if base == "dtype":
        return ir.TypeAttr.get(ir.Type.parse(EDGE_ELEMENT_TYPES[str(value).removeprefix("torch.")]))
    if base in ("layout", "device", "memory_format"):
        return ir.StringAttr.get(str(value))
    if base == "generator":
        raise ConversionError(f"{where}: random generators are not supported")
    raise ConversionError(f"{where}: unsupported argument kind '{kind}'")


def _contains_runtime(value: Any) -> bool:
    if isinstance(value, RuntimeValue):
        return True
    return isinstance(value, list) and any(_contains_runtime(v) for v in value)


def _result_types(op: ir.Operation, info: EdgeOp) -> tuple[list[ir.Type], bool]:
    results = list(op.results)
    if len(info.results) == 1 and info.results[0]["kind"] == "tensor[]":
        unpacks = [use.owner for use in results[0].uses]
        if not all(u.name == "torch.prim.ListUnpack" for u in unpacks) or len(unpacks) != 1:
            raise ConversionError(f"the tensor list '{info.aten}' returns must be unpacked exactly once")
        return [edge_tensor_type(r.type) for r in unpacks[0].results], True
    if len(results) != len(info.results):
        raise ConversionError(f"internal: '{op.name}' has {len(results)} results; '{info.aten}' has "
                              f"{len(info.results)}")
    types = []
    for result, spec in zip(results, info.results):
        converted = edge_tensor_type(result.type) if spec["kind"] == "tensor" else _scalar_tensor_type(result.type)
        if converted is None:
            raise ConversionError(f"result type {result.type} of '{info.aten}' has no rank or dtype")
        types.append(converted)
    return types, False


def _plan_to_dim_order_copy(op: ir.Operation, decoded: list[tuple[str, Any]]) -> _Plan:
    """`aten._to_copy(x, dtype, layout, device, pin_memory, non_blocking, memory_format)` -> dim order copy."""
    args = dict(decoded)
    info = edge_ops()["to_dim_order_copy"]
    if args.get("layout") not in (None, torch.strided):
        raise ConversionError(f"_to_copy to layout {args['layout']} is not supported")
    if args.get("device") is not None and torch.device(args["device"]).type != "cpu":
        raise ConversionError(f"_to_copy to device '{args['device']}' is not supported")
    attributes: dict[str, ir.Attribute] = {"non_blocking": ir.BoolAttr.get(bool(args.get("non_blocking")))}
    if args.get("dtype") is not None:
        attributes["dtype"] = _attribute("dtype", args["dtype"], "dtype", [])
    memory_format = args.get("memory_format")
    rank = len(parse_vtensor_type(op.results[0].type).sizes)
    if memory_format is not None and memory_format != torch.preserve_format:
        if memory_format not in _dim_orders():
            raise ConversionError(f"_to_copy to memory format {memory_format} is not supported")
        order = _dim_orders()[memory_format] or tuple(range(rank))
        if len(order) != rank:
            raise ConversionError(f"memory format {memory_format} does not apply to a rank-{rank} tensor")
        attributes["dim_order"] = ir.DenseI64ArrayAttr.get(list(order))
    return _Plan(info.name, [[_tensor_operand(args["self"], "self of aten._to_copy")]], attributes,
                 [edge_tensor_type(op.results[0].type)], False)


def _plan_custom(op: ir.Operation, name: str, overload: Any, decoded: list[tuple[str, Any]]) -> _Plan:
    """A custom op: tensors as operands, every other argument as a named attribute."""
    inputs: list[ir.Value] = []
    args: dict[str, ir.Attribute] = {}
    declared = dict(zip((a.name for a in overload._schema.arguments), declared_argument_types(overload)))
    for arg_name, value in decoded:
        where = f"argument '{arg_name}' of custom op '{name}'"
        if isinstance(value, RuntimeValue) and value.tensor is not None:
            inputs.append(value.value)
        elif isinstance(value, list) and value and all(isinstance(v, RuntimeValue) for v in value):
            inputs.extend(_tensor_operand(v, where) for v in value)
        elif value is not None:
            args[arg_name] = _custom_attribute(declared[arg_name], value, where)
    result_types = []
    for result in op.results:
        converted = edge_tensor_type(result.type)
        if converted is None:
            raise ConversionError(f"custom op '{name}' returns {result.type}; only tensors are supported")
        result_types.append(converted)
    namespace, packet, overload_name = name.split(".")
    qualified = f"{namespace}::{packet}" + ("" if overload_name == "default" else f".{overload_name}")
    attributes = {"op": ir.StringAttr.get(qualified), "schema": ir.StringAttr.get(str(overload._schema)),
                  "args": ir.DictAttr.get(args)}
    joined_type([edge_tensor_type(v.type) for v in inputs])  # raises if the inputs cannot share one type
    return _Plan("edge.custom_op", [inputs], attributes, result_types, False, False, (0,), True)


def _custom_attribute(declared: str, value: Any, where: str) -> ir.Attribute:
    if isinstance(value, bool):
        return _attribute("bool", value, where, [])
    if isinstance(value, int):
        return _attribute("int", value, where, [])
    if isinstance(value, float):
        return _attribute("float", value, where, [])
    if isinstance(value, str):
        return _attribute("str", value, where, [])
    if isinstance(value, torch.dtype):
        return _attribute("dtype", value, where, [])
    if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return _attribute("int[]", value, where, [])
    raise ConversionError(f"{where} ({declared}) = {value!r} cannot be passed to a custom op")


# ---------------------------------------------------------------------------------------------- checks

def _fold_scalar_constants(function: ir.Operation) -> None:
    """`torch.aten.Int.bool %true` -> `torch.constant.int 1` (and other scalar ops on constants).

    An op Python would raise on (`1 // 0`) or whose int leaves 64 bits stays: its
    runtime kernel reports it, naming the op.
    """
    for op in body_ops(function):
        family = size_arithmetic(op)
        if family is None:
            continue
        owners = [v.owner.operation for v in op.operands if isinstance(v.owner, (ir.Operation, ir.OpView))]
        if len(owners) != len(op.operands) or not all(o.name.startswith("torch.constant.") for o in owners):
            continue
        try:
            value = _as_result_type(family.fold(*[o.attributes["value"].value for o in owners]), op.results[0].type)
        except (ArithmeticError, ValueError):
            continue
        if isinstance(value, int) and not -2**63 <= value < 2**63:
            continue
        with ir.InsertionPoint(op), op.location:
            if isinstance(value, bool):
                const = ir.Operation.create("torch.constant.bool", results=[ir.Type.parse("!torch.bool")],
                                            attributes={"value": ir.BoolAttr.get(value)})
            elif isinstance(value, int):
                const = ir.Operation.create("torch.constant.int", results=[ir.Type.parse("!torch.int")],
                                            attributes={"value": ir.IntegerAttr.get(
                                                ir.IntegerType.get_signless(64), value)})
            else:
                const = ir.Operation.create("torch.constant.float", results=[ir.Type.parse("!torch.float")],
                                            attributes={"value": ir.FloatAttr.get(ir.F64Type.get(), value)})
        op.results[0].replace_all_uses_with(const.results[0])
        op.erase()


def _as_result_type(value: Any, result_type: ir.Type) -> Any:
    """A folded value as the op's result type says (`pow.int` is a float in its schema, an int in Python)."""
    kind = str(result_type)
    if kind == "!torch.float":
        return float(value)
    if kind == "!torch.int":
        return int(value)
    if kind == "!torch.bool":
        return bool(value)
    return value


def _converts(op: ir.Operation) -> bool:
    return op.name not in ("builtin.module", "func.func", "func.return") and not op.name.startswith(_DISSOLVED) \
        and not is_control_flow(op)


def _unconvertible(function: ir.Operation) -> list[tuple[ir.Operation, Exception]]:
    """Every op of `function` that cannot become edge, with the reason (checked before rewriting)."""
    failures = []
    for op in body_ops(function):
        if not _converts(op) or op.name in ("torch.vtensor.literal", "torch.tensor_static_info_cast"):
            continue
        try:
            _plan(op)
        except ConversionError as exc:
            failures.append((op, exc))
    return failures


def _record_upper_bounds(function: ir.Operation) -> None:
    """Stamp `etmlir.upper_bounds` on torch ops with dynamic results; conversion carries it over."""
    if "?" not in str(function.attributes["function_type"]) and not any(
            "?" in str(r.type) for op in body_ops(function) for r in op.results):
        return
    for op, bounds in upper_bounds(function).items():
        if op.name == "torch.prim.ListUnpack":  # bounds of a Tensor[] result live on its producer
            producer = op.operands[0].owner
            if isinstance(producer, (ir.Operation, ir.OpView)):
                producer.attributes[attrs.UPPER_BOUNDS] = _bounds_attribute(bounds)
            continue
        op.attributes[attrs.UPPER_BOUNDS] = _bounds_attribute(bounds)


def _all_static(types: list[ir.Type]) -> bool:
    return all(ir.RankedTensorType(t).has_static_shape for t in types)


def _bounds_attribute(bounds: list[list[int | None]]) -> ir.ArrayAttr:
    return ir.ArrayAttr.get([ir.DenseI64ArrayAttr.get([DYNAMIC if b is None else b for b in result])
                             for result in bounds])


# ---------------------------------------------------------------------------------------------- rewriting

def _convert_signatures(module: ir.Operation, converter: _EdgeTypeConverter) -> None:
    tc = converter.converter

    def convert_func(op: Any, adaptor: Any, tconv: Any, rewriter: Any) -> bool:
        ftype = ir.FunctionType(ir.TypeAttr(op.attributes["function_type"]).value)
        inputs = [tconv.convert_type(t) for t in ftype.inputs]
        results = [tconv.convert_type(t) for t in ftype.results]
        if list(ftype.inputs) == inputs and list(ftype.results) == results:
            return True  # nothing to convert: no match
        rewriter.convert_region_types(op.regions[0], tconv)
        op.attributes["function_type"] = ir.TypeAttr.get(ir.FunctionType.get(inputs, results))
        return False

    def convert_return(op: Any, adaptor: Any, tconv: Any, rewriter: Any) -> None:
        with rewriter.ip, op.location:
            new = func_dialect.ReturnOp(list(adaptor.operands))
        rewriter.replace_op(op, new.operation)

    patterns = rw.RewritePatternSet()
    patterns.add_conversion("func.func", convert_func, tc)
    patterns.add_conversion("func.return", convert_return, tc)
    target = rw.ConversionTarget()
    target.add_illegal_op("func.return")
    config = rw.ConversionConfig()
    config.build_materializations = False
    config.folding_mode = rw.DialectConversionFoldingMode.NEVER
    rw.apply_partial_conversion(module, target, patterns.freeze(), config)


def _convert_ops(module: ir.Operation, converter: _EdgeTypeConverter) -> None:
    tc = converter.converter

    def materialize(value: Any, target: ir.Type | None, rewriter: Any, location: ir.Location) -> ir.Value:
        """An operand of the new op: converted values pass through; others get a cast or a constant."""
        with rewriter.ip, location:
            if not isinstance(value, ir.Value):  # a Python scalar -> 0-d tensor constant
                return _scalar_constant(value)
            wanted = target or (edge_tensor_type(value.type) if str(value.type).startswith("!torch.vtensor")
                                else _scalar_tensor_type(value.type))
            if value.type == wanted:
                return value
            cast = ir.Operation.create("builtin.unrealized_conversion_cast", results=[wanted], operands=[value])
            return cast.results[0]

    def convert_op(op: Any, adaptor: Any, tconv: Any, rewriter: Any) -> bool:
        op = op.operation
        plan = _plan(op)
        direct = list(zip(op.operands, adaptor.operands))  # original operand -> its converted value
        operands: list[ir.Value] = []
        sizes: list[int] = []
        for index, group in enumerate(plan.groups):
            values = []
            for item in group:
                converted = next((new for old, new in direct if old == item), None) \
                    if isinstance(item, ir.Value) else None
                if converted is not None and not str(converted.type).startswith("!torch"):
                    values.append(converted)
                else:
                    values.append(materialize(item, None, rewriter, op.location))
            if index in plan.variadic_groups:
                if _BROADCAST_LISTS.get(plan.name) == index:
                    values = _lift_ranks(values, rewriter, op.location)
                values = _cast_all(values, joined_type([v.type for v in values]), rewriter, op.location)
            operands.extend(values)
            sizes.append(len(values))
        attributes = dict(plan.attributes)
        if plan.needs_segment_sizes:
            attributes["operandSegmentSizes"] = ir.DenseI32ArrayAttr.get(sizes)
        if attrs.UPPER_BOUNDS in op.attributes:
            attributes[attrs.UPPER_BOUNDS] = op.attributes[attrs.UPPER_BOUNDS]
        result_types = plan.result_types
        if plan.variadic_results:
            result_types = [joined_type(result_types)] * len(result_types)
            if attrs.UPPER_BOUNDS not in attributes and _all_static(plan.result_types) \
                    and not ir.RankedTensorType(result_types[0]).has_static_shape:
                # Static results of different sizes (split [96] into 32 and 64) share a `?` type;
                # each result's bound is its own static size.
                attributes[attrs.UPPER_BOUNDS] = _bounds_attribute(
                    [list(ir.RankedTensorType(t).shape) for t in plan.result_types])
        with rewriter.ip, op.location:
            new = ir.Operation.create(plan.name, results=result_types, operands=operands,
                                      attributes=attributes)
        results = list(new.results)
        if plan.variadic_results:  # back to each result's own type
            results = [_cast_all([r], t, rewriter, op.location)[0] for r, t in zip(results, plan.result_types)]
        if plan.replaces_unpacks:
            unpack = next(use.owner for use in op.results[0].uses)
            rewriter.replace_op(unpack, results)
            rewriter.erase_op(op)
        else:
            rewriter.replace_op(op, results)
        return False

    def convert_literal(op: Any, adaptor: Any, tconv: Any, rewriter: Any) -> None:
        op = op.operation
        result_type = edge_tensor_type(op.results[0].type)
        attributes = {"value": _retyped_elements(op.attributes["value"], result_type)}
        if attrs.PARAM in op.attributes:
            attributes[attrs.PARAM] = op.attributes[attrs.PARAM]
        with rewriter.ip, op.location:
            new = ir.Operation.create("edge.constant", results=[result_type], attributes=attributes)
        rewriter.replace_op(op, new)

    def convert_static_cast(op: Any, adaptor: Any, tconv: Any, rewriter: Any) -> None:
        op = op.operation
        source = adaptor.operands[0]
        if str(source.type).startswith("!torch"):
            source = materialize(source, None, rewriter, op.location)
        with rewriter.ip, op.location:
            new = ir.Operation.create("tensor.cast", results=[edge_tensor_type(op.results[0].type)],
                                      operands=[source])
        rewriter.replace_op(op, new)

    names = set()

    def collect(op: ir.Operation) -> ir.WalkResult:
        if op.name.startswith("torch.") and _converts(op):
            names.add(op.name)
        return ir.WalkResult.ADVANCE

    module.walk(collect)
    patterns = rw.RewritePatternSet()
    target = rw.ConversionTarget()
    special = {"torch.vtensor.literal": convert_literal, "torch.tensor_static_info_cast": convert_static_cast}
    for name in sorted(names):
        patterns.add_conversion(name, special.get(name, convert_op), tc)
        target.add_illegal_op(name)
    target.add_legal_dialect("edge", "tensor", "func", "builtin")
    config = rw.ConversionConfig()
    config.build_materializations = False
    # torch-mlir's folders would otherwise rewrite some ops (aten.clone) before our patterns see
    # them; folding no-op copies is et-edge-canonicalize's job, where it is visible.
    config.folding_mode = rw.DialectConversionFoldingMode.NEVER
    rw.apply_partial_conversion(module, target, patterns.freeze(), config)


def _scalar_constant(value: Any) -> ir.Value:
    if isinstance(value, bool):
        t = ir.RankedTensorType.get([], ir.IntegerType.get_signless(1))
        attr = ir.DenseElementsAttr.get_splat(t, ir.BoolAttr.get(value))
    elif isinstance(value, int):
        t = ir.RankedTensorType.get([], ir.IntegerType.get_signless(64))
        attr = ir.DenseElementsAttr.get_splat(t, ir.IntegerAttr.get(ir.IntegerType.get_signless(64), value))
    elif isinstance(value, float):
        t = ir.RankedTensorType.get([], ir.F64Type.get())
        attr = ir.DenseElementsAttr.get_splat(t, ir.FloatAttr.get(ir.F64Type.get(), value))
    else:
        raise ConversionError(f"scalar {value!r} cannot become a tensor")
    return ir.Operation.create("edge.constant", results=[t], attributes={"value": attr}).results[0]


def _retyped_elements(attr: ir.Attribute, target: ir.RankedTensorType) -> ir.Attribute:
    """A literal's value for an `edge.constant` of type `target`; a `dense_resource` payload is not copied.

    Float, `ui8` and `i1` literals already have their edge type. Signed
    integers (`si64` -> `i64`) differ only in signedness, which changes no
    byte: a `dense_resource` keeps its attribute (the bindings can neither
    retype a blob nor reach its bytes, and re-parsing the attribute would
    make a new, empty blob), so the `edge.constant` result carries the edge
    type and readers take the element type from it. Dense constants
    (scalars and splats) are rebuilt under the edge type.
    """
    if attr.type == target:
        return attr
    source = ir.RankedTensorType(attr.type)
    element = source.element_type
    if (list(source.shape) != list(target.shape) or not isinstance(element, ir.IntegerType)
            or ir.IntegerType(element).width != ir.IntegerType(target.element_type).width):
        raise ConversionError(f"literal {str(attr)[:60]} has an unsupported element type (edge type {target})")
    if str(attr).startswith("dense_resource<"):  # the bindings do not downcast this attribute
        return attr
    if isinstance(attr, ir.DenseElementsAttr):
        import numpy as np
        array = np.array(attr)
        return ir.DenseElementsAttr.get(np.ascontiguousarray(array), type=target.element_type,
                                        shape=list(target.shape))
    raise ConversionError(f"literal {str(attr)[:60]} has an unsupported element type")


def _erase_dissolved(module: ir.Operation) -> None:
    """Remove the torch constants, lists and symbolic-shape ops nothing uses any more."""
    changed = True
    while changed:
        changed = False
        dead: list[ir.Operation] = []

        def visit(op: ir.Operation) -> ir.WalkResult:
            if op.name.startswith(_DISSOLVED) and not any(True for r in op.results for _ in r.uses):
                dead.append(op)
            return ir.WalkResult.ADVANCE

        module.walk(visit)
        for op in dead:
            op.erase()
            changed = True


def _ops_not_converted(module: ir.Operation) -> list[ir.Operation]:
    found: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name.startswith("torch.") or op.name == "builtin.unrealized_conversion_cast":
            found.append(op)
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    return found
