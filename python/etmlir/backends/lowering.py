"""`to_backend`: the three delegation workflows.

    # 1. Partial: a partitioner picks ops; the rest stays on portable kernels.
    edge = edge.to_backend(etmlir.backends.partitioner("nested"))
    # 2. Whole program: every op in one delegate.
    lowered = etmlir.to_backend("nested", edge, {"fold_constants": "true"})
    lowered.to_executorch().save("whole.pte")
    # 3. Composition: a lowered module is an nn.Module another model calls.
    class Outer(nn.Module):
        def __init__(self): super().__init__(); self.inner = lowered
        def forward(self, x): return self.inner(torch.relu(x)) * 2
    edge = etmlir.to_edge(etmlir.export(Outer(), (x,)))    # the call is a delegate call

Each returns a new program; the one given is left unchanged. Under the hood
they run the delegation passes: et-partition (workflow 1) or tagging every op
(workflow 2), then et-outline-delegates and et-preprocess-delegates.

Composition works through PyTorch's custom-op machinery: each lowered module
is registered as an operator `etmlir_lowered::m<n>` whose eager kernel runs
the lowered program on etmlir's runtime and whose fake kernel gives the
output shapes, so `torch.export` records one call. `to_edge` then links the
call to the lowered module's compiled delegate (`et-link-lowered-modules`)
before debug handles are given, so handles stay unique.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import torch
from torch_mlir import ir

from etmlir import compile_progress, runtime
from etmlir.delegation.backend import get_backend
from etmlir.delegation.lowered import LOWERED_NAMESPACE, add_lowered_module, lowered_module
from etmlir.delegation.operator_support import FREE_OPS
from etmlir.delegation.partitioner import PartitionResult, Partitioner, first_free_number
from etmlir.dialects import attrs
from etmlir.passes.edge_to_torch import torch_dtype
from etmlir.passes.pipeline import PipelineElement, run_pipeline
from etmlir.passes.preprocess_delegates import delegate_modules, set_compile_specs
from etmlir.program import clone_module

if TYPE_CHECKING:
    from etmlir.edge_program import EdgeProgram
    from etmlir.executorch_program import ExecutorchConfig, ExecutorchProgram



def _rebuild(edge_program: "EdgeProgram", module: ir.Module) -> "EdgeProgram":
    # The same program class with the new module (its other fields are the input's).
    return type(edge_program)(module=module, example_args=edge_program.example_args,
                              dynamic_dims=list(edge_program.dynamic_dims),
                              weight_buffers=edge_program.weight_buffers)


def _lower_tagged(module: ir.Module, tags: list[str], compile_specs: Mapping[str, str],
                  bar: compile_progress.Stage) -> None:
    bar.status(f"outline {len(tags)} delegate{'s' if len(tags) != 1 else ''}")
    run_pipeline(module, [PipelineElement("et-outline-delegates")])
    for nested in delegate_modules(module.operation):
        if ir.StringAttr(nested.attributes["sym_name"]).value in tags:
            set_compile_specs(nested, compile_specs)
    bar.advance()
    bar.status("preprocess")  # et-preprocess-delegates draws a bar per delegate below this one
    run_pipeline(module, [PipelineElement("et-preprocess-delegates")])
    bar.advance()


def to_backend_partitioned(edge_program: "EdgeProgram", partitioner: Partitioner) -> "EdgeProgram":
    """Workflow 1: tag with `partitioner`, outline, and compile each group with its backend."""
    module = clone_module(edge_program.module)
    with compile_progress.stage("to_backend", total=3) as bar:  # a bar on a terminal
        bar.status(f"partition ({partitioner.backend_id})")
        result: PartitionResult = partitioner.partition(module.operation)
        bar.advance()
        _lower_tagged(module, result.tags, partitioner.compile_specs, bar)
        bar.done(f"{len(result.tags)} delegate{'s' if len(result.tags) != 1 else ''} ({partitioner.backend_id}, "
                 f"{result.delegated_ops} ops)")
    return _rebuild(edge_program, module)


def to_backend(backend_id: str, edge_program: "EdgeProgram",
               compile_specs: Mapping[str, str] | None = None) -> "LoweredBackendModule":
    """Workflow 2: lower the whole program into one delegate of `backend_id`.

    Every op goes to the backend (no partitioner asks); a backend that cannot
    compile one fails with a BackendError naming it.
    """
    lowered = lower_whole_program(backend_id, edge_program, compile_specs)
    return LoweredBackendModule(backend_id, dict(compile_specs or {}), lowered)


def lower_whole_program(backend_id: str, edge_program: "EdgeProgram",
                        compile_specs: Mapping[str, str] | None = None) -> "EdgeProgram":
    """What `to_backend` lowers: a new edge program whose forward is one delegate call of `backend_id`
    (without the LoweredBackendModule around it, so no operator is registered; `etmlir.devtools.compare`
    compiles prefixes of a delegate this way)."""
    get_backend(backend_id)  # a KeyError naming the registered backends
    if delegate_modules(edge_program.module.operation):
        raise ValueError("to_backend lowers a program without delegates as a whole; this one already "
                         "has delegate calls (lower the original edge program, or compose lowered modules)")
    module = clone_module(edge_program.module)
    tag = f"{backend_id}_{first_free_number(module.operation, backend_id)}"
    function = next(op.operation for op in module.body.operations if op.operation.name == "func.func")
    with module.context:
        for op in function.regions[0].blocks[0].operations:
            op = op.operation
            if op.name.startswith("edge.") and op.name not in FREE_OPS:
                op.attributes[attrs.DELEGATION_TAG] = ir.StringAttr.get(tag)
    with compile_progress.stage("to_backend", total=2) as bar:  # a bar on a terminal
        _lower_tagged(module, [tag], dict(compile_specs or {}), bar)
        bar.done(f"whole program ({backend_id})")
    return _rebuild(edge_program, module)


# -- composition --------------------------------------------------------------------------------

_COUNTER = itertools.count()
_LIBRARY: torch.library.Library | None = None


def _library() -> torch.library.Library:
    global _LIBRARY
    if _LIBRARY is None:
        _LIBRARY = torch.library.Library(LOWERED_NAMESPACE, "FRAGMENT")
    return _LIBRARY


class LoweredBackendModule(torch.nn.Module):
    """A program lowered as a whole to one backend: save it, run it, or call it from another model.

    `program` is the edge program whose forward function is one delegate call
    (its nested module holds the delegated ops and the payload).
    """

    def __init__(self, backend_id: str, compile_specs: dict[str, str], program: "EdgeProgram") -> None:
        super().__init__()
        self.backend_id = backend_id
        self.compile_specs = compile_specs
        self.program = program
        self._executorch: "ExecutorchProgram | None" = None
        self._method: Any = None
        self.op_name = f"m{next(_COUNTER)}"
        self._not_composable = self._composition_problem()
        if self._not_composable is None:
            add_lowered_module(self.op_name, self)
            self._register_op()

    @property
    def qualified_name(self) -> str:
        """The operator a traced call of this module records: `etmlir_lowered::m<n>`."""
        return f"{LOWERED_NAMESPACE}::{self.op_name}"

    def to_executorch(self, config: "ExecutorchConfig | None" = None) -> "ExecutorchProgram":
        """The lowered program as a `.pte` (its forward is one delegate call)."""
        return self.program.to_executorch(config)

    def forward(self, *inputs: torch.Tensor) -> Any:
        if self._not_composable is not None:
            raise ValueError(self._not_composable)
        return getattr(getattr(torch.ops, LOWERED_NAMESPACE), self.op_name)(*inputs)

    def _run(self, *inputs: torch.Tensor) -> Any:
        """Eager kernel of the operator: the lowered program on etmlir's runtime (its own `.pte`, compiled in
        this process, so loaded with `allow_native_code=True`: a "cpu" delegate's native code is the user's)."""
        if self._method is None:
            if self._executorch is None:
                self._executorch = self.to_executorch()
            # Its own .pte, compiled here: its native ("cpu") code is the user's own to run.
            self._method = runtime.load(self._executorch.buffer, allow_native_code=True).method("forward")
        outputs = self._method.call_flat(*[t.contiguous() for t in inputs])  # the operator is flat
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    def _composition_problem(self) -> str | None:
        """Why this module cannot be called from another model (None: it can)."""
        if self.program.state_names:  # the caller's program would have to keep the state
            return (f"a lowered {self.backend_id} module with program state ({', '.join(self.program.state_names)}) "
                    "is not called from another model (save it with to_executorch instead)")
        inputs, outputs = self.program.inputs, self.program.outputs
        for kind, specs in (("input", inputs), ("output", outputs)):
            for i, spec in enumerate(specs):
                if None in spec.sizes:
                    return (f"a lowered {self.backend_id} module is called from another model only with static "
                            f"shapes; its {kind} {i} has sizes {spec.sizes} (save it with to_executorch instead)")
        return None

    def _register_op(self) -> None:
        inputs, outputs = self.program.inputs, self.program.outputs
        args = ", ".join(f"Tensor a{i}" for i in range(len(inputs)))
        results = "Tensor" if len(outputs) == 1 else "(" + ", ".join("Tensor" for _ in outputs) + ")"
        library = _library()
        library.define(f"{self.op_name}({args}) -> {results}")
        library.impl(self.op_name, _eager_kernel(self.op_name), "CompositeExplicitAutograd")
        dtypes = [_torch_dtype(spec.dtype) for spec in outputs]
        shapes = [spec.sizes for spec in outputs]

        def fake(*fake_inputs: torch.Tensor) -> Any:
            made = [fake_inputs[0].new_empty(shape, dtype=dtype) if fake_inputs else torch.empty(shape, dtype=dtype)
                    for shape, dtype in zip(shapes, dtypes)]
            return made[0] if len(made) == 1 else tuple(made)

        torch.library.register_fake(f"{LOWERED_NAMESPACE}::{self.op_name}", fake, lib=library)


def _eager_kernel(op_name: str) -> Any:
    def kernel(*inputs: torch.Tensor) -> Any:
        lowered = lowered_module(f"{LOWERED_NAMESPACE}::{op_name}")
        if lowered is None:
            raise RuntimeError(f"{LOWERED_NAMESPACE}::{op_name}: its LoweredBackendModule no longer exists")
        return lowered._run(*inputs)
    return kernel


def _torch_dtype(edge_dtype: str) -> torch.dtype:
    with ir.Context():
        return torch_dtype(ir.Type.parse(f"tensor<{edge_dtype}>"))
