"""The frontend: torch.export in, ATen-level MLIR (torch-mlir's `torch` dialect) out."""

from etmlir.frontend.aten_program import AtenProgram, DynamicDim
from etmlir.frontend.export import export

__all__ = ["AtenProgram", "DynamicDim", "export"]
