"""et-fold-constants: evaluate pure edge ops on constants at compile time and store their results.

    %w = "edge.constant"() {etmlir.param = "fc.weight", value = dense_resource<fc.weight> : tensor<512x784xf32>}
    %0 = "edge.permute_copy"(%w) {dims = array<i64: 1, 0>} : (tensor<512x784xf32>) -> tensor<784x512xf32>
    %1 = "edge.addmm"(%b, %x, %0, %one, %one) : (...) -> tensor<8x512xf32>

becomes

    %0 = "edge.constant"() {etmlir.param = "fc.weight.permute_copy", value = dense<...> : tensor<784x512xf32>}
    %1 = "edge.addmm"(%b, %x, %0, %one, %one) : (...) -> tensor<8x512xf32>

so the runtime no longer transposes every linear layer's weight on every
execution. An op folds when it is on the allow-list below (copies, views,
dtype conversions, cat, elementwise arithmetic and indexing by tensors: pure
and deterministic; never random or factory ops), every operand is an `edge.constant`, its result
shape is static, and its result and each operand are at most `max-bytes` (so
an `expand` does not blow up the `.pte`, nor a slice of a huge table the
compiler). An op whose result is returned stays, so outputs are never
constants. The op runs once with PyTorch eager
(`passes.edge_to_torch.run_eagerly`) and its result becomes an
`edge.constant` with the op's location, named after the source parameter
(`fc.weight.permute_copy`) and holding its data in the IR (a
`DenseElementsAttr`: `et-emit` and `to_executorch` serialize it without the
original weight buffers). Results keep the op's element type, bit for bit.
Chains fold one op after the other (`view_copy(permute_copy(w))`); constants
left without users are erased, and a constant something else still uses stays.
"""

from __future__ import annotations

import re

import numpy as np
from torch_mlir import ir

from etmlir.dialects import attrs
from etmlir.executable.dtypes import nbytes
from etmlir.lazy import lazy_module
from etmlir.passes.edge_to_torch import run_eagerly, torch_dtype
from etmlir.passes.registry import Option, register_pass

torch = lazy_module("torch")

DEFAULT_MAX_BYTES = 64 << 20

# Ops that are pure functions of their operands and attributes.
_ALWAYS = frozenset({
    "edge.permute_copy", "edge.view_copy", "edge.t_copy", "edge.transpose_copy_int", "edge.expand_copy",
    "edge.unsqueeze_copy", "edge.squeeze_copy", "edge.squeeze_copy_dim", "edge.squeeze_copy_dims",
    "edge.alias_copy", "edge.detach_copy", "edge.slice_copy_tensor", "edge.select_copy_int", "edge.cat",
    "edge.add_tensor", "edge.add_scalar", "edge.sub_tensor", "edge.sub_scalar", "edge.mul_tensor",
    "edge.mul_scalar", "edge.div_tensor", "edge.div_scalar", "edge.div_tensor_mode", "edge.div_scalar_mode",
    "edge.neg", "edge.index_tensor",
})
# Layout-changing ops fold only when the result is contiguous: a constant in the
# `.pte` is always stored in the default dim order.
_CONTIGUOUS_FORMATS = ("torch.contiguous_format", "torch.preserve_format")
# Element types a folded constant can hold as a DenseElementsAttr that et-emit writes.
_NUMPY_TYPES = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i64": np.int64, "i32": np.int32,
                "i16": np.int16, "i8": np.int8, "ui8": np.uint8, "i1": np.bool_}
_BLOB = re.compile(r'dialect_resources:\s*\{\s*builtin:\s*\{\s*"?[^":\s]+"?:\s*"0x([0-9A-Fa-f]*)"')


def _string(op: ir.Operation, name: str) -> str | None:
    return ir.StringAttr(op.attributes[name]).value if name in op.attributes else None


def _on_allow_list(op: ir.Operation) -> bool:
    name = op.name
    if name in _ALWAYS:
        return True
    if name == "edge.clone":
        return _string(op, "memory_format") in (None,) + _CONTIGUOUS_FORMATS
    if name == "edge.to_copy":
        return (_string(op, "memory_format") in (None,) + _CONTIGUOUS_FORMATS
                and _string(op, "layout") in (None, "torch.strided") and _string(op, "device") in (None, "cpu"))
    if name == "edge.to_dim_order_copy":
        if "dim_order" not in op.attributes:
            return True
        return list(ir.DenseI64ArrayAttr(op.attributes["dim_order"])) == list(range(
            ir.RankedTensorType(op.results[0].type).rank))
    return False


def _foldable_type(t: ir.Type) -> bool:
    try:
        tensor = ir.RankedTensorType(t)
    except ValueError:
        return False
    return tensor.has_static_shape and str(tensor.element_type) in _NUMPY_TYPES


