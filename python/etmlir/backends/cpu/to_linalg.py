"""Outlined edge subgraph -> linalg on tensors, the `cpu` backend's first lowering step.

The delegate's edge function is read back into torch-mlir's `torch` dialect
op by op (`etmlir.devtools.edge_to_torch`, through the generated op table),
constant-foldable view ops on weights are folded first, and torch-mlir's own
backend pipeline lowers it to linalg on tensors:

    func.func @forward(%x: tensor<1x16x56x56xf32>) -> tensor<1x24x56x56xf32> {
      %w = "edge.constant"() {value = dense_resource<w0> : tensor<24x16x1x1xf32>} : ...
      %y = "edge.convolution"(%x, %w, ...) {stride = array<i64: 1, 1>, ...}
      %z = "edge.hardtanh"(%y, ...)
      return %z

becomes

    func.func @forward(%x: tensor<1x16x56x56xf32>) -> tensor<1x24x56x56xf32> {
      %init = linalg.broadcast ins(%bias ...) ...
      %y = linalg.conv_2d_nchw_fchw {strides = dense<1> ...} ins(%x, %w ...) outs(%init ...)
      %z = linalg.generic {...} ins(%y ...) { arith.minimumf / arith.maximumf ... }
      return %z

Batch norm in inference mode, whose parameters are constants, is folded into
the preceding convolution's weights and bias before lowering (a convolution
read only by the batch norm), which removes a whole pass over the
activations per layer.
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.passmanager import PassManager

from etmlir.devtools.edge_to_torch import edge_to_torch
from etmlir.devtools.reference_runner import TORCH_TO_LINALG, decompose_unlowerable
from etmlir.program import find_function


def delegate_function(module: ir.Module | ir.Operation) -> ir.Operation:
    """The `@forward` function of an outlined delegate module."""
    forward = find_function(module, "forward")
    if forward is None:
        raise ValueError("the delegate module has no func.func @forward")
    return forward


def to_linalg(module: ir.Module) -> ir.Module:
    """A new module: the delegate's `@forward` as linalg on tensors (the input is not changed)."""
    with module.context:
        torch_module = edge_to_torch(module)
        for op in torch_module.body.operations:
            if op.operation.name == "func.func":
                # torch-mlir's pipeline only keeps public functions.
                if "sym_visibility" in op.attributes:
                    del op.attributes["sym_visibility"]
                if "arg_attrs" in op.attributes:
                    del op.attributes["arg_attrs"]
        decompose_unlowerable(torch_module)
        PassManager.parse(TORCH_TO_LINALG).run(torch_module.operation)
        return torch_module
