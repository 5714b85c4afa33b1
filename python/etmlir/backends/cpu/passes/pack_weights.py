"""et-cpu-pack-weights: constant weights are packed at compile time into the microkernels' panels.

The GEMM microkernel reads its operands as panels: B as panels of W columns
(W = 32 for the AVX-512 build, 16 otherwise), A as panels of H rows (14 /
6 / 4), each over all of K. An operand it is handed in memory it first
copies into that layout, on every call. A linear layer's B and a
convolution's filter (its A: [F, C*KH*KW]) are constants, so the copy is the
same every time; with the weights streaming from L3 it took a fifth of a
small decoder's profile (LLaMA, T = 64, one thread: 7.7 -> 6.0 ms without
it) and a tenth of MobileNetV2's (about 4% faster without it). This pass
does the copy once, at compile time (as XNNPACK packs at init): a matmul or
convolution call whose weight is a constant global gets a new global holding
the panels and calls the kernel that reads them.

    memref.global "private" constant @w : memref<256x80xf32> = dense<...>
    %0 = memref.get_global @w : memref<256x80xf32>
    %1 = memref.cast %0 : memref<256x80xf32> to memref<?x?xf32, strided<[?, ?], offset: ?>>
    func.call @etmlir_uk_matmul_ep(%a, %1, %c, %bias, %c, %mode, %lo, %hi)

becomes (panel-width=32)

    memref.global "private" constant @w_panels : memref<3x256x32xf32> = dense<...> {alignment = 64}
    %0 = memref.get_global @w_panels : memref<3x256x32xf32>
    %1 = memref.cast %0 : memref<3x256x32xf32> to memref<?x?x?xf32, strided<[?, ?, ?], offset: ?>>
    func.call @etmlir_uk_matmul_packed_ep(%a, %1, %c, %bias, %c, %mode, %lo, %hi)

and a convolution `@etmlir_uk_conv2d_nchw_fchw[_ep](%in, %filter, %out,
strides, dilations[, epilogue])` likewise becomes `@etmlir_uk_conv2d_packed_ep(
%in, %panels, %out, strides, dilations, %kh, %kw, epilogue)` with the filter
[F, C, KH, KW] as [ceil(F / H), C*KH*KW, H] (panel p: rows [p * H, p * H + H)
of A, column by column). Panels are zero padded at the end; the kernels do
not compute the padding, so it costs only memory, and a weight it would more
than double (N = 10 classifiers at W = 32) stays as it was, as does a splat.

A 3x3 stride-1 convolution with enough channels in and out and output tiles
per image instead goes through Winograd F(m x m, 3x3)
(`etmlir_uk_conv2d_winograd_ep`): m = 4 (4x fewer multiplies) when it has
`winograd-min-channels` channels, 32 tiles of 4x4 (or 9 to 31 with twice
the channels) and 3/4 of the tiles' outputs real, else m = 2 (2.25x fewer) when
it has 25 tiles of 2x2 (9 x 9 outputs) and `winograd2-min-channels` channels
(winograd_tile has the rule). The transformed filters are 4x (16/9x) the
filter's floats: ResNet-18's `.pte` is 100 MB instead of 48; `winograd=false`
(the cpu compile spec `{"winograd": "false"}`) keeps the plain filters. Its filter g becomes
U = G g G^T, and each of U's (m + 2)^2 elements, an [F, C] matrix, is packed
into row panels, [(m + 2)^2 * ceil(F / H), C, H] in all:

    func.call @etmlir_uk_conv2d_nchw_fchw_ep(%in, %filter, %out, %c1, %c1, %c1, %c1, <epilogue>)

becomes

    memref.global "private" constant @f_winograd4 : memref<180x64x14xf32> = dense<...> {alignment = 64}
    func.call @etmlir_uk_conv2d_winograd_ep(%in, %u, %out, <epilogue>)

The old global goes when nothing else reads it, so the payload carries each
weight once (a filter with several uses is packed each way they need). The
panel sizes must be those the payload's microkernels were built for: the cpu
pipeline asks them (`link.panel_shape`); 0, the default, asks the host's.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from torch_mlir import ir

from etmlir.backends.cpu.ir_util import constant_int, declare_function, identity_layout, uncast
from etmlir.backends.cpu.passes.externalize_weights import global_bytes
from etmlir.backends.cpu.passes.microkernels import cast_dynamic, constant, dynamic_memref, no_bias
from etmlir.executable.serialize import resource_blobs, resource_key
from etmlir.passes.registry import Option, register_pass


@dataclasses.dataclass(frozen=True)
class Source:
    """A kernel call whose weight may be packed: which operand, its rank, and what the call becomes."""
    weight: int        # the weight's operand index
    rank: int          # its rank (2: a matmul's B, 4: a convolution's filter)
    epilogue: bool     # the call already passes the epilogue operands (bias, residual, mode, lo, hi)
    packed: str        # the kernel reading the panels
    scalars: int       # i64 operands between the output and the epilogue (strides, dilations)


WINOGRAD_KERNEL = "etmlir_uk_conv2d_winograd_ep"
# Which 3x3 stride-1 convolutions go through Winograd, and with which tile: see winograd_tile.
WINOGRAD_MIN_CHANNELS = 32
WINOGRAD_MIN_TILES = 32  # output tiles per image; F(4x4) takes down to WINOGRAD_4_FEWEST_TILES with twice the channels
WINOGRAD_4_FEWEST_TILES = 9
WINOGRAD_4_MIN_USE = 0.75  # F(4x4): the share of the tiles' outputs that are real (14 x 14 has 196 of 256)
WINOGRAD_2_CHANNELS = 256  # F(2x2) pays only with this many channels
WINOGRAD_2_MIN_TILES = 25  # ... and this many tiles of 2x2 (a 9x9 output; not 7x7: see winograd_tile)

SOURCES = {
    "etmlir_uk_matmul": Source(1, 2, False, "etmlir_uk_matmul_packed_ep", 0),
    "etmlir_uk_matmul_ep": Source(1, 2, True, "etmlir_uk_matmul_packed_ep", 0),
    "etmlir_uk_conv2d_nchw_fchw": Source(1, 4, False, "etmlir_uk_conv2d_packed_ep", 4),
    "etmlir_uk_conv2d_nchw_fchw_ep": Source(1, 4, True, "etmlir_uk_conv2d_packed_ep", 4),
}


@register_pass("et-cpu-pack-weights", options={
    "panel-width": Option(int, 0, "B-panel columns: the payload's microkernels' (0: the host's)", minimum=0),
    "panel-rows": Option(int, 0, "A-panel rows: the payload's microkernels' (0: the host's)", minimum=0),
    "winograd-min-channels": Option(int, WINOGRAD_MIN_CHANNELS,
                                    "input and output channels a 3x3 stride-1 convolution needs for Winograd F(4x4)",
                                    minimum=1),
    "winograd2-min-channels": Option(int, WINOGRAD_2_CHANNELS, "... and for Winograd F(2x2)", minimum=1),
    "winograd": Option(bool, True, "3x3 stride-1 convolutions through Winograd where they suit (their filters "
                                   "grow 4x for F(4x4), 16/9 for F(2x2))")})
def pack_weights(module: ir.Operation, *, panel_width: int = 0, panel_rows: int = 0,
                 winograd_min_channels: int = WINOGRAD_MIN_CHANNELS,
                 winograd2_min_channels: int = WINOGRAD_2_CHANNELS, winograd: bool = True) -> None:
    """et-cpu-pack-weights: matmuls by a constant B and convolutions by a constant filter read panels packed
    at compile time."""
    if panel_width == 0 or panel_rows == 0:
        from etmlir.backends.cpu import link, target

        rows, width = link.panel_shape(target.host())
        panel_width, panel_rows = panel_width or width, panel_rows or rows
    calls: list[tuple[ir.Operation, Source, ir.Operation]] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "func.call" and ir.FlatSymbolRefAttr(op.attributes["callee"]).value in SOURCES:
            source = SOURCES[ir.FlatSymbolRefAttr(op.attributes["callee"]).value]
            get_global = _constant_global(op.operands[source.weight], source.rank)
            if get_global is not None:
                calls.append((op, source, get_global))
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    if not calls:
        return
    body = module.regions[0].blocks[0]
    globals_ = {ir.StringAttr(op.attributes["sym_name"]).value: op.operation for op in body.operations
                if op.operation.name == "memref.global"}
    blobs: dict[str, bytes] | None = None
    # (old global, layout) -> the global of its packed copy (None: left as it is)
    packed: dict[tuple[str, str], ir.Operation | None] = {}
    kernels: set[str] = set()
    with module.context:
        for call, source, get_global in calls:
            name = ir.FlatSymbolRefAttr(get_global.attributes["name"]).value
            shape = ir.MemRefType(get_global.result.type).shape
            tile = winograd_tile(call, shape, (winograd_min_channels, winograd2_min_channels)) \
                if source.rank == 4 and winograd else 0
            key = (name, f"winograd{tile}" if tile else "panels")
            if key not in packed:
                old = globals_.get(name)
                value = old.attributes["initial_value"] if old is not None and "constant" in old.attributes \
                    and "initial_value" in old.attributes else None
                if value is not None and resource_key(value) is not None and blobs is None:
                    blobs = resource_blobs(module)
                data = global_bytes(value, blobs) if value is not None else None
                weight = None if data is None else np.frombuffer(data, dtype=np.float32).reshape(shape)
                if weight is None:
                    panels = None
                elif tile:
                    panels = winograd_filter(weight, panel_rows, tile)
                else:
                    panels = _panels(weight, panel_width, panel_rows)
                packed[key] = None if panels is None else _new_global(old, f"{name}_{key[1]}", panels)
            if packed[key] is not None:
                _call_packed(call, dataclasses.replace(source, packed=WINOGRAD_KERNEL) if tile else source,
                             packed[key], shape)
                kernels.add(WINOGRAD_KERNEL if tile else source.packed)
        for kernel in sorted(kernels):
            declare_function(module, kernel, _kernel_types(kernel))
        _erase_unread(module, [globals_[n] for n in sorted({n for (n, _), p in packed.items() if p is not None})])


def _constant_global(value: ir.Value, rank: int) -> ir.Operation | None:
    """The memref.get_global `value` is (through casts), if it is a whole static f32 global of `rank`."""
    value = uncast(value)
    if isinstance(value.owner, ir.Block) or value.owner.operation.name != "memref.get_global":
        return None
    owner = value.owner.operation
    t = ir.MemRefType(owner.result.type)
    if t.rank != rank or str(t.element_type) != "f32" or not t.has_static_shape or not identity_layout(t):
        return None
    return owner


def _static_shape(value: ir.Value) -> list[int | None]:
    """The shape of the buffer `value` is a cast of (None for a dynamic dim)."""
    t = ir.MemRefType(uncast(value).type)
    return [t.shape[i] if not t.is_dynamic_dim(i) else None for i in range(t.rank)]


def winograd_tile(call: ir.Operation, shape: list[int],
                  min_channels: tuple[int, int] = (WINOGRAD_MIN_CHANNELS, WINOGRAD_2_CHANNELS)) -> int:
    """The output tile m (4 or 2) a convolution call (filter `shape`) goes through Winograd F(m x m, 3x3)
    with, or 0. It needs a 3x3 window, strides and dilations 1, and then:
    - F(4x4): min_channels[0] channels either side, WINOGRAD_MIN_TILES tiles of 4x4 per image, or down to
      WINOGRAD_4_FEWEST_TILES with twice the channels, and at least WINOGRAD_4_MIN_USE of the tiles'
      outputs real (an output of 13 x 13 computes 16 x 16: 66%);
    - else F(2x2): min_channels[1] channels and WINOGRAD_2_MIN_TILES tiles of 2x2.
    The kernel's time against the direct convolution's, one thread, same channels in and out (AVX-512 /
    AVX2 builds): F(4x4) 0.46 / 0.61 at 256 @ 14x14, 0.77 / 0.95 at 64 @ 14x14, 0.62 / 0.61 at
    256 @ 12x12 (9 tiles); not taken: 1.47 / 1.10 at 32 @ 14x14, 0.98 / 1.07 at 64 @ 13x13, 1.15 / 1.12
    at 256 @ 9x9; 4 tiles (7x7) 1.5-2.4. F(2x2) at 7x7 (16 tiles) was faster alone: 0.92 / 0.75 at 512
    channels, 0.77 / 0.59 at 384, 0.88 / 0.67 at 256 (filter evicted first: 0.85 at 512, 0.96 at 256 on
    AVX-512), but not in ResNet-18, whose last stage streams its filters from memory every run: its
    transformed filters are 16/9 the bytes, and its three 512-channel 7x7 convolutions took 2.3-2.4 ms each
    through F(2x2) against 1.9-2.0 ms direct. The model without them, side by side with it (Intel Xeon,
    AVX-512): 22.7 -> 21.8 ms at 1 thread, 12.5 -> 12.0 ms at 2, and a 78 MB `.pte` instead of 100. So
    F(2x2) needs WINOGRAD_2_MIN_TILES (25, a 9x9 output)."""
    f, c, kh, kw = shape
    if (kh, kw) != (3, 3) or any(constant_int(call.operands[i]) != 1 for i in range(3, 7)):
        return 0
    out = _static_shape(call.operands[2])
    if out[2] is None or out[3] is None:
        return 0
    channels = min(f, c)
    tiles = -(-out[2] // 4) * -(-out[3] // 4)
    if (channels >= min_channels[0] and tiles >= WINOGRAD_4_FEWEST_TILES
            and out[2] * out[3] >= WINOGRAD_4_MIN_USE * 16 * tiles
            and (tiles >= WINOGRAD_MIN_TILES or channels >= 2 * min_channels[0])):
        return 4
    if channels >= min_channels[1] and -(-out[2] // 2) * -(-out[3] // 2) >= WINOGRAD_2_MIN_TILES:
        return 2
    return 0


def _panels(weight: np.ndarray, width: int, rows: int) -> np.ndarray | None:
    """A matmul's B [K, N] as column panels, a convolution's filter as row panels of A = [F, C*KH*KW];
    None when packing would more than double it."""
    if weight.ndim == 2:
        return pack_columns(weight, width) if worth_packing(weight.shape[1], width) else None
    a = weight.reshape(weight.shape[0], -1)
    return pack_rows(a, rows) if worth_packing(a.shape[0], rows) and a.shape[1] > 0 else None


def worth_packing(n: int, panel: int) -> bool:
    """Whether `n` rows or columns are packed into panels of `panel`: their padding at most doubles them."""
    return n > 0 and -(-n // panel) * panel <= 2 * n


def pack_columns(b: np.ndarray, width: int) -> np.ndarray:
    """B [K, N] as [ceil(N / width), K, width]: panel p holds columns [p * width, p * width + width) row by
    row, zeros past N (what `etmlir_uk_matmul_packed_ep` reads)."""
    k, n = b.shape
    count = -(-n // width)
    padded = np.zeros((k, count * width), dtype=np.float32)
    padded[:, :n] = b
    return np.ascontiguousarray(padded.reshape(k, count, width).transpose(1, 0, 2))


def pack_rows(a: np.ndarray, rows: int) -> np.ndarray:
    """A [M, K] as [ceil(M / rows), K, rows]: panel p holds rows [p * rows, p * rows + rows) column by
    column, zeros past M (what `etmlir_uk_conv2d_packed_ep` reads)."""
    return pack_columns(np.ascontiguousarray(a.T), rows)


# Winograd F(m x m, 3x3)'s filter transforms (Lavin and Gray, 2015): U = G g G^T for each 3x3 g.
WINOGRAD_G = {
    2: np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]]),
    4: np.array([[1 / 4, 0.0, 0.0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6], [1 / 24, 1 / 12, 1 / 6],
                 [1 / 24, -1 / 12, 1 / 6], [0.0, 0.0, 1.0]]),
}


def winograd_filter(weight: np.ndarray, rows: int, tile: int = 2) -> np.ndarray:
    """A 3x3 filter [F, C, 3, 3] as `etmlir_uk_conv2d_winograd_ep` reads it for output tiles of
    `tile` x `tile`: U = G g G^T (in float64, rounded once), element e = a i + j of it (a = tile + 2) as
    an [F, C] matrix in row panels (`pack_rows`), the a^2 matrices' panels one after another:
    [a^2 * ceil(F / rows), C, rows]."""
    g = WINOGRAD_G[tile]
    a = tile + 2
    u = np.einsum("ik,fckl,jl->ijfc", g, weight.astype(np.float64), g)
    u = u.reshape(a * a, weight.shape[0], weight.shape[1]).astype(np.float32)
    return np.concatenate([pack_rows(u[e], rows) for e in range(a * a)])


def _new_global(old: ir.Operation, name: str, panels: np.ndarray) -> ir.Operation:
    with old.location, ir.InsertionPoint(old):
        t = ir.MemRefType.get(list(panels.shape), ir.F32Type.get())
        value = ir.DenseElementsAttr.get(panels, type=ir.RankedTensorType.get(list(panels.shape), ir.F32Type.get()))
        return ir.Operation.create("memref.global", attributes={
            "sym_name": ir.StringAttr.get(name), "sym_visibility": ir.StringAttr.get("private"),
            "type": ir.TypeAttr.get(t), "initial_value": value, "constant": ir.UnitAttr.get(),
            "alignment": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), 64)})


def _kernel_types(kernel: str) -> list[ir.Type]:
    i64, f32 = ir.IntegerType.get_signless(64), ir.F32Type.get()
    epilogue = [i64, f32, f32]
    if kernel == "etmlir_uk_matmul_packed_ep":
        return [dynamic_memref(2), dynamic_memref(3), dynamic_memref(2), dynamic_memref(1), dynamic_memref(2), *epilogue]
    if kernel == WINOGRAD_KERNEL:
        return [dynamic_memref(4), dynamic_memref(3), dynamic_memref(4), dynamic_memref(1), dynamic_memref(4),
                *epilogue]
    return [dynamic_memref(4), dynamic_memref(3), dynamic_memref(4), *[i64] * 6, dynamic_memref(1), dynamic_memref(4),
            *epilogue]


def _call_packed(call: ir.Operation, source: Source, panels: ir.Operation, shape: list[int]) -> None:
    """Replace `call` by the packed kernel's, reading the weight from `panels`."""
    i64, f32 = ir.IntegerType.get_signless(64), ir.F32Type.get()
    old_weight = call.operands[source.weight]
    operands = list(call.operands)
    with call.location, ir.InsertionPoint(call):
        weight = ir.Operation.create("memref.get_global", results=[ir.TypeAttr(panels.attributes["type"]).value],
                                     attributes={"name": ir.FlatSymbolRefAttr.get(
                                         ir.StringAttr(panels.attributes["sym_name"]).value)}).result
        operands[source.weight] = cast_dynamic(weight, 3)
        winograd = source.packed == WINOGRAD_KERNEL  # no strides, dilations or window: 3x3, stride 1
        after = 3 + (4 if winograd else source.scalars)  # the operands up to the epilogue's
        window = [] if winograd else [constant(i64, ir.IntegerAttr.get(i64, d)) for d in shape[2:]]
        if winograd:
            operands = operands[:3] + operands[after:]
            after = 3
        if source.epilogue:
            epilogue = operands[after:]
        else:
            epilogue = [no_bias(),
                        operands[2],  # no residual: any memref of the output's rank
                        constant(i64, ir.IntegerAttr.get(i64, 0)),  # accumulate, no bounds
                        constant(f32, ir.FloatAttr.get(f32, 0.0)), constant(f32, ir.FloatAttr.get(f32, 0.0))]
        ir.Operation.create("func.call", operands=operands[:after] + window + epilogue, attributes={
            "callee": ir.FlatSymbolRefAttr.get(source.packed)})
    call.erase()
    while not isinstance(old_weight.owner, ir.Block) and not list(old_weight.uses):
        owner = old_weight.owner.operation
        previous = owner.operands[0] if owner.name == "memref.cast" else None
        owner.erase()
        if previous is None:
            break
        old_weight = previous


def _erase_unread(module: ir.Operation, candidates: list[ir.Operation]) -> None:
    """Erase the globals in `candidates` no memref.get_global reads any more."""
    read: set[str] = set()

    def visit(op: ir.Operation) -> ir.WalkResult:
        if op.name == "memref.get_global":
            read.add(ir.FlatSymbolRefAttr(op.attributes["name"]).value)
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    for op in candidates:
        if ir.StringAttr(op.attributes["sym_name"]).value not in read:
            op.erase()
