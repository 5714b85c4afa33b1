"""et-cpu-to-llvm: loops, vectors, memrefs, arith and math -> the LLVM dialect.

Linalg ops left after `et-cpu-microkernels` become loops; memref allocations
go through the payload's arena allocator (`finalize-memref-to-llvm` with
`use-generic-functions`: `_mlir_memref_to_llvm_alloc`, defined in
runtime/backends/cpu/payload_c/shim.c). MLIR's ExecutionEngine then compiles
the result for this machine (`etmlir.backends.cpu.pipeline`).

    func.func @forward(%x: memref<4xf32>, %out: memref<4xf32>)
becomes
    llvm.func @forward(%arg0: !llvm.ptr, %arg1: !llvm.ptr, %arg2: i64, ...)
"""

from __future__ import annotations

from torch_mlir import ir

from etmlir.backends.cpu.ir_util import run
from etmlir.passes.registry import register_pass

TO_LLVM = (
    "builtin.module(func.func(convert-linalg-to-loops,refback-expand-ops-for-llvm),"
    "convert-vector-to-scf{full-unroll=1},expand-strided-metadata,lower-affine,convert-scf-to-cf,"
    "convert-vector-to-llvm,finalize-memref-to-llvm{use-generic-functions=1},convert-math-to-llvm,"
    "convert-arith-to-llvm,convert-index-to-llvm,convert-cf-to-llvm,convert-func-to-llvm,"
    "convert-ub-to-llvm,reconcile-unrealized-casts)"
)


@register_pass("et-cpu-to-llvm")
def to_llvm(module: ir.Operation) -> None:
    """et-cpu-to-llvm: lower the bufferized module to the LLVM dialect (allocations through the payload's arena)."""
    run(module, TO_LLVM)
