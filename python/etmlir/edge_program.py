"""`to_edge` and `EdgeProgram`: a model at the Edge level, where users and backend authors work.

    aten = etmlir.export(model, (x,))
    edge = etmlir.to_edge(aten)               # Core ATen -> edge, canonicalized and verified
    print(edge.op_histogram())
    edge.transform([my_pass, "et-edge-canonicalize"])

`to_edge` decomposes to Core ATen when the program is not there yet, runs
`et-to-edge`, then `et-edge-canonicalize` (unless the config says not to),
always `et-edge-verify`, and `et-assign-debug-handles` (the stable op ids that
delegation, the `.pte` and run-time errors refer to). The `AtenProgram` it was given is left unchanged:
the edge module is a new module over the same weight buffers.
"""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING

from torch_mlir import ir

from etmlir import compile_progress
from etmlir.backends.lowering import to_backend_partitioned
from etmlir.dialects.edge import DYNAMIC
from etmlir.executorch_program import ExecutorchConfig, ExecutorchProgram, to_executorch
from etmlir.frontend.aten_program import AtenProgram
from etmlir.frontend.state import state_arguments, state_results
from etmlir.passes.pipeline import PipelineElement, run_pipeline
from etmlir.passes.to_edge import recorded_upper_bounds
from etmlir.program import Program, clone_module

if TYPE_CHECKING:
    from etmlir.delegation.partitioner import Partitioner


@dataclasses.dataclass(frozen=True)
class EdgeCompileConfig:
    """Choices `to_edge` leaves to the user.

    canonicalize: fold no-op copies and remove dead/duplicate ops after conversion
                  (`et-edge-canonicalize`); turn off to see exactly what et-to-edge made.
    keep:         ATen ops outside Core ATen to leave whole, for a backend that runs them as
                  one kernel: `etmlir.backends.partitioner("cpu").ops_to_keep()` (its fused
                  attention kernel takes `aten.scaled_dot_product_attention`). A kept op must
                  then be delegated: no portable kernel runs it (`to_executorch` says which
                  one was not). Only ops the edge dialect declares can be kept.
    """

    canonicalize: bool = True
    keep: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """One input or output of the program: sizes (None where dynamic), upper bounds and element type."""

    sizes: tuple[int | None, ...]
    upper_bounds: tuple[int | None, ...]
    dtype: str  # edge element type: f32, i64, i1, ...


@dataclasses.dataclass
class EdgeProgram(Program):
    HISTOGRAM_SKIP = ("edge.constant", "func.", "builtin.module")

    def to_backend(self, partitioner: "Partitioner") -> "EdgeProgram":
        """Delegate the ops `partitioner` tags to its backend (a new program; see `etmlir.backends`).

            edge = edge.to_backend(etmlir.backends.partitioner("nested", skip_ops=["edge.embedding"]))
        """
        return to_backend_partitioned(self, partitioner)

    def to_executorch(self, config: "ExecutorchConfig | None" = None, *,
                      runtime_manifest: "str | os.PathLike[str] | dict | None" = None) -> "ExecutorchProgram":
        """Out variants, memory planning and serialization: the `.pte` (see `etmlir.executorch_program`).

        runtime_manifest: raise NotLoadableError when that runtime lacks what the `.pte` needs.
        """
        return to_executorch(self, config, runtime_manifest=runtime_manifest)

    @property
    def function(self) -> ir.Operation:
        return next(op.operation for op in self.module.body.operations if op.operation.name == "func.func")

    @property
    def inputs(self) -> list[TensorSpec]:
        """The forward function's inputs, with dynamic dims bounded as `export` declared them
        (program state, which the method keeps itself, left out)."""
        ftype = ir.FunctionType(ir.TypeAttr(self.function.attributes["function_type"]).value)
        state = state_arguments(self.function)
        specs = []
        for index, t in enumerate(ftype.inputs):
            if index in state:
                continue
            bounds = {d.dim: d.max for d in self.dynamic_dims if d.input_index == index}
            specs.append(_spec(t, [bounds.get(i) for i in range(ir.RankedTensorType(t).rank)]))
        return specs

    @property
    def outputs(self) -> list[TensorSpec]:
        """The forward function's results, with upper bounds from their producers' `etmlir.upper_bounds`
        (state updates left out)."""
        ret = self.function.regions[0].blocks[0].operations[-1]  # func.return
        state = state_results(self.function)
        specs = []
        for index, value in enumerate(ret.operands):
            if index in state:
                continue
            bounds: list[int | None] = [None] * ir.RankedTensorType(value.type).rank
            recorded = (recorded_upper_bounds(value.owner, ir.OpResult(value).result_number)
                        if isinstance(value.owner, (ir.Operation, ir.OpView)) else None)
            if recorded is not None:
                bounds = [None if b == DYNAMIC else b for b in recorded]
            specs.append(_spec(value.type, bounds))
        return specs

    @property
    def state_names(self) -> list[str]:
        """The program state (buffers forward mutates, by fully qualified name; see `frontend/state.py`)."""
        return list(state_arguments(self.function).values())


def _spec(t: ir.Type, bounds: list[int | None]) -> TensorSpec:
    tensor = ir.RankedTensorType(t)
    sizes = tuple(None if tensor.is_dynamic_dim(i) else tensor.shape[i] for i in range(tensor.rank))
    upper = tuple(s if s is not None else b for s, b in zip(sizes, bounds))
    return TensorSpec(sizes, upper, str(tensor.element_type))


def to_edge(aten_program: AtenProgram, compile_config: EdgeCompileConfig | None = None) -> EdgeProgram:
    """Lower an exported program to the Edge level (a new program; `aten_program` is unchanged)."""
    config = compile_config or EdgeCompileConfig()
    module = clone_module(aten_program.module)
    keep = "keep=" + ",".join(config.keep) if config.keep else ""
    passes = [PipelineElement("et-decompose-to-core-aten", keep), PipelineElement("et-verify-core-aten", keep),
              PipelineElement("et-to-edge")]
    if config.canonicalize:
        passes.append(PipelineElement("et-edge-canonicalize"))
    # Calls of lowered modules (composition) are linked before handles are given, so the
    # outer ops' handles start above the delegates'.
    passes += [PipelineElement("et-edge-verify"), PipelineElement("et-link-lowered-modules"),
               PipelineElement("et-assign-debug-handles")]
    with compile_progress.stage("to_edge", total=len(passes)) as bar:  # a bar on a terminal
        run_pipeline(module, passes, stage=bar)
    return EdgeProgram(module=module, example_args=aten_program.example_args,
                       dynamic_dims=list(aten_program.dynamic_dims), weight_buffers=aten_program.weight_buffers)
