"""What a contraction's microkernel call can absorb: the op that initializes its output, and the
elementwise op after it (et-cpu-microkernels fuses both into the call, runtime/backends/cpu/payload_c).

At memref level a convolution with a bias and a clamp is three passes over its output:

    linalg.broadcast ins(%bias : memref<32xf32>) outs(%o : memref<1x32x112x112xf32>) dimensions = [0, 2, 3]
    linalg.conv_2d_nchw_fchw ins(%x, %w ...) outs(%o ...)
    linalg.generic ins(%o ...) outs(%o ...) { cmpf ogt + select (max 0), cmpf olt + select (min 6) }

The microkernel can write the bias into each output tile before the product and apply the clamp
right after it, while the tile is in L1. `match` finds such an init (zero or a bias) and such an
epilogue (a bias added after the product, a residual tensor added, then either a lower and an upper
bound with either NaN behaviour, or one of the activations in ACTIVATIONS: GELU in both forms, SiLU,
sigmoid, tanh) and says what the kernel's `mode` word is; anything else in the epilogue's body (a
multiply by another tensor, an activation followed by a clamp) leaves that op where it is.

An activation is recognized by what it computes, not by how torch-mlir spelled it: the rest of the
body, from the value after the adds to the yield, must be straight-line arithmetic of that one value
and constants, built only from the analytic ops in _ANALYTIC (no compare or select, so no branches),
and it must agree with the activation's float64 reference within 1e-6 relative at _SAMPLES, 53
points in [-40, 40]. Two such expressions that agree on that many points are the same function
(GELU written x * 0.5 * (1 + erf(x / sqrt 2)) or 0.5 * x * (erf(x * 0.7071) + 1) both pass, and
float32 constants such as sqrt 2 rounded are within the tolerance). The kernel then computes its own
vectorized form (payload_c/activation.c, the formulas of et-cpu-approximate-math).

Safety: nothing between the init, the contraction and the epilogue may touch the buffers
involved, the epilogue must read the contraction's whole output once and write a buffer of the
same shape, and when it writes another buffer, the contraction's own buffer must have no use after
it (it then goes away).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np
from torch_mlir import ir

from etmlir.backends.cpu.ir_util import identity_layout, reassociation, uncast
from etmlir.program import find_symbol

# etmlir_cpu_payload.h's ETMLIR_EP_* flags.
INIT_MASK, INIT_OUTPUT, INIT_ZERO, INIT_BIAS = 3, 0, 1, 2
BIAS_AFTER, RESIDUAL = 4, 8
LO_SHIFT, HI_SHIFT = 4, 6
NAN_TO_BOUND, KEEP_NAN = 1, 2
ACT_SHIFT = 8

# The dim of the output a bias runs along, per contraction.
BIAS_DIM = {"linalg.matmul": 1, "linalg.batch_matmul": 2, "linalg.conv_2d_nchw_fchw": 1,
            "linalg.depthwise_conv_2d_nchw_chw": 1}
VIEWS = ("memref.cast", "memref.subview", "memref.expand_shape", "memref.collapse_shape",
          "memref.reinterpret_cast")
# arith.cmpf predicates
_OGT, _OGE, _OLT, _OLE, _UGT, _UGE, _ULT, _ULE = 2, 3, 4, 5, 9, 10, 11, 12


@dataclasses.dataclass
class Fusion:
    mode: int = 0
    lo: float = 0.0
    hi: float = 0.0
    bias: ir.Value | None = None
    residual: ir.Value | None = None
    output: ir.Value | None = None          # where the kernel writes (the epilogue's output when fused)
    erase: list[ir.Operation] = dataclasses.field(default_factory=list)  # the init and epilogue ops
    dead_buffer: ir.Value | None = None     # the contraction's own buffer, unused once the epilogue is fused
    hoist: list[ir.Operation] = dataclasses.field(default_factory=list)  # the output's alloc/views, made later
    # The epilogue ran on the output seen with its first dim split in `lead + 1` (an addmm's [64, 1536]
    # product as [1, 64, 1536], a linear layer's over an image, [3136, 384] as [1, 56, 56, 384]):
    # `output` and `residual` have those dims, the kernel's operands have them merged again.
    lead: int = 0

    @property
    def fused(self) -> bool:
        return bool(self.erase)


def root(value: ir.Value) -> ir.Value:
    """The buffer a view is a view of."""
    while not isinstance(value.owner, ir.Block) and value.owner.name in VIEWS:
        value = value.owner.operands[0]
    return value


def _roots_touched(op: ir.Operation) -> set[ir.Value]:
    found: set[ir.Value] = set()

    def visit(inner: ir.Operation) -> ir.WalkResult:
        for v in inner.operands:
            if isinstance(v.type, ir.MemRefType):
                found.add(root(v))
        return ir.WalkResult.ADVANCE

    op.walk(visit)
    return found


def _whole(value: ir.Value, of: ir.Value) -> bool:
    """`value` is `of`, or both are the same buffer seen whole (no subview between them)."""
    return value == of or uncast(value) == uncast(of)


def _constant(value: ir.Value) -> float | None:
    """An f32 arith.constant's value."""
    c = _scalar_constant(value) if str(value.type) == "f32" else None
    return None if c is None else float(c)


