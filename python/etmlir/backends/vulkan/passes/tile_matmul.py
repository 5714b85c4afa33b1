"""et-vulkan-tile-matmul: matrix products and convolutions as tiled kernels staging operands in shared memory.

A kernel holding one `linalg.matmul` (C += A B) or `linalg.batch_matmul`
becomes the classic tiled product: a workgroup of TILE x TILE threads owns a
TILE x TILE block of C; for each step along K, every thread loads DEPTH
elements of A's TILE x (TILE * DEPTH) slice and DEPTH of B's into workgroup
(shared) memory, the workgroup synchronizes, and each thread accumulates its
row of the A slice times its column of the B slice from there, so each
element of A and B is read from device memory N/TILE and M/TILE times
instead of N and M times, with one barrier pair per TILE * DEPTH of K. Edges
are guarded (out-of-range loads read 0). The grid is (ceil(N/TILE),
ceil(M/TILE), batch).

A `linalg.conv_2d_nchw_fchw` (input already padded) is the same product
without materialising im2col ("implicit GEMM"): rows are output channels F,
columns the N x OH x OW output pixels, and the reduction runs over C x KH x KW;
each thread works out which weight and which input pixel its tile element is
from the indices (strides and dilations included) as it loads it. Depthwise
and grouped convolutions (no reduction over channels to share) and products
the pass does not recognise (custom indexing maps, non-f32) are left to
et-vulkan-map-threads.

    gpu.func @k1(%a0: memref<4x16xf32>, %a1: memref<16x32xf32>, %a2: memref<4x32xf32>) kernel {
      linalg.matmul ins(%a0, %a1 : ...) outs(%a2 : ...)
becomes
    gpu.func @k1(...) kernel attributes {spirv.entry_point_abi = #spirv.entry_point_abi<workgroup_size = [16, 16, 1]>} {
      %as = memref.alloc() : memref<16x16xf32, #spirv.storage_class<Workgroup>>     (and %bs; K = 16: depth 1)
      %acc = scf.for %kt = %c0 to %c1 step %c1 iter_args(%s = %zero) -> (f32) {
        ... memref.store %a, %as[%ty, %tx] ... gpu.barrier ... scf.for %kk ... gpu.barrier
      }
      ... memref.store (C + %acc), %a2[%row, %col]
    gpu.launch_func @k1::@k1 blocks in (%c2, %c1, %c1) threads in (%c16, %c16, %c1) ...
"""

from __future__ import annotations

import math

from torch_mlir import ir

from etmlir.backends.vulkan.passes.map_threads import ENTRY_POINT_ABI
from etmlir.backends.vulkan.passes.outline_kernels import kernels, launches, set_launch_sizes
from etmlir.passes.registry import Option, register_pass

TILE = 16  # the default tile edge: 16 x 16 = 256 threads per workgroup
PRODUCTS = ("linalg.matmul", "linalg.batch_matmul", "linalg.conv_2d_nchw_fchw")
# The indexing maps of a plain product (C[m, n] += A[m, k] B[k, n], with a leading batch dim for batch_matmul).
DEFAULT_MAPS = {
    "linalg.matmul": "[affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, "
                     "affine_map<(d0, d1, d2) -> (d0, d1)>]",
    "linalg.batch_matmul": "[affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>, affine_map<(d0, d1, d2, d3) -> "
                           "(d0, d3, d2)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>]",
}


def _product(kernel: ir.Operation) -> ir.Operation | None:
    """The kernel's only op (besides its return), if it is a product this pass tiles."""
    ops = [op.operation for op in kernel.regions[0].blocks[0].operations]
    if len(ops) != 2 or ops[0].name not in PRODUCTS:
        return None
    if ops[0].name in DEFAULT_MAPS and "indexing_maps" in ops[0].attributes and \
            str(ops[0].attributes["indexing_maps"]) != DEFAULT_MAPS[ops[0].name]:
        return None  # a transposed operand
    product = ops[0]
    types = [ir.MemRefType(v.type) for v in product.operands]
    if len(types) != 3 or any(str(t.element_type) != "f32" or not t.has_static_shape for t in types):
        return None
    arguments = list(kernel.regions[0].blocks[0].arguments)
    if any(v not in arguments for v in product.operands):
        return None
    return product


