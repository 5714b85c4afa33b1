"""Contexts that know every dialect etmlir works with.

One function makes every context the project uses, so a module printed by one
stage always re-parses in the next: upstream MLIR dialects (registered by the
torch-mlir wheel), torch-mlir's `torch` dialect (our ATen level) and our own declared dialects
(`edge`, `etx` and `etcf`, see `control_flow`) loaded from `dialects/` at the repository
root.
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import torch as torch_dialect  # also registers torch-mlir passes


from etmlir.dialects.control_flow import load_etcf_dialect
from etmlir.dialects.edge import load_edge_dialect
from etmlir.dialects.etx import load_etx_dialect


def new_context() -> ir.Context:
    """A fresh context with the torch, edge, etx and etcf dialects and all upstream dialects."""
    ctx = ir.Context()
    torch_dialect.register_dialect(ctx)
    load_edge_dialect(ctx)
    load_etx_dialect(ctx)
    load_etcf_dialect(ctx)
    return ctx