def _fills_with(op: ir.Operation, buffer: ir.Value, value: float = 0.0) -> bool:
    """`op` fills the whole of `buffer` with `value` (0.0 unless told)."""
    if op.name == "linalg.fill":
        return _constant(op.operands[0]) == value and _whole(op.operands[1], buffer)
    if op.name == "linalg.map" and len(op.operands) == 1 and _whole(op.operands[0], buffer):
        body = list(op.regions[0].blocks[0].operations)
        return len(body) == 1 and body[0].name == "linalg.yield" and _constant(body[0].operands[0]) == value
    return False


def _maps(op: ir.Operation) -> list[str]:
    return [str(ir.AffineMapAttr(m).value) for m in ir.ArrayAttr(op.attributes["indexing_maps"])]


def _identity(rank: int) -> str:
    dims = ", ".join(f"d{i}" for i in range(rank))
    return f"({dims}) -> ({dims})"


def _along(rank: int, dim: int) -> str:
    return f"({', '.join(f'd{i}' for i in range(rank))}) -> (d{dim})"


def _shape(value: ir.Value) -> list[int]:
    return list(ir.MemRefType(value.type).shape)


def _find_init(ops: list[ir.Operation], at: int, out: ir.Value, bias_dim: int, fusion: Fusion) -> None:
    """The op right before the contraction that writes its output: a zero fill or a bias broadcast."""
    r = root(out)
    for i in range(at - 1, -1, -1):
        op = ops[i]
        if r not in _roots_touched(op):
            continue
        rank = len(_shape(out))
        if op.name == "linalg.fill" and _fills_with(op, out):
            fusion.mode |= INIT_ZERO
            fusion.erase.append(op)
        elif (op.name == "linalg.broadcast" and _whole(op.operands[1], out) and len(_shape(op.operands[0])) == 1
              and list(ir.DenseI64ArrayAttr(op.attributes["dimensions"])) == [d for d in range(rank) if d != bias_dim]
              and not any(root(op.operands[0]) in _roots_touched(between) for between in ops[i + 1:at])):
            fusion.mode |= INIT_BIAS
            fusion.bias = op.operands[0]
            fusion.erase.append(op)
        elif op.name == "linalg.generic" and _is_copy(op) and _whole(op.operands[1], out):
            # A copy of a buffer that a zero fill wrote last (what bufferization leaves when that
            # buffer is reused later): the copy goes, the fill stays. Or a copy of a constant of zeros:
            # a zero bias folded into the output's shape (a convolution whose folded batch norm has
            # beta = mean * scale, as a freshly built model's has), a full-size copy per run otherwise.
            source = op.operands[0]
            writer = next((ops[j] for j in range(i - 1, -1, -1) if root(source) in _roots_touched(ops[j])), None)
            if ((writer is not None and writer.name == "linalg.fill" and _fills_with(writer, source)
                 or _zero_splat_global(source)) and _shape(source) == _shape(out)):
                fusion.mode |= INIT_ZERO
                fusion.erase.append(op)
        return


