"""et-tosa-convert-edge: an outlined edge delegate rebuilt as upstream MLIR `tosa` (TOSA 1.0) ops.

Each edge op becomes the TOSA ops that compute it, in place, with the edge
op's location tagged with its debug handle (so `tosa-validate` and every
later diagnostic name the source line and module path):

    %w = "edge.constant"() {value = dense_resource<conv.weight> : tensor<8x3x3x3xf32>}
    %0 = "edge.convolution"(%x, %w, %b) {padding = array<i64: 1, 1>, stride = array<i64: 1, 1>, groups = 1, ...}
         : (tensor<1x3x32x32xf32>, tensor<8x3x3x3xf32>, tensor<8xf32>) -> tensor<1x8x32x32xf32>
    %1 = "edge.relu"(%0) : (tensor<1x8x32x32xf32>) -> tensor<1x8x32x32xf32>

becomes

    %w = "tosa.const"() <{values = dense<...> : tensor<8x3x3x3xf32>}>          // OHWI, transposed here
    %t = tosa.transpose %x {perms = array<i32: 0, 2, 3, 1>} : ... -> tensor<1x32x32x3xf32>
    %c = tosa.conv2d %t, %w, %b, %zp, %zp {pad = array<i64: 1, 1, 1, 1>, stride = ..., acc_type = f32}
    %0 = tosa.transpose %c {perms = array<i32: 0, 3, 1, 2>} : ... -> tensor<1x8x32x32xf32>
    %1 = tosa.clamp %0 {min_val = 0.0 : f32, max_val = +inf : f32}

TOSA convolutions and pools are channels-last: each one is wrapped in the
transposes that keep the rest of the graph in PyTorch's NCHW, and
`tosa-reduce-transposes` (run after this pass) cancels the pairs that meet.
Operands of elementwise ops get equal ranks (TOSA broadcasts size-1 dims
only between equal ranks). Compile-time scalars (alpha, eps, clamp bounds)
are read from their `edge.constant`s. Ops with no TOSA 1.0 form (PRO-FP)
never reach this pass: the `tosa` partitioner (`support.py`) offers only
what `CONVERTERS` handles, and says why for the rest; an op that slips
through anyway is an error naming it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
from torch_mlir import ir

from etmlir.dialects.edge import DYNAMIC, edge_op_of, named_operands
from etmlir.executable.serialize import resource_blobs, resource_key
from etmlir.frontend.locations import with_debug_handle
from etmlir.passes.assign_debug_handles import debug_handle
from etmlir.passes.registry import PassFailure, emit_error, register_pass

_NUMPY = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i64": np.int64, "i32": np.int32,
          "i16": np.int16, "i8": np.int8, "ui8": np.uint8, "i1": np.bool_}
_NCHW_TO_NHWC = (0, 2, 3, 1)
_NHWC_TO_NCHW = (0, 3, 1, 2)


class ConversionError(Exception):
    """An edge op this pass cannot express in TOSA (the message says why)."""


def shape_of(value: ir.Value) -> list[int]:
    return list(ir.RankedTensorType(value.type).shape)


def element_of(value: ir.Value) -> ir.Type:
    return ir.RankedTensorType(value.type).element_type


class Builder:
    """Builds TOSA ops at the current insertion point; reads compile-time constants of the module."""

    def __init__(self, module: ir.Operation) -> None:
        self.module = module
        self._blobs: dict[str, bytes] | None = None
        self._consts: dict[ir.Value, ir.Value] = {}

    # -- compile-time values ------------------------------------------------------------------
    def constant_array(self, value: ir.Value) -> np.ndarray | None:
        """The value of an `edge.constant` (or an already converted `tosa.const`), else None."""
        owner = value.owner
        if not isinstance(owner, (ir.Operation, ir.OpView)) or owner.name not in ("edge.constant", "tosa.const"):
            return None
        attr = owner.attributes["value" if owner.name == "edge.constant" else "values"]
        t = ir.RankedTensorType(value.type)
        dtype = _NUMPY[str(t.element_type)]
        key = resource_key(attr)
        if key is not None:
            if self._blobs is None:
                self._blobs = resource_blobs(self.module)
            data = self._blobs.get(key)
            if data is None:
                raise ConversionError(f"the data of constant '{key}' is not in the module")
            return np.frombuffer(data, dtype=dtype).reshape(t.shape)
        dense = ir.DenseElementsAttr(attr)
        if dense.is_splat:
            splat = dense.get_splat_value()
            for kind in (ir.BoolAttr, ir.IntegerAttr, ir.FloatAttr):
                try:
                    return np.full(t.shape, kind(splat).value, dtype=dtype)
                except ValueError:
                    continue
        return np.array(dense, dtype=dtype).reshape(t.shape)

    def scalar(self, value: ir.Value | None, default: float | None = None) -> float:
        """A 0-d compile-time operand (alpha, eps, a clamp bound) as a Python number."""
        if value is None:
            if default is None:
                raise ConversionError("a required scalar operand is missing")
            return default
        array = self.constant_array(value)
        if array is None or array.size != 1:
            raise ConversionError("a scalar operand is not a compile-time constant (TOSA graphs are static)")
        item = array.reshape(()).item()
        return bool(item) if isinstance(item, bool) else item

    # -- op construction ----------------------------------------------------------------------
    def op(self, name: str, result: ir.Type, operands: Sequence[ir.Value], **attributes: ir.Attribute) -> ir.Value:
        return ir.Operation.create(name, results=[result], operands=list(operands), attributes=attributes).result

    def const(self, array: np.ndarray, element: ir.Type | None = None) -> ir.Value:
        array = np.ascontiguousarray(array)
        if element is None:
            element = {np.dtype(np.float32): ir.F32Type.get(), np.dtype(np.bool_): ir.IntegerType.get_signless(1),
                       np.dtype(np.int32): ir.IntegerType.get_signless(32),
                       np.dtype(np.int8): ir.IntegerType.get_signless(8)}[array.dtype]
        t = ir.RankedTensorType.get(list(array.shape), element)
        if array.dtype == np.bool_ and array.size and np.all(array == array.reshape(-1)[0]):
            attr = ir.DenseElementsAttr.get_splat(t, ir.BoolAttr.get(bool(array.reshape(-1)[0])))
        else:
            attr = ir.DenseElementsAttr.get(array, type=element, shape=list(array.shape))
        return ir.Operation.create("tosa.const", results=[t], attributes={"values": attr}).result

    def tensor(self, value: ir.Value) -> ir.Value:
        """An operand as a TOSA value: an `edge.constant` becomes a `tosa.const` (once)."""
        owner = value.owner
        if isinstance(owner, (ir.Operation, ir.OpView)) and owner.name == "edge.constant":
            if value not in self._consts:
                array = self.constant_array(value)
                if array is None:
                    raise ConversionError("a constant's data is not in the module")
                element = element_of(value)
                if str(element) not in ("f32", "i1", "i32", "i8"):
                    raise ConversionError(f"a {element} constant has no TOSA PRO-FP type")
                with ir.InsertionPoint(owner), owner.location:
                    self._consts[value] = self.const(array, element)
            return self._consts[value]
        return value

    def fill(self, like_shape: Sequence[int], number: float, element: ir.Type) -> ir.Value:
        dtype = _NUMPY[str(element)]
        return self.const(np.full(list(like_shape), number, dtype=dtype), element)

    def zero_point(self, element: ir.Type) -> ir.Value:
        return self.fill([1], 0, element)

    def shape(self, dims: Sequence[int]) -> ir.Value:
        index = ir.IndexType.get()
        attr = ir.DenseElementsAttr.get(np.array(list(dims), dtype=np.int64), type=index, shape=[len(dims)])
        return ir.Operation.create("tosa.const_shape", results=[ir.Type.parse(f"!tosa.shape<{len(dims)}>")],
                                   attributes={"values": attr}).result

    def typed(self, dims: Sequence[int], element: ir.Type) -> ir.RankedTensorType:
        return ir.RankedTensorType.get(list(dims), element)

    def reshape(self, x: ir.Value, dims: Sequence[int]) -> ir.Value:
        dims = list(dims)
        if shape_of(x) == dims:
            return x
        return self.op("tosa.reshape", self.typed(dims, element_of(x)), [x, self.shape(dims)])

    def transpose(self, x: ir.Value, perms: Sequence[int]) -> ir.Value:
        perms = list(perms)
        if perms == list(range(len(perms))):
            return x
        dims = [shape_of(x)[p] for p in perms]
        return self.op("tosa.transpose", self.typed(dims, element_of(x)), [x],
                       perms=ir.DenseI32ArrayAttr.get(perms))

    def ranked(self, x: ir.Value, rank: int) -> ir.Value:
        """`x` with leading size-1 dims up to `rank` (TOSA broadcasts only between equal ranks)."""
        dims = shape_of(x)
        return self.reshape(x, [1] * (rank - len(dims)) + dims) if len(dims) < rank else x

    def binary(self, name: str, a: ir.Value, b: ir.Value, result: ir.Type) -> ir.Value:
        rank = max(len(shape_of(a)), len(shape_of(b)), ir.RankedTensorType(result).rank)
        a, b = self.ranked(a, rank), self.ranked(b, rank)
        dims = list(ir.RankedTensorType(result).shape)
        out = self.typed([1] * (rank - len(dims)) + dims, ir.RankedTensorType(result).element_type)
        if name == "tosa.mul":
            value = self.op(name, out, [a, b, self.const(np.zeros(1, np.int8))])
        else:
            value = self.op(name, out, [a, b])
        return self.reshape(value, dims)

    def unary(self, name: str, x: ir.Value, result: ir.Type | None = None) -> ir.Value:
        result = result or x.type
        if name == "tosa.negate":
            zp = self.zero_point(element_of(x))
            return self.op(name, result, [x, zp, zp])
        return self.op(name, result, [x])

    def scale(self, x: ir.Value, factor: float) -> ir.Value:
        if factor == 1:
            return x
        return self.binary("tosa.mul", x, self.fill([1] * len(shape_of(x)), factor, element_of(x)), x.type)

    def add_number(self, x: ir.Value, number: float) -> ir.Value:
        if number == 0:
            return x
        return self.binary("tosa.add", x, self.fill([1] * len(shape_of(x)), number, element_of(x)), x.type)

    def clamp(self, x: ir.Value, low: float, high: float) -> ir.Value:
        element = element_of(x)
        return self.op("tosa.clamp", x.type, [x], min_val=ir.FloatAttr.get(element, low),
                       max_val=ir.FloatAttr.get(element, high))

    def reduce(self, name: str, x: ir.Value, axes: Sequence[int]) -> ir.Value:
        """Reduce over `axes` one at a time, keeping each as size 1 (TOSA reductions keep dims)."""
        for axis in sorted(set(axes)):
            dims = shape_of(x)
            dims[axis] = 1
            x = self.op(name, self.typed(dims, element_of(x)), [x],
                        axis=ir.IntegerAttr.get(ir.IntegerType.get_signless(32), axis))
        return x

    def slice(self, x: ir.Value, starts: Sequence[int], sizes: Sequence[int]) -> ir.Value:
        if list(starts) == [0] * len(starts) and list(sizes) == shape_of(x):
            return x
        return self.op("tosa.slice", self.typed(sizes, element_of(x)), [x, self.shape(starts), self.shape(sizes)])


# --------------------------------------------------------------------------------------------------
# Converters: (builder, op, named operands) -> the op's results as TOSA values (None: an unused result).

Converter = Callable[[Builder, ir.Operation, dict], list]


def int_list_attr(op: ir.Operation, name: str) -> list[int]:
    """An int-array (or single int) attribute as a list; [] when absent."""
    if name not in op.attributes:
        return []
    attr = op.attributes[name]
    try:
        return [int(v) for v in ir.DenseI64ArrayAttr(attr)]
    except ValueError:
        return [int(ir.IntegerAttr(attr).value)]


def _attr_int(op: ir.Operation, name: str) -> int:
    return int(ir.IntegerAttr(op.attributes[name]).value)


def bool_attr(op: ir.Operation, name: str) -> bool:
    """A bool attribute; False when absent."""
    return name in op.attributes and ir.BoolAttr(op.attributes[name]).value


def _attr_str(op: ir.Operation, name: str) -> str:
    return ir.StringAttr(op.attributes[name]).value if name in op.attributes else ""


def _one(named: dict, name: str) -> ir.Value | None:
    values = named.get(name) or []
    return values[0] if values else None


def _dim(d: int, rank: int) -> int:
    return d + rank if d < 0 else d


def _result_type(op: ir.Operation, i: int = 0) -> ir.Type:
    return op.results[i].type


def _pair(values: list[int], default: int) -> list[int]:
    return [default, default] if not values else values * 2 if len(values) == 1 else values


def _window_padding(size: int, kernel: int, stride: int, dilation: int, low: int, high: int) -> tuple[int, int, int]:
    """(pad_low, pad_high, rows to cut off the end): TOSA wants the window count to divide exactly;
    PyTorch drops the rows a last partial window would read, so drop them from the padding
    (or, past it, from the input)."""
    extent = size - 1 + low + high - (kernel - 1) * dilation
    remainder = extent % stride
    high -= remainder
    cut = 0
    if high < 0:
        cut, high = -high, 0
    return low, high, cut


def _conv_geometry(b: Builder, x: ir.Value, kernel: Sequence[int], stride: Sequence[int], dilation: Sequence[int],
                   padding: Sequence[int]) -> tuple[ir.Value, list[int]]:
    """NHWC input (cut where needed) and TOSA's [top, bottom, left, right] padding."""
    n, h, w, c = shape_of(x)
    top, bottom, cut_h = _window_padding(h, kernel[0], stride[0], dilation[0], padding[0], padding[0])
    left, right, cut_w = _window_padding(w, kernel[1], stride[1], dilation[1], padding[1], padding[1])
    if cut_h or cut_w:
        x = b.slice(x, [0, 0, 0, 0], [n, h - cut_h, w - cut_w, c])
    return x, [top, bottom, left, right]


