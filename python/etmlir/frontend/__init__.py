"""The frontend: torch.export in, ATen-level MLIR (torch-mlir's `torch` dialect) out.

`export` and `AtenProgram` are imported on first use: the passes import the
frontend's op tables (`aten_ops`, `core_aten`) without paying for torch.export.
Call `etmlir.export` (or import `export` from `etmlir.frontend.export`): once the
submodule `etmlir.frontend.export` is imported, Python makes the package attribute
`export` that module.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {"AtenProgram": "etmlir.frontend.aten_program", "DynamicDim": "etmlir.frontend.aten_program",
            "export": "etmlir.frontend.export"}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'etmlir.frontend' has no attribute '{name}'")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value