def _zero_splat_global(value: ir.Value) -> bool:
    """`value` is (a cast of) a memref.get_global of a constant global holding zeros only (a splat)."""
    value = uncast(value)
    if isinstance(value.owner, ir.Block) or value.owner.operation.name != "memref.get_global":
        return False
    module = value.owner.operation
    while module.parent is not None:
        module = module.parent
    found = find_symbol(module, "memref.global", ir.FlatSymbolRefAttr(value.owner.operation.attributes["name"]).value)
    if found is None or "constant" not in found.attributes or "initial_value" not in found.attributes:
        return False
    initial = found.attributes["initial_value"]
    if not isinstance(initial, ir.DenseElementsAttr) or not initial.is_splat:
        return False
    splat = initial.get_splat_value()
    return isinstance(splat, ir.FloatAttr) and splat.value == 0.0


def _is_copy(op: ir.Operation) -> bool:
    if len(op.operands) != 2 or "parallel" not in str(op.attributes["iterator_types"]):
        return False
    rank = len(_shape(op.operands[1]))
    body = list(op.regions[0].blocks[0].operations)
    block = op.regions[0].blocks[0]
    return (_maps(op) == [_identity(rank)] * 2 and len(body) == 1 and body[0].name == "linalg.yield"
            and body[0].operands[0] == block.arguments[0])


_erf = np.vectorize(math.erf, otypes=[np.float64])


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


# etmlir_cpu_payload.h's ETMLIR_EP_ACT_* codes and each activation's float64 reference.
ACTIVATIONS: dict[str, tuple[int, Callable[[np.ndarray], np.ndarray]]] = {
    "gelu": (1, _gelu), "gelu_tanh": (2, _gelu_tanh), "silu": (3, lambda x: x * _sigmoid(x)),
    "sigmoid": (4, _sigmoid), "tanh": (5, np.tanh)}

_SAMPLES = np.concatenate([np.linspace(-40.0, 40.0, 41) + 0.0625,
                           [-3.3, -2.1, -1.1, -0.55, -0.2, -0.01, 0.01, 0.2, 0.55, 1.1, 2.1, 3.3]])
with np.errstate(over="ignore"):
    _REFERENCE_VALUES = [(code, reference(_SAMPLES)) for code, reference in ACTIVATIONS.values()]
_ANALYTIC: dict[str, Callable[..., np.ndarray]] = {
    "arith.addf": np.add, "arith.subf": np.subtract, "arith.mulf": np.multiply, "arith.divf": np.divide,
    "arith.negf": np.negative, "math.exp": np.exp, "math.tanh": np.tanh, "math.erf": _erf, "math.sqrt": np.sqrt,
    "math.rsqrt": lambda a: 1.0 / np.sqrt(a), "math.fpowi": np.power, "math.powf": np.power,
    "arith.truncf": lambda a: np.float64(np.float32(a))}  # a float64 constant made f32


def _scalar_constant(value: ir.Value) -> float | int | None:
    """An arith.constant's value: a float of any width, or an integer (fpowi's exponent)."""
    owner = value.owner
    if isinstance(owner, ir.Block) or owner.name != "arith.constant":
        return None
    t = str(value.type)
    if t in ("f16", "bf16", "f32", "f64"):
        return np.float64(ir.FloatAttr(owner.attributes["value"]).value)
    return ir.IntegerAttr(owner.attributes["value"]).value if t.startswith("i") else None


