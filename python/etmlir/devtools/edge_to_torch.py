"""Rebuild a torch-dialect function from an edge module, so the reference runner can execute it.

This is how tests evaluate an edge module with code that shares nothing with
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
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch_mlir import ir
from torch_mlir.dialects import func as func_dialect
from torch_mlir.extras import fx_importer

from etmlir.dialects.edge import DYNAMIC, EDGE_ELEMENT_TYPES, edge_op_of, named_operands

_TORCH_DTYPE = {element: getattr(torch, name) for name, element in EDGE_ELEMENT_TYPES.items()}
_VTENSOR_ELEMENT = {"i64": "si64", "i32": "si32", "i16": "si16", "i8": "si8"}


def torch_type(t: ir.Type) -> ir.Type:
    """`tensor<2x?xi64>` -> `!torch.vtensor<[2,?],si64>`."""
    tensor = ir.RankedTensorType(t)
    dims = ",".join("?" if tensor.is_dynamic_dim(i) else str(tensor.shape[i]) for i in range(tensor.rank))
    element = str(tensor.element_type)
    return ir.Type.parse(f"!torch.vtensor<[{dims}],{_VTENSOR_ELEMENT.get(element, element)}>")


class _Builder:
    def __init__(self) -> None:
        self.values: dict[Any, ir.Value] = {}  # edge value -> torch value (tensor)
        self.ints: dict[Any, ir.Value] = {}  # edge 0-d i64 value -> !torch.int

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


def edge_to_torch(module: ir.Module) -> ir.Module:
    """A new torch-dialect module computing what `module` (edge) computes."""
    with module.context, ir.Location.unknown():
        result = ir.Module.create()
        for op in module.body.operations:
            if op.operation.name == "func.func":
                _convert_function(op.operation, result)
        result.operation.verify()
        return result


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
        with ir.InsertionPoint(block), op.location:
            if op.name == "func.return":
                func_dialect.ReturnOp([builder.values[v] for v in op.operands])
            elif op.name == "edge.constant":
                attr = op.attributes["value"]
                target = torch_type(op.results[0].type)
                literal = ir.Operation.create("torch.vtensor.literal", results=[target],
                                              attributes={"value": _torch_literal(attr, target)})
                builder.values[op.results[0]] = literal.result
            elif op.name == "tensor.cast":
                cast = ir.Operation.create("torch.tensor_static_info_cast", results=[torch_type(op.results[0].type)],
                                           operands=[builder.values[op.operands[0]]])
                builder.values[op.results[0]] = cast.result
            else:
                _convert_op(op, builder)


def _torch_literal(attr: ir.Attribute, target: ir.Type) -> ir.Attribute:
    """The literal's attribute with torch's signed integer element types."""
    text = str(target)
    element = text[text.rindex(",") + 1:-1]
    if element not in ("si64", "si32", "si16", "si8"):
        return attr
    tensor = ir.RankedTensorType(attr.type)
    builtin = ir.RankedTensorType.get(tensor.shape, ir.Type.parse(element))
    return ir.DenseElementsAttr.get(np.array(ir.DenseElementsAttr(attr)), type=builtin.element_type,
                                    shape=list(tensor.shape))


def _convert_op(op: ir.Operation, builder: _Builder) -> None:
    info = edge_op_of(op)
    if info is None:
        raise ValueError(f"edge_to_torch: cannot rebuild '{op.name}'")
    if op.name == "edge.sym_size_int":
        size = ir.Operation.create("torch.aten.size.int", results=[ir.Type.parse("!torch.int")],
                                   operands=[builder.values[op.operands[0]],
                                             builder.constant("int", op.attributes["dim"].value)])
        builder.ints[op.results[0]] = size.result
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
                operands.append(builder.values[values[0]])
            else:
                operands.append(builder.scalar(values[0]))
        elif base in ("tensor[]",):
            operands.append(builder.list_of("vtensor", [builder.values[v] for v in groups[name]]))
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


def _attribute_operand(builder: _Builder, kind: str, attr: ir.Attribute, sym_values: Any) -> ir.Value:
    def size(value: int) -> ir.Value:
        return builder.ints[next(sym_values)] if value == DYNAMIC else builder.constant("int", value)

    if kind == "symint":
        return size(ir.IntegerAttr(attr).value)
    if kind == "symint[]":
        return builder.list_of("int", [size(v) for v in ir.DenseI64ArrayAttr(attr)])
    if kind == "int[]":
        return builder.list_of("int", [builder.constant("int", v) for v in ir.DenseI64ArrayAttr(attr)])
    if kind == "bool[]":
        return builder.list_of("bool", [builder.constant("bool", v) for v in ir.DenseBoolArrayAttr(attr)])
    if kind == "float[]":
        return builder.list_of("float", [builder.constant("float", v) for v in ir.DenseF64ArrayAttr(attr)])
    if kind == "dtype":
        dtype = _TORCH_DTYPE[str(ir.TypeAttr(attr).value)]
        return builder.constant("int", fx_importer.TORCH_DTYPE_TO_INT[dtype])
    if kind == "memory_format":
        formats = {str(k): v for k, v in fx_importer.TORCH_MEMORY_FORMAT_TO_INT.items()}
        return builder.constant("int", formats[ir.StringAttr(attr).value])
    if kind == "layout":
        layouts = {str(k): v for k, v in fx_importer.TORCH_LAYOUT_TO_INT.items()}
        return builder.constant("int", layouts[ir.StringAttr(attr).value])
    if kind == "device":
        return builder.constant("device", ir.StringAttr(attr).value)
    if kind in ("int", "bool", "float", "str"):
        return builder.constant(kind, attr.value)
    raise ValueError(f"edge_to_torch: no torch form for an attribute of kind '{kind}'")