def _convolution(b: Builder, op: ir.Operation, named: dict) -> list:
    x, weight, bias = _one(named, "input"), _one(named, "weight"), _one(named, "bias")
    if bool_attr(op, "transposed"):
        raise ConversionError("transposed convolution is not converted")
    rank = len(shape_of(x))
    if rank != 4:
        raise ConversionError(f"only 2-d convolutions are converted (this input has rank {rank})")
    # A single value stands for both dims (PyTorch's padding=0 arrives as [0]).
    stride, padding, dilation = (_pair(int_list_attr(op, name), default)
                                 for name, default in (("stride", 1), ("padding", 0), ("dilation", 1)))
    groups = _attr_int(op, "groups")
    out_shape = shape_of(op.results[0])
    element = element_of(x)
    c_in, c_out = shape_of(x)[1], out_shape[1]
    kh, kw = shape_of(weight)[2], shape_of(weight)[3]
    w = b.constant_array(weight)
    bias_value = b.tensor(bias) if bias is not None else b.fill([c_out], 0, element)
    nhwc = b.transpose(b.tensor(x), _NCHW_TO_NHWC)
    nhwc, pad = _conv_geometry(b, nhwc, (kh, kw), stride, dilation, padding)
    out_nhwc = b.typed([out_shape[0], out_shape[2], out_shape[3], out_shape[1]], element)
    zp = b.zero_point(element)
    common = dict(pad=ir.DenseI64ArrayAttr.get(pad), stride=ir.DenseI64ArrayAttr.get(stride),
                  dilation=ir.DenseI64ArrayAttr.get(dilation), acc_type=ir.TypeAttr.get(element))
    if groups == 1:
        # OIHW -> OHWI
        weight_value = (b.const(w.transpose(0, 2, 3, 1)) if w is not None
                        else b.transpose(b.tensor(weight), (0, 2, 3, 1)))
        out = b.op("tosa.conv2d", out_nhwc, [nhwc, weight_value, bias_value, zp, zp], **common)
    elif groups == c_in and c_out % c_in == 0:
        multiplier = c_out // c_in
        # [C*M, 1, KH, KW] -> [C, M, KH, KW] -> HWCM
        if w is not None:
            weight_value = b.const(w.reshape(c_in, multiplier, kh, kw).transpose(2, 3, 0, 1))
        else:
            weight_value = b.transpose(b.reshape(b.tensor(weight), [c_in, multiplier, kh, kw]), (2, 3, 0, 1))
        out = b.op("tosa.depthwise_conv2d", out_nhwc, [nhwc, weight_value, bias_value, zp, zp], **common)
    else:
        raise ConversionError(f"grouped convolution with {groups} groups of {c_in} channels is not converted "
                              "(only groups=1 and depthwise)")
    return [b.transpose(out, _NHWC_TO_NCHW)]


