"""What every program stage (`AtenProgram`, `EdgeProgram`, ...) has in common.

A stage owns an MLIR module and the numpy buffers its weights point into
(`dense_resource` attributes reference them, never copy them), plus the
example inputs and dynamic dims later stages need. Printing, op histograms
and running passes work the same way at every level, so they live here once.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np
from torch_mlir import ir

from etmlir.dialects import attrs
from etmlir.executable.io_structure import IOStructure
from etmlir.frontend.literals import tensor_of_array
from etmlir.lazy import lazy_module
from etmlir.passes.pipeline import PipelineElement, run_pipeline

torch = lazy_module("torch")

# A user pass: a function over the module operation (in place).
UserPass = Callable[[ir.Operation], None]


@dataclasses.dataclass(frozen=True)
class DynamicDim:
    """Input `input_index`, dim `dim` varies between `min` and `max` (None: unbounded) at run time."""

    input_index: int
    dim: int
    symbol: str
    min: int
    max: int | None


@dataclasses.dataclass
class Program:
    module: ir.Module
    example_args: tuple[Any, ...]
    dynamic_dims: list[DynamicDim]
    # Weight buffers by fully qualified name. The module's dense_resource
    # attributes point into these arrays, so they live as long as the program.
    weight_buffers: dict[str, np.ndarray] = dataclasses.field(default_factory=dict, repr=False)

    # Ops that only carry structure; histograms leave them out so counts read as computation.
    HISTOGRAM_SKIP: ClassVar[tuple[str, ...]] = ("func.", "builtin.module")

    @property
    def param_names(self) -> list[str]:
        """Fully qualified names of the imported parameters, buffers and constants, in import order."""
        return list(self.weight_buffers)

    @property
    def context(self) -> ir.Context:
        return self.module.context

    @property
    def io_structure(self) -> IOStructure | None:
        """How the model's call nests the flat inputs and outputs (its first function's
        `etmlir.io_structure`; None: flat), see `etmlir.executable.io_structure`."""
        for op in self.module.body.operations:
            op = op.operation
            if op.name == "func.func" and attrs.IO_STRUCTURE in op.attributes:
                return IOStructure.from_json(ir.StringAttr(op.attributes[attrs.IO_STRUCTURE]).value)
        return None

    def mlir(self, debug_info: bool = True, large_elements_limit: int | None = 16) -> str:
        """The module as text, weights elided: element attributes above `large_elements_limit`
        elements and `dense_resource` blobs above that many bytes (None prints all, re-parseable)."""
        return self.module.operation.get_asm(enable_debug_info=debug_info,
                                             large_elements_limit=large_elements_limit,
                                             large_resource_limit=large_elements_limit)

    def __str__(self) -> str:
        return self.mlir(debug_info=False)

    def op_histogram(self) -> collections.Counter[str]:
        """How many of each computational op the module holds (constants and structure left out)."""
        counts: collections.Counter[str] = collections.Counter()

        def visit(op: ir.Operation) -> ir.WalkResult:
            if op.name == "torch.operator":  # ops torch-mlir has no definition for: show which
                counts[f"torch.operator({ir.StringAttr(op.attributes['name']).value})"] += 1
            elif not op.name.startswith(self.HISTOGRAM_SKIP):
                counts[op.name] += 1
            return ir.WalkResult.ADVANCE

        self.module.operation.walk(visit)
        return counts

    def transform(self, passes: str | Sequence[str | PipelineElement | UserPass]) -> "Program":
        """Run passes on this program, in place, and return it.

        `passes` is a pipeline string (`"et-edge-canonicalize,canonicalize"`) or a
        sequence whose items are registered pass flags, `PipelineElement`s, or
        Python callables taking the module operation.
        """
        if isinstance(passes, str):
            run_pipeline(self.module, passes)
            return self
        pending: list[PipelineElement] = []
        for item in passes:
            if callable(item) and not isinstance(item, PipelineElement):
                if pending:
                    run_pipeline(self.module, pending)
                    pending = []
                with self.context:
                    item(self.module.operation)
                    self.module.operation.verify()
            else:
                pending.append(item if isinstance(item, PipelineElement) else PipelineElement(item))
        if pending:
            run_pipeline(self.module, pending)
        return self

    def weights(self) -> dict[str, torch.Tensor]:
        """Parameter and buffer values by fully qualified name (views of the imported buffers;
        bfloat16 ones, held as int16 bits, come back as bfloat16)."""
        return {name: tensor_of_array(buf) for name, buf in self.weight_buffers.items()}



def find_symbol(module: ir.Module | ir.Operation, op_name: str, name: str) -> ir.Operation | None:
    """The `op_name` op named `@name` (its sym_name) directly in `module`'s body (None when there is none)."""
    op = module.operation if isinstance(module, ir.Module) else module
    for child in op.regions[0].blocks[0].operations:
        child = child.operation
        if child.name == op_name and ir.StringAttr(child.attributes["sym_name"]).value == name:
            return child
    return None


def find_function(module: ir.Module | ir.Operation, name: str) -> ir.Operation | None:
    """The `func.func @name` directly in `module`'s body (None when there is none)."""
    return find_symbol(module, "func.func", name)


def clone_module(module: ir.Module) -> ir.Module:
    """A copy of `module`'s body in its context; dense_resource weights stay references to the same buffers."""
    with module.context:
        clone = ir.Module.create(loc=module.operation.location)
        for op in module.body.operations:
            op.operation.clone(ip=ir.InsertionPoint(clone.body))
    return clone
