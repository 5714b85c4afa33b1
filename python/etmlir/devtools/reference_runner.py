"""Run a torch-dialect module on the CPU through torch-mlir's linalg lowering and MLIR's JIT.

This is the honest evaluator tests use to check a module (for example the
output of `et-decompose-to-core-aten`) against PyTorch eager: it shares no
code with PyTorch's kernels. The module is cloned, lowered

    torch (ATen / Core ATen)
        -> PyTorch's reference decompositions for the few core ops torch-mlir cannot lower
        -> torch backend contract -> linalg on tensors
        -> one-shot bufferization -> loops -> LLVM -> ExecutionEngine

and called through the C interface. The function returns its single result
as a memref the callee allocates, so output shapes come from the compiled
code, never from the caller's expectations. Loops are naive: this is for
correctness, not speed.
"""

from __future__ import annotations

import ctypes

import numpy as np
from torch_mlir import ir
from torch_mlir.execution_engine import ExecutionEngine
from torch_mlir.passmanager import PassManager
from torch_mlir.runtime.np_to_memref import (
    get_ranked_memref_descriptor, make_nd_memref_descriptor, ranked_memref_to_numpy)

from etmlir.passes.pipeline import run_pipeline
from etmlir.program import clone_module, find_function

_TO_LLVM = (
    "builtin.module(one-shot-bufferize{bufferize-function-boundaries=1 "
    "function-boundary-type-conversion=identity-layout-map},"
    "canonicalize,cse,func.func(refback-munge-memref-copy),"
    "func.func(convert-linalg-to-loops,refback-expand-ops-for-llvm),"
    "expand-strided-metadata,lower-affine,convert-scf-to-cf,convert-vector-to-llvm,"
    "finalize-memref-to-llvm,convert-math-to-llvm,convert-arith-to-llvm,convert-index-to-llvm,"
    "convert-cf-to-llvm,convert-func-to-llvm,convert-ub-to-llvm,reconcile-unrealized-casts)"
)

# Result element type -> the ctype of its memref descriptor.
_RESULT_CTYPES = {"f32": ctypes.c_float, "f64": ctypes.c_double, "i64": ctypes.c_int64,
                  "i32": ctypes.c_int32, "i1": ctypes.c_bool}


class ReferenceRunner:
    """A compiled torch-dialect function, callable on numpy arrays."""

    def __init__(self, module: ir.Module, func_name: str = "main", opt_level: int = 2) -> None:
        with module.context:
            clone = clone_module(module)
            run_pipeline(clone, "builtin.module(et-torch-to-linalg)")
            func = find_function(clone, func_name)
            if func is None:
                raise ValueError(f"no function @{func_name} in the module")
            result_types = ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value).results
            if len(result_types) != 1:
                raise ValueError(f"@{func_name} returns {len(result_types)} values; the runner supports one")
            result_type = ir.RankedTensorType(result_types[0])
            element = str(result_type.element_type)
            if element not in _RESULT_CTYPES:
                raise ValueError(f"the reference runner does not return {element} results")
            self._result_rank = result_type.rank
            self._result_ctype = _RESULT_CTYPES[element]
            func.attributes["llvm.emit_c_interface"] = ir.UnitAttr.get()
            PassManager.parse(_TO_LLVM).run(clone.operation)
            self._engine = ExecutionEngine(clone, opt_level=opt_level)
            self._module = clone  # the engine's code references the module's constants
        self._name = func_name

    def __call__(self, *inputs: np.ndarray) -> np.ndarray:
        arrays = [np.ascontiguousarray(a) for a in inputs]
        result = make_nd_memref_descriptor(self._result_rank, self._result_ctype)()
        args = [ctypes.pointer(ctypes.pointer(result))]
        args += [ctypes.pointer(ctypes.pointer(get_ranked_memref_descriptor(a))) for a in arrays]
        self._engine.invoke(self._name, *args)
        # Copy out: the result buffer belongs to the compiled code and is never freed or reused.
        return np.array(ranked_memref_to_numpy([result]), copy=True)
