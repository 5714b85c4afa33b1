"""Which edge ops the `vulkan` backend compiles: the cpu backend's families, on static f32 shapes.

The kernels come from the same edge -> linalg lowering as the `cpu` backend's,
so the op list is the cpu backend's (convolutions incl. depthwise, matrix
products, normalizations, activations, pooling, views and copies). Two
things differ:

  - every shape is static: a dispatch's workgroup counts and buffer sizes are
    fixed in the payload. Dynamic dims are taken only when the compile spec
    `sizes` lists the sizes they take ("64,256": one dispatch graph per size,
    VULKAN_SIZED_SUPPORT); without it they stay on portable kernels, each with
    its reason in the delegation report;
  - every tensor is f32 (0-d constant Scalar operands aside): the shaders use
    no Float64 or Int64 capability, which many phone GPUs lack.
"""

from __future__ import annotations

from torch_mlir import ir

from etmlir.backends.cpu.support import CPU_OPS, float_tensors
from etmlir.delegation.operator_support import OperatorSupport


def _static_shapes(op: ir.Operation) -> str | None:
    for kind, values in (("operand", op.operands), ("result", op.results)):
        for i, value in enumerate(values):
            if isinstance(value.type, ir.RankedTensorType) and not ir.RankedTensorType(value.type).has_static_shape:
                return (f"{kind} {i} ({value.type}) has a dynamic shape; the vulkan backend compiles static "
                        "shapes (give the sizes it takes: compile_specs={'sizes': '64,256'})")
            # A tensor.cast travels into the delegate with its op: its source would become the input.
            owner = value.owner if kind == "operand" else None
            if owner is not None and not isinstance(owner, ir.Block) and owner.name == "tensor.cast":
                source = owner.operands[0].type
                if isinstance(source, ir.RankedTensorType) and not source.has_static_shape:
                    return (f"operand {i} is a tensor.cast of {source}, a dynamic shape; the vulkan backend "
                            "compiles static shapes")
    return None


def _f32(op: ir.Operation) -> str | None:
    reason = float_tensors(op)
    return reason.replace("the cpu backend", "the vulkan backend") if reason else None


VULKAN_SUPPORT = OperatorSupport(ops=dict(CPU_OPS), max_rank=4, predicates=(_static_shapes, _f32))
# With compile spec `sizes`: dynamic dims too (one dispatch graph per size).
VULKAN_SIZED_SUPPORT = OperatorSupport(ops=dict(CPU_OPS), max_rank=4, predicates=(_f32,))