def _activation(ops: list[ir.Operation], x: ir.Value) -> int:
    """The ETMLIR_EP_ACT_* code of the activation that `ops` (the rest of a body, up to its yield)
    compute from `x` alone, or 0 (see the module docstring)."""
    values: dict[ir.Value, np.ndarray] = {x: _SAMPLES}

    def operand(v: ir.Value) -> np.ndarray | float | int | None:
        return values[v] if v in values else _scalar_constant(v)

    with np.errstate(all="ignore"):
        for op in ops:
            if op.name == "linalg.yield":
                got = values.get(op.operands[0])
                if got is None or got is values[x]:
                    return 0
                for code, want in _REFERENCE_VALUES:
                    if np.allclose(got, want, rtol=1e-6, atol=1e-9) and np.all(np.isfinite(got)):
                        return code
                return 0
            if op.name == "arith.constant":
                continue
            fn = _ANALYTIC.get(op.name)
            args = [operand(v) for v in op.operands]
            if fn is None or len(op.results) != 1 or str(op.results[0].type) != "f32" or any(a is None for a in args):
                return 0
            if op.name == "math.fpowi" and not isinstance(args[1], int):
                return 0
            values[op.results[0]] = np.asarray(fn(*args), dtype=np.float64) * np.ones_like(_SAMPLES)
    return 0


class _Body:
    """Reads an epilogue body as: acc (+ bias) (+ residual), then a lower and/or an upper bound, or an
    activation."""

    def __init__(self, acc: ir.Value, bias: ir.Value | None, residual: ir.Value | None) -> None:
        self.current, self.bias, self.residual = acc, bias, residual
        self.mode, self.lo, self.hi = 0, 0.0, 0.0
        self.conditions: dict[ir.Value, tuple[int, ir.Value, ir.Value]] = {}
        self.bounded = False

    def add(self, a: ir.Value, b: ir.Value) -> bool:
        other = b if a == self.current else a if b == self.current else None
        if other is None or self.bounded:
            return False
        if self.bias is not None and other == self.bias and not self.mode & BIAS_AFTER:
            self.mode |= BIAS_AFTER
        elif self.residual is not None and other == self.residual and not self.mode & RESIDUAL:
            self.mode |= RESIDUAL
        else:
            return False
        return True

    def bound(self, lower: bool, value: float, nan: int) -> bool:
        shift = LO_SHIFT if lower else HI_SHIFT
        if (self.mode >> shift) & 3:
            return False
        if lower and (self.mode >> HI_SHIFT) & 3:
            return False  # an upper bound first, then a lower one: not this kernel's order
        self.mode |= nan << shift
        if lower:
            self.lo = value
        else:
            self.hi = value
        self.bounded = True
        return True

    def select(self, condition: ir.Value, t: ir.Value, f: ir.Value) -> bool:
        if condition not in self.conditions:
            return False
        predicate, x, y = self.conditions[condition]
        cur = self.current
        greater = predicate in (_OGT, _OGE, _UGT, _UGE)
        ordered = predicate in (_OGT, _OGE, _OLT, _OLE)
        # select(x P y, x, y) with x the value: P ">" is a lower bound y, P "<" an upper bound y.
        if x == cur and t == cur and f == y and _constant(y) is not None:
            value, lower = _constant(y), greater
            nan = NAN_TO_BOUND if ordered else KEEP_NAN  # NaN compares false (ordered): the bound
        # select(c P x, c, x): P ">" is a lower bound c, P "<" an upper bound c.
        elif y == cur and f == cur and t == x and _constant(x) is not None:
            value, lower = _constant(x), greater
            nan = KEEP_NAN if ordered else NAN_TO_BOUND
        else:
            return False
        return self.bound(lower, value, nan)

    def activation(self, rest: list[ir.Operation]) -> bool:
        """The rest of the body is an activation of the current value (nothing after it, no bound before it)."""
        act = 0 if self.bounded else _activation(rest, self.current)
        self.mode |= act << ACT_SHIFT
        return act != 0

    def read(self, block: ir.Block) -> bool:
        ops = list(block.operations)
        for i, op in enumerate(ops):
            name = op.name
            if name == "arith.constant":
                continue
            if name == "arith.addf":
                if not self.add(op.operands[0], op.operands[1]):
                    return self.activation(ops[i:])
            elif name == "arith.cmpf":
                predicate = ir.IntegerAttr(op.attributes["predicate"]).value
                self.conditions[op.results[0]] = (predicate, op.operands[0], op.operands[1])
                continue
            elif name == "arith.select":
                if not self.select(*op.operands):
                    return False
            elif name in ("arith.maximumf", "arith.minimumf", "arith.maxnumf", "arith.minnumf"):
                a, b = op.operands
                other = b if a == self.current else a if b == self.current else None
                if other is None or _constant(other) is None:
                    return False
                nan = KEEP_NAN if name in ("arith.maximumf", "arith.minimumf") else NAN_TO_BOUND
                if not self.bound(name in ("arith.maximumf", "arith.maxnumf"), _constant(other), nan):
                    return False
            elif name == "linalg.yield":
                return op.operands[0] == self.current and self.mode != 0
            else:
                return self.activation(ops[i:])
            self.current = op.results[0]
        return False


