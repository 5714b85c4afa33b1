"""et-edge-to-torch: rebuild edge functions as torch-mlir's `torch` dialect (value tensors).

The way back from the edge level to the level torch-mlir's lowerings start
from: the `cpu` backend (then `et-torch-to-linalg`), the reference runner the
tests use, and `et-fold-constants` (which runs single ops eagerly) share it.
It is also how tests evaluate an edge module with code that shares nothing with
et-to-edge: every edge op is read back through its entry in the generated op
table (attributes -> `torch.constant.*`, 0-d scalar tensors -> Python-scalar
constants or run-time `!torch.int`s, `sym_values` -> the sizes they stand for)
and the result goes through torch-mlir's own linalg lowering and MLIR's JIT
(`ReferenceRunner`). If et-to-edge dropped or mangled an argument, the
numbers stop matching PyTorch eager.

    %0 = "edge.view_copy"(%x, %n) {size = array<i64: -9223372036854775808, 384>} : (...) -> tensor<?x384xf32>

becomes

    %l = torch.prim.ListConstruct %n_int, %int384 : (!torch.int, !torch.int) -> !torch.list<int>
    %0 = torch.aten.view %x, %l : ... -> !torch.vtensor<[?,384],f32>

Each torch op an edge op becomes carries that op's debug handle in its location
(`loc(fused<{etmlir.debug_handle = 7 : i64}>[...])`, `frontend.locations.with_debug_handle`):
the code a backend generates from it can then still name the edge op it came
from (the `cpu` backend's timed regions and failures).

The same reading of an op's arguments also runs one edge op with PyTorch eager
(`run_eagerly`), which is how et-fold-constants evaluates ops on constants.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
from torch_mlir import ir
from torch_mlir.dialects import func as func_dialect

from etmlir.dialects.edge import DYNAMIC, EDGE_ELEMENT_TYPES, edge_op_of, named_operands
from etmlir.dialects.sym_ops import SYM_OPS, SymOp
from etmlir.frontend.aten_ops import lookup_overload
from etmlir.frontend.locations import with_debug_handle
from etmlir.lazy import lazy_module
from etmlir.passes.assign_debug_handles import debug_handle
from etmlir.passes.registry import PassFailure, emit_error, register_pass

torch = lazy_module("torch")
fx_importer = lazy_module("torch_mlir.extras.fx_importer")

_VTENSOR_ELEMENT = {"i64": "si64", "i32": "si32", "i16": "si16", "i8": "si8"}


@functools.cache
def _torch_dtypes() -> dict[str, torch.dtype]:
    """Edge element type (`f32`) -> torch dtype."""
    return {element: getattr(torch, name) for name, element in EDGE_ELEMENT_TYPES.items()}


@functools.cache
def _torch_enums(kind: str) -> dict[str, object]:
    """`torch.channels_last` -> the object, for memory formats and layouts (as edge attributes spell them)."""
    table = fx_importer.TORCH_MEMORY_FORMAT_TO_INT if kind == "memory_format" else fx_importer.TORCH_LAYOUT_TO_INT
    return {str(k): k for k in table}


def torch_type(t: ir.Type) -> ir.Type:
    """`tensor<2x?xi64>` -> `!torch.vtensor<[2,?],si64>`."""
    tensor = ir.RankedTensorType(t)
    dims = ",".join("?" if tensor.is_dynamic_dim(i) else str(tensor.shape[i]) for i in range(tensor.rank))
    element = str(tensor.element_type)
    return ir.Type.parse(f"!torch.vtensor<[{dims}],{_VTENSOR_ELEMENT.get(element, element)}>")


class _Builder:
    def __init__(self) -> None:
        self.values: dict[Any, ir.Value] = {}  # edge value -> torch value (tensor)
        self.ints: dict[Any, ir.Value] = {}  # edge 0-d size (or size arithmetic) value -> !torch.int/float/bool

    def constant(self, kind: str, value: Any) -> ir.Value:
        if value is None:
            return ir.Operation.create("torch.constant.none", results=[ir.Type.parse("!torch.none")]).result
        if kind == "bool":
            return ir.Operation.create("torch.constant.bool", results=[ir.Type.parse("!torch.bool")],
                                       attributes={"value": ir.BoolAttr.get(bool(value))}).result
        if kind == "int":
            return ir.Operation.create("torch.constant.int", results=[ir.Type.parse("!torch.int")],
                                       attributes={"value": ir.IntegerAttr.get(ir.IntegerType.get_signless(64),
                                                                               int(value))}).result
        if kind == "float":
            return ir.Operation.create("torch.constant.float", results=[ir.Type.parse("!torch.float")],
                                       attributes={"value": ir.FloatAttr.get(ir.F64Type.get(),
                                                                             float(value))}).result
        if kind == "str":
            return ir.Operation.create("torch.constant.str", results=[ir.Type.parse("!torch.str")],
                                       attributes={"value": ir.StringAttr.get(value)}).result
        if kind == "device":
            return ir.Operation.create("torch.constant.device", results=[ir.Type.parse("!torch.Device")],
                                       attributes={"value": ir.StringAttr.get(value)}).result
        raise ValueError(f"no torch constant for {kind}")

    def list_of(self, element_type: str, items: list[ir.Value]) -> ir.Value:
        return ir.Operation.create("torch.prim.ListConstruct", results=[ir.Type.parse(f"!torch.list<{element_type}>")],
                                   operands=items).result

    def tensor(self, value: ir.Value) -> ir.Value:
        """The torch tensor for an edge tensor value; a size (`edge.sym_size_int`, size arithmetic)
        used as a tensor (returned, or an operand of a tensor op) goes through NumToTensor."""
        if value not in self.values and value in self.ints:
            self.values[value] = ir.Operation.create(
                "torch.prim.NumToTensor.Scalar", results=[torch_type(value.type)], operands=[self.ints[value]]).result
        return self.values[value]

    def scalar(self, value: ir.Value) -> ir.Value:
        """A 0-d edge tensor used as a Scalar: a constant, or a run-time int."""
        if value in self.ints:
            return self.ints[value]
        owner = value.owner
        if isinstance(owner, (ir.Operation, ir.OpView)) and owner.name == "edge.constant":
            splat = np.array(ir.DenseElementsAttr(owner.attributes["value"])).reshape(())
            element = str(ir.RankedTensorType(value.type).element_type)
            kind = "bool" if element == "i1" else "float" if element.startswith(("f", "bf")) else "int"
            return self.constant(kind, splat.item())
        raise ValueError(f"scalar operand {value} is neither a constant nor a size")


class NotConvertible(ValueError):
    """An edge op with no torch-dialect form; `op` is the op, the message says why."""

    def __init__(self, op: ir.Operation, message: str) -> None:
        super().__init__(message)
        self.op = op


def edge_to_torch(module: ir.Module | ir.Operation) -> ir.Module:
    """A new torch-dialect module computing what `module` (edge) computes (`module` is not changed)."""
    operation = module.operation
    with operation.context, ir.Location.unknown():
        result = ir.Module.create()
        for op in operation.regions[0].blocks[0].operations:
            if op.operation.name == "func.func":
                _convert_function(op.operation, result)
        result.operation.verify()
        return result


@register_pass("et-edge-to-torch", level="edge")
def edge_to_torch_pass(module: ir.Operation) -> None:
    """et-edge-to-torch: rebuild every edge function as torch-dialect ops on !torch.vtensor values.

        func.func @forward(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
          %0 = "edge.relu"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
    becomes
        func.func @forward(%x: !torch.vtensor<[2,3],f32>) -> !torch.vtensor<[2,3],f32> {
          %0 = torch.aten.relu %x : !torch.vtensor<[2,3],f32> -> !torch.vtensor<[2,3],f32>
    """
    try:
        converted = edge_to_torch(module)
    except NotConvertible as error:
        emit_error(error.op, f"et-edge-to-torch: {error}")
        raise PassFailure() from None
    body = module.regions[0].blocks[0]
    for old, new in zip([op.operation for op in body.operations if op.operation.name == "func.func"],
                        [op.operation for op in converted.body.operations]):
        new.move_before(old)
        old.erase()


def _convert_function(function: ir.Operation, into: ir.Module) -> None:
    ftype = ir.FunctionType(ir.TypeAttr(function.attributes["function_type"]).value)
    new_type = ir.FunctionType.get([torch_type(t) for t in ftype.inputs], [torch_type(t) for t in ftype.results])
    with ir.InsertionPoint(into.body), function.location:
        new = func_dialect.FuncOp(ir.StringAttr(function.attributes["sym_name"]).value, new_type)
    if "arg_attrs" in function.attributes:
        new.attributes["arg_attrs"] = function.attributes["arg_attrs"]
    block = new.add_entry_block()
    builder = _Builder()
    for old, arg in zip(function.regions[0].blocks[0].arguments, block.arguments):
        builder.values[old] = arg
    for op in function.regions[0].blocks[0].operations:
        op = op.operation
        handle = debug_handle(op)
        location = op.location if handle is None else with_debug_handle(op.location, handle)
        with ir.InsertionPoint(block), location:
            if op.name == "func.return":
                func_dialect.ReturnOp([builder.tensor(v) for v in op.operands])
            elif op.name == "edge.constant":
                attr = op.attributes["value"]
                target = torch_type(op.results[0].type)
                literal = ir.Operation.create("torch.vtensor.literal", results=[target],
                                              attributes={"value": _torch_literal(attr, target)})
                builder.values[op.results[0]] = literal.result
            elif op.name == "tensor.cast":
                cast = ir.Operation.create("torch.tensor_static_info_cast", results=[torch_type(op.results[0].type)],
                                           operands=[builder.tensor(op.operands[0])])
                builder.values[op.results[0]] = cast.result
            else:
                try:
                    _convert_op(op, builder)
                except ValueError as error:
                    raise NotConvertible(op, str(error)) from None


def _torch_literal(attr: ir.Attribute, target: ir.Type) -> ir.Attribute:
    """The literal's attribute with torch's signed integer element types."""
    text = str(target)
    element = text[text.rindex(",") + 1:-1]
    if element not in ("si64", "si32", "si16", "si8") or str(ir.ShapedType(attr.type).element_type) == element:
        return attr  # a signed dense_resource keeps its attribute at the edge level (et-to-edge)
    tensor = ir.RankedTensorType(attr.type)
    builtin = ir.RankedTensorType.get(tensor.shape, ir.Type.parse(element))
    return ir.DenseElementsAttr.get(np.array(ir.DenseElementsAttr(attr)), type=builtin.element_type,
                                    shape=list(tensor.shape))


def _convert_op(op: ir.Operation, builder: _Builder) -> None:
    info = edge_op_of(op)
    if info is None:
        raise ValueError(f"no torch-dialect form for '{op.name}'")
    if op.name == "edge.sym_size_int":
        size = ir.Operation.create("torch.aten.size.int", results=[ir.Type.parse("!torch.int")],
                                   operands=[builder.tensor(op.operands[0]),
                                             builder.constant("int", op.attributes["dim"].value)])
        builder.ints[op.results[0]] = size.result
        return
    if op.name == "edge.to_dim_order_copy":
        # Our own operator has no torch-mlir lowering; with the identity dim order (the only one a
        # backend takes) it is a dtype conversion, aten.to.dtype.
        dtype = fx_importer.TORCH_DTYPE_TO_INT[torch_dtype(op.results[0].type)]
        new = ir.Operation.create("torch.aten.to.dtype", results=[torch_type(op.results[0].type)], operands=[
            builder.tensor(op.operands[0]), builder.constant("int", dtype), builder.constant("bool", False),
            builder.constant("bool", False), builder.constant("none", None)])
        builder.values[op.results[0]] = new.result
        return
    family = SYM_OPS.get(op.name.removeprefix("edge."))
    if family is not None:
        builder.ints[op.results[0]] = _size_arithmetic(family, [builder.scalar(v) for v in op.operands],
                                                       op.results[0].type)
        return
    groups = named_operands(op, info)
    sym_values = iter(groups.get("sym_values", []))
    operands: list[ir.Value] = []
    for arg in info.args:
        name, kind = arg["name"], arg["kind"]
        base = kind.rstrip("?")
        if base in ("tensor", "scalar"):
            values = groups[name]
            if not values:
                operands.append(builder.constant("none", None))
            elif base == "tensor":
                operands.append(builder.tensor(values[0]))
            else:
                operands.append(builder.scalar(values[0]))
        elif base in ("tensor[]",):
            operands.append(builder.list_of("vtensor", [builder.tensor(v) for v in groups[name]]))
        elif name not in op.attributes:
            operands.append(builder.constant("none", None))
        else:
            operands.append(_attribute_operand(builder, base, op.attributes[name], sym_values))
    aten = (info.stands_for or info.aten).replace("::", ".")
    op_name = f"torch.{aten}"
    list_result = any(r["kind"] == "tensor[]" for r in info.results)
    result_types = ([ir.Type.parse("!torch.list<vtensor>")] if list_result else
                    [torch_type(r.type) for r in op.results])
    context = op.context
    if context.is_registered_operation(op_name):
        new = ir.Operation.create(op_name, results=result_types, operands=operands)
    else:
        new = ir.Operation.create("torch.operator", results=result_types, operands=operands,
                                  attributes={"name": ir.StringAttr.get(aten)})
    results = list(new.results)
    if list_result:
        unpack = ir.Operation.create("torch.prim.ListUnpack", results=[torch_type(r.type) for r in op.results],
                                     operands=results)
        results = list(unpack.results)
    for old, value in zip(op.results, results):
        builder.values[old] = value


_SCALAR_KINDS = {"!torch.int": "int", "!torch.float": "float", "!torch.bool": "bool"}


def _size_arithmetic(family: SymOp, operands: list[ir.Value], result: ir.Type) -> ir.Value:
    """`edge.sym_mul` on (!torch.int, !torch.int) -> `torch.aten.mul.int`: the family's overload for these kinds."""
    kinds = [_SCALAR_KINDS.get(str(v.type)) for v in operands]
    for name in family.torch_ops:
        schema = lookup_overload(name)._schema
        if [str(a.type) for a in schema.arguments] in (kinds, ["number"] * len(kinds)):
            break
    else:
        raise ValueError(f"{family.edge_name} has no torch overload for operands ({', '.join(map(str, kinds))})")
    element = str(ir.RankedTensorType(result).element_type)
    result_type = ir.Type.parse({"i64": "!torch.int", "i1": "!torch.bool"}.get(element, "!torch.float"))
    op_name = "torch." + name.removesuffix(".default")
    if ir.Context.current.is_registered_operation(op_name):
        return ir.Operation.create(op_name, results=[result_type], operands=operands).result
    return ir.Operation.create("torch.operator", results=[result_type], operands=operands,
                               attributes={"name": ir.StringAttr.get(op_name)}).result


def _attribute_operand(builder: _Builder, kind: str, attr: ir.Attribute, sym_values: Any) -> ir.Value:
    def size(value: int) -> ir.Value:
        return builder.ints[next(sym_values)] if value == DYNAMIC else builder.constant("int", value)

    if kind == "symint":
        return size(ir.IntegerAttr(attr).value)
    if kind == "symint[]":
        return builder.list_of("int", [size(v) for v in ir.DenseI64ArrayAttr(attr)])
    value = attribute_value(kind, attr)
    if kind in ("int[]", "bool[]", "float[]"):
        element = kind[:-2]
        return builder.list_of(element, [builder.constant(element, v) for v in value])
    if kind == "dtype":
        return builder.constant("int", fx_importer.TORCH_DTYPE_TO_INT[value])
    if kind == "memory_format":
        return builder.constant("int", fx_importer.TORCH_MEMORY_FORMAT_TO_INT[value])
    if kind == "layout":
        return builder.constant("int", fx_importer.TORCH_LAYOUT_TO_INT[value])
    return builder.constant(kind, value)


def attribute_value(kind: str, attr: ir.Attribute) -> Any:
    """The Python value of an edge attribute whose schema kind (without `?`) is `kind`.

    Sizes stay as stored (`DYNAMIC` where only known at run time); dtypes, memory
    formats and layouts become the torch objects.
    """
    if kind in ("int", "symint"):
        return ir.IntegerAttr(attr).value
    if kind in ("int[]", "symint[]"):
        return list(ir.DenseI64ArrayAttr(attr))
    if kind == "bool[]":
        return list(ir.DenseBoolArrayAttr(attr))
    if kind == "float[]":
        return list(ir.DenseF64ArrayAttr(attr))
    if kind == "dtype":
        return _torch_dtypes()[str(ir.TypeAttr(attr).value)]
    if kind == "memory_format":
        return _torch_enums("memory_format")[ir.StringAttr(attr).value]
    if kind == "layout":
        return _torch_enums("layout")[ir.StringAttr(attr).value]
    if kind in ("device", "str"):
        return ir.StringAttr(attr).value
    if kind in ("bool", "float"):
        return attr.value
    raise ValueError(f"edge_to_torch: no Python value for an attribute of kind '{kind}'")


def torch_dtype(t: ir.Type) -> torch.dtype:
    """The torch dtype of an edge tensor type's elements (`tensor<2xi64>` -> torch.int64)."""
    element = str(ir.RankedTensorType(t).element_type)
    if element not in _torch_dtypes():
        raise ValueError(f"edge_to_torch: no torch dtype for element type {element}")
    return _torch_dtypes()[element]


def run_eagerly(op: ir.Operation, value_of: Callable[[ir.Value], torch.Tensor]) -> list[torch.Tensor]:
    """Run one edge op with PyTorch eager; `value_of` gives the tensor behind each operand.

    Arguments are read back from the generated op table as `_convert_op` reads
    them: 0-d Scalar operands become Python numbers, `sym_values` the sizes they
    stand for, attributes their Python values. `edge.to_dim_order_copy` runs as
    `_to_copy` with its dtype (the values do not depend on the dim order).
    """
    info = edge_op_of(op)
    if info is None or op.name == "edge.sym_size_int":
        raise ValueError(f"run_eagerly: cannot run '{op.name}'")
    groups = named_operands(op, info)
    sym_values = iter(groups.get("sym_values", []))

    def size(value: int) -> int:
        return int(value_of(next(sym_values)).item()) if value == DYNAMIC else value

    arguments: dict[str, Any] = {}
    for arg in info.args:
        name, kind = arg["name"], arg["kind"]
        base = kind.rstrip("?")
        if base in ("tensor", "scalar"):
            values = groups[name]
            tensor = value_of(values[0]) if values else None
            arguments[name] = tensor.item() if base == "scalar" and tensor is not None else tensor
        elif base == "tensor[]":
            arguments[name] = [value_of(v) for v in groups[name]]
        elif kind == "tensor?[]":
            present = list(ir.DenseBoolArrayAttr(op.attributes[f"{name}_present"]))
            values = iter(groups[name])
            arguments[name] = [value_of(next(values)) if p else None for p in present]
        elif name not in op.attributes:
            arguments[name] = None
        elif base == "symint":
            arguments[name] = size(ir.IntegerAttr(op.attributes[name]).value)
        elif base == "symint[]":
            arguments[name] = [size(v) for v in ir.DenseI64ArrayAttr(op.attributes[name])]
        else:
            arguments[name] = attribute_value(base, op.attributes[name])
    if op.name == "edge.to_dim_order_copy":
        overload = torch.ops.aten._to_copy.default
        arguments = {"self": arguments["self"], "dtype": arguments["dtype"]}
    else:
        overload = lookup_overload(info.aten)
        if overload is None:
            raise ValueError(f"run_eagerly: PyTorch has no operator {info.aten}")
    positional, keywords = [], {}
    for argument in overload._schema.arguments:
        if argument.name not in arguments:
            continue
        if argument.kwarg_only:
            keywords[argument.name] = arguments[argument.name]
        else:
            positional.append(arguments[argument.name])
    with torch.no_grad():
        result = overload(*positional, **keywords)
    return list(result) if isinstance(result, (tuple, list)) else [result]
