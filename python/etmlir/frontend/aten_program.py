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

import collections
import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch_mlir import ir

from etmlir.passes.pipeline import PipelineElement, run_pipeline

# Ops that only carry structure; histograms leave them out so counts read as computation.
_HISTOGRAM_SKIP = ("torch.constant.", "torch.prim.ListConstruct", "func.", "builtin.module",
                   "torch.symbolic_int", "torch.bind_symbolic_shape")


@dataclasses.dataclass(frozen=True)
class DynamicDim:
    """Input `input_index`, dim `dim` varies between `min` and `max` (None: unbounded) at run time."""

    input_index: int
    dim: int
    symbol: str
    min: int
    max: int | None


@dataclasses.dataclass
class AtenProgram:
    module: ir.Module
    example_args: tuple[Any, ...]
    dynamic_dims: list[DynamicDim]
    # Weight buffers by fully qualified name. The module's dense_resource
    # attributes point into these arrays, so they live as long as the program.
    weight_buffers: dict[str, np.ndarray] = dataclasses.field(default_factory=dict, repr=False)

    @property
    def param_names(self) -> list[str]:
        """Fully qualified names of the imported parameters, buffers and constants, in import order."""
        return list(self.weight_buffers)

    @property
    def context(self) -> ir.Context:
        return self.module.context

    def mlir(self, debug_info: bool = True, large_elements_limit: int | None = 16) -> str:
        """The module as text (weights elided above `large_elements_limit` elements; None prints all)."""
        return self.module.operation.get_asm(enable_debug_info=debug_info,
                                             large_elements_limit=large_elements_limit)

    def __str__(self) -> str:
        return self.mlir(debug_info=False)

    def op_histogram(self) -> collections.Counter[str]:
        """How many of each computational op the module holds (constants and lists left out)."""
        counts: collections.Counter[str] = collections.Counter()

        def visit(op: ir.Operation) -> ir.WalkResult:
            if op.name == "torch.operator":  # ops torch-mlir has no definition for: show which
                counts[f"torch.operator({ir.StringAttr(op.attributes['name']).value})"] += 1
            elif not op.name.startswith(_HISTOGRAM_SKIP):
                counts[op.name] += 1
            return ir.WalkResult.ADVANCE

        self.module.operation.walk(visit)
        return counts

    def transform(self, passes: str | Sequence[str | PipelineElement]) -> "AtenProgram":
        """Run passes (a pipeline string, or pass flags in order) on this program, in place."""
        if not isinstance(passes, str):
            passes = [p if isinstance(p, PipelineElement) else PipelineElement(p) for p in passes]
        run_pipeline(self.module, passes)
        return self

    def to_core_aten(self, keep: Sequence[str] = ()) -> "AtenProgram":
        """Decompose to Core ATen (`et-decompose-to-core-aten`) and verify it, in place."""
        options = "keep=" + ",".join(keep) if keep else ""
        return self.transform([PipelineElement("et-decompose-to-core-aten", options),
                               PipelineElement("et-verify-core-aten", options)])

    def weights(self) -> dict[str, torch.Tensor]:
        """Parameter and buffer values by fully qualified name (views of the imported buffers)."""
        return {name: torch.from_numpy(buf) for name, buf in self.weight_buffers.items()}
