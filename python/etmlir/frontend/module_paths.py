"""Give every imported op the path of the nn.Module it was traced in (`layers.3.attn`).

torch.export records, on each FX node, the stack of modules whose `forward`
was running when the op was traced (`node.meta["nn_module_stack"]`, outermost
first, each entry `(path, type)`). The innermost path is the op's module path.
The importer asks its `ContextCache` for each node's location; the cache here
returns torch-mlir's location (from the node's stack trace) wrapped with the
module path (`locations.with_module_path`), so the path then travels with the
location through decomposition, to_edge, partitioning and the backends, and the
serializer writes it into the .pte's debug table next to the source line:

    %0 = torch.aten.linear %x, %w, %b : ... loc(#loc3)
    #loc3 = loc(fused<{etmlir.module_path = "layers.0.attn.q"}>[callsite("model.py":12:0 at ...)])

Nodes without a module stack (placeholders, outputs, nodes a pass created
without copying meta) keep torch-mlir's location as it is.
"""

from __future__ import annotations

from typing import Any

import torch
from torch_mlir import ir
from torch_mlir.extras.fx_importer import ContextCache, FxImporter

from etmlir.frontend.locations import with_module_path

_EMPTY_STACK_MARKER = "_empty_nn_module_stack_from_metadata_hook"  # torch/_export/passes/_node_metadata_hook.py


def node_module_path(node: torch.fx.Node) -> str | None:
    """The innermost module path of `node`'s `nn_module_stack` ("" for the root module), or None."""
    stack = node.meta.get("nn_module_stack")
    if not stack:
        return None
    entry: Any = list(stack.values())[-1]
    path = entry[0] if isinstance(entry, tuple) and entry else None
    # torch's node-metadata hook marks a node a pass made from module-less arguments this way.
    if not isinstance(path, str) or path == _EMPTY_STACK_MARKER:
        return None
    return path


class ModulePathLocations(ContextCache):
    """torch-mlir's ContextCache whose node locations also carry the node's module path."""

    __slots__ = ()

    def get_node_location(self, node: torch.fx.Node) -> ir.Location | None:
        location = super().get_node_location(node)
        path = node_module_path(node)
        if path is None:
            return location
        return with_module_path(location if location is not None else ir.Location.unknown(self._c), path)


def record_module_paths(importer: FxImporter) -> None:
    """Make `importer` (freshly constructed, nothing imported yet) tag locations with module paths."""
    importer._cc = ModulePathLocations(importer._c, py_attr_tracker=importer._py_attr_tracker)