def _overwrites(op: ir.Operation, buffer: ir.Value) -> bool:
    """`op` writes all of `buffer` without reading it (a fill, a zero map, a broadcast)."""
    if op.name == "linalg.fill":
        return _whole(op.operands[1], buffer)
    if op.name == "linalg.broadcast":
        return _whole(op.operands[1], buffer) and root(op.operands[0]) != buffer
    return _fills_with(op, buffer)


def _dead_after(ops: list[ir.Operation], at: int, buffer: ir.Value) -> bool:
    """Nothing after ops[at] reads `buffer`'s current value: the next op touching it frees it or
    overwrites all of it (bufferization reuses a dead buffer for a later result)."""
    for op in ops[at + 1:]:
        if buffer in _roots_touched(op):
            return op.name == "memref.dealloc" or _overwrites(op, buffer)
    return True


def _expanded(value: ir.Value, out: ir.Value, lead: int, seen: list[int]) -> bool:
    """`value` is `out` seen whole as shape `seen`, its first dim split in `lead + 1` (memref.expand_shape)."""
    if lead == 0:
        return _whole(value, out)
    owner = value.owner
    if isinstance(owner, ir.Block) or owner.name != "memref.expand_shape" or not _whole(owner.operands[0], out):
        return False
    groups = [list(range(lead + 1))] + [[d] for d in range(lead + 1, len(seen))]
    return _shape(value) == seen and reassociation(owner) == groups


def _splits_first_dim(seen: list[int], shape: list[int], rank: int) -> int | None:
    """How many dims more `seen` has than a contraction's output `shape`, its first dim split in several
    (None when it is not that): leading unit dims for any contraction, any split of a matmul's rows."""
    lead = len(seen) - rank
    if lead < 0 or seen[lead + 1:] != shape[1:]:
        return None
    if seen[:lead] == [1] * lead and seen[lead] == shape[0]:
        return lead  # (the rows may be dynamic)
    dynamic = ir.ShapedType.get_dynamic_size()
    static = dynamic not in seen[:lead + 1] and shape[0] != dynamic
    return lead if rank == 2 and static and math.prod(seen[:lead + 1]) == shape[0] else None


