"""etmlir: an ExecuTorch-style compiler and runtime for PyTorch models, built on MLIR.

    program = etmlir.export(model, (x,))          # ATen level (torch-mlir `torch` dialect)
    program.to_core_aten()                        # et-decompose-to-core-aten + et-verify-core-aten
    edge = etmlir.to_edge(program)                # Edge level (`edge` dialect on builtin tensors)
    print(edge.op_histogram())
    edge = edge.to_backend(etmlir.backends.partitioner("nested"))   # delegate what a backend takes
    et = edge.to_executorch()                     # out variants, memory plan, .pte bytes
    et.save("model.pte")
"""

from etmlir.backends.lowering import LoweredBackendModule, to_backend
from etmlir.edge_program import EdgeCompileConfig, EdgeProgram, TensorSpec, to_edge
from etmlir.executorch_program import ExecutorchConfig, ExecutorchProgram, serialize, to_executorch
from etmlir.frontend import AtenProgram, DynamicDim, export

__all__ = ["AtenProgram", "LoweredBackendModule", "to_backend", "DynamicDim", "EdgeCompileConfig", "EdgeProgram", "ExecutorchConfig", "ExecutorchProgram",
           "TensorSpec", "export", "serialize", "to_edge", "to_executorch"]
