"""`to_executorch` and `ExecutorchProgram`: an edge program lowered to a `.pte` the runtime executes.

    edge = etmlir.to_edge(etmlir.export(model, (x,)))
    et = edge.to_executorch(etmlir.ExecutorchConfig(arenas=("fast:64k", "slow")))
    print(et.memory_plan())       # per-arena planned bytes vs. the sum of the tensor sizes
    et.save("model.pte")          # et-inspect model.pte

`to_executorch` runs `et-fold-constants` (unless the config says not to),
`et-to-out-variants`, `et-plan-memory` and `et-verify-memory-plan` on a copy
of the edge module, then serializes it (`etmlir.serialize`). The edge program
is left unchanged. The `.pte` is this process's own: `etmlir.runtime.load(et.buffer)` runs its
native ("cpu") delegates without `allow_native_code` (another process, or `et-run`, needs
`allow_native_code=True` / `--allow-native`, or a signature: `etmlir.devtools.signing`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping

import numpy as np
from torch_mlir import ir

from etmlir import compile_progress, runtime
from etmlir.executable.planner import Plan
from etmlir.executable.serialize import serialize as _serialize
from etmlir.passes.pipeline import PipelineElement, run_pipeline
from etmlir.dialects.etx import method_functions
from etmlir.passes.plan_memory import recorded_plan
from etmlir.program import Program, clone_module


@dataclasses.dataclass(frozen=True)
class ExecutorchConfig:
    """Choices `to_executorch` leaves to the user (et-fold-constants, et-plan-memory and et-emit options).

    arenas:            planned memories, fastest first, as "name[:bytes]" ("fast:64k", "slow");
                       empty means one arena as large as needed
    policy:            which tensors get the bounded arenas: "largest-first" or "smallest-first"
    alignment:         byte alignment of every planned tensor
    alloc_inputs:      plan the inputs' memory (else the caller provides it at run time)
    alloc_outputs:     plan the outputs' memory (else the caller provides it at run time)
    segment_alignment: alignment of the constant and payload segments in the file (mmap pages)
    fold_constants:    evaluate copies, views and arithmetic on weights at compile time
                       (`et-fold-constants`: a linear layer's transposed weight is stored, not
                       recomputed on every execution)
    fold_max_bytes:    leave folds whose result or an operand is larger than this many bytes
                       (the `.pte` stores each folded result)
    runtime_manifest:  the runtime the `.pte` is for: its manifest (an `et-manifest` JSON path, or
                       `etmlir.runtime.manifest()`); the program is checked against it
                       (`etmlir.devtools.check_loadable`) and what that runtime lacks (kernels,
                       dtypes, backends, schema version, CPU features) is reported at export time
    manifest_check:    what a failed check does: "raise" (default: NotLoadableError listing every
                       problem with its method, instruction and source line) or "warn"
    """

    arenas: tuple[str, ...] = ()
    policy: str = "largest-first"
    alignment: int = 16
    alloc_inputs: bool = True
    alloc_outputs: bool = True
    segment_alignment: int = 4096
    fold_constants: bool = True
    fold_max_bytes: int = 64 << 20
    runtime_manifest: "str | os.PathLike[str] | Mapping | None" = None
    manifest_check: str = "raise"

    def plan_options(self) -> str:
        parts = [f"policy={self.policy}", f"alignment={self.alignment}",
                 f"alloc-inputs={str(self.alloc_inputs).lower()}",
                 f"alloc-outputs={str(self.alloc_outputs).lower()}"]
        if self.arenas:
            parts.insert(0, "arenas=" + ",".join(self.arenas))
        return " ".join(parts)


@dataclasses.dataclass
class ExecutorchProgram(Program):
    """The etx module (`.module`) and the `.pte` bytes made from it (`.buffer`)."""

    buffer: bytes = b""
    config: ExecutorchConfig = dataclasses.field(default_factory=ExecutorchConfig)
    # The edge program this one was lowered from (what `etmlir.devtools.compare` runs as the reference);
    # None when the etx module was made some other way.
    edge_program: Program | None = dataclasses.field(default=None, repr=False)

    HISTOGRAM_SKIP = ("etx.const", "etx.none", "etx.list", "etx.alloc", "etx.constant", "etx.input",
                      "etx.output", "func.", "builtin.module")

    def save(self, path: str | os.PathLike[str]) -> None:
        with open(path, "wb") as f:
            f.write(self.buffer)

    def memory_plan(self, method: str = "forward") -> Plan:
        """The memory plan of `method` (print it for the per-arena table)."""
        for func_op in method_functions(self.module.operation):
            if ir.StringAttr(func_op.attributes["etx.method"]).value == method:
                with self.context:
                    return recorded_plan(func_op)[2]
        raise KeyError(f"no method '{method}'")

    def kernel_histogram(self) -> dict[str, int]:
        """How many calls of each kernel the program makes."""
        counts: dict[str, int] = {}
        for func_op in method_functions(self.module.operation):
            for op in func_op.regions[0].blocks[0].operations:
                if op.operation.name == "etx.kernel_call":
                    kernel = ir.StringAttr(op.operation.attributes["kernel"]).value
                    counts[kernel] = counts.get(kernel, 0) + 1
        return counts


def to_executorch(edge_program: Program, config: ExecutorchConfig | None = None, *,
                  runtime_manifest: "str | os.PathLike[str] | Mapping | None" = None) -> ExecutorchProgram:
    """Lower an edge program to the executable level and serialize it (the edge program is unchanged).

    `runtime_manifest` (or `config.runtime_manifest`): raise `NotLoadableError` when that runtime
    could not load or run the result (`config.manifest_check="warn"` warns instead).
    """
    config = config or ExecutorchConfig()
    if runtime_manifest is not None:
        config = dataclasses.replace(config, runtime_manifest=runtime_manifest)
    module = clone_module(edge_program.module)
    passes = [PipelineElement("et-to-out-variants"), PipelineElement("et-plan-memory", config.plan_options()),
              PipelineElement("et-verify-memory-plan")]
    if config.fold_constants:
        passes.insert(0, PipelineElement("et-fold-constants", f"max-bytes={config.fold_max_bytes}"))
    with compile_progress.stage("to_executorch", total=len(passes) + 1) as bar:  # a bar on a terminal
        run_pipeline(module, passes, stage=bar)
        bar.status("serialize")
        with module.context:
            buffer = _serialize(module, edge_program.weight_buffers, config.segment_alignment)
        bar.advance()
    # The user's own program: runtime.load of exactly these bytes runs its native ("cpu") delegates
    # without allow_native_code (runtime/README.md, "Trust and native code").
    runtime._note_compiled(buffer)
    if config.runtime_manifest is not None:
        from etmlir.executable.loadability import raise_if_not_loadable

        raise_if_not_loadable(buffer, config.runtime_manifest, config.manifest_check)
    return ExecutorchProgram(module=module, example_args=edge_program.example_args,
                             dynamic_dims=list(edge_program.dynamic_dims),
                             weight_buffers=edge_program.weight_buffers, buffer=buffer, config=config,
                             edge_program=edge_program)


def serialize(module: ir.Module, weights: Mapping[str, np.ndarray] | None = None,
              segment_alignment: int = 4096) -> bytes:
    """The `.pte` bytes of a planned etx module (`weights`: constant data by `etmlir.param` name,
    else the module's own resource blobs are used)."""
    with module.context:
        return _serialize(module, weights, segment_alignment)