def _batch_norm(b: Builder, op: ir.Operation, named: dict) -> list:
    x = _one(named, "input")
    rank = len(shape_of(x))
    channels = shape_of(x)[1]
    eps = float(ir.FloatAttr(op.attributes["eps"]).value)
    arrays = {name: (b.constant_array(_one(named, name)) if _one(named, name) is not None else None)
              for name in ("weight", "bias", "running_mean", "running_var")}
    bshape = [1, channels] + [1] * (rank - 2)
    if all(arrays[n] is not None for n in ("running_mean", "running_var")) and all(
            _one(named, n) is None or arrays[n] is not None for n in ("weight", "bias")):
        weight = arrays["weight"] if arrays["weight"] is not None else np.ones(channels, np.float32)
        bias = arrays["bias"] if arrays["bias"] is not None else np.zeros(channels, np.float32)
        scale = (weight.astype(np.float64) / np.sqrt(arrays["running_var"].astype(np.float64) + eps))
        shift = bias.astype(np.float64) - arrays["running_mean"].astype(np.float64) * scale
        y = b.binary("tosa.mul", b.tensor(x), b.const(scale.astype(np.float32).reshape(bshape)), x.type)
        y = b.binary("tosa.add", y, b.const(shift.astype(np.float32).reshape(bshape)), x.type)
    else:
        element = element_of(x)
        stat = b.typed(bshape, element)
        mean = b.reshape(b.tensor(_one(named, "running_mean")), bshape)
        var = b.reshape(b.tensor(_one(named, "running_var")), bshape)
        inv = b.unary("tosa.rsqrt", b.add_number(var, eps), stat)
        y = b.binary("tosa.mul", b.binary("tosa.sub", b.tensor(x), mean, x.type), inv, x.type)
        if _one(named, "weight") is not None:
            y = b.binary("tosa.mul", y, b.reshape(b.tensor(_one(named, "weight")), bshape), x.type)
        if _one(named, "bias") is not None:
            y = b.binary("tosa.add", y, b.reshape(b.tensor(_one(named, "bias")), bshape), x.type)
    return [y, None, None]