def _find_epilogue(ops: list[ir.Operation], at: int, contraction: ir.Operation, bias_dim: int,
                   fusion: Fusion) -> None:
    out = contraction.operands[-1]
    r, rank, shape = root(out), len(_shape(out)), _shape(out)
    later = None
    for i in range(at + 1, len(ops)):
        if r in _roots_touched(ops[i]) and ops[i].name not in VIEWS:  # a view reads nothing
            later = i
            break
    if later is None:
        return
    g = ops[later]
    if g.name != "linalg.generic" or "reduction" in str(g.attributes["iterator_types"]):
        return
    segments = list(ir.DenseI32ArrayAttr(g.attributes["operandSegmentSizes"]))
    if segments[1] != 1:
        return
    inputs, dest = list(g.operands)[:segments[0]], g.operands[segments[0]]
    maps = _maps(g)
    # The epilogue may see the product with its first dim split: leading unit dims added (a linear
    # layer's [T, N] product as the [1, T, N] the model computes with), or a matmul's rows as an image's
    # pixels (a linear layer over [1, H, W, C], as ConvNeXt's). Then every buffer it writes or adds must
    # be plain (identity layout), so that merging those dims again is a collapse_shape.
    lead = _splits_first_dim(_shape(dest), shape, rank)
    if (lead is None or maps[-1] != _identity(rank + lead)
            or (lead and not identity_layout(ir.MemRefType(dest.type)))):
        return
    block = g.regions[0].blocks[0]
    if any(True for _ in block.arguments[len(inputs)].uses):
        return  # the body reads the old output
    acc = bias = residual = None
    for value, m, arg in zip(inputs, maps, block.arguments):
        if root(value) == r and _expanded(value, out, lead, _shape(dest)) and m == _identity(rank + lead) \
                and acc is None:
            acc = arg
        elif m == _along(rank + lead, bias_dim + lead) and len(_shape(value)) == 1 \
                and _shape(value)[0] == shape[bias_dim] and bias is None and fusion.bias is None:
            bias = (arg, value)
        elif (m == _identity(rank + lead) and _shape(value) == _shape(dest) and root(value) != r and residual is None
              and (lead == 0 or identity_layout(ir.MemRefType(value.type)))):
            residual = (arg, value)
        else:
            return
    if acc is None:
        return
    body = _Body(acc, bias[0] if bias else None, residual[0] if residual else None)
    if not body.read(block):
        return
    if body.mode & BIAS_AFTER == 0:
        bias = None
    if body.mode & RESIDUAL == 0:
        residual = None
    writes_elsewhere = root(dest) != r
    involved = {root(dest)} | {root(v) for v in ((bias[1],) if bias else ()) + ((residual[1],) if residual else ())}
    if writes_elsewhere:
        if fusion.mode & INIT_MASK == INIT_OUTPUT:
            return  # the product accumulates into its own buffer's old value: it cannot move
        if any(root(v) == root(dest) for v in list(contraction.operands)[:-1]):
            return  # the kernel would overwrite an input it reads
        if residual and root(residual[1]) == root(dest):
            return  # the tile's residual would be overwritten by the product first
        if not _dead_after(ops, later, r):
            return  # the product itself is still needed
    # The output's buffer (and views of it) may be made between the contraction and the epilogue:
    # they move before the call (an alloc and views depend on nothing else, but an alloc's dynamic
    # sizes, which must then be known before the call).
    hoist = []
    value = dest
    between = ops[at + 1:later]
    while not isinstance(value.owner, ir.Block) and value.owner in between:
        owner = value.owner
        if owner.name == "memref.alloc" and not any(
                not isinstance(size.owner, ir.Block) and size.owner in between for size in owner.operands):
            hoist.insert(0, owner)
            break
        if owner.name not in VIEWS:
            return  # made from something else, or an alloc sized by something computed after the call
        hoist.insert(0, owner)
        value = owner.operands[0]
    if any(involved & _roots_touched(op) for op in ops[at + 1:later] if op not in hoist):
        return
    fusion.mode |= body.mode
    fusion.lo, fusion.hi = body.lo, body.hi
    if bias:
        fusion.bias = bias[1]
    if residual:
        fusion.residual = residual[1]
    fusion.erase.append(g)
    fusion.lead = lead
    if writes_elsewhere:
        fusion.output = dest
        fusion.dead_buffer = r
        fusion.hoist = hoist