DEPTH = 4  # K-steps of `tile` loaded per barrier pair: a tile x (tile * DEPTH) slice of A, its transpose of B


def _deepen(block: str, depth: int) -> str:
    """The load block of one tile x tile step, `depth` times: copy j renames every value it defines (suffix
    _j), starts its K index at %k0 + j * tile (%k0_j) and stores at column (A) or row (B) j * tile + thread."""
    import re
    defined = re.findall(r"(%[a-z_0-9]+) =", block)
    copies = []
    for j in range(depth):
        text = block
        for name in sorted(defined, key=len, reverse=True):
            text = re.sub(re.escape(name) + r"\b", f"{name}_{j}", text)
        text = text.replace("%k0,", f"%k0_{j},").replace("%as[%ty, %tx]", f"%as[%ty, %txj_{j}]")
        text = text.replace("%bs[%ty, %tx]", f"%bs[%tyj_{j}, %tx]")
        head = (f"    %k0_{j} = arith.addi %k0, %cj_{j} : index\n"
                f"    %txj_{j} = arith.addi %tx, %cj_{j} : index\n"
                f"    %tyj_{j} = arith.addi %ty, %cj_{j} : index\n")
        copies.append(head + text)
    return "".join(copies)


def _depth_constants(tile: int, depth: int) -> str:
    return "".join(f"  %cj_{j} = arith.constant {j * tile} : index\n" for j in range(depth))


def _tile_step(shared: str) -> str:
    """The end of one step along K, the same for every tiled kernel: wait for the tiles, accumulate this
    thread's row of A's tile times its column of B's, wait again before the next step overwrites them."""
    a_shared, b_shared = shared
    return f"""    gpu.barrier
    %s2 = scf.for %kk = %c0 to %cdepth step %c1 iter_args(%t = %s) -> (f32) {{
      %xa = memref.load %as[%ty, %kk] : {a_shared}
      %xb = memref.load %bs[%kk, %tx] : {b_shared}
      %pr = arith.mulf %xa, %xb : f32
      %t2 = arith.addf %t, %pr : f32
      scf.yield %t2 : f32
    }}
    gpu.barrier
    scf.yield %s2 : f32
  }}"""


def _pair(op: ir.Operation, name: str) -> tuple[int, int]:
    if name not in op.attributes:
        return (1, 1)
    values = [int(v) for v in ir.DenseIntElementsAttr(op.attributes[name])]
    return (values[0], values[-1])


