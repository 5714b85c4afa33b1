"""et-cpu-bufferize: tensors -> memrefs, results as out-parameters (destination-passing style).

One-shot bufferization over function boundaries; `buffer-results-to-out-params`
turns every result into an argument the caller (the runtime) passes, so the
code writes straight into the delegate's output tensors; the entry points get
`llvm.emit_c_interface` (the runtime calls `_mlir_ciface_forward`).

    func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32>
becomes
    func.func @forward(%x: memref<4xf32>, %out: memref<4xf32>) attributes {llvm.emit_c_interface}
"""

from __future__ import annotations

from torch_mlir import ir

from etmlir.backends.cpu.ir_util import ENTRY, SHAPES_ENTRY, run
from etmlir.passes.registry import register_pass
from etmlir.program import find_function

BUFFERIZE = (
    "builtin.module(one-shot-bufferize{bufferize-function-boundaries=1 "
    "function-boundary-type-conversion=identity-layout-map},"
    "buffer-results-to-out-params{hoist-static-allocs=1 modify-public-functions=1},"
    "canonicalize,cse,buffer-deallocation-pipeline,func.func(refback-munge-memref-copy))"
)


@register_pass("et-cpu-bufferize")
def bufferize(module: ir.Operation) -> None:
    """et-cpu-bufferize: bufferize into destination-passing style; entry points get a C interface."""
    for name in (ENTRY, SHAPES_ENTRY):
        func = find_function(module, name)
        if func is not None:
            func.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
    run(module, BUFFERIZE)