def _layer_norm(b: Builder, op: ir.Operation, named: dict) -> list:
    x = b.tensor(_one(named, "input"))
    dims = shape_of(x)
    normalized = int_list_attr(op, "normalized_shape")
    eps = float(ir.FloatAttr(op.attributes["eps"]).value)
    axes = list(range(len(dims) - len(normalized), len(dims)))
    count = math.prod(dims[a] for a in axes)
    stat_type = op.results[1].type
    mean = b.scale(b.reduce("tosa.reduce_sum", x, axes), 1.0 / count)
    centered = b.binary("tosa.sub", x, mean, x.type)
    var = b.scale(b.reduce("tosa.reduce_sum", b.binary("tosa.mul", centered, centered, x.type), axes), 1.0 / count)
    rstd = b.unary("tosa.rsqrt", b.add_number(var, eps), var.type)
    y = b.binary("tosa.mul", centered, rstd, x.type)
    weight, bias = _one(named, "weight"), _one(named, "bias")
    if weight is not None:
        y = b.binary("tosa.mul", y, b.tensor(weight), x.type)
    if bias is not None:
        y = b.binary("tosa.add", y, b.tensor(bias), x.type)
    return [y, b.reshape(mean, shape_of(op.results[1])), b.reshape(rstd, ir.RankedTensorType(stat_type).shape)]


def _softmax(log: bool) -> Converter:
    def convert(b: Builder, op: ir.Operation, named: dict) -> list:
        x = b.tensor(_one(named, "self"))
        axis = _dim(_attr_int(op, "dim"), len(shape_of(x)))
        shifted = b.binary("tosa.sub", x, b.reduce("tosa.reduce_max", x, [axis]), x.type)
        exp = b.unary("tosa.exp", shifted)
        total = b.reduce("tosa.reduce_sum", exp, [axis])
        if log:
            return [b.binary("tosa.sub", shifted, b.unary("tosa.log", total), x.type)]
        return [b.binary("tosa.mul", exp, b.unary("tosa.reciprocal", total), x.type)]
    return convert


def _binary(name: str, scalar_other: bool = False, alpha: bool = False, swap: bool = False,
            other: str = "other") -> Converter:
    other_name = other

    def convert(b: Builder, op: ir.Operation, named: dict) -> list:
        a = b.tensor(_one(named, "self"))
        other_value = _one(named, other_name)
        if scalar_other:
            other = b.fill([1] * len(shape_of(a)), b.scalar(other_value), element_of(a))
        else:
            other = b.tensor(other_value)
        if alpha:
            other = b.scale(other, b.scalar(_one(named, "alpha"), 1))
        lhs, rhs = (other, a) if swap else (a, other)
        return [b.binary(name, lhs, rhs, _result_type(op))]
    return convert


def _divide(scalar_other: bool) -> Converter:
    def convert(b: Builder, op: ir.Operation, named: dict) -> list:
        a = b.tensor(_one(named, "self"))
        if scalar_other:
            return [b.scale(a, 1.0 / b.scalar(_one(named, "other")))]
        other = b.tensor(_one(named, "other"))
        return [b.binary("tosa.mul", a, b.unary("tosa.reciprocal", other), _result_type(op))]
    return convert


def _compare(name: str, scalar_other: bool, swap: bool = False, negate: bool = False) -> Converter:
    def convert(b: Builder, op: ir.Operation, named: dict) -> list:
        a = b.tensor(_one(named, "self"))
        other = (b.fill([1] * len(shape_of(a)), b.scalar(_one(named, "other")), element_of(a)) if scalar_other
                 else b.tensor(_one(named, "other")))
        lhs, rhs = (other, a) if swap else (a, other)
        result = b.binary(name, lhs, rhs, _result_type(op))
        return [b.unary("tosa.logical_not", result) if negate else result]
    return convert


def _unary(name: str) -> Converter:
    def convert(b: Builder, op: ir.Operation, named: dict) -> list:
        return [b.unary(name, b.tensor(_one(named, "self")), _result_type(op))]
    return convert


def _sqrt(b: Builder, op: ir.Operation, named: dict) -> list:
    x = b.tensor(_one(named, "self"))
    return [b.unary("tosa.reciprocal", b.unary("tosa.rsqrt", x))]


def _relu(b: Builder, op: ir.Operation, named: dict) -> list:
    return [b.clamp(b.tensor(_one(named, "self")), 0.0, math.inf)]


def _hardtanh(b: Builder, op: ir.Operation, named: dict) -> list:
    return [b.clamp(b.tensor(_one(named, "self")), float(b.scalar(_one(named, "min_val"), -1.0)),
                    float(b.scalar(_one(named, "max_val"), 1.0)))]


def _clamp(b: Builder, op: ir.Operation, named: dict) -> list:
    low = _one(named, "min")
    high = _one(named, "max")
    return [b.clamp(b.tensor(_one(named, "self")), -math.inf if low is None else float(b.scalar(low)),
                    math.inf if high is None else float(b.scalar(high)))]


def _leaky_relu(b: Builder, op: ir.Operation, named: dict) -> list:
    x = b.tensor(_one(named, "self"))
    slope = float(b.scalar(_one(named, "negative_slope"), 0.01))
    positive = b.binary("tosa.greater_equal", x, b.fill([1] * len(shape_of(x)), 0.0, element_of(x)),
                        b.typed(shape_of(x), ir.IntegerType.get_signless(1)))
    return [b.op("tosa.select", x.type, [positive, x, b.scale(x, slope)])]


