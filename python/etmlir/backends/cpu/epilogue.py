"""What a contraction's microkernel call can absorb: the op that initializes its output, and the
elementwise op after it (et-cpu-microkernels fuses both into the call, runtime/backends/cpu/payload_c).

At memref level a convolution with a bias and a clamp is three passes over its output:

    linalg.broadcast ins(%bias : memref<32xf32>) outs(%o : memref<1x32x112x112xf32>) dimensions = [0, 2, 3]
    linalg.conv_2d_nchw_fchw ins(%x, %w ...) outs(%o ...)
    linalg.generic ins(%o ...) outs(%o ...) { cmpf ogt + select (max 0), cmpf olt + select (min 6) }

The microkernel can write the bias into each output tile before the product and apply the clamp
right after it, while the tile is in L1. `match` finds such an init (zero or a bias) and such an
epilogue (a bias added after the product, a residual tensor added, a lower and an upper bound with
either NaN behaviour) and says what the kernel's `mode` word is; anything else in the epilogue's
body (a GELU, a multiply) leaves that op where it is.

Safety: nothing between the init, the contraction and the epilogue may touch the buffers
involved, the epilogue must read the contraction's whole output once and write a buffer of the
same shape, and when it writes another buffer, the contraction's own buffer must have no use after
it (it then goes away).
"""

from __future__ import annotations

import dataclasses

from torch_mlir import ir

from etmlir.backends.cpu.ir_util import uncast

# etmlir_cpu_payload.h's ETMLIR_EP_* flags.
INIT_MASK, INIT_OUTPUT, INIT_ZERO, INIT_BIAS = 3, 0, 1, 2
BIAS_AFTER, RESIDUAL = 4, 8
LO_SHIFT, HI_SHIFT = 4, 6
NAN_TO_BOUND, KEEP_NAN = 1, 2

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
    owner = value.owner
    if isinstance(owner, ir.Block) or owner.name != "arith.constant" or str(value.type) != "f32":
        return None
    return ir.FloatAttr(owner.attributes["value"]).value


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
            # buffer is reused later): the copy goes, the fill stays.
            source = op.operands[0]
            writer = next((ops[j] for j in range(i - 1, -1, -1) if root(source) in _roots_touched(ops[j])), None)
            if (writer is not None and writer.name == "linalg.fill" and _fills_with(writer, source)
                    and _shape(source) == _shape(out)):
                fusion.mode |= INIT_ZERO
                fusion.erase.append(op)
        return


def _is_copy(op: ir.Operation) -> bool:
    if len(op.operands) != 2 or "parallel" not in str(op.attributes["iterator_types"]):
        return False
    rank = len(_shape(op.operands[1]))
    body = list(op.regions[0].blocks[0].operations)
    block = op.regions[0].blocks[0]
    return (_maps(op) == [_identity(rank)] * 2 and len(body) == 1 and body[0].name == "linalg.yield"
            and body[0].operands[0] == block.arguments[0])


class _Body:
    """Reads an epilogue body as: acc (+ bias) (+ residual), then a lower and/or an upper bound."""

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

    def read(self, block: ir.Block) -> bool:
        for op in block.operations:
            name = op.name
            if name == "arith.constant":
                continue
            if name == "arith.addf":
                if not self.add(op.operands[0], op.operands[1]):
                    return False
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
                return False
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


def _find_epilogue(ops: list[ir.Operation], at: int, contraction: ir.Operation, bias_dim: int,
                   fusion: Fusion) -> None:
    out = contraction.operands[-1]
    r, rank, shape = root(out), len(_shape(out)), _shape(out)
    later = None
    for i in range(at + 1, len(ops)):
        if r in _roots_touched(ops[i]):
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
    if maps[-1] != _identity(rank) or _shape(dest) != shape:
        return
    block = g.regions[0].blocks[0]
    if any(True for _ in block.arguments[len(inputs)].uses):
        return  # the body reads the old output
    acc = bias = residual = None
    for value, m, arg in zip(inputs, maps, block.arguments):
        if root(value) == r and _whole(value, out) and m == _identity(rank) and acc is None:
            acc = arg
        elif m == _along(rank, bias_dim) and len(_shape(value)) == 1 and _shape(value)[0] == shape[bias_dim] \
                and bias is None and fusion.bias is None:
            bias = (arg, value)
        elif m == _identity(rank) and _shape(value) == shape and root(value) != r and residual is None:
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
    # they move before the call (an alloc of a static shape and views depend on nothing else).
    hoist = []
    value = dest
    while not isinstance(value.owner, ir.Block) and value.owner in ops[at + 1:later]:
        owner = value.owner
        if owner.name == "memref.alloc" and not owner.operands:
            hoist.insert(0, owner)
            break
        if owner.name not in VIEWS:
            return  # made from something else, or an alloc with dynamic sizes
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
