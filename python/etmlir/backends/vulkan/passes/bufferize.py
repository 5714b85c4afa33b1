"""et-vulkan-bufferize: tensors -> memrefs, results as out-parameters (destination-passing style).

The same one-shot bufferization the `cpu` backend runs (et-cpu-bufferize), without
the C interface: the host function that remains is a list of buffers and of the
linalg ops between them, which et-vulkan-outline-kernels turns into dispatches.

    func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32>
becomes
    func.func @forward(%x: memref<4xf32>, %out: memref<4xf32>)
"""

from __future__ import annotations

from torch_mlir import ir

from etmlir.backends.cpu.ir_util import run
from etmlir.backends.cpu.passes.bufferize import BUFFERIZE
from etmlir.passes.registry import register_pass


@register_pass("et-vulkan-bufferize")
def bufferize(module: ir.Operation) -> None:
    """et-vulkan-bufferize: bufferize into destination-passing style (results become out-parameters)."""
    run(module, BUFFERIZE)