def _gelu(b: Builder, op: ir.Operation, named: dict) -> list:
    x = b.tensor(_one(named, "self"))
    if _attr_str(op, "approximate") == "tanh":
        cube = b.binary("tosa.mul", b.binary("tosa.mul", x, x, x.type), x, x.type)
        inner = b.scale(b.binary("tosa.add", x, b.scale(cube, 0.044715), x.type), math.sqrt(2.0 / math.pi))
        gate = b.add_number(b.unary("tosa.tanh", inner), 1.0)
    else:
        gate = b.add_number(b.unary("tosa.erf", b.scale(x, 1.0 / math.sqrt(2.0))), 1.0)
    return [b.binary("tosa.mul", b.scale(x, 0.5), gate, x.type)]


def _silu(b: Builder, op: ir.Operation, named: dict) -> list:
    x = b.tensor(_one(named, "self"))
    return [b.binary("tosa.mul", x, b.unary("tosa.sigmoid", x), x.type)]


def _pow_scalar(b: Builder, op: ir.Operation, named: dict) -> list:
    """x ** c. TOSA's pow needs x > 0, so integer exponents (PyTorch's x ** 3 on negative x, GELU's
    cube) are products, 0.5 and -0.5 are square roots; only other exponents use tosa.pow (a negative
    base is then an error of the reference model at run time, where PyTorch gives NaN)."""
    x = b.tensor(_one(named, "self"))
    exponent = float(b.scalar(_one(named, "exponent")))
    if exponent == 0.5:
        return [b.unary("tosa.reciprocal", b.unary("tosa.rsqrt", x))]
    if exponent == -0.5:
        return [b.unary("tosa.rsqrt", x)]
    if exponent.is_integer() and abs(exponent) <= MAX_INTEGER_EXPONENT:
        n = int(abs(exponent))
        if n == 0:
            return [b.fill(shape_of(x), 1.0, element_of(x))]
        result, square = None, x
        while n:  # square-and-multiply
            if n & 1:
                result = square if result is None else b.binary("tosa.mul", result, square, x.type)
            n >>= 1
            if n:
                square = b.binary("tosa.mul", square, square, x.type)
        return [b.unary("tosa.reciprocal", result) if exponent < 0 else result]
    return [b.binary("tosa.pow", x, b.fill([1] * len(shape_of(x)), exponent, element_of(x)), x.type)]


MAX_INTEGER_EXPONENT = 64


def _reduction(name: str, mean: bool = False) -> Converter:
    def convert(b: Builder, op: ir.Operation, named: dict) -> list:
        x = b.tensor(_one(named, "self"))
        dims = shape_of(x)
        axes = [_dim(d, len(dims)) for d in int_list_attr(op, "dim")] or list(range(len(dims)))
        y = b.reduce(name, x, axes)
        if mean:
            y = b.scale(y, 1.0 / math.prod(dims[a] for a in axes))
        return [b.reshape(y, shape_of(op.results[0]))]
    return convert


def _reshape(b: Builder, op: ir.Operation, named: dict) -> list:
    return [b.reshape(b.tensor(op.operands[0]), shape_of(op.results[0]))]


def _identity(b: Builder, op: ir.Operation, named: dict) -> list:
    return [b.tensor(op.operands[0])]


def _permute(b: Builder, op: ir.Operation, named: dict) -> list:
    x = b.tensor(_one(named, "self"))
    rank = len(shape_of(x))
    return [b.transpose(x, [_dim(d, rank) for d in int_list_attr(op, "dims")])]


def _transpose(b: Builder, op: ir.Operation, named: dict) -> list:
    x = b.tensor(_one(named, "self"))
    rank = len(shape_of(x))
    perms = list(range(rank))
    d0, d1 = _dim(_attr_int(op, "dim0"), rank), _dim(_attr_int(op, "dim1"), rank)
    perms[d0], perms[d1] = perms[d1], perms[d0]
    return [b.transpose(x, perms)]


def _t(b: Builder, op: ir.Operation, named: dict) -> list:
    x = b.tensor(_one(named, "self"))
    return [b.transpose(x, list(reversed(range(len(shape_of(x))))))]


