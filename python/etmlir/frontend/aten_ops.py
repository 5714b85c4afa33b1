"""Which PyTorch operator a torch-dialect op is, and what its operands mean.

torch-mlir names ops after their ATen schema: `torch.aten.add.Tensor` is
`aten::add.Tensor`, `torch.aten.relu` is `aten::relu` (the default overload),
`torch.prims.convert_element_type` is `prims::convert_element_type`, and ops
without a generated definition import as `torch.operator "aten.foo.bar"`.
Operands follow the schema's argument order, one operand per argument, so a
schema is enough to read an op's arguments back as Python values.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from typing import Any

from torch_mlir import ir

from etmlir.dialects.edge import EDGE_ELEMENT_TYPES
from etmlir.lazy import lazy_module

torch = lazy_module("torch")
fx_importer = lazy_module("torch_mlir.extras.fx_importer")

_VTENSOR_RE = re.compile(r"^!torch\.vtensor<\[([^\]]*)\],(.+)>$")


@functools.cache
def mlir_dtype_to_torch() -> dict[str, torch.dtype]:
    """`f32` -> torch.float32, ... (torch-mlir's own table, inverted)."""
    return {asm: dtype for dtype, asm in fx_importer.TORCH_DTYPE_TO_MLIR_TYPE_ASM.items()}


@functools.cache
def _int_to_enum(kind: str) -> dict[int, Any]:
    """torch-mlir's integer encodings of dtypes, memory formats and layouts, inverted."""
    table = {"dtype": fx_importer.TORCH_DTYPE_TO_INT, "memory_format": fx_importer.TORCH_MEMORY_FORMAT_TO_INT,
             "layout": fx_importer.TORCH_LAYOUT_TO_INT}[kind]
    return {v: k for k, v in table.items()}


def canonical_op_name(name: str) -> str:
    """Normalize `aten::add.Tensor`, `torch.aten.add.Tensor`, `aten.relu` to `aten.add.Tensor` / `aten.relu.default`."""
    name = name.strip().replace("::", ".")
    if name.startswith("torch."):
        name = name[len("torch."):]
    parts = name.split(".")
    if len(parts) == 2:
        parts.append("default")
    return ".".join(parts)


def op_overload_name(op: ir.Operation) -> str | None:
    """`aten.add.Tensor` for a torch-dialect op that stands for a PyTorch operator, else None."""
    if op.name == "torch.operator":
        return canonical_op_name(ir.StringAttr(op.attributes["name"]).value)
    for namespace in ("torch.aten.", "torch.prims."):
        if op.name.startswith(namespace):
            return canonical_op_name(op.name)
    return None


def lookup_overload(name: str) -> torch._ops.OpOverload | None:
    """The PyTorch OpOverload for `aten.add.Tensor`, or None if PyTorch has no such operator."""
    namespace, packet, overload = canonical_op_name(name).split(".", 2)
    try:
        return getattr(getattr(getattr(torch.ops, namespace), packet), overload)
    except (AttributeError, RuntimeError):
        return None


@dataclasses.dataclass(frozen=True)
class TensorType:
    """A `!torch.vtensor<[2,?],f32>`: sizes with None for dynamic dims."""

    sizes: tuple[int | None, ...]
    dtype: torch.dtype


def parse_vtensor_type(t: ir.Type) -> TensorType | None:
    match = _VTENSOR_RE.match(str(t))
    if not match:
        return None
    dims, dtype_asm = match.groups()
    dtype = mlir_dtype_to_torch().get(dtype_asm)
    if dtype is None:
        return None
    sizes = tuple(None if d.strip() == "?" else int(d) for d in dims.split(",") if d.strip())
    return TensorType(sizes, dtype)


def _builtin_tensor_type(t: ir.Type) -> TensorType | None:
    """`tensor<2x?xf32>` (an edge type) as a TensorType."""
    tensor = ir.RankedTensorType(t)
    names = {edge: name for name, edge in EDGE_ELEMENT_TYPES.items()}
    name = names.get(str(tensor.element_type))
    if name is None:
        return None
    sizes = tuple(None if tensor.is_dynamic_dim(i) else tensor.shape[i] for i in range(tensor.rank))
    return TensorType(sizes, getattr(torch, name))


def is_tensor_type(t: ir.Type) -> bool:
    text = str(t)
    return text.startswith("!torch.vtensor") or text.startswith("!torch.tensor") or (
        text.startswith("!torch.list<") and "tensor" in text)


@dataclasses.dataclass(frozen=True)
class RuntimeValue:
    """An operand whose value is only known when the program runs (a tensor or a symbolic int)."""

    value: ir.Value
    tensor: TensorType | None  # None for a !torch.int (or a !torch.float / !torch.bool passed as a Scalar)


class UndecodableOperand(Exception):
    """An operand that cannot be turned into a Python value (the message says why).

    `argument` names the schema argument it was passed for, when known.
    """

    def __init__(self, message: str, argument: str | None = None) -> None:
        super().__init__(message)
        self.argument = argument


def decode_arguments(op: ir.Operation, overload: torch._ops.OpOverload) -> list[tuple[Any, Any]]:
    """(schema argument, decoded operand) for every argument of `op`, in schema order (see `decode_operand`)."""
    schema = overload._schema
    operands = list(op.operands)
    if len(operands) != len(schema.arguments):
        raise UndecodableOperand(
            f"it has {len(operands)} operands but the schema '{schema}' has {len(schema.arguments)} arguments")
    decoded = []
    for argument, declared, value in zip(schema.arguments, declared_argument_types(overload), operands):
        try:
            decoded.append((argument, decode_operand(value, argument.type, declared)))
        except UndecodableOperand as exc:
            raise UndecodableOperand(str(exc), argument.name) from None
    return decoded


def call_arguments(decoded: list[tuple[Any, Any]]) -> tuple[list[Any], dict[str, Any]]:
    """Positional and keyword-only values, ready for `overload(*args, **kwargs)`."""
    args = [value for argument, value in decoded if not argument.kwarg_only]
    kwargs = {argument.name: value for argument, value in decoded if argument.kwarg_only}
    return args, kwargs


@functools.cache
def declared_argument_types(overload: torch._ops.OpOverload) -> tuple[str, ...]:
    """Argument types as the schema text declares them (`SymInt[]`, `Scalar`, `int`), in operand order.

    `torch.FunctionSchema` reports `SymInt` as `int`; only the declared text
    says whether an argument may be a symbolic size.
    """
    return schema_argument_types(overload._schema)


def schema_argument_types(schema: torch.FunctionSchema) -> tuple[str, ...]:
    """`declared_argument_types` for a schema (also one that is not a registered operator)."""
    text = str(schema)
    args_text = text[text.index("(") + 1: text.rindex(") ->")]
    types = []
    for part in _split_schema_args(args_text):
        if part == "*":
            continue
        declaration = part.split("=", 1)[0].strip()
        types.append(declaration.rsplit(" ", 1)[0])
    if len(types) != len(schema.arguments):
        raise ValueError(f"could not read the argument types of '{text}'")
    return tuple(types)


def _split_schema_args(text: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for ch in text:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += ch
    if current.strip():
        parts.append(current.strip())
    return parts


def decode_operand(value: ir.Value, arg_type: torch.Type, declared: str) -> Any:
    """A Python value for one operand: constants become Python objects, run-time values `RuntimeValue`s.

    `declared` is the schema's spelling of the argument type: a run-time
    `!torch.int` is accepted only where it says `SymInt` or `Scalar`.
    """
    type_text = str(value.type)
    if type_text.startswith("!torch.vtensor"):
        tensor = parse_vtensor_type(value.type)
        if tensor is None:
            raise UndecodableOperand(f"tensor type {type_text} has no rank or an unsupported dtype")
        return RuntimeValue(value, tensor)
    if isinstance(value.type, ir.RankedTensorType):  # a control-flow value et-to-edge retyped first
        tensor = _builtin_tensor_type(value.type)
        if tensor is None:
            raise UndecodableOperand(f"tensor type {type_text} has an unsupported element type")
        return RuntimeValue(value, tensor)
    owner = value.owner
    producer = owner.name if isinstance(owner, (ir.Operation, ir.OpView)) else None
    inner = _unwrap_optional(arg_type)
    if producer == "torch.constant.none":
        return None
    if producer in ("torch.constant.int", "torch.constant.float", "torch.constant.bool",
                    "torch.constant.str", "torch.constant.number", "torch.constant.device"):
        return _typed_constant(_attribute_value(owner.attributes["value"]), inner, producer, declared)
    if producer == "torch.prim.ListConstruct":
        element_type = inner.getElementType() if isinstance(inner, torch.ListType) else inner
        return [decode_operand(v, element_type, declared) for v in owner.operands]
    if type_text == "!torch.int" and ("SymInt" in declared or declared.startswith("Scalar")):
        return RuntimeValue(value, None)
    if type_text in ("!torch.float", "!torch.bool") and declared.startswith("Scalar"):
        return RuntimeValue(value, None)  # size arithmetic with a float or bool result (n / m, n > 3)
    where = f"computed by '{producer}'" if producer else "a block argument"
    raise UndecodableOperand(f"operand of type {type_text} is {where}, not a constant")


def _unwrap_optional(arg_type: torch.Type) -> torch.Type:
    return arg_type.getElementType() if isinstance(arg_type, torch.OptionalType) else arg_type


def _attribute_value(attr: ir.Attribute) -> Any:
    if isinstance(attr, (ir.BoolAttr, ir.IntegerAttr, ir.FloatAttr, ir.StringAttr)):
        return attr.value
    raise UndecodableOperand(f"unsupported constant attribute {attr}")


def _typed_constant(raw: Any, arg_type: torch.Type, producer: str, declared: str) -> Any:
    """Constants are ints on the wire; the schema says when an int is a dtype, layout or memory format.

    `torch.FunctionSchema` reports `ScalarType?` as `Optional[int]`, so the
    declared text decides.
    """
    if producer == "torch.constant.device":
        return torch.device(raw)
    if isinstance(raw, int) and not isinstance(raw, bool):
        spelled = declared.split("[")[0].rstrip("?") if declared else str(arg_type)
        if spelled == "ScalarType":
            return _int_to_enum("dtype")[raw]
        if spelled == "MemoryFormat":
            return _int_to_enum("memory_format")[raw]
        if spelled == "Layout":
            return _int_to_enum("layout")[raw]
    return raw
