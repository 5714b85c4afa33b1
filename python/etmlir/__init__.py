"""etmlir: an ExecuTorch-style compiler and runtime for PyTorch models, built on MLIR.

    program = etmlir.export(model, (x,))          # ATen level (torch-mlir `torch` dialect)
    program.to_core_aten()                        # et-decompose-to-core-aten + et-verify-core-aten
    edge = etmlir.to_edge(program)                # Edge level (`edge` dialect on builtin tensors)
    print(edge.op_histogram())
    edge = edge.to_backend(etmlir.backends.partitioner("nested"))   # delegate what a backend takes
    et = edge.to_executorch()                     # out variants, memory plan, .pte bytes
    et.save("model.pte")

On a terminal each stage draws a progress bar on stderr; `with etmlir.progress(False):` or
`ETMLIR_PROGRESS=0` turns them off (etmlir.compile_progress).
"""

from __future__ import annotations

import importlib
from typing import Any

# Public name -> the module that defines it. Imported on first use (PEP 562), so that
# `import etmlir.passes` or `et-opt --list-passes` do not pay for torch and every backend.
_EXPORTS = {
    "AtenProgram": "etmlir.frontend.aten_program", "DynamicDim": "etmlir.frontend.aten_program",
    "export": "etmlir.frontend.export",
    "EdgeCompileConfig": "etmlir.edge_program", "EdgeProgram": "etmlir.edge_program",
    "TensorSpec": "etmlir.edge_program", "to_edge": "etmlir.edge_program",
    "ExecutorchConfig": "etmlir.executorch_program", "ExecutorchProgram": "etmlir.executorch_program",
    "serialize": "etmlir.executorch_program", "to_executorch": "etmlir.executorch_program",
    "LoweredBackendModule": "etmlir.backends.lowering", "to_backend": "etmlir.backends.lowering",
    "progress": "etmlir.compile_progress",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    # Subpackages (etmlir.backends, etmlir.runtime, ...) as attributes, as after an explicit import.
    try:
        return importlib.import_module(f"{__name__}.{name}")
    except ModuleNotFoundError as error:
        if error.name != f"{__name__}.{name}":
            raise
    raise AttributeError(f"module 'etmlir' has no attribute '{name}'")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
