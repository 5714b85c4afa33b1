"""`AtenProgram`: an exported model at the ATen level (torch-mlir's `torch` dialect).

It owns the MLIR module and everything the module points at: the numpy
buffers its weights are read from (the module references them, it does not
copy them), the fully qualified parameter names, the dynamic dims with their
bounds and the example inputs later stages use as a signature.

Parameter names also live in the IR, on each weight literal
(`{etmlir.param = "features.0.0.weight"}`), and dim bounds on the function
arguments (`{etmlir.dynamic_dims = {"1" = {max = 64, min = 2, symbol = "s0"}}}`),
so a stage that only sees the module (et-opt on a `.mlir` file) finds them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from etmlir.passes.pipeline import PipelineElement
from etmlir.program import DynamicDim, Program

__all__ = ["AtenProgram", "DynamicDim"]


@dataclasses.dataclass
class AtenProgram(Program):
    HISTOGRAM_SKIP = ("torch.constant.", "torch.prim.ListConstruct", "func.", "builtin.module",
                      "torch.symbolic_int", "torch.bind_symbolic_shape")

    def to_core_aten(self, keep: Sequence[str] = ()) -> "AtenProgram":
        """Decompose to Core ATen (`et-decompose-to-core-aten`) and verify it, in place."""
        options = "keep=" + ",".join(keep) if keep else ""
        self.transform([PipelineElement("et-decompose-to-core-aten", options),
                        PipelineElement("et-verify-core-aten", options)])
        return self
