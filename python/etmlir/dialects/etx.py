"""The `etx` dialect (the executable level): loader, verifier and helpers.

Declared in `dialects/etx/etx.irdl.mlir`. IRDL checks the required attributes
and operand counts; this module attaches a Python verifier for what IRDL
cannot declare: the optional attributes a later pass adds (`mem_id`, `offset`,
`size` after memory planning; `segment`/`offset` of a placed constant), the
`ns::name.overload` shape of kernel names, and list kinds.

    %0 = "etx.input"() {index = 0 : i64, type = tensor<1x?xi64>,
                        upper_bounds = array<i64: 1, 256>} : () -> !etx.value
    %1 = "etx.alloc"() {type = tensor<1x?x384xf32>, upper_bounds = array<i64: 1, 256, 384>,
                        mem_id = 0 : i64, offset = 0 : i64, size = 393216 : i64} : () -> !etx.value
    "etx.kernel_call"(%w, %0, %pad, %false, %false2, %1)
        {kernel = "aten::embedding.out", operandSegmentSizes = array<i32: 5, 1>} : (...) -> ()
"""

from __future__ import annotations

import re

from torch_mlir import ir
from torch_mlir.dialects import irdl

from etmlir.dialects.edge import DYNAMIC, irdl_text, problem_verifier

LIST_KINDS = ("int", "tensor", "optional_tensor")
# `aten::convolution.out`, `etmlir_prim::sym_size.int`, `aten::relu.out`.
KERNEL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*::[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)?$")
PLACEMENT_ATTRS = ("mem_id", "offset", "size")
VALUE_OPS = ("etx.input", "etx.alloc", "etx.state", "etx.constant", "etx.const", "etx.none", "etx.list")


def value_type() -> ir.Type:
    return ir.Type.parse("!etx.value")


def tensor_type(op: ir.Operation) -> ir.RankedTensorType | None:
    """The tensor type an `etx.input`/`etx.alloc`/`etx.state`/`etx.constant` defines (None for scalars)."""
    if "type" not in op.attributes:
        return None
    t = ir.TypeAttr(op.attributes["type"]).value
    return ir.RankedTensorType(t) if isinstance(t, ir.RankedTensorType) else None


def upper_bounds(op: ir.Operation) -> list[int] | None:
    """Sizes to reserve for the tensor `op` defines: its static shape, or its `upper_bounds`."""
    t = tensor_type(op)
    if t is None:
        return None
    if "upper_bounds" in op.attributes:
        return list(ir.DenseI64ArrayAttr(op.attributes["upper_bounds"]))
    return list(t.shape) if t.has_static_shape else None


def method_functions(module: ir.Operation) -> list[ir.Operation]:
    """The etx functions (methods) of the top module: those marked `etx.method`."""
    return [op.operation for op in module.regions[0].blocks[0].operations
            if op.operation.name == "func.func" and "etx.method" in op.operation.attributes]


def output_owners(func_op: ir.Operation) -> set[ir.Operation]:
    """The ops defining the values `func_op`'s `etx.output` returns."""
    return {value.owner for op in func_op.regions[0].blocks[0].operations
            if op.operation.name == "etx.output" for value in op.operation.operands}


def int_attr(op: ir.Operation, name: str) -> int | None:
    return ir.IntegerAttr(op.attributes[name]).value if name in op.attributes else None


def _problem(op: ir.Operation) -> str | None:
    name = op.name
    attrs = op.attributes
    if name in ("etx.input", "etx.alloc", "etx.state", "etx.constant"):
        t = ir.TypeAttr(attrs["type"]).value
        if name != "etx.alloc" and not isinstance(t, ir.RankedTensorType):
            return f"{name}: `type` must be a ranked tensor type, got {t}"
        if name == "etx.state" and not t.has_static_shape:
            return f"etx.state '{ir.StringAttr(attrs['name']).value}': state has a static shape, got {t}"
        present = [a for a in PLACEMENT_ATTRS if a in attrs]
        if name != "etx.constant" and present and len(present) != 3:
            return f"{name}: a planned value needs all of mem_id, offset and size (has {', '.join(present)})"
        for a in present + ["segment"] * ("segment" in attrs):
            if not isinstance(attrs[a], ir.IntegerAttr) or ir.IntegerAttr(attrs[a]).value < 0:
                return f"{name}: `{a}` must be a non-negative integer"
        if "upper_bounds" in attrs:
            if not isinstance(t, ir.RankedTensorType):
                return f"{name}: `upper_bounds` on a non-tensor value"
            if not isinstance(attrs["upper_bounds"], ir.DenseI64ArrayAttr):
                return f"{name}: `upper_bounds` must be an array<i64: ...>, got {attrs['upper_bounds']}"
            bounds = list(ir.DenseI64ArrayAttr(attrs["upper_bounds"]))
            shape = list(t.shape)
            if len(bounds) != len(shape) or any(
                    b < 0 or b == DYNAMIC or (s != ir.ShapedType.get_dynamic_size() and s != b)
                    for s, b in zip(shape, bounds)):
                return f"{name}: upper_bounds {bounds} do not fit type {t}"
        elif isinstance(t, ir.RankedTensorType) and not t.has_static_shape:
            return f"{name}: dynamic type {t} needs `upper_bounds` (the memory planner reserves them)"
    elif name == "etx.list":
        kind = ir.StringAttr(attrs["kind"]).value
        if kind not in LIST_KINDS:
            return f"etx.list: kind must be one of {', '.join(LIST_KINDS)}, got '{kind}'"
    elif name in ("etx.kernel_call", "etx.delegate_call"):
        if name == "etx.kernel_call":
            kernel = ir.StringAttr(attrs["kernel"]).value
            if not KERNEL_NAME.match(kernel):
                return f"etx.kernel_call: kernel '{kernel}' is not of the form ns::name.overload"
        if "debug_handle" in attrs and not isinstance(attrs["debug_handle"], ir.IntegerAttr):
            return f"{name}: `debug_handle` must be an integer"
    return None


_EtxVerifier = problem_verifier(_problem)


def load_etx_dialect(context: ir.Context) -> None:
    """Load `etx` into `context` with its verifier attached."""
    with context, ir.Location.unknown():
        irdl.load_dialects(ir.Module.parse(irdl_text("etx")))
        for name in ("input", "alloc", "state", "constant", "list", "kernel_call", "delegate_call"):
            ir.DynamicOpTrait.attach(f"etx.{name}", _EtxVerifier)