def _tiled_kernel(name: str, kernel: ir.Operation, tile: int, m: int, n: int, k: int, *, constants: str,
                  prologue: str, load_a: str, load_b: str, c_ref: str) -> str:
    """The tiled product C[row, col] += sum over K of A[row, k] B[k, col], M x N x K, shared by every
    kernel this pass writes. What differs is said in text:
      constants  extra index constants (the convolution's shape)
      prologue   what each thread derives from %row / %col once (a convolution's output pixel)
      load_a     defines %v, A's element at (%row, %ka)
      load_b     defines %v, B's element at (%kb, %col)
      c_ref      `%aI[indices] : type`, C's element at (%row, %col)"""
    arguments = list(kernel.regions[0].blocks[0].arguments)
    signature = ", ".join(f"%a{i}: {v.type}" for i, v in enumerate(arguments))
    # Workgroup memory as memref.alloc in SPIR-V's Workgroup storage class: MemRefToSPIRV makes it a
    # Workgroup spirv.GlobalVariable (gpu.func workgroup attributions crash convert-gpu-to-spirv in the
    # MLIR of the pinned torch-mlir wheel).
    depth = max(1, min(DEPTH, math.ceil(k / tile)))  # no deeper than K needs
    a_shared = f"memref<{tile}x{tile * depth}xf32, #spirv.storage_class<Workgroup>>"
    b_shared = f"memref<{tile * depth}x{tile}xf32, #spirv.storage_class<Workgroup>>"
    head = f"""
gpu.func @{name}({signature}) kernel
    attributes {{{ENTRY_POINT_ABI} = #spirv.entry_point_abi<workgroup_size = [{tile}, {tile}, 1]>}} {{
  %as = memref.alloc() : {a_shared}
  %bs = memref.alloc() : {b_shared}
  %cdepth = arith.constant {tile * depth} : index
{_depth_constants(tile, depth)}
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %ct = arith.constant {tile} : index
  %cm = arith.constant {m} : index
  %cn = arith.constant {n} : index
  %ck = arith.constant {k} : index
{constants}  %steps = arith.constant {math.ceil(k / (tile * depth))} : index
  %zero = arith.constant 0.0 : f32
  %tx = gpu.thread_id x
  %ty = gpu.thread_id y
  %bx = gpu.block_id x
  %by = gpu.block_id y
  %bz = gpu.block_id z
  %row0 = arith.muli %by, %ct : index
  %row = arith.addi %row0, %ty : index
  %col0 = arith.muli %bx, %ct : index
  %col = arith.addi %col0, %tx : index
  %row_ok = arith.cmpi ult, %row, %cm : index
  %col_ok = arith.cmpi ult, %col, %cn : index
{prologue}  %acc = scf.for %kt = %c0 to %steps step %c1 iter_args(%s = %zero) -> (f32) {{
    %k0 = arith.muli %kt, %cdepth : index
"""
    block = f"""    %ka = arith.addi %k0, %tx : index
    %ka_ok = arith.cmpi ult, %ka, %ck : index
    %a_ok = arith.andi %row_ok, %ka_ok : i1
    %av = scf.if %a_ok -> (f32) {{
{load_a}      scf.yield %v : f32
    }} else {{
      scf.yield %zero : f32
    }}
    memref.store %av, %as[%ty, %tx] : {a_shared}
    %kb = arith.addi %k0, %ty : index
    %kb_ok = arith.cmpi ult, %kb, %ck : index
    %b_ok = arith.andi %kb_ok, %col_ok : i1
    %bv = scf.if %b_ok -> (f32) {{
{load_b}      scf.yield %v : f32
    }} else {{
      scf.yield %zero : f32
    }}
    memref.store %bv, %bs[%ty, %tx] : {b_shared}
"""
    c_at, c_type = c_ref.split(" : ")
    tail = f"""{_tile_step((a_shared, b_shared))}
  %ok = arith.andi %row_ok, %col_ok : i1
  scf.if %ok {{
    %old = memref.load {c_at} : {c_type}
    %sum = arith.addf %old, %acc : f32
    memref.store %sum, {c_at} : {c_type}
  }}
  gpu.return
}}"""
    return head + _deepen(block, depth) + tail


