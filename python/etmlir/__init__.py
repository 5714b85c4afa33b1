"""etmlir: an ExecuTorch-style compiler and runtime for PyTorch models, built on MLIR.

    program = etmlir.export(model, (x,))          # ATen level (torch-mlir `torch` dialect)
    program.to_core_aten()                        # et-decompose-to-core-aten + et-verify-core-aten
    print(program.op_histogram())
"""

from etmlir.frontend import AtenProgram, DynamicDim, export

__all__ = ["AtenProgram", "DynamicDim", "export"]
