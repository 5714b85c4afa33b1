"""The live lowered modules of this process, by the custom op name their calls trace as.

`etmlir.to_backend(...)` returns a `LoweredBackendModule` (etmlir.backends.lowering)
that a model can call; export traces the call as the custom op
`etmlir_lowered::m<n>`, and `et-link-lowered-modules` finds the module again
here to copy its compiled delegate. The table holds weak references: a
lowered module is linkable while the caller keeps it alive.
"""

from __future__ import annotations

import weakref
from typing import Any

LOWERED_NAMESPACE = "etmlir_lowered"

_LOWERED: "weakref.WeakValueDictionary[str, Any]" = weakref.WeakValueDictionary()


def add_lowered_module(op_name: str, lowered: Any) -> None:
    """Make `lowered` findable as `etmlir_lowered::<op_name>` while it is alive."""
    _LOWERED[op_name] = lowered


def lowered_module(qualified_name: str) -> Any | None:
    """The live LoweredBackendModule a traced `etmlir_lowered::m<n>` call stands for."""
    namespace, _, name = qualified_name.partition("::")
    return _LOWERED.get(name) if namespace == LOWERED_NAMESPACE else None
