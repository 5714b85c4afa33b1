"""Contexts that know every dialect etmlir works with.

One function makes every context the project uses, so a module printed by one
stage always re-parses in the next: upstream MLIR dialects (registered by the
torch-mlir wheel), torch-mlir's `torch` dialect (our ATen level) and, from
later issues, our own declared dialects (`edge`, `etx`) loaded from
`dialects/` at the repository root.
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import torch as torch_dialect  # also registers torch-mlir passes


def new_context() -> ir.Context:
    """A fresh context with the torch dialect and all upstream dialects."""
    ctx = ir.Context()
    torch_dialect.register_dialect(ctx)
    return ctx