@dataclasses.dataclass
class Padding:
    """A depthwise convolution's zero padding (a max pooling's -inf one), taken over by the kernel (no
    padded copy of the input)."""
    source: ir.Value                 # the unpadded input
    top: int
    left: int
    erase: list[ir.Operation]        # the fill and the copy into the padded buffer
    buffer: ir.Value                 # the padded buffer, unused once they are gone
    # The convolution's output reused the input's buffer (bufferization does when the input dies at
    # the copy): the output then needs a buffer of its own, and the uses after it move there.
    new_output: bool = False


def match_padding(block_ops: list[ir.Operation], at: int, fusion: Fusion, value: float = 0.0) -> Padding | None:
    """The depthwise convolution (or max pooling) at block_ops[at] reads a buffer that is only zeros
    (`value`: -inf for pooling) plus a copy of another tensor at an offset in its two spatial dims:
    that tensor and the offset, or None.

        %p = memref.alloc() : memref<1x32x114x114xf32>
        linalg.map outs(%p) { linalg.yield %zero }
        %v = memref.subview %p[0, 0, 1, 1] [1, 32, 112, 112] [1, 1, 1, 1]
        linalg.generic (copy) ins(%x) outs(%v)
        <depthwise convolution> ins(%p, %w) ...
    """
    contraction = block_ops[at]
    padded = contraction.operands[0]
    buffer = root(padded)
    owner = buffer.owner
    if isinstance(owner, ir.Block) or owner.name != "memref.alloc" or not _whole(padded, buffer):
        return None
    fill = copy = None
    for i, op in enumerate(block_ops):
        if op == owner or buffer not in _roots_touched(op):
            continue
        if i < at and fill is None and copy is None and _fills_with(op, buffer, value):
            fill = op
        elif i < at and fill is not None and copy is None and op.name == "memref.subview":
            continue
        elif (i < at and fill is not None and copy is None and op.name == "linalg.generic" and _is_copy(op)
              and root(op.operands[1]) == buffer and op.operands[1].owner.name == "memref.subview"):
            copy = (i, op)
        elif i == at or op.name == "memref.dealloc" or (op.name == "memref.cast" and i < at):
            continue
        else:
            return None
    if fill is None or copy is None:
        return None
    index, copy_op = copy
    view = copy_op.operands[1].owner
    offsets = list(ir.DenseI64ArrayAttr(view.attributes["static_offsets"]))
    strides = list(ir.DenseI64ArrayAttr(view.attributes["static_strides"]))
    if len(view.operands) != 1 or offsets[:2] != [0, 0] or strides != [1] * 4 or min(offsets) < 0:
        return None  # dynamic offsets, or an offset in the batch or channel dims
    if _shape(copy_op.operands[1])[:2] != _shape(padded)[:2]:
        return None
    source = copy_op.operands[0]
    written = fusion.output if fusion.output is not None else contraction.operands[-1]
    new_output = root(written) == root(source)
    if any(root(source) in _roots_touched(op) and not (new_output and op in fusion.erase)
           for op in block_ops[index + 1:at]):
        return None  # the source changes between the copy and the convolution
    if new_output:
        old = root(written)
        if (isinstance(old.owner, ir.Block) or old.owner.name != "memref.alloc" or not _whole(written, old)
                or not ir.MemRefType(old.type).has_static_shape):
            return None
        for op in block_ops[at + 1:]:
            if any(root(v) == old and v != old for v in op.operands if isinstance(v.type, ir.MemRefType)):
                return None  # a view of it made before the convolution is used after it
    return Padding(source, offsets[2], offsets[3], [copy_op, fill], buffer, new_output)


def match(block_ops: list[ir.Operation], at: int) -> Fusion:
    """What the contraction at block_ops[at] can absorb (Fusion.fused is False: nothing)."""
    contraction = block_ops[at]
    bias_dim = BIAS_DIM[contraction.name]
    fusion = Fusion()
    _find_init(block_ops, at, contraction.operands[-1], bias_dim, fusion)
    _find_epilogue(block_ops, at, contraction, bias_dim, fusion)
    return fusion
