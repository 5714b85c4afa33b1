"""Which edge ops the `nested` backend takes: every op with a portable kernel in this runtime.

The nested program runs on the runtime's portable kernels, so an op is
supported when its out-variant kernel is registered (when the runtime
extension is not built, when the out variant exists).
"""

from __future__ import annotations

import functools

from torch_mlir import ir

from etmlir.delegation.operator_support import OperatorSupport
from etmlir.dialects.edge import edge_op_of
from etmlir.executable.out_variants import out_variant


@functools.cache
def _runtime_kernels() -> frozenset[str] | None:
    """Kernels the runtime this process would run the program with has (None: not built)."""
    try:
        from etmlir.runtime.kernels import registered
    except ImportError:
        return None
    return frozenset(registered())


def has_portable_kernel(op: ir.Operation) -> str | None:
    """Refuse ops the runtime has no kernel for: the nested program runs on portable kernels."""
    info = edge_op_of(op)
    if info is None:
        return f"{op.name} has no portable kernel"
    variant = out_variant(info.aten)
    if variant is None:
        return f"{op.name} ({info.aten}) has no out-variant kernel"
    kernels = _runtime_kernels()
    if kernels is not None and variant.kernel not in kernels:
        return f"{op.name}: the runtime has no kernel {variant.kernel}"
    return None


NESTED_SUPPORT = OperatorSupport(predicates=(has_portable_kernel,))