def _expand(b: Builder, op: ir.Operation, named: dict) -> list:
    target = shape_of(op.results[0])
    x = b.ranked(b.tensor(_one(named, "self")), len(target))
    multiples = [t // s if s == 1 else 1 for s, t in zip(shape_of(x), target)]
    if all(m == 1 for m in multiples):
        return [x]
    return [b.op("tosa.tile", b.typed(target, element_of(x)), [x, b.shape(multiples)])]


def _matmul(b: Builder, a: ir.Value, m: ir.Value) -> ir.Value:
    """[..., M, K] x [..., K, N] with equal leading dims, through TOSA's 3-d matmul."""
    sa, sm = shape_of(a), shape_of(m)
    batch = math.prod(sa[:-2])
    element = element_of(a)
    a3 = b.reshape(a, [batch, sa[-2], sa[-1]])
    m3 = b.reshape(m, [batch, sm[-2], sm[-1]])
    zp = b.zero_point(element)
    out = b.op("tosa.matmul", b.typed([batch, sa[-2], sm[-1]], element), [a3, m3, zp, zp])
    return b.reshape(out, sa[:-2] + [sa[-2], sm[-1]])


def _mm(b: Builder, op: ir.Operation, named: dict) -> list:
    return [_matmul(b, b.tensor(_one(named, "self")), b.tensor(_one(named, "mat2")))]


def _addmm(b: Builder, op: ir.Operation, named: dict) -> list:
    product = _matmul(b, b.tensor(_one(named, "mat1")), b.tensor(_one(named, "mat2")))
    product = b.scale(product, b.scalar(_one(named, "alpha"), 1))
    beta = b.scalar(_one(named, "beta"), 1)
    if beta == 0:
        return [product]
    bias = b.scale(b.tensor(_one(named, "self")), beta)
    return [b.binary("tosa.add", product, bias, _result_type(op))]


def _cat(b: Builder, op: ir.Operation, named: dict) -> list:
    tensors = [b.tensor(v) for v in named["tensors"] if math.prod(shape_of(v)) > 0 or len(named["tensors"]) == 1]
    rank = len(shape_of(op.results[0]))
    axis = _dim(_attr_int(op, "dim"), rank)
    if len(tensors) == 1:
        return [tensors[0]]
    return [b.op("tosa.concat", _result_type(op), tensors,
                 axis=ir.IntegerAttr.get(ir.IntegerType.get_signless(32), axis))]


def static_int(op: ir.Operation, name: str, default: int | None) -> int | None:
    """A SymInt argument kept as an attribute (`start = 2 : i64`); `default` when absent. A size only
    known at run time (the DYNAMIC sentinel) is a ConversionError: TOSA graphs are static."""
    if name not in op.attributes:
        return default
    value = int(ir.IntegerAttr(op.attributes[name]).value)
    if value == DYNAMIC:
        raise ConversionError(f"'{name}' is only known at run time")
    return value


def _slice(b: Builder, op: ir.Operation, named: dict) -> list:
    x = b.tensor(_one(named, "self"))
    dims = shape_of(x)
    axis = _dim(_attr_int(op, "dim"), len(dims))
    step = static_int(op, "step", 1)
    begin = static_int(op, "start", 0)
    begin = begin + dims[axis] if begin < 0 else begin
    begin = min(max(begin, 0), dims[axis])
    out = shape_of(op.results[0])
    count = out[axis]
    starts = [0] * len(dims)
    starts[axis] = begin
    if step == 1 or count <= 1:
        return [b.slice(x, starts, out)]
    # Every step-th row: take rows [begin, begin + step * count) (padded at the end when the last
    # window runs past the input), view the axis as [count, step], keep index 0 of the step.
    available = min(step * count, dims[axis] - begin)
    sizes = list(dims)
    sizes[axis] = available
    rows = b.slice(x, starts, sizes)
    if available < step * count:
        padded = list(sizes)
        padded[axis] = step * count
        pads = [0] * (2 * len(dims))
        pads[2 * axis + 1] = step * count - available
        rows = b.op("tosa.pad", b.typed(padded, element_of(x)), [rows, b.shape(pads), b.fill([1], 0, element_of(x))])
    split = dims[:axis] + [count, step] + dims[axis + 1:]
    split[:axis] = out[:axis]
    split[axis + 2:] = out[axis + 1:]
    picked = b.slice(b.reshape(rows, split), [0] * len(split), split[:axis + 1] + [1] + split[axis + 2:])
    return [b.reshape(picked, out)]


def _select(b: Builder, op: ir.Operation, named: dict) -> list:
    x = b.tensor(_one(named, "self"))
    dims = shape_of(x)
    axis = _dim(_attr_int(op, "dim"), len(dims))
    index = static_int(op, "index", None)
    if index is None:
        index = int(b.scalar(_one(named, "index")))
    index = index + dims[axis] if index < 0 else index
    starts, sizes = [0] * len(dims), list(dims)
    starts[axis], sizes[axis] = index, 1
    return [b.reshape(b.slice(x, starts, sizes), shape_of(op.results[0]))]


def _split(b: Builder, op: ir.Operation, named: dict) -> list:
    x = b.tensor(_one(named, "self"))
    dims = shape_of(x)
    axis = _dim(_attr_int(op, "dim"), len(dims))
    results, offset = [], 0
    for r in op.results:
        size = shape_of(r)
        starts = [0] * len(dims)
        starts[axis] = offset
        results.append(b.slice(x, starts, size))
        offset += size[axis]
    return results


def _where(b: Builder, op: ir.Operation, named: dict) -> list:
    cond, a, other = (_one(named, n) for n in ("condition", "self", "other"))
    out = shape_of(op.results[0])
    rank = len(out)
    values = [b.ranked(b.tensor(v), rank) for v in (cond, a, other)]
    return [b.op("tosa.select", _result_type(op), values)]


def _full(b: Builder, op: ir.Operation, named: dict) -> list:
    t = ir.RankedTensorType(op.results[0].type)
    value = b.scalar(_one(named, "fill_value"))
    return [b.fill(list(t.shape), value, t.element_type)]


def _scalar_tensor(b: Builder, op: ir.Operation, named: dict) -> list:
    t = ir.RankedTensorType(op.results[0].type)
    return [b.fill(list(t.shape), b.scalar(_one(named, "s")), t.element_type)]


def _zeros_like(number: float) -> Converter:
    def convert(b: Builder, op: ir.Operation, named: dict) -> list:
        t = ir.RankedTensorType(op.results[0].type)
        return [b.fill(list(t.shape), number, t.element_type)]
    return convert


def _pool(kind: str) -> Converter:
    def convert(b: Builder, op: ir.Operation, named: dict) -> list:
        x = b.tensor(_one(named, "self"))
        kernel = int_list_attr(op, "kernel_size")
        kernel = kernel * 2 if len(kernel) == 1 else kernel
        stride = int_list_attr(op, "stride") or kernel
        stride = stride * 2 if len(stride) == 1 else stride
        padding = int_list_attr(op, "padding") or [0, 0]
        padding = padding * 2 if len(padding) == 1 else padding
        dilation = int_list_attr(op, "dilation") or [1, 1]
        if bool_attr(op, "ceil_mode"):
            raise ConversionError("ceil_mode pooling is not converted")
        if any(d != 1 for d in dilation):
            raise ConversionError("dilated pooling has no TOSA form")
        element = element_of(x)
        out = shape_of(op.results[0])
        nhwc = b.transpose(x, _NCHW_TO_NHWC)
        if kind == "avg":
            if "divisor_override" in op.attributes or _one(named, "divisor_override") is not None:
                raise ConversionError("avg_pool2d with divisor_override is not converted")
            include_pad = bool_attr(op, "count_include_pad") if "count_include_pad" in op.attributes else True
            if include_pad and any(padding):
                n, h, w, c = shape_of(nhwc)
                pads = [0, 0, padding[0], padding[0], padding[1], padding[1], 0, 0]
                nhwc = b.op("tosa.pad", b.typed([n, h + 2 * padding[0], w + 2 * padding[1], c], element),
                            [nhwc, b.shape(pads), b.fill([1], 0.0, element)])
                padding = [0, 0]
        nhwc, pad = _conv_geometry(b, nhwc, kernel, stride, (1, 1), padding)
        out_nhwc = b.typed([out[0], out[2], out[3], out[1]], element)
        attrs = dict(kernel=ir.DenseI64ArrayAttr.get(kernel), stride=ir.DenseI64ArrayAttr.get(stride),
                     pad=ir.DenseI64ArrayAttr.get(pad))
        if kind == "avg":
            zp = b.zero_point(element)
            y = b.op("tosa.avg_pool2d", out_nhwc, [nhwc, zp, zp], acc_type=ir.TypeAttr.get(element), **attrs)
        else:
            y = b.op("tosa.max_pool2d", out_nhwc, [nhwc], **attrs)
        results = [b.transpose(y, _NHWC_TO_NCHW)]
        return results + [None] * (len(op.results) - 1)
    return convert


def _adaptive_avg_pool(b: Builder, op: ir.Operation, named: dict) -> list:
    x = b.tensor(_one(named, "self"))
    n, c, h, w = shape_of(x)
    out = shape_of(op.results[0])
    oh, ow = out[2], out[3]
    if oh == 1 and ow == 1:
        return [b.scale(b.reduce("tosa.reduce_sum", x, [2, 3]), 1.0 / (h * w))]
    if h % oh or w % ow:
        raise ConversionError(f"adaptive pooling {h}x{w} -> {oh}x{ow} has uneven windows")
    kernel = [h // oh, w // ow]
    element = element_of(x)
    zp = b.zero_point(element)
    y = b.op("tosa.avg_pool2d", b.typed([n, oh, ow, c], element), [b.transpose(x, _NCHW_TO_NHWC), zp, zp],
             kernel=ir.DenseI64ArrayAttr.get(kernel), stride=ir.DenseI64ArrayAttr.get(kernel),
             pad=ir.DenseI64ArrayAttr.get([0, 0, 0, 0]), acc_type=ir.TypeAttr.get(element))
    return [b.transpose(y, _NHWC_TO_NCHW)]


def _constant_pad(b: Builder, op: ir.Operation, named: dict) -> list:
    x = b.tensor(_one(named, "self"))
    dims = shape_of(x)
    pad = int_list_attr(op, "pad")
    if any(p < 0 for p in pad):
        raise ConversionError("negative padding is not converted")
    pads = [0] * (2 * len(dims))
    for i in range(len(pad) // 2):  # PyTorch lists the last dim first
        axis = len(dims) - 1 - i
        pads[2 * axis], pads[2 * axis + 1] = pad[2 * i], pad[2 * i + 1]
    value = float(b.scalar(_one(named, "value"), 0.0))
    return [b.op("tosa.pad", _result_type(op), [x, b.shape(pads), b.fill([1], value, element_of(x))])]


def _logical(name: str) -> Converter:
    def convert(b: Builder, op: ir.Operation, named: dict) -> list:
        return [b.binary(name, b.tensor(_one(named, "self")), b.tensor(_one(named, "other")), _result_type(op))]
    return convert


_RESIZE_MODES = {"bilinear": "BILINEAR", "nearest": "NEAREST_NEIGHBOR"}


def _upsample(mode: str) -> Converter:
    def convert(b: Builder, op: ir.Operation, named: dict) -> list:
        x = b.tensor(_one(named, "input"))
        n, c, h, w = shape_of(x)
        out = shape_of(op.results[0])
        oh, ow = out[2], out[3]
        if mode == "bilinear" and bool_attr(op, "align_corners"):
            raise ConversionError("align_corners=True resizing is not converted")
        if oh % h or ow % w:
            raise ConversionError(f"resizing {h}x{w} -> {oh}x{ow} is not by an integer factor")
        # TOSA reads input row (out * d + offset) / n. With n = 2f, d = 2 and offset = 1 - f that is
        # (out + 1/2) / f - 1/2: PyTorch's half-pixel centres for bilinear (the reference clamps the
        # rows past the edges as PyTorch does), and, rounded half up, floor(out / f) for nearest.
        fy, fx = oh // h, ow // w
        scale = [2 * fy, 2, 2 * fx, 2]
        offset = [1 - fy, 1 - fx]
        border = [(oh - 1) * scale[1] + offset[0] - (h - 1) * scale[0],
                  (ow - 1) * scale[3] + offset[1] - (w - 1) * scale[2]]
        element = element_of(x)
        y = b.op("tosa.resize", b.typed([n, oh, ow, c], element),
                 [b.transpose(x, _NCHW_TO_NHWC), b.shape(scale), b.shape(offset), b.shape(border)],
                 mode=ir.Attribute.parse(f"#tosa.resize_mode<{_RESIZE_MODES[mode]}>"))
        return [b.transpose(y, _NHWC_TO_NCHW)]
    return convert


CONVERTERS: dict[str, Converter] = {
    "edge.convolution": _convolution,
    "edge.addmm": _addmm,
    "edge.mm": _mm,
    "edge.bmm": _mm,
    "edge.native_batch_norm_legit_no_training": _batch_norm,
    "edge.native_layer_norm": _layer_norm,
    "edge.softmax": _softmax(log=False),
    "edge.log_softmax": _softmax(log=True),
    "edge.mean_dim": _reduction("tosa.reduce_sum", mean=True),
    "edge.sum_dim_intlist": _reduction("tosa.reduce_sum"),
    "edge.amax": _reduction("tosa.reduce_max"),
    "edge.amin": _reduction("tosa.reduce_min"),
    "edge.any_dim": _reduction("tosa.reduce_any"),
    "edge.avg_pool2d": _pool("avg"),
    "edge.max_pool2d_with_indices": _pool("max"),
    "edge.adaptive_avg_pool2d": _adaptive_avg_pool,
    "edge.add_tensor": _binary("tosa.add", alpha=True),
    "edge.add_scalar": _binary("tosa.add", scalar_other=True, alpha=True),
    "edge.sub_tensor": _binary("tosa.sub", alpha=True),
    "edge.sub_scalar": _binary("tosa.sub", scalar_other=True, alpha=True),
    "edge.rsub_scalar": _binary("tosa.sub", scalar_other=True, alpha=True, swap=True),
    "edge.mul_tensor": _binary("tosa.mul"),
    "edge.mul_scalar": _binary("tosa.mul", scalar_other=True),
    "edge.div_tensor": _divide(scalar_other=False),
    "edge.div_scalar": _divide(scalar_other=True),
    "edge.maximum": _binary("tosa.maximum"),
    "edge.minimum": _binary("tosa.minimum"),
    "edge.pow_tensor_tensor": _binary("tosa.pow", other="exponent"),
    "edge.pow_tensor_scalar": _pow_scalar,
    "edge.neg": _unary("tosa.negate"),
    "edge.abs": _unary("tosa.abs"),
    "edge.exp": _unary("tosa.exp"),
    "edge.log": _unary("tosa.log"),
    "edge.rsqrt": _unary("tosa.rsqrt"),
    "edge.sqrt": _sqrt,
    "edge.reciprocal": _unary("tosa.reciprocal"),
    "edge.tanh": _unary("tosa.tanh"),
    "edge.sigmoid": _unary("tosa.sigmoid"),
    "edge.erf": _unary("tosa.erf"),
    "edge.sin": _unary("tosa.sin"),
    "edge.cos": _unary("tosa.cos"),
    "edge.floor": _unary("tosa.floor"),
    "edge.ceil": _unary("tosa.ceil"),
    "edge.relu": _relu,
    "edge.hardtanh": _hardtanh,
    "edge.clamp": _clamp,
    "edge.leaky_relu": _leaky_relu,
    "edge.gelu": _gelu,
    "edge.silu": _silu,
    "edge.where_self": _where,
    "edge.eq_scalar": _compare("tosa.equal", scalar_other=True),
    "edge.eq_tensor": _compare("tosa.equal", scalar_other=False),
    "edge.ne_scalar": _compare("tosa.equal", scalar_other=True, negate=True),
    "edge.ne_tensor": _compare("tosa.equal", scalar_other=False, negate=True),
    "edge.gt_scalar": _compare("tosa.greater", scalar_other=True),
    "edge.gt_tensor": _compare("tosa.greater", scalar_other=False),
    "edge.ge_scalar": _compare("tosa.greater_equal", scalar_other=True),
    "edge.ge_tensor": _compare("tosa.greater_equal", scalar_other=False),
    "edge.lt_scalar": _compare("tosa.greater", scalar_other=True, swap=True),
    "edge.lt_tensor": _compare("tosa.greater", scalar_other=False, swap=True),
    "edge.le_scalar": _compare("tosa.greater_equal", scalar_other=True, swap=True),
    "edge.le_tensor": _compare("tosa.greater_equal", scalar_other=False, swap=True),
    "edge.logical_not": _unary("tosa.logical_not"),
    "edge.logical_and": _logical("tosa.logical_and"),
    "edge.logical_or": _logical("tosa.logical_or"),
    "edge.full": _full,
    "edge.full_like": _full,
    "edge.scalar_tensor": _scalar_tensor,
    "edge.zeros_like": _zeros_like(0.0),
    "edge.ones_like": _zeros_like(1.0),
    "edge.view_copy": _reshape,
    "edge.unsqueeze_copy": _reshape,
    "edge.squeeze_copy_dims": _reshape,
    "edge.squeeze_copy_dim": _reshape,
    "edge.squeeze_copy": _reshape,
    "edge.permute_copy": _permute,
    "edge.transpose_copy_int": _transpose,
    "edge.t_copy": _t,
    "edge.expand_copy": _expand,
    "edge.clone": _identity,
    "edge.alias_copy": _identity,
    "edge.detach_copy": _identity,
    "edge.cat": _cat,
    "edge.slice_copy_tensor": _slice,
    "edge.split_with_sizes_copy": _split,
    "edge.select_copy_int": _select,
    "edge.constant_pad_nd": _constant_pad,
    "edge.upsample_bilinear2d_vec": _upsample("bilinear"),
    "edge.upsample_nearest2d_vec": _upsample("nearest"),
}


def convert_function(builder: Builder, block: ir.Block) -> list[tuple[ir.Operation, str]]:
    """Convert every edge op of `block` in place; returns the ops that could not be, with why."""
    failures: list[tuple[ir.Operation, str]] = []
    for op in list(block.operations):
        op = op.operation
        if not op.name.startswith("edge.") or op.name in ("edge.constant", "edge.sym_size_int"):
            continue
        converter = CONVERTERS.get(op.name)
        if converter is None:
            failures.append((op, f"{op.name} has no TOSA conversion"))
            continue
        info = edge_op_of(op)
        named = named_operands(op, info) if info is not None else {}
        handle = debug_handle(op)
        location = with_debug_handle(op.location, handle) if handle is not None else op.location
        try:
            with ir.InsertionPoint(op), location:
                results = converter(builder, op, named)
        except ConversionError as error:
            failures.append((op, f"{op.name}: {error}"))
            continue
        except Exception as error:  # a bug here: name the op it happened on
            raise RuntimeError(f"converting {op.name} at {op.location}: {type(error).__name__}: {error}") from error
        for old, new in zip(op.results, results):
            if new is None:
                if len(list(old.uses)):
                    failures.append((op, f"{op.name}: result {old.result_number} is used but not converted"))
                continue
            if new.type != old.type:
                with ir.InsertionPoint(op), location:
                    new = builder.reshape(new, shape_of(old)) if str(element_of(new)) == str(element_of(old)) else new
            old.replace_all_uses_with(new)
        if not any(len(list(r.uses)) for r in op.results):
            op.erase()
    for op in list(block.operations):
        op = op.operation
        if op.name in ("edge.constant",) and not any(len(list(r.uses)) for r in op.results):
            op.erase()
    return failures


@register_pass("et-tosa-convert-edge")
def convert_edge(module: ir.Operation) -> None:
    """et-tosa-convert-edge: every edge op of every function as TOSA 1.0 ops (errors name the op)."""
    builder = Builder(module)
    failed = False
    for op in module.regions[0].blocks[0].operations:
        if op.operation.name != "func.func":
            continue
        for op_, reason in convert_function(builder, op.operation.regions[0].blocks[0]):
            emit_error(op_, f"et-tosa-convert-edge: {reason}")
            failed = True
    if failed:
        raise PassFailure()