def _conv_kernel_text(name: str, kernel: ir.Operation, conv: ir.Operation, tile: int
                      ) -> tuple[str, tuple[int, int, int]]:
    """Implicit GEMM: C[b, f, oh, ow] += sum over (c, kh, kw) of W[f, c, kh, kw] X[b, c, oh*sh + kh*dh, ow*sw + kw*dw]."""
    arguments = list(kernel.regions[0].blocks[0].arguments)
    x, w, y = (arguments.index(v) for v in conv.operands)
    x_type, w_type, y_type = (ir.MemRefType(v.type) for v in conv.operands)
    batch, f, oh, ow = y_type.shape
    c, kh, kw = w_type.shape[1], w_type.shape[2], w_type.shape[3]
    (sh, sw), (dh, dw) = _pair(conv, "strides"), _pair(conv, "dilations")
    m, n, k = f, batch * oh * ow, c * kh * kw
    constants = "".join(f"  %{name_} = arith.constant {value} : index\n" for name_, value in (
        ("ckk", kh * kw), ("ckw", kw), ("cpix", oh * ow), ("cow", ow), ("csh", sh), ("csw", sw), ("cdh", dh),
        ("cdw", dw)))
    prologue = """  %nb = arith.divui %col, %cpix : index
  %p = arith.remui %col, %cpix : index
  %poh = arith.divui %p, %cow : index
  %pow = arith.remui %p, %cow : index
  %ih0 = arith.muli %poh, %csh : index
  %iw0 = arith.muli %pow, %csw : index
"""
    load_a = f"""      %ac = arith.divui %ka, %ckk : index
      %ar = arith.remui %ka, %ckk : index
      %akh = arith.divui %ar, %ckw : index
      %akw = arith.remui %ar, %ckw : index
      %v = memref.load %a{w}[%row, %ac, %akh, %akw] : {w_type}
"""
    load_b = f"""      %bc = arith.divui %kb, %ckk : index
      %br = arith.remui %kb, %ckk : index
      %bkh = arith.divui %br, %ckw : index
      %bkw = arith.remui %br, %ckw : index
      %dkh = arith.muli %bkh, %cdh : index
      %dkw = arith.muli %bkw, %cdw : index
      %ih = arith.addi %ih0, %dkh : index
      %iw = arith.addi %iw0, %dkw : index
      %v = memref.load %a{x}[%nb, %bc, %ih, %iw] : {x_type}
"""
    text = _tiled_kernel(name, kernel, tile, m, n, k, constants=constants, prologue=prologue, load_a=load_a,
                         load_b=load_b, c_ref=f"%a{y}[%nb, %row, %poh, %pow] : {y_type}")
    return text, (math.ceil(n / tile), math.ceil(m / tile), 1)


def _kernel_text(name: str, kernel: ir.Operation, product: ir.Operation, tile: int
                 ) -> tuple[str, tuple[int, int, int]]:
    if product.name == "linalg.conv_2d_nchw_fchw":
        return _conv_kernel_text(name, kernel, product, tile)
    arguments = list(kernel.regions[0].blocks[0].arguments)
    a, b, c = (arguments.index(v) for v in product.operands)
    a_type, b_type, c_type = (ir.MemRefType(v.type) for v in product.operands)
    batched = product.name == "linalg.batch_matmul"
    batch = c_type.shape[0] if batched else 1
    m, n = c_type.shape[-2], c_type.shape[-1]
    k = a_type.shape[-1]
    z = "%bz, " if batched else ""
    text = _tiled_kernel(name, kernel, tile, m, n, k, constants="", prologue="",
                         load_a=f"      %v = memref.load %a{a}[{z}%row, %ka] : {a_type}\n",
                         load_b=f"      %v = memref.load %a{b}[{z}%kb, %col] : {b_type}\n",
                         c_ref=f"%a{c}[{z}%row, %col] : {c_type}")
    return text, (math.ceil(n / tile), math.ceil(m / tile), batch)


@register_pass("et-vulkan-tile-matmul", options={
    "tile": Option(int, TILE, "tile edge: a workgroup of tile x tile threads computes a tile x tile block",
                   minimum=1, maximum=32)})
def tile_matmul(module: ir.Operation, *, tile: int = TILE) -> None:
    """et-vulkan-tile-matmul: matmul / batch_matmul kernels as shared-memory tiled products."""
    launch_of = launches(module)
    for kernel_module, kernel in kernels(module):
        product = _product(kernel)
        if product is None or ENTRY_POINT_ABI in kernel.attributes:
            continue
        name = ir.StringAttr(kernel.attributes["sym_name"]).value
        text, grid = _kernel_text(name, kernel, product, tile)
        parsed = ir.Module.parse(f"gpu.module @tmp {{{text}}}")
        tiled = list(list(parsed.body.operations)[0].operation.regions[0].blocks[0].operations)[0].operation
        tiled.move_before(kernel)
        kernel.erase()
        tiled.attributes["etmlir.tiled"] = ir.StringAttr.get(f"{tile}x{tile}")
        module_name = ir.StringAttr(kernel_module.attributes["sym_name"]).value
        if module_name in launch_of:
            set_launch_sizes(launch_of[module_name], grid, (tile, tile, 1))