def constant_tensor(op: ir.Operation) -> torch.Tensor | None:
    """The value of an `edge.constant` (None when its data is not in the module, e.g. elided)."""
    t = ir.RankedTensorType(op.results[0].type)
    attr = op.attributes["value"]
    dtype = _NUMPY_TYPES[str(t.element_type)]
    if str(attr).startswith("dense_resource<"):  # the bindings do not downcast this attribute
        # Print a module holding only this constant: its resource section is this blob.
        with op.context, ir.Location.unknown():
            scratch = ir.Module.create()
            op.clone(ip=ir.InsertionPoint(scratch.body))
            match = _BLOB.search(scratch.operation.get_asm(large_elements_limit=None))
        if match is None:
            return None
        data = bytearray.fromhex(match.group(1))[4:]  # 4 bytes of alignment first
        if len(data) != nbytes(list(t.shape), t.element_type):
            return None
        array = np.frombuffer(data, dtype=dtype).reshape(t.shape)
    elif isinstance(attr, ir.DenseElementsAttr):
        array = np.array(attr, dtype=dtype).reshape(t.shape)
    else:
        return None
    return torch.from_numpy(array)


def _dense_attr(value: torch.Tensor, t: ir.RankedTensorType) -> ir.Attribute:
    array = np.ascontiguousarray(value.numpy())
    return ir.DenseElementsAttr.get(array, type=t.element_type, shape=list(t.shape))


def _fits(t: ir.Type, max_bytes: int) -> bool:
    """A static tensor type of an element type a constant can hold, of at most `max_bytes`."""
    if not _foldable_type(t):
        return False
    tensor = ir.RankedTensorType(t)
    return nbytes(list(tensor.shape), tensor.element_type) <= max_bytes


def is_candidate(op: ir.Operation, max_bytes: int = DEFAULT_MAX_BYTES) -> bool:
    """Whether `op` is what et-fold-constants folds, short of reading its operands' data and running it:
    on the allow-list, one result and every operand an `edge.constant`, each within `max_bytes` (a
    backend that takes an op only when it will fold asks this)."""
    if len(op.results) != 1 or not op.operands or not _on_allow_list(op) or not _fits(op.results[0].type, max_bytes):
        return False
    return all(not isinstance(v.owner, ir.Block) and v.owner.name == "edge.constant" and _fits(v.type, max_bytes)
               for v in op.operands)


class _Folder:
    def __init__(self, module: ir.Operation, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.values: dict[ir.Value, torch.Tensor] = {}  # constants read so far
        self.params: set[str] = set()
        self.folded: list[str] = []

        def collect(op: ir.Operation) -> ir.WalkResult:
            if op.name == "edge.constant" and attrs.PARAM in op.attributes:
                self.params.add(_string(op, attrs.PARAM))
            return ir.WalkResult.ADVANCE

        module.walk(collect)

    def value(self, v: ir.Value) -> torch.Tensor:
        return self.values[v]

    def _unique(self, name: str) -> str:
        candidate, n = name, 1
        while candidate in self.params:
            candidate = f"{name}#{n}"
            n += 1
        self.params.add(candidate)
        return candidate

    def _operands_known(self, op: ir.Operation) -> bool:
        """Read every operand's data (is_candidate held: each is an edge.constant that fits)."""
        for v in op.operands:
            if v in self.values:
                continue
            tensor = constant_tensor(v.owner.operation)
            if tensor is None:
                return False
            self.values[v] = tensor
        return True

    def try_fold(self, op: ir.Operation) -> bool:
        if not is_candidate(op, self.max_bytes):
            return False
        result = op.results[0]
        if any(use.owner.name == "func.return" for use in result.uses):
            return False
        if not self._operands_known(op):
            return False
        try:
            (value,) = run_eagerly(op, self.value)
        except Exception:  # noqa: BLE001  (folding is optional: what PyTorch rejects stays for run time)
            return False
        t = ir.RankedTensorType(result.type)
        if value.dtype != torch_dtype(t) or tuple(value.shape) != tuple(t.shape):
            return False
        value = value.contiguous()
        attributes = {"value": _dense_attr(value, t)}
        source = next((v.owner for v in op.operands if attrs.PARAM in v.owner.attributes), None)
        if source is not None:
            name = self._unique(f"{_string(source, attrs.PARAM)}.{op.name[len('edge.'):]}")
            attributes[attrs.PARAM] = ir.StringAttr.get(name)
        new = ir.Operation.create("edge.constant", results=[t], attributes=attributes, loc=op.location,
                                  ip=ir.InsertionPoint(op))
        self.values[new.result] = value
        self.folded.append(op.name)
        operands = list(dict.fromkeys(op.operands))
        result.replace_all_uses_with(new.result)
        op.erase()
        for v in operands:  # a constant used elsewhere stays
            owner = v.owner
            if owner.name == "edge.constant" and not any(True for _ in v.uses):
                self.values.pop(v, None)
                owner.erase()
        return True


def fold(module: ir.Operation, max_bytes: int = DEFAULT_MAX_BYTES) -> list[str]:
    """Fold what `et-fold-constants` folds; returns the names of the folded ops, in order."""
    folder = _Folder(module, max_bytes)
    with module.context:
        for func_op in module.regions[0].blocks[0].operations:
            func_op = func_op.operation
            if func_op.name != "func.func" or not func_op.regions[0].blocks:
                continue
            for op in list(func_op.regions[0].blocks[0].operations):
                folder.try_fold(op.operation)
    return folder.folded


@register_pass("et-fold-constants", level="edge", options={
    "max-bytes": Option(int, DEFAULT_MAX_BYTES, "leave ops whose result or an operand is larger than this many bytes",
                        minimum=0)})
def fold_constants(module: ir.Operation, *, max_bytes: int) -> None:
    """et-fold-constants: evaluate copies, views and arithmetic on constants at compile time."""
    fold(module, max_bytes)
